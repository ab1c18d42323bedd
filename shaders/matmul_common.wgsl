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
    flags: u32,    // bit 0: accumulate into y
}

@group(0) @binding(0) var<uniform> p: MatmulParams;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
