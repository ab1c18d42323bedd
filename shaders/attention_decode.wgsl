// Decode attention over a long history with grouped-query heads: the same
// operation as attention.wgsl's entries (same Params, masks and layouts),
// but one workgroup serves GQ query heads that share a KV head, so each key
// and value row it reads serves all of them. The per-query kernel reads a
// KV head's rows once per query head of its group: Llama 3 8B (32 heads on
// 8) read its 33.5 MB layer of f32 cache at 4096 keys four times, ~100 µs a
// layer on an H200 where one read takes ~11 µs.
//
//   q     [n_q, n_heads, head_dim]        query t sits at position pos0 + t
//   k,v   [n_ctx_slots, n_kv_heads, head_dim]
//   sinks [n_heads]                       read only with FLAG_SINKS
//   out   [n_q, n_heads, head_dim]
//
// Grid (n_kv_heads * ceil(group / GQ), n_q, n_split): workgroup (x, t, s)
// takes query heads [g0, g0 + GQ) of KV head x / ceil(group / GQ) for token
// t and folds split s's keys, [j0 + s*chunk, j0 + (s+1)*chunk), in blocks
// of SC keys. Per block:
//   1. scores: the keys are staged TK rows at a time in kv_s (coalesced
//      vec4 loads, every one issued before the first is needed); invocation
//      (key, subset) scores its key against heads subset, subset + NGS, ...
//      into s_s, scaled, softcapped and masked;
//   2. softmax: NP invocations per head take the block's max in red_s, one
//      per head combines them into m_s, then the NP turn scores into
//      exp(s - m) in place and post partial sums, which the head's
//      invocation folds into l;
//   3. values: invocation (part, dv) owns dims 4*dv .. 4*dv+3 of every head
//      for the keys part, part + KP, ...: each value row is read once from
//      global memory (a row is contiguous across the HDV invocations of a
//      part) and weighted by every head's p, U rows in flight at a time.
// Scoring a whole block before any value (instead of a running max per
// tile of keys, as attention.wgsl does) rescales the accumulators once per
// block and takes each block's max with a few barriers, not a serial scan
// per tile. The KP partial accumulators are summed through acc_s at the end.
//
// With n_split == 1 the workgroup writes out, a head's sink folded in;
// otherwise it writes its partials in attention.wgsl's scratch layout
// ([n_q, n_heads, n_split] of m, l, acc[head_dim], sinks left out) and
// attention.wgsl's attention_combine merges them and folds the sinks in.
//
// Constants: HD, the head dim, a multiple of 4 (rows are read as vec4s) and
// at most 4 * WG = 512 (step 3 gives each vec4 of a row to an invocation);
// GQ, query heads per workgroup (<= 8); TK, keys staged per tile (8..64);
// SC, keys per block, a multiple of TK. Workgroup memory is
// 16*GQ*HD/4 + 16*TK*(HD/4 + 1) + 4*GQ*SC + 20*WG + 8*GQ bytes;
// ops.attentionDecodeShape.sharedBytes mirrors it.

//!include attention_common

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> k: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> v: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> sinks: array<f32>;
@group(0) @binding(5) var<storage, read_write> scratch: array<f32>;
@group(0) @binding(6) var<storage, read_write> out: array<f32>;

const WG: u32 = 128u;
const HDV: u32 = HD / 4u;
// SV, kv_s's row stride in vec4s, is odd so the keys of one scoring step,
// one per invocation, spread over the banks (HD = 128 would put them all in
// one).
const SV: u32 = HDV + 1u;
const NGS: u32 = WG / TK;               // scoring: head subsets
const HPT: u32 = (GQ + NGS - 1u) / NGS; // scoring: heads per invocation
const NP: u32 = WG / GQ;                // softmax: invocations per head
const KP: u32 = WG / HDV;               // values: key parts
const U: u32 = 4u;                      // values: rows in flight per invocation
// naga takes no expression as an array length, so the sizes are named.
const Q_N: u32 = GQ * HDV;
const KV_N: u32 = TK * SV;
const S_N: u32 = GQ * SC;

var<workgroup> q_s: array<vec4<f32>, Q_N>;  // the GQ queries
var<workgroup> kv_s: array<vec4<f32>, KV_N>; // a tile of keys, row stride SV
var<workgroup> s_s: array<f32, S_N>;        // the block's scores, then exp(s - m); head g at g*SC
var<workgroup> red_s: array<f32, WG>;       // softmax partial maxima, then sums
var<workgroup> acc_s: array<vec4<f32>, WG>; // the key parts' accumulators of one head
var<workgroup> m_s: array<f32, GQ>;         // each head's running max
var<workgroup> l_s: array<f32, GQ>;         // each head's sum, at the end

// The running max of each head (the same in every invocation), its running
// sum of exp(s - m) (kept by invocation g for head g) and this invocation's
// dims of each head's exp-weighted sum of values.
var<private> m: array<f32, GQ>;
var<private> l: array<f32, GQ>;
var<private> acc: array<vec4<f32>, GQ>;

@compute @workgroup_size(WG)
fn attention_decode(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let chunks = (p.group + GQ - 1u) / GQ;
    let kvh = wid.x / chunks;
    let g0 = (wid.x % chunks) * GQ;
    let ng = min(GQ, p.group - g0); // heads past the group's end score zeros, unwritten
    let h0 = kvh * p.group + g0;
    let t = wid.y;
    let sp = wid.z;

    for (var i = lid; i < Q_N; i += WG) {
        var x = vec4<f32>(0.0);
        if (i / HDV < ng) {
            x = q[(t * p.n_heads + h0) * HDV + i];
        }
        q_s[i] = x;
    }
    for (var g = 0u; g < GQ; g++) {
        m[g] = LOWEST;
        l[g] = 0.0;
        acc[g] = vec4<f32>(0.0);
    }
    // A query nearer the start than others in a batch sees fewer keys, so
    // its last splits may be empty: m stays LOWEST and l 0, which the
    // combine weighs by exp(LOWEST - max) = 0.
    let js = visible(t);
    let lo = min(js.x + sp * p.chunk, js.y);
    let hi = min(lo + p.chunk, js.y);
    let stride = p.n_kv_heads * HDV;
    let kvoff = kvh * HDV;
    let sj = lid % TK; // scoring: this invocation's key of the tile
    let sg = lid / TK; // ... and its head subset
    let rg = lid / NP; // softmax: this invocation's head
    let rp = lid % NP; // ... and its share of the block
    let vk = lid / HDV; // values: this invocation's key part
    let vd = lid % HDV; // ... and its vec4 of the head

    for (var c0 = lo; c0 < hi; c0 += SC) {
        let n = min(SC, hi - c0);

        // 1. Scores of the block's keys. The first tile's barrier also
        // publishes q_s.
        for (var t0 = 0u; t0 < n; t0 += TK) {
            let cnt = min(TK, n - t0);
            // Rows past the block's end repeat its last key (finite, unlike
            // a slot past kv_len) and are masked below.
            for (var i = lid; i < TK * HDV; i += WG) {
                let r = i / HDV;
                let j = c0 + t0 + min(r, cnt - 1u);
                kv_s[r * SV + i % HDV] = k[j * stride + kvoff + i % HDV];
            }
            workgroupBarrier();
            var dots: array<f32, HPT>;
            for (var e = 0u; e < HPT; e++) {
                dots[e] = 0.0;
            }
            for (var dv = 0u; dv < HDV; dv++) {
                let kx = kv_s[sj * SV + dv];
                for (var e = 0u; e < HPT; e++) {
                    let g = sg + e * NGS;
                    if (g < GQ) {
                        dots[e] += dot(kx, q_s[g * HDV + dv]);
                    }
                }
            }
            for (var e = 0u; e < HPT; e++) {
                let g = sg + e * NGS;
                if (g < GQ) {
                    var s = LOWEST;
                    if (sj < cnt) {
                        s = dots[e] * p.scale;
                        if (p.softcap > 0.0) {
                            s = p.softcap * tanh_stable(s / p.softcap);
                        }
                    }
                    s_s[g * SC + t0 + sj] = s;
                }
            }
            // kv_s is restaged by the next tile.
            workgroupBarrier();
        }

        // 2. Each head's max over the block, p = exp(s - m) and its sum.
        var mx = LOWEST;
        if (rg < GQ) {
            for (var i = rp; i < n; i += NP) {
                mx = max(mx, s_s[rg * SC + i]);
            }
        }
        red_s[lid] = mx;
        workgroupBarrier();
        if (lid < GQ) {
            var tm = m[lid];
            for (var r = 0u; r < NP; r++) {
                tm = max(tm, red_s[lid * NP + r]);
            }
            m_s[lid] = tm;
        }
        workgroupBarrier();
        var alpha: array<f32, GQ>;
        for (var g = 0u; g < GQ; g++) {
            let mn = m_s[g];
            alpha[g] = exp(m[g] - mn);
            m[g] = mn;
        }
        var ps = 0.0;
        if (rg < GQ) {
            let mn = m[rg];
            for (var i = rp; i < n; i += NP) {
                let e = exp(s_s[rg * SC + i] - mn);
                s_s[rg * SC + i] = e;
                ps += e;
            }
        }
        red_s[lid] = ps; // the maxima were last read before the barrier above
        workgroupBarrier();
        if (lid < GQ) {
            var sum = 0.0;
            for (var r = 0u; r < NP; r++) {
                sum += red_s[lid * NP + r];
            }
            l[lid] = l[lid] * alpha[lid] + sum;
        }

        // 3. Values. Rows past the block's end repeat its last key, with
        // weight 0.
        for (var g = 0u; g < GQ; g++) {
            acc[g] *= alpha[g];
        }
        if (vk < KP) {
            for (var j = vk; j < n; j += KP * U) {
                var vx: array<vec4<f32>, U>;
                for (var u = 0u; u < U; u++) {
                    let jj = min(j + u * KP, n - 1u);
                    vx[u] = v[(c0 + jj) * stride + kvoff + vd];
                }
                for (var u = 0u; u < U; u++) {
                    let jj = j + u * KP;
                    if (jj < n) {
                        for (var g = 0u; g < GQ; g++) {
                            acc[g] += s_s[g * SC + jj] * vx[u];
                        }
                    }
                }
            }
        }
        // No barrier before the next block: its first write to s_s and
        // red_s follows the barrier after its first tile's staging, which
        // every invocation reaches only once done with this block.
    }

    if (lid < GQ) {
        l_s[lid] = l[lid];
    }
    let base0 = (t * p.n_heads + h0) * p.n_split + sp;
    for (var g = 0u; g < GQ; g++) {
        acc_s[lid] = acc[g];
        workgroupBarrier();
        if (g < ng && lid < HDV) {
            var o = acc_s[lid];
            for (var r = 1u; r < KP; r++) {
                o += acc_s[r * HDV + lid];
            }
            if (p.n_split == 1u) {
                // n_split is 1 only where the dispatcher gives the one split
                // every visible key, at least the query's own: l >= 1.
                if ((p.flags & FLAG_SINKS) != 0u) {
                    let f = sink_fold(h0 + g, m[g], l_s[g]);
                    o = o * f.x / f.y;
                } else {
                    o /= l_s[g];
                }
                let ob = (t * p.n_heads + h0 + g) * HD + 4u * lid;
                for (var e = 0u; e < 4u; e++) {
                    out[ob + e] = o[e];
                }
            } else {
                let base = (base0 + g * p.n_split) * (HD + 2u);
                if (lid == 0u) {
                    scratch[base] = m[g];
                    scratch[base + 1u] = l_s[g];
                }
                for (var e = 0u; e < 4u; e++) {
                    scratch[base + 2u + 4u * lid + e] = o[e];
                }
            }
        }
        workgroupBarrier();
    }
}
