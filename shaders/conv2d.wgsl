// 2-D convolution over channel-first activations [channels][height][width]
// (PyTorch's NCHW with batch 1): torch.nn.functional.conv2d with stride,
// zero padding, groups and an optional bias (dilation 1), for the
// StyleTTS2 style encoder. Weights are torch's [cout][cin/groups][kh][kw].
//
// One invocation per output element, (co, oy, ox) with ox fastest, so a
// workgroup shares an output channel (broadcast weight reads) and reads
// neighbouring input floats. The grid may wrap into y (gpu.Grid).
//
// Weights are u32 words: f32 bit patterns (WF16 = 0) or two packed f16
// (WF16 = 1), read without the shader-f16 feature.
//
// Constants: WG, the workgroup size; WF16, the weight format.

struct Params {
    cin: u32,
    cout: u32,
    h: u32,
    w: u32,
    ho: u32,
    wo: u32,
    kh: u32,
    kw: u32,
    sh: u32,
    sw: u32,
    ph: u32,
    pw: u32,
    groups: u32,
    flags: u32, // FLAG_BIAS
    _pad0: u32,
    _pad1: u32,
}

const FLAG_BIAS: u32 = 1u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> wt: array<u32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

fn weight(i: u32) -> f32 {
    if (WF16 == 1u) {
        let pair = unpack2x16float(wt[i >> 1u]);
        return select(pair.x, pair.y, (i & 1u) == 1u);
    }
    return bitcast<f32>(wt[i]);
}

@compute @workgroup_size(WG)
fn conv2d(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    let plane = p.ho * p.wo;
    if (i >= p.cout * plane) {
        return;
    }
    let co = i / plane;
    let oy = (i % plane) / p.wo;
    let ox = i % p.wo;
    let cin_g = p.cin / p.groups;
    let g = co / (p.cout / p.groups);
    let y0 = i32(oy * p.sh) - i32(p.ph);
    let x0 = i32(ox * p.sw) - i32(p.pw);
    var acc = 0.0;
    if ((p.flags & FLAG_BIAS) != 0u) {
        acc = bias[co];
    }
    for (var ci = 0u; ci < cin_g; ci++) {
        let xplane = (g * cin_g + ci) * p.h * p.w;
        let wbase = (co * cin_g + ci) * p.kh * p.kw;
        for (var ky = 0u; ky < p.kh; ky++) {
            let yy = y0 + i32(ky);
            if (yy < 0 || yy >= i32(p.h)) {
                continue;
            }
            for (var kx = 0u; kx < p.kw; kx++) {
                let xx = x0 + i32(kx);
                if (xx < 0 || xx >= i32(p.w)) {
                    continue;
                }
                acc += x[xplane + u32(yy) * p.w + u32(xx)] * weight(wbase + ky * p.kw + kx);
            }
        }
    }
    y[i] = acc;
}
