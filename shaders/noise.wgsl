// Standard normal noise from a hash of the element's index: y[i] =
// sqrt(-2 ln u1) cos(2π u2) (Box–Muller), u1 and u2 the top 24 bits of
// pcg(pcg(2i) + key) and pcg(pcg(2i + 1) + key), mapped to (0, 1) exactly
// in f32. The index is hashed before the key is added, so no two keys give
// streams that are shifts of each other.
// The harmonic source's noise (SineGen's randn), a fresh key per
// utterance: made where it is used instead of 9 × samples normals drawn on
// the host and uploaded (vocoder's GPU decoder). engine/ops/ref's GaussianNoise draws the same
// uniforms bit for bit.
//
// One invocation per element; the grid may wrap into y.
//
// Constants: WG, the workgroup size.

struct Params {
    n: u32,
    key: u32,
    scale: f32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;

// PCG-RXS-M-XS (Jarzynski and Olano, JCGT 2020), as dropout.wgsl; u32
// products wrap.
fn pcg(v: u32) -> u32 {
    let s = v * 747796405u + 2891336453u;
    let w = ((s >> ((s >> 28u) + 4u)) ^ s) * 277803737u;
    return (w >> 22u) ^ w;
}

// unit maps a hash to (0, 1): 24 bits and a half step, all exact in f32.
fn unit(h: u32) -> f32 {
    return (f32(h >> 8u) + 0.5) * (1.0 / 16777216.0);
}

@compute @workgroup_size(WG)
fn gaussian_noise(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if (i >= p.n) {
        return;
    }
    let u1 = unit(pcg(pcg(2u * i) + p.key));
    let u2 = unit(pcg(pcg(2u * i + 1u) + p.key));
    y[i] = p.scale * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
