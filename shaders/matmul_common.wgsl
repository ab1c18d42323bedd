// The params struct and bindings every matmul family shares (matmul_float,
// matmul_legacy, matmul_kquant), pasted in by their include line
// (shaders.Source): the contract documented in engine/ops/matmul.go.

struct MatmulParams {
    k: u32,        // input features (columns of W)
    n: u32,        // rows of W in this chunk
    m: u32,        // activation rows
    row0: u32,     // first output row of this chunk
    x_stride: u32, // floats between activation rows
    y_stride: u32, // floats between output rows
    y_offset: u32, // float index of element (0, 0) in y
    flags: u32,    // bit 0: accumulate into y; bit 1: matvec_normed_ gain is 1 + g; bit 2: the GLU takes GELU; bit 3: matvec_moe_ reads act(gate)·up; bit 4: the GLU is gpt-oss's; bit 5: a matvec adds each row's bias (matvec_moe_: its expert's)
    eps: f32,      // matvec_normed_: the RMSNorm epsilon
    experts: u32,  // moe entries: the experts of this chunk (from expert row0)
    x_div: u32,    // moe entries: the expert slots that read one row of x
    pad: u32,
}

@group(0) @binding(0) var<uniform> p: MatmulParams;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

// levels is v - off as f32, for v < 2^23 and a small integer off: v is ORed
// into the mantissa of 2^23 and 2^23 + off subtracted, both exact. The
// quantized families convert every weight's level this way because an
// integer-to-float conversion issues at 16 a clock per SM on NVIDIA's
// Hopper against 128 FMAs: one per weight would cap a Q4_K matvec near
// 2 TB/s on an H200 before any other work.
fn levels(v: vec4<u32>, off: f32) -> vec4<f32> {
    return bitcast<vec4<f32>>(v | vec4<u32>(0x4b000000u)) - (8388608.0 + off);
}
