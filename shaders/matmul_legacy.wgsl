// Matrix products with legacy-quantized weights (Q4_0, Q4_1, Q5_0, Q5_1,
// Q8_0) and MXFP4, whose 32-weight block reads like Q4_0's: y = W·x
// (matvec_<type>, decode) and Y = X·Wᵀ (matmul_<type>, prefill). W is one
// row chunk of a GGUF tensor, read as raw u32 words; each block is decoded
// in registers, never written back as f32.
//
// Constants: WG invocations per workgroup, ROWS output rows per workgroup,
// TM activation rows per workgroup (1 for matvec), XCH and UNROLL (matvec
// only, see matvec_common).
// Grid: x (+ y past 65535) walks groups of ROWS rows, z walks tiles of TM
// activation rows.
//
// Decode (matvec_rows, the matvec_ entries) uses the matvec_common skeleton:
// LANES = WG/ROWS lanes per row, each decoding whole 32-weight blocks (one
// scale, 16-32 quant bytes read as 4-8 words) with stride LANES, and a
// handful of adds to finish a row. Many rows per workgroup share each read
// of x. (All 256 threads of a workgroup on 4 rows left each thread 2-4
// parts of work before an 8-level tree of 4 sums: 841 GB/s Q4_0 and 1435
// Q8_0 at 8192×8192 on an H200, a quarter to a third of its bandwidth.)
//
// Prefill (matmul_body, the matmul_ entries): a 32-element block is 4 parts
// of 8 weights, and all WG threads of a workgroup stride over the parts of
// the row length together. A thread loads the activations of its part once
// (TM rows of 8 floats) and reuses them for all ROWS rows, and reuses each
// decoded part for all TM activation rows; ROWS×TM partial sums per thread
// are then tree-reduced in shared memory (WG a power of two of at least
// ROWS*TM).
//
// The blocks (ggml-common.h) are 18, 20, 22, 24 and 34 bytes, so a block is
// only 2-byte aligned: words are fetched with byte offsets (u32_at, and
// wbytes_common's load16 and f16_at).
// Every block size and field offset is even, so a word is either aligned or
// off by exactly two bytes — except MXFP4's 17-byte blocks, which start at
// any byte: u32_at, load16 and byte_at take any offset, f16_at an even one.

//!include matmul_common
//!include matmul_reduce
//!include matvec_common
//!include glu_common
//!include wbytes_common

// ggml type ids, used as a compile-time selector: each entry point passes a
// literal, so after inlining only one decoder survives.
const Q4_0 = 2u;
const Q4_1 = 3u;
const Q5_0 = 6u;
const Q5_1 = 7u;
const Q8_0 = 8u;
const MXFP4 = 39u;

// The little-endian u32 at byte offset o (odd only in MXFP4). When o is
// word-aligned the second word is not needed: the shift by 32 - 0 wraps
// (WGSL masks shift counts) and select discards it. That read may be one
// word past the buffer's end for the last block, which WebGPU's bounds
// clamping makes safe.
fn u32_at(o: u32) -> u32 {
    let i = o >> 2u;
    let s = (o & 3u) * 8u;
    let lo = w[i];
    let hi = w[i + 1u];
    return select((lo >> s) | (hi << (32u - s)), lo, s == 0u);
}

// The four nibbles of a word's bytes at bit shift 0 (low) or 4 (high).
fn nibbles(q: u32, shift: u32) -> vec4<u32> {
    return (vec4<u32>(q) >> (vec4<u32>(0u, 8u, 16u, 24u) + vec4<u32>(shift))) & vec4<u32>(15u);
}

// Bits first..first+3 of qh, each moved to bit 4 of a 5-bit level.
fn high_bits(qh: u32, first: u32) -> vec4<u32> {
    return ((vec4<u32>(qh) >> (vec4<u32>(0u, 1u, 2u, 3u) + vec4<u32>(first))) & vec4<u32>(1u)) << vec4<u32>(4u);
}

// The four signed bytes of a word: flipping the sign bits makes each byte
// its value + 128.
fn sbytes(q: u32) -> vec4<f32> {
    return levels((vec4<u32>(q ^ 0x80808080u) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(255u), 128.0);
}

// mxfp4_levels is kvalues_mxfp4[c] (ggml-common.h) of each 4-bit code c:
// the E2M1 values doubled, 0 1 2 3 4 6 8 12 for c & 7 (the nibbles of
// 0xc8643210), negative for c > 8 (code 8 is ggml's +0, not -0).
fn mxfp4_levels(c: vec4<u32>) -> vec4<f32> {
    let v = levels((vec4<u32>(0xc8643210u) >> ((c & vec4<u32>(7u)) * 4u)) & vec4<u32>(15u), 0.0);
    return select(v, -v, c > vec4<u32>(8u));
}

// e8m0_half is GGML_E8M0_TO_FP32_HALF, MXFP4's scale: 2^(e-128) built from
// its bits, so exact, with e = 0 and 1 the subnormals 2^-128 and 2^-127 as
// in ggml (a GPU that flushes subnormals reads those two as 0: weights of at
// most 12·2^-127 ≈ 7e-38). e = 255 is 2^127, not NaN, as in ggml.
fn e8m0_half(e: u32) -> f32 {
    return bitcast<f32>(select((e - 1u) << 23u, 0x00200000u << e, e < 2u));
}

fn block_bytes(qt: u32) -> u32 {
    switch qt {
        case MXFP4: { return 17u; }
        case Q4_0: { return 18u; }
        case Q4_1: { return 20u; }
        case Q5_0: { return 22u; }
        case Q5_1: { return 24u; }
        default: { return 34u; }
    }
}

// Part: 8 weights of a block, d*a at elements ea..ea+3 of the block and d*b
// at eb..eb+3. Part k of a 4-bit type (MXFP4 too) is qs word k: its low
// nibbles are elements 4k.., its high nibbles 16+4k..; part k of Q8_0 is
// elements 8k.. The symmetric types leave integer levels in a and b (MXFP4:
// kvalues_mxfp4, the E2M1 values doubled) and their scale in d (MXFP4:
// 2^(e-128)), applied once per part; Q4_1 and Q5_1 fold d and the min m in
// (d = 1), because splitting the sum into d*Σq·x + m*Σx cancels two large
// terms and loses bits a direct sum of w·x keeps (measured: 1.5× over the
// Σ|w·x|-relative tolerance).
struct Part {
    a: vec4<f32>,
    b: vec4<f32>,
    d: f32,
}

fn part_offsets(qt: u32, k: u32) -> vec2<u32> {
    if (qt == Q8_0) {
        return vec2<u32>(8u * k, 8u * k + 4u);
    }
    return vec2<u32>(4u * k, 16u + 4u * k);
}

// decode returns part k of the block at byte offset o.
fn decode(qt: u32, o: u32, k: u32) -> Part {
    switch qt {
        case Q4_0: { // d; qs[16]
            let q = u32_at(o + 2u + 4u * k);
            return Part(levels(nibbles(q, 0u), 8.0), levels(nibbles(q, 4u), 8.0), f16_at(o));
        }
        case Q4_1: { // d; m; qs[16]. 20-byte blocks are word-aligned.
            let i = o >> 2u;
            let dm = unpack2x16float(w[i]);
            let q = w[i + 1u + k];
            return Part(levels(nibbles(q, 0u), 0.0) * dm.x + dm.y, levels(nibbles(q, 4u), 0.0) * dm.x + dm.y, 1.0);
        }
        case Q5_0: { // d; qh u32 (bit j = bit 4 of element j); qs[16]
            let qh = u32_at(o + 2u);
            let q = u32_at(o + 6u + 4u * k);
            return Part(
                levels(nibbles(q, 0u) | high_bits(qh, 4u * k), 16.0),
                levels(nibbles(q, 4u) | high_bits(qh, 16u + 4u * k), 16.0),
                f16_at(o));
        }
        case Q5_1: { // d; m; qh u32; qs[16]. 24-byte blocks are word-aligned.
            let i = o >> 2u;
            let dm = unpack2x16float(w[i]);
            let qh = w[i + 1u];
            let q = w[i + 2u + k];
            return Part(
                levels(nibbles(q, 0u) | high_bits(qh, 4u * k), 0.0) * dm.x + dm.y,
                levels(nibbles(q, 4u) | high_bits(qh, 16u + 4u * k), 0.0) * dm.x + dm.y,
                1.0);
        }
        case MXFP4: { // e u8; qs[16]
            let q = u32_at(o + 1u + 4u * k);
            return Part(mxfp4_levels(nibbles(q, 0u)), mxfp4_levels(nibbles(q, 4u)), e8m0_half(byte_at(o)));
        }
        default: { // Q8_0: d; qs int8[32]
            return Part(sbytes(u32_at(o + 2u + 8u * k)), sbytes(u32_at(o + 6u + 8u * k)), f16_at(o));
        }
    }
}

// Block is one whole block: q[j] holds elements 4j..4j+3, as integer levels
// times d for the symmetric types and as weights with d = 1 for Q4_1 and
// Q5_1 (see Part).
struct Block {
    q: array<vec4<f32>, 8>,
    d: f32,
}

// decode_block returns the block at byte offset o. In the 4- and 5-bit
// types word j of qs holds elements 4j.. in its low nibbles and 16+4j.. in
// its high ones.
fn decode_block(qt: u32, o: u32) -> Block {
    var b: Block;
    switch qt {
        case Q4_0: { // d; qs[16]
            let q = load16(o + 2u);
            for (var j = 0u; j < 4u; j++) {
                b.q[j] = levels(nibbles(q[j], 0u), 8.0);
                b.q[j + 4u] = levels(nibbles(q[j], 4u), 8.0);
            }
            b.d = f16_at(o);
        }
        case Q4_1: { // d; m; qs[16]. 20-byte blocks are word-aligned.
            let i = o >> 2u;
            let dm = unpack2x16float(w[i]);
            let q = vec4<u32>(w[i + 1u], w[i + 2u], w[i + 3u], w[i + 4u]);
            for (var j = 0u; j < 4u; j++) {
                b.q[j] = levels(nibbles(q[j], 0u), 0.0) * dm.x + dm.y;
                b.q[j + 4u] = levels(nibbles(q[j], 4u), 0.0) * dm.x + dm.y;
            }
            b.d = 1.0;
        }
        case Q5_0: { // d; qh u32 (bit j = bit 4 of element j); qs[16]
            let qh = u32_at(o + 2u);
            let q = load16(o + 6u);
            for (var j = 0u; j < 4u; j++) {
                b.q[j] = levels(nibbles(q[j], 0u) | high_bits(qh, 4u * j), 16.0);
                b.q[j + 4u] = levels(nibbles(q[j], 4u) | high_bits(qh, 16u + 4u * j), 16.0);
            }
            b.d = f16_at(o);
        }
        case Q5_1: { // d; m; qh u32; qs[16]. 24-byte blocks are word-aligned.
            let i = o >> 2u;
            let dm = unpack2x16float(w[i]);
            let qh = w[i + 1u];
            let q = vec4<u32>(w[i + 2u], w[i + 3u], w[i + 4u], w[i + 5u]);
            for (var j = 0u; j < 4u; j++) {
                b.q[j] = levels(nibbles(q[j], 0u) | high_bits(qh, 4u * j), 0.0) * dm.x + dm.y;
                b.q[j + 4u] = levels(nibbles(q[j], 4u) | high_bits(qh, 16u + 4u * j), 0.0) * dm.x + dm.y;
            }
            b.d = 1.0;
        }
        case MXFP4: { // e u8; qs[16]
            let q = load16(o + 1u);
            for (var j = 0u; j < 4u; j++) {
                b.q[j] = mxfp4_levels(nibbles(q[j], 0u));
                b.q[j + 4u] = mxfp4_levels(nibbles(q[j], 4u));
            }
            b.d = e8m0_half(byte_at(o));
        }
        default: { // Q8_0: d; qs int8[32]
            let q0 = load16(o + 2u);
            let q1 = load16(o + 18u);
            for (var j = 0u; j < 4u; j++) {
                b.q[j] = sbytes(q0[j]);
                b.q[j + 4u] = sbytes(q1[j]);
            }
            b.d = f16_at(o);
        }
    }
    return b;
}

// xslot is where chunk vec4 v of x is staged: vec4 i of block c at slot
// 8c + (i ^ (c & 7)), so the 8 lanes of a quarter warp, reading vec4 i of 8
// consecutive blocks, hit 8 different 16-byte bank groups.
fn xslot(v: u32) -> u32 {
    return (v & ~7u) | ((v ^ (v >> 3u)) & 7u);
}

// block_dot is b · x for chunk block c.
fn block_dot(b: Block, e0: u32, c: u32) -> f32 {
    let v = 8u * c;
    let lo = (dot(b.q[0], x4v(e0, v)) + dot(b.q[1], x4v(e0, v + 1u))) + (dot(b.q[2], x4v(e0, v + 2u)) + dot(b.q[3], x4v(e0, v + 3u)));
    let hi = (dot(b.q[4], x4v(e0, v + 4u)) + dot(b.q[5], x4v(e0, v + 5u))) + (dot(b.q[6], x4v(e0, v + 6u)) + dot(b.q[7], x4v(e0, v + 7u)));
    return b.d * (lo + hi);
}

// row_units (matvec_common) is the lane's share of row · x over the chunk
// of len elements at e0: its blocks with stride LANES.
fn row_units(qt: u32, lane: u32, rowb: u32, e0: u32, len: u32) -> f32 {
    let bs = block_bytes(qt);
    let blk0 = rowb + (e0 / 32u) * bs;
    let nc = len / 32u;
    var acc = 0.0;
    var c = lane;
    if (UNROLL == 2u) {
        // Both blocks' loads are in flight before either is used.
        for (; c + LANES < nc; c += 2u * LANES) {
            let b0 = decode_block(qt, blk0 + c * bs);
            let b1 = decode_block(qt, blk0 + (c + LANES) * bs);
            acc += block_dot(b0, e0, c) + block_dot(b1, e0, c + LANES);
        }
    }
    for (; c < nc; c += LANES) {
        acc += block_dot(decode_block(qt, blk0 + c * bs), e0, c);
    }
    return acc;
}

// row_bytes is a weight row's size (matvec_common).
fn row_bytes(qt: u32) -> u32 {
    return (p.k / 32u) * block_bytes(qt);
}

fn matmul_body(qt: u32, lid: u32, wid: vec3<u32>, nwg: vec3<u32>) {
    let r0 = (wid.x + wid.y * nwg.x) * ROWS;
    let j0 = wid.z * TM;
    let nb = p.k / 32u;
    let bs = block_bytes(qt);

    var acc: array<f32, NACC>;
    for (var u = lid; u < 4u * nb; u += WG) {
        let b = u / 4u;
        let k = u % 4u;
        let e = 32u * b + part_offsets(qt, k);
        var xa: array<vec4<f32>, TM>;
        var xb: array<vec4<f32>, TM>;
        for (var j = 0u; j < TM; j++) {
            if (j0 + j < p.m) {
                let xo = (j0 + j) * p.x_stride;
                xa[j] = x4(xo + e.x);
                xb[j] = x4(xo + e.y);
            }
        }
        for (var i = 0u; i < ROWS; i++) {
            if (r0 + i < p.n) {
                let part = decode(qt, ((r0 + i) * nb + b) * bs, k);
                for (var j = 0u; j < TM; j++) {
                    acc[i * TM + j] += part.d * (dot(part.a, xa[j]) + dot(part.b, xb[j]));
                }
            }
        }
    }

    reduce_and_store(lid, &acc, r0, j0);
}

@compute @workgroup_size(WG)
fn matvec_q4_0(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows(Q4_0, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matmul_q4_0(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_body(Q4_0, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_q4_1(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows(Q4_1, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matmul_q4_1(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_body(Q4_1, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_q5_0(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows(Q5_0, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matmul_q5_0(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_body(Q5_0, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_q5_1(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows(Q5_1, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matmul_q5_1(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_body(Q5_1, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_q8_0(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows(Q8_0, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matmul_q8_0(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_body(Q8_0, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_mxfp4(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows(MXFP4, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matmul_mxfp4(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_body(MXFP4, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_normed_q4_0(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows_normed(Q4_0, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_normed_q4_1(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows_normed(Q4_1, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_normed_q5_0(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows_normed(Q5_0, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_normed_q5_1(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows_normed(Q5_1, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_normed_q8_0(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows_normed(Q8_0, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_normed_mxfp4(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows_normed(MXFP4, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_glu_q4_0(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows_glu(Q4_0, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_glu_q4_1(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows_glu(Q4_1, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_glu_q5_0(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows_glu(Q5_0, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_glu_q5_1(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows_glu(Q5_1, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_glu_q8_0(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows_glu(Q8_0, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_glu_mxfp4(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows_glu(MXFP4, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_moe_mxfp4(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows_moe(MXFP4, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_moe_q4_0(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows_moe(Q4_0, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_moe_q4_1(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows_moe(Q4_1, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_moe_q5_0(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows_moe(Q5_0, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_moe_q5_1(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows_moe(Q5_1, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_moe_q8_0(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows_moe(Q8_0, lid, wid, nwg);
}
