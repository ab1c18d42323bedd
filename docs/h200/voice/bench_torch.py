#!/usr/bin/env python3
"""Real-time factor of the reference Kokoro-82M (hexgrad's KModel) on CUDA.

The model is KModel with Kokoro-82M's own config and the random weights of
vocoder/kokoro/testdata/make_forward_fixture.py's recipe (imported from there),
except the duration head's bias, which is calibrated here so the utterances
last about as long per phoneme as real speech (RATE frames a token: 3
frames of 25 ms). The recipe goes to OUTDIR/voice_recipe.json for
vocoder/kokoro's BenchmarkGPUForward (HEARTH_VOICE_RECIPE), so both sides run the
same weights on the same tokens and make the same number of frames.

Inputs are three utterances cut from vocoder/phonemes/testdata/phonemes/en-us.tsv
(the reference phonemes): one sentence, four, and as many as fit the 510
symbols of one forward pass. Each is timed as KPipeline runs it
(forward_with_tokens under torch.no_grad, fp32, torch's default cuDNN
settings), after warm-up, to the end of a CUDA synchronize.

Usage: PYTHONPATH=.oracle/kokoro python3 docs/h200/voice/bench_torch.py OUTDIR
"""
import json
import os
import statistics
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
OUT = sys.argv[1]
sys.path.insert(0, os.path.join(ROOT, "vocoder", "kokoro", "testdata"))
sys.argv = [sys.argv[0], OUT]  # make_forward_fixture reads its OUTDIR from argv
import make_forward_fixture as fx  # noqa: E402

# The af_heart pack (shared/testdata/kokoro/voices/af_heart.bin; KPipeline's
# row len(phonemes) - 1 is the style).
VOICE = os.environ.get("HEARTH_VOICE", os.path.join(ROOT, "..", "shared", "testdata", "kokoro", "voices", "af_heart.bin"))
RATE = 3.0

# kokoro's text encoders hand pack_padded_sequence their input_lengths on
# the model's device; torch 2 wants them on the CPU, and upstream kokoro
# now moves them there itself. The same move here, for CUDA.
_pack = torch.nn.utils.rnn.pack_padded_sequence


def _pack_cpu_lengths(x, lengths, *args, **kwargs):
    return _pack(x, lengths.cpu() if torch.is_tensor(lengths) else lengths, *args, **kwargs)


torch.nn.utils.rnn.pack_padded_sequence = _pack_cpu_lengths  # frames (25 ms) per token aimed at
RUNS = 10


def utterances(vocab):
    rows = []
    with open(os.path.join(ROOT, "vocoder", "phonemes", "testdata", "phonemes", "en-us.tsv")) as f:
        for line in f:
            _, ps = line.rstrip("\n").split("\t")
            rows.append("".join(p for p in ps if p in vocab))
    long = ""
    for r in rows:
        if len(long) + 1 + len(r) > 510:
            break
        long = (long + " " + r).strip()
    return {"sentence": rows[1], "paragraph": " ".join(rows[1:5]), "chunk": long}


def main():
    torch.manual_seed(0)
    config = fx.kokoro_config(fx.PLBERT_FULL, fx.ISTFT_FULL, 3)
    vocab = config["vocab"]
    texts = utterances(vocab)
    model = fx.new_model(config)
    shapes = {n: list(t.shape) for n, t in model.named_parameters()}
    recipe = {n: fx.rule(n, s) for n, s in shapes.items()}
    bname = "predictor.duration_proj.linear_layer.bias"
    recipe[bname] = (0.5, -3.5)
    fx.assign(model, recipe)

    # Calibrate the duration bias on the longest utterance (CPU, f32).
    pack = np.fromfile(VOICE, dtype="<f4").reshape(510, 256)
    ids = [0] + [vocab[p] for p in texts["chunk"]] + [0]
    style = torch.from_numpy(pack[len(texts["chunk"]) - 1].copy())[None]
    out, _ = fx.run(model, torch.tensor([ids]), style)
    dp = model.predictor.duration_proj.linear_layer
    wx = out["dur_lstm"].double().numpy() @ dp.weight.detach().double().numpy().T
    off, _ = fx.choose_duration_offset(wx, fx.uniform(bname, dp.bias.numel()), 0.5, RATE)
    recipe[bname] = (0.5, off)
    fx.assign(model, recipe, [bname])
    with open(os.path.join(OUT, "voice_recipe.json"), "w") as f:
        json.dump({"config": config, "texts": texts,
                   "weights": [{"name": n, "shape": shapes[n], "scale": s, "offset": o}
                               for n, (s, o) in recipe.items()]}, f, ensure_ascii=False)

    dev = torch.device("cuda")
    model = model.to(dev).eval()
    result = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0),
              "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
              "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32, "runs": {}}
    for name, ps in texts.items():
        ids = torch.tensor([[0] + [vocab[p] for p in ps] + [0]], device=dev)
        s = torch.from_numpy(pack[len(ps) - 1].copy()).to(dev)[None]
        times = []
        with torch.no_grad():
            for i in range(RUNS + 3):  # three warm-up runs
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                audio, dur = model.forward_with_tokens(ids, s, 1)
                torch.cuda.synchronize()
                if i >= 3:
                    times.append(time.perf_counter() - t0)
        secs = audio.numel() / 24000
        med = statistics.median(times)
        result["runs"][name] = {"phonemes": len(ps), "frames": int(dur.sum()), "audio_s": secs,
                                "median_s": med, "min_s": min(times), "rtf": secs / med}
        print(f"torch {name:9s} {len(ps):3d} phonemes {int(dur.sum()):5d} frames {secs:6.2f} s audio "
              f"median {med * 1e3:7.2f} ms  RTF {secs / med:7.1f}x", flush=True)
    with open(os.path.join(OUT, "torch.json"), "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
