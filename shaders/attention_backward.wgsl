// Backward of attention.wgsl for training: causal scaled dot-product
// attention with grouped-query heads, an optional sliding window and an
// optional logit soft-cap. Layouts as the forward, all f32, row-major:
//
//   q, dout, dq   [n_q, n_heads, head_dim]       query t sits at position pos0 + t
//   k, v, dk, dv  [kv_len, n_kv_heads, head_dim] key/value of position j at slot j
//   stats         [n_q, n_heads, 2]              (lse, delta) per query row
//
// For one query row i (token t, head h) over its visible keys j, with
// z_ij = scale * q_i.k_j, s_ij = softcap(z_ij) (or z_ij), P_ij = softmax_j(s_ij):
//
//   dP_ij    = dout_i . v_j
//   delta_i  = sum_j P_ij dP_ij           (= dout_i . out_i)
//   dZ_ij    = P_ij (dP_ij - delta_i) * s'(z_ij)       s' = 1 - tanh^2 with a cap, else 1
//   dq_i     = scale * sum_j dZ_ij k_j
//   dk_j     = scale * sum over the heads of j's group and the rows that see j of dZ_ij q_i
//   dv_j     = sum over the same rows of P_ij dout_i
//
// Three entries, in one chain:
//   attention_backward_stats: one workgroup per (head, token), grid (n_heads,
//     n_q): the row's log-sum-exp lse_i = m + log(l) and delta_i, folded
//     online over tiles of keys like the forward (running max, running sum,
//     and the running sum of exp(s - m) dP rescaled with them). The forward
//     kernel is left as it is: recomputing the statistics costs one pass of
//     two dot products per key, a third of the gradient passes below.
//   attention_backward_dq: one workgroup per (head, token); P_ij = exp(s_ij -
//     lse_i) is recomputed per key from the stored lse, so no T x T matrix
//     is ever stored.
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

struct Params {
    head_dim: u32,
    n_heads: u32,
    n_kv_heads: u32,
    n_q: u32,
    pos0: u32,
    kv_len: u32,
    window: u32, // 0 = none; else key j is visible from position i iff i - j < window
    group: u32,  // n_heads / n_kv_heads
    scale: f32,
    softcap: f32, // 0 = none
    _p0: u32,
    _p1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> dout: array<f32>;
@group(0) @binding(5) var<storage, read_write> stats: array<f32>;
@group(0) @binding(6) var<storage, read_write> dq: array<f32>;
@group(0) @binding(7) var<storage, read_write> dk: array<f32>;
@group(0) @binding(8) var<storage, read_write> dv: array<f32>;

const TILE: u32 = 64u;
const G: u32 = WG / TILE;
const PER: u32 = MAX_HD / TILE;
const ACC_N: u32 = WG * PER;

// The lowest finite f32 stands in for -inf (see attention.wgsl).
const LOWEST: f32 = -3.40282347e38;

var<workgroup> a_s: array<f32, MAX_HD>; // the fixed row: q (rows of queries) or k (rows of keys)
var<workgroup> b_s: array<f32, MAX_HD>; // ... and dout, or v
var<workgroup> dot_s: array<vec2<f32>, WG>; // partial dots, row r's at [r*G, r*G + G)
var<workgroup> c_s: array<f32, TILE>; // the tile's first coefficient (score, or dZ * scale)
var<workgroup> e_s: array<f32, TILE>; // ... and second (dP, or P)
var<workgroup> acc_s: array<f32, ACC_N>;

var<private> acc: array<f32, PER>;
var<private> acc2: array<f32, PER>;

// cap returns the soft-capped score and its derivative for a scaled score
// z: (c tanh(z/c), 1 - tanh^2), or (z, 1) without a cap. Both come from
// e = exp(-2|z/c|) <= 1, so nothing overflows for any z, and
// 1 - tanh^2 = 4e / (1 + e)^2 keeps its relative precision deep in the
// saturated tail, where 1 - tanh^2 would cancel to 0.
fn cap(z: f32) -> vec2<f32> {
    if (p.softcap <= 0.0) {
        return vec2<f32>(z, 1.0);
    }
    let e = exp(-2.0 * abs(z / p.softcap));
    let r = 1.0 / (1.0 + e);
    return vec2<f32>(p.softcap * sign(z) * (1.0 - e) * r, 4.0 * e * r * r);
}

// visible_keys returns the keys [j0, j1) query token t sees (attention.wgsl).
fn visible_keys(t: u32) -> vec2<u32> {
    let i = p.pos0 + t;
    var j0 = 0u;
    if (p.window > 0u && i + 1u > p.window) {
        j0 = i + 1u - p.window;
    }
    return vec2<u32>(j0, min(i + 1u, p.kv_len));
}

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

// stage loads the fixed rows into a_s and b_s.
fn stage(abase: u32, bbase: u32, abuf_is_q: bool, lid: u32) {
    for (var d = lid; d < p.head_dim; d += WG) {
        if (abuf_is_q) {
            a_s[d] = q[abase + d];
            b_s[d] = dout[bbase + d];
        } else {
            a_s[d] = k[abase + d];
            b_s[d] = v[bbase + d];
        }
    }
    workgroupBarrier();
}

// Row-streaming helpers: partial dots of the staged rows with key row kb
// (a_s . k, b_s . v: a query row's score and dP) or with query row qb
// (q . a_s, dout . b_s: the same two for a key row), over this invocation's
// slice of the dims.
fn dots_with_key(kb: u32, part: u32) -> vec2<f32> {
    var s = vec2<f32>(0.0);
    for (var d = part; d < p.head_dim; d += G) {
        s += vec2<f32>(a_s[d] * k[kb + d], b_s[d] * v[kb + d]);
    }
    return s;
}

fn dots_with_query(qb: u32, part: u32) -> vec2<f32> {
    var s = vec2<f32>(0.0);
    for (var d = part; d < p.head_dim; d += G) {
        s += vec2<f32>(q[qb + d] * a_s[d], dout[qb + d] * b_s[d]);
    }
    return s;
}

// tile_dots sums the G partial dots of tile row lid (< TILE).
fn tile_dots(lid: u32) -> vec2<f32> {
    var s = vec2<f32>(0.0);
    for (var g = 0u; g < G; g++) {
        s += dot_s[lid * G + g];
    }
    return s;
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
fn attention_backward_stats(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let h = wid.x;
    let t = wid.y;
    let hd = p.head_dim;
    let row = (t * p.n_heads + h) * hd;
    stage(row, row, true, lid);
    let kvoff = (h / p.group) * hd;
    let stride = p.n_kv_heads * hd;
    let js = visible_keys(t);
    let key = lid / G;
    let part = lid % G;
    var m = LOWEST;
    var l = 0.0;
    var sdp = 0.0; // sum of exp(s - m) dP
    for (var tile = js.x; tile < js.y; tile += TILE) {
        let cnt = min(TILE, js.y - tile);
        var dd = vec2<f32>(0.0);
        if (key < cnt) {
            dd = dots_with_key((tile + key) * stride + kvoff, part);
        }
        dot_s[lid] = dd;
        workgroupBarrier();
        if (lid < TILE) {
            var s = LOWEST;
            var dp = 0.0;
            if (lid < cnt) {
                let sum = tile_dots(lid);
                s = cap(sum.x * p.scale).x;
                dp = sum.y;
            }
            c_s[lid] = s;
            e_s[lid] = dp;
        }
        workgroupBarrier();
        // Every invocation scans the tile's max (broadcast reads, cheaper
        // than a tree's barriers); the first TILE take one exponential each,
        // and invocation 0 alone keeps the running sums, which only it
        // writes out.
        var tmax = LOWEST;
        for (var r = 0u; r < cnt; r++) {
            tmax = max(tmax, c_s[r]);
        }
        let m_new = max(m, tmax);
        var pe = 0.0;
        var pd = 0.0;
        if (lid < TILE) {
            pe = exp(c_s[lid] - m_new); // 0 past cnt, where c_s is LOWEST
            pd = pe * e_s[lid];
        }
        workgroupBarrier();
        if (lid < TILE) {
            c_s[lid] = pe;
            e_s[lid] = pd;
        }
        workgroupBarrier();
        if (lid == 0u) {
            let alpha = exp(m - m_new);
            l *= alpha;
            sdp *= alpha;
            for (var r = 0u; r < cnt; r++) {
                l += c_s[r];
                sdp += e_s[r];
            }
        }
        m = m_new;
        // c_s and e_s are rewritten only after the next tile's first
        // barrier, which invocation 0 reaches once done summing.
    }
    // Every query sees at least its own key: l >= 1.
    if (lid == 0u) {
        let st = (t * p.n_heads + h) * 2u;
        stats[st] = m + log(l);
        stats[st + 1u] = sdp / l;
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
