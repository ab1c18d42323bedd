// Data movement between the layouts of Kokoro's text side, which mixes
// row-major token rows ([T][C], PL-BERT's, for the matmuls) and
// channels-first activations ([C][T], the LSTMs', convolutions' and norms'),
// and spreads tokens over frames. No arithmetic: every entry moves bits.
//
//   transpose:         y[j*rows + i] = x[i*cols + j]        x [rows][cols]
//   gather_columns:    y[c*n + f] = x[c*cols + idx[f]]      x [rows][cols], y [rows][n]
//                      (the alignment: token idx[f]'s column for frame f;
//                      an index past the last column reads the last one)
//   broadcast_columns: y[off + c*n + t] = x[c]              x [rows], y [rows][n] at off
//   upsample_nearest:  y[c*n + t] = x[c*cols + t / (n / cols)]
//                      (F.interpolate(mode='nearest') by the integer n / cols)
//
// One invocation per output float; the grid may wrap into y past 65535
// workgroups, so the index is gid.x + gid.y * nwg.x * WG.
//
// Constants: WG, the workgroup size.

struct Params {
    rows: u32, // channels
    cols: u32, // input columns (time steps)
    n: u32,    // output columns
    off: u32,  // first float written in y (broadcast_columns)
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> idx: array<u32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

fn flat(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return gid.x + gid.y * nwg.x * WG;
}

@compute @workgroup_size(WG)
fn transpose(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let o = flat(gid, nwg);
    if (o >= p.rows * p.cols) {
        return;
    }
    // Output-major order: consecutive invocations write consecutive floats
    // of y and read x with stride cols.
    let j = o / p.rows;
    let i = o % p.rows;
    y[o] = x[i * p.cols + j];
}

@compute @workgroup_size(WG)
fn gather_columns(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let o = flat(gid, nwg);
    if (o >= p.rows * p.n) {
        return;
    }
    let c = o / p.n;
    let f = o % p.n;
    y[o] = x[c * p.cols + min(idx[f], p.cols - 1u)];
}

@compute @workgroup_size(WG)
fn broadcast_columns(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let o = flat(gid, nwg);
    if (o >= p.rows * p.n) {
        return;
    }
    y[p.off + o] = x[o / p.n];
}

@compute @workgroup_size(WG)
fn upsample_nearest(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let o = flat(gid, nwg);
    if (o >= p.rows * p.n) {
        return;
    }
    let c = o / p.n;
    let t = o % p.n;
    y[o] = x[c * p.cols + t / (p.n / p.cols)];
}
