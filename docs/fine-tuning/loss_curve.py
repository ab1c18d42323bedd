"""Draw a `hearth train --json` log as an SVG: the training loss of every
step, and the validation losses, as docs/fine-tuning.md shows them. Only the
standard library, so it runs wherever the log is.

    python3 loss_curve.py train.jsonl loss-curve.svg "title"
"""
import json
import math
import sys

train, valid = [], []
with open(sys.argv[1]) as f:
    for line in f:
        r = json.loads(line)
        if r.get("phase") == "train":
            train.append((r["step"], r["loss"]))
        elif r.get("phase") == "valid":
            valid.append((r["step"], r["valid_loss"]))
title = sys.argv[3] if len(sys.argv) > 3 else "LoRA fine-tuning"

W, H, L, R, T, B = 720, 360, 60, 20, 40, 50
steps = [s for s, _ in train + valid]
losses = [l for _, l in train + valid]
x0, x1 = 0, max(steps)
y0, y1 = 0, math.ceil(max(losses))


def px(s):
    return L + (s - x0) / (x1 - x0) * (W - L - R)


def py(l):
    return H - B - (l - y0) / (y1 - y0) * (H - T - B)


out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
       f'<rect width="{W}" height="{H}" fill="white"/>',
       f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="14">{title}</text>']
for i in range(y1 + 1):
    y = py(i)
    out.append(f'<line x1="{L}" y1="{y:.1f}" x2="{W - R}" y2="{y:.1f}" stroke="#ddd"/>')
    out.append(f'<text x="{L - 8}" y="{y + 4:.1f}" text-anchor="end">{i}</text>')
tick = max(1, round(x1 / 8))
for s in range(0, x1 + 1, tick):
    out.append(f'<text x="{px(s):.1f}" y="{H - B + 18}" text-anchor="middle">{s}</text>')
out.append(f'<text x="{(L + W - R) / 2}" y="{H - 12}" text-anchor="middle">optimizer step</text>')
out.append(f'<text x="16" y="{(T + H - B) / 2}" text-anchor="middle" transform="rotate(-90 16 {(T + H - B) / 2})">'
           'cross-entropy (nats)</text>')
pts = " ".join(f"{px(s):.1f},{py(l):.1f}" for s, l in train)
out.append(f'<polyline points="{pts}" fill="none" stroke="#c0504d" stroke-width="1.8"/>')
if valid:
    pts = " ".join(f"{px(s):.1f},{py(l):.1f}" for s, l in valid)
    out.append(f'<polyline points="{pts}" fill="none" stroke="#4f81bd" stroke-width="1.5"/>')
    for s, l in valid:
        out.append(f'<circle cx="{px(s):.1f}" cy="{py(l):.1f}" r="3" fill="#4f81bd"/>')
out.append(f'<line x1="{W - 210}" y1="{T + 8}" x2="{W - 185}" y2="{T + 8}" stroke="#c0504d" stroke-width="2"/>'
           f'<text x="{W - 180}" y="{T + 12}">training loss (each step)</text>')
out.append(f'<line x1="{W - 210}" y1="{T + 26}" x2="{W - 185}" y2="{T + 26}" stroke="#4f81bd" stroke-width="2"/>'
           f'<text x="{W - 180}" y="{T + 30}">validation loss</text>')
out.append("</svg>")
with open(sys.argv[2], "w") as f:
    f.write("\n".join(out) + "\n")
print("wrote", sys.argv[2], len(train), "steps,", len(valid), "validations")
