// Element-wise kernels over flat f32 vectors. Each invocation handles one
// element; the grid may wrap into y past 65535 workgroups (gpu.Grid), so the
// linear index is gid.x + gid.y * num_workgroups.x * WG.
//
// Constants: WG, the workgroup size.

struct Params {
    n: u32,
    a: f32,
    b: f32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> y: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

fn index(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return gid.x + gid.y * nwg.x * WG;
}

// out = x + y (the residual connection).
@compute @workgroup_size(WG)
fn add(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = index(gid, nwg);
    if (i >= p.n) {
        return;
    }
    out[i] = x[i] + y[i];
}
