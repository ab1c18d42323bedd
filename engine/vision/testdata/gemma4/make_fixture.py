#!/usr/bin/env python3
"""A tiny random-weight Gemma 4 vision-language model
(Gemma4ForConditionalGeneration: the Gemma 4 vision tower, its multimodal
embedder and the gemma4 text family) with what transformers computes for four
images and three prompts, as the oracle for Hearth's Gemma 4 image input
(llama.cpp's mmproj GGUF, projector_type gemma4v, and the text GGUF beside it).
Meant to live at engine/vision/testdata/gemma4/make_fixture.py. Written for
transformers 5.17, torch 2.11, tokenizers 0.23, torchvision, numpy and PIL.
See docs/gemma4-vision.md for the references (TF = transformers' modeling_gemma4.py).

The text model is engine/model/testdata/hf/make_fixtures.py's gemma4 family,
unchanged (imported: its config, spreads, weight filling, layer scalars):
hidden 64, 6 layers (sliding, sliding, full, twice; window 8), the last two
sharing KV, full layers with 32-wide heads and proportional RoPE, double-wide
MLP on the shared layers, per-layer embeddings of 8, a final soft-cap of 30,
use_bidirectional_attention None (E2B/E4B: image tokens are causal), a
byte-level BPE of 457 tokens whose specials are mf's three and then Gemma 4's
seven multimodal strings: <pad> 0, <s> 1, </s> 2, <|image> 3 (boi), <image|> 4
(eoi), <|image|> 5 (the image soft token), <|audio> 6, <audio|> 7, <|audio|> 8,
<|video|> 9 (Gemma4Processor needs the audio names and adds the video one).

The tower is Gemma 4's, shrunk: width 32, 2 blocks of 2 heads of 16, MLP 64,
patches of 4, 3x3 pooling, position tables of 128 per axis, tanh GELU, RMS eps
1e-6, RoPE theta 100; with BOTH use_clipped_linears (E2B/E4B) and standardize
(26B/31B). 32 != 3*4*4 = 48 != 64, so a transposed matrix cannot pass. The
clamp bounds are calibrated on the fixture's own images to cut into every
linear's input and output range (each of the 56 bounds must clip something).

The processor is transformers' own Gemma4Processor with max_soft_tokens 70
(the smallest budget it allows: 630 patches), built here, saved, and read back
with AutoProcessor. Each image becomes <|image> + n x <|image|> + <image|>.

The reference is transformers reading the saved folder back, float32 on the
CPU, eager attention: every position's logits of each prompt and an 8-token
greedy continuation (each step a full forward with pixel_values), the tower's
output before pooling, the pooled soft tokens and the projected features,
everything recomputed by hand in float64 (tower, pooling, standardization,
projector) and a set of variants (QuickGELU, projection-then-norm, no clamps,
no standardization) that must each move the features, so that the fixture
decides the questions on which llama.cpp and Ollama differ from transformers.

Usage: python3 make_fixture.py [OUTDIR]   (default: model/ beside this file)
writes OUTDIR (the Hugging Face folder), and beside OUTDIR the four PNGs,
expected.json and make_fixture.log.
"""
import copy
import hashlib
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
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402

FAM = mf.FAMILIES["gemma4"]
VOCAB = FAM["vocab"]  # 457
WINDOW = FAM["config"]["sliding_window"]  # 8
HIDDEN = mf.HIDDEN  # 64, the text width D
PLE_DIM = FAM["config"]["hidden_size_per_layer_input"]  # 8

BOI, EOI, IMAGE = "<|image>", "<image|>", "<|image|>"  # Gemma 4's own strings
BOA, EOA, AUDIO, VIDEO = "<|audio>", "<audio|>", "<|audio|>", "<|video|>"
SPECIALS = mf.SPECIALS + [BOI, EOI, IMAGE, BOA, EOA, AUDIO, VIDEO]
BOI_ID, EOI_ID, IMAGE_ID, BOA_ID, EOA_ID, AUDIO_ID, VIDEO_ID = range(3, 10)
IMAGE_IDS = set(range(3, 10))  # a greedy step must produce none of these
# Named as Google's tokenizer_config.json names them (transformers makes them
# the tokenizer's attributes, with *_id); Gemma4Processor reads these.
NAMED = {"boi_token": BOI, "eoi_token": EOI, "image_token": IMAGE,
         "boa_token": BOA, "eoa_token": EOA, "audio_token": AUDIO}

VISION = dict(
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=2,
    head_dim=16,  # = hidden / heads: llama.cpp derives it so; divisible by 4 for the 2-D RoPE
    hidden_activation="gelu_pytorch_tanh",
    rms_norm_eps=1e-6,  # llama.cpp's converter writes 1e-6 whatever this says
    patch_size=4,
    pooling_kernel_size=3,
    position_embedding_size=128,  # > every patch coordinate here and llama.cpp's 48-wide warm-up grid
    use_clipped_linears=True,
    standardize=True,
    attention_bias=False,
    attention_dropout=0.0,
    rope_parameters={"rope_type": "default", "rope_theta": 100.0},
)
PATCH = VISION["patch_size"]
POOL = VISION["pooling_kernel_size"]
MAX_SOFT = 70  # the smallest of Gemma4ImageProcessor's (70, 140, 280, 560, 1120)
MAX_PATCHES = MAX_SOFT * POOL * POOL  # 630
LINEARS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
           "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
BOUNDS = ("input_min", "input_max", "output_min", "output_max")
# How far inside the calibrated [min, max] of each linear's real-patch input
# and output each bound sits, as a fraction of the range: distinct per bound
# so that a reader swapping min and max, or input and output, fails.
BOUND_INSET = {"input_min": 0.15, "input_max": 0.20, "output_min": 0.10, "output_max": 0.25}

# mf's tiny template made multimodal: an image item renders as the image
# token, as Gemma 4's own template does; the processor expands it.
TEMPLATE = (
    "{% for m in messages %}<s>{{ m['role'] }}\n"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}"
    "{% for c in m['content'] %}{% if c['type'] == 'image' %}" + IMAGE + "{% elif c['type'] == 'text' %}"
    "{{ c['text'] }}{% endif %}{% endfor %}{% endif %}</s>\n{% endfor %}"
    "{% if add_generation_prompt %}<s>assistant\n{% endif %}"
)

# file, width, height, seed. The first three are Gemma 3's fixture images
# (same drawing, same seeds); with 630 patches of 4 they are all upscaled:
# 32x32 -> 96x96 (64 tokens), 75x50 -> 120x72 (60), 20x27 -> 84x108 (63).
# The fourth is downscaled, 160x120 -> 108x84 (63), where the antialiasing
# of the bicubic resize matters.
IMAGES = [
    ("square_32x32.png", 32, 32, 31),
    ("wide_75x50.png", 75, 50, 32),
    ("tall_20x27.png", 20, 27, 33),
    ("big_160x120.png", 160, 120, 34),
]
PROMPTS = [
    dict(name="one_image", images=[0],
         content=[{"type": "image"}, {"type": "text", "text": "Describe the picture in a few words."}]),
    dict(name="two_images", images=[1, 3],
         content=[{"type": "text", "text": "Look at"}, {"type": "image"}, {"type": "text", "text": "and then at"},
                  {"type": "image"}, {"type": "text", "text": "Which one is brighter?"}]),
    dict(name="image_last", images=[2],
         content=[{"type": "text", "text": "What does this one show?"}, {"type": "image"}]),
]

GEN_TOKENS = 8
MIN_DISTINCT = 3
FIRST_SEED = 9400
VISION_SEED_OFFSET = 1000
# The projector in float64 from the pooled float32 soft tokens (~1e-7 apart).
FEATURE_TOL = 1e-5
# The whole tower in float64 against torch's float32, relative to the
# largest entry (2 blocks, clamps: ~1e-6 expected).
TOWER_TOL = 1e-4
# A variant (QuickGELU, post-norm, no clamps, no standardization) must move
# some feature by more than this, or the fixture would not tell them apart.
VARIANT_MIN = 1e-3
MAX_JSON_BYTES = 4_000_000

# The spreads of the tower's weights, by name suffix (TF names). Pixels
# 2x-1 of RMS ~0.6 through 48 inputs of std 0.3 give patch embeddings of RMS
# ~1.2; position tables of 0.5 per axis are as large. q/k norm gains 0.5 +-
# 0.1 make q.k (scale 1, 16 dims) of std ~1: far from uniform, not one-hot.
# gate's 0.3 over 32 unit inputs puts the GELU's inputs at std ~1.7, where
# tanh GELU and QuickGELU differ by up to ~0.02. The projection's 0.2 over
# 32 unit inputs gives features of RMS ~1.1, as large as the text
# embeddings' 0.15 * 8.
VISION_STD = {
    "patch_embedder.input_proj.weight": 0.3,
    "patch_embedder.position_embedding_table": 0.5,
    "self_attn.q_proj.linear.weight": 0.25,
    "self_attn.k_proj.linear.weight": 0.25,
    "self_attn.v_proj.linear.weight": 0.25,
    "self_attn.o_proj.linear.weight": 0.25,
    "mlp.gate_proj.linear.weight": 0.3,
    "mlp.up_proj.linear.weight": 0.25,
    "mlp.down_proj.linear.weight": 0.2,
    "embedding_projection.weight": 0.2,
}
QK_NORMS = ("self_attn.q_norm.weight", "self_attn.k_norm.weight")
BLOCK_NORMS = ("input_layernorm.weight", "post_attention_layernorm.weight",
               "pre_feedforward_layernorm.weight", "post_feedforward_layernorm.weight")

# Names llama.cpp's converters read (the real checkpoints' layout is
# transformers' own: nothing is renamed here, unlike Gemma 3).
CONVERTER_NAMES = (
    "model.language_model.embed_tokens.weight",
    "model.language_model.embed_tokens_per_layer.weight",
    "model.vision_tower.patch_embedder.input_proj.weight",
    "model.vision_tower.patch_embedder.position_embedding_table",
    "model.vision_tower.encoder.layers.0.self_attn.q_proj.linear.weight",
    "model.vision_tower.encoder.layers.0.self_attn.q_proj.input_min",
    "model.vision_tower.encoder.layers.0.self_attn.q_norm.weight",
    "model.vision_tower.std_bias",
    "model.vision_tower.std_scale",
    "model.embed_vision.embedding_projection.weight",
)
TYPE_KEY = "mm_token_type_ids"

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
    """Shortest decimals that read back as the same float32 values (checked)."""
    a = (t.detach().cpu().numpy() if torch.is_tensor(t) else np.asarray(t)).astype(np.float32)
    if not np.isfinite(a).all():
        raise RuntimeError("a value to write is not finite")
    flat = np.array([float(str(v)) for v in a.ravel()], dtype=np.float64)
    if not np.array_equal(flat.astype(np.float32), a.ravel()):
        raise RuntimeError("shortest float32 decimals do not read back exactly")
    return flat.reshape(a.shape).tolist()


def dump(obj, indent=0):
    """JSON with a line per key and per list of scalars (as Gemma 3's)."""
    pad = " " * indent
    if isinstance(obj, dict) and obj:
        items = [f"{pad} {json.dumps(k)}: {dump(v, indent + 1)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list) and obj and all(isinstance(x, (list, dict)) for x in obj):
        return "[\n" + ",\n".join(pad + " " + dump(x, indent + 1) for x in obj) + "\n" + pad + "]"
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def f16(x):
    return float(torch.tensor(float(x)).half().float())


# IMAGES


def draw_image(width, height, seed):
    """Gemma 3's fixture drawing: gradients, waves, a disc, a bar, noise."""
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
    out = []
    for name, width, height, seed in IMAGES:
        arr = draw_image(width, height, seed)
        path = os.path.join(parent, name)
        Image.fromarray(arr).save(path, format="PNG")
        img = Image.open(path)
        img.load()
        if img.mode != "RGB" or img.size != (width, height) or not np.array_equal(np.asarray(img), arr):
            raise RuntimeError(f"{name}: the PNG does not read back as written")
        out.append(dict(file=name, width=width, height=height, image=img))
    return out


def target_size(h, w):
    """TF image_processing_gemma4.get_aspect_ratio_preserving_size (l.33-84),
    written out here so that the fixture checks the processor against it."""
    side = POOL * PATCH
    f = math.sqrt(MAX_PATCHES * PATCH * PATCH / (h * w))
    th, tw = int(math.floor(f * h / side)) * side, int(math.floor(f * w / side)) * side
    max_side = (MAX_PATCHES // POOL**2) * side
    if th == 0 and tw == 0:
        raise RuntimeError("0 x 0 target")
    if th == 0:
        th, tw = side, min(int(math.floor(w / h)) * side, max_side)
    elif tw == 0:
        tw, th = side, min(int(math.floor(h / w)) * side, max_side)
    return th, tw


# TOKENIZER AND PROCESSOR


def train_tokenizer():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, min_frequency=1, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([mf.TEXT], trainer=trainer)
    if tok.get_vocab_size(with_added_tokens=True) != VOCAB:
        raise RuntimeError(f"tokenizer: trained {tok.get_vocab_size(with_added_tokens=True)} tokens, want {VOCAB}")
    for i, s in enumerate(SPECIALS):
        if tok.token_to_id(s) != i:
            raise RuntimeError(f"tokenizer: {s} has id {tok.token_to_id(s)}, want {i}")
    return tok


def write_tokenizer(tok, out):
    """mf's tokenizer files, the chat template, and Gemma 4's named
    multimodal tokens (top-level keys and extra_special_tokens, as Google's
    tokenizer_config.json and transformers' Gemma 4 conversion have them)."""
    mf.write_tokenizer(tok, out)
    path = os.path.join(out, "tokenizer_config.json")
    with open(path, encoding="utf-8") as f:
        cfg = json.load(f)
    cfg.update(NAMED, chat_template=TEMPLATE, extra_special_tokens=dict(NAMED))
    write_json(path, cfg, ensure_ascii=False)
    with open(os.path.join(out, "chat_template.jinja"), "w", encoding="utf-8") as f:
        f.write(TEMPLATE)


def check_tokenizer(tok):
    got = {k: getattr(tok, k, None) for k in NAMED}
    ids = tok.convert_tokens_to_ids(SPECIALS[3:])
    if got != NAMED or ids != list(range(3, 10)) or getattr(tok, "image_token_id", None) != IMAGE_ID:
        raise RuntimeError(f"{type(tok).__name__}: named tokens {got}, ids {ids}, image_token_id "
                           f"{getattr(tok, 'image_token_id', None)}: Gemma4Processor needs them")


def build_processor(out):
    """Gemma4Processor as transformers' Gemma 4 conversion builds it
    (convert_gemma4_weights.py l.2619-2635), at this fixture's patch size and
    budget; saved into out."""
    tok = transformers.AutoTokenizer.from_pretrained(out)
    check_tokenizer(tok)
    kw = dict(patch_size=PATCH, max_soft_tokens=MAX_SOFT, pooling_kernel_size=POOL, do_normalize=False)
    try:
        ip = transformers.Gemma4ImageProcessor(**kw)  # the torchvision backend
    except Exception as e:  # torchvision absent: the PIL one
        log(f"note: Gemma4ImageProcessor unavailable ({type(e).__name__}: {e}); using Gemma4ImageProcessorPil")
        ip = transformers.Gemma4ImageProcessorPil(**kw)
    proc = transformers.Gemma4Processor(
        feature_extractor=transformers.Gemma4AudioFeatureExtractor(),
        image_processor=ip,
        tokenizer=tok,
        video_processor=transformers.Gemma4VideoProcessor(),
        chat_template=TEMPLATE,
        image_seq_length=MAX_SOFT,
    )
    proc.save_pretrained(out)
    return proc


def load_processor(out, built):
    """AutoProcessor of out; the built one (reported) should that fail."""
    try:
        proc = transformers.AutoProcessor.from_pretrained(out)
        how = "AutoProcessor"
    except Exception as e:
        log(f"WARNING: AutoProcessor.from_pretrained failed ({type(e).__name__}: {e}); using the built processor")
        proc, how = built, "built"
    if type(proc).__name__ != "Gemma4Processor":
        raise RuntimeError(f"processor is {type(proc).__name__}, want Gemma4Processor")
    check_tokenizer(proc.tokenizer)
    if proc.tokenizer.convert_tokens_to_ids(VIDEO) != VIDEO_ID or len(proc.tokenizer) != VOCAB:
        raise RuntimeError(f"the processor's tokenizer has {len(proc.tokenizer)} tokens, video id "
                           f"{proc.tokenizer.convert_tokens_to_ids(VIDEO)}: it added a token")
    return proc, how


def processor_summary(proc, how):
    ip = proc.image_processor
    resample = getattr(ip, "resample", None)
    s = {
        "class": type(proc).__name__,
        "loaded_by": how,
        "image_processor_class": type(ip).__name__,
        "backend": getattr(ip, "backend", None),
        "patch_size": ip.patch_size,
        "max_soft_tokens": ip.max_soft_tokens,
        "pooling_kernel_size": ip.pooling_kernel_size,
        "max_patches": ip.max_soft_tokens * ip.pooling_kernel_size**2,
        "do_convert_rgb": getattr(ip, "do_convert_rgb", None),
        "do_resize": ip.do_resize,
        "resample": int(resample) if isinstance(resample, int) else str(resample),
        "resample_name": Image.Resampling(int(resample)).name if isinstance(resample, int) else str(resample),
        "antialias": True,  # TF image_processing_gemma4.py l.186-191 (PIL resizes antialias always)
        "do_rescale": ip.do_rescale,
        "rescale_factor": ip.rescale_factor,
        "do_normalize": ip.do_normalize,
        "image_mean": [float(x) for x in ip.image_mean],
        "image_std": [float(x) for x in ip.image_std],
        "image_seq_length": getattr(proc, "image_seq_length", None),
        "expansion": f"{BOI} + n x {IMAGE} + {EOI}",
    }
    want = {"patch_size": PATCH, "max_soft_tokens": MAX_SOFT, "pooling_kernel_size": POOL, "do_resize": True,
            "do_rescale": True, "do_normalize": False}
    for k, v in want.items():
        if s[k] != v:
            raise RuntimeError(f"image processor {k} is {s[k]!r}, want {v!r}")
    if s["resample_name"] not in ("BICUBIC", "InterpolationMode.BICUBIC"):
        raise RuntimeError(f"image processor resample {s['resample_name']}, want BICUBIC")
    if abs(float(s["rescale_factor"]) - 1 / 255) > 1e-12:
        raise RuntimeError(f"rescale_factor {s['rescale_factor']}")
    return json.loads(json.dumps(s, default=str))


def prompt_text(content):
    body = "".join(IMAGE if c["type"] == "image" else c["text"] for c in content)
    return f"<s>user\n{body}</s>\n<s>assistant\n"


def template_check(proc, content):
    messages = [{"role": "user", "content": content}]
    want = prompt_text(content)
    mine = jinja2.Environment(trim_blocks=True, lstrip_blocks=True).from_string(TEMPLATE).render(
        messages=messages, add_generation_prompt=True)
    if mine != want:
        raise RuntimeError(f"TEMPLATE renders {mine!r}, want {want!r}")
    try:
        theirs = proc.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    except Exception as e:
        return f"skipped: {type(e).__name__}: {e}"
    if isinstance(theirs, list) and len(theirs) == 1:
        theirs = theirs[0]
    return "equal" if theirs == want else f"differs: {theirs!r}"


def encode(proc, text, images):
    enc = proc(text=[text], images=[images], return_tensors="pt")
    need = ("input_ids", "attention_mask", TYPE_KEY, "pixel_values", "image_position_ids")
    missing = [k for k in need if k not in enc]
    if missing:
        raise RuntimeError(f"the processor gave no {missing} (keys {sorted(enc.keys())})")
    inputs = {k: enc[k] for k in need}
    inputs["pixel_values"] = inputs["pixel_values"].float()
    return inputs, sorted(set(enc.keys()) - set(need))


def image_spans(ids):
    spans, start = [], None
    for i, t in enumerate(ids + [None]):
        if t == IMAGE_ID and start is None:
            start = i
        elif t != IMAGE_ID and start is not None:
            spans.append([start, i])
            start = None
    return spans


def check_encoding(proc, prompt, text, inputs, tokens_of):
    """Token types 1 exactly on <|image|>; one run per image of that image's
    soft-token count, between <|image> and <image|>; pixel_values and
    positions of the processor's shapes."""
    ids = inputs["input_ids"][0].tolist()
    types = inputs[TYPE_KEY][0].tolist()
    if types != [int(t == IMAGE_ID) for t in ids]:
        raise RuntimeError(f"{prompt['name']}: mm_token_type_ids are not 1 exactly on the image tokens")
    spans = image_spans(ids)
    want = [tokens_of[i] for i in prompt["images"]]
    if [e - s for s, e in spans] != want:
        raise RuntimeError(f"{prompt['name']}: image token runs {spans}, want lengths {want}")
    n = len(prompt["images"])
    pv, pos = tuple(inputs["pixel_values"].shape), tuple(inputs["image_position_ids"].shape)
    if pv != (n, MAX_PATCHES, 3 * PATCH * PATCH) or pos != (n, MAX_PATCHES, 2):
        raise RuntimeError(f"{prompt['name']}: pixel_values {pv}, image_position_ids {pos}")
    # The processor's replacement (TF processing_gemma4.py l.169-171), in order.
    parts = text.split(IMAGE)
    if len(parts) != n + 1:
        raise RuntimeError(f"{prompt['name']}: {len(parts) - 1} image tokens in the text, {n} images")
    expanded = parts[0] + "".join(BOI + IMAGE * k + EOI + rest for k, rest in zip(want, parts[1:]))
    tok = proc.tokenizer
    as_expected = tok(expanded, add_special_tokens=False)["input_ids"] == ids
    if not as_expected:
        log(f"WARNING: {prompt['name']}: the ids are not those of {expanded!r}")
    return {
        "expanded_text": expanded if as_expected else tok.decode(ids, skip_special_tokens=False),
        "expansion_as_expected": as_expected,
        "input_ids": ids,
        "tokens": tok.convert_ids_to_tokens(ids),
        TYPE_KEY: types,
        "image_spans": spans,
        "bracketed_by_boi_eoi": all(0 < s and e < len(ids) and ids[s - 1] == BOI_ID and ids[e] == EOI_ID
                                    for s, e in spans),
    }


# PREPROCESSING CHECKS


def patchify(chw):
    """TF convert_image_to_patches (l.88-99): (C, H, W) -> (H/p * W/p, p*p*C),
    patches row-major, (row, col, channel) inside, channel fastest."""
    c, h, w = chw.shape
    a = chw.reshape(c, h // PATCH, PATCH, w // PATCH, PATCH).transpose(1, 3, 2, 4, 0)
    return a.reshape((h // PATCH) * (w // PATCH), -1)


def image_record(im, pv, pos):
    """What the processor made of one image: the grid, the real patches'
    uint8 levels (in the processor's order), and how pixel_values were
    rescaled, all checked against §3 of the spec."""
    pos = pos.numpy()
    real = (pos != -1).all(-1)
    n = int(real.sum())
    if not real[:n].all() or real[n:].any():
        raise RuntimeError(f"{im['file']}: padding rows are not all at the end")
    rows, cols = int(pos[:n, 1].max()) + 1, int(pos[:n, 0].max()) + 1
    th, tw = target_size(im["height"], im["width"])
    if (rows * PATCH, cols * PATCH) != (th, tw) or rows * cols != n:
        raise RuntimeError(f"{im['file']}: grid {rows}x{cols} ({n} patches), formula {th}x{tw}")
    i = np.arange(n)
    if not (np.array_equal(pos[:n, 0], i % cols) and np.array_equal(pos[:n, 1], i // cols)):
        raise RuntimeError(f"{im['file']}: positions are not (i % cols, i // cols)")
    if rows % POOL or cols % POOL:
        raise RuntimeError(f"{im['file']}: grid {rows}x{cols} does not pool by {POOL}")
    pvn = pv.numpy()
    if np.any(pvn[n:] != 0):
        raise RuntimeError(f"{im['file']}: padding patches are not 0")
    vals = pvn[:n].astype(np.float32)
    levels = np.rint(vals.astype(np.float64) * 255).astype(np.int64)
    if levels.min() < 0 or levels.max() > 255:
        raise RuntimeError(f"{im['file']}: pixel_values outside [0, 1]")
    rules = {
        "f32_mul_recip": levels.astype(np.float32) * np.float32(1 / 255),
        "f64_mul_then_f32": (levels.astype(np.float64) * (1 / 255)).astype(np.float32),
        "f32_div": levels.astype(np.float32) / np.float32(255),
    }
    rescale = [k for k, v in rules.items() if np.array_equal(v, vals)]
    if not rescale:
        raise RuntimeError(f"{im['file']}: pixel_values are no whole uint8 level / 255 by any rule tried")
    return dict(n=n, rows=rows, cols=cols, th=th, tw=tw, levels=levels.astype(np.uint8), rescale=rescale)


def resize_checks(im, rec):
    """Which resize gives the processor's levels: PIL's BICUBIC, torchvision
    on uint8 (PyTorch's uint8 antialiased kernel on an AVX2 CPU), or
    torchvision on float32 (clamp, round), each patchified. Reported."""
    th, tw = rec["th"], rec["tw"]
    src = np.asarray(im["image"], dtype=np.uint8).transpose(2, 0, 1)
    got, out = rec["levels"], {}
    cands = {}
    if (th, tw) == src.shape[1:]:
        cands["none"] = src
    cands["pil_bicubic"] = np.asarray(im["image"].resize((tw, th), resample=Image.Resampling.BICUBIC),
                                      dtype=np.uint8).transpose(2, 0, 1)
    try:
        from torchvision.transforms.v2 import functional as tvF

        t = torch.from_numpy(src.copy()).contiguous()
        cands["torchvision_uint8"] = tvF.resize(t, [th, tw], interpolation=tvF.InterpolationMode.BICUBIC,
                                                antialias=True).numpy()
        f = torch.nn.functional.interpolate(t[None].float(), size=[th, tw], mode="bicubic", align_corners=False,
                                            antialias=True)[0]
        cands["torch_float_round"] = f.clamp(0, 255).round().to(torch.uint8).numpy()
    except Exception as e:
        out["torchvision"] = f"skipped: {type(e).__name__}: {e}"
    for k, arr in cands.items():
        d = np.abs(patchify(arr).astype(np.int64) - got.astype(np.int64))
        out[k] = {"max_level_diff": int(d.max()), "levels_off": int((d > 0).sum())}
    out["matches"] = [k for k, v in out.items() if isinstance(v, dict) and v["max_level_diff"] == 0]
    if not out["matches"]:
        log(f"WARNING: {im['file']}: no resize by hand gives the processor's levels: {out}")
    return out


# MODEL


class Prefixed(torch.nn.Module):
    """The text model under .model, so that mf.fill_weights and
    mf.set_layer_scalars see Gemma4ForCausalLM's names."""

    def __init__(self, inner):
        super().__init__()
        self.model, self.config = inner, inner.config

    def get_input_embeddings(self):
        return self.model.get_input_embeddings()

    def get_output_embeddings(self):
        return None


def make_config():
    text = dict(mf.COMMON, vocab_size=VOCAB, **copy.deepcopy(FAM["config"]))
    cfg = transformers.AutoConfig.for_model(
        "gemma4", text_config=text, vision_config=dict(VISION), audio_config=None,
        image_token_id=IMAGE_ID, boi_token_id=BOI_ID, eoi_token_id=EOI_ID, video_token_id=VIDEO_ID,
        audio_token_id=AUDIO_ID, boa_token_id=BOA_ID, eoa_token_index=EOA_ID, tie_word_embeddings=True)
    if type(cfg).__name__ != "Gemma4Config":
        raise RuntimeError(f"AutoConfig built {type(cfg).__name__}")
    tc, vc = cfg.text_config, cfg.vision_config
    if list(tc.layer_types) != FAM["config"]["layer_types"] or tc.vocab_size != VOCAB:
        raise RuntimeError(f"text config: layer_types {tc.layer_types}, vocab {tc.vocab_size}")
    if getattr(tc, "use_bidirectional_attention", None) is not None or tc.pad_token_id != mf.PAD_ID:
        raise RuntimeError("text config: want use_bidirectional_attention None and pad 0")
    for k, v in VISION.items():
        if k != "rope_parameters" and getattr(vc, k, None) != v:
            raise RuntimeError(f"vision config {k} is {getattr(vc, k, None)!r}, want {v!r}")
    rp = getattr(vc, "rope_parameters", None) or {}
    # transformers 5.17 names the vision rope "axial" (5.5-5.16: "default"); the
    # by-hand tower below checks that it still turns x then y halves.
    if rp.get("rope_theta") != 100.0 or rp.get("rope_type", "default") not in ("default", "axial"):
        raise RuntimeError(f"vision rope_parameters {rp}, want default or axial with theta 100")
    if cfg.audio_config is not None:
        raise RuntimeError("audio_config must be None")
    return cfg


def check_eager(m):
    for what, c in (("text", m.config.text_config), ("vision", m.config.vision_config)):
        impl = getattr(c, "_attn_implementation", "eager")
        if impl != "eager":
            raise RuntimeError(f"{what} attention implementation is {impl}, want eager")


def build(cfg):
    auto = transformers.AutoModelForImageTextToText
    m = auto.from_config(cfg, dtype=torch.float32, attn_implementation="eager")
    if type(m).__name__ != "Gemma4ForConditionalGeneration":
        raise RuntimeError(f"AutoModelForImageTextToText built {type(m).__name__}")
    check_eager(m)
    return m.float().eval()


def load(out):
    m = transformers.AutoModelForImageTextToText.from_pretrained(out, dtype=torch.float32,
                                                                 attn_implementation="eager")
    if type(m).__name__ != "Gemma4ForConditionalGeneration":
        raise RuntimeError(f"the saved folder loads as {type(m).__name__}")
    check_eager(m)
    return m.float().eval()


def part(model, name):
    m = getattr(getattr(model, "model", None), name, None)
    if m is None:
        raise RuntimeError(f"{type(model).__name__} has no model.{name}")
    return m


def clippables(model):
    """(layer, linear, module) for every Gemma4ClippableLinear of the tower."""
    vt, out = part(model, "vision_tower"), []
    for i, layer in enumerate(vt.encoder.layers):
        for name in LINEARS:
            mod = layer.get_submodule(name)
            if type(mod).__name__ != "Gemma4ClippableLinear" or not getattr(mod, "use_clipped_linears", False):
                raise RuntimeError(f"layer {i} {name} is {type(mod).__name__} without clamps")
            out.append((i, name, mod))
    if len(out) != VISION["num_hidden_layers"] * len(LINEARS):
        raise RuntimeError(f"{len(out)} clippable linears")
    return out


def vision_value(name, r):
    if name.endswith(QK_NORMS):
        return 0.5 + 0.1 * r
    if name.endswith(BLOCK_NORMS):
        return 1.0 + 0.2 * r  # Gemma 4 stores the gain itself (no +1)
    std = next((s for k, s in VISION_STD.items() if name.endswith(k)), None)
    if std is None:
        raise RuntimeError(f"{name}: no spread for this vision parameter")
    return std * r


@torch.no_grad()
def run_tower(vt, pv, pos):
    return vt(pixel_values=pv[None], pixel_position_ids=pos[None])


@torch.no_grad()
def linear_range(model, calib, target, side):
    """The min and max, over the real patches of the calibration images, of
    target's input (before its input clamp: side "in") or of its matmul's
    output (before its output clamp: side "out")."""
    vt, cur, acc = part(model, "vision_tower"), {}, [math.inf, -math.inf]

    def upd(x):
        x = x[0, : cur["n"]]
        acc[0], acc[1] = min(acc[0], float(x.min())), max(acc[1], float(x.max()))

    if side == "in":
        h = target.register_forward_pre_hook(lambda m, a: upd(a[0]))
    else:
        h = target.linear.register_forward_hook(lambda m, a, o: upd(o))
    try:
        for pv, pos in calib:
            cur["n"] = int((pos != -1).all(-1).sum())
            run_tower(vt, pv, pos)
    finally:
        h.remove()
    return acc


@torch.no_grad()
def calibrate_clamps(model, calib):
    """Sets the 4 bounds of every clippable linear BOUND_INSET inside the
    range its real-patch activations span (f16 values, as the saved file
    holds them). Linears in forward order, input bounds before output
    bounds, each measured with every earlier bound in place, so that every
    bound cuts at least the extreme value it was measured on."""
    for i, name, mod in clippables(model):
        for b in BOUNDS:
            getattr(mod, b).fill_(-math.inf if b.endswith("min") else math.inf)
    for i, name, mod in clippables(model):
        for side, (bmin, bmax) in (("in", ("input_min", "input_max")), ("out", ("output_min", "output_max"))):
            lo, hi = linear_range(model, calib, mod, side)
            span = hi - lo
            getattr(mod, bmin).fill_(f16(lo + BOUND_INSET[bmin] * span))
            getattr(mod, bmax).fill_(f16(hi - BOUND_INSET[bmax] * span))


@torch.no_grad()
def clamp_counts(model, calib):
    """How many real-patch values each bound cuts (raises if one cuts none)."""
    vt, cur, counts, hooks = part(model, "vision_tower"), {}, {}, []

    def count(i, name, mod, side, x):
        x = x[0, : cur["n"]]
        lo, hi = ("input_min", "input_max") if side == "in" else ("output_min", "output_max")
        c = counts.setdefault(f"{i}.{name}", {b: 0 for b in BOUNDS})
        c[lo] += int((x < getattr(mod, lo)).sum())
        c[hi] += int((x > getattr(mod, hi)).sum())

    for i, name, mod in clippables(model):
        hooks.append(mod.register_forward_pre_hook(lambda m, a, i=i, n=name: count(i, n, m, "in", a[0])))
        hooks.append(mod.linear.register_forward_hook(
            lambda m, a, o, i=i, n=name, p=mod: count(i, n, p, "out", o)))
    try:
        for pv, pos in calib:
            cur["n"] = int((pos != -1).all(-1).sum())
            run_tower(vt, pv, pos)
    finally:
        for h in hooks:
            h.remove()
    idle = [f"{k}.{b}" for k, c in counts.items() for b, v in c.items() if v == 0]
    if idle:
        raise RuntimeError(f"clamp bounds that cut nothing: {idle}")
    return counts


@torch.no_grad()
def seeded_model(cfg, seed, calib):
    """Every weight from seed, f16-exact: the text model by mf.fill_weights
    (the gemma4 family's spreads, plain gains) and mf.set_layer_scalars; the
    tower and embedder by vision_value from seed + VISION_SEED_OFFSET; the
    standardization buffers likewise; then the clamps calibrated."""
    torch.manual_seed(seed)
    model = build(cfg)
    lm = part(model, "language_model")
    if type(lm).__name__ != "Gemma4TextModel":
        raise RuntimeError(f"language model is {type(lm).__name__}")
    mf.fill_weights(Prefixed(lm), FAM.get("gemma_norms", False), seed, FAM.get("spread"), FAM.get("weight_std"))
    mf.set_layer_scalars(Prefixed(lm), FAM["layer_scalars"])
    g = torch.Generator().manual_seed(seed + VISION_SEED_OFFSET)
    for prefix in ("vision_tower", "embed_vision"):
        for name, p in part(model, prefix).named_parameters():
            r = torch.randn(tuple(p.shape), generator=g, dtype=torch.float32)
            p.copy_(vision_value(f"{prefix}.{name}", r).half().float())
    vt = part(model, "vision_tower")
    d = VISION["hidden_size"]
    # Pooled soft tokens are x sqrt(32) ~ 5.7 times the tower's output: a
    # bias of std 3 and per-dimension scales 0.2 +- 0.06 are both visible.
    vt.std_bias.copy_((3.0 * torch.randn(d, generator=g)).half().float())
    vt.std_scale.copy_((0.2 * (1 + 0.3 * torch.randn(d, generator=g))).half().float())
    calibrate_clamps(model, calib)
    head, emb = model.get_output_embeddings(), lm.get_input_embeddings()
    if head is not None and head.weight is not emb.weight:
        head.weight.copy_(emb.weight)
    for name, t in model.state_dict().items():  # parameters and persistent buffers: what the file holds
        if t.is_floating_point() and not torch.equal(t, t.half().float()):
            raise RuntimeError(f"{name}: not f16-exact after fill")
    return model


def run(model, inputs, **kw):
    return model(**inputs, use_cache=False, **kw)


@torch.no_grad()
def logits_of(model, inputs):
    return run(model, inputs).logits[0].float()


def extend(inputs, tokens):
    out = dict(inputs)
    t = torch.tensor([tokens], dtype=torch.long)
    out["input_ids"] = torch.cat([inputs["input_ids"], t], dim=1)
    for key, fill in ((TYPE_KEY, 0), ("attention_mask", 1)):
        out[key] = torch.cat([out[key], torch.full_like(t, fill).to(out[key].dtype)], dim=1)
    return out


@torch.no_grad()
def greedy(model, inputs, n):
    seq, new, margin, rows = inputs, [], math.inf, []
    for _ in range(n):
        last = logits_of(model, seq)[-1]
        top = torch.topk(last, 2)
        t = int(top.indices[0])
        margin = min(margin, float(top.values[0] - top.values[1]))
        new.append(t)
        rows.append(last)
        if t in IMAGE_IDS:
            break
        seq = extend(seq, [t])
    return new, margin, torch.stack(rows)


def search_seed(cfg, encodings, calib):
    best = None
    for seed in range(FIRST_SEED, FIRST_SEED + mf.MAX_SEED_TRIES):
        model = seeded_model(cfg, seed, calib)
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
        raise RuntimeError(f"no seed of {mf.MAX_SEED_TRIES} gives greedy continuations without special tokens")
    if rank[1:3] != (True, MIN_DISTINCT):
        log(f"WARNING: no seed leads by {mf.MIN_MARGIN} with {MIN_DISTINCT} distinct tokens; seed {seed} "
            f"leads by {rank[3]:.4g}")
    return seed, model, runs


# SAVED FOLDER


def saved_checks(out):
    header, _ = mf.safetensors_header(os.path.join(out, "model.safetensors"))
    bad = sorted(k for k, v in header.items() if v["dtype"] != "F16")
    if bad:
        raise RuntimeError(f"model.safetensors: not f16: {bad}")
    missing = [n for n in CONVERTER_NAMES if n not in header]
    if missing:
        raise RuntimeError(f"model.safetensors lacks {missing}")
    if any(k.endswith("lm_head.weight") for k in header):
        raise RuntimeError("model.safetensors holds lm_head.weight: llama.cpp's mmproj converter cannot map it")
    clamps = [k for k in header if k.endswith(BOUNDS)]
    want = VISION["num_hidden_layers"] * len(LINEARS) * len(BOUNDS)
    if len(clamps) != want or any(header[k]["shape"] != [] for k in clamps):
        raise RuntimeError(f"model.safetensors: {len(clamps)} clamp scalars (want {want}, shape [])")
    return len(header)


def converter_view(out):
    """What llama.cpp's converters read (MmprojModel + Gemma4VisionAudioModel,
    and Gemma4Model for the text): raises unless they find what they need."""
    pre = {}
    for name, nested in (("preprocessor_config.json", "media_proc_cfg"), ("processor_config.json", "image_processor")):
        path = os.path.join(out, name)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                c = json.load(f)
            pre.update({**c, **(c.get(nested) or {})})
    if [k for k in ("image_mean", "image_std") if k not in pre]:
        raise RuntimeError(f"the converter would not find image_mean/image_std (keys {sorted(pre)})")
    with open(os.path.join(out, "config.json"), encoding="utf-8") as f:
        hp = json.load(f)
    vc, tc = hp.get("vision_config") or {}, hp.get("text_config") or {}
    need = ("patch_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")
    if [k for k in need if k not in vc] or (hp.get("architectures") or [None])[0] != "Gemma4ForConditionalGeneration":
        raise RuntimeError(f"config.json: architectures {hp.get('architectures')}, vision_config keys {sorted(vc)}")
    if vc["hidden_size"] // vc["num_attention_heads"] != vc.get("head_dim", 64) or \
            vc.get("num_key_value_heads") != vc["num_attention_heads"]:
        raise RuntimeError("llama.cpp derives head_dim = hidden/heads and has no vision GQA")
    if hp.get("audio_config") is not None:
        raise RuntimeError("config.json has an audio_config")
    if tc.get("hidden_size") != HIDDEN:
        raise RuntimeError("config.json: the converter would not find the text hidden size")
    for k in ("num_kv_shared_layers", "layer_types", "global_head_dim", "rope_parameters"):
        if k not in tc:
            log(f"WARNING: text_config has no {k}: llama.cpp's Gemma4Model reads it")
    return {"image_mean": pre["image_mean"], "image_std": pre["image_std"],
            "vision_eps_written": 1e-6, "vision_eps_config": vc.get("rms_norm_eps")}


# REFERENCES BY HAND (float64, TF modeling_gemma4.py; spec §2)


def sdict(model):
    sd = {k: v.double() for k, v in part(model, "vision_tower").state_dict().items() if v.is_floating_point()}
    sd.update({"embed_vision." + k: v.double() for k, v in part(model, "embed_vision").state_dict().items()})
    return sd


def rms(x, eps, w=None):
    y = x * (x.pow(2).mean(-1, keepdim=True) + eps).pow(-0.5)
    return y * w if w is not None else y


def clipped(x, sd, name, clamps=True):
    if clamps:
        x = x.clamp(float(sd[name + ".input_min"]), float(sd[name + ".input_max"]))
    y = x @ sd[name + ".linear.weight"].t()
    if clamps:
        y = y.clamp(float(sd[name + ".output_min"]), float(sd[name + ".output_max"]))
    return y


def rope_half(x, pos, theta):
    """NeoX RoPE over the last dim m of x [h, n, m] at integer positions pos
    [n]: inv_freq 1/theta^(2j/m), j < m/2; pairs (j, j + m/2)."""
    m = x.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, m, 2, dtype=torch.float64) / m)
    ang = pos.double()[:, None] * inv[None, :]
    cos, sin = torch.cat([ang.cos(), ang.cos()], -1), torch.cat([ang.sin(), ang.sin()], -1)
    rot = torch.cat([-x[..., m // 2 :], x[..., : m // 2]], -1)
    return x * cos + rot * sin


def gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x.pow(3))))


def gelu_quick(x):
    return x * torch.sigmoid(1.702 * x)


@torch.no_grad()
def tower_by_hand(sd, pv, pos, act=gelu_tanh, clamps=True):
    """The encoder's output for the real patches pv [n, 48] (in [0, 1]) at
    pos [n, 2] (x, y): linear patch embedding of 2v - 1 (no bias) + the x
    and y tables; per block x += post_attn_norm(attn(ln1(x))), x +=
    post_ffw_norm(down(act(gate(h)) * up(h))) with h = pre_ffw_norm(x); q/k
    normed per head with gains, v without, the first half of each head
    rotated by x and the second by y (theta 100, NeoX), scores unscaled."""
    v = VISION
    eps, h, hd, theta = v["rms_norm_eps"], v["num_attention_heads"], v["head_dim"], v["rope_parameters"]["rope_theta"]
    px, py = pos[:, 0].long(), pos[:, 1].long()
    tbl = sd["patch_embedder.position_embedding_table"]
    x = (2 * (pv.double() - 0.5)) @ sd["patch_embedder.input_proj.weight"].t() + tbl[0][px] + tbl[1][py]
    n = x.shape[0]
    for i in range(v["num_hidden_layers"]):
        p = f"encoder.layers.{i}."
        a = rms(x, eps, sd[p + "input_layernorm.weight"])
        q, k, vv = (clipped(a, sd, p + f"self_attn.{t}_proj", clamps).reshape(n, h, hd).transpose(0, 1)
                    for t in "qkv")
        q, k = rms(q, eps, sd[p + "self_attn.q_norm.weight"]), rms(k, eps, sd[p + "self_attn.k_norm.weight"])
        vv = rms(vv, eps)
        q = torch.cat([rope_half(q[..., : hd // 2], px, theta), rope_half(q[..., hd // 2 :], py, theta)], -1)
        k = torch.cat([rope_half(k[..., : hd // 2], px, theta), rope_half(k[..., hd // 2 :], py, theta)], -1)
        o = torch.softmax(q @ k.transpose(1, 2), dim=-1) @ vv  # scale 1.0
        o = clipped(o.transpose(0, 1).reshape(n, h * hd), sd, p + "self_attn.o_proj", clamps)
        x = x + rms(o, eps, sd[p + "post_attention_layernorm.weight"])
        a = rms(x, eps, sd[p + "pre_feedforward_layernorm.weight"])
        m = act(clipped(a, sd, p + "mlp.gate_proj", clamps)) * clipped(a, sd, p + "mlp.up_proj", clamps)
        x = x + rms(clipped(m, sd, p + "mlp.down_proj", clamps), eps, sd[p + "post_feedforward_layernorm.weight"])
    return x


def pool_by_hand(sd, hidden, rows, cols, standardize=True):
    """k x k average over the patch grid (bins row-major), x sqrt(d), then
    (x - std_bias) * std_scale."""
    d = hidden.shape[-1]
    g = hidden.double().reshape(rows // POOL, POOL, cols // POOL, POOL, d).mean(dim=(1, 3)).reshape(-1, d)
    g = g * math.sqrt(d)
    return (g - sd["std_bias"]) * sd["std_scale"] if standardize else g


def project_by_hand(sd, pooled, post_norm=False):
    """TF: RMS-normalise over d (no weight) then the projection; post_norm
    is llama.cpp's/Ollama's order (projection then a norm over D)."""
    w = sd["embed_vision.embedding_projection.weight"]
    eps = VISION["rms_norm_eps"]
    return rms(pooled @ w.t(), eps) if post_norm else rms(pooled, eps) @ w.t()


@torch.no_grad()
def image_outputs(model, pv, pos, n):
    """The encoder's output (real patches, before pooling), the pooled soft
    tokens (vision_tower's last_hidden_state) and get_image_features."""
    vt, got = part(model, "vision_tower"), {}
    h = vt.encoder.register_forward_hook(lambda m, a, o: got.update(x=o.last_hidden_state))
    try:
        pooled = run_tower(vt, pv, pos).last_hidden_state
    finally:
        h.remove()
    feats = model.model.get_image_features(pv[None], pos[None]).pooler_output
    if isinstance(feats, (list, tuple)):
        feats = feats[0]
    n_tok = n // POOL**2
    if tuple(pooled.shape) != (n_tok, VISION["hidden_size"]) or tuple(feats.shape) != (n_tok, HIDDEN):
        raise RuntimeError(f"pooled {tuple(pooled.shape)}, features {tuple(feats.shape)}, want {n_tok} tokens")
    return got["x"][0, :n].float(), pooled.float(), feats.float()


@torch.no_grad()
def lm_input_checks(model, inputs, features):
    """What the language model receives (read by a hook): inputs_embeds =
    the text embeddings x 8 with <|image|> looked up as pad, the features
    unscaled on the image tokens; per_layer_inputs (PLE identity part) =
    the per-layer table's row of the token, pad's on image tokens, x sqrt(8)."""
    lm, got = part(model, "language_model"), {}
    h = lm.register_forward_pre_hook(lambda m, a, kw: got.update(kw), with_kwargs=True)
    try:
        run(model, inputs)
    finally:
        h.remove()
    ids = inputs["input_ids"][0]
    img = ids == IMAGE_ID
    look = torch.where(img, torch.full_like(ids, mf.PAD_ID), ids)
    want = lm.get_input_embeddings().weight[look].float() * math.sqrt(HIDDEN)
    want[img] = torch.cat(features)
    res = {"inputs_embeds": float((got["inputs_embeds"][0].float() - want).abs().max())}
    ple = got.get("per_layer_inputs")
    if torch.is_tensor(ple):
        table = lm.embed_tokens_per_layer.weight[look].float() * math.sqrt(PLE_DIM)
        res["per_layer_inputs"] = float((ple[0].reshape(len(ids), -1).float() - table).abs().max())
    else:
        res["per_layer_inputs"] = "skipped: not passed as a keyword"
    return res


def rule(types, layer_types, mode=None):
    """Keys each query may see: causal, within the window on sliding layers;
    with mode "vision" (26B/31B) the sliding layers also see every token of
    the same image (TF l.2093-2145: (causal OR block) AND kv > q - window)."""
    types = np.asarray(types)
    start = (types == 1) & np.concatenate([[True], types[:-1] != 1])
    group = np.where(types == 1, np.cumsum(start) - 1, -1)
    i, j = np.arange(len(types))[:, None], np.arange(len(types))[None, :]
    same = (group[:, None] == group[None, :]) & (group[:, None] >= 0)
    out = []
    for lt in layer_types:
        if lt != "sliding_attention":
            out.append(j <= i)
        elif mode == "vision":
            out.append(((j <= i) | same) & (j > i - WINDOW))
        else:
            out.append((j <= i) & (i - j < WINDOW))
    return out


@torch.no_grad()
def pattern_check(model, inputs, want):
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


@torch.no_grad()
def vision_mode(model, inputs):
    """The logits with use_bidirectional_attention = "vision" (read at each
    forward, TF l.2398), and whether the mask follows rule(..., "vision")."""
    tc = model.config.text_config
    old = tc.use_bidirectional_attention
    tc.use_bidirectional_attention = "vision"
    try:
        logits = logits_of(model, inputs)
        patt = pattern_check(model, inputs, rule(inputs[TYPE_KEY][0].tolist(), tc.layer_types, "vision"))
    finally:
        tc.use_bidirectional_attention = old
    return logits, patt


def source_digest():
    """Short hashes of the TF functions this fixture depends on, so that a
    transformers whose vision code moved shows in the log."""
    import importlib

    mod = importlib.import_module("transformers.models.gemma4.modeling_gemma4")
    out = {}
    for n in ("Gemma4ClippableLinear", "Gemma4RMSNorm", "Gemma4VisionPatchEmbedder", "Gemma4VisionPooler",
              "Gemma4VisionMLP", "Gemma4VisionRotaryEmbedding", "apply_multidimensional_rope",
              "Gemma4VisionAttention", "Gemma4VisionEncoderLayer", "Gemma4VisionModel", "Gemma4MultimodalEmbedder"):
        obj = getattr(mod, n, None)
        out[n] = hashlib.sha256(inspect.getsource(obj).encode()).hexdigest()[:12] if obj is not None else None
    emb = getattr(mod, "Gemma4MultimodalEmbedder", None)
    if emb is None or "embedding_pre_projection_norm" not in inspect.getsource(emb):
        log("WARNING: Gemma4MultimodalEmbedder has no embedding_pre_projection_norm in this transformers")
    return out


# THE FIXTURE


def prompt_reference(saved, p, inputs, steps, checks, with_vision_mode):
    name, tc = p["name"], saved.config.text_config
    logits = logits_of(saved, inputs)
    new, margin, rows = greedy(saved, inputs, GEN_TOKENS)
    if new != steps[0]:
        raise RuntimeError(f"{name}: the reloaded model's greedy {new} != {steps[0]}")
    T = logits.shape[0]
    whole = logits_of(saved, extend(inputs, new[:-1]))
    for i, t in enumerate(new):
        if int(whole[T - 1 + i].argmax()) != t:
            raise RuntimeError(f"{name}: whole-sequence row {T - 1 + i} argmax is not greedy token {t}")
    gdiff = max(float((whole[:T] - logits).abs().max()), float((whole[T - 1 :] - rows).abs().max()))
    if gdiff > 1e-4 * float(logits.max() - logits.min()):
        raise RuntimeError(f"{name}: the whole-sequence forward differs from the steps by {gdiff}")
    types = inputs[TYPE_KEY][0].tolist()
    c = {"greedy_whole_diff": gdiff, "attention_rule": pattern_check(saved, inputs, rule(types, tc.layer_types))}
    vlog, c["vision_mode_rule"] = vision_mode(saved, inputs)
    c["vision_mode_effect"] = float((vlog - logits).abs().max())
    if c["vision_mode_effect"] <= 1e-3:
        raise RuntimeError(f"{name}: use_bidirectional_attention 'vision' changes no logit")
    checks.setdefault("prompts", {})[name] = c
    log(f"{name}: {T} tokens, greedy {new} (lead {margin:.3g}), rule {c['attention_rule']}, "
        f"vision mode {c['vision_mode_effect']:.3g} ({c['vision_mode_rule']})")
    rec = {"logits_shape": list(logits.shape), "logits": floats(logits), "greedy_ids": new,
           "greedy_min_margin": margin, "greedy_logits": floats(rows)}
    if with_vision_mode:  # the 26B/31B attention rule, for one prompt
        rec["logits_vision_mode"] = floats(vlog)
    return rec


def make(out):
    parent = os.path.dirname(os.path.abspath(out))
    if os.path.exists(out):
        if os.listdir(out) and not os.path.exists(os.path.join(out, "processor_config.json")):
            raise RuntimeError(f"{out} exists and is not a fixture folder: not removing it")
        shutil.rmtree(out)
    os.makedirs(out)
    versions = {"transformers": transformers.__version__, "torch": torch.__version__,
                "tokenizers": tokenizers.__version__, "numpy": np.__version__, "PIL": PIL.__version__}
    try:
        import torchvision

        versions["torchvision"] = torchvision.__version__
    except Exception:
        pass
    log(" ".join(f"{k} {v}" for k, v in versions.items()))
    checks = {"source_digest": source_digest()}

    images = write_images(parent)
    cfg = make_config()
    cfg.save_pretrained(out)
    write_tokenizer(train_tokenizer(), out)
    proc, how = load_processor(out, build_processor(out))
    summary = processor_summary(proc, how)
    log(f"processor {summary['class']} ({how}) with {summary['image_processor_class']} "
        f"(backend {summary['backend']}): {summary['resample_name']}, patch {PATCH}, {MAX_SOFT} soft tokens max")

    tokens_of = {}
    for i, im in enumerate(images):
        th, tw = target_size(im["height"], im["width"])
        tokens_of[i] = (th // PATCH) * (tw // PATCH) // POOL**2
    prompts, encodings, pix = [], [], {}
    for p in PROMPTS:
        text = prompt_text(p["content"])
        checks.setdefault("chat_template", {})[p["name"]] = template_check(proc, p["content"])
        inputs, dropped = encode(proc, text, [images[i]["image"] for i in p["images"]])
        rec = check_encoding(proc, p, text, inputs, tokens_of)
        for k, i in enumerate(p["images"]):
            pv, pos = inputs["pixel_values"][k], inputs["image_position_ids"][k]
            if i in pix and not (torch.equal(pix[i][0], pv) and torch.equal(pix[i][1], pos)):
                raise RuntimeError(f"image {i} has other pixel_values in {p['name']}")
            pix[i] = (pv, pos)
        prompts.append({"name": p["name"], "messages": [{"role": "user", "content": p["content"]}],
                        "images": p["images"], "text": text, **rec, "model_inputs": sorted(inputs),
                        "dropped_processor_outputs": dropped})
        encodings.append(inputs)
        log(f"{p['name']}: {len(rec['input_ids'])} tokens, image spans {rec['image_spans']}")

    recs = {}
    checks["preprocess"] = {}
    for i, im in enumerate(images):
        recs[i] = image_record(im, *pix[i])
        checks["preprocess"][im["file"]] = {"rescale": recs[i]["rescale"], "resize": resize_checks(im, recs[i])}
        log(f"{im['file']} {im['width']}x{im['height']} -> {recs[i]['tw']}x{recs[i]['th']} "
            f"({recs[i]['rows']}x{recs[i]['cols']} patches): {checks['preprocess'][im['file']]}")
    calib = [pix[i] for i in range(len(images))]

    seed, model, steps = search_seed(cfg, encodings, calib)
    log(f"seed {seed}")
    checks["clamp_counts"] = clamp_counts(model, calib)
    copy.deepcopy(model).to(torch.float16).save_pretrained(out)
    checks["safetensors_tensors"] = saved_checks(out)
    saved = load(out)
    checks["reload_diff"] = max(float((logits_of(saved, e) - logits_of(model, e)).abs().max()) for e in encodings)
    if checks["reload_diff"] > 1e-6:
        raise RuntimeError(f"the reloaded model differs from the one saved by {checks['reload_diff']}")
    checks["converter"] = converter_view(out)

    sd = sdict(saved)
    records, features = [], {}
    checks["by_hand"], checks["variants"] = {}, {}
    for i, im in enumerate(images):
        r = recs[i]
        pv, pos = pix[i]
        hidden, pooled, feats = image_outputs(saved, pv, pos, r["n"])
        pv_r, pos_r = pv[: r["n"]], pos[: r["n"]]
        th = tower_by_hand(sd, pv_r, pos_r)
        ph = pool_by_hand(sd, th, r["rows"], r["cols"])
        fh = project_by_hand(sd, pooled.double())
        bh = {"tower": float((th - hidden.double()).abs().max()) / max(1.0, float(th.abs().max())),
              "pooled": float((ph - pooled.double()).abs().max()) / max(1.0, float(ph.abs().max())),
              "features": float((fh - feats.double()).abs().max())}
        checks["by_hand"][im["file"]] = bh
        if bh["tower"] > TOWER_TOL or bh["pooled"] > TOWER_TOL or bh["features"] > FEATURE_TOL:
            raise RuntimeError(f"{im['file']}: by hand differs from transformers: {bh}")
        ref = project_by_hand(sd, ph)
        var = {
            "quick_gelu": project_by_hand(sd, pool_by_hand(sd, tower_by_hand(sd, pv_r, pos_r, act=gelu_quick),
                                                           r["rows"], r["cols"])),
            "post_norm": project_by_hand(sd, ph, post_norm=True),
            "no_clamps": project_by_hand(sd, pool_by_hand(sd, tower_by_hand(sd, pv_r, pos_r, clamps=False),
                                                          r["rows"], r["cols"])),
            "no_standardize": project_by_hand(sd, pool_by_hand(sd, th, r["rows"], r["cols"], standardize=False)),
        }
        checks["variants"][im["file"]] = {k: float((v - ref).abs().max()) for k, v in var.items()}
        small = {k: v for k, v in checks["variants"][im["file"]].items() if v <= VARIANT_MIN}
        if small:
            raise RuntimeError(f"{im['file']}: these variants do not move the features: {small}")
        features[i] = feats
        rec = {"file": im["file"], "width": im["width"], "height": im["height"],
               "resized": {"height": r["th"], "width": r["tw"]}, "grid": {"rows": r["rows"], "cols": r["cols"]},
               "num_soft_tokens": r["n"] // POOL**2, "pixel_values_shape": list(pv.shape),
               "real_patches": r["n"],
               "pixel_levels": r["levels"].reshape(-1).astype(int).tolist(),
               "pooled_shape": list(pooled.shape), "pooled": floats(pooled),
               "image_features_shape": list(feats.shape), "image_features": floats(feats)}
        if i == 0:
            rec["vision_hidden_shape"] = list(hidden.shape)
            rec["vision_hidden"] = floats(hidden)
        records.append(rec)
        log(f"{im['file']}: {r['n'] // POOL**2} tokens, features RMS {float(feats.pow(2).mean().sqrt()):.3f}, "
            f"by hand {bh}, variants {checks['variants'][im['file']]}")

    two = next(k for k, p in enumerate(PROMPTS) if len(p["images"]) == 2)
    checks["lm_input"] = lm_input_checks(saved, encodings[two], [features[i] for i in PROMPTS[two]["images"]])
    bad = {k: v for k, v in checks["lm_input"].items() if isinstance(v, float) and v > 1e-6}
    if bad:
        raise RuntimeError(f"the language model's input is not as described: {bad}")
    log(f"language model input: {checks['lm_input']}")

    for k, (p, rec, inputs, st) in enumerate(zip(PROMPTS, prompts, encodings, steps)):
        rec.update(prompt_reference(saved, p, inputs, st, checks, with_vision_mode=(k == 0)))

    clamps = {}
    for i, name, mod in clippables(saved):
        clamps.setdefault(str(i), {})[name] = {b: float(getattr(mod, b)) for b in BOUNDS}

    tc, vc = saved.config.text_config, saved.config.vision_config
    # transformers 5.17 refuses the global reading of a per-layer attribute
    # (head_dim); the dict holds what the config was made with.
    def td_get(k):
        return tc.__dict__[k] if k in tc.__dict__ else FAM["config"][k]
    expected = {
        "architecture": "Gemma4ForConditionalGeneration",
        "versions": versions,
        "seed": seed,
        "vision_seed": seed + VISION_SEED_OFFSET,
        "config": {
            "text": {"hidden_size": td_get("hidden_size"), "intermediate_size": td_get("intermediate_size"),
                     "num_hidden_layers": td_get("num_hidden_layers"), "num_attention_heads": td_get("num_attention_heads"),
                     "num_key_value_heads": td_get("num_key_value_heads"), "head_dim": td_get("head_dim"),
                     "global_head_dim": FAM["config"]["global_head_dim"], "vocab_size": td_get("vocab_size"),
                     "sliding_window": td_get("sliding_window"), "layer_types": list(td_get("layer_types")),
                     "num_kv_shared_layers": td_get("num_kv_shared_layers"),
                     "hidden_size_per_layer_input": td_get("hidden_size_per_layer_input"),
                     "final_logit_softcapping": td_get("final_logit_softcapping"), "rms_norm_eps": td_get("rms_norm_eps"),
                     "rope_parameters": mf.rope_summary(tc), "layer_scalars": FAM["layer_scalars"],
                     "embed_scale": math.sqrt(tc.hidden_size), "use_bidirectional_attention": None},
            "vision": dict(VISION, d_head=vc.hidden_size // vc.num_attention_heads),
            "max_soft_tokens": MAX_SOFT, "max_patches": MAX_PATCHES, "pool_kernel": POOL, "patch_size": PATCH,
            "boi_token": BOI, "eoi_token": EOI, "image_token": IMAGE,
            "boi_token_id": BOI_ID, "eoi_token_id": EOI_ID, "image_token_id": IMAGE_ID,
            "boa_token_id": BOA_ID, "eoa_token_id": EOA_ID, "audio_token_id": AUDIO_ID, "video_token_id": VIDEO_ID,
            "pad_token_id": mf.PAD_ID, "bos_token_id": mf.BOS_ID, "eos_token_id": mf.EOS_ID,
            "add_bos": False, "chat_template": TEMPLATE,
        },
        "processor": summary,
        "images": records,
        "clamps": clamps,
        "std_bias": floats(sd["std_bias"].float()),
        "std_scale": floats(sd["std_scale"].float()),
        "prompts": prompts,
        "checks": checks,
    }
    text = dump(expected) + "\n"
    if json.loads(text) != json.loads(json.dumps(expected)):
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
