// Row softmax, in place: y[r, :] = exp(y[r, :] - max) / sum(exp(y[r, :] - max)).
//
// One workgroup per row; the grid may wrap into y past 65535 rows (gpu.Grid
// with one "thread" per row), so the row is wid.x + wid.y * nwg.x. Rows are
// as long as Gemma's 262144-token vocabulary, so each invocation loops over
// the row with stride WG and the workgroup combines the partial results in
// shared memory; nothing is sized by the row length.
//
// The kernel is in place only: a family has one bind-group layout, and WebGPU
// forbids binding one buffer both read-only and writable in a dispatch, so a
// single read_write binding serves both uses (ops.Softmax copies x into y
// first for the out-of-place form).
//
// Constants: WG, the workgroup size, a power of two.

struct Params {
    rows: u32,
    n: u32,
    _p0: u32,
    _p1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;

// U is how many loads each invocation has in flight in the main loops.
const U: u32 = 8u;

//!include reduce_common

@compute @workgroup_size(WG)
fn softmax(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let row = wid.x + wid.y * nwg.x;
    if (row >= p.rows) {
        return; // uniform: the whole workgroup leaves together
    }
    let base = row * p.n;

    // Pass 1: an online (max, sum of exp) per lane, so the row is read twice
    // in all instead of three times (max, sum, normalise). Both passes issue
    // U loads before using any: GPUs issue in order, so a loop that uses
    // each load at once waits out a memory latency per element, and with a
    // single row a single workgroup has nothing else to run meanwhile (a
    // 262144-wide row took 280 µs on an H200 so).
    var m = LOWEST;
    var s = 0.0;
    var i = lid;
    for (; i + (U - 1u) * WG < p.n; i += U * WG) {
        var u: array<f32, U>;
        for (var j = 0u; j < U; j++) {
            u[j] = y[base + i + j * WG];
        }
        var mu = u[0];
        for (var j = 1u; j < U; j++) {
            mu = max(mu, u[j]);
        }
        if (mu > m) {
            s *= exp(m - mu);
            m = mu;
        }
        for (var j = 0u; j < U; j++) {
            s += exp(u[j] - m);
        }
    }
    for (; i < p.n; i += WG) {
        let v = y[base + i];
        if (v > m) {
            s = s * exp(m - v) + 1.0;
            m = v;
        } else {
            s += exp(v - m);
        }
    }
    let st = workgroup_max_sumexp(m, s, lid);
    let row_max = st.x;
    let inv_sum = 1.0 / st.y;

    // Pass 2: normalise, U loads ahead of their stores.
    i = lid;
    for (; i + (U - 1u) * WG < p.n; i += U * WG) {
        var u: array<f32, U>;
        for (var j = 0u; j < U; j++) {
            u[j] = y[base + i + j * WG];
        }
        for (var j = 0u; j < U; j++) {
            y[base + i + j * WG] = exp(u[j] - row_max) * inv_sum;
        }
    }
    for (; i < p.n; i += WG) {
        y[base + i] = exp(y[base + i] - row_max) * inv_sum;
    }
}
