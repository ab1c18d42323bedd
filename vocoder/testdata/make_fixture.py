#!/usr/bin/env python3
"""Make the PyTorch oracle for vocoder's weight loader (TestTorchFixture).

Run on a machine with torch, transformers, safetensors and kokoro
(pip install kokoro): it builds Kokoro's five modules the way KModel
(kokoro/model.py) does, from a small config, randomly initialised, and
writes into testdata/torch/:

  config.json              the small config
  kokoro-tiny.pth          torch.save({module: state_dict}), the release layout
  kokoro-tiny.safetensors  the same tensors, flat "module.param" names
  kokoro-tiny.json         every tensor's shape and sums after torch folded
                           the weight norm (torch._weight_norm, dim 0)

Usage: python3 make_fixture.py   (from vocoder/testdata)
"""
import json
import os

import torch
from safetensors.torch import save_file
from transformers import AlbertConfig
from kokoro.istftnet import Decoder
from kokoro.modules import CustomAlbert, ProsodyPredictor, TextEncoder

torch.manual_seed(0)
vocab = {s: i + 1 for i, s in enumerate(";:,.!?—…\"()“” abcdefhijklmnopqrstuvwxyzAIOQWYæðŋɑɔəɛɜɡɪɹʃʊʌʒʤʧθᵊˈˌː")}
config = {
    "istftnet": {"upsample_kernel_sizes": [20, 12], "upsample_rates": [10, 6],
                 "gen_istft_hop_size": 5, "gen_istft_n_fft": 20,
                 "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
                 "resblock_kernel_sizes": [3, 7, 11], "upsample_initial_channel": 32},
    "dim_in": 16, "dropout": 0.2, "hidden_dim": 32, "max_conv_dim": 32, "max_dur": 50,
    "multispeaker": True, "n_layer": 2, "n_mels": 80, "n_token": 178, "style_dim": 16,
    "text_encoder_kernel_size": 5,
    "plbert": {"hidden_size": 32, "num_attention_heads": 2, "intermediate_size": 64,
               "max_position_embeddings": 512, "num_hidden_layers": 2, "dropout": 0.1},
    "vocab": vocab,
}

bert = CustomAlbert(AlbertConfig(vocab_size=config["n_token"], **config["plbert"]))
modules = {
    "bert": bert,
    "bert_encoder": torch.nn.Linear(bert.config.hidden_size, config["hidden_dim"]),
    "predictor": ProsodyPredictor(style_dim=config["style_dim"], d_hid=config["hidden_dim"],
                                  nlayers=config["n_layer"], max_dur=config["max_dur"],
                                  dropout=config["dropout"]),
    "text_encoder": TextEncoder(channels=config["hidden_dim"], kernel_size=config["text_encoder_kernel_size"],
                                depth=config["n_layer"], n_symbols=config["n_token"]),
    "decoder": Decoder(dim_in=config["hidden_dim"], style_dim=config["style_dim"],
                       dim_out=config["n_mels"], **config["istftnet"]),
}
states = {k: m.state_dict() for k, m in modules.items()}

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch")
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "config.json"), "w") as f:
    json.dump(config, f, ensure_ascii=False, indent=1)
torch.save(states, os.path.join(out, "kokoro-tiny.pth"))
flat = {f"{k}.{n}": t.contiguous() for k, sd in states.items() for n, t in sd.items()}
save_file(flat, os.path.join(out, "kokoro-tiny.safetensors"))

folded = {}
for name, t in flat.items():
    for g_suffix, v_suffix in ((".weight_g", ".weight_v"),
                               (".parametrizations.weight.original0", ".parametrizations.weight.original1")):
        if name.endswith(g_suffix):
            base = name[: -len(g_suffix)] + ".weight"
            folded[base] = torch._weight_norm(flat[name[: -len(g_suffix)] + v_suffix], t, 0)
            break
    else:
        if not (name.endswith(".weight_v") or name.endswith(".parametrizations.weight.original1")):
            folded[name] = t
summary = {"torch": torch.__version__, "tensors": {
    n: {"shape": list(t.shape), "sum": t.double().sum().item(), "abs_sum": t.double().abs().sum().item()}
    for n, t in folded.items()}}
with open(os.path.join(out, "kokoro-tiny.json"), "w") as f:
    json.dump(summary, f, indent=1)
print(f"wrote {len(folded)} tensors to {out}")
