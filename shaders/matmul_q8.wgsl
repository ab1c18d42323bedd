// The prefill matrix product Y[m×n] = X[m×k]·Wᵀ on 8-bit activations and
// integer dot products, for Q4_K, Q6_K and Q8_0 weights: ggml's MMQ
// arithmetic. X comes quantized by shaders/quantize_q8.wgsl in its packed
// layout (DOT = 1: four i8 levels a word, each 32-block's scale dx and
// level sums after all the levels), rows x_row vec4s apart.
//
// The sums: W's weight in row r, column i, is A·a − B for a level a
// (Q4_K: a = 0..15, A = d·sc and B = dmin·m of its sub-block of 32; Q6_K: a
// = level − 32 in −32..31, A = d·sc of its 16, B = 0; Q8_0: a = q, A = d,
// B = 0), and X's is dx·q. Over a granule of G = 32 columns sharing A, B
// and dx (G = 16 for Q6_K's scales, within one dx),
//
//   Σ w·x = A·dx·Σa·q − B·dx·Σq,
//
// where Σa·q is an integer, taken with dot4I8Packed four products an
// instruction and exact (|Σa·q| ≤ 32·127·127 < 2^22), and Σq is the
// quantizer's. The f32 arithmetic is then two terms a granule per output,
// which ref.MatVecQ8 computes for each activation row in the same grouping
// (its parts differ only in where the f32 roundings fall).
//
// Work split, as shaders/matmul_tiled.wgsl's without slices or prefetch: a
// workgroup of RT·CT invocations owns a BM×BN tile of Y (BM = RT·RR
// activation rows, BN = CT·RC weight rows) and walks k in stages of BK =
// 128 columns. Each stage decodes the tile's BN×BK weights into workgroup
// memory as packed i8 levels, with each granule's (A, B), and copies X's
// BM×BK levels beside them with each 32-block's (dx, dx·Σq). An
// invocation keeps an RR×RC block of Y, rows rt + RT·a and columns ct +
// CT·b: for every 16 columns it reads RR vec4s of X and RC of W and does
// 4·RR·RC dot4I8Packed into integer sums, which each granule's end scales
// into the f32 block. Staged rows are BK/16 vec4s and one pad vec4 (an odd
// stride: invocations reading different rows at one column hit different
// bank groups).
//
// A stage holds whole units of the weight's layout: Q4_K's half
// super-blocks (2 of its 4 pairs of sub-blocks, whose nibbles share
// bytes), Q6_K's halves (128 columns whose low and high bits share
// bytes), 4 blocks of Q8_0; k must be a multiple of 256 for the K-quants
// (whole super-blocks) and of 32 for Q8_0, whose last stage may be partly
// past k (those columns stage as zeros).
//
// Integer sums become f32 by the mantissa trick of matmul_common's levels:
// an i32 s with |s| < 2^22 is exactly bitcast<f32>(u32(s + 2^22) | the
// bits of 2^23) − (2^23 + 2^22), where a conversion instruction issues at
// 16 a clock per SM on Hopper.
//
// Constants prepended by gpu.Spec: RT, CT (row and column invocations),
// RR, RC (the register block). Grid: x (wrapped into y past 65535 by
// gpu.Grid) walks tiles of BN rows of the chunk, z tiles of BM activation
// rows. Workgroup memory: 16·(BM + BN)·(BK/16 + 1) + 8·BN·BK/16 + 8·BM·BK/32
// bytes (engine/ops checks it against the device).

//!include wbytes_common
//!include q8_store_common

struct MatmulQ8Params {
    k: u32,        // columns of W
    n: u32,        // rows of W in this chunk
    m: u32,        // activation rows
    row0: u32,     // first output row of this chunk
    y_offset: u32, // float index in y of output (0, 0)
    y_stride: u32, // floats from one activation row's outputs to the next
    x_row: u32,    // vec4s from one row of xq to the next
    flags: u32,    // bit 0: accumulate into y; bit 5: add bias[row0 + row]
}

@group(0) @binding(0) var<uniform> p: MatmulQ8Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> xq: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;

const BK: u32 = 128u;
const WG: u32 = RT * CT;
const BM: u32 = RT * RR;
const BN: u32 = CT * RC;
const ACC: u32 = RR * RC;
// vec4s of a staged row (odd: see the top of the file), granules of 16 and
// blocks of 32 in a stage.
const ROW: u32 = BK / 16u + 1u;
const G16: u32 = BK / 16u;
const B32: u32 = BK / 32u;

var<workgroup> ws: array<vec4<u32>, BN * ROW>;
var<workgroup> xs: array<vec4<u32>, BM * ROW>;
// (A, B) of each weight row's granules of 16 (a granule of 32 fills its
// first), and (dx, dx·Σq) of each activation row's blocks of 32.
var<workgroup> wf: array<vec2<f32>, BN * G16>;
var<workgroup> xf: array<vec2<f32>, BM * B32>;

// ---- staging ---------------------------------------------------------------

// x_word is word i of activation row j of xq.
fn x_word(j: u32, i: u32) -> u32 {
    return xq[j * p.x_row + i / 4u][i & 3u];
}

// stage_x copies X's BM×BK levels from column k0 of rows j0.. and each
// 32-block's (dx, dx·Σq); rows past m and columns past k stage as zeros.
fn stage_x(lid: u32, j0: u32, k0: u32) {
    for (var e = lid; e < BM * G16; e += WG) {
        let t = e / G16;
        let q = e % G16;
        let j = j0 + t;
        var v = vec4<u32>(0u);
        if (j < p.m && k0 + 16u * q < p.k) {
            v = xq[j * p.x_row + k0 / 16u + q];
        }
        xs[t * ROW + q] = v;
    }
    for (var e = lid; e < BM * B32; e += WG) {
        let t = e / B32;
        let b = k0 / 32u + e % B32; // the block's index in the row
        let j = j0 + t;
        var f = vec2<f32>(0.0);
        if (j < p.m && b < p.k / 32u) {
            let dx = bitcast<f32>(x_word(j, p.k / 2u + b));
            let s = bitcast<i32>(x_word(j, p.k / 2u + p.k / 32u + 2u * b)) + bitcast<i32>(x_word(j, p.k / 2u + p.k / 32u + 2u * b + 1u));
            f = vec2<f32>(dx, dx * f32(s));
        }
        xf[e] = f;
    }
}

// Each weight entry stages its BN×BK stage with stage_w_<type>: unit u of
// a row is 32 of its columns, two runs of 16 that share their bytes, and
// put_run writes one run's levels and granule factors.
fn put_run(i: u32, g: u32, lv: vec4<u32>) {
    ws[i * ROW + g] = lv;
}

const B4: u32 = 0x0F0F0F0Fu;

// Q4_K, 144 bytes: d, dmin, scales[12], qs[128]. Unit u of the stage is
// pair j = (k0 % 256)/64 + u/2, half h = u % 2: qs bytes 32j + 16h ..+15,
// whose low nibbles are columns 64j + 16h.. (sub-block 2j) and high nibbles
// 64j + 32 + 16h.. (sub-block 2j + 1).
fn stage_w_q4_k(lid: u32, r0: u32, k0: u32) {
    let nb = p.k / 256u;
    for (var e = lid; e < BN * B32; e += WG) {
        let i = e / B32;
        let u = e % B32;
        let off = k0 % 256u; // the stage's first column in its super-block
        let j = off / 64u + u / 2u;
        let h = u % 2u;
        let ga = (64u * j + 16u * h - off) / 16u; // the low run's granule in the stage
        var lo = vec4<u32>(0u);
        var hi = vec4<u32>(0u);
        var fa = vec2<f32>(0.0);
        var fb = vec2<f32>(0.0);
        if (r0 + i < p.n) {
            let blk = 144u * ((r0 + i) * nb + k0 / 256u);
            let q = load16(blk + 16u + 32u * j + 16u * h);
            lo = q & vec4<u32>(B4);
            hi = (q >> vec4<u32>(4u)) & vec4<u32>(B4);
            let hdr = load16(blk);
            let dm = unpack2x16float(hdr.x);
            let sa = scale_min_k4(2u * j, hdr.yzw);
            let sb = scale_min_k4(2u * j + 1u, hdr.yzw);
            fa = vec2<f32>(dm.x * f32(sa.x), dm.y * f32(sa.y));
            fb = vec2<f32>(dm.x * f32(sb.x), dm.y * f32(sb.y));
        }
        put_run(i, ga, lo);
        put_run(i, ga + 2u, hi);
        if (h == 0u) {
            wf[i * G16 + ga] = fa;
            wf[i * G16 + ga + 2u] = fb;
        }
    }
}

// q6_signed is four 6-bit levels v (0..63, a byte each) as i8 bytes v − 32:
// v ^ 32 is v − 32 where v ≥ 32 and v + 32 where not, and there bits 6 and
// 7, copied from bit 5, make it v + 224 = v − 32 mod 256.
fn q6_signed(v: vec4<u32>) -> vec4<u32> {
    let t = v ^ vec4<u32>(0x20202020u);
    let m = t & vec4<u32>(0x20202020u);
    return t | (m << vec4<u32>(1u)) | (m << vec4<u32>(2u));
}

// Q6_K, 210 bytes: ql[128], qh[64], scales i8[16], d. The stage is half
// h = (k0 % 256)/128 of a super-block; unit u is matvec_q8's part (h, lh,
// jl) = (h, u % 2, u / 2): runs at columns 32·jl + 16·lh and 64 after it,
// whose 16 scales follow the column (sc[c/16] of the super-block).
fn stage_w_q6_k(lid: u32, r0: u32, k0: u32) {
    let nb = p.k / 256u;
    for (var e = lid; e < BN * B32; e += WG) {
        let i = e / B32;
        let u = e % B32;
        let h = (k0 % 256u) / 128u;
        let jl = u / 2u;
        let lh = u % 2u;
        let ga = 2u * jl + lh; // the first run's granule in the stage
        var la = vec4<u32>(0x20202020u); // level 32: weight 0 where rows end
        var lb = vec4<u32>(0x20202020u);
        var fa = vec2<f32>(0.0);
        var fb = vec2<f32>(0.0);
        if (r0 + i < p.n) {
            let blk = 210u * ((r0 + i) * nb + k0 / 256u);
            let ql = load16(blk + 64u * h + 32u * jl + 16u * lh);
            let qh = load16(blk + 128u + 32u * h + 16u * lh);
            let sh = 2u * jl;
            let b2 = vec4<u32>(0x03030303u);
            la = (ql & vec4<u32>(B4)) | (((qh >> vec4<u32>(sh)) & b2) << vec4<u32>(4u));
            lb = ((ql >> vec4<u32>(4u)) & vec4<u32>(B4)) | (((qh >> vec4<u32>(sh + 4u)) & b2) << vec4<u32>(4u));
            let d = f16_at(blk + 208u);
            let sa = i32(byte_at(blk + 192u + 8u * h + ga) << 24u) >> 24u;
            let sb = i32(byte_at(blk + 192u + 8u * h + ga + 4u) << 24u) >> 24u;
            fa = vec2<f32>(d * f32(sa), 0.0);
            fb = vec2<f32>(d * f32(sb), 0.0);
        }
        put_run(i, ga, q6_signed(la));
        put_run(i, ga + 4u, q6_signed(lb));
        wf[i * G16 + ga] = fa;
        wf[i * G16 + ga + 4u] = fb;
    }
}

// Q8_0, 34 bytes: d, qs i8[32]. Unit u is block k0/32 + u.
fn stage_w_q8_0(lid: u32, r0: u32, k0: u32) {
    let nb = p.k / 32u;
    for (var e = lid; e < BN * B32; e += WG) {
        let i = e / B32;
        let u = e % B32;
        let b = k0 / 32u + u;
        var q0 = vec4<u32>(0u);
        var q1 = vec4<u32>(0u);
        var f = vec2<f32>(0.0);
        if (r0 + i < p.n && b < nb) {
            let blk = 34u * ((r0 + i) * nb + b);
            q0 = load16(blk + 2u);
            q1 = load16(blk + 18u);
            f = vec2<f32>(f16_at(blk), 0.0);
        }
        put_run(i, 2u * u, q0);
        put_run(i, 2u * u + 1u, q1);
        wf[i * G16 + 2u * u] = f;
    }
}

// ---- the product -------------------------------------------------------------

// to_f32 is the integer sum s (|s| < 2^22) as f32, without a conversion
// instruction (see the top of the file).
fn to_f32(s: i32) -> f32 {
    return bitcast<f32>(u32(s + 0x400000) | 0x4b000000u) - 12582912.0;
}

// dot16 is the integer dot product of 16 levels in each of two vectors.
fn dot16(a: vec4<u32>, b: vec4<u32>) -> i32 {
    return (dot4I8Packed(a.x, b.x) + dot4I8Packed(a.y, b.y)) + (dot4I8Packed(a.z, b.z) + dot4I8Packed(a.w, b.w));
}

// multiply adds the staged BM×BK by BN×BK product to the invocation's
// block; g16 says the weight's granules are 16 columns (Q6_K), mins that
// they have a B (Q4_K).
fn multiply(rt: u32, ct: u32, g16: bool, mins: bool, acc: ptr<function, array<f32, ACC>>) {
    var s: array<i32, ACC>;
    for (var q = 0u; q < G16; q++) {
        var xv: array<vec4<u32>, RR>;
        var wv: array<vec4<u32>, RC>;
        for (var a = 0u; a < RR; a++) {
            xv[a] = xs[(rt + RT * a) * ROW + q];
        }
        for (var b = 0u; b < RC; b++) {
            wv[b] = ws[(ct + CT * b) * ROW + q];
        }
        for (var a = 0u; a < RR; a++) {
            for (var b = 0u; b < RC; b++) {
                s[a * RC + b] += dot16(xv[a], wv[b]);
            }
        }
        if (g16 || (q & 1u) == 1u) { // a granule ends: scale its sums
            let g = select(q - 1u, q, g16);
            for (var a = 0u; a < RR; a++) {
                let xa = xf[(rt + RT * a) * B32 + q / 2u];
                for (var b = 0u; b < RC; b++) {
                    let f = wf[(ct + CT * b) * G16 + g];
                    var v = f.x * (xa.x * to_f32(s[a * RC + b]));
                    if (mins) {
                        v -= f.y * xa.y;
                    }
                    (*acc)[a * RC + b] += v;
                    s[a * RC + b] = 0;
                }
            }
        }
    }
}

// store writes an invocation's block of Y; neighbouring invocations write
// neighbouring floats.
fn store(j0: u32, r0: u32, rt: u32, ct: u32, acc: ptr<function, array<f32, ACC>>) {
    for (var a = 0u; a < RR; a++) {
        let j = j0 + rt + RT * a;
        for (var b = 0u; b < RC; b++) {
            let r = r0 + ct + CT * b;
            if (j < p.m && r < p.n) {
                put_y(p.y_offset + j * p.y_stride + p.row0 + r, r, (*acc)[a * RC + b]);
            }
        }
    }
}

// tile is the workgroup's tile: its first weight row and activation row.
fn tile(wid: vec3<u32>, nwg: vec3<u32>) -> vec2<u32> {
    return vec2<u32>((wid.x + wid.y * nwg.x) * BN, wid.z * BM);
}

// matmul_q8 is the workgroup's tile for weight type qt (0 Q4_K, 1 Q6_K,
// 2 Q8_0, a constant at each entry's call). The tile may lie past n where
// gpu.Grid wrapped x into y: it still takes part in every barrier and
// stores nothing.
fn matmul_q8(qt: u32, lid: u32, wid: vec3<u32>, nwg: vec3<u32>) {
    let t = tile(wid, nwg);
    var acc: array<f32, ACC>;
    for (var k0 = 0u; k0 < p.k; k0 += BK) {
        switch qt {
            case 0u: {
                stage_w_q4_k(lid, t.x, k0);
            }
            case 1u: {
                stage_w_q6_k(lid, t.x, k0);
            }
            default: {
                stage_w_q8_0(lid, t.x, k0);
            }
        }
        stage_x(lid, t.y, k0);
        workgroupBarrier();
        multiply(lid / CT, lid % CT, qt == 1u, qt == 0u, &acc);
        workgroupBarrier();
    }
    store(t.y, t.x, lid / CT, lid % CT, &acc);
}

@compute @workgroup_size(WG)
fn matmul_q8_q4_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_q8(0u, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matmul_q8_q6_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_q8(1u, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matmul_q8_q8_0(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_q8(2u, lid, wid, nwg);
}
