// Element-wise activations of the Kokoro / iSTFTNet vocoder over flat f32
// vectors: Snake with a per-channel alpha on [channels][time] activations,
// LeakyReLU, tanh, sin and exp. One invocation per element; the grid may
// wrap into y past 65535 workgroups (gpu.Grid).
//
// Bindings are read_write so that y may be x (in place) and an entry that
// needs no alpha fills that slot with x (never read); each invocation reads
// only its own element before writing it.
//
// Constants: WG, the workgroup size; OP, the entry `unary` computes
// (OP_* below).

struct Params {
    n: u32,
    t: u32,   // snake: time steps per channel (the channel is i / t)
    a: f32,   // leaky_relu: the negative slope; snake: eps added to alpha in 1/alpha
    _pad: u32,
}

const OP_LEAKY_RELU: u32 = 0u;
const OP_TANH: u32 = 1u;
const OP_SIN: u32 = 2u;
const OP_EXP: u32 = 3u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> alpha: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

//!include tanh_common

// Snake1D as Kokoro's AdaINResBlock1 writes it:
// x + (1 / alpha) * sin(alpha * x)^2, alpha per channel (shape (1, C, 1)).
@compute @workgroup_size(WG)
fn snake(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if (i >= p.n) {
        return;
    }
    let a = alpha[i / p.t];
    let v = x[i];
    let s = sin(a * v);
    y[i] = v + (1.0 / (a + p.a)) * (s * s);
}

@compute @workgroup_size(WG)
fn unary(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if (i >= p.n) {
        return;
    }
    let v = x[i];
    var r: f32;
    if (OP == OP_LEAKY_RELU) {
        r = select(v * p.a, v, v >= 0.0);
    } else if (OP == OP_TANH) {
        r = tanh_safe(v);
    } else if (OP == OP_SIN) {
        r = sin(v);
    } else {
        // e^88.72 is the largest finite f32 exponential; clamping keeps the
        // kernel from creating an infinity (WGSL may assume none occur)
        // where torch.exp would return inf.
        r = exp(min(v, 88.0));
    }
    y[i] = r;
}
