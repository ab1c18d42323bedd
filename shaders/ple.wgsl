// Gemma 4's per-layer-embedding (PLE) gate for one layer, in one dispatch:
// the layer's slice of the model-wide projection is scaled and RMS-normalised,
// added to the token's per-layer embedding and scaled (transformers'
// Gemma4TextModel.project_per_layer_inputs, for this layer's slice), then
// multiplied by GELU of the layer's gate (the decoder layer's
// act_fn(per_layer_input_gate(h)) * per_layer_input).
//
// proj and tok are [tokens][layers * dim], g and out [tokens][dim]; the
// layer's slice of a row starts at offset = layer * dim of it.
//
// One workgroup per token; the grid may wrap into y past 65535 tokens
// (gpu.Grid with one "thread" per token), so the token is wid.x + wid.y *
// nwg.x. Each invocation strides over the row by WG (coalesced), and the sum
// of squares goes through reduce_common's pairwise tree, the same as
// norm.wgsl's rmsnorm.
//
// Every storage binding is read_write so that out may be g (in place), as in
// norm.wgsl: WebGPU allows one buffer in several writable bindings of a
// dispatch, not in a read-only and a writable one. It is race-free: each
// invocation reads g[i] just before writing out[i] itself, and no invocation
// reads an element of g another one writes. out must not be proj, tok or w,
// which are laid out differently or read by every workgroup.
//
// Constants: WG, the workgroup size, a power of two.

struct Params {
    tokens: u32,
    dim: u32,
    stride: u32, // layers * dim: one row of proj and tok
    offset: u32, // layer * dim: the layer's slice of that row
    eps: f32,
    proj_scale: f32,  // hidden_size^-0.5, applied before the norm
    input_scale: f32, // 2^-0.5, applied to the sum
    _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> g: array<f32>;
@group(0) @binding(2) var<storage, read_write> proj: array<f32>;
@group(0) @binding(3) var<storage, read_write> tok: array<f32>;
@group(0) @binding(4) var<storage, read_write> w: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

//!include reduce_common
//!include glu_common

// proj_inv is the inverse RMS of token t's slice of proj times proj_scale.
// The scale comes first, as in transformers: it matters only through eps,
// which it weighs against the mean square.
fn proj_inv(src: u32, lid: u32) -> f32 {
    var ss = 0.0;
    for (var j = lid; j < p.dim; j += WG) {
        let v = proj[src + j] * p.proj_scale;
        ss += v * v;
    }
    return inverseSqrt(workgroup_sum(ss, lid) / f32(p.dim) + p.eps);
}

// ple_value is element j of the layer's per-layer input:
// (rmsnorm(proj * proj_scale) * w + tok) * input_scale.
fn ple_value(src: u32, j: u32, inv: f32) -> f32 {
    let pn = proj[src + j] * p.proj_scale * inv * w[j];
    return (pn + tok[src + j]) * p.input_scale;
}

// out = gelu(g) * (rmsnorm(proj * proj_scale) * w + tok) * input_scale, over
// the layer's slice of each token's row.
@compute @workgroup_size(WG)
fn ple_gate(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let t = wid.x + wid.y * nwg.x;
    if (t >= p.tokens) {
        return; // uniform: the whole workgroup leaves together
    }
    let src = t * p.stride + p.offset;
    let inv = proj_inv(src, lid);
    let dst = t * p.dim;
    for (var j = lid; j < p.dim; j += WG) {
        out[dst + j] = gelu(g[dst + j]) * ple_value(src, j, inv);
    }
}

// out = the per-layer input alone, without the gate: what the training
// step's backward of the gate reads (g is not read).
@compute @workgroup_size(WG)
fn ple_input(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let t = wid.x + wid.y * nwg.x;
    if (t >= p.tokens) {
        return;
    }
    let src = t * p.stride + p.offset;
    let inv = proj_inv(src, lid);
    let dst = t * p.dim;
    for (var j = lid; j < p.dim; j += WG) {
        out[dst + j] = ple_value(src, j, inv);
    }
}
