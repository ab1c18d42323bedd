// Decode matvecs on 8-bit activations with integer products: y = W·x for
// Q4_K, Q6_K and Q8_0 weights and x quantized by
// shaders/quantize_q8.wgsl, the arithmetic of ggml's vec_dot_q4_K_q8_1,
// vec_dot_q6_K_q8_1 and vec_dot_q8_0_q8_1 (integer sums of weight level ×
// activation level, then the block scales in f32).
//
// Why integers: the f32 matvecs (matmul_kquant) spend several instructions
// per weight on unpacking, converting and scaling it before its FMA, and
// decode about 10^12 weights a second on an H200 whatever their size, far
// below the memory's rate. ggml multiplies four 8-bit pairs per DP4A
// instruction. DOT picks how the products are taken, with the activations
// packed to match (quantize_q8 takes the same DOT):
//
// DOT = 1, packed: dot4I8Packed, WGSL's four-product instruction (DP4A on
// NVIDIA through SPIR-V's OpSDot), for compilers that take it
// (gpu.ShaderLanguage.PackedDot). An activation word holds four levels q
// as i8 bytes in element order (pack4xI8); a weight word's four levels go
// into bytes by masks alone (Q4_K's nibbles and Q6_K's 6-bit levels are
// 0..63, so they read the same as i8), and one instruction sums their four
// products. Exact: a run of 16 sums to at most 16·63·127 in magnitude.
//
// DOT = 0, SWAR: for compilers without it, or where it would be emulated,
// the products go two to a u32 multiply:
//
//   a weight word masked with 0x000F000F holds two levels a0, a1 in its
//   16-bit halves; the activation word holds u1 | u0 << 16 (quantize_q8's
//   order). Their product mod 2^32 is a0·u1 + (a0·u0 + a1·u1)·2^16: the top
//   half is the two-term dot product, exactly, as long as the low half
//   (a0·u1 summed) stays below 2^16 and never carries into it.
//
// Activations are offset to u = q + 128 (1..255) so every half is
// non-negative, and Σa·q = Σa·u − 128·Σa, with Σa kept alongside (one add
// per two weights, the halves of one u32). The bounds, per sum kept before
// its top half is taken out: Q4_K levels ≤ 15, 8 products a part-run:
// top ≤ 8·2·15·255 = 61200, low ≤ 8·15·255 = 30600; Q6_K levels ≤ 63, 2
// products: top ≤ 2·2·63·255 = 64260, low ≤ 2·63·255 = 32130; Q8_0 levels
// split into nibbles (below), 8 products a run of 16: as Q4_K. All under
// 65536, so every integer sum here is exact.
//
// Either way a run's integer sum is the plain integer dot product
// ref.MatVecQ8 computes, and the f32 arithmetic after it is one text for
// both: the two packings give the same result to the bit.
//
// Work split (matvec_common's, without its x staging): a workgroup serves
// ROWS rows with LANES = WG/ROWS lanes each; a lane walks its row's parts of
// 32 weights (a K-quant's are matmul_kquant's: two runs of 16 that share
// their quant bytes; a Q8_0 part is one block) with stride LANES, reads the
// activations' levels of its runs straight from global memory (32 bytes a
// run of 16, 16 packed: every row of the workgroup reads the same ones, L1
// hits), and keeps one f32 partial sum.
//
// NX activation rows (a batched decode's tokens, 1 to 8) share each
// weight read: a lane unpacks its part's weight levels once and multiplies
// them with every row's activations, and row r's result goes to y at
// y_offset + r·y_stride. Each row's sums are the single row's, in the same
// order: a batched token gets the bits it gets alone.
//
// IN says where the activations come from. 0: quantize_q8 wrote them to xq,
// and the lanes read them from global memory (L1 hits). 1, 2, 3: the one
// row (NX = 1) arrives in f32 in x, and every workgroup first quantizes all
// of it into its own memory xs with quantize_q8's arithmetic (q8_common),
// so the quantizer's dispatch, its write and its barrier go: 1, x as it
// is; 2, RMSNorm(x) with gain g (eps in p.eps); 3, act(gate) ⊙ up of x =
// [gate | up], 2k floats. Each workgroup then reads the whole f32 row
// (from L2) where it read 16 bytes of levels a part; the dispatcher
// (engine/ops.Q8Fuses) weighs the two.
// Constants prepended by gpu.Spec: WG, ROWS, NX, IN, XS, the vec4s of xs
// (Q8RowWords(k)/4 with IN > 0, else 1), and DOT.

//!include wbytes_common
//!include glu_common
//!include reduce_common
//!include q8_common
//!include q8_store_common

struct MatvecQ8Params {
    k: u32,        // columns of W, whole blocks (256 a K-quant's, 32 Q8_0's)
    n: u32,        // rows of W in this chunk
    row0: u32,     // first output row of this chunk
    y_offset: u32, // float index in y of output row 0
    flags: u32,    // bit 0: accumulate into y; bit 5: add bias[row] (matmul_common's bits)
    y_stride: u32, // floats from one activation row's outputs to the next
    x_row: u32,    // vec4s from one activation row of xq to the next
    eps: f32,      // IN = 2: the RMSNorm epsilon
}

@group(0) @binding(0) var<uniform> p: MatvecQ8Params;
// The weights as words (Q6_K: its 210-byte blocks are only 2-byte aligned)
// and as 16-byte vectors (Q4_K: 144-byte blocks); WGSL allows two
// variables on one binding as long as no entry point uses both.
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> wv: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> xq: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
// A projection's bias, one float a row of W (read with flags bit 5 only).
@group(0) @binding(4) var<storage, read> bias: array<f32>;
// IN > 0: the f32 activations, and with IN = 2 the norm's gain.
@group(0) @binding(5) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read> g: array<vec4<f32>>;

const LANES: u32 = WG / ROWS;
// A lane's partial sum of each activation row (this compiler takes no
// expression as an array's size).
const SUMS: u32 = WG * NX;
var<workgroup> sums: array<f32, SUMS>;
// IN > 0: the row quantized, in xq's layout.
var<workgroup> xs: array<vec4<u32>, XS>;

// A mask of four 4-bit levels, one in each byte (DOT = 1).
const B4: u32 = 0x0F0F0F0Fu;

// Masks of two 4-bit (Q4_K, and Q6_K's low bits) and two 2-bit (Q6_K's
// high bits) levels, one in each 16-bit half.
const M4: u32 = 0x000F000Fu;
const M2: u32 = 0x00030003u;

// ---- the activations (quantize_q8's layout) ---------------------------------

// The activation rows' functions take xb, the row's first vec4 of xq.

// xvec is vec4 i of the row: from xq, or from xs where the workgroup
// quantized the row itself (IN is a constant: the branch folds away).
fn xvec(xb: u32, i: u32) -> vec4<u32> {
    if (IN == 0u) {
        return xq[xb + i];
    }
    return xs[i];
}

// run_x is the 8 words of levels of the 16 activations from element e (a
// multiple of 16), SWAR's packing.
fn run_x(xb: u32, e: u32) -> array<vec4<u32>, 2> {
    return array<vec4<u32>, 2>(xvec(xb, e / 8u), xvec(xb, e / 8u + 1u));
}

// run_x4 is the 4 words of levels of the 16 activations from element e (a
// multiple of 16), the packed form's.
fn run_x4(xb: u32, e: u32) -> vec4<u32> {
    return xvec(xb, e / 16u);
}

// dot16 is the integer dot product of 16 levels in each of two packed
// vectors.
fn dot16(a: vec4<u32>, b: vec4<u32>) -> i32 {
    return (dot4I8Packed(a.x, b.x) + dot4I8Packed(a.y, b.y)) + (dot4I8Packed(a.z, b.z) + dot4I8Packed(a.w, b.w));
}

// packed_dots is a K-quant part's two run sums with the activation row at
// xr, its runs' packed levels in lv[0] and lv[1] (runs from elements ea
// and eb).
fn packed_dots(lv: array<vec4<u32>, 4>, xr: u32, ea: u32, eb: u32) -> vec2<i32> {
    return vec2<i32>(dot16(lv[0], run_x4(xr, ea)), dot16(lv[1], run_x4(xr, eb)));
}

// xword is word i of the row.
fn xword(xb: u32, i: u32) -> u32 {
    return xvec(xb, i >> 2u)[i & 3u];
}

// x_in is vec4 i of the f32 row as IN reads it; inv is the norm's 1/rms.
fn x_in(i: u32, inv: f32) -> vec4<f32> {
    if (IN == 3u) {
        return q8_glu(x[i], x[p.k / 4u + i]); // up starts k floats after gate
    }
    if (IN == 2u) {
        return x[i] * inv * q8_gain(g[i]);
    }
    return x[i];
}

// stage_x quantizes the row into xs, one invocation a block of 32 (its 8
// loads issued at once), and publishes it with a barrier. Every invocation
// must call it (the norm's sum is a workgroup reduction).
fn stage_x(lid: u32) {
    var inv = 1.0;
    if (IN == 2u) {
        inv = q8_inv_rms(0u, lid, p.eps);
    }
    let nb = p.k / 32u;
    for (var b = lid; b < nb; b += WG) {
        var v: array<vec4<f32>, 8>;
        for (var i = 0u; i < 8u; i++) {
            v[i] = x_in(8u * b + i, inv);
        }
        var amax = 0.0;
        for (var i = 0u; i < 8u; i++) {
            let a = abs(v[i]);
            amax = max(amax, max(max(a.x, a.y), max(a.z, a.w)));
        }
        let step = q8_step(amax);
        // Levels of floats 32b + 8j .. +7 in vec4 4b + j (packed: word j
        // of vec4 2b, 2b + 1); Σq of each half.
        var s = vec2<i32>(0);
        var packed: array<u32, 8>;
        for (var j = 0u; j < 4u; j++) {
            let q0 = q8_levels(v[2u * j], step.y);
            let q1 = q8_levels(v[2u * j + 1u], step.y);
            let sq = (q0.x + q0.y) + (q0.z + q0.w) + (q1.x + q1.y) + (q1.z + q1.w);
            if (j < 2u) {
                s.x += sq;
            } else {
                s.y += sq;
            }
            if (DOT == 1u) {
                packed[2u * j] = pack4xI8(q0);
                packed[2u * j + 1u] = pack4xI8(q1);
            } else {
                xs[4u * b + j] = vec4<u32>(q8_pack(q0), q8_pack(q1));
            }
        }
        if (DOT == 1u) {
            xs[2u * b] = vec4<u32>(packed[0], packed[1], packed[2], packed[3]);
            xs[2u * b + 1u] = vec4<u32>(packed[4], packed[5], packed[6], packed[7]);
        }
        let sw = p.k / 2u + b; // the block's scale; the half sums follow all scales
        xs[sw >> 2u][sw & 3u] = bitcast<u32>(step.x);
        let hw = p.k / 2u + nb + 2u * b;
        xs[hw >> 2u][hw & 3u] = bitcast<u32>(s.x);
        xs[(hw + 1u) >> 2u][(hw + 1u) & 3u] = bitcast<u32>(s.y);
    }
    workgroupBarrier();
}

// x_scale is the scale of the 32-block holding element e.
fn x_scale(xb: u32, e: u32) -> f32 {
    return bitcast<f32>(xword(xb, p.k / 2u + e / 32u));
}

// x_sum is Σq of the 16 activations from element e (a multiple of 16).
fn x_sum(xb: u32, e: u32) -> i32 {
    return bitcast<i32>(xword(xb, p.k / 2u + p.k / 32u + e / 16u));
}

// level_sum is Σ of the levels held in the two halves of s.
fn level_sum(s: u32) -> i32 {
    return i32((s & 0xffffu) + (s >> 16u));
}

// ---- Q4_K: 144 bytes = 9 vectors: d, dmin, scales[12]; qs[128] ------------

// q4_levels unpacks one quant word's share of a part: its low nibbles
// (run a) and high nibbles (run b), two levels to a word (a0, a1, b0, b1).
fn q4_levels(qw: u32) -> vec4<u32> {
    return vec4<u32>(qw & M4, (qw >> 8u) & M4, (qw >> 4u) & M4, (qw >> 12u) & M4);
}

// q4_word is a word's levels lv times the activations xa (run a) and xb
// (run b), and the level sums: (Σa·u, Σb·u, Σa, Σb), each in the top or
// both halves as above.
fn q4_word(lv: vec4<u32>, xa0: u32, xa1: u32, xb0: u32, xb1: u32) -> vec4<u32> {
    return vec4<u32>(lv.x * xa0 + lv.y * xa1, lv.z * xb0 + lv.w * xb1, lv.x + lv.y, lv.z + lv.w);
}

// q4_dots is Σa·q and Σb·q of a part's runs a and b with the activation
// row at xr (runs from elements ea and eb), lv the part's levels: SWAR,
// q4_levels of its four words; packed, runs a and b in lv[0] and lv[1].
fn q4_dots(lv: array<vec4<u32>, 4>, xr: u32, ea: u32, eb: u32) -> vec2<i32> {
    if (DOT == 1u) {
        return packed_dots(lv, xr, ea, eb);
    }
    let xa = run_x(xr, ea);
    let xb = run_x(xr, eb);
    let s = q4_word(lv[0], xa[0].x, xa[0].y, xb[0].x, xb[0].y)
        + q4_word(lv[1], xa[0].z, xa[0].w, xb[0].z, xb[0].w)
        + q4_word(lv[2], xa[1].x, xa[1].y, xb[1].x, xb[1].y)
        + q4_word(lv[3], xa[1].z, xa[1].w, xb[1].z, xb[1].w);
    return vec2<i32>(i32(s.x >> 16u) - 128 * level_sum(s.z), i32(s.y >> 16u) - 128 * level_sum(s.w));
}

// part_q4_k adds part pt (0..7) of the block at vector bv, whose first
// element is e, dotted with each activation row, to acc: runs a and b are
// sub-blocks 2·(pt/2) and 2·(pt/2) + 1, elements 16·(pt%2) .. +15 of each.
fn part_q4_k(bv: u32, e: u32, pt: u32, acc: ptr<function, array<f32, NX>>) {
    let pr = pt >> 1u;
    let hdr = wv[bv];
    let q = wv[bv + 1u + pt];
    let ea = e + 64u * pr + 16u * (pt & 1u);
    let eb = ea + 32u;
    var lv: array<vec4<u32>, 4>;
    if (DOT == 1u) {
        lv[0] = q & vec4<u32>(B4);
        lv[1] = (q >> vec4<u32>(4u)) & vec4<u32>(B4);
    } else {
        lv = array<vec4<u32>, 4>(q4_levels(q.x), q4_levels(q.y), q4_levels(q.z), q4_levels(q.w));
    }
    let dm = unpack2x16float(hdr.x);
    let sma = scale_min_k4(2u * pr, hdr.yzw);
    let smb = scale_min_k4(2u * pr + 1u, hdr.yzw);
    for (var r = 0u; r < NX; r++) {
        let xr = r * p.x_row;
        let dots = q4_dots(lv, xr, ea, eb);
        let dot_a = dots.x;
        let dot_b = dots.y;
        let ta = dm.x * f32(sma.x) * f32(dot_a) - dm.y * f32(sma.y) * f32(x_sum(xr, ea));
        let tb = dm.x * f32(smb.x) * f32(dot_b) - dm.y * f32(smb.y) * f32(x_sum(xr, eb));
        (*acc)[r] += x_scale(xr, ea) * ta + x_scale(xr, eb) * tb;
    }
}

fn row_q4_k(row: u32, lane: u32) -> array<f32, NX> {
    let nb = p.k / 256u;
    let row_v = row * nb * 9u;
    var acc: array<f32, NX>;
    for (var u = lane; u < nb * 8u; u += LANES) {
        let b = u >> 3u;
        part_q4_k(row_v + 9u * b, 256u * b, u & 7u, &acc);
    }
    return acc;
}

// ---- Q6_K: 210 bytes: ql[128], qh[64] at 128, scales i8[16] at 192, d ---

// q6_levels unpacks one word of ql and of qh's share of a part (the high
// bits at bit sh of each byte for run a, sh + 4 for run b): (a0, a1, b0,
// b1), two 6-bit levels to a word.
fn q6_levels(ql: u32, qh: u32, sh: u32) -> vec4<u32> {
    return vec4<u32>((ql & M4) | (((qh >> sh) & M2) << 4u), ((ql >> 8u) & M4) | (((qh >> (sh + 8u)) & M2) << 4u),
        ((ql >> 4u) & M4) | (((qh >> (sh + 4u)) & M2) << 4u), ((ql >> 12u) & M4) | (((qh >> (sh + 12u)) & M2) << 4u));
}

// q6_word is a word's levels lv times the activations: (Σa·u, Σb·u) with
// their top halves already taken out, and the level sums (Σa, Σb).
fn q6_word(lv: vec4<u32>, xa0: u32, xa1: u32, xb0: u32, xb1: u32) -> vec4<u32> {
    return vec4<u32>((lv.x * xa0 + lv.y * xa1) >> 16u, (lv.z * xb0 + lv.w * xb1) >> 16u, lv.x + lv.y, lv.z + lv.w);
}

// q6_dots is Σa·q and Σb·q of a part's runs with the activation row at xr,
// as q4_dots (SWAR: Σa·u − 128·Σa).
fn q6_dots(lv: array<vec4<u32>, 4>, xr: u32, ea: u32, eb: u32) -> vec2<i32> {
    if (DOT == 1u) {
        return packed_dots(lv, xr, ea, eb);
    }
    let xa = run_x(xr, ea);
    let xb = run_x(xr, eb);
    let s = q6_word(lv[0], xa[0].x, xa[0].y, xb[0].x, xb[0].y)
        + q6_word(lv[1], xa[0].z, xa[0].w, xb[0].z, xb[0].w)
        + q6_word(lv[2], xa[1].x, xa[1].y, xb[1].x, xb[1].y)
        + q6_word(lv[3], xa[1].z, xa[1].w, xb[1].z, xb[1].w);
    return vec2<i32>(i32(s.x) - 128 * level_sum(s.z), i32(s.y) - 128 * level_sum(s.w));
}

// part_q6_k adds part pt of the block at byte blk, whose first element is
// e, dotted with each activation row, to acc: (h, l/16, j%2) = (pt/4,
// pt/2%2, pt%2), runs j and j + 2 that share their ql bytes
// (matmul_kquant's decode_q6_k), each with one scale.
fn part_q6_k(blk: u32, e: u32, pt: u32, acc: ptr<function, array<f32, NX>>) {
    let h = pt >> 2u;
    let lh = (pt >> 1u) & 1u;
    let jl = pt & 1u;
    let ql = load16(blk + 64u * h + 32u * jl + 16u * lh);
    let qh = load16(blk + 128u + 32u * h + 16u * lh);
    let ea = e + 128u * h + 32u * jl + 16u * lh;
    let eb = ea + 64u;
    let sh = 2u * jl;
    var lv: array<vec4<u32>, 4>;
    if (DOT == 1u) {
        // Runs a and b: the low and high nibbles of ql with qh's two bits
        // at sh and sh + 4 of each byte above them.
        let b2 = vec4<u32>(0x03030303u);
        lv[0] = (ql & vec4<u32>(B4)) | (((qh >> vec4<u32>(sh)) & b2) << vec4<u32>(4u));
        lv[1] = ((ql >> vec4<u32>(4u)) & vec4<u32>(B4)) | (((qh >> vec4<u32>(sh + 4u)) & b2) << vec4<u32>(4u));
    } else {
        lv = array<vec4<u32>, 4>(q6_levels(ql.x, qh.x, sh), q6_levels(ql.y, qh.y, sh), q6_levels(ql.z, qh.z, sh), q6_levels(ql.w, qh.w, sh));
    }
    let sa = i32(byte_at(blk + 192u + 8u * h + 2u * jl + lh) << 24u) >> 24u;
    let sb = i32(byte_at(blk + 196u + 8u * h + 2u * jl + lh) << 24u) >> 24u;
    let d = f16_at(blk + 208u);
    for (var r = 0u; r < NX; r++) {
        let xr = r * p.x_row;
        // Σ(a − 32)·q = Σa·q − 32·Σq.
        let aq = q6_dots(lv, xr, ea, eb);
        let dot_a = aq.x - 32 * x_sum(xr, ea);
        let dot_b = aq.y - 32 * x_sum(xr, eb);
        (*acc)[r] += d * (x_scale(xr, ea) * (f32(sa) * f32(dot_a)) + x_scale(xr, eb) * (f32(sb) * f32(dot_b)));
    }
}

fn row_q6_k(row: u32, lane: u32) -> array<f32, NX> {
    let nb = p.k / 256u;
    let rowb = row * nb * 210u;
    var acc: array<f32, NX>;
    for (var u = lane; u < nb * 8u; u += LANES) {
        let b = u >> 3u;
        part_q6_k(rowb + 210u * b, 256u * b, u & 7u, &acc);
    }
    return acc;
}

// ---- Q8_0: 34 bytes: d f16, qs i8[32] --------------------------------------
//
// The packed form multiplies the i8 levels as they are. SWAR's do not
// pack, being signed: the sign bit flipped makes them u = q + 128
// (0..255), and u = 16·hi + lo splits each into two nibbles that pack as
// Q4_K's do, two products to a multiply for each. Σq·x = Σu·u_x − 128·(Σu +
// Σq_x), as u_x = q_x + 128 (the 128² terms cancel over a block).

// q8_word is one word of a block's levels' share: (Σlo·u_x, Σhi·u_x) in the
// top halves and the nibble sums (Σlo, Σhi) in both.
fn q8_word(qw: u32, x0: u32, x1: u32) -> vec4<u32> {
    let u = qw ^ 0x80808080u;
    let l0 = u & M4;
    let l1 = (u >> 8u) & M4;
    let h0 = (u >> 4u) & M4;
    let h1 = (u >> 12u) & M4;
    return vec4<u32>(l0 * x0 + l1 * x1, h0 * x0 + h1 * x1, l0 + l1, h0 + h1);
}

// q8_run is Σq·x over a run of 16 levels (the words of q) and their
// activations from element e of the row at xb: packed, four instructions;
// SWAR, 8 multiplies of two products into each sum, top ≤ 16·15·255 =
// 61200 and low ≤ 8·15·255 = 30600.
fn q8_run(q: vec4<u32>, xb: u32, e: u32) -> i32 {
    if (DOT == 1u) {
        return dot16(q, run_x4(xb, e)); // the levels are i8 bytes already
    }
    let xr = run_x(xb, e);
    let s = q8_word(q.x, xr[0].x, xr[0].y) + q8_word(q.y, xr[0].z, xr[0].w)
        + q8_word(q.z, xr[1].x, xr[1].y) + q8_word(q.w, xr[1].z, xr[1].w);
    let uu = 16 * i32(s.y >> 16u) + i32(s.x >> 16u);
    let su = 16 * level_sum(s.w) + level_sum(s.z);
    return uu - 128 * (su + x_sum(xb, e));
}

// block_q8_0 adds the block at byte blk, whose first element is e, dotted
// with each activation row, to acc.
fn block_q8_0(blk: u32, e: u32, acc: ptr<function, array<f32, NX>>) {
    let q0 = load16(blk + 2u);
    let q1 = load16(blk + 18u);
    let d = f16_at(blk);
    for (var r = 0u; r < NX; r++) {
        let xr = r * p.x_row;
        let dot = q8_run(q0, xr, e) + q8_run(q1, xr, e + 16u);
        (*acc)[r] += d * x_scale(xr, e) * f32(dot);
    }
}

fn row_q8_0(row: u32, lane: u32) -> array<f32, NX> {
    let nb = p.k / 32u;
    let rowb = row * nb * 34u;
    var acc: array<f32, NX>;
    for (var b = lane; b < nb; b += LANES) {
        block_q8_0(rowb + 34u * b, 32u * b, &acc);
    }
    return acc;
}

// ---- entries ------------------------------------------------------------

// store_row sums the LANES partial sums of each row in lane order and lets
// the row's first lane write it for each activation row, plus the row's
// bias with flags bit 5 (adding to y when flags bit 0 asks).
fn store_row(lid: u32, row: u32, acc_in: array<f32, NX>) {
    var acc = acc_in; // a value array takes only constant indices
    for (var r = 0u; r < NX; r++) {
        sums[r * WG + lid] = acc[r];
    }
    workgroupBarrier();
    if (lid % LANES == 0u && row < p.n) {
        for (var r = 0u; r < NX; r++) {
            var v = 0.0;
            for (var i = 0u; i < LANES; i++) {
                v += sums[r * WG + lid + i];
            }
            put_y(p.y_offset + r * p.y_stride + p.row0 + row, row, v);
        }
    }
}

fn row_of(lid: u32, wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return (wid.x + wid.y * nwg.x) * ROWS + lid / LANES;
}

// The entries differ in their row decoder only. (One entry body switching
// on a type constant would name both views of binding 1 in every entry,
// which WGSL refuses.)

@compute @workgroup_size(WG)
fn matvec_q8_q4_k(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    if (IN != 0u) {
        stage_x(lid);
    }
    let row = row_of(lid, wid, nwg);
    var acc: array<f32, NX>;
    if (row < p.n) {
        acc = row_q4_k(row, lid % LANES);
    }
    store_row(lid, row, acc);
}

@compute @workgroup_size(WG)
fn matvec_q8_q6_k(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    if (IN != 0u) {
        stage_x(lid);
    }
    let row = row_of(lid, wid, nwg);
    var acc: array<f32, NX>;
    if (row < p.n) {
        acc = row_q6_k(row, lid % LANES);
    }
    store_row(lid, row, acc);
}

@compute @workgroup_size(WG)
fn matvec_q8_q8_0(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    if (IN != 0u) {
        stage_x(lid);
    }
    let row = row_of(lid, wid, nwg);
    var acc: array<f32, NX>;
    if (row < p.n) {
        acc = row_q8_0(row, lid % LANES);
    }
    store_row(lid, row, acc);
}
