#!/usr/bin/env python3
"""Make the PyTorch oracle for vocoder/kokoro's CPU forward pass (TestForward*).

Run on a machine with torch and transformers, with hexgrad's kokoro package
importable (PYTHONPATH; its loguru, misaki and huggingface_hub imports are
stubbed below when missing). For two configs it builds KModel
(kokoro/model.py) with weights drawn from a counter-based generator that
the Go test reproduces bit for bit, so no weight file is committed (Kokoro's
decoder alone is 25M parameters whatever the config), runs
KModel.forward_with_tokens on fixed phoneme ids and a row of the af_heart
voice in eval mode with the harmonic source deterministic (SineGen's random
initial phases and both noises zero), and records its intermediates:

  forward-<name>.json  the config, the weight recipe (every parameter's
                       name, shape, scale and offset), the inputs, the
                       predicted durations, and the index of the arrays
  forward-<name>.bin   those arrays, f32 little-endian, back to back;
                       the generator's from the float64 run too (name@f64)

The configs: "small" is Kokoro-82M with a smaller PL-BERT, two layers and
a cheaper generator (hidden_dim 512 and style_dim 128 cannot shrink: the
decoder hard-codes asr_res = Conv1d(512, 64) and KModel splits the 256-wide
style at 128); "full" is Kokoro-82M's own config.json.

Weights: value[i] = f32(offset + scale * u_i), u_i = k_i / 2^23 - 1 with
k_i the top 24 bits of splitmix64(fnv1a64(name) + (i+1) * golden), all in
float64 before the one rounding to f32.

The oracle runs on the CPU in float32 (no TF32 on a GPU); a float64 run of
the same model gives each array's own f32 rounding noise, recorded as
"f64_err" to size the Go test's tolerances.

Usage: PYTHONPATH=/path/to/kokoro python3 make_forward_fixture.py [OUTDIR]
(default OUTDIR: testdata/torch beside this script; the voice rows come
from testdata/torch/af_heart-rows.json, cut from the real af_heart.bin).
"""
import json
import math
import os
import struct
import sys
import time
import traceback
import types

import numpy as np
import torch

# The oracle needs only KModel's modules: stub what kokoro imports for
# downloading and logging.
try:
    import loguru  # noqa: F401
except ImportError:
    m = types.ModuleType("loguru")
    m.logger = types.SimpleNamespace(debug=lambda *a, **k: None, info=lambda *a, **k: None,
                                     warning=lambda *a, **k: None)
    sys.modules["loguru"] = m
try:
    import huggingface_hub  # noqa: F401
except ImportError:
    m = types.ModuleType("huggingface_hub")
    m.hf_hub_download = lambda *a, **k: (_ for _ in ()).throw(RuntimeError("no downloads"))
    sys.modules["huggingface_hub"] = m
sys.modules.setdefault("misaki", types.ModuleType("misaki"))

import kokoro.model  # noqa: E402
from kokoro.model import KModel  # noqa: E402

_AlbertConfig = kokoro.model.AlbertConfig


def _albert_config(**kw):
    # Kokoro's plbert has a "dropout" AlbertConfig does not define; should a
    # stricter transformers refuse it, leave it out (it is unused).
    try:
        return _AlbertConfig(**kw)
    except TypeError:
        kw.pop("dropout", None)
        return _AlbertConfig(**kw)


kokoro.model.AlbertConfig = _albert_config

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "torch")
torch.set_num_threads(max(1, os.cpu_count() or 1))

VOCAB = {s: i + 1 for i, s in enumerate(
    ";:,.!?—…\"()“” abcdefhijklmnopqrstuvwxyzAIOQWYæðŋɑɔəɛɜɡɪɹʃʊʌʒʤʧθᵊˈˌː")}
PLBERT_FULL = {"hidden_size": 768, "num_attention_heads": 12, "intermediate_size": 2048,
               "max_position_embeddings": 512, "num_hidden_layers": 12, "dropout": 0.1}
ISTFT_FULL = {"upsample_kernel_sizes": [20, 12], "upsample_rates": [10, 6],
              "gen_istft_hop_size": 5, "gen_istft_n_fft": 20,
              "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
              "resblock_kernel_sizes": [3, 7, 11], "upsample_initial_channel": 512}


def kokoro_config(plbert, istft, n_layer):
    return {"istftnet": istft, "dim_in": 64, "dropout": 0.2, "hidden_dim": 512,
            "max_conv_dim": 512, "max_dur": 50, "multispeaker": True, "n_layer": n_layer,
            "n_mels": 80, "n_token": 178, "style_dim": 128, "text_encoder_kernel_size": 5,
            "plbert": plbert, "vocab": VOCAB}


CASES = [
    # name, config, phonemes, mean duration aimed at (frames per token)
    ("small", kokoro_config(
        {"hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128,
         "max_position_embeddings": 512, "num_hidden_layers": 3, "dropout": 0.1},
        {"upsample_kernel_sizes": [8, 4], "upsample_rates": [4, 2],
         "gen_istft_hop_size": 4, "gen_istft_n_fft": 16,
         "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5]],
         "resblock_kernel_sizes": [3, 7], "upsample_initial_channel": 512}, 2),
     "həlˈoʊ wˈɜːld", 2.0),
    ("full", kokoro_config(PLBERT_FULL, ISTFT_FULL, 3), "hˈaɪ", 1.5),
]

# ---- the weight generator (mirrored by vocoder/kokoro's model_test.go)

M64 = (1 << 64) - 1


def fnv1a64(s):
    h = 0xcbf29ce484222325
    for b in s.encode():
        h = ((h ^ b) * 0x100000001b3) & M64
    return h


def uniform(name, n):
    with np.errstate(over="ignore"):
        z = np.uint64(fnv1a64(name)) + (np.arange(1, n + 1, dtype=np.uint64)
                                        * np.uint64(0x9E3779B97F4A7C15))
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(40)).astype(np.float64) / 8388608.0 - 1.0


def draw(name, shape, scale, offset):
    u = uniform(name, int(np.prod(shape)) if shape else 1)
    v = offset + (scale * u)
    return v.astype(np.float32).reshape(shape)


def rule(name, shape):
    """(scale, offset) of a parameter: magnitudes that keep a random
    Kokoro's activations O(1), as its trained weights do."""
    if name.endswith("weight_g") or name.endswith("original0"):
        if "conv_post" in name:
            return 0.05, 0.3  # exp(spec): keep magnitudes near e^±2
        return 0.25, 1.0  # each output row's norm
    if name.endswith("weight_v") or name.endswith("original1"):
        return 1.0, 0.0  # a direction only
    if ".alpha" in name:
        return 0.3, 1.0
    last = name.rsplit(".", 1)[-1]
    normish = ("LayerNorm" in name or "layer_norm" in name or ".norm." in name
               or name.endswith(".gamma") or name.endswith(".beta"))
    if normish:
        return (0.1, 1.0) if last in ("weight", "gamma") else (0.1, 0.0)
    if last.startswith(("weight_ih", "weight_hh", "bias_ih", "bias_hh")):
        return 1.0 / math.sqrt(shape[0] // 4), 0.0  # nn.LSTM's own init range
    if len(shape) == 1:
        return 0.1, 0.0
    if "embeddings" in name or "embedding." in name:
        return 1.0, 0.0
    return math.sqrt(3.0 / int(np.prod(shape[1:]))), 0.0


# The arrays recorded from the float64 run too (name@f64).
F64_ARRAYS = ("har", "gen_stage0", "conv_post", "audio")

# ---- running the oracle

class Recorder:
    """Forward hooks that keep named module outputs (batch squeezed)."""

    def __init__(self):
        self.out, self.handles = {}, []

    def output(self, module, name, pick=lambda o: o):
        def hook(_m, _i, o):
            self.out[name] = pick(o).detach().clone()
        self.handles.append(module.register_forward_hook(hook))

    def input(self, module, name):
        def hook(_m, i):
            self.out[name] = i[0].detach().clone()
        self.handles.append(module.register_forward_pre_hook(hook))

    def close(self):
        for h in self.handles:
            h.remove()


def hooks(model):
    r = Recorder()
    p, dec, gen = model.predictor, model.decoder, model.decoder.generator
    r.output(model.bert, "bert")                                  # [T, hidden]
    r.output(model.bert_encoder, "d_en")                          # [T, 512]
    r.output(p.text_encoder, "dur_enc")                           # [T, 640]
    r.output(p.lstm, "dur_lstm", lambda o: o[0])                  # [T, 512]
    r.output(p.duration_proj, "dur_logits")                       # [T, max_dur]
    r.output(p.shared, "shared_lstm", lambda o: o[0])             # [F, 512]
    r.input(p.F0_proj, "F0_proj_in")                              # [256, 2F]
    r.output(p.F0_proj, "F0")                                     # [1, 2F]
    r.output(p.N_proj, "N")                                       # [1, 2F]
    r.output(model.text_encoder, "t_en")                          # [512, T]
    r.input(dec, "asr")                                           # [512, F]
    r.output(dec.encode, "dec_encode")                            # [1024, F]
    r.output(dec.decode[0], "dec_decode0")                        # [1024, F]
    r.output(dec.decode[3], "dec_out")                            # [512, 2F]
    r.output(gen.m_source, "har_source", lambda o: o[0])          # [L, 1]
    r.input(gen.noise_convs[0], "har")                            # [n_fft+2, L/hop+1]
    r.input(gen.resblocks[0], "gen_stage0")                       # [C/2, 2F*rate0]
    r.output(gen.conv_post, "conv_post")                          # [n_fft+2, L/hop+1]
    return r


class Deterministic:
    """SineGen's rand_ini and noise and the source module's noise, zero."""

    def __enter__(self):
        self.rand, self.randn_like = torch.rand, torch.randn_like
        torch.rand = lambda *a, **k: torch.zeros(
            *a, **{kk: v for kk, v in k.items() if kk in ("device", "dtype")})
        torch.randn_like = lambda t, **k: torch.zeros_like(t)

    def __exit__(self, *exc):
        torch.rand, torch.randn_like = self.rand, self.randn_like


def new_model(config):
    """KModel as kokoro builds it, from an empty checkpoint."""
    empty = os.path.join(OUT, ".empty.pth")
    torch.save({}, empty)
    try:
        return KModel(repo_id="hexgrad/Kokoro-82M", config=config, model=empty).eval()
    finally:
        os.remove(empty)


def assign(model, recipe, names=None):
    """Draws the named parameters (all by default) from the recipe."""
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name in names or recipe:
            scale, offset = recipe[name]
            t = params[name]
            t.copy_(torch.from_numpy(draw(name, list(t.shape), scale, offset)))


def run(model, ids, style, dtype=torch.float32):
    r = hooks(model)
    try:
        with Deterministic(), torch.no_grad():
            audio, pred_dur = model.forward_with_tokens(ids, style.to(dtype), 1)
    finally:
        r.close()
    out = {k: v.squeeze(0) for k, v in r.out.items()}
    out["audio"] = audio.squeeze()
    return out, pred_dur


def choose_duration_offset(logits_wo_bias, bias_u, bias_scale, aim):
    """The duration_proj bias offset whose mean duration is nearest aim with
    every duration at least 0.1 from a rounding boundary (x.5)."""
    best = None
    for off in np.arange(-8, 2, 0.01):
        b = off + bias_scale * bias_u
        dur = (1 / (1 + np.exp(-(logits_wo_bias + b)))).sum(-1)
        margin = np.abs(dur - np.floor(dur) - 0.5).min()
        if margin < 0.1:
            continue
        score = abs(dur.mean() - aim)
        if best is None or score < best[0]:
            best = (score, float(off), dur)
    return best[1], best[2]


def make(name, config, phonemes, aim, rows):
    start = time.time()
    ids = [0] + [VOCAB[p] for p in phonemes] + [0]
    row = len(phonemes) - 1  # KPipeline's pack[len(ps)-1]
    style = torch.tensor(rows[str(row)], dtype=torch.float32)[None]
    tokens = torch.tensor([ids])

    model = new_model(config)
    shapes = {n: list(t.shape) for n, t in model.named_parameters()}
    recipe = {n: rule(n, s) for n, s in shapes.items()}
    # A first guess of a few frames per token keeps the calibration run
    # short (at bias 0 each token would last ~25 frames).
    recipe["predictor.duration_proj.linear_layer.bias"] = (0.5, -3.5)
    assign(model, recipe)

    # Calibrate two output layers so the fixture exercises what real
    # speech does: durations of a few frames, none near a rounding tie,
    # and an F0 curve mostly voiced (> 10 Hz) with some unvoiced frames.
    out, _ = run(model, tokens, style)
    dp = model.predictor.duration_proj.linear_layer
    bname = "predictor.duration_proj.linear_layer.bias"
    x = out["dur_lstm"].double().numpy()
    wx = x @ dp.weight.detach().double().numpy().T
    off, _ = choose_duration_offset(wx, uniform(bname, dp.bias.numel()), 0.5, aim)
    recipe[bname] = (0.5, off)
    assign(model, recipe, [bname])
    out, _ = run(model, tokens, style)
    fin = out["F0_proj_in"].double()
    fw = model.predictor.F0_proj.weight.detach().double()
    raw = torch.einsum("oc,ct->ot", fw[:, :, 0], fin)
    s0 = recipe["predictor.F0_proj.weight"][0]
    recipe["predictor.F0_proj.weight"] = (s0 * 90.0 / raw.std().item(), 0.0)
    recipe["predictor.F0_proj.bias"] = (0.0, 120.0 - raw.mean().item() * 90.0 / raw.std().item())
    assign(model, recipe, ["predictor.F0_proj.weight", "predictor.F0_proj.bias"])

    out, pred_dur = run(model, tokens, style)
    del out["F0_proj_in"]
    logits = out.pop("dur_logits").double()
    dur_raw = torch.sigmoid(logits).sum(-1)

    # The same model in float64: each array's f32 rounding noise.
    f64_err, f64_dur, o64 = {}, None, {}
    try:
        torch.set_default_dtype(torch.float64)
        m64 = model.double()
        m64.decoder.generator.stft.window = m64.decoder.generator.stft.window.double()
        o64, d64 = run(m64, tokens, style, torch.float64)
        f64_dur = d64.tolist()
        for k, v in out.items():
            if k in o64 and o64[k].shape == v.shape:
                f64_err[k] = (v.double() - o64[k]).abs().max().item()
    except Exception as e:  # a record, not a failure
        f64_err["error"] = repr(e)
    finally:
        torch.set_default_dtype(torch.float32)

    # The float64 run's arrays past the source's STFT, where f32 rounding
    # of near-zero bins decides their phases: the CPU forward (float64
    # inside) is checked against these tightly, the f32 ones only in bulk.
    for k in F64_ARRAYS:
        if k in o64:
            out[k + "@f64"] = o64[k]
    blob, index, off_bytes = bytearray(), {}, 0
    for k, v in out.items():
        a = v.detach().to(torch.float32).contiguous().numpy()
        index[k] = {"shape": list(a.shape), "offset": off_bytes,
                    "max_abs": float(np.abs(a).max()), "rms": float(np.sqrt((a.astype(np.float64) ** 2).mean()))}
        b = a.astype("<f4").tobytes()
        blob += b
        off_bytes += len(b)
    f0 = out["F0"].numpy()
    meta = {
        "torch": torch.__version__,
        "config": config,
        "albert": {k: getattr(model.bert.config, k) for k in
                   ("embedding_size", "hidden_act", "layer_norm_eps", "type_vocab_size")},
        "phonemes": phonemes, "tokens": ids, "voice": "af_heart", "voice_row": row,
        "style": rows[str(row)], "speed": 1,
        "durations": pred_dur.tolist(), "durations_raw": dur_raw.tolist(),
        "durations_f64": f64_dur, "f64_err": f64_err,
        "f0_unvoiced_frames": int((f0 <= 10).sum()),
        "weights": [{"name": n, "shape": shapes[n],
                     "scale": s, "offset": o} for n, (s, o) in recipe.items()],
        "buffers": [n for n, _ in model.named_buffers()],
        "arrays": index,
    }
    with open(os.path.join(OUT, f"forward-{name}.json"), "w") as f:
        json.dump(meta, f, ensure_ascii=False, indent=0)
    with open(os.path.join(OUT, f"forward-{name}.bin"), "wb") as f:
        f.write(blob)
    print(f"{name}: tokens {ids}\n  durations {pred_dur.tolist()} (f64 {f64_dur})"
          f"\n  raw {[round(d, 3) for d in dur_raw.tolist()]}\n  F0 unvoiced {meta['f0_unvoiced_frames']}/{f0.size}")
    for k, v in index.items():
        print(f"  {k:12s} {str(v['shape']):14s} max {v['max_abs']:.4g} rms {v['rms']:.4g}"
              f" f64_err {f64_err.get(k, float('nan')):.3g}")
    print(f"  {time.time() - start:.1f} s, {len(blob)} bytes, {len(recipe)} parameters, "
          f"{sum(int(np.prod(w['shape'])) for w in meta['weights'])} values")


def main():
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(HERE, "torch", "af_heart-rows.json")) as f:
        rows = json.load(f)
    # The generator is the contract with the Go test: pin it.
    u = uniform("x", 3)
    print("uniform('x', 3) =", u.tolist())
    failed = False
    for case in CASES:
        try:
            make(*case, rows)
        except Exception:  # keep the other case's fixture
            traceback.print_exc()
            failed = True
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
