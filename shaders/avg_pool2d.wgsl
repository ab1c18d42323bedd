// Average pooling of channel-first activations [channels][height][width]
// with the stride equal to the kernel, no padding, floor mode: F.avg_pool2d
// (x, (kh, kw)) as StyleTTS2's DownSample uses it ('half': 2x2,
// 'timepreserve': (2, 1)). One invocation per output element; the grid may
// wrap into y (gpu.Grid).
//
// Constants: WG, the workgroup size.

struct Params {
    channels: u32,
    h: u32,
    w: u32,
    ho: u32,
    wo: u32,
    kh: u32,
    kw: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(WG)
fn avg_pool2d(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    let plane = p.ho * p.wo;
    if (i >= p.channels * plane) {
        return;
    }
    let c = i / plane;
    let oy = (i % plane) / p.wo;
    let ox = i % p.wo;
    let base = c * p.h * p.w + oy * p.kh * p.w + ox * p.kw;
    var acc = 0.0;
    for (var ky = 0u; ky < p.kh; ky++) {
        for (var kx = 0u; kx < p.kw; kx++) {
            acc += x[base + ky * p.w + kx];
        }
    }
    // torch divides the window sum by the window size.
    y[i] = acc / f32(p.kh * p.kw);
}
