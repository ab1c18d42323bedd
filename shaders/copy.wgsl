// Copies of f32 ranges between buffers inside a compute pass: storing a
// batch's keys and values into the KV cache at their positions, and taking
// the last row of a prefill batch for the logits. A copy_buffer_to_buffer
// command would end the compute pass each time (twice per layer per token);
// a dispatch keeps the whole token in one pass.
//
// Constants: WG, the workgroup size.

struct Params {
    n: u32,       // floats to copy
    src_off: u32, // first float read in src
    dst_off: u32, // first float written in dst
    _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

// dst[dst_off + i] = src[src_off + i] for i < n; the grid may wrap into y.
@compute @workgroup_size(WG)
fn copy_f32(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if (i >= p.n) {
        return;
    }
    dst[p.dst_off + i] = src[p.src_off + i];
}
