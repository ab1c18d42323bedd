// The end of a mixture-of-experts layer: each token's output is its chosen
// experts' outputs weighted by the router,
//   out[t, i] (+)= scale · Σ_k w[t, k] · y[t·used + k, i]
// the slots summed in order k = 0, 1, … (the CPU reference's order). y
// holds the tokens × used slots' rows of p.dim floats, w the router's
// weights [tokens, used]. With flags bit 0 the sum is added to out (the
// residual stream) instead of stored; with bit 1 the weights are 1 (a
// backward summing the gradients of the slots' shared input).
//
// One invocation per output float; the grid may wrap into y. Constants:
// WG, the workgroup size.

struct Params {
    tokens: u32,
    used: u32,
    dim: u32,
    flags: u32,
    scale: f32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> y: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(WG)
fn moe_combine(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if (i >= p.tokens * p.dim) {
        return;
    }
    let t = i / p.dim;
    let c = i % p.dim;
    var s = 0.0;
    for (var k = 0u; k < p.used; k++) {
        let slot = t * p.used + k;
        if ((p.flags & 2u) != 0u) {
            s += y[slot * p.dim + c];
        } else {
            s += w[slot] * y[slot * p.dim + c];
        }
    }
    s *= p.scale;
    if ((p.flags & 1u) != 0u) {
        out[i] += s;
    } else {
        out[i] = s;
    }
}
