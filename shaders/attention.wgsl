// Scaled dot-product attention of query tokens over a KV history, causal
// (or, with FLAG_BIDIRECTIONAL, unmasked),
// with grouped-query heads, an optional sliding window and an optional
// logit softcap (Gemma 2) and optional attention sinks (gpt-oss). Layouts,
// all f32, row-major:
//
//   q     [n_q, n_heads, head_dim]        query t sits at position pos0 + t
//   k,v   [n_ctx_slots, n_kv_heads, head_dim]   key/value of position j at slot j
//   sinks [n_heads]                       read only with FLAG_SINKS
//   out   [n_q, n_heads, head_dim]
//
// attention: one workgroup per (head, query token), grid (n_heads, n_q). The
// keys a query sees, [j0, j1), are walked in tiles of TILE = 64 and folded
// into an online softmax (running max, running sum, rescaled accumulator).
// The WG invocations form G = WG / 64 groups of 64:
//   scores: G invocations per key (threads split over keys, then over the
//     head's dims d = part, part + G, ..., so neighbours read neighbouring
//     floats of one key row), partial dots summed through shared memory;
//   values: group g takes the tile's keys g, g + G, ... and each of its 64
//     lanes owns the dims lane, lane + 64, ... (threads split over keys, then
//     over head_dim: the V reads of one key are contiguous across a group).
//   The G partial accumulators are summed through shared memory at the end.
// G > 1 keeps G times more loads in flight per workgroup than one thread per
// key would: with 64 invocations the H200 ran at 260 GB/s of KV cache, far
// from its 4 TB/s, as each invocation waited on one V load per key in turn.
// Shared memory is sized by WG and MAX_HD, never by the KV length, so
// histories of any length fit: at WG 256 and MAX_HD 512, 11.5 KiB, within
// WebGPU's 16 KiB default.
//
// attention_split + attention_combine: split-K ("flash decoding"). A decode
// step has one query token, so the grid above is only n_heads workgroups (8
// for Gemma 2 2B) on a GPU with a hundred or more compute units. The split
// entry adds grid z = n_split: workgroup (h, t, s) folds keys
// [j0 + s*chunk, j0 + (s+1)*chunk) and writes its partial (max, sum, acc)
// to scratch; the combine entry, grid (n_heads, n_q), rescales the partials
// to their common max and normalises. A sink is a term of the whole row's
// denominator, so only the combine folds it in, once: the partials leave it
// out.
//
// scratch: [n_q, n_heads, n_split] partials of head_dim + 2 floats each:
// m, l, acc[0, head_dim).
//
// Constants: WG, the workgroup size: 64, 128 or 256; MAX_HD, the widest
// head it takes, a multiple of 64 (ops compiles 256 for heads up to 256,
// Gemma 2 and 3's, and 512 for wider ones, Gemma 4's global layers: the
// accumulators an invocation keeps grow with it).

//!include attention_common

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> sinks: array<f32>;
@group(0) @binding(5) var<storage, read_write> scratch: array<f32>;
@group(0) @binding(6) var<storage, read_write> out: array<f32>;

// TILE keys are scored per step, G invocations per key; in the value phase
// the G groups of TILE lanes each own PER head slots per lane.
const TILE: u32 = 64u;
const G: u32 = WG / TILE;
const PER: u32 = MAX_HD / TILE;
const ACC_N: u32 = WG * PER; // naga takes no expression as an array length

var<workgroup> q_s: array<f32, MAX_HD>;
var<workgroup> dot_s: array<f32, WG>; // partial dots, key r's at [r*G, r*G + G)
var<workgroup> s_s: array<f32, TILE>; // the tile's scores
var<workgroup> p_s: array<f32, TILE>; // the tile's exp(score - running max)
var<workgroup> acc_s: array<f32, ACC_N>; // the groups' accumulators, summed at the end

// The online softmax state of one invocation: the running max of the scores
// seen and the running sum of exp(score - m) (the same in every invocation),
// and this invocation's head slots of its group's exp-weighted sum of values.
var<private> m: f32;
var<private> l: f32;
var<private> acc: array<f32, PER>;

// load_q stages query (t, h) in shared memory.
fn load_q(qbase: u32, lid: u32) {
    for (var d = lid; d < p.head_dim; d += WG) {
        q_s[d] = q[qbase + d];
    }
    workgroupBarrier();
}

// attend folds keys [lo, hi) of KV head kvh into m, l and, summed over the
// groups, the acc of the first group's invocations (lid < TILE). Call from
// uniform control flow (lo and hi uniform) after load_q.
fn attend(lo: u32, hi: u32, kvh: u32, lid: u32) {
    let hd = p.head_dim;
    let stride = p.n_kv_heads * hd;
    let kvoff = kvh * hd;
    let key = lid / G;  // scoring: this invocation's key in the tile
    let part = lid % G; // ... and its slice of the dims
    let grp = lid / TILE;  // values: this invocation's group
    let lane = lid % TILE; // ... and its lane
    m = LOWEST;
    l = 0.0;
    for (var c = 0u; c < PER; c++) {
        acc[c] = 0.0;
    }
    for (var tile = lo; tile < hi; tile += TILE) {
        let cnt = min(TILE, hi - tile);
        var dot = 0.0;
        if (key < cnt) {
            let kb = (tile + key) * stride + kvoff;
            for (var d = part; d < hd; d += G) {
                dot += q_s[d] * k[kb + d];
            }
        }
        dot_s[lid] = dot;
        workgroupBarrier();

        if (lid < TILE) {
            var s = LOWEST;
            if (lid < cnt) {
                var sum = 0.0;
                for (var g = 0u; g < G; g++) {
                    sum += dot_s[lid * G + g];
                }
                s = sum * p.scale;
                if (p.softcap > 0.0) {
                    s = p.softcap * tanh_stable(s / p.softcap);
                }
            }
            s_s[lid] = s;
        }
        workgroupBarrier();

        // Every invocation scans the tile's max itself: broadcast reads of
        // shared memory cost less than a tree reduction's log2(TILE) barriers.
        var tmax = LOWEST;
        for (var r = 0u; r < cnt; r++) {
            tmax = max(tmax, s_s[r]);
        }
        let m_new = max(m, tmax);
        let alpha = exp(m - m_new);
        if (lid < TILE) {
            p_s[lid] = exp(s_s[lid] - m_new);
        }
        workgroupBarrier();

        l *= alpha;
        for (var r = 0u; r < cnt; r++) {
            l += p_s[r];
        }
        for (var c = 0u; c < PER; c++) {
            acc[c] *= alpha;
        }
        for (var r = grp; r < cnt; r += G) {
            let pr = p_s[r];
            let vb = (tile + r) * stride + kvoff;
            for (var c = 0u; c < PER; c++) {
                let d = lane + c * TILE;
                if (d < hd) {
                    acc[c] += pr * v[vb + d];
                }
            }
        }
        m = m_new;
        // No barrier needed before the next tile: dot_s and s_s were last
        // read before the barrier above, and p_s is rewritten only after the
        // next tile's second barrier, which every invocation reaches only
        // once it has finished reading this one.
    }

    if (G > 1u) {
        for (var c = 0u; c < PER; c++) {
            acc_s[lid * PER + c] = acc[c];
        }
        workgroupBarrier();
        if (lid < TILE) {
            for (var g = 1u; g < G; g++) {
                for (var c = 0u; c < PER; c++) {
                    acc[c] += acc_s[(g * TILE + lid) * PER + c];
                }
            }
        }
    }
}

@compute @workgroup_size(WG)
fn attention(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let h = wid.x;
    let t = wid.y;
    let qbase = (t * p.n_heads + h) * p.head_dim;
    load_q(qbase, lid);
    let js = visible(t);
    attend(js.x, js.y, h / p.group, lid);
    // js.y > js.x always (the dispatcher requires kv_len > every query
    // position, so key i itself is visible): l >= 1.
    if (lid < TILE) {
        var inv = 1.0 / l;
        if ((p.flags & FLAG_SINKS) != 0u) {
            let f = sink_fold(h, m, l);
            inv = f.x / f.y;
        }
        for (var c = 0u; c < PER; c++) {
            let d = lid + c * TILE;
            if (d < p.head_dim) {
                out[qbase + d] = acc[c] * inv;
            }
        }
    }
}

@compute @workgroup_size(WG)
fn attention_split(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let h = wid.x;
    let t = wid.y;
    let sp = wid.z;
    load_q((t * p.n_heads + h) * p.head_dim, lid);
    let js = visible(t);
    // A query nearer the start than others in a prefill batch sees fewer
    // keys, so its last splits may be empty: m stays LOWEST and l 0, which
    // the combine weighs by exp(LOWEST - max) = 0.
    let lo = min(js.x + sp * p.chunk, js.y);
    attend(lo, min(lo + p.chunk, js.y), h / p.group, lid);
    let base = ((t * p.n_heads + h) * p.n_split + sp) * (p.head_dim + 2u);
    if (lid == 0u) {
        scratch[base] = m;
        scratch[base + 1u] = l;
    }
    if (lid < TILE) {
        for (var c = 0u; c < PER; c++) {
            let d = lid + c * TILE;
            if (d < p.head_dim) {
                scratch[base + 2u + d] = acc[c];
            }
        }
    }
}

@compute @workgroup_size(WG)
fn attention_combine(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let h = wid.x;
    let t = wid.y;
    let hd = p.head_dim;
    let first = (t * p.n_heads + h) * p.n_split;
    var mm = LOWEST;
    for (var sp = 0u; sp < p.n_split; sp++) {
        mm = max(mm, scratch[(first + sp) * (hd + 2u)]);
    }
    var ll = 0.0;
    for (var sp = 0u; sp < p.n_split; sp++) {
        let base = (first + sp) * (hd + 2u);
        ll += exp(scratch[base] - mm) * scratch[base + 1u];
    }
    var inv = 1.0 / ll;
    if ((p.flags & FLAG_SINKS) != 0u) {
        let f = sink_fold(h, mm, ll);
        inv = f.x / f.y;
    }
    for (var d = lid; d < hd; d += WG) {
        var o = 0.0;
        for (var sp = 0u; sp < p.n_split; sp++) {
            let base = (first + sp) * (hd + 2u);
            o += exp(scratch[base] - mm) * scratch[base + 2u + d];
        }
        out[(t * p.n_heads + h) * hd + d] = o * inv;
    }
}
