#!/usr/bin/env python3
"""Reference ids of Gemma's own tokenizers for a SentencePiece vocabulary
written without tokenizer.ggml.add_space_prefix (as Ollama's converter
writes Gemma files).

The vocabulary is shared/testdata/tokenizer/gemma-spm.model (a SentencePiece
BPE trained in Gemma's style: no dummy prefix, byte fallback, split digits).
Each text is encoded by
  - sentencepiece itself (sp.encode, raw bytes for the invalid UTF-8 cases:
    sentencepiece reads each bad byte as U+FFFD), and
  - transformers' GemmaTokenizer built from the same .model file, the class
    a Gemma checkpoint's tokenizer loads as (add_special_tokens=False; the
    invalid UTF-8 cases as Python decodes them with errors="replace", the
    only way such bytes reach a str).
Neither puts a "\u2581" before the first word: Gemma's normalizer only
replaces spaces.

Usage: python3 make_gemma_refs.py GEMMA_SPM_MODEL OUT.json
(run with transformers 5.17, tokenizers 0.23, sentencepiece 0.2).
"""
import json
import os
import shutil
import sys
import tempfile

import sentencepiece as spm
import transformers

TEXTS = [
    "Hello world",
    "hello",
    " leading space",
    "  two leading spaces",
    "trailing space ",
    "inner   three   spaces",
    "\ttab first",
    "\nnewline first",
    "line one\nline two\n\n",
    " ",
    "   ",
    "12345",
    "3.14159 and 2026-12-04",
    "Room 101, 7 days",
    "日本語のテキスト",
    "中文 测试",
    "한국어",
    "\U0001F600",
    "emoji \U0001F44D\U0001F3FD after",
    "\U0001F469\u200d\U0001F469\u200d\U0001F467 family",
    "Prince Andrew said, \"Well?\"",
    "caf\u00e9 na\u00efve",
]

RAW = [b"\xff", b"ab\xe2\x82", b"\xc0\xaf start", b"caf\xc3", b"\xf0\x9f\x98 z"]


def main():
    model, out = sys.argv[1], sys.argv[2]
    sp = spm.SentencePieceProcessor(model_file=model)
    # A checkpoint's folder as Gemma ships it: tokenizer.model and a
    # tokenizer_config.json naming the class, which transformers converts.
    with tempfile.TemporaryDirectory() as d:
        shutil.copy(model, os.path.join(d, "tokenizer.model"))
        with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
            json.dump({"tokenizer_class": "GemmaTokenizer", "bos_token": "<s>", "eos_token": "</s>",
                       "unk_token": "<unk>", "pad_token": "<pad>", "add_bos_token": False}, f)
        hf = transformers.AutoTokenizer.from_pretrained(d)
    if len(hf) != sp.get_piece_size():
        raise RuntimeError(f"{type(hf).__name__} has {len(hf)} tokens, the model {sp.get_piece_size()}")
    res = {
        "model": "gemma-spm.model",
        "sentencepiece": spm.__version__,
        "transformers": transformers.__version__,
        "hf_class": type(hf).__name__,
        "cases": [],
    }
    for t in TEXTS:
        res["cases"].append({
            "text": t,
            "sp": sp.encode(t),
            "hf": hf.encode(t, add_special_tokens=False),
        })
    for b in RAW:
        res["cases"].append({
            "hex": b.hex(),
            "sp": sp.encode(b),
            "hf": hf.encode(b.decode("utf-8", errors="replace"), add_special_tokens=False),
        })
    differ = [c.get("text", c.get("hex")) for c in res["cases"] if c["sp"] != c["hf"]]
    res["sp_hf_differ"] = differ
    print(f"{len(res['cases'])} cases, {hf!r:.200}, sp and hf differ on {differ}")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(res, f, ensure_ascii=False, indent=0)
        f.write("\n")


if __name__ == "__main__":
    main()
