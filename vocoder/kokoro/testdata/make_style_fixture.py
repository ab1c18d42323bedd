#!/usr/bin/env python3
"""Make the PyTorch oracle for vocoder/kokoro's StyleTTS2 style encoder (TestStyle*).

StyleTTS2 (yl4579/StyleTTS2) turns a reference recording into a 256-value
style, ref_s = cat(style_encoder(mel), predictor_encoder(mel)), both
StyleEncoder modules of models.py, the mel that of meldataset.py's
preprocess (torchaudio MelSpectrogram(n_mels=80, n_fft=2048,
win_length=1200, hop_length=300) at its default sample_rate of 16000,
then (log(1e-5 + mel) + 4) / 4). This script

  * imports the reference StyleEncoder (verbatim copies of models.py's
    LearnedDownSample, DownSample, ResBlk and StyleEncoder) from
    styletts2_models.py on PYTHONPATH (.oracle/styletts2/ in the repo,
    never committed), and meldataset.py's to_mel / preprocess from
    styletts2_meldataset.py when torchaudio is importable;
  * builds both encoders at a reduced width (dim_in 16, max_conv_dim 48,
    style_dim 128: the real ones are 64 / 512 / 128, 13 MB each; the Go
    loader takes every width from the tensor shapes), draws their weights,
    runs a few spectral-norm power iterations in train mode so that the
    stored u and v are not the initial random ones, and saves them as
    StyleTTS2's train_second.py does: torch.save({'net': {'style_encoder':
    sd, 'predictor_encoder': sd, ...}, 'optimizer': ..., 'epoch': ...})
    with DataParallel's 'module.' prefix on every key, to encoder.pth;
  * makes deterministic reference waveforms (a synthetic vowel: a glottal
    pulse train with a gliding pitch through three formant resonators,
    with a little noise), records their mel and each encoder's output,
    in float32 on the CPU (the oracle) and in float64 (its rounding noise,
    "f64_err", sizes the Go test's tolerances), with the first case's
    activations after each block of the shared trunk from the first ResBlk
    on.

The mel: torchaudio's MelSpectrogram when torchaudio is importable (its
output is "mel"); otherwise the same transform written out below with
torch.stft and torchaudio's filterbank formula (melscale_fbanks: HTK mel
scale, no norm, f_min 0, f_max = 16000 // 2, 82 points linspaced in mel;
periodic Hann window of 1200 zero-padded to 2048 in the middle; power 2;
center=True with reflect padding), and "mel_source" in the JSON says
which. The explicit transform is always also run in float64 ("mel@f64");
with torchaudio present its distance to torchaudio's is recorded as
"mel_explicit_vs_torchaudio".

Outputs, in OUTDIR (default: styletts2/ beside this script):
  encoder.pth     the checkpoint (about 1.5 MB)
  fixture.json    dims, torch version, mel source, per-case metadata and
                  the index of the arrays: name -> shape, byte offset,
                  max_abs, rms
  fixture.bin     the arrays, f32 little-endian, back to back

Usage:
  PYTHONPATH=.oracle/styletts2 python3 vocoder/kokoro/testdata/make_style_fixture.py [OUTDIR]
"""
import collections
import json
import math
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "styletts2")

SR = 24000
N_FFT, WIN, HOP, N_MELS = 2048, 1200, 300, 80
MEL_SR = 16000  # MelSpectrogram's default: StyleTTS2 never passes sample_rate
DIM_IN, MAX_CONV_DIM, STYLE_DIM = 16, 48, 128


# --- the waveforms (numpy only) ---------------------------------------------

def resonator(x, freq, bw, sr):
    """Two-pole resonator (a formant): y[n] = x[n] + a1 y[n-1] + a2 y[n-2]."""
    r = math.exp(-math.pi * bw / sr)
    a1, a2 = 2 * r * math.cos(2 * math.pi * freq / sr), -r * r
    y = np.zeros_like(x)
    y1 = y2 = 0.0
    for n in range(len(x)):
        v = x[n] + a1 * y1 + a2 * y2
        y[n] = v
        y2, y1 = y1, v
    return y * (1 - r)


def vowel(n, seed, f0=(110.0, 140.0), formants=((730, 90), (1090, 110), (2440, 170)), peak=0.4):
    """A deterministic vowel-like signal of n samples at 24 kHz: a pulse
    train whose pitch glides from f0[0] to f0[1], through formant
    resonators, under a raised-cosine fade in and out, plus noise at
    -50 dB. Only numpy's seeded legacy generator is random."""
    rng = np.random.RandomState(seed)
    t = np.arange(n) / SR
    f = np.linspace(f0[0], f0[1], n)
    phase = np.cumsum(f) / SR
    pulses = np.diff(np.floor(phase), prepend=0.0)  # 1 at each period start
    src = pulses + 0.02 * rng.standard_normal(n)
    y = sum(resonator(src, fr, bw, SR) for fr, bw in formants)
    fade = min(n // 8, 2400)
    env = np.ones(n)
    ramp = 0.5 - 0.5 * np.cos(np.pi * np.arange(fade) / fade)
    env[:fade], env[n - fade:] = ramp, ramp[::-1]
    y = y * env * (1 + 0.2 * np.sin(2 * np.pi * 3 * t))
    y = peak * y / np.abs(y).max()
    y = y + 10 ** (-50 / 20) * rng.standard_normal(n)
    return y.astype(np.float32)


# CASES: name -> samples. 26400 samples are 89 frames (1 + n // 300):
# widths 89 -> 45 -> 23 -> 12 -> 6 through the four downsamplings, odd
# three times (DownSample's repeated last column), then 2 after the 5x5.
# 19200 samples are 65 frames, the fewest the encoder takes: 65 -> 33 ->
# 17 -> 9 -> 5 -> 1.
CASES = [("vowel", 26400, 1), ("short", 19200, 2)]


# --- the mel -------------------------------------------------------------------

def hz_to_mel(f):
    return 2595.0 * math.log10(1.0 + f / 700.0)


def mel_fbanks(torch, dtype):
    """torchaudio.functional.melscale_fbanks(1025, 0, 8000, 80, 16000,
    norm=None, mel_scale='htk'): [n_freqs, n_mels]."""
    n_freqs = N_FFT // 2 + 1
    all_freqs = torch.linspace(0, MEL_SR // 2, n_freqs, dtype=dtype)
    m_pts = torch.linspace(hz_to_mel(0.0), hz_to_mel(float(MEL_SR // 2)), N_MELS + 2, dtype=dtype)
    f_pts = 700.0 * (10 ** (m_pts / 2595.0) - 1.0)
    f_diff = f_pts[1:] - f_pts[:-1]
    slopes = f_pts.unsqueeze(0) - all_freqs.unsqueeze(1)
    down = (-1.0 * slopes[:, :-2]) / f_diff[:-1]
    up = slopes[:, 2:] / f_diff[1:]
    zero = torch.zeros(1, dtype=dtype)
    return torch.max(zero, torch.min(down, up))


def mel_explicit(torch, wave, dtype):
    """MelSpectrogram(n_mels=80, n_fft=2048, win_length=1200,
    hop_length=300) then preprocess's normalisation, written out: [80, T]."""
    x = torch.from_numpy(wave).to(dtype)
    window = torch.hann_window(WIN, periodic=True, dtype=dtype)
    spec = torch.stft(x, N_FFT, hop_length=HOP, win_length=WIN, window=window, center=True,
                      pad_mode="reflect", normalized=False, onesided=True, return_complex=True)
    power = spec.abs().pow(2.0)  # [1025, T]
    mel = torch.matmul(power.transpose(-1, -2), mel_fbanks(torch, dtype)).transpose(-1, -2)
    return (torch.log(1e-5 + mel) - (-4)) / 4


# --- the model -----------------------------------------------------------------

def build(torch, StyleEncoder, seed):
    torch.manual_seed(seed)
    enc = StyleEncoder(dim_in=DIM_IN, style_dim=STYLE_DIM, max_conv_dim=MAX_CONV_DIM)
    with torch.no_grad():
        for name, p in enc.named_parameters():
            if name.endswith("bias"):
                p.uniform_(-0.1, 0.1)
    # Power iterations happen in train mode only: three forwards move u and
    # v off their random start, as training leaves them; eval then uses
    # them as stored (sigma = u . W v) without iterating.
    enc.train()
    with torch.no_grad():
        for _ in range(3):
            enc(torch.randn(1, 1, N_MELS, 70))
    enc.eval()
    return enc


def trace(torch, enc, mel4):
    """The encoder's output and the activations after each block of shared."""
    acts = collections.OrderedDict()
    h = mel4
    with torch.no_grad():
        for i, layer in enumerate(enc.shared):
            h = layer(h)
            acts[f"shared.{i}"] = h[0]
        s = enc.unshared(h.view(h.size(0), -1))
        assert torch.allclose(s, enc(mel4), rtol=0, atol=0), "trace differs from forward"
    return s[0], acts


def main():
    import torch
    from styletts2_models import StyleEncoder  # PYTHONPATH=.oracle/styletts2

    try:
        import torchaudio  # noqa: F401
        from styletts2_meldataset import preprocess
        mel_source = "torchaudio " + torchaudio.__version__
    except ImportError:
        preprocess, mel_source = None, "explicit (torch.stft + torchaudio's melscale_fbanks formula; no torchaudio)"
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    os.makedirs(OUT, exist_ok=True)
    start = time.time()

    encoders = {"style_encoder": build(torch, StyleEncoder, 20), "predictor_encoder": build(torch, StyleEncoder, 21)}
    net = {}
    for key, enc in encoders.items():
        # As train_second.py saves it: the state_dict() of the module
        # wrapped in DataParallel (its keys under 'module.', and torch's
        # _metadata attribute with spectral norm's per-module version).
        sd = torch.nn.DataParallel(enc).state_dict()
        assert all(k.startswith("module.") for k in sd) and hasattr(sd, "_metadata")
        net[key] = sd
    # Modules the loader must pass over, as in the real checkpoint.
    net["text_encoder"] = collections.OrderedDict([("module.embedding.weight", torch.randn(3, 4))])
    ckpt = {"net": net,
            "optimizer": {"state": {}, "param_groups": [{"lr": 1e-4, "betas": (0.0, 0.99), "eps": 1e-9,
                                                         "weight_decay": 1e-4, "params": [0, 1]}]},
            "iters": 0, "val_loss": 0.5, "epoch": 20}
    torch.save(ckpt, os.path.join(OUT, "encoder.pth"))

    out = collections.OrderedDict()
    meta_cases = {}
    f64_err, explicit_vs_ta = {}, {}
    for name, n, seed in CASES:
        wave = vowel(n, seed)
        out[f"{name}.wave"] = torch.from_numpy(wave)
        mel64 = mel_explicit(torch, wave.astype(np.float64), torch.float64)
        if preprocess is not None:
            mel = preprocess(wave)[0]
            explicit_vs_ta[name] = (mel.double() - mel64).abs().max().item()
        else:
            mel = mel_explicit(torch, wave, torch.float32)
        out[f"{name}.mel"] = mel
        out[f"{name}.mel@f64"] = mel64
        f64_err[f"{name}.mel"] = (mel.double() - mel64).abs().max().item()
        mel4 = mel.float().unsqueeze(0).unsqueeze(1)  # [1, 1, 80, T], as compute_style
        parts = []
        for key, enc in encoders.items():
            s, acts = trace(torch, enc, mel4)
            enc64 = StyleEncoder(dim_in=DIM_IN, style_dim=STYLE_DIM, max_conv_dim=MAX_CONV_DIM).double()
            enc64.load_state_dict(enc.state_dict())
            enc64.eval()
            s64, acts64 = trace(torch, enc64, mel4.double())
            out[f"{name}.{key}"] = s
            f64_err[f"{name}.{key}"] = (s.double() - s64).abs().max().item()
            # The first case's activations after shared.1 (the first ResBlk)
            # on, for locating a mismatch; shared.0 alone would be 0.9 MB.
            for k, v in acts.items():
                if name == CASES[0][0] and k != "shared.0":
                    out[f"{name}.{key}.{k}"] = v
                f64_err[f"{name}.{key}.{k}"] = (v.double() - acts64[k]).abs().max().item()
            parts.append(s)
        out[f"{name}.ref_s"] = torch.cat(parts)
        meta_cases[name] = {"samples": n, "seed": seed, "frames": int(mel.shape[-1])}

    blob, index, off = bytearray(), collections.OrderedDict(), 0
    for k, v in out.items():
        a = v.detach().to(torch.float32).contiguous().numpy()
        index[k] = {"shape": list(a.shape), "offset": off, "max_abs": float(np.abs(a).max()),
                    "rms": float(np.sqrt((a.astype(np.float64) ** 2).mean()))}
        b = a.astype("<f4").tobytes()
        blob += b
        off += len(b)
    meta = {
        "torch": torch.__version__,
        "mel_source": mel_source,
        "mel_explicit_vs_torchaudio": explicit_vs_ta,
        "sample_rate": SR, "n_fft": N_FFT, "win_length": WIN, "hop_length": HOP, "n_mels": N_MELS,
        "dim_in": DIM_IN, "max_conv_dim": MAX_CONV_DIM, "style_dim": STYLE_DIM,
        "checkpoint": "encoder.pth",
        "cases": meta_cases,
        "f64_err": f64_err,
        "arrays": index,
    }
    with open(os.path.join(OUT, "fixture.json"), "w") as f:
        json.dump(meta, f, indent=0)
    with open(os.path.join(OUT, "fixture.bin"), "wb") as f:
        f.write(blob)
    print(f"mel: {mel_source}; explicit vs torchaudio {explicit_vs_ta}")
    for k, v in index.items():
        print(f"  {k:40s} {str(v['shape']):16s} max {v['max_abs']:.4g} rms {v['rms']:.4g}"
              f" f64_err {f64_err.get(k, float('nan')):.3g}")
    size = os.path.getsize(os.path.join(OUT, "encoder.pth"))
    print(f"{time.time() - start:.1f} s; encoder.pth {size} bytes, fixture.bin {len(blob)} bytes -> {OUT}")


if __name__ == "__main__":
    main()
