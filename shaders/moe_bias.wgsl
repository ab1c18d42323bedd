// Each expert slot's bias (gpt-oss's experts have biases on gate, up and
// down): y[s·stride + offset + i] += bias[ids[s]·width + i] for the p.slots
// slots' rows of p.width floats, each slot's expert's row of the stacked
// biases. One invocation per float; the grid may wrap into y. An expert id
// past the biases (never from moe_route) adds nothing. Constants: WG, the
// workgroup size.

struct Params {
    slots: u32,
    width: u32,
    stride: u32,
    offset: u32,
    experts: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> bias: array<f32>;
@group(0) @binding(2) var<storage, read> ids: array<u32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(WG)
fn moe_add_bias(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if (i >= p.slots * p.width) {
        return;
    }
    let s = i / p.width;
    let c = i % p.width;
    let e = ids[s];
    if (e >= p.experts) {
        return;
    }
    let yi = s * p.stride + p.offset + c;
    y[yi] = y[yi] + bias[e * p.width + c];
}
