#!/usr/bin/env python3
"""Converts the fixture's Hugging Face folder to GGUF with llama.cpp's own
converter, as the EmbeddingGemma files people download are made, so that
Hearth is tested on that converter's output rather than on its own.

    python3 convert.py LLAMA_CPP MODEL_DIR OUT.gguf

LLAMA_CPP holds convert_hf_to_gguf.py and gguf-py from a llama.cpp tree
(the fixture was made with Mesh-LLM/llama.cpp 092b66d01). The converter
takes the dense layers with --sentence-transformers-dense-modules and
writes f32 (the weights are f16 values, so nothing rounds).

One patch: the converter identifies a byte-level BPE tokenizer by a hash of
how it splits a test text, and the fixture's tokenizer is trained by
make_fixtures.py, so no hash in its table matches. Its pre-tokenizer is
GPT-2's ByteLevel, which is what "gpt-2" names.
"""
import os
import sys

llama, model, out = sys.argv[1:4]
sys.path.insert(0, os.path.join(llama, "gguf-py"))
sys.path.insert(0, llama)
import convert_hf_to_gguf as conv  # noqa: E402

conv.TextModel.get_vocab_base_pre = lambda self, tokenizer: "gpt-2"
sys.argv = ["convert_hf_to_gguf.py", model, "--outfile", out, "--outtype", "f32", "--sentence-transformers-dense-modules"]
conv.main()
