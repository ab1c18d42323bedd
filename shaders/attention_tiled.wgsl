// Query-tiled ("flash") attention for long prefills: the same operation as
// attention.wgsl's attention entry (same Params, masks and layouts), but a
// workgroup takes BQ query tokens of one head, so each key and value it
// stages in workgroup memory serves BQ queries instead of one. The
// per-query kernel has every (head, token) workgroup read all its keys and
// values from L2: ALBERT's 12 heads x 512 tokens made 6144 workgroups each
// reading 512 K and V rows, ~1 ms a layer on an H200.
//
//   q     [n_q, n_heads, head_dim]        query t sits at position pos0 + t
//   k,v   [n_ctx_slots, n_kv_heads, head_dim]
//   sinks [n_heads]                       read only with FLAG_SINKS
//   out   [n_q, n_heads, head_dim]
//
// Grid (n_heads, ceil(n_q / BQ)). The workgroup walks the union of its
// queries' visible keys (contiguous: both ends grow with the position) in
// tiles of BK, and per tile:
//   1. stages the keys in kv_s;
//   2. scores: the WG = TR x TC invocations each compute an RQ x RK block of
//      the BQ x BK scores (queries tr + TR*a, keys tc + TC*b: TC neighbouring
//      invocations read TC different key rows, which the odd vec4 row stride
//      SV spreads over the banks), scale, softcap and mask them in
//      registers, and post each row's partial max;
//   3. stages the values over the keys (no invocation reads a key any more)
//      and folds the tile into each query's online softmax: running max m,
//      p = exp(s - m) to p_s, accumulators rescaled by exp(m_old - m);
//   4. accumulates: invocation (tr, tc) owns the head dims 4*(tc + TC*c)
//      .. +3 of its RQ queries, in registers.
// Each invocation's l sums only its own keys' p; the TC partial sums of a
// row are added once, at the end, where the head's sink joins them.
//
// Constants: HD, the head dim (exact: its loops unroll); BQ, queries per
// workgroup, a multiple of TR = 8; BK, keys per tile, a multiple of TC = 16.
// With SV = ceil(HD/4) + 1, workgroup memory is
// 4 * (4*SV*(BQ + BK) + BQ*(BK+1) + BQ*TC) bytes;
// ops.attentionTile.sharedBytes mirrors it.

//!include attention_common

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> sinks: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

const WG: u32 = 128u;
const TC: u32 = 16u;
const TR: u32 = WG / TC;
const RQ: u32 = BQ / TR;
const RK: u32 = BK / TC;
// Shared rows hold vec4s: one load gives four dims of a query or key, a
// quarter of the shared loads scalar rows need (the kernel is bound by them:
// a score costs RQ+RK loads per RQ*RK dots). HDV vec4s cover the head, the
// last zero-padded when HD is not a multiple of 4.
const HDV: u32 = (HD + 3u) / 4u;
// SV, the vec4 row stride, is odd so the TC key rows read at one dim in
// step 2 take the fewest wavefronts (16 threads x 16 bytes: two); with
// HD = 64 and no padding they would all hit the same banks.
const SV: u32 = HDV + 1u;
// DCV is the vec4s of the head an invocation accumulates per query in
// step 4: dims 4*(tc + TC*c) .. +3.
const DCV: u32 = (HDV + TC - 1u) / TC;
// BKP, p_s's row stride, is odd too: a warp's two query rows read one key's
// weights in step 4, which a stride of BK = 32 or 64 puts in one bank.
const BKP: u32 = BK + 1u;
// naga takes no expression as an array length, so the sizes are named.
const Q_N: u32 = BQ * SV;
const KV_N: u32 = BK * SV;
const P_N: u32 = BQ * BKP;
const R_N: u32 = BQ * TC;

var<workgroup> q_s: array<vec4<f32>, Q_N>;   // the BQ queries, row stride SV
var<workgroup> kv_s: array<vec4<f32>, KV_N>; // the tile's keys, then its values
var<workgroup> p_s: array<f32, P_N>;         // the tile's exp(s - m), row stride BKP
var<workgroup> red_s: array<f32, R_N>;       // per query, the TC partial maxima (then sums)

// row4 reads dims 4*dv .. 4*dv+3 of the row at base of src (0: q, 1: k,
// 2: v; WGSL passes no storage pointers to functions), zero past HD.
fn row4(src: u32, base: u32, dv: u32) -> vec4<f32> {
    var x = vec4<f32>(0.0);
    for (var e = 0u; e < 4u; e++) {
        let d = 4u * dv + e;
        if (d < HD) {
            switch src {
                case 0u: { x[e] = q[base + d]; }
                case 1u: { x[e] = k[base + d]; }
                default: { x[e] = v[base + d]; }
            }
        }
    }
    return x;
}

// stage copies the cnt keys (src 1) or values (src 2) from slot tile on, of
// this workgroup's KV head, into kv_s, and zeros its rows past cnt rather
// than read slots past kv_len, which may lie past the buffer's end. Step 2
// scores those rows and masks them; step 4 stops at cnt.
fn stage(src: u32, tile: u32, cnt: u32, kvoff: u32, stride: u32, lid: u32) {
    for (var idx = lid; idx < BK * HDV; idx += WG) {
        let r = idx / HDV;
        let dv = idx % HDV;
        var x = vec4<f32>(0.0);
        if (r < cnt) {
            x = row4(src, (tile + r) * stride + kvoff, dv);
        }
        kv_s[r * SV + dv] = x;
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

    for (var idx = lid; idx < BQ * HDV; idx += WG) {
        let r = idx / HDV;
        let dv = idx % HDV;
        var x = vec4<f32>(0.0);
        if (r < nq) {
            x = row4(0u, ((t0 + r) * p.n_heads + h) * HD, dv);
        }
        q_s[r * SV + dv] = x;
    }

    // This invocation's queries: their visible keys (none for rows past
    // nq), running max and sum, and accumulators.
    var lo: array<u32, RQ>;
    var hi: array<u32, RQ>;
    var m: array<f32, RQ>;
    var l: array<f32, RQ>;
    var acc: array<array<vec4<f32>, DCV>, RQ>;
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
        for (var c = 0u; c < DCV; c++) {
            acc[a][c] = vec4<f32>(0.0);
        }
    }

    let first = visible(t0).x;
    let last = visible(t0 + nq - 1u).y;
    for (var tile = first; tile < last; tile += BK) {
        let cnt = min(BK, last - tile);
        // The previous tile's value sums (and, the first time, the query
        // staging) are done before kv_s is overwritten.
        workgroupBarrier();
        stage(1u, tile, cnt, kvoff, stride, lid);
        workgroupBarrier();

        var s: array<array<f32, RK>, RQ>;
        for (var a = 0u; a < RQ; a++) {
            for (var b = 0u; b < RK; b++) {
                s[a][b] = 0.0;
            }
        }
        for (var dv = 0u; dv < HDV; dv++) {
            var qa: array<vec4<f32>, RQ>;
            for (var a = 0u; a < RQ; a++) {
                qa[a] = q_s[(tr + TR * a) * SV + dv];
            }
            for (var b = 0u; b < RK; b++) {
                let kb = kv_s[(tc + TC * b) * SV + dv];
                for (var a = 0u; a < RQ; a++) {
                    s[a][b] += dot(qa[a], kb);
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

        stage(2u, tile, cnt, kvoff, stride, lid);
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
            for (var c = 0u; c < DCV; c++) {
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
            var vd: array<vec4<f32>, DCV>;
            for (var c = 0u; c < DCV; c++) {
                let dv = tc + TC * c;
                vd[c] = vec4<f32>(0.0);
                if (dv < HDV) {
                    vd[c] = kv_s[j * SV + dv];
                }
            }
            for (var a = 0u; a < RQ; a++) {
                let pr = p_s[(tr + TR * a) * BKP + j];
                for (var c = 0u; c < DCV; c++) {
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
            var inv = 1.0 / sum;
            if ((p.flags & FLAG_SINKS) != 0u) {
                // m[a] is the row's max in all TC invocations of the row.
                let f = sink_fold(h, m[a], sum);
                inv = f.x / f.y;
            }
            let base = ((t0 + r) * p.n_heads + h) * HD;
            for (var c = 0u; c < DCV; c++) {
                let o = acc[a][c] * inv;
                for (var e = 0u; e < 4u; e++) {
                    let d = 4u * (tc + TC * c) + e;
                    if (d < HD) {
                        out[base + d] = o[e];
                    }
                }
            }
        }
    }
}
