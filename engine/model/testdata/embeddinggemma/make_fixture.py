#!/usr/bin/env python3
"""A tiny random-weight EmbeddingGemma (google/embeddinggemma-300m's
architecture, a sentence-transformers model) and its embeddings, as the
oracle for Hearth's importer and embedding path. Written for transformers
5.17, torch 2.11 and tokenizers 0.23 (sentence-transformers optional).

The model is engine/model/testdata/hf/make_fixtures.py's gemma3 family
(imported from there: its config, tokenizer, weight filling and f16
conventions) turned into an encoder as EmbeddingGemma is: Gemma3TextModel
(no LM head) with use_bidirectional_attention, 6 layers of which 5 slide
over a window of 8 (transformers: |i - j| < 8//2 + 1 = 5, both sides) and
the last is global, then sentence-transformers' modules: mean pooling, a
Dense 64->256 and a Dense 256->64 (no bias, no activation), L2 normalisation.

Usage: python3 make_fixture.py [OUTDIR]   (default: model/ beside this file)
writes OUTDIR (config.json, model.safetensors in f16, tokenizer files,
modules.json, 1_Pooling, 2_Dense, 3_Dense, 4_Normalize), and beside OUTDIR
expected.json (texts, ids, embeddings, ...) and make_fixture.log.
"""
import copy
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "hf"))
import make_fixtures as mf  # noqa: E402  (imports torch, transformers, tokenizers)

import tokenizers  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from tokenizers import processors  # noqa: E402

FAM = mf.FAMILIES["gemma3"]
WINDOW = FAM["config"]["sliding_window"]  # 8: what config.json says, as the real one says 512
HF_WINDOW = WINDOW // 2 + 1  # transformers' exclusive bound for a bidirectional window
SEED = 9100
DENSE_SEEDS = (9102, 9103)
DENSE_STD = 0.15  # mf's projection std; the scale cancels in the normalisation, the directions do not
DENSE_WIDTH = 4 * mf.HIDDEN  # 256, as the real 768 -> 3072 -> 768
# float32, as sentence-transformers saves a Dense by default (not checked
# against the gated real files); the values are f16-exact, so an importer
# that writes them as f16 loses nothing.
DENSE_DTYPE = torch.float32
# EmbeddingGemma's tokenizer puts <bos> first and (as far as could be checked
# without the gated files: third-party tokenizers that match
# sentence-transformers wrap its ids in BOS=2 ... EOS=1) <eos> last. Here that
# is mf's <s> ... </s>, said three ways that must agree: tokenizer.json's
# post-processor, tokenizer_config.json's add_bos/add_eos_token, and the ids.
ADD_EOS = True
# Short (inside one window), in between, and mf.prompt_for's 24-40 tokens
# (the gemma3 fixture's prompt), past the window many times over.
SHORT, MIDDLE = "The fire.", "Why does bread rise? Because the yeast breathes out gas."
MODULES = [
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
    {"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"},
    {"idx": 4, "name": "4", "path": "4_Normalize", "type": "sentence_transformers.models.Normalize"},
]

LOG = []


def log(msg=""):
    print(msg, flush=True)
    LOG.append(str(msg))


def write_json(path, obj, **kw):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, **kw)
        f.write("\n")


class Prefixed(torch.nn.Module):
    """The base model under .model, so that its parameters carry the
    ForCausalLM names mf.fill_weights keys its spreads on ("model.norm.weight"
    for the final norm's gain of 3): the family's weights, drawn as gemma3's."""

    def __init__(self, inner):
        super().__init__()
        self.model, self.config = inner, inner.config

    def get_input_embeddings(self):
        return self.model.get_input_embeddings()

    def get_output_embeddings(self):
        return None


# Eager attention: the plain softmax whose masked weights are exact zeros (reach).
def build(cfg):
    return transformers.AutoModel.from_config(cfg, attn_implementation="eager", dtype=torch.float32).float().eval()


def load(out):
    return transformers.AutoModel.from_pretrained(out, attn_implementation="eager", dtype=torch.float32).float().eval()


@torch.no_grad()
def run(model, ids, **kw):
    return model(input_ids=torch.tensor([ids], dtype=torch.long), use_cache=False, **kw)


def hidden(model, ids):
    return run(model, ids).last_hidden_state[0].float()


def reach(model, ids):
    """Per layer, the w for which key j is visible from query i iff
    |i - j| < w, read off the eager attention weights (a masked weight is
    exactly 0: exp of the dtype's minimum); raises if the visible keys are
    not such a symmetric band, as a causal mask's triangle is not."""
    att = run(model, ids, output_attentions=True).attentions
    if not att or len(att) != model.config.num_hidden_layers:
        raise RuntimeError("no attention weights per layer: output_attentions is needed to read the window")
    pos = torch.arange(len(ids))
    dist = (pos[:, None] - pos[None, :]).abs()
    out = []
    for i, a in enumerate(att):
        seen = a[0].amax(0) > 0
        w = int(dist[seen].max()) + 1
        if not torch.equal(seen, dist < w):
            raise RuntimeError(f"layer {i}: the visible keys are no symmetric band |i-j| < {w} (causal?)")
        out.append(w)
    return out


def widened(model):
    """model with a window wider than any text, through every knob the
    forward reads it from (the mask reads the config, flash the layers)."""
    m = copy.deepcopy(model)
    m.config.sliding_window = 4096
    for layer in m.layers:
        if getattr(layer.self_attn, "sliding_window", None):
            layer.self_attn.sliding_window = 4096
    return m


def fix_config_json(out):
    """config.json must say the declared window (8), as the real file says
    512: transformers' Gemma3TextConfig replaces sliding_window by
    sliding_window//2 + 1 when bidirectional, and versions that save that
    value would halve it again on every load. Returns what was written."""
    path = os.path.join(out, "config.json")
    with open(path, encoding="utf-8") as f:
        cj = json.load(f)
    want = {"model_type": "gemma3_text", "architectures": ["Gemma3TextModel"], "use_bidirectional_attention": True}
    for k, v in want.items():
        if cj.get(k) != v:
            raise RuntimeError(f"config.json: {k} is {cj.get(k)!r}, want {v!r}")
    written = cj.get("sliding_window")
    if written != WINDOW:
        cj["sliding_window"] = WINDOW
        write_json(path, cj, sort_keys=True)  # as transformers writes it
    return written


def write_tokenizer(tok, out):
    mf.write_tokenizer(tok, out)
    path = os.path.join(out, "tokenizer_config.json")
    with open(path, encoding="utf-8") as f:
        tcfg = json.load(f)
    # model_input_names: no token_type_ids, which Gemma3TextModel.forward lacks.
    tcfg.update(add_bos_token=True, add_eos_token=ADD_EOS, model_input_names=["input_ids", "attention_mask"])
    write_json(path, tcfg, ensure_ascii=False)


def write_st_layout(out, w2, w3):
    write_json(os.path.join(out, "modules.json"), MODULES)
    write_json(os.path.join(out, "sentence_bert_config.json"), {"max_seq_length": 512, "do_lower_case": False})
    versions = {"transformers": transformers.__version__, "pytorch": torch.__version__}
    try:
        import sentence_transformers

        versions["sentence_transformers"] = sentence_transformers.__version__
    except ImportError:
        pass
    # The real model's query and document prompts; encode() uses them only
    # when asked (default_prompt_name null), and the oracle never asks.
    prompts = {"query": "task: search result | query: ", "document": "title: none | text: "}
    write_json(
        os.path.join(out, "config_sentence_transformers.json"),
        {"model_type": "SentenceTransformer", "__version__": versions, "prompts": prompts,
         "default_prompt_name": None, "similarity_fn_name": "cosine"},
    )
    pool = {f"pooling_mode_{m}": m == "mean_tokens" for m in
            ("cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens", "weightedmean_tokens", "lasttoken")}
    write_json(os.path.join(out, "1_Pooling", "config.json"),
               {"word_embedding_dimension": mf.HIDDEN, **pool, "include_prompt": True})
    for name, w in (("2_Dense", w2), ("3_Dense", w3)):
        write_json(os.path.join(out, name, "config.json"), {
            "in_features": w.shape[1], "out_features": w.shape[0], "bias": False,
            "activation_function": "torch.nn.modules.linear.Identity"})
        save_file({"linear.weight": w.to(DENSE_DTYPE).contiguous()}, os.path.join(out, name, "model.safetensors"))
    # Normalize has no files; sentence-transformers wants the folder, git
    # drops it when empty, so a loader (Hearth's) must not require it.
    os.makedirs(os.path.join(out, "4_Normalize"), exist_ok=True)


def st_check(out, texts, ids, embs):
    """sentence-transformers' own tokenize() and encode() of the folder
    against the oracle, when it is installed and runs the folder at all; a
    mismatch raises."""
    try:
        import sentence_transformers as st

        m = st.SentenceTransformer(out, device="cpu", model_kwargs={"attn_implementation": "eager", "dtype": torch.float32})
        m = m.float()  # the f16 weights are f32-exact, so this only rules out an f16 forward
        got_ids = [m.tokenize([t])["input_ids"][0].tolist() for t in texts]
        # One text a call: no padding, so nothing but the modules differs.
        got = torch.stack([m.encode([t], convert_to_tensor=True)[0].double().cpu() for t in texts])
    except ImportError:
        return "skipped: sentence_transformers is not installed"
    except Exception as e:  # a kwarg or API this version has otherwise: printed, not fatal
        return f"skipped: sentence-transformers failed: {type(e).__name__}: {e}"
    if got_ids != ids:
        raise RuntimeError(f"sentence-transformers tokenizes the texts as {got_ids}, want {ids}")
    diff = float((got - embs).abs().max())
    if diff > 1e-4:
        raise RuntimeError(f"sentence-transformers' embeddings differ from the oracle by {diff}")
    return diff


def make(out):
    parent = os.path.dirname(os.path.abspath(out))
    if os.path.exists(out):
        if os.listdir(out) and not os.path.exists(os.path.join(out, "modules.json")):
            raise RuntimeError(f"{out} exists and is not a fixture folder: not removing it")
        shutil.rmtree(out)
    os.makedirs(out)
    log(f"transformers {transformers.__version__}, torch {torch.__version__}, tokenizers {tokenizers.__version__}")

    # Tokenizer and the three texts' ids, built explicitly: BOS, body, EOS.
    tok = mf.train_tokenizer(FAM["vocab"])
    bos, eos = mf.BOS_ID, mf.EOS_ID
    s_bos, s_eos = mf.SPECIALS[bos], mf.SPECIALS[eos]
    tail = f" {s_eos}:0" if ADD_EOS else ""
    tok.post_processor = processors.TemplateProcessing(
        single=f"{s_bos}:0 $A:0" + tail, pair=f"{s_bos}:0 $A:0" + tail + " $B:1" + tail.replace(":0", ":1"),
        special_tokens=[(s_bos, bos), (s_eos, eos)])
    long_text, _ = mf.prompt_for(tok)
    texts = [long_text, SHORT, MIDDLE]
    bodies = [tok.encode(t, add_special_tokens=False).ids for t in texts]
    ids = [[bos] + b + ([eos] if ADD_EOS else []) for b in bodies]
    n = [len(b) for b in bodies]
    if not (n[1] <= WINDOW and n[1] < n[2] < n[0] and 24 <= n[0] <= 40):
        raise RuntimeError(f"text lengths {n}: want short <= {WINDOW}, short < middle < long, long 24-40")
    for t, want in zip(texts, ids):
        if tok.encode(t).ids != want:
            raise RuntimeError(f"tokenizer.json's post-processor gives {tok.encode(t).ids} for {t!r}, want {want}")

    # Config: the gemma3 family made bidirectional, as EmbeddingGemma's.
    kw = dict(mf.COMMON, vocab_size=FAM["vocab"], **copy.deepcopy(FAM["config"]))
    kw["use_bidirectional_attention"] = True
    # EmbeddingGemma's own config has query_pre_attn_scalar = head_dim (256),
    # and llama.cpp's converter writes no scale for gemma-embedding (llama.cpp
    # scales by 1/sqrt(head_dim)); equal here too, so its file is checkable.
    kw["query_pre_attn_scalar"] = kw["head_dim"]
    cfg = transformers.AutoConfig.for_model("gemma3_text", **kw)
    built_window = cfg.sliding_window
    want_types = ["sliding_attention"] * 5 + ["full_attention"]
    if list(cfg.layer_types) != want_types:
        raise RuntimeError(f"layer_types {cfg.layer_types}, want {want_types}")
    log(f"config: sliding_window {WINDOW} reads back as {built_window} after construction")

    torch.manual_seed(SEED)
    model = build(cfg)
    if type(model).__name__ != "Gemma3TextModel":
        raise RuntimeError(f"AutoModel built {type(model).__name__}, want Gemma3TextModel")
    mf.fill_weights(Prefixed(model), FAM.get("gemma_norms", False), SEED, FAM.get("spread"))
    # A copy goes to f16 (exact: the weights are f16 values); converting the
    # model itself would round its RoPE buffers too.
    copy.deepcopy(model).to(torch.float16).save_pretrained(out)
    saved_window = fix_config_json(out)
    log(f"config.json: save_pretrained wrote sliding_window {saved_window}"
        + ("" if saved_window == WINDOW else f", rewritten to {WINDOW}"))
    header, _ = mf.safetensors_header(os.path.join(out, "model.safetensors"))
    bad = sorted(k for k, v in header.items() if v["dtype"] != "F16")
    if bad:
        raise RuntimeError(f"model.safetensors: not f16: {bad}")
    if "embed_tokens.weight" not in header:  # the real file's names are unprefixed (layers.N..., norm)
        log(f"WARNING: model.safetensors has no embed_tokens.weight: {sorted(header)[:3]}...")
    write_tokenizer(tok, out)
    hf_tok = transformers.AutoTokenizer.from_pretrained(out)
    for t, want in zip(texts, ids):
        got = hf_tok(t)["input_ids"]
        if list(got) != want:
            raise RuntimeError(f"AutoTokenizer gives {list(got)} for {t!r}, want {want}: the tokenizer files disagree")

    # transformers reading the folder back is the reference, so the window
    # it runs is what config.json says after one load: 8 -> 5, not 3.
    saved = load(out)
    checks = {"config_sliding_window_built": built_window, "config_json_sliding_window_saved": saved_window,
              "config_sliding_window_reloaded": saved.config.sliding_window}
    want_reach = [HF_WINDOW] * 5 + [len(ids[0])]
    for what, m in (("built", model), ("reloaded", saved)):
        r = reach(m, ids[0])
        if r != want_reach:
            raise RuntimeError(
                f"{what} model: attention reach per layer {r}, want {want_reach}: config.json says sliding_window "
                f"{WINDOW}, and one load should make it {HF_WINDOW} (|i-j| < {HF_WINDOW}); {r[0]} means this "
                f"transformers reads the saved window otherwise (halved twice if {(HF_WINDOW // 2) + 1})")
    checks["attention_reach"] = want_reach
    checks["reload_diff"] = max(float((hidden(saved, i) - hidden(model, i)).abs().max()) for i in ids)
    if checks["reload_diff"] > 1e-6:  # same weights, same code, same window
        raise RuntimeError(f"reloaded model differs from the one saved by {checks['reload_diff']}")

    # Bidirectional: the first token sees the last one (through the global
    # layer). Windowed: a window wider than the text changes the states.
    alt = list(ids[0])
    alt[-1] = next(t for t in range(len(mf.SPECIALS), FAM["vocab"]) if t != alt[-1])
    checks["bidirectional_effect"] = float((hidden(saved, alt)[0] - hidden(saved, ids[0])[0]).abs().max())
    if checks["bidirectional_effect"] < 1e-4:
        raise RuntimeError("changing the last token leaves the first token's state: the attention is causal")
    wide = widened(saved)
    if reach(wide, ids[0]) != [len(ids[0])] * 6:
        raise RuntimeError("widening the window did not reach every layer")
    checks["window_effect"] = float((hidden(wide, ids[0]) - hidden(saved, ids[0])).abs().max())
    if checks["window_effect"] < 1e-3:
        raise RuntimeError(f"the sliding window changes nothing (max {checks['window_effect']})")

    # sentence-transformers' modules by hand, in float64 from the float32 states.
    w2 = (DENSE_STD * torch.randn(DENSE_WIDTH, mf.HIDDEN, generator=torch.Generator().manual_seed(DENSE_SEEDS[0]))).half().float()
    w3 = (DENSE_STD * torch.randn(mf.HIDDEN, DENSE_WIDTH, generator=torch.Generator().manual_seed(DENSE_SEEDS[1]))).half().float()
    write_st_layout(out, w2, w3)
    pooled = torch.stack([hidden(saved, i).double().mean(0) for i in ids])
    projected = pooled @ w2.double().t() @ w3.double().t()
    embs = projected / projected.norm(dim=1, keepdim=True)
    checks["sentence_transformers"] = st_check(out, texts, ids, embs)

    expected = {
        "architecture": "Gemma3TextModel", "model_type": "gemma3_text", "texts": texts, "ids": ids,
        "bos_id": bos, "eos_id": eos, "add_bos": True, "add_eos": ADD_EOS,
        "embeddings": embs.tolist(), "pooled": pooled.tolist(), "projected": projected.tolist(),
        "hidden_size": mf.HIDDEN, "dense_width": DENSE_WIDTH, "embedding_size": mf.HIDDEN,
        "window": WINDOW, "hf_window": HF_WINDOW, "layer_types": want_types,
        "seed": SEED, "dense_seeds": list(DENSE_SEEDS), "checks": checks,
        "transformers_version": transformers.__version__, "torch_version": torch.__version__,
        "tokenizers_version": tokenizers.__version__,
    }
    write_json(os.path.join(parent, "expected.json"), expected)
    for t, i, e in zip(texts, ids, embs):
        log(f"{len(i):3d} tokens  emb[:4] {[round(float(x), 5) for x in e[:4]]}  {t!r}")
    log(" ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in checks.items()))
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(out) for f in fs)
    log(f"wrote {out} ({size / 1024:.0f} KiB) and {os.path.join(parent, 'expected.json')}")


def main(argv):
    out = argv[1] if len(argv) > 1 else os.path.join(HERE, "model")
    torch.set_num_threads(min(8, os.cpu_count() or 1))
    try:
        make(out)
        return 0
    except Exception as e:
        log(f"FAILED: {type(e).__name__}: {e}")
        raise
    finally:
        with open(os.path.join(os.path.dirname(os.path.abspath(out)), "make_fixture.log"), "w", encoding="utf-8") as f:
            f.write("\n".join(LOG) + "\n")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
