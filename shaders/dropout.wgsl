// Dropout by a mask computed from its indices (inverted dropout, as
// torch.nn.Dropout in training): y[i, j] (+)= keep(token0 + i, j) ? x[i, j] *
// scale : 0, with keep(t, c) = pcg(c + pcg(t + key)) >= threshold. The key
// folds the run's seed, the step counter and the site (engine/ops/ref's
// DropoutKey, on the host); the hash is the one in engine/ops/ref/dropout.go,
// so the CPU reference draws the same mask bit for bit. Nothing is stored:
// the LoRA backward applies the same mask to its input gradient by calling
// this kernel again with the same key.
//
// One invocation per element; the grid may wrap into y.
//
// Constants: WG, the workgroup size.

struct Params {
    rows: u32,
    cols: u32,
    token0: u32,    // mask row of x's row 0
    key: u32,
    threshold: u32, // dropped when the hash is below it: round(p * 2^32)
    scale: f32,     // 1 / (1 - p)
    x_offset: u32,  // float index of x[0, 0]
    y_offset: u32,  // float index of y[0, 0]
    flags: u32,     // bit 0: add to y
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

// PCG-RXS-M-XS (Jarzynski and Olano, JCGT 2020); u32 products wrap.
fn pcg(v: u32) -> u32 {
    let s = v * 747796405u + 2891336453u;
    let w = ((s >> ((s >> 28u) + 4u)) ^ s) * 277803737u;
    return (w >> 22u) ^ w;
}

@compute @workgroup_size(WG)
fn dropout(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let e = gid.x + gid.y * nwg.x * WG;
    if (e >= p.rows * p.cols) {
        return;
    }
    let i = e / p.cols;
    let j = e % p.cols;
    var v = 0.0;
    if (pcg(j + pcg(p.token0 + i + p.key)) >= p.threshold) {
        v = x[p.x_offset + e] * p.scale;
    }
    if ((p.flags & 1u) != 0u) {
        v += y[p.y_offset + e];
    }
    y[p.y_offset + e] = v;
}
