// One token's activations quantized to 8 bits for the integer decode
// matvecs (shaders/matvec_q8.wgsl), the way ggml's q8_1 quantizes them for
// its DP4A products: x is cut into blocks of 32 floats, each with the scale
// d = max|x|·(1/127) and the levels q = round(x/d) in -127..127 (0 for a
// block of zeros).
//
// The output xq, for k floats of x (k a multiple of 32), in u32 words:
//   - [0, k/2): the levels, offset to u = q + 128 (1..255), two to a word
//     in the order the integer products want: for each 4 floats x0..x3,
//     word 2i holds u2 | u0 << 16 and word 2i+1 holds u3 | u1 << 16
//     (matvec_q8 says why);
//   - [k/2, k/2 + k/32): each block's d, an f32's bits;
//   - [k/2 + k/32, k/2 + k/32 + k/16): Σq over each half block of 16, an
//     i32's bits (a K-quant product needs it per 16: Q6_K's offset and a
//     lane's half of a Q4_K min).
// engine/ops.Q8Words is that size.
//
// Differences from ggml's quantize_q8_1, on purpose: d is amax times the f32
// nearest 1/127 (a product is exact to half an ulp on every device, a
// quotient only to 2.5 ulp in WGSL), and q = round(x·(1/d)) rounds half to
// even (WGSL's round) where ggml's roundf rounds away from zero. q can
// therefore differ from ggml's by one where x/d is within an ulp of a
// half-integer; the matvecs' CPU reference (engine/ops/ref.MatVecQ8) takes
// the levels this kernel wrote.
//
// Entries, one workgroup invocation per block:
//   - quantize_q8: x as it is;
//   - quantize_q8_normed: RMSNorm first, x ⊙ gain / sqrt(mean(x²) + eps)
//     (gain 1 + g with flags bit 1), one workgroup for the whole row: the
//     mean needs every float, and a row is at most a few thousand blocks;
//   - quantize_q8_glu: act(gate) ⊙ up of x = [gate | up] (2k floats), SiLU
//     or GELU's tanh approximation with flags bit 2, the values
//     elementwise's glu_fused writes.
//
// Constants prepended by gpu.Spec: WG, the workgroup size.

//!include glu_common

struct Q8Params {
    k: u32,     // floats to quantize, a multiple of 32
    flags: u32, // bit 1: normed gain is 1 + g; bit 2: glu takes GELU
    eps: f32,   // quantize_q8_normed: the RMSNorm epsilon
    pad: u32,
}

@group(0) @binding(0) var<uniform> p: Q8Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> g: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> xq: array<u32>;

var<workgroup> partial: array<f32, WG>;

// store_block quantizes block b (32 floats, v) into xq.
fn store_block(b: u32, v: ptr<function, array<vec4<f32>, 8>>) {
    var amax = 0.0;
    for (var i = 0u; i < 8u; i++) {
        let a = abs((*v)[i]);
        amax = max(amax, max(max(a.x, a.y), max(a.z, a.w)));
    }
    let d = amax * (1.0 / 127.0);
    let id = select(0.0, 1.0 / d, d > 0.0);
    var sums = vec2<i32>(0, 0);
    for (var i = 0u; i < 8u; i++) {
        let q = clamp(vec4<i32>(round((*v)[i] * id)), vec4<i32>(-127), vec4<i32>(127));
        let u = vec4<u32>(q + 128);
        xq[16u * b + 2u * i] = u.z | (u.x << 16u);
        xq[16u * b + 2u * i + 1u] = u.w | (u.y << 16u);
        let t = (q.x + q.y) + (q.z + q.w);
        if (i < 4u) {
            sums.x += t;
        } else {
            sums.y += t;
        }
    }
    let half = p.k / 2u;
    xq[half + b] = bitcast<u32>(d);
    xq[half + p.k / 32u + 2u * b] = bitcast<u32>(sums.x);
    xq[half + p.k / 32u + 2u * b + 1u] = bitcast<u32>(sums.y);
}

fn block_index(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.x + wid.y * nwg.x) * WG + lid;
}

@compute @workgroup_size(WG)
fn quantize_q8(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let b = block_index(wid, nwg, lid);
    if (b >= p.k / 32u) {
        return;
    }
    var v: array<vec4<f32>, 8>;
    for (var i = 0u; i < 8u; i++) {
        v[i] = x[8u * b + i];
    }
    store_block(b, &v);
}

@compute @workgroup_size(WG)
fn quantize_q8_glu(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let b = block_index(wid, nwg, lid);
    if (b >= p.k / 32u) {
        return;
    }
    let up = p.k / 4u; // up starts k floats after gate
    let use_gelu = (p.flags & 4u) != 0u;
    var v: array<vec4<f32>, 8>;
    for (var i = 0u; i < 8u; i++) {
        let gt = x[8u * b + i];
        let act = select(
            vec4<f32>(silu(gt.x), silu(gt.y), silu(gt.z), silu(gt.w)),
            vec4<f32>(gelu(gt.x), gelu(gt.y), gelu(gt.z), gelu(gt.w)),
            use_gelu);
        v[i] = act * x[up + 8u * b + i];
    }
    store_block(b, &v);
}

// quantize_q8_normed runs as one workgroup: the sum of squares, then every
// block, WG blocks at a time.
@compute @workgroup_size(WG)
fn quantize_q8_normed(@builtin(local_invocation_index) lid: u32) {
    var ss = 0.0;
    for (var i = lid; i < p.k / 4u; i += WG) {
        let a = x[i];
        ss += dot(a, a);
    }
    partial[lid] = ss;
    workgroupBarrier();
    for (var h = WG / 2u; h > 0u; h >>= 1u) {
        if (lid < h) {
            partial[lid] += partial[lid + h];
        }
        workgroupBarrier();
    }
    let inv = inverseSqrt(partial[0] / f32(p.k) + p.eps);
    let one_plus = (p.flags & 2u) != 0u;
    for (var b = lid; b < p.k / 32u; b += WG) {
        var v: array<vec4<f32>, 8>;
        for (var i = 0u; i < 8u; i++) {
            let gi = g[8u * b + i];
            v[i] = x[8u * b + i] * inv * select(gi, gi + 1.0, one_plus);
        }
        store_block(b, &v);
    }
}
