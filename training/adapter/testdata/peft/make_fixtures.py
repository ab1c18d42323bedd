#!/usr/bin/env python3
"""PEFT-layout LoRA fixtures for training/adapter, with transformers' float32
logits of each tiny base model of engine/model/testdata/hf (made by that
folder's make_fixtures.py) with the adapter applied.

The oracle machine has torch and transformers but not the peft package, and
nothing can be installed there, so this script does by hand the two things
of peft's that the Go side depends on, each small and documented by peft:

- the file layout of PeftModel.save_pretrained for a LoRA adapter:
  adapter_model.safetensors with, for every targeted nn.Linear named
  MODULE in the transformers model, "base_model.model.MODULE.lora_A.weight"
  of shape [r, in_features] and "base_model.model.MODULE.lora_B.weight" of
  shape [out_features, r], float32; and adapter_config.json with peft_type
  LORA, r, lora_alpha, target_modules, lora_dropout, bias "none",
  task_type CAUSAL_LM (peft/utils/save_and_load.py get_peft_model_state_dict
  removes the adapter name "default" from the keys);
- the LoRA forward of peft/tuners/lora/layer.py Linear.forward:
  result = base_layer(x) + lora_B(lora_A(dropout(x))) * scaling, with
  scaling = lora_alpha / r and dropout 0; applied here as a forward hook on
  each targeted module.

The logits are transformers' own forward of the base (float32, eager
attention, on the CPU) with those hooks: every position of the base
fixture's prompt (logits.bin); then with the adapter merged into the
weights, W + scaling * B @ A (merged_logits.bin), as peft's merge_and_unload
does. A is N(0, 1/in) and B is N(0, 1/r) from a fixed seed, so B.A.x is
about as large as W.x and the adapter moves the logits by a good part of
their range.

Sanity checks that fail the family loudly: the merged model agrees with
the hooked one to 1e-4 of the logit range; the adapter moves the logits by
at least 5% of their range; every target module was hooked exactly once a
layer.

The Go side (TestMatchesPEFT) imports the base with hearth's importer,
reads the folder with ReadPEFT (mapping the names, permuting Llama's q/k
lora_B rows as llama.cpp's converter does), and compares both runners and
a merge with these logits; it also writes the adapter back with WritePEFT
and checks every tensor against the file here.

Written for transformers 5.x and torch 2.x.

Usage: python3 make_fixtures.py [OUTDIR [FAMILY...]]
OUTDIR defaults to this script's folder; writes OUTDIR/FAMILY/
{adapter_config.json, adapter_model.safetensors, expected.json, logits.bin,
merged_logits.bin}; the .bin files are little-endian float32, positions x
vocab, row major.
"""
import json
import math
import os
import struct
import sys
import traceback

import torch
import transformers
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
BASES = os.path.normpath(os.path.join(HERE, "..", "..", "..", "..", "engine", "model", "testdata", "hf"))
RANK, ALPHA, SEED = 4, 8, 8000


def targets(family):
    if family == "phi3":
        return ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"]
    return ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def load(path):
    m = AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager", dtype=torch.float32)
    return m.float().eval()


@torch.no_grad()
def logits_of(model, ids):
    return model(input_ids=torch.tensor([ids], dtype=torch.long), use_cache=False).logits[0].float()


def rel(a, b):
    return float((a - b).abs().max() / (b.max() - b.min()))


def write_f32(path, t):
    with open(path, "wb") as f:
        f.write(struct.pack(f"<{t.numel()}f", *t.reshape(-1).tolist()))


def make(family, outdir):
    base = os.path.join(BASES, family)
    with open(os.path.join(base, "expected.json")) as f:
        ids = json.load(f)["prompt_ids"]
    model = load(base)
    scaling = ALPHA / RANK
    names = targets(family)
    g = torch.Generator().manual_seed(SEED)
    lora = {}  # module name -> (A [r, in], B [out, r])
    for name, mod in sorted(model.named_modules()):
        if isinstance(mod, torch.nn.Linear) and name.split(".")[-1] in names:
            a = torch.randn((RANK, mod.in_features), generator=g) / math.sqrt(mod.in_features)
            b = torch.randn((mod.out_features, RANK), generator=g) / math.sqrt(RANK)
            lora[name] = (a, b)
    layers = model.config.num_hidden_layers
    if len(lora) != layers * len(names):
        raise RuntimeError(f"{family}: {len(lora)} target modules, want {layers} layers x {len(names)}")

    base_logits = logits_of(model, ids)
    hooks = []
    for name, mod in model.named_modules():
        if name in lora:
            a, b = lora[name]
            hooks.append(mod.register_forward_hook(
                lambda m, inp, out, a=a, b=b: out + (inp[0] @ a.T) @ b.T * scaling))
    logits = logits_of(model, ids)
    for h in hooks:
        h.remove()
    moved = rel(logits, base_logits)

    with torch.no_grad():
        for name, mod in model.named_modules():
            if name in lora:
                a, b = lora[name]
                mod.weight += scaling * (b @ a)
    merged_logits = logits_of(model, ids)
    merge_diff = rel(merged_logits, logits)

    os.makedirs(outdir, exist_ok=True)
    tensors = {}
    for name, (a, b) in lora.items():
        tensors[f"base_model.model.{name}.lora_A.weight"] = a.contiguous()
        tensors[f"base_model.model.{name}.lora_B.weight"] = b.contiguous()
    save_file(tensors, os.path.join(outdir, "adapter_model.safetensors"), metadata={"format": "pt"})
    config = {
        "peft_type": "LORA", "task_type": "CAUSAL_LM", "r": RANK, "lora_alpha": ALPHA,
        "lora_dropout": 0.0, "bias": "none", "target_modules": names, "fan_in_fan_out": False,
        "use_rslora": False, "use_dora": False, "inference_mode": True,
        "base_model_name_or_path": f"engine/model/testdata/hf/{family}",
    }
    with open(os.path.join(outdir, "adapter_config.json"), "w") as f:
        json.dump(config, f, indent=1)
    write_f32(os.path.join(outdir, "logits.bin"), logits)
    write_f32(os.path.join(outdir, "merged_logits.bin"), merged_logits)
    expected = {
        "family": family,
        "prompt_ids": ids,
        "logits_shape": list(logits.shape),
        "rank": RANK,
        "alpha": ALPHA,
        "moved": moved,
        "merge_diff": merge_diff,
        "oracle": "transformers forward with peft's LoRA Linear forward as hooks (peft not installed)",
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
    }
    with open(os.path.join(outdir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
    print(f"{family:8s} moved={moved:.3f} merge_diff={merge_diff:.3g}")
    if merge_diff > 1e-4 or moved < 0.05:
        raise RuntimeError(f"{family}: sanity check failed")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else HERE
    fams = sys.argv[2:] or sorted(d for d in os.listdir(BASES) if os.path.isfile(os.path.join(BASES, d, "expected.json")))
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    failed = False
    for fam in fams:
        try:
            make(fam, os.path.join(out, fam))
        except Exception:
            traceback.print_exc()
            failed = True
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
