#!/usr/bin/env python3
"""PEFT reference fixtures for engine/adapter: peft's own save_pretrained
output of a LoRA adapter on each tiny base model of
engine/model/testdata/hf (made by that folder's make_fixtures.py), and
transformers' float32 logits of the base's prompt with the adapter applied.

For each family it loads the base folder in float32 with eager attention,
wraps it with peft's get_peft_model(LoraConfig(r=4, lora_alpha=8, every
attention and MLP projection: q/k/v/o_proj, gate/up/down_proj, or Phi-3's
qkv_proj, o_proj, gate_up_proj, down_proj)), and overwrites every lora_A
with N(0, 1/in) and every lora_B with N(0, 1/r) from a fixed seed, so that
B.A.x is about as large as W.x and the adapter moves the logits by a good
part of their range. It saves the adapter with save_pretrained (float32
safetensors and adapter_config.json, peft's own names and layout) and
writes the logits of every prompt position with the adapter (logits.bin),
then after merge_and_unload (merged_logits.bin), and the base's logits
with the adapter disabled, to report how far the adapter moves them.

Sanity checks that fail the family loudly: a fresh base with the saved
adapter loaded by PeftModel.from_pretrained gives the same logits; the
merged model agrees with the adapter to 1e-4 of the logit range; the
adapter moves the logits by at least 5% of their range.

The Go side (TestMatchesPEFT) imports the base with hearth's importer,
reads the folder with ReadPEFT (mapping the names, permuting Llama's q/k
lora_B rows as llama.cpp's converter does), and compares both runners and
a merge with these logits; it also writes the adapter back with WritePEFT
and checks every tensor against peft's file.

Written for transformers 5.x, peft 0.17+ and torch 2.x.

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

import peft
import torch
import transformers
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoModelForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
BASES = os.path.normpath(os.path.join(HERE, "..", "..", "..", "..", "engine", "model", "testdata", "hf"))
RANK, ALPHA, SEED = 4, 8, 8000


def targets(family):
    if family == "phi3":
        return ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"]
    return ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def load(path):
    try:
        m = AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager", dtype=torch.float32)
    except TypeError:
        m = AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager", torch_dtype=torch.float32)
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
    cfg = LoraConfig(r=RANK, lora_alpha=ALPHA, target_modules=targets(family), lora_dropout=0.0,
                     bias="none", task_type="CAUSAL_LM", init_lora_weights=False)
    pm = get_peft_model(model, cfg).eval()
    g = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for name, p in sorted(pm.named_parameters()):
            if ".lora_A." in name:  # [r, in]
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[1]))
            elif ".lora_B." in name:  # [out, r]
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[1]))
    logits = logits_of(pm, ids)
    with pm.disable_adapter():
        base_logits = logits_of(pm, ids)
    moved = rel(logits, base_logits)
    os.makedirs(outdir, exist_ok=True)
    pm.save_pretrained(outdir)

    reloaded = PeftModel.from_pretrained(load(base), outdir).eval()
    reload_diff = rel(logits_of(reloaded, ids), logits)
    merged = pm.merge_and_unload()
    merged_logits = logits_of(merged, ids)
    merge_diff = rel(merged_logits, logits)

    write_f32(os.path.join(outdir, "logits.bin"), logits)
    write_f32(os.path.join(outdir, "merged_logits.bin"), merged_logits)
    expected = {
        "family": family,
        "prompt_ids": ids,
        "logits_shape": list(logits.shape),
        "rank": RANK,
        "alpha": ALPHA,
        "moved": moved,
        "reload_diff": reload_diff,
        "merge_diff": merge_diff,
        "peft_version": peft.__version__,
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
    }
    with open(os.path.join(outdir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
    print(f"{family:8s} moved={moved:.3f} reload_diff={reload_diff:.3g} merge_diff={merge_diff:.3g}")
    if reload_diff != 0 or merge_diff > 1e-4 or moved < 0.05:
        raise RuntimeError(f"{family}: sanity check failed")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else HERE
    fams = sys.argv[2:] or sorted(d for d in os.listdir(BASES) if os.path.isfile(os.path.join(BASES, d, "expected.json")))
    print(f"peft {peft.__version__}, transformers {transformers.__version__}, torch {torch.__version__}")
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
