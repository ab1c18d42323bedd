#!/usr/bin/python3
"""More SentencePiece references for engine/tokenizer's tests.

Encodes hard strings (user-defined and control symbols written in the text,
invalid UTF-8, odd whitespace) with the sentencepiece library, for the two
models in shared/testdata/tokenizer and for one trained here with the
opposite flags (no byte fallback, so unknown characters become <unk>;
remove_extra_whitespaces on; a control and a user-defined symbol of its own).
sp.decode of each result is recorded too, and the decoding of token
sequences that test the prefix space and byte tokens that are not UTF-8
(NAME:decode).

Usage (Debian's python3-sentencepiece 0.1.97 made the committed files):
    /usr/bin/python3 make_spm_refs.py SHARED_TOKENIZER_DIR
writes spm-unk-ws.model and refs-spm.json next to this script.
"""
import json
import os
import sys

import sentencepiece as spm

HERE = os.path.dirname(os.path.abspath(__file__))

TEXTS = [
    "<start_of_turn>user\nHello there<end_of_turn>\n<start_of_turn>model\n",
    "<|user|>hi<|end|> <|assistant|>ok",
    "<s>hello</s> <pad> <unk> <mask>",
    "x<start_of_turn><start_of_turn>y",
    " <|system|> spaced ",
    "<|tool|>call<ctrl> <|tool|>",
    "\u2581already\u2581marked \u2581",
    "\ufffd replacement",
    "\u3000ideographic space\u2028line sep",
    "tabs\t\tand\r\nCRLF",
    "digits 0123456789 and 1e10",
    "   many    inner     spaces   ",
    "",
    " ",
    "\U0001F600 emoji \U0001F469\u200d\U0001F469\u200d\U0001F467",
    "<0x41> looks like a byte token",
    "The little princess, plump and rosy, was sitting in an easy chair.",
]

# Invalid UTF-8: sentencepiece reads each bad byte as U+FFFD.
RAW = [b"\xff", b"ab\xe2\x82", b"\xed\xa0\x80x", b"\xc0\xaf", b"caf\xc3", b"\xf0\x9f\x98 z"]


def decode_cases(sp):
    """Token sequences whose decoding is subtle: where the prefix space is
    dropped, and how runs of byte tokens that are not UTF-8 come out."""
    def b(x):
        return sp.piece_to_id("<0x%02X>" % x)
    hi = sp.encode("hello")
    seqs = [[sp.unk_id()] + hi, [sp.bos_id()] + hi, hi + hi, [sp.eos_id()]]
    if b(0x41) != sp.unk_id():  # the model has byte tokens
        seqs += [[b(0x41)] + hi, [b(0x20)] + hi, [b(0xE2), b(0x82)] + hi, [b(0xFF)],
                 [b(0xE2), b(0x82), b(0xAC)], [b(0xED), b(0xA0), b(0x80)], [b(0xF0), b(0x9F), b(0x98)],
                 [b(0xE2), sp.bos_id(), b(0x82), b(0xAC)], [b(0x41), b(0xE2)] + hi]
    return [{"ids": ids, "decoded": sp.decode(ids)} for ids in seqs]


def train(shared):
    with open(os.path.join(shared, "refs-public.json"), encoding="utf-8") as f:
        corpus = [c["text"] for c in json.load(f)["llama-spm"]]
    path = os.path.join(HERE, "spm-train.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(corpus))
    spm.SentencePieceTrainer.train(
        input=path, model_prefix=os.path.join(HERE, "spm-unk-ws"), model_type="bpe", vocab_size=300,
        character_coverage=0.995, byte_fallback=False, add_dummy_prefix=True,
        remove_extra_whitespaces=True, normalization_rule_name="identity",
        control_symbols=["<ctrl>"], user_defined_symbols=["<|tool|>"],
        unk_id=0, bos_id=1, eos_id=2, pad_id=3, minloglevel=2)
    os.remove(path)
    os.remove(os.path.join(HERE, "spm-unk-ws.vocab"))


def main():
    shared = sys.argv[1]
    train(shared)
    models = {
        "gemma-spm": os.path.join(shared, "gemma-spm.model"),
        "llama-spm": os.path.join(shared, "llama-spm.model"),
        "spm-unk-ws": os.path.join(HERE, "spm-unk-ws.model"),
    }
    out = {"sentencepiece": spm.__version__}
    for name, path in models.items():
        sp = spm.SentencePieceProcessor(model_file=path)
        cases = []
        for t in TEXTS:
            ids = sp.encode(t)
            cases.append({"text": t, "ids": ids, "decoded": sp.decode(ids)})
        for b in RAW:
            ids = sp.encode(b)
            cases.append({"hex": b.hex(), "ids": ids, "decoded": sp.decode(ids)})
        out[name] = cases
        out[name + ":decode"] = decode_cases(sp)
    with open(os.path.join(HERE, "refs-spm.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=0)
        f.write("\n")


if __name__ == "__main__":
    main()
