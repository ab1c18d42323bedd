// Sampling reductions over a logits vector x[0, n): argmax and top-k, so the
// decode loop reads back one id or k candidates instead of the whole
// vocabulary (262144 floats for Gemma).
//
// Ranking: a before b when a's value is greater, or equal with a lower index.
// That is a total order on (value, index), so results are deterministic and
// ties go to the lowest index, as greedy sampling in llama.cpp and HF takes
// the first maximum. NaN values are not ranked meaningfully.
//
// Both run in two stages. Stage 1 ("_local"): p.groups workgroups, workgroup
// g scanning x[g*span, min(n, (g+1)*span)). With one group it writes the
// answer to out itself (p.final_out = 1); otherwise it writes its best
// (index, value bits) pairs to scratch, k per group, and stage 2
// ("_merge", one workgroup) reduces those groups * k pairs the same way.
//
// out: argmax → out[0] = index; top-k → out[0, k) = indices and
// out[k, 2k) = the values' f32 bits, best first.
//
// Constants: WG, the workgroup size, a power of two <= 256.

struct Params {
    n: u32,
    k: u32,      // candidates kept (1 for argmax)
    span: u32,   // elements per stage-1 workgroup, a multiple of WG
    groups: u32, // stage-1 workgroups
    final_out: u32,
    _p0: u32,
    _p1: u32,
    _p2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> scratch: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<u32>;

// NONE marks an empty candidate slot; it ranks after every real element,
// even a -inf logit, because its value is -inf too and its index is the
// largest.
const NONE: u32 = 0xffffffffu;

// S is the top-k candidate buffer, in (value, index) pairs: 8 KiB of the 16
// KiB of workgroup memory WebGPU guarantees. A power of two for the bitonic
// sort; S - WG >= k, so a round of WG appends always fits after a compaction.
const S: u32 = 1024u;

var<workgroup> cv: array<f32, S>;
var<workgroup> ci: array<u32, S>;
var<workgroup> n_cand: atomic<u32>;
var<workgroup> n_seen: u32; // n_cand copied for workgroupUniformLoad
var<workgroup> full: u32;   // 1 once k candidates are kept
var<workgroup> theta: f32;  // then: the k-th best value, the bar to enter

fn neg_inf() -> f32 {
    return bitcast<f32>(0xff800000u); // WGSL has no infinity literal
}

fn before(av: f32, ai: u32, bv: f32, bi: u32) -> bool {
    return av > bv || (av == bv && ai < bi);
}

// ---------- argmax ----------

// best_of reduces each invocation's (v, i) to the workgroup's best, in
// cv[0], ci[0]; call from uniform control flow.
fn best_of(v: f32, i: u32, lid: u32) {
    cv[lid] = v;
    ci[lid] = i;
    workgroupBarrier();
    for (var half = WG / 2u; half > 0u; half >>= 1u) {
        if (lid < half && before(cv[lid + half], ci[lid + half], cv[lid], ci[lid])) {
            cv[lid] = cv[lid + half];
            ci[lid] = ci[lid + half];
        }
        workgroupBarrier();
    }
}

@compute @workgroup_size(WG)
fn argmax_local(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let g = wid.x;
    let lo = g * p.span;
    let hi = min(p.n, lo + p.span);
    var bv = neg_inf();
    var bi = NONE;
    for (var i = lo + lid; i < hi; i += WG) {
        // before(), not >: a -inf logit must still beat the empty NONE.
        if (before(x[i], i, bv, bi)) {
            bv = x[i];
            bi = i;
        }
    }
    best_of(bv, bi, lid);
    if (lid == 0u) {
        if (p.final_out == 1u) {
            out[0] = ci[0];
        } else {
            scratch[2u * g] = ci[0];
            scratch[2u * g + 1u] = bitcast<u32>(cv[0]);
        }
    }
}

@compute @workgroup_size(WG)
fn argmax_merge(@builtin(local_invocation_index) lid: u32) {
    var bv = neg_inf();
    var bi = NONE;
    for (var g = lid; g < p.groups; g += WG) {
        let v = bitcast<f32>(scratch[2u * g + 1u]);
        let i = scratch[2u * g];
        if (before(v, i, bv, bi)) {
            bv = v;
            bi = i;
        }
    }
    best_of(bv, bi, lid);
    if (lid == 0u) {
        out[0] = ci[0];
    }
}

// ---------- top-k ----------

// sort_candidates orders cv/ci[0, m) best first with a bitonic network; m is
// a power of two <= S. Call from uniform control flow.
fn sort_candidates(m: u32, lid: u32) {
    for (var size = 2u; size <= m; size <<= 1u) {
        for (var half = size >> 1u; half > 0u; half >>= 1u) {
            for (var t = lid; t < m / 2u; t += WG) {
                let a = (t / half) * 2u * half + t % half; // bit `half` clear
                let b = a + half;
                // Blocks with (a & size) == 0 sort best first, the others
                // reversed, so each pass merges bitonic runs; at size == m
                // every block is forward.
                var swap = before(cv[b], ci[b], cv[a], ci[a]);
                if ((a & size) != 0u) {
                    swap = before(cv[a], ci[a], cv[b], ci[b]);
                }
                if (swap) {
                    let tv = cv[a];
                    let ti = ci[a];
                    cv[a] = cv[b];
                    ci[a] = ci[b];
                    cv[b] = tv;
                    ci[b] = ti;
                }
            }
            workgroupBarrier();
        }
    }
}

// compact sorts the c buffered candidates and keeps the best k. Once k are
// kept, theta (the k-th value) is the bar later elements must strictly pass:
// elements arrive in increasing index order (by span within a workgroup, by
// group in the merge, and sorted within a group's list), so a later element
// equal to theta ranks after the k-th and can never enter.
fn compact(c: u32, lid: u32) {
    var m = 1u;
    while (m < c) {
        m <<= 1u;
    }
    for (var t = c + lid; t < m; t += WG) {
        cv[t] = neg_inf();
        ci[t] = NONE;
    }
    workgroupBarrier();
    sort_candidates(m, lid);
    let kept = min(c, p.k);
    if (lid == 0u) {
        atomicStore(&n_cand, kept);
        n_seen = kept;
        if (kept == p.k) {
            full = 1u;
            theta = cv[p.k - 1u];
        }
    }
    workgroupBarrier();
}

// stream runs the elements [lo, hi) of x (pairs = false) or of the scratch
// pair list (pairs = true) through the candidate buffer, WG at a time, and
// leaves the best min(k, count) sorted in cv/ci[0, n_seen).
fn stream(lo: u32, hi: u32, pairs: bool, lid: u32) {
    if (lid == 0u) {
        atomicStore(&n_cand, 0u);
        n_seen = 0u;
        full = 0u;
        theta = neg_inf();
    }
    workgroupBarrier();
    for (var base = lo; base < hi; base += WG) {
        let e = base + lid;
        if (e < hi) {
            var v: f32;
            var i: u32;
            if (pairs) {
                i = scratch[2u * e];
                v = bitcast<f32>(scratch[2u * e + 1u]);
            } else {
                i = e;
                v = x[e];
            }
            if (i != NONE && (full == 0u || v > theta)) {
                let slot = atomicAdd(&n_cand, 1u);
                cv[slot] = v;
                ci[slot] = i;
            }
        }
        workgroupBarrier();
        if (lid == 0u) {
            n_seen = atomicLoad(&n_cand);
        }
        // Sort as soon as k candidates are in, to raise the bar early, and
        // then only when the next round might not fit: with random logits
        // few elements pass the k-th of the first round, so a span of 4096
        // typically sorts two short buffers (about 256 each), where waiting
        // for the buffer to fill would sort 1024.
        let c = workgroupUniformLoad(&n_seen);
        let f = workgroupUniformLoad(&full);
        if (c > S - WG || (f == 0u && c >= p.k)) {
            compact(c, lid);
        }
    }
    compact(workgroupUniformLoad(&n_seen), lid);
}

@compute @workgroup_size(WG)
fn topk_local(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let g = wid.x;
    let lo = g * p.span;
    stream(lo, min(p.n, lo + p.span), false, lid);
    let kept = n_seen;
    for (var r = lid; r < p.k; r += WG) {
        var v = neg_inf();
        var i = NONE;
        if (r < kept) {
            v = cv[r];
            i = ci[r];
        }
        if (p.final_out == 1u) {
            out[r] = i;
            out[p.k + r] = bitcast<u32>(v);
        } else {
            scratch[2u * (g * p.k + r)] = i;
            scratch[2u * (g * p.k + r) + 1u] = bitcast<u32>(v);
        }
    }
}

@compute @workgroup_size(WG)
fn topk_merge(@builtin(local_invocation_index) lid: u32) {
    stream(0u, p.groups * p.k, true, lid);
    // The dispatcher requires k <= n, so all k slots are real candidates.
    for (var r = lid; r < p.k; r += WG) {
        out[r] = ci[r];
        out[p.k + r] = bitcast<u32>(cv[r]);
    }
}
