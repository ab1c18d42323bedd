// Normalisations of [channels][time] activations for the Kokoro vocoder:
//
//   adain1d: InstanceNorm1d over time, per channel (biased variance, eps),
//     with its optional affine w, b, then AdaIN1d's (1 + gamma) * . + beta.
//   channel_layernorm: LayerNorm over the channels of each time step with
//     optional w, b (Kokoro's text-encoder LayerNorm, which transposes to
//     put channels last), then optionally AdaLayerNorm's (1 + gamma) * . +
//     beta.
//
// gamma and beta come from one buffer `style` of 2 * channels floats,
// [gamma | beta], which is what AdaIN's fc(s) produces before torch.chunk.
//
// Both use the two-pass variance of norm.wgsl's layernorm, on values first
// shifted by one sample of the row, so an offset large against the spread
// does not cancel catastrophically.
//
// Every storage binding is read_write so y may be x (in place) and absent
// operands are filled by x (never read). In place is race-free: adain1d's
// workgroup reads its channel in the reductions before any write and each
// invocation rewrites only what it reads last; channel_layernorm's
// invocation owns one time step's column.
//
// Constants: WG, the workgroup size (a power of two).

struct Params {
    channels: u32,
    t: u32,
    eps: f32,
    flags: u32, // FLAG_*
}

const FLAG_WEIGHT: u32 = 1u;
const FLAG_BIAS: u32 = 2u;
const FLAG_STYLE: u32 = 4u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> b: array<f32>;
@group(0) @binding(4) var<storage, read_write> style: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;

//!include reduce_common

// affine applies the norm's own w, b and then AdaIN's style to a normalised
// value of channel c, in torch's order: ((v * w + b) * (1 + gamma)) + beta.
fn affine(v: f32, c: u32) -> f32 {
    var r = v;
    if ((p.flags & FLAG_WEIGHT) != 0u) {
        r *= w[c];
    }
    if ((p.flags & FLAG_BIAS) != 0u) {
        r += b[c];
    }
    if ((p.flags & FLAG_STYLE) != 0u) {
        r = (1.0 + style[c]) * r + style[p.channels + c];
    }
    return r;
}

// One workgroup per channel; the grid may wrap into y (gpu.Grid with one
// "thread" per channel).
@compute @workgroup_size(WG)
fn adain1d(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let c = wid.x + wid.y * nwg.x;
    if (c >= p.channels) {
        return;
    }
    let base = c * p.t;
    let x0 = x[base];
    var s = 0.0;
    for (var j = lid; j < p.t; j += WG) {
        s += x[base + j] - x0;
    }
    let mean = workgroup_sum(s, lid) / f32(p.t);
    var ss = 0.0;
    for (var j = lid; j < p.t; j += WG) {
        let d = (x[base + j] - x0) - mean;
        ss += d * d;
    }
    let inv = inverseSqrt(workgroup_sum(ss, lid) / f32(p.t) + p.eps);
    for (var j = lid; j < p.t; j += WG) {
        y[base + j] = affine(((x[base + j] - x0) - mean) * inv, c);
    }
}

// One invocation per time step, looping over the channels: neighbouring
// invocations read neighbouring floats of each channel row.
@compute @workgroup_size(WG)
fn channel_layernorm(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = gid.x + gid.y * nwg.x * WG;
    if (t >= p.t) {
        return;
    }
    let x0 = x[t];
    var s = 0.0;
    for (var c = 0u; c < p.channels; c++) {
        s += x[c * p.t + t] - x0;
    }
    let mean = s / f32(p.channels);
    var ss = 0.0;
    for (var c = 0u; c < p.channels; c++) {
        let d = (x[c * p.t + t] - x0) - mean;
        ss += d * d;
    }
    let inv = inverseSqrt(ss / f32(p.channels) + p.eps);
    for (var c = 0u; c < p.channels; c++) {
        let i = c * p.t + t;
        y[i] = affine(((x[i] - x0) - mean) * inv, c);
    }
}
