// Matrix products with K-quant weights (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K):
// y = W·x for decode (matvec_<type>) and Y = X·Wᵀ for prefill
// (matmul_<type>). W stays in ggml's 256-element super-blocks, read as u32
// words; each invocation dequantizes a slice of a block into registers and
// never writes an f32 copy of the weights anywhere.
//
// The binding, params and grid contract is the one documented at the top of
// engine/ops/matmul.go. Constants prepended by gpu.Spec: WG (invocations per
// workgroup), ROWS (weight rows per workgroup), TM (activation rows per
// workgroup; 1 for matvec), XCH and UNROLL (matvec only, see
// matvec_common).
//
// Parts: a super-block is cut into 8 parts of 32 weights. Each part is two
// runs of 16 consecutive elements chosen so that one run has exactly one
// sub-block scale (Q2_K/Q3_K/Q6_K scale 16 elements, Q4_K/Q5_K 32) and both
// runs come from the same 16 quant bytes, so a thread decodes each scale once
// and reads its quants as 4 words. The LANES = WG/ROWS lanes of a row walk
// the row's parts with stride LANES: neighbouring lanes read neighbouring
// 16-byte slices of a block (coalesced).
//
// Decode (matvec_rows, the matvec_ entries) uses the matvec_common skeleton:
// few lanes per row and many rows per workgroup, so that one read of x
// (16-56 KiB for a 4096-14336-wide row) serves many rows of weights and the
// final reduction is a handful of adds. (64 lanes × 4 rows, every
// workgroup staging all of x and ending in a 6-level tree, read more x
// than weights and waited at barriers: 580 GB/s for Q4_K at 8192×8192 on
// an H200, 14% of its bandwidth.)
//
// Prefill (kquant_rows, the matmul_ entries): in each step every row of the
// workgroup covers the same STEP activations, staged once per step in shared
// memory with coalesced loads; each decoded part is then reused for the TM
// activation rows of the tile, and lanes reduce in shared memory at the end.
// A lane's runs sit 16+ floats apart, so reading x straight from global
// memory with scalar loads made every warp load touch 16-32 sectors; on an
// H200 (Vulkan) staging made prefill 7x faster.
//
// Q3_K (110 bytes) and Q6_K (210 bytes) blocks are not 4-byte aligned: their
// block offsets are only even, so their fields are read through load16 and
// byte_at, which assemble bytes from whichever words hold them.

//!include matmul_common
//!include matvec_common
//!include glu_common
//!include wbytes_common

// Parts of 32 weights per 256-element super-block.
const PARTS: u32 = 8u;
// K elements one step of the workgroup covers: every lane one part.
const STEP: u32 = LANES * 32u;
// Floats per activation row in xs: one pad float after every 16, so lanes
// reading runs 16 elements apart hit different shared-memory banks.
const XROW: u32 = STEP / 16u * 17u;
// xs holds the TM×STEP activation tile of a step, then the lanes' partial
// sums (WG·TM) for the final reduction: TM·XROW = TM·WG·34/ROWS covers
// those while ROWS ≤ 34. (A named constant: naga parses no expression as an
// array size, and evaluates no max() in a constant.)
const SH: u32 = TM * XROW;
var<workgroup> xs: array<f32, SH>;

// Type selectors, the ggml type ids.
const Q2_K: u32 = 10u;
const Q3_K: u32 = 11u;
const Q4_K: u32 = 12u;
const Q5_K: u32 = 13u;
const Q6_K: u32 = 14u;

// ---- byte access -------------------------------------------------------

// load16a is the 16 bytes at byte offset b, a multiple of 4.
fn load16a(b: u32) -> vec4<u32> {
    let i = b >> 2u;
    return vec4<u32>(w[i], w[i + 1u], w[i + 2u], w[i + 3u]);
}

// bits4 takes the field of `mask` bits at bit `shift` of each of the four
// bytes of `word` (shift + 24 stays below 32 for every use here).
fn bits4(word: u32, shift: u32, mask: u32) -> vec4<u32> {
    return (vec4<u32>(word) >> (vec4<u32>(0u, 8u, 16u, 24u) + vec4<u32>(shift))) & vec4<u32>(mask);
}

// ---- decoders ------------------------------------------------------------

// Part is 32 dequantized weights of one super-block: a holds elements
// ea..ea+15, b holds eb..eb+15 (indices within the block).
struct Part {
    a: array<vec4<f32>, 4>,
    b: array<vec4<f32>, 4>,
    ea: u32,
    eb: u32,
}

// Q2_K, 84 bytes: scales[16] (low nibble scale, high nibble min), qs[64],
// d f16 at 80, dmin f16 at 82. Element 128h + 32j + l takes bits 2j of
// qs[32h + l] and scale byte (128h + 32j + l) / 16. Part = (h, l/16, j pair);
// the two runs are j = 2·jp and 2·jp+1 over the same 16 quant bytes.
fn decode_q2_k(blk: u32, part: u32) -> Part {
    let h = part >> 2u;
    let lh = (part >> 1u) & 1u;
    let j0 = (part & 1u) * 2u;
    let dm = unpack2x16float(w[(blk >> 2u) + 20u]);
    let sa = byte_at(blk + 8u * h + 2u * j0 + lh);
    let sb = byte_at(blk + 8u * h + 2u * j0 + 2u + lh);
    let da = dm.x * f32(sa & 15u);
    let ma = dm.y * f32(sa >> 4u);
    let db = dm.x * f32(sb & 15u);
    let mb = dm.y * f32(sb >> 4u);
    let q = load16a(blk + 16u + 32u * h + 16u * lh);
    var o: Part;
    for (var i = 0u; i < 4u; i++) {
        o.a[i] = da * levels(bits4(q[i], 2u * j0, 3u), 0.0) - ma;
        o.b[i] = db * levels(bits4(q[i], 2u * j0 + 2u, 3u), 0.0) - mb;
    }
    o.ea = 128u * h + 32u * j0 + 16u * lh;
    o.eb = o.ea + 32u;
    return o;
}

// q3_scale is Q3_K's 6-bit scale s (0..15) from the 12 packed bytes at
// byte sc: the low nibble is nibble s/8 of byte s%8, the high two bits are
// bits 2·(s/4) of byte 8 + s%4.
fn q3_scale(sc: u32, s: u32) -> i32 {
    let lo = (byte_at(sc + (s & 7u)) >> (4u * (s >> 3u))) & 15u;
    let hi = (byte_at(sc + 8u + (s & 3u)) >> (2u * (s >> 2u))) & 3u;
    return i32(lo | (hi << 4u)) - 32;
}

// Q3_K, 110 bytes: hmask[32], qs[64] at 32, scales[12] at 96, d f16 at 108.
// Element 128h + 32j + l: low bits 2j of qs[32h + l], minus 4 unless bit
// 4h + j of hmask[l] is set (the level is those 3 bits minus 4), times
// d·(scale − 32). Parts as in Q2_K.
fn decode_q3_k(blk: u32, part: u32) -> Part {
    let h = part >> 2u;
    let lh = (part >> 1u) & 1u;
    let j0 = (part & 1u) * 2u;
    let d = f16_at(blk + 108u);
    let da = d * f32(q3_scale(blk + 96u, 8u * h + 2u * j0 + lh));
    let db = d * f32(q3_scale(blk + 96u, 8u * h + 2u * j0 + 2u + lh));
    let q = load16(blk + 32u + 32u * h + 16u * lh);
    let hm = load16(blk + 16u * lh);
    var o: Part;
    for (var i = 0u; i < 4u; i++) {
        let qa = bits4(q[i], 2u * j0, 3u) | (bits4(hm[i], 4u * h + j0, 1u) << vec4<u32>(2u));
        let qb = bits4(q[i], 2u * j0 + 2u, 3u) | (bits4(hm[i], 4u * h + j0 + 1u, 1u) << vec4<u32>(2u));
        o.a[i] = da * levels(qa, 4.0);
        o.b[i] = db * levels(qb, 4.0);
    }
    o.ea = 128u * h + 32u * j0 + 16u * lh;
    o.eb = o.ea + 32u;
    return o;
}

// Q4_K, 144 bytes: d, dmin f16, scales[12], qs[128] at 16. Sub-blocks 2pr
// and 2pr+1 (pr = 0..3) are the low and high nibbles of qs[32pr..32pr+31].
// Part = (pr, l/16): both nibbles of 16 bytes, two scales.
fn decode_q4_k(blk: u32, part: u32) -> Part {
    let pr = part >> 1u;
    let lh = part & 1u;
    let wb = blk >> 2u;
    let dm = unpack2x16float(w[wb]);
    let s = vec3<u32>(w[wb + 1u], w[wb + 2u], w[wb + 3u]);
    let sma = scale_min_k4(2u * pr, s);
    let smb = scale_min_k4(2u * pr + 1u, s);
    let da = dm.x * f32(sma.x);
    let ma = dm.y * f32(sma.y);
    let db = dm.x * f32(smb.x);
    let mb = dm.y * f32(smb.y);
    let q = load16a(blk + 16u + 32u * pr + 16u * lh);
    var o: Part;
    for (var i = 0u; i < 4u; i++) {
        o.a[i] = da * levels(bits4(q[i], 0u, 15u), 0.0) - ma;
        o.b[i] = db * levels(bits4(q[i], 4u, 15u), 0.0) - mb;
    }
    o.ea = 64u * pr + 16u * lh;
    o.eb = o.ea + 32u;
    return o;
}

// Q5_K, 176 bytes: d, dmin, scales[12], qh[32] at 16, qs[128] at 48. As
// Q4_K, plus bit 4 of element 32s + l is bit s of qh[l].
fn decode_q5_k(blk: u32, part: u32) -> Part {
    let pr = part >> 1u;
    let lh = part & 1u;
    let wb = blk >> 2u;
    let dm = unpack2x16float(w[wb]);
    let s = vec3<u32>(w[wb + 1u], w[wb + 2u], w[wb + 3u]);
    let sma = scale_min_k4(2u * pr, s);
    let smb = scale_min_k4(2u * pr + 1u, s);
    let da = dm.x * f32(sma.x);
    let ma = dm.y * f32(sma.y);
    let db = dm.x * f32(smb.x);
    let mb = dm.y * f32(smb.y);
    let qh = load16a(blk + 16u + 16u * lh);
    let q = load16a(blk + 48u + 32u * pr + 16u * lh);
    var o: Part;
    for (var i = 0u; i < 4u; i++) {
        let qa = bits4(q[i], 0u, 15u) | (bits4(qh[i], 2u * pr, 1u) << vec4<u32>(4u));
        let qb = bits4(q[i], 4u, 15u) | (bits4(qh[i], 2u * pr + 1u, 1u) << vec4<u32>(4u));
        o.a[i] = da * levels(qa, 0.0) - ma;
        o.b[i] = db * levels(qb, 0.0) - mb;
    }
    o.ea = 64u * pr + 16u * lh;
    o.eb = o.ea + 32u;
    return o;
}

// Q6_K, 210 bytes: ql[128], qh[64] at 128, scales int8[16] at 192, d f16 at
// 208. Element 128h + 32j + l: nibble j/2 of ql[64h + 32(j%2) + l], high
// bits 2j of qh[32h + l], minus 32, times d·scale[(128h + 32j + l) / 16].
// Part = (h, l/16, j%2): runs j and j+2 share their ql bytes.
fn decode_q6_k(blk: u32, part: u32) -> Part {
    let h = part >> 2u;
    let lh = (part >> 1u) & 1u;
    let jl = part & 1u;
    let d = f16_at(blk + 208u);
    let sa = i32(byte_at(blk + 192u + 8u * h + 2u * jl + lh) << 24u) >> 24u;
    let sb = i32(byte_at(blk + 192u + 8u * h + 2u * jl + 4u + lh) << 24u) >> 24u;
    let da = d * f32(sa);
    let db = d * f32(sb);
    let ql = load16(blk + 64u * h + 32u * jl + 16u * lh);
    let qh = load16(blk + 128u + 32u * h + 16u * lh);
    var o: Part;
    for (var i = 0u; i < 4u; i++) {
        let qa = bits4(ql[i], 0u, 15u) | (bits4(qh[i], 2u * jl, 3u) << vec4<u32>(4u));
        let qb = bits4(ql[i], 4u, 15u) | (bits4(qh[i], 2u * jl + 4u, 3u) << vec4<u32>(4u));
        o.a[i] = da * levels(qa, 32.0);
        o.b[i] = db * levels(qb, 32.0);
    }
    o.ea = 128u * h + 32u * jl + 16u * lh;
    o.eb = o.ea + 64u;
    return o;
}

// decode dispatches on the type; every entry point passes a constant, so
// the compiler keeps only one decoder per pipeline.
fn decode(kind: u32, blk: u32, part: u32) -> Part {
    switch kind {
        case Q2_K: { return decode_q2_k(blk, part); }
        case Q3_K: { return decode_q3_k(blk, part); }
        case Q4_K: { return decode_q4_k(blk, part); }
        case Q5_K: { return decode_q5_k(blk, part); }
        default: { return decode_q6_k(blk, part); }
    }
}

fn block_bytes(kind: u32) -> u32 {
    switch kind {
        case Q2_K: { return 84u; }
        case Q3_K: { return 110u; }
        case Q4_K: { return 144u; }
        case Q5_K: { return 176u; }
        default: { return 210u; }
    }
}

// ---- decode: one activation row --------------------------------------------

// xslot is where chunk vec4 v of x is staged. Vec4 i of run r (16 floats)
// goes to slot 4r + (i ^ ((r>>1 ^ r>>2) & 3)): the 8 parts of a block read
// runs {0,1,4,5,8,9,12,13} (Q4_K/Q5_K a, and Q2_K/Q3_K in another order),
// {2,3,6,7,...} (their b) or {0,1,2,3,8,9,10,11} (Q6_K a) and {4,...} (its b),
// and for each of those sets the swizzle sends vec4 i of the 8 runs to 8
// different 16-byte bank groups. Staging writes stay conflict-free: a run's
// 4 vec4s are permuted among themselves.
fn xslot(v: u32) -> u32 {
    let r = v >> 2u;
    return (v & ~3u) | ((v ^ (r >> 1u) ^ (r >> 2u)) & 3u);
}

// dot16v is v · the 16 activations at chunk vec4s o .. o+3.
fn dot16v(v: array<vec4<f32>, 4>, e0: u32, o: u32) -> f32 {
    return (dot(v[0], x4v(e0, o)) + dot(v[1], x4v(e0, o + 1u))) + (dot(v[2], x4v(e0, o + 2u)) + dot(v[3], x4v(e0, o + 3u)));
}

// part_dot is pt · x for a part of chunk super-block b.
fn part_dot(pt: Part, e0: u32, b: u32) -> f32 {
    return dot16v(pt.a, e0, (256u * b + pt.ea) / 4u) + dot16v(pt.b, e0, (256u * b + pt.eb) / 4u);
}

// row_units (matvec_common) is the lane's share of row · x over the chunk
// of len elements at e0: its parts with stride LANES.
fn row_units(kind: u32, lane: u32, rowb: u32, e0: u32, len: u32) -> f32 {
    let bb = block_bytes(kind);
    let blk0 = rowb + (e0 / 256u) * bb;
    let nu = len / 256u * PARTS;
    var acc = 0.0;
    var u = lane;
    if (UNROLL == 2u) {
        // Both parts' loads are in flight before either is used.
        for (; u + LANES < nu; u += 2u * LANES) {
            let u1 = u + LANES;
            let p0 = decode(kind, blk0 + (u / PARTS) * bb, u % PARTS);
            let p1 = decode(kind, blk0 + (u1 / PARTS) * bb, u1 % PARTS);
            acc += part_dot(p0, e0, u / PARTS) + part_dot(p1, e0, u1 / PARTS);
        }
    }
    for (; u < nu; u += LANES) {
        acc += part_dot(decode(kind, blk0 + (u / PARTS) * bb, u % PARTS), e0, u / PARTS);
    }
    return acc;
}

// row_bytes is a weight row's size (matvec_common).
fn row_bytes(kind: u32) -> u32 {
    return (p.k / 256u) * block_bytes(kind);
}

// ---- prefill: a tile of TM activation rows --------------------------------

// xpad is the index in a padded xs row of step element e.
fn xpad(e: u32) -> u32 {
    return e + (e >> 4u);
}

fn xs4(o: u32) -> vec4<f32> {
    return vec4<f32>(xs[o], xs[o + 1u], xs[o + 2u], xs[o + 3u]);
}

// dot16 is v · the 16 staged activations at xs[o ..]; a run starts at a
// multiple of 16, so its 16 padded slots are consecutive. Written out
// because naga only lets a by-value array be indexed by constants.
fn dot16(v: array<vec4<f32>, 4>, o: u32) -> f32 {
    return dot(v[0], xs4(o)) + dot(v[1], xs4(o + 4u)) + dot(v[2], xs4(o + 8u)) + dot(v[3], xs4(o + 12u));
}

// kquant_rows: the workgroup's ROWS weight rows × TM activation rows. Each
// step stages TM×STEP activations in shared memory with coalesced loads
// (every weight row of the workgroup needs the same ones), then each lane
// decodes one part and dots it with the TM staged rows.
fn kquant_rows(kind: u32, lid: u32, wid: vec3<u32>, nwg: vec3<u32>) {
    let lane = lid % LANES;
    let row = (wid.x + wid.y * nwg.x) * ROWS + lid / LANES;
    let j0 = wid.z * TM;
    let nb = p.k / 256u;
    let bb = block_bytes(kind);
    let rowb = row * nb * bb;
    let steps = (nb * PARTS + LANES - 1u) / LANES;

    var acc: array<f32, TM>;
    // Every invocation runs every step and reaches every barrier (steps
    // depends only on p); rows past p.n and parts past the row just skip
    // the arithmetic.
    for (var s = 0u; s < steps; s++) {
        let e0 = s * STEP;
        if (s > 0u) {
            workgroupBarrier(); // the previous step's reads of xs are done
        }
        // Only the step's elements inside the row and the tile's rows
        // inside p.m are staged; no lane reads the other slots this step.
        let len = min(STEP, p.k - e0);
        for (var t = 0u; t < TM && j0 + t < p.m; t++) {
            let xo = (j0 + t) * p.x_stride + e0;
            for (var e = lid; e < len; e += WG) {
                xs[t * XROW + xpad(e)] = x[xo + e];
            }
        }
        workgroupBarrier();
        let u = s * LANES + lane;
        if (row < p.n && u < nb * PARTS) {
            let blk = u / PARTS;
            let pt = decode(kind, rowb + blk * bb, u % PARTS);
            // The block's first element within the step.
            let be = (lane / PARTS) * 256u;
            let oa = xpad(be + pt.ea);
            let ob = xpad(be + pt.eb);
            for (var t = 0u; t < TM; t++) {
                acc[t] += dot16(pt.a, t * XROW + oa) + dot16(pt.b, t * XROW + ob);
            }
        }
    }

    // Tree reduction over the lanes of each row, in xs.
    workgroupBarrier();
    for (var t = 0u; t < TM; t++) {
        xs[t * WG + lid] = acc[t];
    }
    workgroupBarrier();
    for (var s = LANES / 2u; s > 0u; s >>= 1u) {
        if (lane < s) {
            for (var t = 0u; t < TM; t++) {
                xs[t * WG + lid] += xs[t * WG + lid + s];
            }
        }
        workgroupBarrier();
    }

    // Lane t of each row stores activation row j0 + t (LANES >= TM).
    let j = j0 + lane;
    if (row < p.n && lane < TM && j < p.m) {
        let v = xs[lane * WG + lid - lane];
        let yi = p.y_offset + j * p.y_stride + p.row0 + row;
        if ((p.flags & 1u) != 0u) {
            y[yi] += v;
        } else {
            y[yi] = v;
        }
    }
}

@compute @workgroup_size(WG)
fn matvec_q2_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows(Q2_K, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matmul_q2_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    kquant_rows(Q2_K, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_q3_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows(Q3_K, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matmul_q3_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    kquant_rows(Q3_K, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_q4_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows(Q4_K, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matmul_q4_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    kquant_rows(Q4_K, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_q5_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows(Q5_K, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matmul_q5_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    kquant_rows(Q5_K, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_q6_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows(Q6_K, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matmul_q6_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    kquant_rows(Q6_K, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_normed_q2_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows_normed(Q2_K, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_normed_q3_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows_normed(Q3_K, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_normed_q4_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows_normed(Q4_K, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_normed_q5_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows_normed(Q5_K, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_normed_q6_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows_normed(Q6_K, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_glu_q2_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows_glu(Q2_K, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_glu_q3_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows_glu(Q3_K, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_glu_q4_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows_glu(Q4_K, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_glu_q5_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows_glu(Q5_K, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_glu_q6_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows_glu(Q6_K, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_moe_q2_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows_moe(Q2_K, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_moe_q3_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows_moe(Q3_K, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_moe_q4_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows_moe(Q4_K, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_moe_q5_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows_moe(Q5_K, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_moe_q6_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matvec_rows_moe(Q6_K, lid, wid, nwg);
}
