// Backward of RMSNorm (norm.wgsl), y = x * r * gain with
// r = 1 / sqrt(mean(x^2) + eps), gain = w, 1 + w (Gemma) or 1, per row of
// dim floats (a residual-stream row, or one head of a per-head QK-norm).
// With x^ = x * r:
//
//   dx = r * (gain * dy - x^ * mean(gain * dy * x^))
//   dw = sum over rows of dy * x^        (the same for w and for 1 + w)
//
// rmsnorm_backward: one workgroup per row, as the forward: the two row sums
// (x^2 and gain * dy * x) are reduced together through shared memory,
// pairwise, then each invocation writes its strided floats. The grid may wrap
// into y past 65535 rows (gpu.Grid with one "thread" per row).
//
// rmsnorm_rstd + rmsnorm_weight_partial + rmsnorm_weight_grad: the first
// writes each row's r to the scratch buffer rstd (one workgroup per row),
// the second sums dy * x * r down blocks of ROW_BLOCK rows per column (an
// invocation per column and block, neighbours on neighbouring columns, so
// reads coalesce), the third adds each column's blocks in order: the same
// bits every run, with no atomics. scratch: rows floats of r, then
// ceil(rows / ROW_BLOCK) x dim partials.
//
// Every storage binding is read_write so one buffer may fill several slots
// (see norm.wgsl): dx may be x or dy, since an invocation reads the row's
// x[j], dy[j] (and dx[j] when accumulating) for the sums, which finish
// behind a barrier, and again right before it writes dx[j] itself.
//
// Constants: WG, the workgroup size, a power of two.

//!include norm_common

const FLAG_ACCUMULATE: u32 = 4u; // out += gradient instead of out = gradient

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> dy: array<f32>;
@group(0) @binding(4) var<storage, read_write> rstd: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>; // dx, or dw

// ROW_BLOCK is the rows one invocation of rmsnorm_weight_partial sums.
// Lavapipe (Mesa's gallivm) ends an invocation's loops after 65535
// iterations in all (its loop limiter, LP_MAX_TGSI_LOOP_ITERATIONS, is one
// counter per invocation), which silently dropped the rows past 65535 of a
// single 70000-row loop; splitting the rows also gives a 128-column QK-norm
// over thousands of rows more than 128 invocations.
const ROW_BLOCK: u32 = 4096u;

//!include reduce_common

// store writes v to out[i], or adds it when accumulating.
fn store(i: u32, v: f32) {
    if ((p.flags & FLAG_ACCUMULATE) != 0u) {
        out[i] += v;
    } else {
        out[i] = v;
    }
}

@compute @workgroup_size(WG)
fn rmsnorm_backward(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let row = wid.x + wid.y * nwg.x;
    if (row >= p.rows) {
        return; // uniform: the whole workgroup leaves together
    }
    let base = row * p.dim;
    var s = vec2<f32>(0.0);
    for (var j = lid; j < p.dim; j += WG) {
        let v = x[base + j];
        s += vec2<f32>(v * v, gain(j) * dy[base + j] * v);
    }
    let sums = workgroup_sum2(s, lid);
    let r = inverseSqrt(sums.x / f32(p.dim) + p.eps);
    // x^ * mean(gain dy x^) = x * k, k = r^2 * sum(gain dy x) / dim.
    let k = r * r * sums.y / f32(p.dim);
    for (var j = lid; j < p.dim; j += WG) {
        store(base + j, r * (gain(j) * dy[base + j] - x[base + j] * k));
    }
}

@compute @workgroup_size(WG)
fn rmsnorm_rstd(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let row = wid.x + wid.y * nwg.x;
    if (row >= p.rows) {
        return;
    }
    let base = row * p.dim;
    var ss = 0.0;
    for (var j = lid; j < p.dim; j += WG) {
        let v = x[base + j];
        ss += v * v;
    }
    let total = workgroup_sum(ss, lid);
    if (lid == 0u) {
        rstd[row] = inverseSqrt(total / f32(p.dim) + p.eps);
    }
}

// rmsnorm_weight_partial: invocation (j, c) sums dy * x * r down rows
// [c * ROW_BLOCK, (c + 1) * ROW_BLOCK) of column j into
// scratch[rows + c * dim + j]; grid x covers the columns (gid.x), grid y the
// row blocks (wid.y).
@compute @workgroup_size(WG)
fn rmsnorm_weight_partial(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(workgroup_id) wid: vec3<u32>,
) {
    let j = gid.x;
    if (j >= p.dim) {
        return;
    }
    let r0 = wid.y * ROW_BLOCK;
    let r1 = min(r0 + ROW_BLOCK, p.rows);
    var s = 0.0;
    for (var row = r0; row < r1; row++) {
        let i = row * p.dim + j;
        s += dy[i] * x[i] * rstd[row];
    }
    rstd[p.rows + wid.y * p.dim + j] = s;
}

// rmsnorm_weight_grad: column j adds its row blocks' partials in order.
@compute @workgroup_size(WG)
fn rmsnorm_weight_grad(@builtin(global_invocation_id) gid: vec3<u32>) {
    let j = gid.x;
    if (j >= p.dim) {
        return;
    }
    let blocks = (p.rows + ROW_BLOCK - 1u) / ROW_BLOCK;
    var s = 0.0;
    for (var c = 0u; c < blocks; c++) {
        s += rstd[p.rows + c * p.dim + j];
    }
    store(j, s);
}
