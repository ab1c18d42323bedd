// Padding of [channels][time] activations along time: zeros (F.pad's
// 'constant' with 0) or reflection (nn.ReflectionPad1d, which mirrors about
// the edge sample without repeating it: x[-1] = x[1]). Kokoro pads the last
// upsampler's output with ReflectionPad1d((1, 0)) before adding the noise
// branch. One invocation per output element; the grid may wrap into y.
//
// Constants: WG, the workgroup size.

struct Params {
    channels: u32,
    tin: u32,
    left: u32,
    tout: u32,   // tin + left + right
    reflect: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(WG)
fn pad1d(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if (i >= p.channels * p.tout) {
        return;
    }
    let c = i / p.tout;
    let n = i32(p.tin);
    var pos = i32(i % p.tout) - i32(p.left);
    if (p.reflect != 0u) {
        // The dispatcher keeps both pads below tin: one reflection suffices.
        pos = abs(pos);
        pos = select(pos, 2 * (n - 1) - pos, pos >= n);
    } else if (pos < 0 || pos >= n) {
        y[i] = 0.0;
        return;
    }
    y[i] = x[c * p.tin + u32(pos)];
}
