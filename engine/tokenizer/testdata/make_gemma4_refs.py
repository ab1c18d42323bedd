#!/usr/bin/env python3
"""Reference tokenizations of two tiny Gemma 4 vocabularies, for
gemma4_test.go, in OUT/refs-gemma4.json.

gemma4-tiny (TOKENS and MERGES below: Gemma 4's special tokens, the 256
<0xXX> byte tokens, newline runs, some letters and words, and merges that
build them) goes the way a real Gemma 4 checkpoint's tokenizer goes:

  1. transformers' GemmaTokenizer is built from it as
     models/gemma4/convert_gemma4_weights.py builds Gemma 4's (a BPE with
     byte fallback, the named extra special tokens, add_bos_token false)
     and saved with save_pretrained: OUT/gemma4-tiny/tokenizer.json and
     tokenizer_config.json, the files of a Gemma 4 folder.
  2. Hugging Face tokenizers encodes each text with it (add_special_tokens
     off: special tokens in the text are read, no BOS is added) and decodes
     the ids (special tokens kept): "hf_ids", "hf_decoded".
  3. With --llama-cpp SRC (a llama.cpp source tree), its
     convert_hf_to_gguf.py --vocab-only writes OUT/gemma4-tiny.gguf from
     that folder and a tiny Gemma4ForConditionalGeneration config.json.

No token holds a newline and another character, so Hugging Face's BPE over
a whole text (Gemma 4's tokenizer.json has no pre-tokenizer that splits)
and llama.cpp's line by line agree, and the merges build "\n\n\n", which
llama.cpp takes whole as a token.

gemma4-odd (ODD_TOKENS, ODD_MERGES) is written straight to
OUT/gemma4-odd.gguf with gguf-py, for what llama.cpp reads and Hugging Face
refuses; it needs --llama-cpp but not transformers (--no-hf).

With --llama-cpp, llama.cpp is built for the CPU, and llama_refs.cpp
(beside this script) tokenizes each text of both with it: "llama_ids"
(add_special and parse_special on, as for a chat prompt), "llama_ids_plain"
(parse_special off), what llama_token_to_piece writes for llama_ids with
and without special tokens (in hex), and the vocabulary as llama.cpp loaded
it (BOS, add_bos, end-of-generation ids, token attributes).

Usage: python3 make_gemma4_refs.py OUT [--llama-cpp SRC [--llama-cpp-rev REV] [--build DIR]] [--no-hf]
(run with transformers 5.17, tokenizers 0.23, and gguf-py's needs: numpy).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

tokenizers = transformers = None  # imported in main, unless --no-hf

SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"]
# Gemma 4's extra special tokens, by the names convert_gemma4_weights.py
# gives them; llama.cpp's converter makes <|tool_response> and <|"|>
# user-defined (always visible).
EXTRA = {"sot_token": "<|turn>", "eot_token": "<turn|>", "str_token": "<|tool_response>", "escape_token": '<|"|>'}
PIECES = (
    ["\u2581", "\n", "\n\n", "\n\n\n"]
    + list("acdehilorstuw")
    + ["\U0001F600", "!"]
    + ["he", "ll", "hell", "hello", "\u2581w", "or", "\u2581wor", "\u2581worl", "\u2581world",
       "\u2581\u2581", "\u2581t", "\u2581th", "\u2581the", "ca", "cat", "\u2581cat"]
)
TOKENS = SPECIALS + list(EXTRA.values()) + ["<0x%02X>" % b for b in range(256)] + PIECES
MERGES = [
    ("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o"),
    ("\u2581", "w"), ("o", "r"), ("\u2581w", "or"), ("\u2581wor", "l"), ("\u2581worl", "d"),
    ("\u2581", "\u2581"), ("\n", "\n"), ("\n\n", "\n"),
    ("\u2581", "t"), ("\u2581t", "h"), ("\u2581th", "e"),
    ("c", "a"), ("ca", "t"), ("\u2581", "cat"),
]

TEXTS = [
    "hello world",
    " hello ",
    "hello  world",
    "  world",
    " ",
    "  ",
    "",
    "the cat",
    "thecat",
    "hello\nworld",
    "\n",
    "a\n\nb",
    "a\n\n\nb",
    "\n\n\n\n",
    "\n\n\n\n\n",
    "hi\n\n\n\n\n\nthe cat\n",
    "café",
    "€5",
    "hello\U0001F600",
    "hello\U0001F642 world",
    "日本",
    "tab\there",
    "a\r\nb",
    "<|turn>user\nhi<turn|>",
    '<|turn>model\nsay <|tool_response>ok<|"|>',
    "<bos>hello<eos>",
    "world <turn|>",
    "\u2581world",
]
# llama.cpp reads these bytes too (Python strings cannot hold them).
RAW = [b"a\xffb", b"hello \xe2\x82"]

# A tiny config.json of the class llama.cpp's converter reads as Gemma 4,
# shaped like a real Gemma 4 checkpoint's.
CONFIG = {
    "architectures": ["Gemma4ForConditionalGeneration"],
    "model_type": "gemma4",
    "text_config": {
        "model_type": "gemma4_text",
        "vocab_size": len(TOKENS),
        "vocab_size_per_layer_input": len(TOKENS),
        "hidden_size": 64,
        "hidden_size_per_layer_input": 0,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "num_global_key_value_heads": None,
        "head_dim": 32,
        "global_head_dim": 64,
        "layer_types": ["sliding_attention", "full_attention"],
        "sliding_window": 512,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-6,
        "final_logit_softcapping": 30.0,
        "num_kv_shared_layers": 0,
        "use_double_wide_mlp": False,
        "attention_k_eq_v": False,
        "enable_moe_block": False,
        "hidden_activation": "gelu_pytorch_tanh",
        "tie_word_embeddings": True,
        "rope_parameters": {
            "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        },
        "bos_token_id": 2,
        "eos_token_id": 1,
        "pad_token_id": 0,
    },
    "vision_config": None,
    "audio_config": None,
    "tie_word_embeddings": True,
}


# A second vocabulary, written straight to GGUF with gguf-py as the
# converter would write a gemma4 one, for what llama.cpp does and Hugging
# Face cannot express (it refuses such a tokenizer.json): the merges name
# "ab", which is no token, and "é", which is none either; <0xA9> is
# missing; "\n\n\n" is a token that no merge builds; and the file says
# add_bos_token false and tokenizer.ggml.pre "default".
ODD_SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<turn|>"]
ODD_TOKENS = (
    ODD_SPECIALS + ["<|tool_response>"]
    + ["<0x%02X>" % b for b in range(256) if b != 0xA9]
    + ["\u2581", "\n", "\n\n", "\n\n\n", "a", "b", "c", "x", "abc", "\u00e9x", "\u2581a"]
)
ODD_MERGES = ["\n \n", "a b", "ab c", "\u00e9 x", "\u2581 a"]
ODD_TEXTS = [
    "ab", "abc", "abab", "\u00e9x", "\u00e9", "x\u00e9", "zz",
    "\n\n\n", "\n\n\n\n", "\n\n\n\n\n", "a\n\n\nb", "a b", " a", "a ",
    "<turn|>", "<|tool_response>x", "<bos>", "",
]


def build_tokenizer(out):
    vocab = {t: i for i, t in enumerate(TOKENS)}
    if len(vocab) != len(TOKENS):
        raise RuntimeError("TOKENS has duplicates")
    tok = transformers.GemmaTokenizer(
        vocab=vocab,
        merges=list(MERGES),
        add_bos_token=False,
        padding_side="left",
        extra_special_tokens=dict(EXTRA),
    )
    tok.save_pretrained(out)
    return transformers.AutoTokenizer.from_pretrained(out)


def write_odd_gguf(src, path):
    sys.path.insert(0, os.path.join(src, "gguf-py"))
    import gguf

    w = gguf.GGUFWriter(path, "gemma4")
    w.add_architecture()
    w.add_tokenizer_model("gemma4")
    w.add_tokenizer_pre("default")
    w.add_token_list(ODD_TOKENS)
    w.add_token_scores([-1000.0] * len(ODD_TOKENS))
    types = []
    for t in ODD_TOKENS:
        if t in ODD_SPECIALS:
            types.append(gguf.TokenType.CONTROL)
        elif t == "<|tool_response>":
            types.append(gguf.TokenType.USER_DEFINED)
        elif t.startswith("<0x"):
            types.append(gguf.TokenType.BYTE)
        else:
            types.append(gguf.TokenType.NORMAL)
    w.add_token_types(types)
    w.add_token_merges(ODD_MERGES)
    w.add_bos_token_id(ODD_TOKENS.index("<bos>"))
    w.add_eos_token_id(ODD_TOKENS.index("<eos>"))
    w.add_unk_token_id(ODD_TOKENS.index("<unk>"))
    w.add_pad_token_id(ODD_TOKENS.index("<pad>"))
    w.add_add_space_prefix(False)
    w.add_add_bos_token(False)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()


def run(cmd, **kw):
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)


def convert(src, tok_dir, gguf_path):
    """Runs llama.cpp's converter on the tokenizer and CONFIG. If
    transformers' AutoConfig cannot read CONFIG as the converter wants it,
    the converter falls back to config.json as written; a failure of the
    first try makes it take that fallback."""
    with tempfile.TemporaryDirectory() as d:
        for name in os.listdir(tok_dir):
            shutil.copy(os.path.join(tok_dir, name), d)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(CONFIG, f, indent=1)
        env = dict(os.environ, PYTHONPATH=os.path.join(src, "gguf-py") + os.pathsep + os.environ.get("PYTHONPATH", ""))
        args = [os.path.join(src, "convert_hf_to_gguf.py"), d, "--vocab-only", "--outfile", gguf_path]
        try:
            run([sys.executable] + args, env=env)
            return "AutoConfig"
        except subprocess.CalledProcessError:
            print("converter failed with AutoConfig; again with config.json as written", flush=True)
        patch = (
            "import runpy, sys, transformers\n"
            "def refuse(*a, **k): raise ValueError('config.json as written')\n"
            "transformers.AutoConfig.from_pretrained = refuse\n"
            "sys.argv = sys.argv[1:]\n"
            "runpy.run_path(sys.argv[0], run_name='__main__')\n"
        )
        run([sys.executable, "-c", patch] + args, env=env)
        return "config.json"


def build_llama(src, build):
    """Builds libllama for the CPU and llama_refs.cpp against it."""
    if not os.path.exists(os.path.join(build, "bin", "libllama.so")):
        run(["cmake", "-S", src, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=ON",
             "-DGGML_CUDA=OFF", "-DGGML_OPENMP=OFF", "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF",
             "-DLLAMA_BUILD_COMMON=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_TOOLS=OFF",
             "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=OFF"])
        run(["cmake", "--build", build, "--target", "llama", "-j", str(os.cpu_count() or 4)])
    exe = os.path.join(build, "llama_refs")
    lib = os.path.join(build, "bin")
    here = os.path.dirname(os.path.abspath(__file__))
    run(["g++", "-std=c++17", "-O1", os.path.join(here, "llama_refs.cpp"),
         "-I", os.path.join(src, "include"), "-I", os.path.join(src, "ggml", "include"),
         "-I", os.path.join(src, "vendor"), "-L", lib, "-lllama", "-Wl,-rpath," + lib, "-o", exe])
    return exe


def llama_tokenize(exe, gguf_path, cases, work):
    """Adds llama.cpp's tokenizations to cases and returns what it says of
    the vocabulary."""
    texts_path = os.path.join(work, "texts.json")
    with open(texts_path, "w") as f:
        json.dump([{"hex": c["hex"] if "hex" in c else c["text"].encode("utf-8").hex()} for c in cases], f)
    out_path = os.path.join(work, "llama.json")
    run([exe, gguf_path, texts_path, out_path])
    with open(out_path) as f:
        got = json.load(f)
    for c, g in zip(cases, got["cases"]):
        c["llama_ids"] = g["ids"]
        c["llama_ids_plain"] = g["ids_plain"]
        c["llama_pieces_special_hex"] = g["pieces_special_hex"]
        c["llama_pieces_hex"] = g["pieces_hex"]
    return {"llama_" + k: got[k] for k in ("bos", "eos", "eot", "add_bos", "eog", "attrs")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--llama-cpp", metavar="SRC", help="a llama.cpp source tree: convert with it and tokenize with it")
    ap.add_argument("--llama-cpp-rev", metavar="REV", help="the llama.cpp commit SRC holds, recorded in the references")
    ap.add_argument("--build", metavar="DIR", help="where to build llama.cpp (default: a temporary folder)")
    ap.add_argument("--no-hf", action="store_true", help="without transformers: only the vocabulary written with gguf-py")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    refs = {"vocabularies": {}}
    tiny = odd = None

    if not args.no_hf:
        global tokenizers, transformers
        import tokenizers
        import transformers

        refs["transformers"], refs["tokenizers"] = transformers.__version__, tokenizers.__version__
        tok_dir = os.path.join(args.out, "gemma4-tiny")
        os.makedirs(tok_dir, exist_ok=True)
        tok = build_tokenizer(tok_dir)
        backend = getattr(tok, "backend_tokenizer", None) or tok._tokenizer
        cases = []
        for text in TEXTS:
            enc = backend.encode(text, add_special_tokens=False)
            cases.append({"text": text, "hf_ids": enc.ids, "hf_decoded": backend.decode(enc.ids, skip_special_tokens=False)})
        cases += [{"hex": raw.hex()} for raw in RAW]
        tiny = refs["vocabularies"]["gemma4-tiny"] = {
            "gguf": "gemma4-tiny.gguf",
            "made_by": "convert_hf_to_gguf.py --vocab-only of gemma4-tiny/ and CONFIG",
            "tokens": len(TOKENS), "merges": len(MERGES), "cases": cases,
        }
    if args.llama_cpp:
        refs["llama_cpp"] = args.llama_cpp_rev or "unrecorded"
        odd = refs["vocabularies"]["gemma4-odd"] = {
            "gguf": "gemma4-odd.gguf",
            "made_by": "gguf-py's GGUFWriter (write_odd_gguf)",
            "tokens": len(ODD_TOKENS), "merges": len(ODD_MERGES),
            "cases": [{"text": t} for t in ODD_TEXTS],
        }
        write_odd_gguf(args.llama_cpp, os.path.join(args.out, odd["gguf"]))
        if tiny is not None:
            tiny["converter_config"] = convert(args.llama_cpp, os.path.join(args.out, "gemma4-tiny"), os.path.join(args.out, tiny["gguf"]))
        with tempfile.TemporaryDirectory() as work:
            exe = build_llama(args.llama_cpp, args.build or os.path.join(work, "build"))
            for v in refs["vocabularies"].values():
                v.update(llama_tokenize(exe, os.path.join(args.out, v["gguf"]), v["cases"], work))
    with open(os.path.join(args.out, "refs-gemma4.json"), "w", encoding="utf-8") as f:
        json.dump(refs, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print({k: len(v["cases"]) for k, v in refs["vocabularies"].items()})


if __name__ == "__main__":
    main()
