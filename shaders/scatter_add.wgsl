// Scatter-add of rows without atomics: dst[rows[u]] += scale * sum of
// src[perm[i]] for i in [starts[u], starts[u+1]). The host sorts the token
// positions by destination row (engine/ops ScatterPlan), so every
// destination row has one segment and one invocation per (segment, column)
// owns its output: no two invocations write one float, and the sum runs in
// token order, the order of the CPU reference (ref.ScatterAddRows), so both
// round alike. WGSL has atomics on u32 and i32 only; a float atomic add would
// need a compare-exchange loop and give an order-dependent sum.
//
// The plan is one u32 array: starts (segments + 1 entries), then rows
// (segments), then perm (one per source row).
//
// Constants: WG, the workgroup size.

struct Params {
    segments: u32,
    cols: u32,
    scale: f32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read> plan: array<u32>;
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(WG)
fn scatter_add_rows(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let e = gid.x + gid.y * nwg.x * WG;
    if (e >= p.segments * p.cols) {
        return;
    }
    let u = e / p.cols;
    let j = e % p.cols;
    let perm0 = 2u * p.segments + 1u;
    var s = 0.0;
    for (var i = plan[u]; i < plan[u + 1u]; i++) {
        s += src[plan[perm0 + i] * p.cols + j];
    }
    let o = plan[p.segments + 1u + u] * p.cols + j;
    dst[o] = dst[o] + s * p.scale;
}
