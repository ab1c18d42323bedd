#!/usr/bin/env python3
"""PyTorch + peft fixtures for training's LoRA step: for each tiny base of
engine/model/testdata/hf (made by that folder's make_fixtures.py), one fixed
batch with masked prompts, an adapter on every projection, and what PyTorch
computes for it: the loss, the gradient of every LoRA A and B, the global
gradient norm, and the adapter after two AdamW steps with clipping.

The LoRA is peft's own (get_peft_model with a LoraConfig: r 4, alpha 8,
dropout 0, every attention and feed-forward projection, Phi-3's fused
qkv_proj and gate_up_proj whole) when the peft package is importable;
otherwise its Linear forward, result = base_layer(x) + lora_B(lora_A(x)) *
lora_alpha / r (peft/tuners/lora/layer.py), is applied by forward hooks,
and expected.json says which ran. A is peft's init, kaiming_uniform_ with
a = sqrt(5) (U(-1/sqrt(in), 1/sqrt(in))), drawn here from a fixed seed; B
is not peft's zeros but N(0, 0.05^2), so that the gradient of A is not zero.

The batch: two rows of 24 tokens of the base fixture's prompt ids (rows
start at 0 and 12), each position predicting the next id, the first 6 and
10 targets masked (-100 in torch, -1 in the fixture). Longer than every
sliding window of the bases (8 and 16). The loss is the mean cross-entropy
over the unmasked targets of the whole batch (sum / count), from
transformers' own logits (float32, eager attention, on the CPU, Gemma 2's
final soft-cap inside the model).

The optimizer: torch.optim.AdamW(lr 1e-3, betas (0.9, 0.999), eps 1e-6,
weight_decay 0.01) over the A and B tensors; each of two steps is
zero_grad, the loss's backward on the same batch,
torch.nn.utils.clip_grad_norm_(max_norm 0.5), step. eps is 1e-6, not the
default 1e-8, because Adam's first update is lr * g / (|g| + eps): with eps
far below the smallest gradients it is lr * sign(g), which flips for a
gradient within rounding of zero; 1e-6 keeps the update a smooth function
of g for the tiniest entries and changes nothing for the others.

Writes, per family, OUTDIR/FAMILY/:
  expected.json  the batch, hyper-parameters, losses and norms
  adapter/       the initial adapter, PEFT layout (adapter_config.json,
                 adapter_model.safetensors with base_model.model.MODULE.
                 lora_A.weight [r, in] and .lora_B.weight [out, r], f32)
  grads/         the gradient of the mean loss at the initial adapter, in
                 the same layout (lora_A.weight holds dA, lora_B.weight dB),
                 so that one reader maps names and permutes Llama's q/k rows
                 for both
  stepped/       the adapter after the two steps

Written for transformers 5.x, torch 2.x and peft 0.x.

Usage: python3 make_fixtures.py [OUTDIR [FAMILY...]]
       python3 make_fixtures.py --base DIR NAME [OUTDIR]
OUTDIR defaults to this script's folder. The second form trains on the
model folder DIR instead of a base of engine/model/testdata/hf and writes
OUTDIR/NAME (OUTDIR defaults to this script's quant/): the quantized bases,
whose blocks training/peft_quant_test.go dequantizes into an f32 folder
(config, tokenizer, model.safetensors, expected.json with prompt_ids), so
that PyTorch computes on exactly the weights the step reads. The LoRA
targets follow DIR's config.json model_type; expected.json also names the
base ("base": NAME), and the adapters' base_model_name_or_path is NAME.
"""
import json
import math
import os
import sys
import traceback

import torch
import transformers
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM

try:
    import peft
except ImportError:
    peft = None

HERE = os.path.dirname(os.path.abspath(__file__))
BASES = os.path.normpath(os.path.join(HERE, "..", "..", "..", "engine", "model", "testdata", "hf"))
RANK, ALPHA, SEED = 4, 8, 9000
T, STARTS, MASKED = 24, (0, 12), (6, 10)
LR, BETAS, EPS, WD, MAX_NORM = 1e-3, (0.9, 0.999), 1e-6, 0.01, 0.5


def targets(family):
    if family == "phi3":
        return ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"]
    return ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def batch(ids):
    tokens, labels = [], []
    for start, masked in zip(STARTS, MASKED):
        if start + T + 1 > len(ids):
            raise RuntimeError(f"prompt of {len(ids)} ids is too short for a row at {start}")
        tokens.append(ids[start:start + T])
        row = ids[start + 1:start + T + 1]
        labels.append([-100] * masked + row[masked:])
    return tokens, labels


class Hooked:
    """peft's LoRA Linear forward as hooks, for a machine without peft."""

    def __init__(self, model, names):
        self.model, self.pairs = model, {}
        for p in model.parameters():
            p.requires_grad_(False)
        for name, mod in sorted(model.named_modules()):
            if isinstance(mod, torch.nn.Linear) and name.split(".")[-1] in names:
                a = torch.zeros((RANK, mod.in_features), requires_grad=True)
                b = torch.zeros((mod.out_features, RANK), requires_grad=True)
                self.pairs[name] = (a, b)
                mod.register_forward_hook(
                    lambda m, inp, out, a=a, b=b: out + (inp[0] @ a.T) @ b.T * (ALPHA / RANK))

    def logits(self, tokens):
        return self.model(input_ids=tokens, use_cache=False).logits


class Peft:
    """peft's own LoRA."""

    def __init__(self, model, names):
        cfg = peft.LoraConfig(r=RANK, lora_alpha=ALPHA, lora_dropout=0.0, target_modules=names, bias="none",
                              task_type="CAUSAL_LM")
        self.model = peft.get_peft_model(model, cfg)
        self.pairs = {}
        prefix = "base_model.model."
        for name, mod in sorted(self.model.named_modules()):
            if hasattr(mod, "lora_A") and "default" in getattr(mod, "lora_A", {}):
                self.pairs[name[len(prefix):]] = (mod.lora_A["default"].weight, mod.lora_B["default"].weight)

    def logits(self, tokens):
        return self.model(input_ids=tokens, use_cache=False).logits


def save(dir, base_name, names, tensors):
    os.makedirs(dir, exist_ok=True)
    out = {}
    for name, (a, b) in tensors.items():
        out[f"base_model.model.{name}.lora_A.weight"] = a.detach().float().contiguous().clone()
        out[f"base_model.model.{name}.lora_B.weight"] = b.detach().float().contiguous().clone()
    save_file(out, os.path.join(dir, "adapter_model.safetensors"), metadata={"format": "pt"})
    config = {
        "peft_type": "LORA", "task_type": "CAUSAL_LM", "r": RANK, "lora_alpha": ALPHA,
        "lora_dropout": 0.0, "bias": "none", "target_modules": names, "fan_in_fan_out": False,
        "use_rslora": False, "use_dora": False, "inference_mode": False,
        "base_model_name_or_path": base_name,
    }
    with open(os.path.join(dir, "adapter_config.json"), "w") as f:
        json.dump(config, f, indent=1)


def make(family, outdir, base=None):
    """family names the output; base is the model folder, by default the
    family's in engine/model/testdata/hf."""
    base_name = f"engine/model/testdata/hf/{family}"
    kind = family
    if base is not None:
        base_name = family
        with open(os.path.join(base, "config.json")) as f:
            kind = json.load(f)["model_type"]
    else:
        base = os.path.join(BASES, family)
    with open(os.path.join(base, "expected.json")) as f:
        ids = json.load(f)["prompt_ids"]
    model = AutoModelForCausalLM.from_pretrained(base, attn_implementation="eager", dtype=torch.float32)
    model = model.float().eval()  # eval: no dropout anywhere
    names = targets(kind)
    lora = Peft(model, names) if peft is not None else Hooked(model, names)
    layers = model.config.num_hidden_layers
    if len(lora.pairs) != layers * len(names):
        raise RuntimeError(f"{family}: {len(lora.pairs)} LoRA modules, want {layers} layers x {len(names)}")

    g = torch.Generator().manual_seed(SEED)
    params = []
    with torch.no_grad():
        for name in sorted(lora.pairs):
            a, b = lora.pairs[name]
            bound = 1 / math.sqrt(a.shape[1])
            a.copy_((torch.rand(a.shape, generator=g, dtype=torch.float64) * 2 - 1) * bound)
            b.copy_(torch.randn(b.shape, generator=g, dtype=torch.float64) * 0.05)
            params += [a, b]
    save(os.path.join(outdir, "adapter"), base_name, names, lora.pairs)

    tokens, labels = batch(ids)
    tok = torch.tensor(tokens, dtype=torch.long)
    lab = torch.tensor(labels, dtype=torch.long)
    count = int((lab != -100).sum())

    def loss_fn():
        logits = lora.logits(tok).float()
        total = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), lab.reshape(-1),
                                                  ignore_index=-100, reduction="sum")
        return total / count

    opt = torch.optim.AdamW(params, lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)
    losses, norms = [], []
    for step in range(2):
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        if step == 0:
            save(os.path.join(outdir, "grads"), base_name, names, {n: (a.grad, b.grad) for n, (a, b) in lora.pairs.items()})
        norms.append(float(torch.nn.utils.clip_grad_norm_(params, MAX_NORM)))
        losses.append(float(loss))
        opt.step()
    save(os.path.join(outdir, "stepped"), base_name, names, lora.pairs)
    with torch.no_grad():
        losses.append(float(loss_fn()))

    expected = {
        "family": family,
        "tokens": tokens,
        "targets": [[t if t != -100 else -1 for t in row] for row in labels],
        "count": count,
        "rank": RANK, "alpha": ALPHA,
        "lr": LR, "betas": list(BETAS), "eps": EPS, "weight_decay": WD, "max_grad_norm": MAX_NORM,
        "losses": losses,
        "grad_norms": norms,
        "oracle": f"peft {peft.__version__}" if peft is not None else "peft's LoRA Linear forward as hooks (peft not installed)",
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
    }
    if base_name == family:
        expected["base"] = family
    with open(os.path.join(outdir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
    print(f"{family:8s} loss {losses[0]:.6f} -> {losses[1]:.6f} -> {losses[2]:.6f}  grad norms {norms[0]:.4f} {norms[1]:.4f}  count {count}")
    if not (losses[2] < losses[0]):
        raise RuntimeError(f"{family}: two steps did not lower the loss")


def main():
    args = sys.argv[1:]
    base = None
    if args[:1] == ["--base"]:
        if len(args) not in (3, 4):
            sys.exit("usage: make_fixtures.py --base DIR NAME [OUTDIR]")
        base, fams = args[1], [args[2]]
        out = args[3] if len(args) == 4 else os.path.join(HERE, "quant")
    else:
        out = args[0] if args else HERE
        fams = args[1:] or sorted(d for d in os.listdir(BASES) if os.path.isfile(os.path.join(BASES, d, "expected.json")))
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, peft {peft.__version__ if peft else 'missing'}")
    torch.manual_seed(0)
    failed = False
    for fam in fams:
        try:
            make(fam, os.path.join(out, fam), base)
        except Exception:
            traceback.print_exc()
            failed = True
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
