// Backward passes of the element-wise kernels in elementwise.wgsl: the gated
// linear units (SwiGLU, GeGLU with the tanh GELU), split and fused, and
// soft-capping. Each invocation owns one element of the forward's output; the
// grid may wrap into y past 65535 workgroups (gpu.Grid), so the linear index
// is gid.x + gid.y * num_workgroups.x * WG.
//
// Every storage binding is read_write so that one buffer may fill several
// slots (see elementwise.wgsl): the gradients may overwrite the forward's
// inputs in place, since each invocation reads the elements it later writes
// and no other. glu_fused_backward reads and writes positions g and g + ff of
// its row (gate and up), so d_gate_up may be gate_up itself, but not dy,
// whose element i another invocation's write would reach.
//
// Constants: WG, the workgroup size; ACT, the activation (0 SiLU, 1 GELU
// with the tanh approximation, 2 gpt-oss's unit), as in elementwise.wgsl.

struct Params {
    n: u32,  // elements of dy
    ff: u32, // glu_fused_backward: the width of one dy row (the gate_up row is 2 * ff)
    a: f32,  // softcap_backward: 1 / cap
    _p: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> gate: array<f32>; // softcap: y
@group(0) @binding(2) var<storage, read_write> up: array<f32>;
@group(0) @binding(3) var<storage, read_write> dy: array<f32>;
@group(0) @binding(4) var<storage, read_write> dgate: array<f32>; // softcap: dx
@group(0) @binding(5) var<storage, read_write> dup: array<f32>;

fn index(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return gid.x + gid.y * nwg.x * WG;
}

// sigmoid_pair returns (sigmoid(z), sigmoid(z) * (1 - sigmoid(z))) for any
// finite z. The exponential only ever sees -|z| <= 0, so it lies in (0, 1]
// and neither 1 + e nor e / (1 + e)^2 can overflow: the textbook
// 1 / (1 + e^-z) makes e^-z infinite past z = -88, and s (1 - s) then loses
// everything to the cancellation in 1 - s long before that. s (1 - s) is
// even in z, so the same e serves both signs.
fn sigmoid_pair(z: f32) -> vec2<f32> {
    let e = exp(-abs(z));
    let r = 1.0 / (1.0 + e);
    let s = select(e * r, r, z >= 0.0);
    return vec2<f32>(s, e * r * r);
}

// act_and_grad returns (act(v), act'(v)).
//
// SiLU: v s with s = sigmoid(v); its derivative s + v s (1 - s).
// GELU (tanh form): v S with S = sigmoid(2u), u = sqrt(2/pi) (v + 0.044715
// v^3), the same function as 0.5 v (1 + tanh u) (see elementwise.wgsl); its
// derivative S + v S (1 - S) 2u', u' = sqrt(2/pi) (1 + 3 * 0.044715 v^2).
// Past |v| ~ 10 the second term underflows to 0 and S is 0 or 1: no
// infinity or NaN for any finite v below ~1e12, where v^3 overflows.
fn act_and_grad(v: f32) -> vec2<f32> {
    if (ACT == 1u) {
        let u = 0.7978845608028654 * (v + 0.044715 * v * v * v);
        let du = 0.7978845608028654 * (1.0 + 0.134145 * v * v);
        let sp = sigmoid_pair(2.0 * u);
        return vec2<f32>(v * sp.x, sp.x + v * sp.y * 2.0 * du);
    }
    let sp = sigmoid_pair(v);
    return vec2<f32>(v * sp.x, sp.x + v * sp.y);
}

// glu_grads is (d_gate, d_up) of out = act(g) * u for the gradient d of
// out: (d u act'(g), d act(g)). With ACT 2, gpt-oss's unit (elementwise's
// glu_oai): with x = min(g, 7), y = clamp(u, -7, 7) and s = sigmoid(1.702 x),
// out = x s (y + 1), so d_gate = d (y + 1) (s + 1.702 x s (1 - s)) where
// g <= 7 and 0 above, d_up = d x s where -7 <= u <= 7 and 0 outside (a
// clamp passes the gradient at its bounds, as torch's does).
fn glu_grads(g: f32, u: f32, d: f32) -> vec2<f32> {
    if (ACT == 2u) {
        let x = min(g, 7.0);
        let y = clamp(u, -7.0, 7.0);
        let sp = sigmoid_pair(1.702 * x);
        let dg = select(0.0, d * (y + 1.0) * (sp.x + 1.702 * x * sp.y), g <= 7.0);
        let du = select(0.0, d * x * sp.x, u >= -7.0 && u <= 7.0);
        return vec2<f32>(dg, du);
    }
    let ag = act_and_grad(g);
    return vec2<f32>(d * u * ag.y, d * ag.x);
}

// out = act(gate) * up: d_gate = dy * up * act'(gate), d_up = dy * act(gate)
// (glu_grads).
@compute @workgroup_size(WG)
fn glu_backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = index(gid, nwg);
    if (i >= p.n) {
        return;
    }
    let gr = glu_grads(gate[i], up[i], dy[i]);
    dgate[i] = gr.x;
    dup[i] = gr.y;
}

// The same for gate and up fused in gate, rows of [gate | up] (2 * ff
// floats), dy rows x ff; the gradient goes to dgate in the fused layout.
@compute @workgroup_size(WG)
fn glu_fused_backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = index(gid, nwg);
    if (i >= p.n) {
        return;
    }
    let r = i / p.ff;
    let g = i + r * p.ff; // r * 2ff + (i - r * ff)
    let gr = glu_grads(gate[g], gate[g + p.ff], dy[i]);
    dgate[g] = gr.x;
    dgate[g + p.ff] = gr.y;
}

// y = c tanh(x / c): dx = dy (1 - tanh^2) = dy (1 - (y / c)^2), from the
// forward's output y (in gate) so that a cap applied in place still has its
// backward. |y| may exceed c by an ulp of rounding; the clamp keeps the
// factor at its true lower bound 0 rather than a negative -4e-7.
@compute @workgroup_size(WG)
fn softcap_backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = index(gid, nwg);
    if (i >= p.n) {
        return;
    }
    let t = gate[i] * p.a;
    dgate[i] = dy[i] * max(1.0 - t * t, 0.0);
}
