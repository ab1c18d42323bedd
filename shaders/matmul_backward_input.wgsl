// The gradient of a matrix product with respect to its input, for a frozen
// weight stored as GGUF stores it: y = W·x with W N rows × K columns, so for
// M activation rows dX[M×K] = dY[M×N]·W. This is the LoRA fine-tuning path
// back through every frozen projection (and the LM head), where W stays in
// its quantized blocks as the forward matmuls read it and is never expanded
// to f32 on the GPU.
//
// W is one row chunk of the tensor (rows row0..row0+n, raw bytes read as u32
// words); the chunk's rows are the sum axis, so the dispatcher runs one
// dispatch per chunk and every chunk after the first adds to dX.
//
// This is an NN matrix product whose B operand is quantized along its
// output axis: W's blocks run along dX's columns and the sum runs down W's
// rows, so (unlike the forward, whose blocks run along the sum) a decoded
// weight is needed by every activation row of dX. The kernel is a
// register-blocked tile:
//
//   - A workgroup owns a BM×BK tile of dX (BM = 4·RT activation rows,
//     BK = 8·CT columns) and walks its rows of the chunk BN at a time. Each
//     stage decodes the BN×BK weights of those rows into workgroup memory
//     once (one 8-weight unit per invocation at the main shape) and stages
//     dY's BM×BN values there too, so a weight is decoded m/BM times in all
//     rather than once per 8 activation rows in registers of every thread.
//   - The workgroup's KS slices of CT·RT invocations take BN/KS rows of the
//     stage each; an invocation keeps a 4×8 block of dX in 8 vec4
//     registers and, per row, reads one vec4 of dY and two of W (three
//     shared loads for 32 FMAs). The slices multiply the invocations per
//     output tile without shrinking the register block: a 2048-wide dX of
//     512 rows is 512 tiles, too few workgroups for a 132-SM GPU if each
//     held only one slice. At the end the slices add their blocks in
//     workgroup memory, in slice order, and the whole workgroup writes the
//     tile with coalesced stores.
//
// Summation order: each slice sums its rows one after another (one FMA per
// row), then the KS slice sums are added, so an output's f32 rounding is
// bounded by (rows per slice + KS) roundings of Σ|dy·w| — no more than the
// one-after-another sum over all n rows the parity tests allow.
//
// Row splits: dX alone can give too few workgroups to fill a GPU (the LM
// head sums 128256-262144 rows into m×2048-2304 outputs). With
// p.splits > 1, z also walks splits of p.split_rows rows (z / tiles); each
// split writes its partial dX, scaled, to `partial` (dense m×k per split),
// and the `backward_reduce` entry then sums the splits into dX. With one
// split the kernel writes dX directly and `partial` is dX bound a second
// time (WebGPU allows one buffer in two writable bindings), untouched.
//
// The decoders (8 *consecutive* weights of a row, the unit a column block
// needs) live in shaders/dequant_common.wgsl, shared with the forward tile
// shaders/matmul_tiled.wgsl.
//
// Experts (the backward_moe_ entries, engine/ops' MoEMatMulBackwardInput):
// W is a stack of experts of p.n rows each, this chunk holding experts
// p.row0 .. p.row0 + p.experts - 1, and the p.m activation rows are a
// batch's expert slots, grouped by expert in tiles of at most BM (groups,
// as shaders/moe_group.wgsl writes it). Workgroup (x, z) is columns x of
// tile z: row j of the tile is slot s = order[start + j], whose dY row s
// multiplies its expert's rows (all of them: no splits) into dX row s.
//
// Constants prepended by gpu.Spec: CT (column threads of a slice, 8
// columns each), RT (row threads of a slice, 4 activation rows each), KS
// (slices), BN (rows of W per stage, a multiple of KS).
// Grid: x walks tiles of BK columns, z walks tiles of BM activation rows
// and, past them, the row splits (z = split·tiles + tile).

struct Params {
    k: u32,         // columns of W and of dX
    n: u32,         // rows of W in this chunk
    m: u32,         // activation rows
    row0: u32,      // first row of this chunk: its column in dY
    dy_stride: u32, // floats between rows of dY
    dx_stride: u32, // floats between rows of dX
    dy_offset: u32, // float index of dY's element (0, 0)
    dx_offset: u32, // float index of dX's element (0, 0)
    flags: u32,     // bit 0: add to dX
    scale: f32,     // multiplies the product
    split_rows: u32, // rows of W per split
    splits: u32,     // splits of the chunk's rows; 1: write dX directly
    experts: u32,    // backward_moe_: the experts of this chunk, from expert row0
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> dy: array<f32>;
@group(0) @binding(3) var<storage, read_write> dx: array<f32>;
@group(0) @binding(4) var<storage, read_write> partial: array<f32>;
// The backward_moe_ entries' grouped slots (engine/ops' MoEGroup); the
// other entries get dY here and never read it.
@group(0) @binding(5) var<storage, read> groups: array<u32>;

// The launch shape (see the top of the file).
const WG: u32 = CT * RT * KS;
const SLICE: u32 = CT * RT;
const BM: u32 = 4u * RT;
const BK: u32 = 8u * CT;
// Rows of a stage each slice multiplies.
const RS: u32 = BN / KS;
// 8-weight units of W per stage.
const UNITS: u32 = BN * CT;
// vec4s of W per staged row: the first halves of the row's CT units, then
// their second halves, so the CT column threads read consecutive vec4s.
const WROW: u32 = 2u * CT;
// vec4s of dY per staged row: BM/4 and one pad, so the stage's writes
// (neighbouring invocations, neighbouring rows) fall in different banks.
const DROW: u32 = RT + 1u;
// vec4s of a row of the dX tile.
const TR: u32 = BK / 4u;
// W's BN×BK stage at 0, dY's at WSN; at the end the BM×BK tile of dX
// (the dispatcher checks that it fits in SHN).
const WSN: u32 = BN * WROW;
const SHN: u32 = WSN + BN * DROW;
var<workgroup> sh: array<vec4<f32>, SHN>;

//!include dequant_common
//!include moe_tile_common

// ---- the product ---------------------------------------------------------------

// dy_at is dY's element of activation row j of the tile (0 past its rows)
// in column col of this chunk (the weight row col).
fn dy_at(tl: Tile, j: u32, col: u32) -> f32 {
    if (j >= tl.m) {
        return 0.0;
    }
    if (tl.moe) {
        return dy[p.dy_offset + groups[tl.slots + j] * p.dy_stride + col];
    }
    return dy[p.dy_offset + j * p.dy_stride + p.row0 + col];
}

fn backward_input(qt: u32, lid: u32, wid: vec3<u32>, moe: bool) {
    let slice = lid / SLICE;
    let ct = (lid % SLICE) % CT;
    let rt = (lid % SLICE) / CT;
    let c0 = wid.x * BK;
    let tiles = (p.m + BM - 1u) / BM;
    var j0 = (wid.z % tiles) * BM;
    var split = wid.z / tiles;
    var first = split * p.split_rows;
    var end = min(first + p.split_rows, p.n);
    var tl = Tile(0u, p.m, 0u, false);
    if (moe) {
        tl = moe_tile(wid.z);
        if (!tl.moe) {
            return;
        }
        j0 = 0u;
        split = 0u;
        first = 0u;
        end = p.n;
    }

    // dX rows j0 + 4·rt + 0..3 (a0..a3: columns 8·ct..+3, b0..b3: +4..+7).
    var a0 = vec4<f32>(0.0);
    var a1 = vec4<f32>(0.0);
    var a2 = vec4<f32>(0.0);
    var a3 = vec4<f32>(0.0);
    var b0 = vec4<f32>(0.0);
    var b1 = vec4<f32>(0.0);
    var b2 = vec4<f32>(0.0);
    var b3 = vec4<f32>(0.0);
    // Every invocation runs every stage and reaches every barrier (the loop
    // bounds depend only on p and the workgroup id). Rows past the split,
    // columns past k and activation rows past m are staged as zeros, so the
    // multiply needs no bounds: they add exact zeros.
    for (var n0 = first; n0 < end; n0 += BN) {
        if (n0 > first) {
            workgroupBarrier(); // the previous stage's reads of sh are done
        }
        for (var q = lid; q < UNITS; q += WG) {
            let i = q / CT;
            let u = q % CT;
            let c = c0 + 8u * u;
            var v = Unit(vec4<f32>(0.0), vec4<f32>(0.0));
            if (n0 + i < end && c < p.k) {
                v = unit(qt, tl.wrow + n0 + i, c);
            }
            sh[i * WROW + u] = v.a;
            sh[i * WROW + CT + u] = v.b;
        }
        // Neighbouring invocations read neighbouring floats of a dY row.
        for (var q = lid; q < BN * RT; q += WG) {
            let i = q % BN;
            let jq = q / BN;
            var g = vec4<f32>(0.0);
            if (n0 + i < end) {
                let j = j0 + 4u * jq;
                g = vec4<f32>(dy_at(tl, j, n0 + i), dy_at(tl, j + 1u, n0 + i), dy_at(tl, j + 2u, n0 + i), dy_at(tl, j + 3u, n0 + i));
            }
            sh[WSN + i * DROW + jq] = g;
        }
        workgroupBarrier();
        let i0 = slice * RS;
        for (var t = 0u; t < RS; t++) {
            let i = i0 + t;
            let g = sh[WSN + i * DROW + rt];
            let wa = sh[i * WROW + ct];
            let wb = sh[i * WROW + CT + ct];
            a0 += g.x * wa;
            b0 += g.x * wb;
            a1 += g.y * wa;
            b1 += g.y * wb;
            a2 += g.z * wa;
            b2 += g.z * wb;
            a3 += g.w * wa;
            b3 += g.w * wb;
        }
    }

    // The slices' sums, added in slice order into the tile at sh[0..]:
    // row j of the tile is BK/4 vec4s.
    let o = 4u * rt * TR + 2u * ct;
    for (var s = 0u; s < KS; s++) {
        workgroupBarrier();
        if (slice == s) {
            if (s > 0u) {
                a0 += sh[o];
                b0 += sh[o + 1u];
                a1 += sh[o + TR];
                b1 += sh[o + TR + 1u];
                a2 += sh[o + 2u * TR];
                b2 += sh[o + 2u * TR + 1u];
                a3 += sh[o + 3u * TR];
                b3 += sh[o + 3u * TR + 1u];
            }
            sh[o] = a0;
            sh[o + 1u] = b0;
            sh[o + TR] = a1;
            sh[o + TR + 1u] = b1;
            sh[o + 2u * TR] = a2;
            sh[o + 2u * TR + 1u] = b2;
            sh[o + 3u * TR] = a3;
            sh[o + 3u * TR + 1u] = b3;
        }
    }
    workgroupBarrier();

    // Neighbouring invocations write neighbouring columns.
    for (var e = lid; e < BM * BK; e += WG) {
        let j = j0 + e / BK;
        let c = c0 + e % BK;
        if (j >= tl.m || c >= p.k) {
            continue;
        }
        let v = p.scale * sh[e / 4u][e % 4u];
        if (p.splits > 1u && !tl.moe) {
            partial[(split * p.m + j) * p.k + c] = v;
            continue;
        }
        var i = p.dx_offset + j * p.dx_stride + c;
        if (tl.moe) {
            i = p.dx_offset + groups[tl.slots + j] * p.dx_stride + c;
        }
        if ((p.flags & 1u) != 0u) {
            dx[i] = dx[i] + v;
        } else {
            dx[i] = v;
        }
    }
}

// backward_reduce sums the p.splits partial results into dX, one element
// per invocation (grid from gpu.Grid over m·k elements, wrapping into y).
@compute @workgroup_size(WG)
fn backward_reduce(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let e = gid.x + gid.y * nwg.x * WG;
    let size = p.m * p.k;
    if (e >= size) {
        return;
    }
    var v = 0.0;
    for (var s = 0u; s < p.splits; s++) {
        v += partial[s * size + e];
    }
    let i = p.dx_offset + (e / p.k) * p.dx_stride + e % p.k;
    if ((p.flags & 1u) != 0u) {
        v += dx[i];
    }
    dx[i] = v;
}

@compute @workgroup_size(WG)
fn backward_input_f32(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    backward_input(F32, lid, wid, false);
}

@compute @workgroup_size(WG)
fn backward_input_f16(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    backward_input(F16, lid, wid, false);
}

@compute @workgroup_size(WG)
fn backward_input_bf16(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    backward_input(BF16, lid, wid, false);
}

@compute @workgroup_size(WG)
fn backward_input_q4_0(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    backward_input(Q4_0, lid, wid, false);
}

@compute @workgroup_size(WG)
fn backward_input_q4_1(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    backward_input(Q4_1, lid, wid, false);
}

@compute @workgroup_size(WG)
fn backward_input_q5_0(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    backward_input(Q5_0, lid, wid, false);
}

@compute @workgroup_size(WG)
fn backward_input_q5_1(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    backward_input(Q5_1, lid, wid, false);
}

@compute @workgroup_size(WG)
fn backward_input_q8_0(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    backward_input(Q8_0, lid, wid, false);
}

@compute @workgroup_size(WG)
fn backward_input_mxfp4(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    backward_input(MXFP4, lid, wid, false);
}

@compute @workgroup_size(WG)
fn backward_input_q2_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    backward_input(Q2_K, lid, wid, false);
}

@compute @workgroup_size(WG)
fn backward_input_q3_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    backward_input(Q3_K, lid, wid, false);
}

@compute @workgroup_size(WG)
fn backward_input_q4_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    backward_input(Q4_K, lid, wid, false);
}

@compute @workgroup_size(WG)
fn backward_input_q5_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    backward_input(Q5_K, lid, wid, false);
}

@compute @workgroup_size(WG)
fn backward_input_q6_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    backward_input(Q6_K, lid, wid, false);
}

@compute @workgroup_size(WG)
fn backward_moe_f32(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    backward_input(F32, lid, wid, true);
}

@compute @workgroup_size(WG)
fn backward_moe_f16(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    backward_input(F16, lid, wid, true);
}

@compute @workgroup_size(WG)
fn backward_moe_bf16(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    backward_input(BF16, lid, wid, true);
}

@compute @workgroup_size(WG)
fn backward_moe_q4_0(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    backward_input(Q4_0, lid, wid, true);
}

@compute @workgroup_size(WG)
fn backward_moe_q4_1(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    backward_input(Q4_1, lid, wid, true);
}

@compute @workgroup_size(WG)
fn backward_moe_q5_0(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    backward_input(Q5_0, lid, wid, true);
}

@compute @workgroup_size(WG)
fn backward_moe_q5_1(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    backward_input(Q5_1, lid, wid, true);
}

@compute @workgroup_size(WG)
fn backward_moe_q8_0(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    backward_input(Q8_0, lid, wid, true);
}

@compute @workgroup_size(WG)
fn backward_moe_mxfp4(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    backward_input(MXFP4, lid, wid, true);
}

@compute @workgroup_size(WG)
fn backward_moe_q2_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    backward_input(Q2_K, lid, wid, true);
}

@compute @workgroup_size(WG)
fn backward_moe_q3_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    backward_input(Q3_K, lid, wid, true);
}

@compute @workgroup_size(WG)
fn backward_moe_q4_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    backward_input(Q4_K, lid, wid, true);
}

@compute @workgroup_size(WG)
fn backward_moe_q5_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    backward_input(Q5_K, lid, wid, true);
}

@compute @workgroup_size(WG)
fn backward_moe_q6_k(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    backward_input(Q6_K, lid, wid, true);
}
