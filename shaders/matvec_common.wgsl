// The decode (m == 1) skeleton the quantized families share (matmul_legacy,
// matmul_kquant), pasted in after matmul_common by their include line: how a
// workgroup's lanes get at x, the loop over chunks of x, and the short
// reduction that ends a row. The family provides row_bytes(kind), a weight
// row's size, and row_units(kind, lane, rowb, e0, len), one lane's share of
// the dot product of the row at byte rowb with the len elements of x at e0.
//
// A workgroup serves ROWS weight rows with LANES = WG/ROWS lanes each; a
// lane walks its row's units (a legacy block, a K-quant part of 32 weights)
// with stride LANES and keeps one partial sum. Few lanes per row keep the
// final reduction short and let one read of x serve many rows.
//
// x is read as vec4 through xv, a second view of binding 2: WGSL allows two
// variables on one binding as long as no entry point uses both, and the
// matvec entries never touch x. Where x comes from is the XCH constant:
//   - XCH = 0: straight from global memory. Every row of the workgroup (and
//     every workgroup on the SM) reads the same few KiB of x, so these reads
//     hit the L1 cache; no barrier anywhere until the reduction.
//   - XCH > 0 (a multiple of 256): the workgroup stages x in chunks of XCH
//     floats in workgroup memory with coalesced vec4 loads, two barriers per
//     chunk. The family's xslot permutes the vec4 slots so that the 8 lanes
//     of a quarter warp reading their units' activations hit 8 different
//     groups of 4 banks.
//
// UNROLL (1 or 2) is how many units a lane decodes per loop iteration: with
// 2, both units' weight loads are issued before either is used, doubling
// the loads each lane has in flight at the cost of registers.

@group(0) @binding(2) var<storage, read> xv: array<vec4<f32>>;

const LANES: u32 = WG / ROWS;
// One slot more than XCH needs, so XCH = 0 still declares a valid array.
const XSLOTS: u32 = XCH / 4u + 1u;
var<workgroup> xsv: array<vec4<f32>, XSLOTS>;
// The lanes' partial sums, WG/4 vec4s so a row's first lane reads its
// LANES sums (a multiple of 4) in LANES/4 loads.
const VRED: u32 = WG / 4u;
var<workgroup> vred: array<vec4<f32>, VRED>;

// stage_x copies the len floats of x from e0 (both multiples of 4) into xsv,
// chunk vec4 v at slot xslot(v).
fn stage_x(lid: u32, e0: u32, len: u32) {
    let v0 = e0 / 4u;
    for (var v = lid; v < len / 4u; v += WG) {
        xsv[xslot(v)] = xv[v0 + v];
    }
}

// x4v is x[e0 + 4v .. e0 + 4v + 3]: v counts vec4s from the chunk start e0.
fn x4v(e0: u32, v: u32) -> vec4<f32> {
    if (XCH == 0u) {
        return xv[e0 / 4u + v];
    }
    return xsv[xslot(v)];
}

// chunk_len is how many floats one pass over x covers: XCH, or all of the
// row when x is read from global memory.
fn chunk_len() -> u32 {
    return select(XCH, p.k, XCH == 0u);
}

// begin_chunk stages the chunk at e0 when x is staged. Every invocation
// calls it (the chunk loop depends only on p.k), so the barriers are
// uniform.
fn begin_chunk(lid: u32, e0: u32, len: u32) {
    if (XCH != 0u) {
        if (e0 > 0u) {
            workgroupBarrier(); // the previous chunk's reads of xsv are done
        }
        stage_x(lid, e0, len);
        workgroupBarrier();
    }
}

// store_row sums the LANES partial sums of each row in lane order and lets
// the row's first lane write it, plus the row's bias with flags bit 5
// (adding to y when flags bit 0 asks).
fn store_row(lid: u32, row: u32, acc: f32) {
    var plus = 0.0;
    if ((p.flags & 32u) != 0u && row < p.n) {
        plus = row_bias[p.row0 + row];
    }
    store_row_at(lid, row, acc, p.y_offset + p.row0, plus);
}

// store_row_at is store_row with row r's result plus plus at y[y0 + r]
// (plus is 0 but for the biases; adding 0 changes no sum).
fn store_row_at(lid: u32, row: u32, acc: f32, y0: u32, plus: f32) {
    vred[lid >> 2u][lid & 3u] = acc;
    workgroupBarrier();
    if (lid % LANES == 0u && row < p.n) {
        var s = vred[lid >> 2u];
        for (var i = 1u; i < LANES / 4u; i++) {
            s += vred[(lid >> 2u) + i];
        }
        let v = ((s.x + s.y) + (s.z + s.w)) + plus;
        let yi = y0 + row;
        if ((p.flags & 1u) != 0u) {
            y[yi] += v;
        } else {
            y[yi] = v;
        }
    }
}

// matvec_rows: y = W·x for the workgroup's ROWS rows, LANES lanes per row,
// one chunk of x at a time.
fn matvec_rows(kind: u32, lid: u32, wid: vec3<u32>, nwg: vec3<u32>) {
    let lane = lid % LANES;
    let row = (wid.x + wid.y * nwg.x) * ROWS + lid / LANES;
    let rowb = row * row_bytes(kind);
    let chunk = chunk_len();
    var acc = 0.0;
    for (var e0 = 0u; e0 < p.k; e0 += chunk) {
        let len = min(chunk, p.k - e0);
        begin_chunk(lid, e0, len);
        if (row < p.n) {
            acc += row_units(kind, lane, rowb, e0, len);
        }
    }
    store_row(lid, row, acc);
}

// ---- RMSNorm fused into the product (the matvec_normed_ entries) ----------
//
// y = W·(x ⊙ gain / sqrt(mean(x²) + eps)). Every workgroup first sums x² over
// the whole row itself (k floats, read from L2 as vec4s: cheaper than a
// separate norm dispatch and a round trip of the normalised copy through
// memory), then normalises x as it stages it, so these entries need XCH > 0.
// gv is binding 4, referenced only from the normed entries.

@group(0) @binding(4) var<storage, read> gv: array<vec4<f32>>;
var<workgroup> rms_inv: f32;

// rms_scale is 1/sqrt(mean(x²) + eps) over the p.k floats of x.
fn rms_scale(lid: u32) -> f32 {
    var ss = 0.0;
    for (var v = lid; v < p.k / 4u; v += WG) {
        let a = xv[v];
        ss += dot(a, a);
    }
    vred[lid >> 2u][lid & 3u] = ss;
    workgroupBarrier();
    if (lid == 0u) {
        var s = vred[0];
        for (var i = 1u; i < VRED; i++) {
            s += vred[i];
        }
        rms_inv = inverseSqrt(((s.x + s.y) + (s.z + s.w)) / f32(p.k) + p.eps);
    }
    workgroupBarrier();
    return rms_inv;
}

// begin_chunk_normed is begin_chunk staging x ⊙ gain · inv.
fn begin_chunk_normed(lid: u32, e0: u32, len: u32, inv: f32) {
    if (e0 > 0u) {
        workgroupBarrier();
    }
    let v0 = e0 / 4u;
    let one_plus = (p.flags & 2u) != 0u;
    for (var v = lid; v < len / 4u; v += WG) {
        let g = gv[v0 + v];
        xsv[xslot(v)] = xv[v0 + v] * inv * select(g, g + 1.0, one_plus);
    }
    workgroupBarrier();
}

// matvec_rows_normed is matvec_rows of the RMS-normalised x (XCH > 0).
fn matvec_rows_normed(kind: u32, lid: u32, wid: vec3<u32>, nwg: vec3<u32>) {
    let lane = lid % LANES;
    let row = (wid.x + wid.y * nwg.x) * ROWS + lid / LANES;
    let rowb = row * row_bytes(kind);
    let inv = rms_scale(lid);
    var acc = 0.0;
    for (var e0 = 0u; e0 < p.k; e0 += XCH) {
        let len = min(XCH, p.k - e0);
        begin_chunk_normed(lid, e0, len, inv);
        if (row < p.n) {
            acc += row_units(kind, lane, rowb, e0, len);
        }
    }
    store_row(lid, row, acc);
}

// ---- A gated linear unit fused into the product (the matvec_glu_ entries) --
//
// y = W·(act(gate) ⊙ up) with x = [gate | up], 2·p.k floats (one token's row
// of a merged gate-up projection): the feed-forward's down projection reads
// the gate-up output directly, with no GLU dispatch and no round trip of the
// activated vector through memory. act is SiLU (SwiGLU), or GELU's tanh
// approximation (GeGLU) when flags bit 2 is set; silu and gelu come from
// glu_common, which the family includes, so the staged values are exactly
// what elementwise's glu_fused writes. Needs XCH > 0.

// glu4 is act(g) ⊙ u: GELU with flags bit 2, gpt-oss's glu_oai with bit
// 4, else SiLU.
fn glu4(g: vec4<f32>, u: vec4<f32>, use_gelu: bool) -> vec4<f32> {
    if ((p.flags & 16u) != 0u) {
        return vec4<f32>(glu_oai(g.x, u.x), glu_oai(g.y, u.y), glu_oai(g.z, u.z), glu_oai(g.w, u.w));
    }
    if (use_gelu) {
        return vec4<f32>(gelu(g.x), gelu(g.y), gelu(g.z), gelu(g.w)) * u;
    }
    return vec4<f32>(silu(g.x), silu(g.y), silu(g.z), silu(g.w)) * u;
}

// begin_chunk_glu is begin_chunk staging act(gate) ⊙ up.
fn begin_chunk_glu(lid: u32, e0: u32, len: u32) {
    if (e0 > 0u) {
        workgroupBarrier();
    }
    let v0 = e0 / 4u;
    let up = p.k / 4u; // up starts p.k floats after gate
    let use_gelu = (p.flags & 4u) != 0u;
    for (var v = lid; v < len / 4u; v += WG) {
        xsv[xslot(v)] = glu4(xv[v0 + v], xv[up + v0 + v], use_gelu);
    }
    workgroupBarrier();
}

// matvec_rows_glu is matvec_rows of act(gate) ⊙ up (XCH > 0).
fn matvec_rows_glu(kind: u32, lid: u32, wid: vec3<u32>, nwg: vec3<u32>) {
    let lane = lid % LANES;
    let row = (wid.x + wid.y * nwg.x) * ROWS + lid / LANES;
    let rowb = row * row_bytes(kind);
    var acc = 0.0;
    for (var e0 = 0u; e0 < p.k; e0 += XCH) {
        let len = min(XCH, p.k - e0);
        begin_chunk_glu(lid, e0, len);
        if (row < p.n) {
            acc += row_units(kind, lane, rowb, e0, len);
        }
    }
    store_row(lid, row, acc);
}

// ---- Chosen experts of a mixture of experts (the matvec_moe_ entries) ----
//
// The weight is a stack of experts, p.n rows each, this chunk holding
// experts p.row0 .. p.row0 + p.experts - 1 (engine/ops' MoEMatVec). Slot
// s = wid.z (a token's s-th chosen expert; tokens × used slots in all)
// computes y[p.y_offset + s·p.y_stride + r] = W_e[r]·x_s for its expert
// e = moe_ids[s], x_s being row s / p.x_div of x (p.x_stride floats apart,
// a multiple of 4): the token's normed row for gate and up, whose used
// slots all read it, or the slot's own row for down. With flags bit 3 x_s
// is [gate | up], 2·p.k floats, and the product reads act(gate) ⊙ up as
// the matvec_glu_ entries do. With flags bit 5 each row gains its
// expert's bias, row_bias[e·p.n + r] (gpt-oss's gate-up and down biases,
// [experts, p.n]), added after the row's sum as a separate MoEAddBias
// would. A slot whose expert lives in another chunk leaves at once: its
// whole workgroup agrees, as moe_ids is read-only and s is the
// workgroup's. Needs XCH > 0.

@group(0) @binding(4) var<storage, read> moe_ids: array<u32>;
// Binding 5: the rows' biases, read with flags bit 5: a dense product's,
// one a row (store_row), or a stack's, one a row of each expert.
@group(0) @binding(5) var<storage, read> row_bias: array<f32>;

// begin_chunk_moe is begin_chunk staging the len floats at e0 of the slot's
// row at x0 (act(gate) ⊙ up with glu).
fn begin_chunk_moe(lid: u32, x0: u32, e0: u32, len: u32, glu: bool) {
    if (e0 > 0u) {
        workgroupBarrier();
    }
    let v0 = (x0 + e0) / 4u;
    let up = p.k / 4u;
    let use_gelu = (p.flags & 4u) != 0u;
    for (var v = lid; v < len / 4u; v += WG) {
        if (glu) {
            xsv[xslot(v)] = glu4(xv[v0 + v], xv[up + v0 + v], use_gelu);
        } else {
            xsv[xslot(v)] = xv[v0 + v];
        }
    }
    workgroupBarrier();
}

// matvec_rows_moe is matvec_rows of slot wid.z's expert (XCH > 0).
fn matvec_rows_moe(kind: u32, lid: u32, wid: vec3<u32>, nwg: vec3<u32>) {
    let slot = wid.z;
    let e = moe_ids[slot];
    if (e < p.row0 || e - p.row0 >= p.experts) {
        return;
    }
    let lane = lid % LANES;
    let row = (wid.x + wid.y * nwg.x) * ROWS + lid / LANES;
    let rowb = ((e - p.row0) * p.n + row) * row_bytes(kind);
    let x0 = (slot / p.x_div) * p.x_stride;
    let glu = (p.flags & 8u) != 0u;
    var acc = 0.0;
    for (var e0 = 0u; e0 < p.k; e0 += XCH) {
        let len = min(XCH, p.k - e0);
        begin_chunk_moe(lid, x0, e0, len, glu);
        if (row < p.n) {
            acc += row_units(kind, lane, rowb, e0, len);
        }
    }
    var plus = 0.0;
    if ((p.flags & 32u) != 0u && row < p.n) {
        plus = row_bias[e * p.n + row];
    }
    store_row_at(lid, row, acc, p.y_offset + slot * p.y_stride, plus);
}
