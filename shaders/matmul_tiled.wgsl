// The prefill matrix product Y[m×n] = X[m×k]·Wᵀ as a register- and
// workgroup-tiled kernel, for a weight stored as GGUF stores it (F32, F16,
// BF16, Q4_0…Q8_0, MXFP4, Q2_K…Q6_K) and decoded in the kernel, never
// expanded to f32 in memory. It follows the matmul contract of
// engine/ops/matmul.go (bindings from matmul_common, chunks, row0, strides,
// offset, accumulate); ops.MatMulWith sends it prompts of at least
// matmulTiledMinRows rows, the `matmul_<type>` entries of the other
// families take fewer.
//
// Those entries walk W once per 4 activation rows, decoding each weight in
// the registers of every thread that needs it. Here:
//
//   - A workgroup owns a BM×BN tile of Y (BM = RT·RR activation rows, BN =
//     CT·RC weight rows, i.e. columns of Y) and walks k in stages of BK.
//     Each stage decodes the tile's BN×BK weights into workgroup memory
//     once (8 consecutive weights of a row per decode, shaders/
//     dequant_common.wgsl) and stages X's BM×BK values beside them, so a
//     weight is decoded m/BM times in all.
//   - Both stages keep k contiguous: a staged row is BK/4 vec4s and one pad
//     vec4, an odd stride, so the invocations of a quarter-warp reading 8
//     different rows at one k hit 8 different bank groups.
//   - The workgroup's KS slices of CT·RT invocations take BK/KS columns of
//     each stage. An invocation keeps an RR×RC block of Y in registers: for
//     every 4 columns it reads RR vec4s of X and RC of W and does 4·RR·RC
//     FMAs. Its rows and columns are strided (row rt + RT·a, column
//     ct + CT·b), which is what spreads the reads over the banks and makes
//     the final stores of neighbouring invocations neighbouring floats.
//     Slices multiply the invocations of a tile without shrinking the
//     register block.
//   - With PF = 1 an invocation reads its share of the next stage (raw
//     words of W decoded into registers, X's floats) right after the
//     barrier that publishes the current one, so those loads are in flight
//     while it multiplies; the stage in workgroup memory stays single.
//   - At the end the slices add their blocks in workgroup memory, in slice
//     order, and the last slice writes the tile.
//
// Numerics: f32 weights (decoded exactly as the CPU reference decodes
// them, up to the contraction of d·q - m into one FMA), f32 activations,
// f32 accumulation. Each output's slice sums its columns one after another
// in increasing k (one FMA per column), then the KS slice sums are added in
// slice order, so the rounding of an output is bounded by
// (k/KS + KS + 2) roundings of Σ|w·x|: no more than the one-after-another
// sum over all k the parity tests allow.
//
// Constants prepended by gpu.Spec (four at most, so two are packed): CT
// (column threads of a slice), RT (row threads of a slice), RB = 16·RR + RC
// (the register block: activation rows × columns of Y, RR·RC a multiple of
// 4), KB = 256·BK + 16·KS + PF (stage depth, a multiple of 8 with BK/4 a
// multiple of KS; slices; prefetch 0 or 1). The dispatcher checks the shape
// against the device's workgroup memory.
// Grid: x (wrapped into y past 65535 by gpu.Grid) walks tiles of BN rows of
// the chunk, z walks tiles of BM activation rows.

//!include matmul_common

//!include dequant_common

const RR: u32 = RB / 16u;
const RC: u32 = RB - 16u * RR;
const BK: u32 = KB / 256u;
const KS: u32 = (KB / 16u) % 16u;
const PF: u32 = KB % 16u;
const SLICE: u32 = CT * RT;
const WG: u32 = SLICE * KS;
const BM: u32 = RT * RR;
const BN: u32 = CT * RC;
// vec4s of a staged row (odd: see the top of the file).
const ROW: u32 = BK / 4u + 1u;
// vec4 columns of a stage each slice multiplies.
const CS: u32 = BK / 4u / KS;
// 8-weight units of a staged row of W.
const UR: u32 = BK / 8u;
// W's BN×BK stage at 0, X's BM×BK at XS; at the end the slices' partial
// tiles (BM·BN/4 vec4s, which the dispatcher checks fit in SHN).
const XS: u32 = BN * ROW;
const SHN: u32 = (BN + BM) * ROW;
const ACC: u32 = RR * RC;
// Units of W and vec4s of X an invocation stages.
const UT: u32 = (BN * UR + WG - 1u) / WG;
const XT: u32 = (BM * BK / 4u + WG - 1u) / WG;
var<workgroup> sh: array<vec4<f32>, SHN>;

// ---- The chosen experts of a mixture of experts (matmul_moe_ entries) ---
//
// W is a stack of experts of p.n rows each, this chunk holding experts
// p.row0 .. p.row0 + p.experts - 1; the batch's p.m expert slots (tokens ×
// used) are grouped by expert in groups (engine/ops' MoEGroup,
// shaders/moe_group.wgsl): [0] the number of tiles, from MOE_ORDER the p.m
// slots sorted by expert, then per tile its expert, its first slot's
// position in that order and its count (at most BM). Workgroup (x, z) is
// columns x of tile z: activation row j of the tile is slot s =
// order[start + j], whose x row is s / p.x_div (a token's normed row for
// gate and up, read by all its slots; the slot's own for down) and whose
// result row is s. So each expert's weights are read once per tile of its
// tokens, not once per token.
@group(0) @binding(4) var<storage, read> groups: array<u32>;

//!include moe_tile_common

// x_row is the row of x that activation row j of the tile reads.
fn x_row(tl: Tile, j: u32) -> u32 {
    if (tl.moe) {
        return groups[tl.slots + j] / p.x_div;
    }
    return j;
}

// fma4 adds x·w to a, one column after another.
fn fma4(a: f32, x: vec4<f32>, w: vec4<f32>) -> f32 {
    return a + x.x * w.x + x.y * w.y + x.z * w.z + x.w * w.w;
}

// fetch reads this invocation's share of the stage at column k0 into
// registers: units lid, lid + WG, … of W's BN×BK stage (neighbouring
// invocations decode neighbouring units of a row) and vec4s lid, lid + WG,
// … of X's BM×BK stage (neighbouring invocations read neighbouring floats).
fn fetch(qt: u32, lid: u32, tl: Tile, r0: u32, j0: u32, k0: u32, wr: ptr<function, array<Unit, UT>>, xr: ptr<function, array<vec4<f32>, XT>>) {
    for (var e = 0u; e < UT; e++) {
        let q = lid + e * WG;
        let i = q / UR;
        let c = k0 + 8u * (q % UR);
        var v = Unit(vec4<f32>(0.0), vec4<f32>(0.0));
        if (q < BN * UR && r0 + i < p.n && c < p.k) {
            v = unit(qt, tl.wrow + r0 + i, c);
        }
        (*wr)[e] = v;
    }
    for (var e = 0u; e < XT; e++) {
        let q = lid + e * WG;
        let j = j0 + q / (BK / 4u);
        let c = k0 + 4u * (q % (BK / 4u));
        var v = vec4<f32>(0.0);
        if (q < BM * (BK / 4u) && j < tl.m) {
            let o = x_row(tl, j) * p.x_stride + c;
            if (c + 4u <= p.k) {
                v = vec4<f32>(x[o], x[o + 1u], x[o + 2u], x[o + 3u]);
            } else {
                for (var t = 0u; c + t < p.k; t++) {
                    v[t] = x[o + t];
                }
            }
        }
        (*xr)[e] = v;
    }
}

// put stores what fetch read into the stage.
fn put(lid: u32, wr: ptr<function, array<Unit, UT>>, xr: ptr<function, array<vec4<f32>, XT>>) {
    for (var e = 0u; e < UT; e++) {
        let q = lid + e * WG;
        if (q < BN * UR) {
            let o = (q / UR) * ROW + 2u * (q % UR);
            sh[o] = (*wr)[e].a;
            sh[o + 1u] = (*wr)[e].b;
        }
    }
    for (var e = 0u; e < XT; e++) {
        let q = lid + e * WG;
        if (q < BM * (BK / 4u)) {
            sh[XS + (q / (BK / 4u)) * ROW + q % (BK / 4u)] = (*xr)[e];
        }
    }
}

fn matmul_tiled(qt: u32, lid: u32, wid: vec3<u32>, nwg: vec3<u32>, moe: bool) {
    let slice = lid / SLICE;
    let t = lid % SLICE;
    let ct = t % CT;
    let rt = t / CT;
    let r0 = (wid.x + wid.y * nwg.x) * BN;
    var j0 = wid.z * BM;
    var tl = Tile(0u, p.m, 0u, false);
    if (moe) {
        // Tile wid.z of the grouped slots: its expert's rows, its slots.
        tl = moe_tile(wid.z);
        if (!tl.moe) {
            return;
        }
        j0 = 0u;
    }
    // The grid wraps into y in whole rows, so its last row can run past
    // the chunk; the whole workgroup leaves together, before any barrier.
    if (r0 >= p.n) {
        return;
    }

    var acc: array<f32, ACC>;
    // Every invocation runs every stage and reaches every barrier (the loop
    // bounds depend only on p). Rows past n, activation rows past m and
    // columns past k are staged as zeros (fetch), so the multiply needs no
    // bounds: they add exact zeros.
    var wr: array<Unit, UT>;
    var xr: array<vec4<f32>, XT>;
    if (PF != 0u) {
        fetch(qt, lid, tl, r0, j0, 0u, &wr, &xr);
    }
    for (var k0 = 0u; k0 < p.k; k0 += BK) {
        if (k0 > 0u) {
            workgroupBarrier(); // the previous stage's reads of sh are done
        }
        if (PF == 0u) {
            fetch(qt, lid, tl, r0, j0, k0, &wr, &xr);
        }
        put(lid, &wr, &xr);
        workgroupBarrier();
        // The next stage's loads are in flight while this one multiplies.
        if (PF != 0u && k0 + BK < p.k) {
            fetch(qt, lid, tl, r0, j0, k0 + BK, &wr, &xr);
        }
        // Constant trip counts (CS, RR, RC) let the compiler unroll the
        // block and keep xv, wv and acc in registers.
        for (var v = 0u; v < CS; v++) {
            let u = slice * CS + v;
            var xv: array<vec4<f32>, RR>;
            var wv: array<vec4<f32>, RC>;
            for (var a = 0u; a < RR; a++) {
                xv[a] = sh[XS + (rt + RT * a) * ROW + u];
            }
            for (var b = 0u; b < RC; b++) {
                wv[b] = sh[(ct + CT * b) * ROW + u];
            }
            for (var a = 0u; a < RR; a++) {
                for (var b = 0u; b < RC; b++) {
                    acc[a * RC + b] = fma4(acc[a * RC + b], xv[a], wv[b]);
                }
            }
        }
    }

    // The slices' sums, added in slice order: slice s > 0 adds what the
    // slices before it left at sh[g·SLICE + t] (4 of its sums per vec4),
    // passes the total on, and the last slice writes Y.
    for (var s = 0u; s < KS; s++) {
        if (KS > 1u) {
            workgroupBarrier();
        }
        if (slice == s) {
            if (s > 0u) {
                for (var g = 0u; g < ACC / 4u; g++) {
                    let v = sh[g * SLICE + t];
                    acc[4u * g] += v.x;
                    acc[4u * g + 1u] += v.y;
                    acc[4u * g + 2u] += v.z;
                    acc[4u * g + 3u] += v.w;
                }
            }
            if (s + 1u < KS) {
                for (var g = 0u; g < ACC / 4u; g++) {
                    sh[g * SLICE + t] = vec4<f32>(acc[4u * g], acc[4u * g + 1u], acc[4u * g + 2u], acc[4u * g + 3u]);
                }
            } else {
                store(tl, j0, r0, rt, ct, &acc);
            }
        }
    }
}

// store writes an invocation's block of Y; neighbouring invocations write
// neighbouring columns.
fn store(tl: Tile, j0: u32, r0: u32, rt: u32, ct: u32, acc: ptr<function, array<f32, ACC>>) {
    for (var a = 0u; a < RR; a++) {
        let j = j0 + rt + RT * a;
        for (var b = 0u; b < RC; b++) {
            let r = r0 + ct + CT * b;
            if (j >= tl.m || r >= p.n) {
                continue;
            }
            var i = p.y_offset + j * p.y_stride + p.row0 + r;
            if (tl.moe) {
                i = p.y_offset + groups[tl.slots + j] * p.y_stride + r;
            }
            if ((p.flags & 1u) != 0u) {
                y[i] = y[i] + (*acc)[a * RC + b];
            } else {
                y[i] = (*acc)[a * RC + b];
            }
        }
    }
}

@compute @workgroup_size(WG)
fn matmul_tiled_f32(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_tiled(F32, lid, wid, nwg, false);
}

@compute @workgroup_size(WG)
fn matmul_tiled_f16(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_tiled(F16, lid, wid, nwg, false);
}

@compute @workgroup_size(WG)
fn matmul_tiled_bf16(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_tiled(BF16, lid, wid, nwg, false);
}

@compute @workgroup_size(WG)
fn matmul_tiled_q4_0(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_tiled(Q4_0, lid, wid, nwg, false);
}

@compute @workgroup_size(WG)
fn matmul_tiled_q4_1(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_tiled(Q4_1, lid, wid, nwg, false);
}

@compute @workgroup_size(WG)
fn matmul_tiled_q5_0(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_tiled(Q5_0, lid, wid, nwg, false);
}

@compute @workgroup_size(WG)
fn matmul_tiled_q5_1(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_tiled(Q5_1, lid, wid, nwg, false);
}

@compute @workgroup_size(WG)
fn matmul_tiled_q8_0(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_tiled(Q8_0, lid, wid, nwg, false);
}

@compute @workgroup_size(WG)
fn matmul_tiled_mxfp4(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_tiled(MXFP4, lid, wid, nwg, false);
}

@compute @workgroup_size(WG)
fn matmul_tiled_q2_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_tiled(Q2_K, lid, wid, nwg, false);
}

@compute @workgroup_size(WG)
fn matmul_tiled_q3_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_tiled(Q3_K, lid, wid, nwg, false);
}

@compute @workgroup_size(WG)
fn matmul_tiled_q4_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_tiled(Q4_K, lid, wid, nwg, false);
}

@compute @workgroup_size(WG)
fn matmul_tiled_q5_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_tiled(Q5_K, lid, wid, nwg, false);
}

@compute @workgroup_size(WG)
fn matmul_tiled_q6_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_tiled(Q6_K, lid, wid, nwg, false);
}

@compute @workgroup_size(WG)
fn matmul_moe_f32(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_tiled(F32, lid, wid, nwg, true);
}

@compute @workgroup_size(WG)
fn matmul_moe_f16(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_tiled(F16, lid, wid, nwg, true);
}

@compute @workgroup_size(WG)
fn matmul_moe_bf16(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_tiled(BF16, lid, wid, nwg, true);
}

@compute @workgroup_size(WG)
fn matmul_moe_q4_0(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_tiled(Q4_0, lid, wid, nwg, true);
}

@compute @workgroup_size(WG)
fn matmul_moe_q4_1(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_tiled(Q4_1, lid, wid, nwg, true);
}

@compute @workgroup_size(WG)
fn matmul_moe_q5_0(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_tiled(Q5_0, lid, wid, nwg, true);
}

@compute @workgroup_size(WG)
fn matmul_moe_q5_1(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_tiled(Q5_1, lid, wid, nwg, true);
}

@compute @workgroup_size(WG)
fn matmul_moe_q8_0(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_tiled(Q8_0, lid, wid, nwg, true);
}

@compute @workgroup_size(WG)
fn matmul_moe_mxfp4(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_tiled(MXFP4, lid, wid, nwg, true);
}

@compute @workgroup_size(WG)
fn matmul_moe_q2_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_tiled(Q2_K, lid, wid, nwg, true);
}

@compute @workgroup_size(WG)
fn matmul_moe_q3_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_tiled(Q3_K, lid, wid, nwg, true);
}

@compute @workgroup_size(WG)
fn matmul_moe_q4_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_tiled(Q4_K, lid, wid, nwg, true);
}

@compute @workgroup_size(WG)
fn matmul_moe_q5_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_tiled(Q5_K, lid, wid, nwg, true);
}

@compute @workgroup_size(WG)
fn matmul_moe_q6_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_tiled(Q6_K, lid, wid, nwg, true);
}
