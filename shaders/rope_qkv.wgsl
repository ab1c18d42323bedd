// Everything between the q, k, v projections of a batch and its attention,
// in one dispatch: qkv = [tokens, (heads + 2 kv_heads) * head_dim] f32, each
// token's q heads, then its k heads, then its v heads, as one merged matmul
// (or three placed ones) writes them. Per head:
//   - q and k: + bias (when bound), RMSNorm over the head times its gain
//     (Qwen 3's and Gemma 3's q/k norms, when bound), then the rotation of
//     rope.wgsl (same tables, same sincos, same products); q goes to
//     q_out = [tokens, heads * head_dim], k to row pos0 + t of the k cache;
//   - v: + bias (when bound), RMSNorm over the head without a gain (with
//     FLAG_VNORM: Gemma 4's v norm), to row pos0 + t of the v cache.
// With kv_heads = 0, qkv holds q heads only, [tokens, heads * head_dim], and
// no cache is touched: Gemma 4's KV-shared layers attend over an earlier
// layer's cache.
// That replaces up to eight dispatches a layer (three bias adds, three
// norms, two rotations and the cache copy of k), each a few microseconds of
// launch on a decoded token whose whole layer is tens of microseconds of
// work.
//
// One workgroup per (token, head slot), head slots ordered as in qkv; the
// grid may wrap into y past 65535 workgroups. Every branch below depends
// only on the workgroup id and the uniform, so the barriers of the norm sum
// are in uniform control flow.
//
// The norm sums the head's squares in f32, each invocation over a stride of
// WG, then pairwise with reduce_common's workgroup_sum: the order norm.wgsl
// uses, so its error bound holds here.
//
// Bindings are read_write so that an absent bias, norm, factors or (with
// kv_heads = 0) cache buffer may be filled by qkv (never read or written):
// WebGPU refuses one buffer bound read-only and writable in a dispatch, not
// one bound writable twice. The written buffers (q_out and the caches) must
// each be distinct from every other.
//
// Constants: WG, the workgroup size, a power of two.

struct Params {
    tokens: u32,
    heads: u32,
    kv_heads: u32,
    head_dim: u32,
    rope_dims: u32,
    pos0: u32,
    flags: u32, // FLAG_* below
    mscale: f32,
    eps: f32,
    _p0: u32,
    _p1: u32,
    _p2: u32,
    // The frequency tables of rope.wgsl: freq_i = lo[i % 16] * hi[i / 16].
    lo: array<vec4<f32>, 4>,
    hi: array<vec4<f32>, 4>,
}

const FLAG_NEOX: u32 = 1u;
const FLAG_FACTORS: u32 = 2u;
const FLAG_BIAS: u32 = 4u;
const FLAG_NORM: u32 = 8u;
const FLAG_VNORM: u32 = 16u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> qkv: array<f32>;
// (heads + 2 kv_heads) * head_dim floats, in qkv's column order.
@group(0) @binding(2) var<storage, read_write> bias: array<f32>;
// q's gain (head_dim floats), then, with kv_heads > 0, k's.
@group(0) @binding(3) var<storage, read_write> norms: array<f32>;
@group(0) @binding(4) var<storage, read_write> factors: array<f32>;
@group(0) @binding(5) var<storage, read_write> q_out: array<f32>;
@group(0) @binding(6) var<storage, read_write> k_cache: array<f32>;
@group(0) @binding(7) var<storage, read_write> v_cache: array<f32>;

//!include rope_common
//!include reduce_common

// src is column col of a head starting at flat index base of qkv, plus its
// bias (bias index bcol): the projection as the layer's math defines it.
fn src(base: u32, bcol: u32, j: u32) -> f32 {
    var v = qkv[base + j];
    if ((p.flags & FLAG_BIAS) != 0u) {
        v += bias[bcol + j];
    }
    return v;
}

// inv_rms is 1 / sqrt(mean(x²) + eps) over the head at base (with its
// bias). Call from uniform control flow: it holds barriers.
fn inv_rms(base: u32, bcol: u32, lid: u32) -> f32 {
    var ss = 0.0;
    for (var j = lid; j < p.head_dim; j += WG) {
        let v = src(base, bcol, j);
        ss += v * v;
    }
    return inverseSqrt(workgroup_sum(ss, lid) / f32(p.head_dim) + p.eps);
}

@compute @workgroup_size(WG)
fn rope_qkv(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let slots = p.heads + 2u * p.kv_heads;
    let idx = wid.x + wid.y * nwg.x;
    if (idx >= p.tokens * slots) {
        return; // uniform: the whole workgroup leaves together
    }
    let t = idx / slots;
    let h = idx % slots;
    let hd = p.head_dim;
    let kvd = p.kv_heads * hd;
    let bcol = h * hd; // the head's first column within a token's row
    let base = t * slots * hd + bcol;
    let row = (p.pos0 + t) * kvd; // the token's row in the caches

    if (h >= p.heads + p.kv_heads) {
        let dst = row + (h - p.heads - p.kv_heads) * hd;
        var inv = 1.0; // x * 1.0 is x: without the norm v is copied exactly
        if ((p.flags & FLAG_VNORM) != 0u) {
            inv = inv_rms(base, bcol, lid);
        }
        for (var j = lid; j < hd; j += WG) {
            v_cache[dst + j] = src(base, bcol, j) * inv;
        }
        return;
    }

    // q or k: the gain of the head's norm, 1 without one.
    let is_q = h < p.heads;
    var inv = 1.0;
    var gain = 0u; // index of the head's first gain in norms
    if (!is_q) {
        gain = hd;
    }
    let norm = (p.flags & FLAG_NORM) != 0u;
    if (norm) {
        inv = inv_rms(base, bcol, lid);
    }

    let half = p.rope_dims / 2u;
    let pos = p.pos0 + t;
    for (var i = lid; i < half; i += WG) {
        var i0 = 2u * i;
        var i1 = i0 + 1u;
        if ((p.flags & FLAG_NEOX) != 0u) {
            i0 = i;
            i1 = i + half;
        }
        var a = src(base, bcol, i0);
        var b = src(base, bcol, i1);
        if (norm) {
            a = a * inv * norms[gain + i0];
            b = b * inv * norms[gain + i1];
        }
        let freq = p.lo[(i % 16u) / 4u][i % 4u] * p.hi[i / 64u][(i / 16u) % 4u];
        var theta = f32(pos) * freq;
        if ((p.flags & FLAG_FACTORS) != 0u) {
            // Gemma 4's proportional RoPE stores 1e30 for the pairs that do
            // not turn: a position below 2^24 times a frequency of at most
            // 1, over 1e30, is an angle below 2e-23 (or 0 once it
            // underflows), never NaN or inf, even where the division is
            // lowered to a reciprocal (1e-30 is a normal f32). sincos then
            // gives (theta, 1), and the pair comes out as it went in, to the
            // rounding of a - b * theta.
            theta = theta / factors[i];
        }
        let sc = sincos(theta) * p.mscale;
        let y0 = a * sc.y - b * sc.x;
        let y1 = a * sc.x + b * sc.y;
        if (is_q) {
            let dst = t * p.heads * hd + bcol;
            q_out[dst + i0] = y0;
            q_out[dst + i1] = y1;
        } else {
            let dst = row + (h - p.heads) * hd;
            k_cache[dst + i0] = y0;
            k_cache[dst + i1] = y1;
        }
    }
    // Dims past rope_dims pass through (normed).
    for (var j = p.rope_dims + lid; j < hd; j += WG) {
        var v = src(base, bcol, j);
        if (norm) {
            v = v * inv * norms[gain + j];
        }
        if (is_q) {
            q_out[t * p.heads * hd + bcol + j] = v;
        } else {
            k_cache[row + (h - p.heads) * hd + j] = v;
        }
    }
}
