#!/usr/bin/env python3
"""Compare logits of a transformers fixture's prompt (engine/model/testdata/hf/FAMILY:
expected.json's prompt_ids, logits.bin) with the peer's (anchor logits,
raw little-endian f32 rows) and Hearth's (hearth logits JSON) of the
fixture imported by hearth import: per position, the largest difference
as a fraction of transformers' logit range, and whether the argmax
agrees. Prints one JSON object.

Usage: fixture_peer.py FIXTURE_DIR PEER.f32 [HEARTH.json]"""
import json
import os
import sys

import numpy as np


def rows_vs(ref, got):
    n = min(len(ref), len(got))
    rng = ref[:n].max(axis=1) - ref[:n].min(axis=1)
    rel = np.abs(got[:n] - ref[:n]).max(axis=1) / rng
    return {
        "positions": n,
        "max_rel_diff": float(rel.max()),
        "median_rel_diff": float(np.median(rel)),
        "argmax_agree": int((got[:n].argmax(axis=1) == ref[:n].argmax(axis=1)).sum()),
        "rel_diff_by_position": [round(float(x), 7) for x in rel],
    }


def main(fixture, peer_path, hearth_path=None):
    with open(os.path.join(fixture, "expected.json")) as f:
        e = json.load(f)
    n, v = e["logits_shape"]
    ref = np.fromfile(os.path.join(fixture, "logits.bin"), dtype="<f4").astype(np.float64).reshape(n, v)
    out = {"family": e["family"], "peer_vs_transformers": rows_vs(ref, np.fromfile(peer_path, dtype="<f4").astype(np.float64).reshape(-1, v))}
    if hearth_path:
        with open(hearth_path) as f:
            out["hearth_vs_transformers"] = rows_vs(ref, np.array(json.load(f)["logits"], dtype=np.float64))
    print(json.dumps(out))


if __name__ == "__main__":
    main(*sys.argv[1:])
