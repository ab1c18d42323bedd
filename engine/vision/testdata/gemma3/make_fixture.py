#!/usr/bin/env python3
"""A tiny random-weight Gemma 3 vision-language model (Gemma3ForConditionalGeneration:
a SigLIP tower, Gemma 3's projector and the gemma3 text family) with what
transformers computes for three images and three prompts, as the oracle for
Hearth's image input (llama.cpp's mmproj GGUF and the text GGUF beside it).
Written for transformers 5.17, torch 2.11 and tokenizers 0.23; numpy and PIL
(torchvision optional: when present, its resize is compared too).

The text model is engine/model/testdata/hf/make_fixtures.py's gemma3 family
(imported from there: its config, spreads, weight filling and f16
conventions): hidden 64, 6 layers (5 sliding over a window of 8, 1 global),
query_pre_attn_scalar 16 = head_dim as in the real models (the family's 24
is a scale llama.cpp's gemma3 cannot read: see make_config), a vocabulary
of 401 trained as mf.train_tokenizer trains it, with Gemma 3's
three image tokens as special tokens after mf's three: <start_of_image> 3,
<end_of_image> 4, <image_soft_token> 5. The tower is SigLIP as Gemma 3 has it
(no pooling head, tanh GELU, LayerNorm eps 1e-6), shrunk: a 32x32 input in
patches of 4 (an 8x8 grid of 64 patches), width 32, 2 layers of 2 heads, MLP
64. The projector average-pools the grid 2x2 to 16 tokens (mm_tokens_per_image
16), RMS-normalises them with a (1 + w) gain and multiplies by a 32x64 matrix.

The processor is transformers' own Gemma3Processor, loaded with AutoProcessor
from files written here as Google's are: preprocessor_config.json
(Gemma3ImageProcessor: 32x32, bilinear, 1/255, mean and std 0.5),
processor_config.json (image_seq_length 16), the tokenizer with the image
tokens named in extra_special_tokens, and a chat template (TEMPLATE) that puts
<start_of_image> where a message's image item is; the processor replaces each
with "\\n\\n<start_of_image>" + 16 x <image_soft_token> + "<end_of_image>\\n\\n".

The reference is transformers reading the saved folder back, float32 on the
CPU with eager attention: every position's logits of each prompt (the full
forward with pixel_values and token_type_ids, no KV cache) and an 8-token
greedy continuation, each step a full forward. The seed is retried (as
make_fixtures.py does) until every greedy step leads by mf.MIN_MARGIN, each
continuation has MIN_DISTINCT distinct tokens and none is an image token.

Checks that raise: the image tokens, processor and config as asked; every
weight f16-exact and the saved file all f16, in the layout of Google's files
(language_model.model.*, vision_tower.*, multi_modal_projector.*; rewritten
so if transformers saved its runtime names) that llama.cpp's converter maps;
the reloaded model equal to the built one; the token types 1 exactly on the
image tokens, in runs of 16; the projector recomputed here from the tower's
output (pool, norm, matmul) within FEATURE_TOL of get_image_features; the
tower recomputed here in float64 from its weights within TOWER_TOL; the
language model's input embeddings the text embeddings times sqrt(64) with the
image features, unscaled, on the image tokens; the image block's
bidirectional attention changing the logits (against token_type_ids of 0,
plain causal) by more than 1e-3; the whole greedy sequence in one forward
agreeing with the steps; and what llama.cpp's converter reads from the
folder. Reported, not raised (make_fixture.log, expected.json's checks): the
attention pattern transformers ran against the rule (causal, window on the
sliding layers, or the same image), the sliding window's effect, the
processor's expansion against the one above, the chat template as transformers
renders it, and which resize (PIL's or torchvision's) the pixel_values match.

Usage: python3 make_fixture.py [OUTDIR]   (default: model/ beside this file)
writes OUTDIR (the Hugging Face folder), and beside OUTDIR the three PNGs,
expected.json and make_fixture.log.
"""
import copy
import inspect
import json
import math
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "model", "testdata", "hf"))
import make_fixtures as mf  # noqa: E402  (imports torch, transformers, tokenizers)

import jinja2  # noqa: E402
import numpy as np  # noqa: E402
import PIL  # noqa: E402
import tokenizers  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from PIL import Image  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402

FAM = mf.FAMILIES["gemma3"]
VOCAB = FAM["vocab"]
WINDOW = FAM["config"]["sliding_window"]  # 8: key j is visible from i on a sliding layer iff i - j < 8
HIDDEN = mf.HIDDEN  # 64
BOI, EOI, IMAGE = "<start_of_image>", "<end_of_image>", "<image_soft_token>"  # Gemma 3's own strings
SPECIALS = mf.SPECIALS + [BOI, EOI, IMAGE]
BOI_ID, EOI_ID, IMAGE_ID = 3, 4, 5
IMAGE_IDS = {BOI_ID, EOI_ID, IMAGE_ID}

VISION = dict(
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_channels=3,
    image_size=32,
    patch_size=4,
    layer_norm_eps=1e-6,
    hidden_act="gelu_pytorch_tanh",
    attention_dropout=0.0,
    vision_use_head=False,
)
MM_TOKENS = 16
SIDE = VISION["image_size"] // VISION["patch_size"]  # 8 patches a side
TOKENS_SIDE = math.isqrt(MM_TOKENS)  # 4 tokens a side
POOL = SIDE // TOKENS_SIDE  # 2: llama.cpp's clip.vision.projector.scale_factor
# What the processor puts in place of each <start_of_image> of the text
# (Gemma3Processor's full_image_sequence).
FULL_IMAGE = f"\n\n{BOI}{IMAGE * MM_TOKENS}{EOI}\n\n"

# Google's preprocessor_config.json for Gemma 3, at this tower's 32x32
# (resample 2 is PIL's BILINEAR), with the pan-and-scan and RGB settings
# spelled out rather than null.
PREPROCESSOR = {
    "image_processor_type": "Gemma3ImageProcessor",
    "processor_class": "Gemma3Processor",
    "do_convert_rgb": True,
    "do_resize": True,
    "size": {"height": VISION["image_size"], "width": VISION["image_size"]},
    "resample": 2,
    "do_rescale": True,
    "rescale_factor": 1 / 255,
    "do_normalize": True,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "do_pan_and_scan": False,
    "pan_and_scan_max_num_crops": None,
    "pan_and_scan_min_crop_size": None,
    "pan_and_scan_min_ratio_to_activate": None,
    "image_seq_length": MM_TOKENS,
}

# mf's tiny template made multimodal: a message's content is a string or a
# list of items, an image item rendering as <start_of_image>. No
# whitespace control, so transformers' trim_blocks and lstrip_blocks leave
# the newlines alone.
TEMPLATE = (
    "{% for m in messages %}<s>{{ m['role'] }}\n"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}"
    "{% for c in m['content'] %}{% if c['type'] == 'image' %}" + BOI + "{% elif c['type'] == 'text' %}"
    "{{ c['text'] }}{% endif %}{% endfor %}{% endif %}</s>\n{% endfor %}"
    "{% if add_generation_prompt %}<s>assistant\n{% endif %}"
)

# file, width, height, seed: one at the tower's size (no resize), one
# downscaled and not square (the antialiasing filter widens), one upscaled.
IMAGES = [
    ("square_32x32.png", 32, 32, 31),
    ("wide_75x50.png", 75, 50, 32),
    ("tall_20x27.png", 20, 27, 33),
]
# Each prompt is one user turn; images indexes IMAGES in the order of the
# content's image items.
PROMPTS = [
    dict(name="one_image", images=[0],
         content=[{"type": "image"}, {"type": "text", "text": "Describe the picture in a few words."}]),
    dict(name="two_images", images=[0, 1],
         content=[{"type": "text", "text": "Look at"}, {"type": "image"}, {"type": "text", "text": "and then at"},
                  {"type": "image"}, {"type": "text", "text": "Which one is brighter?"}]),
    dict(name="image_last", images=[2],
         content=[{"type": "text", "text": "What does this one show?"}, {"type": "image"}]),
]

GEN_TOKENS = 8
# 3 distinct of 8 rules out one token repeated and ABAB (mf: 4 of 16).
MIN_DISTINCT = 3
FIRST_SEED = 9300
# The tower's generator seed is the text's plus this, so that the two draw
# unrelated numbers.
VISION_SEED_OFFSET = 1000
# The projector recomputed in float64 from the tower's float32 output: its
# values are ~1, float32 rounding ~1e-7, so 1e-5 leaves room for the
# summation order and still catches a wrong pool, norm or +1.
FEATURE_TOL = 1e-5
# The whole tower in float64 against torch's float32 through 2 layers: ~1e-6.
TOWER_TOL = 1e-4
# pixel_values that a resize by hand matches to this are the same resize
# (two spellings of the normalisation differ by 1-2 float32 ulps, ~2e-7);
# a resize that rounds otherwise differs by whole levels (2/255 = 0.0078).
PIXEL_TOL = 1e-6
MAX_JSON_BYTES = 1_600_000

# The spreads of the tower's weights, by name suffix. Pixels in [-1, 1] of
# RMS ~0.6 through a 48-input patch conv of std 0.3 give patch embeddings of
# RMS ~1.2, and position embeddings of std 0.5 are as large, so a wrong
# patch or position order moves the output. LayerNorm gains 1 +- 0.2 and
# biases 0.2 (below) make a dropped bias or gain show. q/k of std 0.2 on
# unit LayerNorm outputs make entries of ~1.1 and scores of std ~1.3 after
# the 16-dim head's 0.25: far from uniform attention. fc1's 0.2 puts the
# GELU's inputs at std ~1.1, where tanh and erf GELU differ by ~1e-4.
# The projection's 0.2 over 32 inputs gives image features of RMS ~1.1,
# as large as the text embeddings' 0.15 * sqrt(64) = 1.2.
VISION_STD = {
    "embeddings.patch_embedding.weight": 0.3,
    "embeddings.position_embedding.weight": 0.5,
    "self_attn.q_proj.weight": 0.2,
    "self_attn.k_proj.weight": 0.2,
    "self_attn.v_proj.weight": 0.2,
    "self_attn.out_proj.weight": 0.2,
    "mlp.fc1.weight": 0.2,
    "mlp.fc2.weight": 0.15,
    "mm_input_projection_weight": 0.2,
}
LAYER_NORM_GAINS = ("layer_norm1.weight", "layer_norm2.weight", "post_layernorm.weight")
SOFT_NORM = "mm_soft_emb_norm.weight"  # Gemma's RMSNorm: stores w of the gain 1 + w

# Names in model.safetensors that llama.cpp's converter maps (Google's layout).
CONVERTER_NAMES = (
    "language_model.model.embed_tokens.weight",
    "vision_tower.vision_model.embeddings.patch_embedding.weight",
    "vision_tower.vision_model.post_layernorm.weight",
    "multi_modal_projector.mm_input_projection_weight",
    "multi_modal_projector.mm_soft_emb_norm.weight",
)
# transformers' runtime names -> Google's.
LEGACY_PREFIXES = (
    ("model.language_model.", "language_model.model."),
    ("model.vision_tower.", "vision_tower."),
    ("model.multi_modal_projector.", "multi_modal_projector."),
)
TYPE_KEYS = ("token_type_ids", "mm_token_type_ids")

LOG = []


def log(msg=""):
    print(msg, flush=True)
    LOG.append(str(msg))


def write_json(path, obj, **kw):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, **kw)
        f.write("\n")


def floats(t):
    """t (tensor or array) as nested lists of the shortest decimals that read
    back as the same float32 values (checked), which JSON keeps exactly."""
    a = (t.detach().cpu().numpy() if torch.is_tensor(t) else np.asarray(t)).astype(np.float32)
    if not np.isfinite(a).all():
        raise RuntimeError("a value to write is not finite")
    flat = np.array([float(str(v)) for v in a.ravel()], dtype=np.float64)
    if not np.array_equal(flat.astype(np.float32), a.ravel()):
        raise RuntimeError("shortest float32 decimals do not read back exactly")
    return flat.reshape(a.shape).tolist()


def dump(obj, indent=0):
    """JSON with a line per key and per list of scalars (a row of logits is
    one line): readable, and about half json.dump(indent=...)'s size."""
    pad = " " * indent
    if isinstance(obj, dict) and obj:
        items = [f"{pad} {json.dumps(k)}: {dump(v, indent + 1)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list) and obj and all(isinstance(x, (list, dict)) for x in obj):
        return "[\n" + ",\n".join(pad + " " + dump(x, indent + 1) for x in obj) + "\n" + pad + "]"
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


# IMAGES


def draw_image(width, height, seed):
    """An RGB picture with structure: red and green gradients across and
    down, blue waves, a bright disc and a dark bar placed by seed, and a
    little noise, so that resizing, channel order and patch order show."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    u, v = x / (width - 1), y / (height - 1)
    img = np.stack([255 * u, 255 * v, 128 + 100 * np.sin(2 * np.pi * (u + v) * rng.uniform(1.5, 3.0))], axis=-1)
    cx, cy, r = rng.uniform(0.3, 0.7) * width, rng.uniform(0.3, 0.7) * height, 0.22 * min(width, height)
    img[(x - cx) ** 2 + (y - cy) ** 2 < r * r] = rng.uniform(180, 255, 3)
    x0, y0 = int(rng.integers(0, width // 2)), int(rng.integers(0, height // 2))
    img[y0 : y0 + max(2, height // 6), x0 : x0 + width // 2] = rng.uniform(0, 60, 3)
    img += rng.normal(0, 6, img.shape)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def write_images(parent):
    """Draws IMAGES, writes them as PNGs into parent and reads them back
    (the processor gets what a decoder of the file gets)."""
    out = []
    for name, width, height, seed in IMAGES:
        arr = draw_image(width, height, seed)
        path = os.path.join(parent, name)
        Image.fromarray(arr).save(path, format="PNG")
        img = Image.open(path)
        img.load()
        if img.mode != "RGB" or img.size != (width, height) or not np.array_equal(np.asarray(img), arr):
            raise RuntimeError(f"{name}: the PNG does not read back as written ({img.mode} {img.size})")
        out.append(dict(file=name, width=width, height=height, image=img))
    return out


# TOKENIZER AND PROCESSOR


def train_tokenizer():
    """mf.train_tokenizer's byte-level BPE of the family's 401 tokens, with
    the three image tokens as specials after mf's three (three merges fewer)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        min_frequency=1,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([mf.TEXT], trainer=trainer)
    if tok.get_vocab_size(with_added_tokens=True) != VOCAB:
        raise RuntimeError(f"tokenizer: trained {tok.get_vocab_size(with_added_tokens=True)} tokens, want {VOCAB}")
    for i, s in enumerate(SPECIALS):
        if tok.token_to_id(s) != i:
            raise RuntimeError(f"tokenizer: {s} has id {tok.token_to_id(s)}, want {i}")
    return tok


def write_tokenizer(tok, out):
    """mf's tokenizer files with this fixture's chat template, and the image
    tokens named as Google's tokenizer_config.json names them (top-level
    keys and extra_special_tokens, the dict transformers' own Gemma 3
    conversion passes): transformers makes them the tokenizer's boi_token,
    eoi_token and image_token (and image_token_id), which Gemma3Processor
    reads."""
    mf.write_tokenizer(tok, out)
    path = os.path.join(out, "tokenizer_config.json")
    with open(path, encoding="utf-8") as f:
        cfg = json.load(f)
    named = {"boi_token": BOI, "eoi_token": EOI, "image_token": IMAGE}
    cfg.update(named, chat_template=TEMPLATE, extra_special_tokens=named)
    write_json(path, cfg, ensure_ascii=False)
    # Where transformers 5 and the processor look for the template first.
    with open(os.path.join(out, "chat_template.jinja"), "w", encoding="utf-8") as f:
        f.write(TEMPLATE)


def write_processor_files(out):
    write_json(os.path.join(out, "preprocessor_config.json"), PREPROCESSOR)
    write_json(os.path.join(out, "processor_config.json"),
               {"image_seq_length": MM_TOKENS, "processor_class": "Gemma3Processor"})


def load_processor(out):
    """AutoProcessor of out, after checking that the tokenizer it builds on
    has the image tokens Gemma3Processor needs."""
    tok = transformers.AutoTokenizer.from_pretrained(out)
    named = {k: getattr(tok, k, None) for k in ("boi_token", "eoi_token", "image_token", "image_token_id")}
    ids = tok.convert_tokens_to_ids([BOI, EOI, IMAGE])
    if named != {"boi_token": BOI, "eoi_token": EOI, "image_token": IMAGE, "image_token_id": IMAGE_ID} or ids != [
        BOI_ID, EOI_ID, IMAGE_ID,
    ]:
        raise RuntimeError(
            f"{type(tok).__name__}: image tokens {named}, ids {ids}: Gemma3Processor needs the tokenizer's "
            f"boi_token, eoi_token, image_token and image_token_id, which tokenizer_config.json's "
            f"extra_special_tokens should give in transformers {transformers.__version__}")
    proc = transformers.AutoProcessor.from_pretrained(out)
    if type(proc).__name__ != "Gemma3Processor":
        raise RuntimeError(f"AutoProcessor gave {type(proc).__name__}, want Gemma3Processor")
    if getattr(proc, "image_seq_length", None) != MM_TOKENS:
        raise RuntimeError(f"processor image_seq_length {getattr(proc, 'image_seq_length', None)}, want {MM_TOKENS}")
    return proc


def processor_summary(proc):
    """The processor's image settings as read from the objects
    transformers built (not from the files written)."""
    ip = proc.image_processor
    size = ip.size
    size = {k: (size.get(k) if isinstance(size, dict) else getattr(size, k, None)) for k in ("height", "width")}
    resample = getattr(ip, "resample", None)
    resize = inspect.signature(ip.resize).parameters
    summary = {
        "class": type(proc).__name__,
        "image_processor_class": type(ip).__name__,
        "backend": getattr(ip, "backend", None),
        "image_seq_length": proc.image_seq_length,
        "full_image_sequence": getattr(proc, "full_image_sequence", None),
        "do_convert_rgb": getattr(ip, "do_convert_rgb", None),
        "do_resize": getattr(ip, "do_resize", None),
        "size": size,
        "resample": int(resample) if isinstance(resample, int) else str(resample),
        "resample_name": Image.Resampling(int(resample)).name if isinstance(resample, int) else str(resample),
        "resize_antialias_default": resize["antialias"].default if "antialias" in resize else None,
        "do_rescale": getattr(ip, "do_rescale", None),
        "rescale_factor": getattr(ip, "rescale_factor", None),
        "do_normalize": getattr(ip, "do_normalize", None),
        "image_mean": [float(x) for x in ip.image_mean],
        "image_std": [float(x) for x in ip.image_std],
        "do_pan_and_scan": getattr(ip, "do_pan_and_scan", None),
    }
    want = {"size": {"height": 32, "width": 32}, "image_mean": [0.5] * 3, "image_std": [0.5] * 3,
            "do_resize": True, "do_rescale": True, "do_normalize": True}
    for k, v in want.items():
        if summary[k] != v:
            raise RuntimeError(f"image processor {k} is {summary[k]!r}, want {v!r}")
    if abs(float(summary["rescale_factor"]) - 1 / 255) > 1e-12:
        raise RuntimeError(f"image processor rescale_factor {summary['rescale_factor']}, want 1/255")
    return json.loads(json.dumps(summary, default=str))


def prompt_text(content):
    """The chat turn TEMPLATE renders for content (one user message and the
    generation prompt)."""
    body = "".join(BOI if c["type"] == "image" else c["text"] for c in content)
    return f"<s>user\n{body}</s>\n<s>assistant\n"


def template_check(proc, content):
    """TEMPLATE rendered by jinja2 as transformers sets it up must be
    prompt_text (raises); the processor's apply_chat_template is reported."""
    messages = [{"role": "user", "content": content}]
    want = prompt_text(content)
    mine = jinja2.Environment(trim_blocks=True, lstrip_blocks=True).from_string(TEMPLATE).render(
        messages=messages, add_generation_prompt=True)
    if mine != want:
        raise RuntimeError(f"TEMPLATE renders {mine!r}, want {want!r}")
    try:
        theirs = proc.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    except Exception as e:  # an API this version has otherwise: reported, not fatal
        return f"skipped: apply_chat_template failed: {type(e).__name__}: {e}"
    if isinstance(theirs, list) and len(theirs) == 1:
        theirs = theirs[0]
    if theirs != want:
        log(f"WARNING: apply_chat_template renders {theirs!r}, jinja2 {want!r}")
        return f"differs: {theirs!r}"
    return "equal"


def encode(proc, text, images):
    """The processor's model inputs for one text and its images: input_ids,
    attention_mask, the token types and pixel_values (others dropped)."""
    enc = proc(text=[text], images=[images], return_tensors="pt")
    types = next((k for k in TYPE_KEYS if k in enc), None)
    if types is None:
        raise RuntimeError(f"the processor gave no token types (keys {sorted(enc.keys())}): the image mask needs them")
    keys = [k for k in ("input_ids", "attention_mask", types, "pixel_values") if k in enc]
    dropped = sorted(set(enc.keys()) - set(keys))
    inputs = {k: enc[k] for k in keys}
    inputs["pixel_values"] = inputs["pixel_values"].float()
    return inputs, dropped


def type_key(inputs):
    return next(k for k in TYPE_KEYS if k in inputs)


def image_spans(ids):
    """[start, end) of each run of image tokens."""
    spans, start = [], None
    for i, t in enumerate(ids + [None]):
        if t == IMAGE_ID and start is None:
            start = i
        elif t != IMAGE_ID and start is not None:
            spans.append([start, i])
            start = None
    return spans


def check_encoding(proc, prompt, text, inputs):
    """Raises unless the token types are 1 exactly on the image tokens and
    each image is one run of MM_TOKENS; reports the expansion around it
    against FULL_IMAGE. Returns the record of the prompt's tokens."""
    ids = inputs["input_ids"][0].tolist()
    types = inputs[type_key(inputs)][0].tolist()
    if types != [int(t == IMAGE_ID) for t in ids]:
        raise RuntimeError(f"{prompt['name']}: token types {types} are not 1 exactly on the image tokens of {ids}")
    spans = image_spans(ids)
    n = len(prompt["images"])
    if len(spans) != n or any(e - s != MM_TOKENS for s, e in spans):
        raise RuntimeError(f"{prompt['name']}: image token runs {spans}, want {n} of {MM_TOKENS}")
    shape = tuple(inputs["pixel_values"].shape)
    if shape != (n, 3, VISION["image_size"], VISION["image_size"]):
        raise RuntimeError(f"{prompt['name']}: pixel_values {shape}, want ({n}, 3, 32, 32) (no pan-and-scan crops)")
    tok = proc.tokenizer
    expanded = text.replace(BOI, FULL_IMAGE)
    decoded = tok.decode(ids, skip_special_tokens=False)
    as_expected = tok(expanded, add_special_tokens=False)["input_ids"] == ids
    if not as_expected:
        log(f"WARNING: {prompt['name']}: the processor's ids are not those of {expanded!r}; they decode as {decoded!r}")
    elif decoded != expanded:
        log(f"WARNING: {prompt['name']}: the ids decode as {decoded!r}, not {expanded!r}")
    return {
        "expanded_text": expanded if as_expected else decoded,
        "expansion_as_expected": as_expected,
        "input_ids": ids,
        "tokens": tok.convert_ids_to_tokens(ids),
        "token_type_ids": types,
        "image_spans": spans,
        "bracketed_by_boi_eoi": all(0 < s and e < len(ids) and ids[s - 1] == BOI_ID and ids[e] == EOI_ID
                                    for s, e in spans),
    }


def resized_by_hand(img, how):
    """img resized to the tower's input as uint8 channels-first: "pil" by
    PIL's BILINEAR (what transformers' PIL backend calls), "torchvision" by
    its antialiased bilinear on uint8 (the torchvision backend's call)."""
    n = VISION["image_size"]
    if how == "pil":
        return np.asarray(img.resize((n, n), resample=Image.Resampling.BILINEAR), dtype=np.uint8).transpose(2, 0, 1)
    from torchvision.transforms.v2 import functional as tvF

    t = torch.from_numpy(np.array(img, dtype=np.uint8)).permute(2, 0, 1).contiguous()
    return tvF.resize(t, [n, n], interpolation=tvF.InterpolationMode.BILINEAR, antialias=True).numpy()


def preprocess_check(img, pv, summary):
    """How far pixel_values are from whole uint8 levels (0: the resize
    rounds to uint8 before rescaling) and from PIL's and torchvision's
    resizes normalised by hand; which one they match is reported."""
    mean = np.array(summary["image_mean"], dtype=np.float32)[:, None, None]
    std = np.array(summary["image_std"], dtype=np.float32)[:, None, None]
    scale = float(summary["rescale_factor"])
    pv = pv.numpy().astype(np.float64)
    levels = (pv * std + mean) / scale
    rec = {"uint8_rounding": float(np.abs(levels - np.rint(levels)).max())}
    for how in ("pil", "torchvision"):
        try:
            u = resized_by_hand(img, how)
        except Exception as e:  # torchvision absent or not loadable with this torch: reported
            if how == "pil":
                raise
            rec[how] = f"skipped: {type(e).__name__}: {e}"
            continue
        mine = ((u.astype(np.float64) * scale).astype(np.float32) - mean) / std
        rec[how] = float(np.abs(mine - pv).max())
    rec["matches"] = [h for h in ("pil", "torchvision") if isinstance(rec[h], float) and rec[h] <= PIXEL_TOL]
    if not rec["matches"]:
        log(f"WARNING: pixel_values match neither resize by hand: {rec}")
    return rec


# MODEL


class Prefixed(torch.nn.Module):
    """The text model under .model, so that its parameters carry the
    ForCausalLM names mf.fill_weights keys its spreads on ("model.norm.weight"
    for the final norm's gain of 3): the family's weights, drawn as gemma3's."""

    def __init__(self, inner):
        super().__init__()
        self.model, self.config = inner, inner.config

    def get_input_embeddings(self):
        return self.model.get_input_embeddings()

    def get_output_embeddings(self):
        return None


def make_config():
    """Gemma3Config of the gemma3 family's text config, VISION and the image
    token ids; raises unless transformers kept them."""
    text = dict(mf.COMMON, vocab_size=VOCAB, **copy.deepcopy(FAM["config"]))
    # Gemma 3 4B's config has query_pre_attn_scalar = head_dim (256), and
    # llama.cpp's converter writes no attention scale for gemma3 (llama.cpp
    # scales by 1/sqrt(head_dim), save for the 27B); equal here too (16, not
    # the family's 24), so that the text GGUF's logits are transformers'.
    text["query_pre_attn_scalar"] = text["head_dim"]
    cfg = transformers.AutoConfig.for_model(
        "gemma3", text_config=text, vision_config=dict(VISION), mm_tokens_per_image=MM_TOKENS,
        boi_token_index=BOI_ID, eoi_token_index=EOI_ID, image_token_index=IMAGE_ID, tie_word_embeddings=True)
    if type(cfg).__name__ != "Gemma3Config":
        raise RuntimeError(f"AutoConfig built {type(cfg).__name__}, want Gemma3Config")
    want_types = ["sliding_attention"] * 5 + ["full_attention"]
    tc, vc = cfg.text_config, cfg.vision_config
    if list(tc.layer_types) != want_types or tc.sliding_window != WINDOW or tc.vocab_size != VOCAB:
        raise RuntimeError(
            f"text config: layer_types {tc.layer_types}, window {tc.sliding_window}, vocab {tc.vocab_size}")
    for k, v in VISION.items():
        if getattr(vc, k, None) != v:
            raise RuntimeError(f"vision config {k} is {getattr(vc, k, None)!r}, want {v!r}")
    got = (cfg.image_token_id, cfg.boi_token_index, cfg.eoi_token_index, cfg.mm_tokens_per_image)
    if got != (IMAGE_ID, BOI_ID, EOI_ID, MM_TOKENS):
        raise RuntimeError(f"image_token_id, boi, eoi, mm_tokens_per_image are {got}")
    return cfg


def check_eager(m):
    """Fails unless the text model and the tower run eager attention (the
    plain softmax whose masked weights are exact zeros)."""
    for what, c in (("text", m.config.text_config), ("vision", m.config.vision_config)):
        impl = getattr(c, "_attn_implementation", "eager")
        if impl != "eager":
            raise RuntimeError(f"{what} attention implementation is {impl}, want eager")


def build(cfg):
    auto = transformers.AutoModelForImageTextToText
    try:
        m = auto.from_config(cfg, dtype=torch.float32, attn_implementation="eager")
    except TypeError:  # older spelling
        m = auto.from_config(cfg, torch_dtype=torch.float32, attn_implementation="eager")
    if type(m).__name__ != "Gemma3ForConditionalGeneration":
        raise RuntimeError(f"AutoModelForImageTextToText built {type(m).__name__}")
    check_eager(m)
    return m.float().eval()


def load(out):
    auto = transformers.AutoModelForImageTextToText
    try:
        m = auto.from_pretrained(out, dtype=torch.float32, attn_implementation="eager")
    except TypeError:
        m = auto.from_pretrained(out, torch_dtype=torch.float32, attn_implementation="eager")
    if type(m).__name__ != "Gemma3ForConditionalGeneration":
        raise RuntimeError(f"the saved folder loads as {type(m).__name__}")
    check_eager(m)
    return m.float().eval()


def part(model, name):
    """Gemma3Model's vision_tower, multi_modal_projector or language_model."""
    m = getattr(getattr(model, "model", None), name, None)
    if m is None:
        raise RuntimeError(f"{type(model).__name__} has no model.{name}")
    return m


def vision_value(name, r):
    """The tower's or projector's parameter name drawn from r (standard
    normal): see VISION_STD."""
    if name.endswith(SOFT_NORM):
        return 0.2 * r  # gains 1 +- 0.2; a reader that forgets the +1 gets gains near 0
    if name.endswith(LAYER_NORM_GAINS):
        return 1.0 + 0.2 * r
    if name.endswith(".bias"):
        return 0.2 * r
    std = next((s for k, s in VISION_STD.items() if name.endswith(k)), None)
    if std is None:
        raise RuntimeError(f"{name}: no spread for this vision parameter (a pooling head? a renamed weight?)")
    return std * r


@torch.no_grad()
def seeded_model(cfg, seed):
    """The model with every weight drawn from seed and rounded to f16: the
    text model by mf.fill_weights (gemma3's spreads and gain-1 norms), the
    tower and projector by vision_value from seed + VISION_SEED_OFFSET."""
    torch.manual_seed(seed)
    model = build(cfg)
    lm = part(model, "language_model")
    if type(lm).__name__ != "Gemma3TextModel":
        raise RuntimeError(f"language model is {type(lm).__name__}, want Gemma3TextModel")
    mf.fill_weights(Prefixed(lm), True, seed, FAM.get("spread"))
    g = torch.Generator().manual_seed(seed + VISION_SEED_OFFSET)
    for prefix in ("vision_tower", "multi_modal_projector"):
        for name, p in part(model, prefix).named_parameters():
            r = torch.randn(tuple(p.shape), generator=g, dtype=torch.float32)
            p.copy_(vision_value(f"{prefix}.{name}", r).half().float())
    # The head is the embedding (tied); should this version hold a copy,
    # make it agree, as from_pretrained ties them on reload.
    head, emb = model.get_output_embeddings(), lm.get_input_embeddings()
    if head is not None and head.weight is not emb.weight:
        head.weight.copy_(emb.weight)
    for name, p in model.named_parameters():
        if not torch.equal(p, p.half().float()):
            raise RuntimeError(f"{name}: not f16-exact after fill")
    return model


def run(model, inputs, **kw):
    return model(**inputs, use_cache=False, **kw)


def logits_of(model, inputs):
    return run(model, inputs).logits[0].float()


def extend(inputs, tokens):
    """inputs with text tokens appended: their ids, token type 0, mask 1."""
    out = dict(inputs)
    t = torch.tensor([tokens], dtype=torch.long)
    out["input_ids"] = torch.cat([inputs["input_ids"], t], dim=1)
    for key, fill in ((type_key(inputs), 0), ("attention_mask", 1)):
        if key in out:
            out[key] = torch.cat([out[key], torch.full_like(t, fill).to(out[key].dtype)], dim=1)
    return out


def greedy(model, inputs, n):
    """Up to n greedy tokens, each from a full forward pass of the sequence so
    far (pixel_values every time, no cache), the smallest lead of the best
    logit over the second, and each step's logits. Stops at an image token:
    the next pass would have one image token more than image features."""
    seq, new, margin, rows = inputs, [], math.inf, []
    for _ in range(n):
        last = logits_of(model, seq)[-1]
        top = torch.topk(last, 2)
        t = int(top.indices[0])
        margin = min(margin, float(top.values[0] - top.values[1]))
        new.append(t)
        rows.append(last)
        if t == IMAGE_ID:
            break
        seq = extend(seq, [t])
    return new, margin, torch.stack(rows)


def search_seed(cfg, encodings):
    """The first seed from FIRST_SEED whose greedy continuations of every
    prompt are GEN_TOKENS long without image tokens, lead by mf.MIN_MARGIN
    at every step and hold MIN_DISTINCT distinct tokens (else the best one
    found, with a warning; none without image tokens fails)."""
    best = None
    for seed in range(FIRST_SEED, FIRST_SEED + mf.MAX_SEED_TRIES):
        model = seeded_model(cfg, seed)
        runs = [greedy(model, e, GEN_TOKENS) for e in encodings]
        clean = all(len(r[0]) == GEN_TOKENS and not set(r[0]) & IMAGE_IDS for r in runs)
        margin = min(r[1] for r in runs)
        distinct = min(len(set(r[0])) for r in runs)
        rank = (clean, margin >= mf.MIN_MARGIN, min(distinct, MIN_DISTINCT), margin)
        if best is None or rank > best[0]:
            best = (rank, seed, model, runs)
        if rank[:3] == (True, True, MIN_DISTINCT):
            break
    rank, seed, model, runs = best
    if not rank[0]:
        raise RuntimeError(f"no seed of {mf.MAX_SEED_TRIES} gives greedy continuations without image tokens")
    if rank[1:3] != (True, MIN_DISTINCT):
        log(f"WARNING: no seed leads by {mf.MIN_MARGIN} with {MIN_DISTINCT} distinct tokens; "
            f"seed {seed} leads by {rank[3]:.4g}")
    return seed, model, runs


# SAVED FOLDER


def legacy_layout(out):
    """Rewrites model.safetensors in the layout of Google's Gemma 3 files
    (language_model.model.*, vision_tower.*, multi_modal_projector.*, no
    lm_head: it is the embedding), the names llama.cpp's converter maps,
    when transformers saved its runtime names; returns what it did."""
    path = os.path.join(out, "model.safetensors")
    if not os.path.exists(path):
        raise RuntimeError(f"no model.safetensors in {out}: {sorted(os.listdir(out))}")
    header, _ = mf.safetensors_header(path)
    names = sorted(header)
    google = ("language_model.", "vision_tower.vision_model.", "multi_modal_projector.")
    if all(n.startswith(google) for n in names) and not any(n.endswith("lm_head.weight") for n in names):
        return "as transformers saved it"
    renamed = {}
    for name, t in load_file(path).items():
        if name.endswith("lm_head.weight"):
            continue
        new = next((old + name[len(p):] for p, old in LEGACY_PREFIXES if name.startswith(p)), None)
        if new is None and name.startswith(("language_model.", "vision_tower.", "multi_modal_projector.")):
            new = name
        if new is None:
            raise RuntimeError(f"model.safetensors: {name}: no name in Google's layout is known for it")
        # transformers 5.17 saves the tower without SiglipVisionModel's
        # vision_model level (vision_tower.embeddings.*); Google's files
        # and the converter have it.
        if new.startswith("vision_tower.") and not new.startswith("vision_tower.vision_model."):
            new = "vision_tower.vision_model." + new[len("vision_tower."):]
        renamed[new] = t.contiguous()
    save_file(renamed, path, metadata={"format": "pt"})
    return f"renamed from transformers' names ({names[0]}, ...)"


def saved_checks(out):
    """Fails unless model.safetensors is all f16 and holds the names the
    converter maps. Returns the tensor count."""
    header, _ = mf.safetensors_header(os.path.join(out, "model.safetensors"))
    bad = sorted(k for k, v in header.items() if v["dtype"] != "F16")
    if bad:
        raise RuntimeError(f"model.safetensors: not f16: {bad}")
    missing = [n for n in CONVERTER_NAMES if n not in header]
    if missing:
        raise RuntimeError(f"model.safetensors lacks {missing}; has {sorted(header)[:6]}...")
    if any(".head." in k for k in header):
        raise RuntimeError("model.safetensors holds a SigLIP pooling head, which Gemma 3 has not")
    return len(header)


def converter_view(out):
    """What llama.cpp's converter reads for the mmproj (MmprojModel and
    Gemma3VisionModel): the preprocessor files merged as it merges them, the
    config as AutoConfig gives it; raises unless it finds what it needs and
    would write clip.vision.projector.scale_factor POOL."""
    pre = {}
    for name, nested in (("preprocessor_config.json", "media_proc_cfg"), ("processor_config.json", "image_processor")):
        path = os.path.join(out, name)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                cfg = json.load(f)
            pre.update({**cfg, **cfg.get(nested, {})})
    missing = [k for k in ("image_mean", "image_std", "image_seq_length") if k not in pre]
    if missing:
        raise RuntimeError(f"the converter would not find {missing} in the preprocessor files")
    hp = transformers.AutoConfig.from_pretrained(out).to_dict()
    vc = hp.get("vision_config") or {}
    need = ("image_size", "patch_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")
    if [k for k in need if k not in vc] or (hp.get("architectures") or [None])[0] != "Gemma3ForConditionalGeneration":
        raise RuntimeError(f"config.json: architectures {hp.get('architectures')}, vision_config keys {sorted(vc)}")
    if {**hp, **(hp.get("text_config") or {})}.get("hidden_size") != HIDDEN:
        raise RuntimeError("config.json: the converter would not find the text hidden size")
    scale = (vc["image_size"] // vc["patch_size"]) // int(pre["image_seq_length"] ** 0.5)
    if scale != POOL:
        raise RuntimeError(f"the converter would write scale_factor {scale}, want {POOL}")
    return {"image_seq_length": pre["image_seq_length"], "projector_scale_factor": scale,
            "image_mean": pre["image_mean"], "image_std": pre["image_std"]}


# REFERENCES BY HAND


def weight(sd, name):
    if name not in sd:
        raise RuntimeError(f"no weight {name}; have {sorted(sd)[:8]}...")
    return sd[name].double()


def layer_norm(x, sd, name, eps):
    mu = x.mean(-1, keepdim=True)
    var = (x - mu).pow(2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * weight(sd, name + ".weight") + weight(sd, name + ".bias")


def linear(x, sd, name):
    return x @ weight(sd, name + ".weight").t() + weight(sd, name + ".bias")


def gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x.pow(3))))


@torch.no_grad()
def tower_by_hand(model, pv):
    """SigLIP's last_hidden_state for one image, in float64 from the
    weights: patch conv (stride = kernel = patch size) + position embedding,
    patches row-major; per layer x += attn(LN1(x)), x += fc2(gelu_tanh(
    fc1(LN2(x)))); then the post LayerNorm. Patches x vision hidden."""
    if VISION["hidden_act"] != "gelu_pytorch_tanh":
        raise RuntimeError("tower_by_hand computes the tanh GELU only")
    sd = {k.removeprefix("vision_model."): v for k, v in part(model, "vision_tower").state_dict().items()}
    eps, heads, d = VISION["layer_norm_eps"], VISION["num_attention_heads"], VISION["hidden_size"]
    hd = d // heads
    x = torch.nn.functional.conv2d(pv[None].double(), weight(sd, "embeddings.patch_embedding.weight"),
                                   weight(sd, "embeddings.patch_embedding.bias"), stride=VISION["patch_size"])
    x = x.flatten(2)[0].t() + weight(sd, "embeddings.position_embedding.weight")
    for i in range(VISION["num_hidden_layers"]):
        p = f"encoder.layers.{i}."
        h = layer_norm(x, sd, p + "layer_norm1", eps)
        q, k, v = (linear(h, sd, p + f"self_attn.{n}_proj").reshape(-1, heads, hd).transpose(0, 1) for n in "qkv")
        a = torch.softmax(q @ k.transpose(1, 2) * hd**-0.5, dim=-1) @ v
        x = x + linear(a.transpose(0, 1).reshape(-1, d), sd, p + "self_attn.out_proj")
        h = layer_norm(x, sd, p + "layer_norm2", eps)
        x = x + linear(gelu_tanh(linear(h, sd, p + "mlp.fc1")), sd, p + "mlp.fc2")
    return layer_norm(x, sd, "post_layernorm", eps)


@torch.no_grad()
def project_by_hand(model, hidden):
    """Gemma3MultiModalProjector in float64 from the tower's output
    (patches x 32): the 8x8 grid (patch = row * 8 + col) average-pooled 2x2
    to 4x4 (token = row * 4 + col), RMS-normalised with gain 1 + w and eps
    the tower's layer_norm_eps, times mm_input_projection_weight [32, 64]."""
    sd = part(model, "multi_modal_projector").state_dict()
    d = VISION["hidden_size"]
    grid = hidden.double().reshape(SIDE, SIDE, d)
    pooled = grid.reshape(TOKENS_SIDE, POOL, TOKENS_SIDE, POOL, d).mean(dim=(1, 3)).reshape(MM_TOKENS, d)
    normed = pooled * torch.rsqrt(pooled.pow(2).mean(-1, keepdim=True) + VISION["layer_norm_eps"])
    return (normed * (1.0 + weight(sd, SOFT_NORM))) @ weight(sd, "mm_input_projection_weight")


@torch.no_grad()
def image_outputs(model, pv):
    """The tower's last_hidden_state (patches x 32) and get_image_features
    (tokens x 64) of one image. transformers 5 returns the tower's output
    with the projection in pooler_output, 4.x the projection itself."""
    hidden = part(model, "vision_tower")(pixel_values=pv[None]).last_hidden_state
    got = model.model.get_image_features(pixel_values=pv[None])
    feats = got if torch.is_tensor(got) else getattr(got, "pooler_output", None)
    if not torch.is_tensor(feats) or tuple(feats.shape) != (1, MM_TOKENS, HIDDEN):
        raise RuntimeError(f"get_image_features gave {type(got).__name__} {getattr(feats, 'shape', None)}")
    if tuple(hidden.shape) != (1, SIDE * SIDE, VISION["hidden_size"]):
        raise RuntimeError(f"vision tower last_hidden_state {tuple(hidden.shape)}")
    return hidden[0].float(), feats[0].float()


@torch.no_grad()
def embeddings_check(model, inputs, features):
    """The largest difference between what the language model receives
    (inputs_embeds, read by a hook) and the text embeddings times sqrt(64)
    with the image features, unscaled, on the image tokens; None when this
    transformers passes them otherwise."""
    lm = part(model, "language_model")
    got = {}
    h = lm.register_forward_pre_hook(lambda m, a, kw: got.update(x=kw.get("inputs_embeds")), with_kwargs=True)
    try:
        run(model, inputs)
    finally:
        h.remove()
    if not torch.is_tensor(got.get("x")):
        return None
    ids = inputs["input_ids"][0]
    want = lm.get_input_embeddings().weight[ids].float() * math.sqrt(HIDDEN)
    want[ids == IMAGE_ID] = torch.cat(features)
    return float((got["x"][0].float() - want).abs().max())


def rule(types, layer_types):
    """Per layer, the keys each query may see by Gemma 3's rule: causal,
    within the window (i - j < WINDOW) on the sliding layers, or else in the
    same image (a run of token type 1), both ways and past the window."""
    types = np.asarray(types)
    start = (types == 1) & np.concatenate([[True], types[:-1] != 1])
    group = np.where(types == 1, np.cumsum(start) - 1, -1)
    i, j = np.arange(len(types))[:, None], np.arange(len(types))[None, :]
    same = (group[:, None] == group[None, :]) & (group[:, None] >= 0)
    return [((j <= i) & ((i - j < WINDOW) | (lt != "sliding_attention"))) | same for lt in layer_types]


@torch.no_grad()
def pattern_check(model, inputs, want):
    """Compares the keys each query saw in every text layer (eager weights:
    a masked one is exactly 0) with want; "matches", "differs: ..." or
    "skipped: ..." when this transformers returns no such weights."""
    out = run(model, inputs, output_attentions=True)
    T, tc = inputs["input_ids"].shape[1], model.config.text_config
    shape = (1, tc.num_attention_heads, T, T)
    att = [a for a in (out.attentions or ()) if torch.is_tensor(a) and tuple(a.shape) == shape]
    if len(att) != tc.num_hidden_layers:
        return f"skipped: {len(att)} text attention maps of {tc.num_hidden_layers}"
    for layer, (a, w) in enumerate(zip(att, want)):
        seen = (a[0] > 0).any(0).numpy()
        if not np.array_equal(seen, w):
            i, j = map(int, np.argwhere(seen != w)[0])
            return f"differs: layer {layer} query {i} key {j} seen {bool(seen[i, j])}, rule {bool(w[i, j])}"
    return "matches"


def window_effect(model, inputs):
    """The largest logit change when the sliding window is made wider than
    the prompt: zero means the window does not cut into it."""
    cfg = copy.deepcopy(model.config)
    cfg.text_config.sliding_window = 4096
    wide = build(cfg)
    wide.load_state_dict(model.state_dict())
    return float((logits_of(model, inputs) - logits_of(wide, inputs)).abs().max())


# THE FIXTURE


def prompt_reference(saved, p, inputs, steps, checks):
    """A prompt's logits and greedy continuation from the saved model, with
    its mask checks; returns the expected.json fields."""
    name, tc = p["name"], saved.config.text_config
    logits = logits_of(saved, inputs)
    new, margin, rows = greedy(saved, inputs, GEN_TOKENS)
    if new != steps[0]:
        raise RuntimeError(f"{name}: the reloaded model's greedy {new} != {steps[0]}")
    # The whole greedy sequence in one pass: row T-1+i is the step that chose
    # token i. Same weights and code, only the length differs, so only
    # torch's shape-dependent blocking moves rows (~1e-6); 1e-4 of the logit
    # range is the Go tests' bound.
    T = logits.shape[0]
    whole = logits_of(saved, extend(inputs, new[:-1]))
    for i, t in enumerate(new):
        if int(whole[T - 1 + i].argmax()) != t:
            raise RuntimeError(f"{name}: whole-sequence row {T - 1 + i} argmax is not greedy token {t}")
    gdiff = max(float((whole[:T] - logits).abs().max()), float((whole[T - 1 :] - rows).abs().max()))
    if gdiff > 1e-4 * float(logits.max() - logits.min()):
        raise RuntimeError(f"{name}: the whole-sequence forward differs from the steps by {gdiff}")

    types = inputs[type_key(inputs)][0].tolist()
    c = {"greedy_whole_diff": gdiff}
    c["attention_rule"] = pattern_check(saved, inputs, rule(types, tc.layer_types))
    causal = dict(inputs)
    causal[type_key(inputs)] = torch.zeros_like(inputs[type_key(inputs)])
    c["causal_variant_rule"] = pattern_check(saved, causal, rule([0] * len(types), tc.layer_types))
    c["bidirectional_effect"] = float((logits_of(saved, causal) - logits).abs().max())
    if c["bidirectional_effect"] <= 1e-3:
        raise RuntimeError(f"{name}: the image block's bidirectional attention changes no logit "
                           f"(max {c['bidirectional_effect']}; the causal variant's mask {c['causal_variant_rule']})")
    c["window_effect"] = window_effect(saved, inputs)
    c["window_cuts"] = T > WINDOW and c["window_effect"] > 1e-3
    for k in ("attention_rule", "causal_variant_rule"):
        if c[k] != "matches":
            log(f"{'WARNING' if c[k].startswith('differs') else 'note'}: {name}: {k} {c[k]}")
    if not c["window_cuts"]:
        log(f"note: {name}: the sliding window does not cut into the prompt "
            f"({T} tokens, effect {c['window_effect']:.3g})")
    checks.setdefault("prompts", {})[name] = c
    log(f"{name}: {T} tokens, greedy {new} (lead {margin:.3g}), bidirectional {c['bidirectional_effect']:.3g}, "
        f"window {c['window_effect']:.3g}, rule {c['attention_rule']}, causal variant {c['causal_variant_rule']}")
    return {"logits_shape": list(logits.shape), "logits": floats(logits), "greedy_ids": new,
            "greedy_min_margin": margin, "greedy_logits": floats(rows)}


def make(out):
    parent = os.path.dirname(os.path.abspath(out))
    if os.path.exists(out):
        if os.listdir(out) and not os.path.exists(os.path.join(out, "preprocessor_config.json")):
            raise RuntimeError(f"{out} exists and is not a fixture folder: not removing it")
        shutil.rmtree(out)
    os.makedirs(out)
    versions = {"transformers": transformers.__version__, "torch": torch.__version__,
                "tokenizers": tokenizers.__version__, "numpy": np.__version__, "PIL": PIL.__version__}
    try:
        import torchvision

        versions["torchvision"] = torchvision.__version__
    except Exception:  # absent, or not loadable with this torch
        pass
    log(" ".join(f"{k} {v}" for k, v in versions.items()))
    checks = {}

    images = write_images(parent)
    cfg = make_config()
    cfg.save_pretrained(out)  # config.json first: the Auto loaders below may read it
    write_tokenizer(train_tokenizer(), out)
    write_processor_files(out)
    proc = load_processor(out)
    summary = processor_summary(proc)
    log(f"processor {summary['class']} with {summary['image_processor_class']} (backend {summary['backend']}): "
        f"{summary['size']} {summary['resample_name']} antialias default {summary['resize_antialias_default']}, "
        f"rescale {summary['rescale_factor']}, mean {summary['image_mean']}, std {summary['image_std']}")

    # The prompts' texts and inputs, and each image's pixel_values as the
    # prompts got them (an image in two prompts must get the same values).
    prompts, encodings, pixels = [], [], {}
    for p in PROMPTS:
        text = prompt_text(p["content"])
        checks.setdefault("chat_template", {})[p["name"]] = template_check(proc, p["content"])
        inputs, dropped = encode(proc, text, [images[i]["image"] for i in p["images"]])
        rec = check_encoding(proc, p, text, inputs)
        for k, i in enumerate(p["images"]):
            pv = inputs["pixel_values"][k]
            if i in pixels and not torch.equal(pixels[i], pv):
                raise RuntimeError(f"image {i} has other pixel_values in {p['name']}")
            pixels[i] = pv
        prompts.append({"name": p["name"], "messages": [{"role": "user", "content": p["content"]}],
                        "images": p["images"], "text": text, **rec, "model_inputs": sorted(inputs),
                        "dropped_processor_outputs": dropped})
        encodings.append(inputs)
        log(f"{p['name']}: {len(rec['input_ids'])} tokens, image spans {rec['image_spans']}, "
            f"expansion {'as expected' if rec['expansion_as_expected'] else 'OTHER (see WARNING)'}")
    checks["preprocess"] = {}
    for i, im in enumerate(images):
        rec = preprocess_check(im["image"], pixels[i], summary)
        checks["preprocess"][im["file"]] = rec
        log(f"{im['file']} {im['width']}x{im['height']}: pixel_values {rec}")

    seed, model, steps = search_seed(cfg, encodings)
    log(f"seed {seed}")
    copy.deepcopy(model).to(torch.float16).save_pretrained(out)
    checks["safetensors_layout"] = legacy_layout(out)
    checks["safetensors_tensors"] = saved_checks(out)
    log(f"model.safetensors: {checks['safetensors_tensors']} f16 tensors, layout {checks['safetensors_layout']}")
    saved = load(out)
    checks["reload_diff"] = max(float((logits_of(saved, e) - logits_of(model, e)).abs().max()) for e in encodings)
    if checks["reload_diff"] > 1e-6:  # the same weights through the same code
        raise RuntimeError(f"the reloaded model differs from the one saved by {checks['reload_diff']} "
                           f"(safetensors layout: {checks['safetensors_layout']})")
    checks["converter"] = converter_view(out)

    # Each image through the tower and projector, and both by hand.
    records, features = [], []
    checks["tower_by_hand"], checks["projector_by_hand"] = {}, {}
    for i, im in enumerate(images):
        hidden, feats = image_outputs(saved, pixels[i])
        tdiff = float((tower_by_hand(saved, pixels[i]) - hidden.double()).abs().max())
        pdiff = float((project_by_hand(saved, hidden) - feats.double()).abs().max())
        checks["tower_by_hand"][im["file"]], checks["projector_by_hand"][im["file"]] = tdiff, pdiff
        if pdiff > FEATURE_TOL:
            raise RuntimeError(f"{im['file']}: the projector by hand differs from get_image_features by {pdiff}")
        if tdiff > TOWER_TOL:
            raise RuntimeError(f"{im['file']}: the tower by hand differs from last_hidden_state by {tdiff}")
        features.append(feats)
        rec = {"file": im["file"], "width": im["width"], "height": im["height"],
               "pixel_values_shape": list(pixels[i].shape), "pixel_values": floats(pixels[i].reshape(-1)),
               "image_features_shape": list(feats.shape), "image_features": floats(feats)}
        if i == 0:
            rec["vision_hidden_shape"] = list(hidden.shape)
            rec["vision_hidden"] = floats(hidden)
        records.append(rec)
        log(f"{im['file']}: features RMS {float(feats.pow(2).mean().sqrt()):.3f}, tower by hand {tdiff:.3g}, "
            f"projector by hand {pdiff:.3g}")

    two = next(k for k, p in enumerate(PROMPTS) if len(p["images"]) == 2)
    emb = embeddings_check(saved, encodings[two], [features[i] for i in PROMPTS[two]["images"]])
    if emb is not None and emb > 1e-6:
        raise RuntimeError(f"the language model's input differs from scaled text embeddings and unscaled image "
                           f"features by {emb}")
    checks["embeddings"] = emb if emb is not None else "skipped: the hook saw no inputs_embeds"
    log(f"language model input: text embeddings * sqrt({HIDDEN}), image features unscaled: {checks['embeddings']}")

    for p, rec, inputs, st in zip(PROMPTS, prompts, encodings, steps):
        rec.update(prompt_reference(saved, p, inputs, st, checks))

    tc = saved.config.text_config
    expected = {
        "architecture": "Gemma3ForConditionalGeneration",
        "versions": versions,
        "seed": seed,
        "vision_seed": seed + VISION_SEED_OFFSET,
        "config": {
            "text": {"hidden_size": tc.hidden_size, "intermediate_size": tc.intermediate_size,
                     "num_hidden_layers": tc.num_hidden_layers, "num_attention_heads": tc.num_attention_heads,
                     "num_key_value_heads": tc.num_key_value_heads, "head_dim": tc.head_dim,
                     "vocab_size": tc.vocab_size, "sliding_window": tc.sliding_window,
                     "layer_types": list(tc.layer_types), "query_pre_attn_scalar": tc.query_pre_attn_scalar,
                     "rms_norm_eps": tc.rms_norm_eps, "rope_parameters": mf.rope_summary(tc),
                     "embed_scale": math.sqrt(tc.hidden_size)},
            "vision": dict(VISION, patches_per_side=SIDE, patches=SIDE * SIDE),
            "mm_tokens_per_image": MM_TOKENS, "tokens_per_side": TOKENS_SIDE, "pool_kernel": POOL,
            "soft_emb_norm_eps": VISION["layer_norm_eps"],
            "boi_token": BOI, "eoi_token": EOI, "image_token": IMAGE,
            "boi_token_id": BOI_ID, "eoi_token_id": EOI_ID, "image_token_id": IMAGE_ID,
            "pad_token_id": mf.PAD_ID, "bos_token_id": mf.BOS_ID, "eos_token_id": mf.EOS_ID,
            "add_bos": False, "chat_template": TEMPLATE,
        },
        "processor": summary,
        "images": records,
        "prompts": prompts,
        "checks": checks,
    }
    text = dump(expected) + "\n"
    if json.loads(text) != expected:
        raise RuntimeError("expected.json does not read back as written")
    path = os.path.join(parent, "expected.json")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    size = os.path.getsize(path)
    if size > MAX_JSON_BYTES:
        log(f"WARNING: expected.json is {size} bytes, over {MAX_JSON_BYTES}")
    folder = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(out) for f in fs)
    log(f"wrote {out} ({folder / 1024:.0f} KiB) and {path} ({size / 1024:.0f} KiB)")


def main(argv):
    out = argv[1] if len(argv) > 1 else os.path.join(HERE, "model")
    torch.set_num_threads(min(8, os.cpu_count() or 1))
    try:
        with torch.no_grad():
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
