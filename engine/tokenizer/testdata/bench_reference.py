#!/usr/bin/env python3
"""The reference side of docs/performance.md's tokenizer table: tokens per
second encoding the same ~3 MiB text as BenchmarkEncode (the hard strings
and War and Peace excerpts of refs-public.json, each followed by a newline,
repeated to at least 3 MiB) with Hugging Face tokenizers (the BPE
vocabularies) and sentencepiece (the SentencePiece ones), one thread, the
median of 5 runs. It prints the token count and a SHA-256 of the ids, so
that the Go side can be checked against the same 3 MiB.

Usage: python3 bench_reference.py SHARED_TOKENIZER_DIR
"""
import hashlib
import json
import os
import statistics
import sys
import time

import sentencepiece as spm
import tokenizers
from tokenizers import Tokenizer


def bench_text(shared):
    with open(os.path.join(shared, "refs-public.json"), encoding="utf-8") as f:
        cases = json.load(f)["llama3-bpe"]
    parts, size = [], 0
    while size < 3 << 20:
        for c in cases:
            parts.append(c["text"] + "\n")
            size += len((c["text"] + "\n").encode("utf-8"))
    return "".join(parts)


def digest(ids):
    return hashlib.sha256(",".join(map(str, ids)).encode()).hexdigest()[:16]


def main():
    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    shared = sys.argv[1]
    text = bench_text(shared)
    nbytes = len(text.encode("utf-8"))
    print("text: %d bytes; tokenizers %s, sentencepiece %s" % (nbytes, tokenizers.__version__, spm.__version__))
    encoders = {}
    for name in ["llama3-bpe", "qwen2-bpe"]:
        tok = Tokenizer.from_file(os.path.join(shared, name + ".tokenizer.json"))
        encoders[name] = lambda t, tok=tok: tok.encode(t, add_special_tokens=False).ids
    for name in ["gemma-spm", "llama-spm"]:
        sp = spm.SentencePieceProcessor(model_file=os.path.join(shared, name + ".model"))
        encoders[name] = lambda t, sp=sp: sp.encode(t)
    for name, enc in encoders.items():
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            ids = enc(text)
            times.append(time.perf_counter() - t0)
        med = statistics.median(times)
        print("%-11s %8d tokens  %s  median %.3f s  %.2f MB/s  %.0f tokens/s" % (
            name, len(ids), digest(ids), med, nbytes / med / 1e6, len(ids) / med), flush=True)


if __name__ == "__main__":
    main()
