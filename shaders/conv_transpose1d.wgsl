// Transposed 1-D convolution over [channels][time] activations:
// torch.nn.functional.conv_transpose1d with stride, padding, output_padding,
// groups and an optional bias (dilation 1). The weight is torch's
// ConvTranspose1d layout, [cin][cout/groups][k].
//
// Written as a gather, one invocation per output element (co, t): input
// step s reaches output t through tap kk when s*stride + kk = t + pad, so
// only the taps kk = (t + pad) mod stride, + stride, ... contribute and the
// loop visits k/stride of them (2 of 20 for Kokoro's x10 upsampler) instead
// of testing all k. No atomics, no scatter; t is fastest across the
// workgroup so the x reads are neighbouring floats and the weight reads
// nearly shared. The grid may wrap into y (gpu.Grid).
//
// Weights are u32 words as in conv1d.wgsl: f32 bit patterns (WF16 = 0) or
// two packed f16 (WF16 = 1), read without the shader-f16 feature.
//
// Constants: WG, the workgroup size; WF16, the weight format.

struct Params {
    cin: u32,
    cout: u32,
    tin: u32,
    tout: u32,
    k: u32,
    stride: u32,
    pad: u32,
    groups: u32,
    flags: u32, // FLAG_BIAS
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

const FLAG_BIAS: u32 = 1u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<u32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

//!include conv_weight_common

@compute @workgroup_size(WG)
fn conv_transpose1d(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if (i >= p.cout * p.tout) {
        return;
    }
    let co = i / p.tout;
    let t = i % p.tout;
    let cout_g = p.cout / p.groups;
    let cin_g = p.cin / p.groups;
    let g = co / cout_g;
    let col = co % cout_g;
    let tp = t + p.pad;
    let k0 = tp % p.stride;
    var acc = 0.0;
    if ((p.flags & FLAG_BIAS) != 0u) {
        acc = bias[co];
    }
    for (var ci = g * cin_g; ci < (g + 1u) * cin_g; ci++) {
        let wrow = (ci * cout_g + col) * p.k;
        for (var kk = k0; kk < p.k && kk <= tp; kk += p.stride) {
            let s = (tp - kk) / p.stride;
            if (s < p.tin) {
                acc += x[ci * p.tin + s] * weight(wrow + kk);
            }
        }
    }
    y[i] = acc;
}
