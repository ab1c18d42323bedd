// What attention.wgsl, attention_tiled.wgsl and attention_decode.wgsl share
// (pasted by //!include attention_common): the parameters
// ops.AttentionArgs.params writes, the causal/window visibility of keys, the
// stable tanh of the softcap and the fold of a head's attention sink. Each
// includer binds `sinks`, one f32 per query head.

struct Params {
    head_dim: u32,
    n_heads: u32,
    n_kv_heads: u32,
    n_q: u32,
    pos0: u32,
    kv_len: u32,
    window: u32, // 0 = none; else key j is visible from position i iff i - j < window (|i - j| with FLAG_BIDIRECTIONAL)
    group: u32,  // n_heads / n_kv_heads: query heads per KV head
    scale: f32,
    softcap: f32, // 0 = none; else s = softcap * tanh(s / softcap)
    n_split: u32, // split-K: partials per (token, head) (attention.wgsl's)
    chunk: u32,   // split-K: keys per partial
    flags: u32,   // FLAG_BIDIRECTIONAL, FLAG_SINKS, FLAG_BATCH
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

// FLAG_BIDIRECTIONAL drops the causal mask: every query sees all kv_len
// keys (an encoder over one unpadded sequence, ALBERT's), or with a window
// those with |i - j| < window (EmbeddingGemma's sliding layers).
const FLAG_BIDIRECTIONAL: u32 = 1u;

// FLAG_SINKS gives each query head h a learned sink logit, sinks[h] (gpt-oss's
// attention sinks): one more term of the softmax's denominator, in the units
// of the scaled (and capped) scores, that has no value. Without it sinks is
// bound to a stand-in and never read.
const FLAG_SINKS: u32 = 2u;

// FLAG_BATCH lifts the causal mask inside the batch: query t also sees the
// batch's keys after its own, up to pos0 + n_q - 1 (Gemma 3's image
// tokens, which transformers' token_type_ids mask joins to the causal one
// and llama.cpp decodes as a non-causal batch). A window still cuts keys
// more than window - 1 positions back, in the batch too: both references
// apply it after that join (transformers' sliding overlay, kv > q - window,
// bounds only the past; llama.cpp masks p1 - p0 >= n_swa).
const FLAG_BATCH: u32 = 4u;

// The lowest finite f32 stands in for -inf: the running max before any key,
// and the score of a masked key or a tile slot past the last one.
// exp(LOWEST - m) is 0 for any real m, where -inf - -inf would be NaN.
const LOWEST: f32 = -3.40282347e38;

// tanh without overflow: the builtin may be lowered to (e^2x - 1)/(e^2x + 1),
// which is inf/inf = NaN once |x| passes ~44, and a softcapped logit can sit
// far past that.
fn tanh_stable(x: f32) -> f32 {
    let e = exp(-2.0 * abs(x));
    return sign(x) * (1.0 - e) / (1.0 + e);
}

// visible returns the keys [j0, j1) query token t sees: causal (j <= i),
// inside the history (j < kv_len) and, with a window, i - j < window, i.e.
// j >= i + 1 - window (HF's kv_idx > q_idx - sliding_window, llama.cpp's
// p1 - p0 < n_swa). Bidirectional: every key, or with a window those with
// |i - j| < window, j < i + window too. FLAG_BATCH moves the causal end to
// the batch's end.
fn visible(t: u32) -> vec2<u32> {
    let i = p.pos0 + t;
    var j0 = 0u;
    if (p.window > 0u && i + 1u > p.window) {
        j0 = i + 1u - p.window;
    }
    if ((p.flags & FLAG_BIDIRECTIONAL) != 0u) {
        if (p.window > 0u) {
            return vec2<u32>(j0, min(i + p.window, p.kv_len));
        }
        return vec2<u32>(0u, p.kv_len);
    }
    if ((p.flags & FLAG_BATCH) != 0u) {
        return vec2<u32>(j0, min(p.pos0 + p.n_q, p.kv_len));
    }
    return vec2<u32>(j0, min(i + 1u, p.kv_len));
}

// sink_fold folds head h's sink into a row's finished online softmax, max m
// and sum l of exp(s - m) over its keys, and returns (alpha, l'): the row's
// output is acc * alpha / l', where acc is its sum of exp(s - m) v. The
// larger of m and the sink is the new max, so no exponent is positive: a
// sink above m rescales the keys' part by alpha = exp(m - sink) (-> 0 for a
// sink far above every score, where exp(sink - m) would overflow) and adds
// 1; a sink at or below m adds exp(sink - m) and leaves alpha exactly 1
// (llama.cpp's soft_max and flash_attn_ext fold it the same way). Call it
// once per row, where the row's max and sum are final (after split-K's
// merge, never per split).
fn sink_fold(h: u32, m: f32, l: f32) -> vec2<f32> {
    let s = sinks[h];
    if (s > m) {
        let alpha = exp(m - s);
        return vec2<f32>(alpha, l * alpha + 1.0);
    }
    return vec2<f32>(1.0, l + exp(s - m));
}
