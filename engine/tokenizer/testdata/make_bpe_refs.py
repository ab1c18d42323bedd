#!/usr/bin/env python3
"""Byte-level BPE references for engine/tokenizer's tests, made with Hugging
Face tokenizers (the reference library; 0.23.2 made the committed files).

For each pre-tokenizer family that shared/testdata has no vocabulary of, it
trains a small byte-level BPE on the War and Peace excerpts of
refs-public.json with that family's pre-tokenizer as Hugging Face configures
it (GPT-2's ByteLevel regex; SmolLM's and Command-R's Digits + ByteLevel;
the Split patterns of Tekken, GPT-4o, DeepSeek LLM and llama.cpp's default),
saves it, and records the ids of hard strings (encode with
add_special_tokens=False: special tokens written in the text are read as
tokens) and, as "ids_plain", with encode_special_tokens on (they are text),
plus decode of the ids. For the two shared vocabularies it records the same
for strings with special tokens.

Usage: python3 make_bpe_refs.py SHARED_TOKENIZER_DIR OUT_DIR
writes OUT_DIR/bpe-<pre>.tokenizer.json.gz and OUT_DIR/refs-bpe.json.gz.
"""
import gzip
import io
import json
import os
import sys
import traceback

import tokenizers
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
TEKKEN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
          r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|"
          r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
GPT4O = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
         r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
         r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# DeepSeek LLM's cased-letter class, from code points (see pretokenize.go).
DEEPSEEK_LETTERS = [
    (0x41, 0x5A), (0x61, 0x7A), (0xB5, 0xB5), (0xC0, 0xD6), (0xD8, 0xF6), (0xF8, 0x1BA), (0x1BC, 0x1BF),
    (0x1C4, 0x293), (0x295, 0x2AF), (0x370, 0x373), (0x376, 0x377), (0x37B, 0x37D), (0x37F, 0x37F),
    (0x386, 0x386), (0x388, 0x38A), (0x38C, 0x38C), (0x38E, 0x3A1), (0x3A3, 0x3F5), (0x3F7, 0x481),
    (0x48A, 0x52F), (0x531, 0x556), (0x10A0, 0x10C5), (0x13A0, 0x13F5), (0x13F8, 0x13FD), (0x1C90, 0x1CBA),
    (0x1CBD, 0x1CBF), (0x1D00, 0x1D2B), (0x1D6B, 0x1D77), (0x1D79, 0x1D9A), (0x1E00, 0x1F15), (0x1F18, 0x1F1D),
    (0x1F20, 0x1F45), (0x1F48, 0x1F4D), (0x1F50, 0x1F57), (0x1F59, 0x1F59), (0x1F5B, 0x1F5B), (0x1F5D, 0x1F5D),
    (0x1F5F, 0x1F7D), (0x1F80, 0x1FB4), (0x1FB6, 0x1FBC), (0x1FBE, 0x1FBE), (0x1FC2, 0x1FC4), (0x1FC6, 0x1FCC),
    (0x1FD0, 0x1FD3), (0x1FD6, 0x1FDB), (0x1FE0, 0x1FEC), (0x1FF2, 0x1FF4), (0x1FF6, 0x1FFC), (0x2102, 0x2102),
    (0x2107, 0x2107), (0x210A, 0x2113), (0x2115, 0x2115), (0x2119, 0x211D), (0x2124, 0x2124), (0x2126, 0x2126),
    (0x2128, 0x2128), (0x212A, 0x212D), (0x212F, 0x2134), (0x2139, 0x2139), (0x213C, 0x213F), (0x2145, 0x2149),
    (0x214E, 0x214E), (0x2183, 0x2184), (0x2C00, 0x2C7B), (0x2C7E, 0x2CE4), (0x2CEB, 0x2CEE), (0x2CF2, 0x2CF3),
    (0xA640, 0xA66D), (0xA680, 0xA69B), (0xA722, 0xA76F), (0xA771, 0xA787), (0xA78B, 0xA78E), (0xAB70, 0xABBF),
    (0xFB00, 0xFB06), (0xFB13, 0xFB17), (0xFF21, 0xFF3A), (0xFF41, 0xFF5A), (0x10400, 0x1044F), (0x104B0, 0x104D3),
    (0x104D8, 0x104FB), (0x10C80, 0x10CB2), (0x10CC0, 0x10CF2), (0x118A0, 0x118DF), (0x1E900, 0x1E943),
]
DEEPSEEK = [
    "[\r\n]",
    r"\s?[" + "".join(chr(a) if a == b else chr(a) + "-" + chr(b) for a, b in DEEPSEEK_LETTERS) + "]+",
    "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
    r"\s+$",
    "[一-龥ࠀ-一가-퟿]+",
    r"\p{N}+",
]
DEFAULT = [r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", "[0-9][0-9][0-9]"]

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def write_gz(path, text):
    # mtime=0 keeps the file the same from run to run.
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        gz.write(text.encode("utf-8"))


def split(patterns):
    return [pre_tokenizers.Split(Regex(p), behavior="isolated", invert=False) for p in patterns]


def byte_level(use_regex):
    return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=use_regex)


# pre name → (pre-tokenizers, ignore_merges)
FAMILIES = {
    "gpt-2": ([byte_level(True)], False),
    "smollm": ([pre_tokenizers.Digits(individual_digits=True), byte_level(True)], False),
    "command-r": ([pre_tokenizers.Digits(individual_digits=True), byte_level(True)], False),
    "tekken": (split([TEKKEN]) + [byte_level(False)], True),
    "gpt-4o": (split([GPT4O]) + [byte_level(False)], False),
    "deepseek-llm": (split(DEEPSEEK) + [byte_level(False)], False),
    "default": (split(DEFAULT) + [byte_level(False)], False),
}

EXTRA = [
    "I'M HERE, you'RE there; it'S 'tis 'Twas ’quoted’ rock'n'roll",
    "12 345 6789 1234567890123 ٣٤٥ १२३ ²³ ½ Ⅻ ０１２",
    "CamelCaseWord camelCase ALLCAPS ǅungla ʰmod ßtraße ΣΊΣΥΦΟΣ ǈ",
    "नमस्ते दुनिया — ქართული — ᏣᎳᎩ — ⰀⰁ",
    "tabs\t\there\n\n\n  \n\t x\r\n\r\ny \u00a0\u3000\u2028z  ",
    "a/b/c path/to\n/ http://x.y/z?q=1&r=2 <tag attr=\"v\">",
    "emoji 🙂🚀👩‍👩‍👧‍👦 🇫🇷 ❤️ e\u0301 \u0301x",
    "日本語テキストと中文文本한국어 mixed 日本 English",
    "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|><|endoftext|>x<|im_end",
    "    ",
    "x",
    "",
]

LLAMA3_EXTRA = [
    "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
    "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
    "text<|eot_id|>more <|reserved_special_token_5|> <|end_of_text|",
    "I'M HERE, you'RE there; it'S 'tis",
]


def record(tok, texts):
    cases = []
    for t in texts:
        ids = tok.encode(t, add_special_tokens=False).ids
        case = {"text": t, "ids": ids,
                "decoded": tok.decode(ids, skip_special_tokens=False),
                "decoded_skip": tok.decode(ids, skip_special_tokens=True)}
        try:
            tok.encode_special_tokens = True
            case["ids_plain"] = tok.encode(t, add_special_tokens=False).ids
        except Exception:  # an older tokenizers without the switch
            pass
        finally:
            try:
                tok.encode_special_tokens = False
            except Exception:
                pass
        cases.append(case)
    return cases


def main():
    shared, out = sys.argv[1], sys.argv[2]
    with open(os.path.join(shared, "refs-public.json"), encoding="utf-8") as f:
        public = json.load(f)
    corpus = [c["text"] for c in public["llama3-bpe"]]
    hard = [t for t in corpus if len(t) < 120] + EXTRA
    refs = {"tokenizers": tokenizers.__version__}
    for pre, (pts, ignore_merges) in FAMILIES.items():
        try:
            tok = Tokenizer(models.BPE())
            tok.pre_tokenizer = pre_tokenizers.Sequence(pts)
            tok.decoder = decoders.ByteLevel()
            trainer = trainers.BpeTrainer(vocab_size=700, min_frequency=2, special_tokens=SPECIALS,
                                          initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                          show_progress=False)
            tok.train_from_iterator(corpus + EXTRA, trainer=trainer)
            spec = json.loads(tok.to_str())
            spec["model"]["ignore_merges"] = ignore_merges
            text = json.dumps(spec, ensure_ascii=False)
            tok = Tokenizer.from_str(text)
            write_gz(os.path.join(out, "bpe-%s.tokenizer.json.gz" % pre), text)
            refs[pre] = record(tok, hard)
            print(pre, "ok", len(spec["model"]["vocab"]), "tokens", flush=True)
        except Exception:
            refs[pre + ":error"] = traceback.format_exc()
            print(pre, "failed", traceback.format_exc(), flush=True)
    for name, texts in [("llama3-bpe", LLAMA3_EXTRA + EXTRA), ("qwen2-bpe", EXTRA)]:
        try:
            tok = Tokenizer.from_file(os.path.join(shared, name + ".tokenizer.json"))
            refs[name] = record(tok, texts)
        except Exception:
            refs[name + ":error"] = traceback.format_exc()
    write_gz(os.path.join(out, "refs-bpe.json.gz"), json.dumps(refs, ensure_ascii=False))


if __name__ == "__main__":
    main()
