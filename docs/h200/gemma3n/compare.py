#!/usr/bin/env python3
"""Compare Hearth's logits (hearth logits JSON, GPU and CPU) with the
peer's (anchor logits, raw little-endian f32 rows) for one token list:
the largest difference per position as a fraction of that position's
logit range, and whether the argmax agrees. Prints one JSON object.

Usage: compare.py PEER.f32 HEARTH_GPU.json HEARTH_CPU.json"""
import json
import sys

import numpy as np


def main(peer_path, *hearth_paths):
    out = {}
    rows = {}
    for p in hearth_paths:
        with open(p) as f:
            rep = json.load(f)
        rows[p] = np.array(rep["logits"], dtype=np.float64)
    v = next(iter(rows.values())).shape[1]
    peer = np.fromfile(peer_path, dtype="<f4").astype(np.float64).reshape(-1, v)
    for p, h in rows.items():
        n = min(len(h), len(peer))
        rng = peer[:n].max(axis=1) - peer[:n].min(axis=1)
        rel = np.abs(h[:n] - peer[:n]).max(axis=1) / rng
        out[p] = {
            "positions": n,
            "max_rel_diff": float(rel.max()),
            "median_rel_diff": float(np.median(rel)),
            "argmax_agree": int((h[:n].argmax(axis=1) == peer[:n].argmax(axis=1)).sum()),
            "top5_overlap_mean": float(np.mean([len(set(np.argsort(-h[i])[:5]) & set(np.argsort(-peer[i])[:5])) for i in range(n)])),
            "rel_diff_by_position": [round(float(x), 5) for x in rel],
        }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main(*sys.argv[1:])
