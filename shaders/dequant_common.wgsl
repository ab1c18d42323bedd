// Decoders of every GGUF weight type Hearth multiplies, each returning 8
// *consecutive* weights of one row — the unit a tile along k (the forward,
// shaders/matmul_tiled.wgsl) or along a column block (the input gradient,
// shaders/matmul_backward_input.wgsl) stages into workgroup memory. Pasted in
// by `//!include dequant_common` (shaders.Source).
//
// The including file declares `w: array<u32>` (one row chunk of the tensor,
// raw GGUF bytes) and a uniform `p` whose field `k` is the row length in
// weights. The decoders mirror ggml's dequantize_row_* (named per type) and
// are checked against gguf.Dequantize by both families' parity tests.
//
// Why not the matvec families' decoders: those are fused into their own work
// split (8-weight parts at strided offsets of a 32-block, two runs of 16 for
// K-quants), which a tile that needs whole runs of a row cannot use.

// ggml type ids: each entry point passes a literal, so after inlining only
// one decoder survives per pipeline.
const F32 = 0u;
const F16 = 1u;
const Q4_0 = 2u;
const Q4_1 = 3u;
const Q5_0 = 6u;
const Q5_1 = 7u;
const Q8_0 = 8u;
const Q2_K = 10u;
const Q3_K = 11u;
const Q4_K = 12u;
const Q5_K = 13u;
const Q6_K = 14u;
const BF16 = 30u;
const MXFP4 = 39u;

// Eight consecutive weights, in two registers.
struct Unit {
    a: vec4<f32>,
    b: vec4<f32>,
}

// ---- byte access -----------------------------------------------------------
// Blocks are 17, 18, 20, 22, 24, 34, 84, 110, 144, 176 or 210 bytes and rows
// are whole blocks, so a field can start at any even byte (a row of Q4_0
// blocks is only 2-byte aligned), or at any byte at all in MXFP4's 17-byte
// blocks: word_at and byte_at take any offset, half_at an even one.

// word_at is the little-endian u32 at byte offset b. The second word is read
// only when the bytes straddle it, so the last block never reads past the
// buffer.
fn word_at(b: u32) -> u32 {
    let i = b >> 2u;
    let s = (b & 3u) * 8u;
    if (s == 0u) {
        return w[i];
    }
    return (w[i] >> s) | (w[i + 1u] << (32u - s));
}

fn byte_at(b: u32) -> u32 {
    return (w[b >> 2u] >> ((b & 3u) * 8u)) & 0xffu;
}

// half_at is the binary16 at the even byte offset b, widened.
fn half_at(b: u32) -> f32 {
    return unpack2x16float(w[b >> 2u] >> ((b & 2u) * 8u)).x;
}

// bits4 is the field of `mask` bits at bit `shift` of each byte of a word.
fn bits4(word: u32, shift: u32, mask: u32) -> vec4<u32> {
    return (vec4<u32>(word) >> (vec4<u32>(0u, 8u, 16u, 24u) + vec4<u32>(shift))) & vec4<u32>(mask);
}

// hi_bits: bits first..first+3 of qh, each moved to bit 4 of a 5-bit level.
fn hi_bits(qh: u32, first: u32) -> vec4<u32> {
    return ((vec4<u32>(qh) >> (vec4<u32>(0u, 1u, 2u, 3u) + vec4<u32>(first))) & vec4<u32>(1u)) << vec4<u32>(4u);
}

// sbytes is the four signed bytes of a word.
fn sbytes(q: u32) -> vec4<f32> {
    return vec4<f32>(vec4<i32>(bitcast<i32>(q)) << vec4<u32>(24u, 16u, 8u, 0u) >> vec4<u32>(24u));
}

// ---- float weights -----------------------------------------------------------

// felem is element e (counted from the chunk's first element) of a float
// tensor.
fn felem(qt: u32, e: u32) -> f32 {
    switch qt {
        case F32: { return bitcast<f32>(w[e]); }
        case F16: { return unpack2x16float(w[e >> 1u] >> ((e & 1u) * 16u)).x; }
        default: { return bitcast<f32>(((w[e >> 1u] >> ((e & 1u) * 16u)) & 0xffffu) << 16u); }
    }
}

fn fpair(qt: u32, word: u32) -> vec2<f32> {
    if (qt == F16) {
        return unpack2x16float(word);
    }
    return vec2<f32>(bitcast<f32>(word << 16u), bitcast<f32>(word & 0xffff0000u));
}

// float_unit is elements c..c+7 of row r; columns at or past k read as 0. A
// half-precision row starts on a word only when r·k is even, so an odd start
// falls back to single halves.
fn float_unit(qt: u32, r: u32, c: u32) -> Unit {
    let e = r * p.k + c;
    if (c + 8u > p.k) {
        var v: array<f32, 8>;
        for (var t = 0u; t < 8u; t++) {
            if (c + t < p.k) {
                v[t] = felem(qt, e + t);
            }
        }
        return Unit(vec4<f32>(v[0], v[1], v[2], v[3]), vec4<f32>(v[4], v[5], v[6], v[7]));
    }
    if (qt == F32) {
        return Unit(
            bitcast<vec4<f32>>(vec4<u32>(w[e], w[e + 1u], w[e + 2u], w[e + 3u])),
            bitcast<vec4<f32>>(vec4<u32>(w[e + 4u], w[e + 5u], w[e + 6u], w[e + 7u])));
    }
    if ((e & 1u) == 0u) {
        let i = e >> 1u;
        return Unit(vec4<f32>(fpair(qt, w[i]), fpair(qt, w[i + 1u])), vec4<f32>(fpair(qt, w[i + 2u]), fpair(qt, w[i + 3u])));
    }
    return Unit(
        vec4<f32>(felem(qt, e), felem(qt, e + 1u), felem(qt, e + 2u), felem(qt, e + 3u)),
        vec4<f32>(felem(qt, e + 4u), felem(qt, e + 5u), felem(qt, e + 6u), felem(qt, e + 7u)));
}

// ---- legacy quants: 32-element blocks ------------------------------------------
// o is the block's byte offset, l the first of the 8 elements (0, 8, 16, 24).
// In the 4- and 5-bit types byte i of qs holds element i (low nibble) and
// element i + 16 (high nibble).

// Q4_0 (dequantize_row_q4_0), 18 bytes: d f16; qs[16].
fn unit_q4_0(o: u32, l: u32) -> Unit {
    let d = half_at(o);
    let q = o + 2u + (l & 15u);
    let s = select(0u, 4u, l >= 16u);
    return Unit(d * (vec4<f32>(bits4(word_at(q), s, 15u)) - 8.0), d * (vec4<f32>(bits4(word_at(q + 4u), s, 15u)) - 8.0));
}

// Q4_1 (dequantize_row_q4_1), 20 bytes: d, m f16; qs[16].
fn unit_q4_1(o: u32, l: u32) -> Unit {
    let dm = unpack2x16float(word_at(o));
    let q = o + 4u + (l & 15u);
    let s = select(0u, 4u, l >= 16u);
    return Unit(dm.x * vec4<f32>(bits4(word_at(q), s, 15u)) + dm.y, dm.x * vec4<f32>(bits4(word_at(q + 4u), s, 15u)) + dm.y);
}

// Q5_0 (dequantize_row_q5_0), 22 bytes: d f16; qh u32 (bit j is bit 4 of
// element j); qs[16].
fn unit_q5_0(o: u32, l: u32) -> Unit {
    let d = half_at(o);
    let qh = word_at(o + 2u);
    let q = o + 6u + (l & 15u);
    let s = select(0u, 4u, l >= 16u);
    return Unit(
        d * (vec4<f32>(bits4(word_at(q), s, 15u) | hi_bits(qh, l)) - 16.0),
        d * (vec4<f32>(bits4(word_at(q + 4u), s, 15u) | hi_bits(qh, l + 4u)) - 16.0));
}

// Q5_1 (dequantize_row_q5_1), 24 bytes: d, m f16; qh u32; qs[16].
fn unit_q5_1(o: u32, l: u32) -> Unit {
    let dm = unpack2x16float(word_at(o));
    let qh = word_at(o + 4u);
    let q = o + 8u + (l & 15u);
    let s = select(0u, 4u, l >= 16u);
    return Unit(
        dm.x * vec4<f32>(bits4(word_at(q), s, 15u) | hi_bits(qh, l)) + dm.y,
        dm.x * vec4<f32>(bits4(word_at(q + 4u), s, 15u) | hi_bits(qh, l + 4u)) + dm.y);
}

// Q8_0 (dequantize_row_q8_0), 34 bytes: d f16; qs int8[32].
fn unit_q8_0(o: u32, l: u32) -> Unit {
    let d = half_at(o);
    return Unit(d * sbytes(word_at(o + 2u + l)), d * sbytes(word_at(o + 6u + l)));
}

// mxfp4_levels is kvalues_mxfp4[c] (ggml-common.h) of each 4-bit code c:
// the E2M1 values doubled, 0 1 2 3 4 6 8 12 for c & 7 (the nibbles of
// 0xc8643210), negative for c > 8 (code 8 is ggml's +0, not -0).
fn mxfp4_levels(c: vec4<u32>) -> vec4<f32> {
    let v = vec4<f32>((vec4<u32>(0xc8643210u) >> ((c & vec4<u32>(7u)) * 4u)) & vec4<u32>(15u));
    return select(v, -v, c > vec4<u32>(8u));
}

// e8m0_half is GGML_E8M0_TO_FP32_HALF: 2^(e-128) built from its bits, so
// exact, with e = 0 and 1 the subnormals 2^-128 and 2^-127 as in ggml (a
// GPU that flushes subnormals reads those two as 0: weights of at most
// 12·2^-127 ≈ 7e-38). e = 255 is 2^127, not NaN, as in ggml.
fn e8m0_half(e: u32) -> f32 {
    return bitcast<f32>(select((e - 1u) << 23u, 0x00200000u << e, e < 2u));
}

// MXFP4 (dequantize_row_mxfp4), 17 bytes: e u8 (E8M0); qs[16] of E2M1 codes
// in Q4_0's nibble order. The block, so every field, may start at any byte.
fn unit_mxfp4(o: u32, l: u32) -> Unit {
    let d = e8m0_half(byte_at(o));
    let q = o + 1u + (l & 15u);
    let s = select(0u, 4u, l >= 16u);
    return Unit(d * mxfp4_levels(bits4(word_at(q), s, 15u)), d * mxfp4_levels(bits4(word_at(q + 4u), s, 15u)));
}

// ---- K-quants: 256-element super-blocks ----------------------------------------
// o is the super-block's byte offset, e the first of the 8 elements (a
// multiple of 8, so all 8 share one 16-element scale).

// Q2_K (dequantize_row_q2_K), 84 bytes: scales[16] (low nibble scale, high
// nibble min), qs[64] at 16, d, dmin f16 at 80. Element 128h + 32j + l is
// bits 2j of qs[32h + l], scale byte e/16.
fn unit_q2_k(o: u32, e: u32) -> Unit {
    let h = e >> 7u;
    let j = (e >> 5u) & 3u;
    let q = o + 16u + 32u * h + (e & 31u);
    let dm = unpack2x16float(word_at(o + 80u));
    let sc = byte_at(o + (e >> 4u));
    let d = dm.x * f32(sc & 15u);
    let m = dm.y * f32(sc >> 4u);
    return Unit(d * vec4<f32>(bits4(word_at(q), 2u * j, 3u)) - m, d * vec4<f32>(bits4(word_at(q + 4u), 2u * j, 3u)) - m);
}

// q3_scale is Q3_K's 6-bit scale s (0..15) from the 12 bytes at sc, minus 32.
fn q3_scale(sc: u32, s: u32) -> i32 {
    let lo = (byte_at(sc + (s & 7u)) >> (4u * (s >> 3u))) & 15u;
    let hi = (byte_at(sc + 8u + (s & 3u)) >> (2u * (s >> 2u))) & 3u;
    return i32(lo | (hi << 4u)) - 32;
}

// Q3_K (dequantize_row_q3_K), 110 bytes: hmask[32], qs[64] at 32,
// scales[12] at 96, d f16 at 108. Element 128h + 32j + l: bits 2j of
// qs[32h + l], minus 4 unless bit 4h + j of hmask[l] is set.
fn unit_q3_k(o: u32, e: u32) -> Unit {
    let h = e >> 7u;
    let j = (e >> 5u) & 3u;
    let l = e & 31u;
    let d = half_at(o + 108u) * f32(q3_scale(o + 96u, e >> 4u));
    let q = o + 32u + 32u * h + l;
    let qa = vec4<i32>(bits4(word_at(q), 2u * j, 3u)) + 4 * vec4<i32>(bits4(word_at(o + l), 4u * h + j, 1u)) - 4;
    let qb = vec4<i32>(bits4(word_at(q + 4u), 2u * j, 3u)) + 4 * vec4<i32>(bits4(word_at(o + l + 4u), 4u * h + j, 1u)) - 4;
    return Unit(d * vec4<f32>(qa), d * vec4<f32>(qb));
}

fn kbyte(s: vec3<u32>, i: u32) -> u32 {
    return (s[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu;
}

// scale_min_k4 is ggml's get_scale_min_k4: the 6-bit scale and min of
// sub-block j (0..7) from the 12 bytes in s.
fn scale_min_k4(j: u32, s: vec3<u32>) -> vec2<u32> {
    if (j < 4u) {
        return vec2<u32>(kbyte(s, j) & 63u, kbyte(s, j + 4u) & 63u);
    }
    return vec2<u32>(
        (kbyte(s, j + 4u) & 15u) | ((kbyte(s, j - 4u) >> 6u) << 4u),
        (kbyte(s, j + 4u) >> 4u) | ((kbyte(s, j) >> 6u) << 4u));
}

// Q4_K (dequantize_row_q4_K), 144 bytes: d, dmin f16, scales[12] at 4,
// qs[128] at 16. Sub-block sb = e/32 is the low (even sb) or high nibble
// of qs[32·(sb/2) + l].
fn unit_q4_k(o: u32, e: u32) -> Unit {
    let sb = e >> 5u;
    let dm = unpack2x16float(word_at(o));
    let sm = scale_min_k4(sb, vec3<u32>(word_at(o + 4u), word_at(o + 8u), word_at(o + 12u)));
    let d = dm.x * f32(sm.x);
    let m = dm.y * f32(sm.y);
    let q = o + 16u + 32u * (sb >> 1u) + (e & 31u);
    let s = 4u * (sb & 1u);
    return Unit(d * vec4<f32>(bits4(word_at(q), s, 15u)) - m, d * vec4<f32>(bits4(word_at(q + 4u), s, 15u)) - m);
}

// Q5_K (dequantize_row_q5_K), 176 bytes: as Q4_K with qh[32] at 16 and qs
// at 48; bit 4 of element 32·sb + l is bit sb of qh[l].
fn unit_q5_k(o: u32, e: u32) -> Unit {
    let sb = e >> 5u;
    let l = e & 31u;
    let dm = unpack2x16float(word_at(o));
    let sm = scale_min_k4(sb, vec3<u32>(word_at(o + 4u), word_at(o + 8u), word_at(o + 12u)));
    let d = dm.x * f32(sm.x);
    let m = dm.y * f32(sm.y);
    let q = o + 48u + 32u * (sb >> 1u) + l;
    let s = 4u * (sb & 1u);
    let qa = bits4(word_at(q), s, 15u) | (bits4(word_at(o + 16u + l), sb, 1u) << vec4<u32>(4u));
    let qb = bits4(word_at(q + 4u), s, 15u) | (bits4(word_at(o + 20u + l), sb, 1u) << vec4<u32>(4u));
    return Unit(d * vec4<f32>(qa) - m, d * vec4<f32>(qb) - m);
}

// Q6_K (dequantize_row_q6_K), 210 bytes: ql[128], qh[64] at 128, scales
// int8[16] at 192, d f16 at 208. Element 128h + 32j + l: nibble j/2 of
// ql[64h + 32(j%2) + l], bits 2j of qh[32h + l], minus 32, times
// d·scale[e/16].
fn unit_q6_k(o: u32, e: u32) -> Unit {
    let h = e >> 7u;
    let j = (e >> 5u) & 3u;
    let l = e & 31u;
    let sc = i32(byte_at(o + 192u + (e >> 4u)) << 24u) >> 24u;
    let d = half_at(o + 208u) * f32(sc);
    let ql = o + 64u * h + 32u * (j & 1u) + l;
    let qh = o + 128u + 32u * h + l;
    let s = 4u * (j >> 1u);
    let qa = vec4<i32>(bits4(word_at(ql), s, 15u) | (bits4(word_at(qh), 2u * j, 3u) << vec4<u32>(4u))) - 32;
    let qb = vec4<i32>(bits4(word_at(ql + 4u), s, 15u) | (bits4(word_at(qh + 4u), 2u * j, 3u) << vec4<u32>(4u))) - 32;
    return Unit(d * vec4<f32>(qa), d * vec4<f32>(qb));
}

fn block_elems(qt: u32) -> u32 {
    if (qt >= Q2_K && qt <= Q6_K) {
        return 256u;
    }
    return 32u;
}

fn block_bytes(qt: u32) -> u32 {
    switch qt {
        case Q4_0: { return 18u; }
        case Q4_1: { return 20u; }
        case Q5_0: { return 22u; }
        case Q5_1: { return 24u; }
        case Q8_0: { return 34u; }
        case MXFP4: { return 17u; }
        case Q2_K: { return 84u; }
        case Q3_K: { return 110u; }
        case Q4_K: { return 144u; }
        case Q5_K: { return 176u; }
        default: { return 210u; }
    }
}

// unit is weights c..c+7 of row r of the chunk (c a multiple of 8).
fn unit(qt: u32, r: u32, c: u32) -> Unit {
    if (qt == F32 || qt == F16 || qt == BF16) {
        return float_unit(qt, r, c);
    }
    let be = block_elems(qt);
    let o = (r * (p.k / be) + c / be) * block_bytes(qt);
    let l = c % be;
    switch qt {
        case Q4_0: { return unit_q4_0(o, l); }
        case Q4_1: { return unit_q4_1(o, l); }
        case Q5_0: { return unit_q5_0(o, l); }
        case Q5_1: { return unit_q5_1(o, l); }
        case Q8_0: { return unit_q8_0(o, l); }
        case MXFP4: { return unit_mxfp4(o, l); }
        case Q2_K: { return unit_q2_k(o, l); }
        case Q3_K: { return unit_q3_k(o, l); }
        case Q4_K: { return unit_q4_k(o, l); }
        case Q5_K: { return unit_q5_k(o, l); }
        default: { return unit_q6_k(o, l); }
    }
}

