// The global gradient norm for clipping, in two passes so that the result is
// the same bits on every run (no atomics, no order that depends on
// scheduling), and a clip factor computed on the GPU so that a training step
// can chain norm -> clip -> optimizer with no readback.
//
// sumsq_partial: over one gradient buffer of n floats, workgroup g sums the
// squares of floats [g * CHUNK, (g + 1) * CHUNK), CHUNK = WG * PER: each
// invocation PER floats strided by WG (neighbours read neighbours), then a
// pairwise tree in shared memory; the sum goes to partials[offset + g]. The
// dispatcher calls it once per buffer with its own offset. The grid may wrap
// into y past 65535 workgroups.
//
// grad_norm_finish: one workgroup sums partials[0, count) in a fixed order
// (strided per invocation, then the tree) and writes
//   out[0] = norm = sqrt(sum) * scale
//   out[1] = clip = min(1, max_norm / (norm + 1e-6))   (1 when max_norm = 0)
// as torch.nn.utils.clip_grad_norm_ computes it; scale is applied to the
// norm, not the squares, so that 1/accumulation-steps factors never
// underflow a square.
//
// The finishing pass loops partials / WG times per invocation: a billion
// gradient floats make 244141 partials, 954 iterations, far inside the
// 65535 loop iterations lavapipe lets an invocation run.
//
// Constants: WG, the workgroup size, a power of two; PER, floats per
// invocation in the first pass.

struct Params {
    n: u32,        // sumsq_partial: floats in grad; finish: partials to sum
    offset: u32,   // sumsq_partial: the first partial this buffer writes
    scale: f32,    // finish: multiplies the norm
    max_norm: f32, // finish: 0 = no clipping
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> grad: array<f32>;
@group(0) @binding(2) var<storage, read_write> partials: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

//!include reduce_common

@compute @workgroup_size(WG)
fn sumsq_partial(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let g = wid.x + wid.y * nwg.x;
    let base = g * WG * PER;
    if (base >= p.n) {
        return; // uniform: the wrapped grid's overshoot
    }
    var s = 0.0;
    for (var k = 0u; k < PER; k++) {
        let i = base + k * WG + lid;
        if (i < p.n) {
            let v = grad[i];
            s += v * v;
        }
    }
    let total = workgroup_sum(s, lid);
    if (lid == 0u) {
        partials[p.offset + g] = total;
    }
}

@compute @workgroup_size(WG)
fn grad_norm_finish(@builtin(local_invocation_index) lid: u32) {
    var s = 0.0;
    for (var i = lid; i < p.n; i += WG) {
        s += partials[i];
    }
    let total = workgroup_sum(s, lid);
    if (lid == 0u) {
        let norm = sqrt(total) * p.scale;
        var clip = 1.0;
        if (p.max_norm > 0.0) {
            clip = min(1.0, p.max_norm / (norm + 1e-6));
        }
        out[0] = norm;
        out[1] = clip;
    }
}
