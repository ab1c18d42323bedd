// 1-D convolution over activations laid out [channels][time] (PyTorch's NCL
// with batch 1): torch.nn.functional.conv1d with stride, dilation, groups
// (depthwise when groups == channels), an optional bias, and zero or reflect
// padding (Conv1d's padding_mode 'zeros' or 'reflect').
//
// One invocation per output element, (co, t) with t fastest, so a workgroup
// shares one output channel: its weight reads are the same address for every
// invocation (a broadcast) and its input reads are neighbouring floats. The
// grid may wrap into y (gpu.Grid): the index is gid.x + gid.y * nwg.x * WG.
//
// Weights are bound as u32 words: with WF16 = 0 each word is an f32 (read
// with bitcast, exact); with WF16 = 1 each word packs two f16 weights, low
// half first, read with unpack2x16float so no shader-f16 feature is needed.
//
// Constants: WG, the workgroup size; WF16, the weight format.

struct Params {
    cin: u32,
    cout: u32,
    tin: u32,
    tout: u32,
    k: u32,
    stride: u32,
    pad: u32,      // left padding (torch pads both sides by the same amount)
    dilation: u32,
    groups: u32,
    flags: u32,    // FLAG_* below
    _pad0: u32,
    _pad1: u32,
}

const FLAG_BIAS: u32 = 1u;
const FLAG_REFLECT: u32 = 2u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<u32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

//!include conv_weight_common

@compute @workgroup_size(WG)
fn conv1d(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if (i >= p.cout * p.tout) {
        return;
    }
    let co = i / p.tout;
    let t = i % p.tout;
    let cin_g = p.cin / p.groups;
    let g = co / (p.cout / p.groups);
    let reflect = (p.flags & FLAG_REFLECT) != 0u;
    let n = i32(p.tin);
    let start = i32(t * p.stride) - i32(p.pad);
    var acc = 0.0;
    if ((p.flags & FLAG_BIAS) != 0u) {
        acc = bias[co];
    }
    for (var ci = 0u; ci < cin_g; ci++) {
        let xrow = (g * cin_g + ci) * p.tin;
        let wrow = (co * cin_g + ci) * p.k;
        for (var kk = 0u; kk < p.k; kk++) {
            var pos = start + i32(kk * p.dilation);
            if (reflect) {
                // torch's reflect: -1 -> 1, n -> n - 2 (the edge is not
                // repeated); the dispatcher keeps pad < tin so one
                // reflection suffices.
                pos = abs(pos);
                pos = select(pos, 2 * (n - 1) - pos, pos >= n);
            } else if (pos < 0 || pos >= n) {
                continue;
            }
            acc += x[xrow + u32(pos)] * weight(wrow + kk);
        }
    }
    y[i] = acc;
}
