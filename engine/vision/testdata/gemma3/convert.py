#!/usr/bin/env python3
"""Converts the fixture's Hugging Face folder to GGUF with llama.cpp's own
converter, as the Gemma 3 files people download are made: the text model
(its Gemma3Model class) or, with --mmproj, the vision tower and projector
(Gemma3VisionModel), so that Hearth is tested on that converter's output
rather than on its own.

    python3 convert.py LLAMA_CPP MODEL_DIR OUT.gguf [--mmproj]

LLAMA_CPP holds convert_hf_to_gguf.py and gguf-py from a llama.cpp tree.
Both files are f16 (the weights are f16 values, so nothing rounds; the
converter keeps 1-D tensors, and for the mmproj the patch and position
embeddings, in f32). Given a file name, --mmproj writes exactly that file:
the converter adds its "mmproj-" prefix only to names it makes up for a
directory. The written file's metadata and tensors are printed.

One patch, as engine/model/testdata/embeddinggemma/convert.py has it: the
converter identifies a byte-level BPE tokenizer by a hash of how it splits a
test text, and the fixture's tokenizer is trained by make_fixtures.py, so no
hash in its table matches. Its pre-tokenizer is GPT-2's ByteLevel, which is
what "gpt-2" names.
"""
import os
import sys

if len(sys.argv) < 4 or sys.argv[4:] not in ([], ["--mmproj"]):
    sys.exit(__doc__)
llama, model, out = sys.argv[1:4]
sys.path.insert(0, os.path.join(llama, "gguf-py"))
sys.path.insert(0, llama)
import convert_hf_to_gguf as conv  # noqa: E402
import gguf  # noqa: E402

conv.TextModel.get_vocab_base_pre = lambda self, tokenizer: "gpt-2"
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
    print(f"{t.name:36s} {t.tensor_type.name:4s} {[int(d) for d in t.shape]}")
