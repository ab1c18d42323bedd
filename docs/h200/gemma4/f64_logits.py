#!/usr/bin/env python3
"""Float64 logits of a transformers fixture's prompt (issue 19): how far
transformers' own float32 reference (logits.bin) is from the same model in
float64, to tell a rounding difference between Hearth and transformers from
a modelling one. transformers keeps RMSNorm and the RoPE angles in float32
whatever the model's dtype, so this is float64 matmuls and attention.

Usage: python3 f64_logits.py FIXTURE_DIR OUT_DIR
writes OUT_DIR/logits64.bin (little-endian float64, positions x vocab).
"""
import json
import os
import sys

import torch
from transformers import AutoModelForCausalLM

fixture, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
e = json.load(open(os.path.join(fixture, "expected.json")))
ids = torch.tensor([e["prompt_ids"]])
logits = {}
for dtype in (torch.float64, torch.float32):
    m = AutoModelForCausalLM.from_pretrained(fixture, dtype=dtype, attn_implementation="eager").eval()
    with torch.no_grad():
        logits[dtype] = m(ids).logits[0].double()
l64 = logits[torch.float64]
l64.numpy().astype("<f8").tofile(os.path.join(out, "logits64.bin"))
rng = float(l64.max() - l64.min())
d = float((logits[torch.float32] - l64).abs().max())
print(f"float32 vs float64: max |diff| {d:.3g}, {d / rng:.3g} of the range {rng:.4g}")
