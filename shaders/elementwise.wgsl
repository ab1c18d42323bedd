// Element-wise kernels over flat f32 vectors: the residual add, scaling,
// soft-capping, activations and gated linear units. Each invocation handles
// one output element; the grid may wrap into y past 65535 workgroups
// (gpu.Grid), so the linear index is gid.x + gid.y * num_workgroups.x * WG.
//
// Every storage binding is read_write so that one buffer may fill several
// slots of a dispatch: WebGPU refuses a buffer bound both read-only and
// writable, but allows it in several writable bindings. That is how the
// in-place forms work (out bound to the same buffer as x or y) and how an
// entry that needs fewer buffers fills the slots it leaves unused. Aliasing is
// race-free because each invocation reads its own element(s) before writing
// its own element, and no invocation reads an element another one writes
// (except in glu_fused, whose dispatcher refuses out == x).
//
// Constants: WG, the workgroup size; ACT, the activation of `act`, `glu` and
// `glu_fused` (0 SiLU, 1 GELU with the tanh approximation, 2 gpt-oss's
// glu_oai for the two GLU entries); the other entries
// ignore it but every spec of the family declares it.

struct Params {
    n: u32,  // output elements
    ff: u32, // glu_fused: the width of one output row (the input row is 2 * ff); add_bias, shift_scale: the row length
    a: f32,  // scale: the factor; softcap: the cap; clamp_range: the lower bound
    b: f32,  // softcap: 1 / cap; clamp_range: the upper bound
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

fn index(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return gid.x + gid.y * nwg.x * WG;
}

//!include tanh_common
//!include glu_common

fn activate(v: f32) -> f32 {
    if (ACT == 1u) {
        return gelu(v);
    }
    return silu(v);
}

// gated is a gated unit of gate g and up u: act(g)·u, or gpt-oss's
// glu_oai(g, u) with ACT 2.
fn gated(g: f32, u: f32) -> f32 {
    if (ACT == 2u) {
        return glu_oai(g, u);
    }
    return activate(g) * u;
}

// out = x + y (the residual connection; out may be x for x += y).
@compute @workgroup_size(WG)
fn add(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = index(gid, nwg);
    if (i >= p.n) {
        return;
    }
    out[i] = x[i] + y[i];
}

// out = x + y[i % ff]: a bias of ff floats added to every row of x (Qwen 2's
// q, k and v projections, for one token or a prefill batch).
@compute @workgroup_size(WG)
fn add_bias(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = index(gid, nwg);
    if (i >= p.n) {
        return;
    }
    out[i] = x[i] + y[i % p.ff];
}

// out = x * a.
@compute @workgroup_size(WG)
fn scale(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = index(gid, nwg);
    if (i >= p.n) {
        return;
    }
    out[i] = x[i] * p.a;
}

// out = min(max(x, a), b): Gemma 4's vision tower bounds the input and the
// output of each of its products. max then min, as torch.clamp: a NaN stays
// NaN on both sides of the bounds only where the backend's max and min
// propagate it, which WGSL leaves open; no finite input differs.
@compute @workgroup_size(WG)
fn clamp_range(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = index(gid, nwg);
    if (i >= p.n) {
        return;
    }
    out[i] = min(max(x[i], p.a), p.b);
}

// out = (x + y[c]) * y[ff + c] for column c = i % ff: a per-column shift
// and scale, y holding the ff shifts then the ff scales (Gemma 4's vision
// standardisation, (x - bias) * scale, with the shifts negated).
@compute @workgroup_size(WG)
fn shift_scale(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = index(gid, nwg);
    if (i >= p.n) {
        return;
    }
    let c = i % p.ff;
    out[i] = (x[i] + y[c]) * y[p.ff + c];
}

// out = a * tanh(x / a) (Gemma 2's logit and attention soft-capping).
@compute @workgroup_size(WG)
fn softcap(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = index(gid, nwg);
    if (i >= p.n) {
        return;
    }
    out[i] = p.a * tanh_safe(x[i] * p.b);
}

// out = act(x).
@compute @workgroup_size(WG)
fn act(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = index(gid, nwg);
    if (i >= p.n) {
        return;
    }
    out[i] = activate(x[i]);
}

// out = act(gate) * up with gate in x and up in y (GeGLU, SwiGLU).
@compute @workgroup_size(WG)
fn glu(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = index(gid, nwg);
    if (i >= p.n) {
        return;
    }
    out[i] = gated(x[i], y[i]);
}

// The same with gate and up fused in x, each row [gate | up] of 2 * ff
// (Phi-3's gate_up projection); out is rows x ff.
@compute @workgroup_size(WG)
fn glu_fused(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = index(gid, nwg);
    if (i >= p.n) {
        return;
    }
    let r = i / p.ff;
    let g = i + r * p.ff; // r * 2ff + (i - r * ff)
    out[i] = gated(x[g], x[g + p.ff]);
}
