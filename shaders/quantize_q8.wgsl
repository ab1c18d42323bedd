// One token's activations quantized to 8 bits for the integer decode
// matvecs (shaders/matvec_q8.wgsl), the way ggml's q8_1 quantizes them for
// its DP4A products: x is cut into blocks of 32 floats, each with the scale
// d = max|x|·(1/127) and the levels q = round(x/d) in -127..127 (0 for a
// block of zeros).
//
// The output xq, for k floats of x (k a multiple of 32), in u32 words:
//   - [0, k/2): the levels, packed for the integer products of the same
//     DOT (matvec_q8 says why; matmul_q8 reads DOT = 1's only):
//       DOT = 1, four i8 levels to a word in element order (pack4xI8),
//       in [0, k/4); words k/4 to k/2 are left unwritten, so that the
//       scales and sums below sit where they do in the other packing;
//       DOT = 0, offset to u = q + 128 (1..255), two to a word: for each
//       4 floats x0..x3, word 2i holds u2 | u0 << 16 and word 2i+1 holds
//       u3 | u1 << 16;
//   - [k/2, k/2 + k/32): each block's d, an f32's bits;
//   - [k/2 + k/32, k/2 + k/32 + k/16): Σq over each half block of 16, an
//     i32's bits (a K-quant product needs it per 16: Q6_K's offset and a
//     lane's half of a Q4_K min).
// engine/ops.Q8Words is that size.
//
// The arithmetic is q8_common's, which matvec_q8's products that quantize
// their own input share. Differences from ggml's quantize_q8_1, on
// purpose: d is amax times the f32 nearest 1/127 (a product is exact to
// half an ulp on every device, a quotient only to 2.5 ulp in WGSL), and q
// = round(x·(1/d)) rounds half to even (WGSL's round) where ggml's roundf
// rounds away from zero. q can
// therefore differ from ggml's by one where x/d is within an ulp of a
// half-integer; the matvecs' CPU reference (engine/ops/ref.MatVecQ8) takes
// the levels this kernel wrote.
//
// Entries, 8 invocations per block of 32, one vec4 each (the block's max
// and level sums go through workgroup memory): a thread's loads are all
// issued at once, where one invocation walking a block's 8 vec4s waited
// for each in turn (on an H200 the normed form took 8.7 µs a 4096-wide row
// that way, in one workgroup, the dispatch alone 3.2; this form is not yet
// measured there):
//   - quantize_q8: x as it is;
//   - quantize_q8_normed: RMSNorm first, x ⊙ gain / sqrt(mean(x²) + eps)
//     (gain 1 + g with flags bit 1): every workgroup sums x² over the whole
//     row itself (reduce_common's tree, the same in each, so the same
//     scale), a few KiB
//     from L2, rather than a second dispatch;
//   - quantize_q8_glu: act(gate) ⊙ up of x = [gate | up] (2k floats), SiLU
//     or GELU's tanh approximation with flags bit 2, the values
//     elementwise's glu_fused writes.
//
// Several rows (a batched decode's tokens, a prompt's) go at once: workgroup z is the
// row, x's rows x_row vec4s apart, xq's rows Q8RowWords(k) words apart
// (Q8Words rounded up to whole vec4s, which the matvec reads).
//
// Constants prepended by gpu.Spec: WG, the workgroup size, a power of two
// of at least 8; DOT, the packing.

//!include glu_common
//!include reduce_common
//!include q8_common

struct Q8Params {
    k: u32,     // floats to quantize, a multiple of 32
    flags: u32, // bit 1: normed gain is 1 + g; bit 2: glu takes GELU
    eps: f32,   // quantize_q8_normed: the RMSNorm epsilon
    x_row: u32, // vec4s from one row of x to the next
}

@group(0) @binding(0) var<uniform> p: Q8Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> g: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> xq: array<u32>;

// Per invocation: its vec4's max |x| and then its level sum (a block's 8
// invocations are 8 consecutive ones).
var<workgroup> red_max: array<f32, WG>;
var<workgroup> red_sum: array<i32, WG>;

// q_row is the first word of row r of xq.
fn q_row(r: u32) -> u32 {
    return r * ((p.k / 2u + p.k / 32u + p.k / 16u + 3u) & ~3u);
}

// store_vec quantizes vec4 gi of a row of x (floats 4gi..4gi+3, block
// gi/8) into that row of xq, from word qb; v is its value. Invocations past
// the row pass live = false and only take part in the barriers. Every
// invocation of the workgroup must call it.
fn store_vec(gi: u32, lid: u32, v: vec4<f32>, live: bool, qb: u32) {
    let a = abs(v);
    red_max[lid] = select(0.0, max(max(a.x, a.y), max(a.z, a.w)), live);
    workgroupBarrier();
    let first = lid & ~7u;
    var amax = 0.0;
    for (var i = 0u; i < 8u; i++) {
        amax = max(amax, red_max[first + i]);
    }
    let step = q8_step(amax);
    let q = q8_levels(v, step.y);
    red_sum[lid] = (q.x + q.y) + (q.z + q.w);
    workgroupBarrier();
    if (!live) {
        return;
    }
    if (DOT == 1u) {
        xq[qb + gi] = pack4xI8(q);
    } else {
        let u = q8_pack(q);
        xq[qb + 2u * gi] = u.x;
        xq[qb + 2u * gi + 1u] = u.y;
    }
    if ((lid & 7u) == 0u) {
        let b = gi / 8u;
        let half = qb + p.k / 2u;
        let s = p.k / 32u;
        xq[half + b] = bitcast<u32>(step.x);
        let s0 = (red_sum[lid] + red_sum[lid + 1u]) + (red_sum[lid + 2u] + red_sum[lid + 3u]);
        let s1 = (red_sum[lid + 4u] + red_sum[lid + 5u]) + (red_sum[lid + 6u] + red_sum[lid + 7u]);
        xq[half + s + 2u * b] = bitcast<u32>(s0);
        xq[half + s + 2u * b + 1u] = bitcast<u32>(s1);
    }
}

fn vec_index(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.x + wid.y * nwg.x) * WG + lid;
}

@compute @workgroup_size(WG)
fn quantize_q8(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let gi = vec_index(wid, nwg, lid);
    let live = gi < p.k / 4u;
    store_vec(gi, lid, x[wid.z * p.x_row + min(gi, p.k / 4u - 1u)], live, q_row(wid.z));
}

@compute @workgroup_size(WG)
fn quantize_q8_glu(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let gi = vec_index(wid, nwg, lid);
    let n4 = p.k / 4u;
    let live = gi < n4;
    let i = wid.z * p.x_row + min(gi, n4 - 1u);
    let gt = x[i];
    let up = x[n4 + i]; // up starts k floats after gate
    store_vec(gi, lid, q8_glu(gt, up), live, q_row(wid.z));
}

@compute @workgroup_size(WG)
fn quantize_q8_normed(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let n4 = p.k / 4u;
    let xb = wid.z * p.x_row;
    let inv = q8_inv_rms(xb, lid, p.eps);
    let gi = vec_index(wid, nwg, lid);
    let live = gi < n4;
    let i = min(gi, n4 - 1u);
    store_vec(gi, lid, x[xb + i] * inv * q8_gain(g[i]), live, q_row(wid.z));
}
