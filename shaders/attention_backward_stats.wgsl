// The first pass of attention_backward.wgsl (see its header): each query
// row's log-sum-exp and delta = sum_j P_ij dP_ij, with the head's sink, when
// FLAG_SINKS is set, folded into the log-sum-exp. A family of its own, apart
// from the gradient passes, because it alone binds the sinks.
//
//   sinks [n_heads]             read only with FLAG_SINKS
//   stats [n_q, n_heads, 2]     (lse, delta) per query row, written here
//
// Constants as attention_backward.wgsl's: WG and MAX_HD.

//!include attention_backward_common

@group(0) @binding(5) var<storage, read> sinks: array<f32>;
@group(0) @binding(6) var<storage, read_write> stats: array<f32>;

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
        if ((p.flags & FLAG_SINKS) != 0u) {
            // The sink joins the denominator as the forward's sink_fold
            // (attention_common.wgsl) adds it: the larger of m and the sink
            // is the new max, so no exponent is positive. Its dP is 0: sdp
            // is only rescaled.
            let s = sinks[h];
            var mf = m;
            var alpha = 1.0;
            var lf: f32;
            if (s > m) {
                mf = s;
                alpha = exp(m - s);
                lf = l * alpha + 1.0;
            } else {
                lf = l + exp(s - m);
            }
            stats[st] = mf + log(lf);
            stats[st + 1u] = sdp * alpha / lf;
        } else {
            stats[st] = m + log(l);
            stats[st + 1u] = sdp / l;
        }
    }
}
