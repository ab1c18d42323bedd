// Cross-entropy of next-token logits over the vocabulary, with prompt
// masking: the loss of LoRA fine-tuning and its gradient, for one row tile of
// the batch (the caller loops over tiles: a T×V f32 logits buffer passes
// lavapipe's 128 MiB binding limit at T = 128 rows of a 262144-token
// vocabulary, so the head's logits are produced and consumed a tile at a
// time).
//
// Row r of the tile has target t = targets[p.target_offset + r]:
//   loss[p.loss_offset + r] = logsumexp(z) − z[t]   (0 when t < 0: masked)
// and the `backward` entry overwrites the row with
//   dL/dlogit_i = (softmax(z)_i − [i = t]) · p.scale · dz_i/dlogit_i
// (all zeros when masked), where z = logits, or with a final soft-cap c > 0
// (Gemma 2), z = c·tanh(logit/c) and dz/dlogit = 1 − tanh². p.scale is
// 1/(unmasked tokens in the whole batch), so summing loss·scale over all
// tiles gives the mean loss whose gradient this is. A target past the
// vocabulary is a caller's bug: its loss is NaN (so it shows) and its
// gradient zero.
//
// One workgroup per row; the grid may wrap into y past 65535 rows
// (gpu.Grid with one "thread" per row). Pass 1 keeps an online (max, sum of
// exp) per lane, so the row is read once for the loss; the lanes combine in
// shared memory. The backward pass reads the row a second time and writes
// it. Nothing is sized by the row length.
//
// Constants: WG, the workgroup size, a power of two.

struct Params {
    rows: u32,          // rows in this tile
    n: u32,             // vocabulary size: floats per row
    target_offset: u32, // index in targets of the tile's first row
    loss_offset: u32,   // index in loss of the tile's first row
    scale: f32,         // gradient scale
    cap: f32,           // final soft-cap; 0: none
    _p0: u32,
    _p1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> logits: array<f32>;
@group(0) @binding(2) var<storage, read> targets: array<i32>;
@group(0) @binding(3) var<storage, read_write> loss: array<f32>;

//!include reduce_common

var<workgroup> tgt: i32;

// target_of reads the row's target through workgroup memory: every lane
// would read the same word, but WGSL counts a storage read as non-uniform,
// and the branches on the target precede barriers, which must be reached in
// uniform control flow.
fn target_of(lid: u32, row: u32) -> i32 {
    if (lid == 0u) {
        tgt = targets[p.target_offset + row];
    }
    return workgroupUniformLoad(&tgt);
}

//!include tanh_common

// sech2 is 1 − tanh²(z), the soft-cap's derivative. Past |z| = 0.25 it is
// 4e/(1+e)² with e = exp(−2|z|): 1 − tanh² would cancel to a few ulp of 1 as
// tanh nears ±1 (a logit of 80 under Gemma 2's cap of 30 keeps only 0.02).
fn sech2(z: f32) -> f32 {
    let e = exp(-2.0 * abs(z));
    let th = tanh_safe(z);
    return select(4.0 * e / ((1.0 + e) * (1.0 + e)), 1.0 - th * th, abs(z) < 0.25);
}

// capped is the logit the softmax sees.
fn capped(v: f32) -> f32 {
    if (p.cap > 0.0) {
        return p.cap * tanh_safe(v / p.cap);
    }
    return v;
}

// row_stats walks row `base` and returns (max, Σ exp(z − max)) over the
// whole workgroup; every invocation gets the same values.
fn row_stats(lid: u32, base: u32) -> vec2<f32> {
    var m = LOWEST;
    var s = 0.0;
    for (var i = lid; i < p.n; i += WG) {
        let v = capped(logits[base + i]);
        if (v > m) {
            s = s * exp(m - v) + 1.0;
            m = v;
        } else {
            s += exp(v - m);
        }
    }
    return workgroup_max_sumexp(m, s, lid);
}

// The row of this workgroup, or p.rows when past the tile.
fn row_of(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return min(wid.x + wid.y * nwg.x, p.rows);
}

// store_loss writes the row's loss from its stats (thread 0 only).
fn store_loss(row: u32, base: u32, t: i32, st: vec2<f32>) {
    var l = 0.0;
    if (u32(t) >= p.n) {
        l = bitcast<f32>(0x7fc00000u); // NaN: a target past the vocabulary
    } else {
        l = st.x + log(st.y) - capped(logits[base + u32(t)]);
    }
    loss[p.loss_offset + row] = l;
}

@compute @workgroup_size(WG)
fn forward(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let row = row_of(wid, nwg);
    if (row >= p.rows) {
        return; // uniform: the whole workgroup leaves together
    }
    let t = target_of(lid, row);
    if (t < 0) {
        if (lid == 0u) {
            loss[p.loss_offset + row] = 0.0;
        }
        return;
    }
    let base = row * p.n;
    let st = row_stats(lid, base);
    if (lid == 0u) {
        store_loss(row, base, t, st);
    }
}

@compute @workgroup_size(WG)
fn backward(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let row = row_of(wid, nwg);
    if (row >= p.rows) {
        return;
    }
    let base = row * p.n;
    let t = target_of(lid, row);
    if (t < 0 || u32(t) >= p.n) {
        if (lid == 0u) {
            loss[p.loss_offset + row] = select(bitcast<f32>(0x7fc00000u), 0.0, t < 0);
        }
        for (var i = lid; i < p.n; i += WG) {
            logits[base + i] = 0.0;
        }
        return;
    }
    let st = row_stats(lid, base);
    if (lid == 0u) {
        store_loss(row, base, t, st);
    }
    // Lane 0 has just read the target logit; no lane overwrites the row
    // before that read is done.
    workgroupBarrier();
    let inv = p.scale / st.y;
    for (var i = lid; i < p.n; i += WG) {
        let v = logits[base + i];
        var g = 0.0;
        if (p.cap > 0.0) {
            let u = v / p.cap;
            g = exp(p.cap * tanh_safe(u) - st.x) * inv;
            if (i == u32(t)) {
                g -= p.scale;
            }
            g *= sech2(u);
        } else {
            g = exp(v - st.x) * inv;
            if (i == u32(t)) {
                g -= p.scale;
            }
        }
        logits[base + i] = g;
    }
}
