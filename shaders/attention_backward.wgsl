// Backward of attention.wgsl for training: causal scaled dot-product
// attention with grouped-query heads, an optional sliding window, an
// optional logit soft-cap and optional (frozen) attention sinks. Layouts as
// the forward, all f32, row-major:
//
//   q, dout, dq   [n_q, n_heads, head_dim]       query t sits at position pos0 + t
//   k, v, dk, dv  [kv_len, n_kv_heads, head_dim] key/value of position j at slot j
//   stats         [n_q, n_heads, 2]              (lse, delta) per query row
//   sinks         [n_heads]                      read only with FLAG_SINKS
//
// For one query row i (token t, head h) over its visible keys j, with
// z_ij = scale * q_i.k_j, s_ij = softcap(z_ij) (or z_ij), P_ij = softmax_j(s_ij)
// (with a sink, the softmax over the keys and the head's sink logit, P_ij
// its keys' part, summing to less than 1):
//
//   dP_ij    = dout_i . v_j
//   delta_i  = sum_j P_ij dP_ij           (= dout_i . out_i)
//   dZ_ij    = P_ij (dP_ij - delta_i) * s'(z_ij)       s' = 1 - tanh^2 with a cap, else 1
//   dq_i     = scale * sum_j dZ_ij k_j
//   dk_j     = scale * sum over the heads of j's group and the rows that see j of dZ_ij q_i
//   dv_j     = sum over the same rows of P_ij dout_i
//
// The sink has no value, so its dP is 0 and it adds nothing to delta but
// its share of the denominator; the sinks are frozen (no gradient).
//
// Three entries, in one chain:
//   attention_backward_stats (attention_backward_stats.wgsl): one workgroup
//     per (head, token), grid (n_heads, n_q): the row's log-sum-exp
//     lse_i = m + log(l) and delta_i, folded online over tiles of keys like
//     the forward (running max, running sum, and the running sum of
//     exp(s - m) dP rescaled with them), the sink folded in at the end. The
//     forward kernel is left as it is: recomputing the statistics costs one
//     pass of two dot products per key, a third of the gradient passes
//     below. It is a family of its own because it alone reads the sinks:
//     with them this module would bind 9 storage buffers, over the 8 per
//     stage WebGPU guarantees (and engine/gpu's maxBindings).
//   attention_backward_dq: one workgroup per (head, token); P_ij = exp(s_ij -
//     lse_i) is recomputed per key from the stored lse, so no T x T matrix
//     is ever stored (a sink's share is in lse, so these P_ij are the
//     forward's).
//   attention_backward_dkv: one workgroup per (kv head, key slot), grid
//     (n_kv_heads, kv_len): the workgroup walks the (query, head) rows of its
//     group that see the key, so dK and dV sum over the group's heads inside
//     the workgroup, in a fixed order, with no atomics: the same bits every
//     run.
//
// Each workgroup stages its fixed row (q and dout, or k and v) in shared
// memory and streams the other side in tiles of TILE = 64 rows, as the
// forward does: G = WG / 64 invocations per streamed row compute the two
// dot products (threads split over rows, then over the head's dims), the
// tile's 64 coefficients go to shared memory, and then G groups of 64 lanes
// accumulate coefficient * row (a group per row of the tile, a lane per dim)
// into private accumulators summed through shared memory at the end. Shared
// memory is about 9 KB at WG 256 and MAX_HD 256, 14.5 KB at MAX_HD 512,
// within WebGPU's 16 KB default.
//
// Lavapipe ends an invocation's loops after 65535 iterations in all (Mesa
// gallivm's loop limiter, one counter per invocation; a 70000-row loop lost
// its last 4465 rows). A tile here costs an invocation about 200 loop
// iterations (the dims of its dot products, the tile scans, the
// accumulation), so on lavapipe a row may stream up to ~20000 keys (or a key
// ~20000 query rows of its group) before results go wrong; GPUs have no such
// limit. Training sequences of 512 to 4096 stay far inside it.
//
// Constants: WG, the workgroup size: 64, 128 or 256; MAX_HD, the widest
// head (256, or 512 for Gemma 4's global heads: each invocation's
// accumulators and acc_s grow with it, which narrow heads should not pay
// for).

//!include attention_backward_common

@group(0) @binding(5) var<storage, read> stats: array<f32>;
@group(0) @binding(6) var<storage, read_write> dq: array<f32>;
@group(0) @binding(7) var<storage, read_write> dk: array<f32>;
@group(0) @binding(8) var<storage, read_write> dv: array<f32>;

const ACC_N: u32 = WG * PER;

var<workgroup> acc_s: array<f32, ACC_N>;

var<private> acc: array<f32, PER>;
var<private> acc2: array<f32, PER>;

// visible_queries returns the query tokens [t0, t1) that see key j: causal
// (pos0 + t >= j) and, with a window, pos0 + t - j < window.
fn visible_queries(j: u32) -> vec2<u32> {
    var t0 = 0u;
    if (j > p.pos0) {
        t0 = j - p.pos0;
    }
    var t1 = p.n_q;
    if (p.window > 0u) {
        t1 = min(t1, j + p.window - min(j + p.window, p.pos0)); // j + window - pos0, floored at 0
    }
    return vec2<u32>(t0, max(t0, t1));
}

// combine sums the G groups' accumulators a into the first group's
// (lid < TILE). Call from uniform control flow.
fn combine(a: ptr<private, array<f32, PER>>, lid: u32) {
    if (G == 1u) {
        return;
    }
    workgroupBarrier(); // acc_s may still be read by a previous combine
    for (var c = 0u; c < PER; c++) {
        acc_s[lid * PER + c] = (*a)[c];
    }
    workgroupBarrier();
    if (lid < TILE) {
        for (var g = 1u; g < G; g++) {
            for (var c = 0u; c < PER; c++) {
                (*a)[c] += acc_s[(g * TILE + lid) * PER + c];
            }
        }
    }
}

@compute @workgroup_size(WG)
fn attention_backward_dq(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let h = wid.x;
    let t = wid.y;
    let hd = p.head_dim;
    let row = (t * p.n_heads + h) * hd;
    stage(row, row, true, lid);
    let st = (t * p.n_heads + h) * 2u;
    let lse = stats[st];
    let delta = stats[st + 1u];
    let kvoff = (h / p.group) * hd;
    let stride = p.n_kv_heads * hd;
    let js = visible_keys(t);
    let key = lid / G;
    let part = lid % G;
    let grp = lid / TILE;
    let lane = lid % TILE;
    for (var c = 0u; c < PER; c++) {
        acc[c] = 0.0;
    }
    for (var tile = js.x; tile < js.y; tile += TILE) {
        let cnt = min(TILE, js.y - tile);
        var dd = vec2<f32>(0.0);
        if (key < cnt) {
            dd = dots_with_key((tile + key) * stride + kvoff, part);
        }
        dot_s[lid] = dd;
        workgroupBarrier();
        if (lid < TILE) {
            var dz = 0.0;
            if (lid < cnt) {
                let sum = tile_dots(lid);
                let sc = cap(sum.x * p.scale);
                let pr = exp(sc.x - lse);
                dz = pr * (sum.y - delta) * sc.y * p.scale;
            }
            c_s[lid] = dz;
        }
        workgroupBarrier();
        for (var r = grp; r < cnt; r += G) {
            let coef = c_s[r];
            let kb = (tile + r) * stride + kvoff;
            for (var c = 0u; c < PER; c++) {
                let d = lane + c * TILE;
                if (d < hd) {
                    acc[c] += coef * k[kb + d];
                }
            }
        }
        // No barrier before the next tile: c_s is rewritten only after its
        // first barrier, which every invocation reaches once done here.
    }
    combine(&acc, lid);
    if (lid < TILE) {
        for (var c = 0u; c < PER; c++) {
            let d = lid + c * TILE;
            if (d < hd) {
                dq[row + d] = acc[c];
            }
        }
    }
}

@compute @workgroup_size(WG)
fn attention_backward_dkv(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let kvh = wid.x;
    let j = wid.y;
    let hd = p.head_dim;
    let krow = (j * p.n_kv_heads + kvh) * hd;
    stage(krow, krow, false, lid);
    let ts = visible_queries(j);
    // Rows (t, h) for t in [t0, t1) and the group's heads, token-major.
    let items = (ts.y - ts.x) * p.group;
    let h0 = kvh * p.group;
    let item = lid / G;
    let part = lid % G;
    let grp = lid / TILE;
    let lane = lid % TILE;
    for (var c = 0u; c < PER; c++) {
        acc[c] = 0.0;
        acc2[c] = 0.0;
    }
    for (var tile = 0u; tile < items; tile += TILE) {
        let cnt = min(TILE, items - tile);
        var dd = vec2<f32>(0.0);
        if (item < cnt) {
            let it = tile + item;
            let qb = ((ts.x + it / p.group) * p.n_heads + h0 + it % p.group) * hd;
            dd = dots_with_query(qb, part);
        }
        dot_s[lid] = dd;
        workgroupBarrier();
        if (lid < TILE) {
            var dz = 0.0;
            var pr = 0.0;
            if (lid < cnt) {
                let it = tile + lid;
                let st = ((ts.x + it / p.group) * p.n_heads + h0 + it % p.group) * 2u;
                let sum = tile_dots(lid);
                let sc = cap(sum.x * p.scale);
                pr = exp(sc.x - stats[st]);
                dz = pr * (sum.y - stats[st + 1u]) * sc.y * p.scale;
            }
            c_s[lid] = dz;
            e_s[lid] = pr;
        }
        workgroupBarrier();
        for (var r = grp; r < cnt; r += G) {
            let it = tile + r;
            let qb = ((ts.x + it / p.group) * p.n_heads + h0 + it % p.group) * hd;
            let cz = c_s[r];
            let cp = e_s[r];
            for (var c = 0u; c < PER; c++) {
                let d = lane + c * TILE;
                if (d < hd) {
                    acc[c] += cz * q[qb + d];
                    acc2[c] += cp * dout[qb + d];
                }
            }
        }
    }
    combine(&acc, lid);
    combine(&acc2, lid);
    if (lid < TILE) {
        for (var c = 0u; c < PER; c++) {
            let d = lid + c * TILE;
            if (d < hd) {
                dk[krow + d] = acc[c];
                dv[krow + d] = acc2[c];
            }
        }
    }
}
