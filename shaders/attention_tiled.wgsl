// Query-tiled ("flash") attention for long prefills: the same operation as
// attention.wgsl's attention entry (same Params, masks and layouts), but a
// workgroup takes BQ query tokens of one head, so each key and value it
// stages in workgroup memory serves BQ queries instead of one. The
// per-query kernel has every (head, token) workgroup read all its keys and
// values from L2: ALBERT's 12 heads x 512 tokens made 6144 workgroups each
// reading 512 K and V rows, ~1 ms a layer on an H200.
//
//   q   [n_q, n_heads, head_dim]        query t sits at position pos0 + t
//   k,v [n_ctx_slots, n_kv_heads, head_dim]
//   out [n_q, n_heads, head_dim]
//
// Grid (n_heads, ceil(n_q / BQ)). The workgroup walks the union of its
// queries' visible keys (contiguous: both ends grow with the position) in
// tiles of BK, and per tile:
//   1. stages the keys in kv_s;
//   2. scores: the WG = TR x TC invocations each compute an RQ x RK block of
//      the BQ x BK scores (queries tr + TR*a, keys tc + TC*b: TC neighbouring
//      invocations read TC different key rows, which the odd row stride HDP
//      spreads over distinct banks), scale, softcap and mask them in
//      registers, and post each row's partial max;
//   3. stages the values over the keys (no invocation reads a key any more)
//      and folds the tile into each query's online softmax: running max m,
//      p = exp(s - m) to p_s, accumulators rescaled by exp(m_old - m);
//   4. accumulates: invocation (tr, tc) owns the head dims tc + TC*c of its
//      RQ queries, in registers.
// Each invocation's l sums only its own keys' p; the TC partial sums of a
// row are added once, at the end.
//
// Constants: HD, the head dim (exact: its loops unroll); BQ, queries per
// workgroup, a multiple of TR = 8; BK, keys per tile, a multiple of TC = 16.
// Workgroup memory is 4 * (BQ*(HD+1) + BK*(HD+1) + BQ*(BK+1) + BQ*TC) bytes;
// ops.attentionTile.sharedBytes mirrors it.

struct Params {
    head_dim: u32,
    n_heads: u32,
    n_kv_heads: u32,
    n_q: u32,
    pos0: u32,
    kv_len: u32,
    window: u32, // 0 = none; else key j is visible from position i iff i - j < window
    group: u32,  // n_heads / n_kv_heads: query heads per KV head
    scale: f32,
    softcap: f32, // 0 = none; else s = softcap * tanh(s / softcap)
    n_split: u32, // unused here (attention.wgsl's split-K)
    chunk: u32,   // unused here
    flags: u32,   // FLAG_BIDIRECTIONAL
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

const FLAG_BIDIRECTIONAL: u32 = 1u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

const WG: u32 = 128u;
const TC: u32 = 16u;
const TR: u32 = WG / TC;
const RQ: u32 = BQ / TR;
const RK: u32 = BK / TC;
const DC: u32 = (HD + TC - 1u) / TC;
// HDP, the row stride of q_s and kv_s, is odd so the TC key rows read at
// one dim in step 2 fall in TC different banks (with HD = 64 they would all
// hit one).
const HDP: u32 = HD + 1u;
// naga takes no expression as an array length, so the sizes are named.
const Q_N: u32 = BQ * HDP;
const KV_N: u32 = BK * HDP;
// BKP, p_s's row stride, is odd too: a warp's two query rows read one key's
// weights in step 4, which a stride of BK = 32 or 64 puts in one bank.
const BKP: u32 = BK + 1u;
const P_N: u32 = BQ * BKP;
const R_N: u32 = BQ * TC;

// LOWEST stands in for -inf (see attention.wgsl): the running max before
// any key, and a masked score.
const LOWEST: f32 = -3.40282347e38;

var<workgroup> q_s: array<f32, Q_N>;   // the BQ queries, row stride HDP
var<workgroup> kv_s: array<f32, KV_N>; // the tile's keys, then its values
var<workgroup> p_s: array<f32, P_N>;   // the tile's exp(s - m), row stride BKP
var<workgroup> red_s: array<f32, R_N>; // per query, the TC partial maxima (then sums)

fn tanh_stable(x: f32) -> f32 {
    let e = exp(-2.0 * abs(x));
    return sign(x) * (1.0 - e) / (1.0 + e);
}

// visible returns the keys [j0, j1) query token t sees (attention.wgsl's).
fn visible(t: u32) -> vec2<u32> {
    if ((p.flags & FLAG_BIDIRECTIONAL) != 0u) {
        return vec2<u32>(0u, p.kv_len);
    }
    let i = p.pos0 + t;
    var j0 = 0u;
    if (p.window > 0u && i + 1u > p.window) {
        j0 = i + 1u - p.window;
    }
    return vec2<u32>(j0, min(i + 1u, p.kv_len));
}

// stage_k and stage_v copy the cnt keys (values) from slot tile on, of
// this workgroup's KV head, into kv_s and zero its rows past cnt: slots
// past kv_len may hold anything, NaN included, and a zero value times a
// zero weight stays zero.
fn stage_k(tile: u32, cnt: u32, kvoff: u32, stride: u32, lid: u32) {
    for (var idx = lid; idx < BK * HD; idx += WG) {
        let r = idx / HD;
        let d = idx % HD;
        var x = 0.0;
        if (r < cnt) {
            x = k[(tile + r) * stride + kvoff + d];
        }
        kv_s[r * HDP + d] = x;
    }
}

fn stage_v(tile: u32, cnt: u32, kvoff: u32, stride: u32, lid: u32) {
    for (var idx = lid; idx < BK * HD; idx += WG) {
        let r = idx / HD;
        let d = idx % HD;
        var x = 0.0;
        if (r < cnt) {
            x = v[(tile + r) * stride + kvoff + d];
        }
        kv_s[r * HDP + d] = x;
    }
}

@compute @workgroup_size(WG)
fn attention_tiled(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let h = wid.x;
    let t0 = wid.y * BQ;
    let nq = min(BQ, p.n_q - t0); // the last workgroup's queries may stop short
    let stride = p.n_kv_heads * HD;
    let kvoff = (h / p.group) * HD;
    let tr = lid / TC;
    let tc = lid % TC;

    for (var idx = lid; idx < BQ * HD; idx += WG) {
        let r = idx / HD;
        let d = idx % HD;
        var x = 0.0;
        if (r < nq) {
            x = q[((t0 + r) * p.n_heads + h) * HD + d];
        }
        q_s[r * HDP + d] = x;
    }

    // This invocation's queries: their visible keys (none for rows past
    // nq), running max and sum, and accumulators.
    var lo: array<u32, RQ>;
    var hi: array<u32, RQ>;
    var m: array<f32, RQ>;
    var l: array<f32, RQ>;
    var acc: array<array<f32, DC>, RQ>;
    for (var a = 0u; a < RQ; a++) {
        let r = tr + TR * a;
        lo[a] = 0u;
        hi[a] = 0u;
        if (r < nq) {
            let js = visible(t0 + r);
            lo[a] = js.x;
            hi[a] = js.y;
        }
        m[a] = LOWEST;
        l[a] = 0.0;
        for (var c = 0u; c < DC; c++) {
            acc[a][c] = 0.0;
        }
    }

    let first = visible(t0).x;
    let last = visible(t0 + nq - 1u).y;
    for (var tile = first; tile < last; tile += BK) {
        let cnt = min(BK, last - tile);
        // The previous tile's value sums (and, the first time, the query
        // staging) are done before kv_s is overwritten.
        workgroupBarrier();
        stage_k(tile, cnt, kvoff, stride, lid);
        workgroupBarrier();

        var s: array<array<f32, RK>, RQ>;
        for (var a = 0u; a < RQ; a++) {
            for (var b = 0u; b < RK; b++) {
                s[a][b] = 0.0;
            }
        }
        for (var d = 0u; d < HD; d++) {
            var qa: array<f32, RQ>;
            for (var a = 0u; a < RQ; a++) {
                qa[a] = q_s[(tr + TR * a) * HDP + d];
            }
            for (var b = 0u; b < RK; b++) {
                let kb = kv_s[(tc + TC * b) * HDP + d];
                for (var a = 0u; a < RQ; a++) {
                    s[a][b] += qa[a] * kb;
                }
            }
        }
        for (var a = 0u; a < RQ; a++) {
            var pm = LOWEST;
            for (var b = 0u; b < RK; b++) {
                let j = tile + tc + TC * b;
                var x = LOWEST;
                if (j >= lo[a] && j < hi[a]) {
                    x = s[a][b] * p.scale;
                    if (p.softcap > 0.0) {
                        x = p.softcap * tanh_stable(x / p.softcap);
                    }
                }
                s[a][b] = x;
                pm = max(pm, x);
            }
            red_s[(tr + TR * a) * TC + tc] = pm;
        }
        workgroupBarrier();

        stage_v(tile, cnt, kvoff, stride, lid);
        for (var a = 0u; a < RQ; a++) {
            let r = tr + TR * a;
            var tmax = LOWEST;
            for (var g = 0u; g < TC; g++) {
                tmax = max(tmax, red_s[r * TC + g]);
            }
            let mn = max(m[a], tmax);
            let alpha = exp(m[a] - mn);
            m[a] = mn;
            l[a] *= alpha;
            for (var c = 0u; c < DC; c++) {
                acc[a][c] *= alpha;
            }
            for (var b = 0u; b < RK; b++) {
                // A masked key weighs exp(LOWEST - mn) = 0 once the query
                // has seen a key. Before that (a window starting past this
                // tile's first keys) mn is LOWEST and it weighs 1, but the
                // first visible key's alpha = exp(LOWEST - m) = 0 wipes
                // those weights; rows past nq are never written.
                let pr = exp(s[a][b] - mn);
                p_s[r * BKP + tc + TC * b] = pr;
                l[a] += pr;
            }
        }
        workgroupBarrier();

        for (var j = 0u; j < cnt; j++) {
            var vd: array<f32, DC>;
            for (var c = 0u; c < DC; c++) {
                let d = tc + TC * c;
                vd[c] = 0.0;
                if (d < HD) {
                    vd[c] = kv_s[j * HDP + d];
                }
            }
            for (var a = 0u; a < RQ; a++) {
                let pr = p_s[(tr + TR * a) * BKP + j];
                for (var c = 0u; c < DC; c++) {
                    acc[a][c] += pr * vd[c];
                }
            }
        }
    }

    // Add up each query's TC partial sums; every valid query sees its own
    // position's key, so l >= 1 there.
    workgroupBarrier();
    for (var a = 0u; a < RQ; a++) {
        red_s[(tr + TR * a) * TC + tc] = l[a];
    }
    workgroupBarrier();
    for (var a = 0u; a < RQ; a++) {
        let r = tr + TR * a;
        if (r < nq) {
            var sum = 0.0;
            for (var g = 0u; g < TC; g++) {
                sum += red_s[r * TC + g];
            }
            let inv = 1.0 / sum;
            let base = ((t0 + r) * p.n_heads + h) * HD;
            for (var c = 0u; c < DC; c++) {
                let d = tc + TC * c;
                if (d < HD) {
                    out[base + d] = acc[a][c] * inv;
                }
            }
        }
    }
}
