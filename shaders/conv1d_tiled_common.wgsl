// What conv1d_tiled.wgsl and conv1d_tiled_pipelined.wgsl share (pasted
// by //!include conv1d_tiled_common): the parameters ops.Conv1DTiledWith
// writes, the bindings, and the tile's shape from the constants TILE_M,
// TILE_N and TMNK = TM | TN << 8 | KC << 16.

struct Params {
    cin: u32,
    cout: u32,
    tin: u32,
    tout: u32,
    k: u32,
    pad: u32,
    dilation: u32,
    flags: u32, // FLAG_BIAS
}

const FLAG_BIAS: u32 = 1u;

const TM: u32 = TMNK & 0xffu; // output channels per invocation
const TN: u32 = (TMNK >> 8u) & 0xffu; // steps per invocation
const KC: u32 = TMNK >> 16u; // GEMM K (input channel, tap) pairs per step
const MV: u32 = TILE_M / 4u; // vec4s of a staged W^T row
const NV: u32 = TILE_N / 4u; // vec4s of a staged B row
const NY: u32 = TILE_M / TM; // invocations along channels
const NX: u32 = TILE_N / TN; // invocations along steps
const WG: u32 = NX * NY;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<u32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
