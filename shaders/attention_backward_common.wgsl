// What attention_backward.wgsl and attention_backward_stats.wgsl share
// (pasted by //!include attention_backward_common): the parameters
// ops.AttentionBackward writes, the read-only inputs, the workgroup memory
// of the row streaming (see attention_backward.wgsl's header), the soft-cap
// and its derivative, the keys a query sees, and the helpers that stage a
// fixed row and score the streamed key rows against it.

struct Params {
    head_dim: u32,
    n_heads: u32,
    n_kv_heads: u32,
    n_q: u32,
    pos0: u32,
    kv_len: u32,
    window: u32, // 0 = none; else key j is visible from position i iff i - j < window
    group: u32,  // n_heads / n_kv_heads
    scale: f32,
    softcap: f32, // 0 = none
    flags: u32,   // FLAG_SINKS
    _p1: u32,
}

// FLAG_SINKS: the forward had a sink logit per query head (see
// attention_common.wgsl), which attention_backward_stats folds into each
// row's log-sum-exp and delta; the gradient passes then need nothing more.
const FLAG_SINKS: u32 = 2u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> dout: array<f32>;

const TILE: u32 = 64u;
const G: u32 = WG / TILE;
const PER: u32 = MAX_HD / TILE;

// The lowest finite f32 stands in for -inf (see attention.wgsl).
const LOWEST: f32 = -3.40282347e38;

var<workgroup> a_s: array<f32, MAX_HD>; // the fixed row: q (rows of queries) or k (rows of keys)
var<workgroup> b_s: array<f32, MAX_HD>; // ... and dout, or v
var<workgroup> dot_s: array<vec2<f32>, WG>; // partial dots, row r's at [r*G, r*G + G)
var<workgroup> c_s: array<f32, TILE>; // the tile's first coefficient (score, or dZ * scale)
var<workgroup> e_s: array<f32, TILE>; // ... and second (dP, or P)

// cap returns the soft-capped score and its derivative for a scaled score
// z: (c tanh(z/c), 1 - tanh^2), or (z, 1) without a cap. Both come from
// e = exp(-2|z/c|) <= 1, so nothing overflows for any z, and
// 1 - tanh^2 = 4e / (1 + e)^2 keeps its relative precision deep in the
// saturated tail, where 1 - tanh^2 would cancel to 0.
fn cap(z: f32) -> vec2<f32> {
    if (p.softcap <= 0.0) {
        return vec2<f32>(z, 1.0);
    }
    let e = exp(-2.0 * abs(z / p.softcap));
    let r = 1.0 / (1.0 + e);
    return vec2<f32>(p.softcap * sign(z) * (1.0 - e) * r, 4.0 * e * r * r);
}

// visible_keys returns the keys [j0, j1) query token t sees (attention.wgsl).
fn visible_keys(t: u32) -> vec2<u32> {
    let i = p.pos0 + t;
    var j0 = 0u;
    if (p.window > 0u && i + 1u > p.window) {
        j0 = i + 1u - p.window;
    }
    return vec2<u32>(j0, min(i + 1u, p.kv_len));
}

// stage loads the fixed rows into a_s and b_s.
fn stage(abase: u32, bbase: u32, abuf_is_q: bool, lid: u32) {
    for (var d = lid; d < p.head_dim; d += WG) {
        if (abuf_is_q) {
            a_s[d] = q[abase + d];
            b_s[d] = dout[bbase + d];
        } else {
            a_s[d] = k[abase + d];
            b_s[d] = v[bbase + d];
        }
    }
    workgroupBarrier();
}

// Row-streaming helpers: partial dots of the staged rows with key row kb
// (a_s . k, b_s . v: a query row's score and dP) or with query row qb
// (q . a_s, dout . b_s: the same two for a key row), over this invocation's
// slice of the dims.
fn dots_with_key(kb: u32, part: u32) -> vec2<f32> {
    var s = vec2<f32>(0.0);
    for (var d = part; d < p.head_dim; d += G) {
        s += vec2<f32>(a_s[d] * k[kb + d], b_s[d] * v[kb + d]);
    }
    return s;
}

fn dots_with_query(qb: u32, part: u32) -> vec2<f32> {
    var s = vec2<f32>(0.0);
    for (var d = part; d < p.head_dim; d += G) {
        s += vec2<f32>(q[qb + d] * a_s[d], dout[qb + d] * b_s[d]);
    }
    return s;
}

// tile_dots sums the G partial dots of tile row lid (< TILE).
fn tile_dots(lid: u32) -> vec2<f32> {
    var s = vec2<f32>(0.0);
    for (var g = 0u; g < G; g++) {
        s += dot_s[lid * G + g];
    }
    return s;
}
