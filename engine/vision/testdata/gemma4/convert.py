#!/usr/bin/env python3
"""Converts the Gemma 4 vision fixture's Hugging Face
folder to GGUF with llama.cpp's own converter, as the files people download
are made: the text model (its Gemma4Model class) or, with --mmproj, the
vision tower and embedder (Gemma4VisionAudioModel: clip.vision.projector_type
gemma4v), so that Hearth is tested on that converter's output.

    python3 convert.py LLAMA_CPP MODEL_DIR OUT.gguf [--mmproj]

LLAMA_CPP holds convert_hf_to_gguf.py and gguf-py (Mesh-LLM/llama.cpp
092b66d0 or upstream). Both files are f16 (the weights are f16 values, so
nothing rounds; the converter writes 1-D tensors, the clamp scalars and the
position tables in f32, the patch embedding in f16). Given a file name,
--mmproj writes exactly that file.

One patch, for the text file only: Gemma4Model.set_vocab reads the tokenizer
with gguf.LlamaHfVocab, which accepts only a byte-fallback BPE with a
Sequence decoder (Gemma 4's own) and refuses the fixture's byte-level BPE
(make_fixtures.py's). It is replaced by the GPT-2 path (tokenizer.ggml.model
"gpt2", pre "gpt-2"), as engine/vision/testdata/gemma3/convert.py identifies
its tokenizer. The mmproj converter reads no tokenizer.
"""
import json
import os
import sys

if len(sys.argv) < 4 or sys.argv[4:] not in ([], ["--mmproj"]):
    sys.exit(__doc__)
llama, model, out = sys.argv[1:4]
sys.path.insert(0, os.path.join(llama, "gguf-py"))
sys.path.insert(0, llama)
import convert_hf_to_gguf as conv  # noqa: E402
import gguf  # noqa: E402

# llama.cpp's Gemma4Model reads text_config.global_head_dim, which
# transformers 5.17 drops from a config made with it: the fixture's
# expected.json (beside the model folder) says what it was.
with open(os.path.join(os.path.dirname(os.path.abspath(model)), "expected.json"), encoding="utf-8") as f:
    GLOBAL_HEAD_DIM = json.load(f)["config"]["text"]["global_head_dim"]
_init = conv.Gemma4Model.__init__


def _init_with_global_head_dim(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    self.hparams.setdefault("global_head_dim", GLOBAL_HEAD_DIM)


conv.Gemma4Model.__init__ = _init_with_global_head_dim
conv.TextModel.get_vocab_base_pre = lambda self, tokenizer: "gpt-2"
conv.Gemma4Model.set_vocab = lambda self: self._set_vocab_gpt2()
sys.argv = ["convert_hf_to_gguf.py", model, "--outfile", out, "--outtype", "f16", *sys.argv[4:]]
conv.main()

reader = gguf.GGUFReader(out)
for name, field in reader.fields.items():
    if name.startswith("GGUF."):
        continue
    value = field.contents()
    if isinstance(value, list) and len(value) > 8:
        value = f"[{len(value)} items]"
    elif isinstance(value, str) and len(value) > 100:
        value = value[:100] + "..."
    print(f"{name} = {value}")
for t in reader.tensors:
    print(f"{t.name:44s} {t.tensor_type.name:4s} {[int(d) for d in t.shape]}")
