"""Plot a `hearth train --json` log: the training loss of every step and the
validation losses, as docs/fine-tuning.md shows them.

    python3 loss_curve.py train.jsonl loss-curve.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

train, valid = [], []
with open(sys.argv[1]) as f:
    for line in f:
        r = json.loads(line)
        if r.get("phase") == "train":
            train.append((r["step"], r["loss"]))
        elif r.get("phase") == "valid":
            valid.append((r["step"], r["valid_loss"]))
fig, ax = plt.subplots(figsize=(7, 3.6), dpi=110)
ax.plot(*zip(*train), label="training loss (each step)", color="#c0504d", linewidth=1.5)
if valid:
    ax.plot(*zip(*valid), "o-", label="validation loss", color="#4f81bd", markersize=4)
ax.set_xlabel("optimizer step")
ax.set_ylabel("cross-entropy (nats)")
ax.set_title("LoRA on a Q4_K qwen2.5-0.5b-shaped model, answer-format.jsonl")
ax.grid(alpha=0.3)
ax.legend()
fig.tight_layout()
fig.savefig(sys.argv[2])
print("wrote", sys.argv[2], len(train), "steps,", len(valid), "validations")
