// 1-D convolution, stride 1, groups 1, zero padding, any kernel and
// dilation: torch.nn.functional.conv1d for the shapes that carry almost all
// of Kokoro's decoder and generator work (1090->1024 channels at the frame
// rate; 256 and 128 channels with kernels 3/7/11 and dilations 1/3/5 at
// the sample rate / hop), as an implicit GEMM with register blocking (the
// scheme of matmul_backward_input.wgsl):
//
//   y[co][t] = bias[co] + sum over j = ci*k + kk of W[co][j] * B[j][t],
//   B[j][t] = x[ci][t + kk*dilation - pad] (0 outside the input),
//
// M = cout, N = tout, K = cin*k. W's rows are already the GEMM's A rows
// (torch's [cout][cin][k] layout runs j contiguously); B is the im2col
// matrix, never stored: each step gathers its KC rows straight from x.
//
// A workgroup owns a BM x BN tile (64 channels x 64 steps) and walks K in
// steps of KC = 16: per step it stages W's 64 x 16 and B's 16 x 64 in
// workgroup memory (4 KiB each, within WebGPU's guaranteed 16 KiB), then
// each of its 256 invocations adds 16 taps to a 4 x 4 block of outputs in
// 4 vec4 registers, reading one vec4 of weights (4 channels) and one vec4
// of inputs (4 steps) per tap: two shared loads for 16 multiply-adds.
// Past K the stage holds zeros, which add exactly nothing.
//
// Summation order: every output is bias, then j = 0, 1, ..., K-1 one after
// another, i.e. input channels in order and taps in order within a
// channel: conv1d.wgsl's order and ref.Conv1D's.
//
// Grid: x walks time tiles, y channel tiles (no wrap: the dispatcher
// checks both fit 65535).
//
// Constants: WF16, the weight format (as conv1d.wgsl: f32 bit patterns or
// packed f16 pairs, low half first).

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

const BM: u32 = 64u; // output channels per tile
const BN: u32 = 64u; // time steps per tile
const KC: u32 = 16u; // GEMM K (input channel, tap) pairs per step
const WG: u32 = 256u;
const NV: u32 = BN / 4u; // vec4s of a staged row (= invocations along t)

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<u32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

var<workgroup> ws: array<vec4<f32>, 256>; // [KC][BM/4]: W^T, 4 channels a vec4
var<workgroup> bs: array<vec4<f32>, 256>; // [KC][BN/4]: B, 4 steps a vec4

fn weight(i: u32) -> f32 {
    if (WF16 == 1u) {
        let pair = unpack2x16float(w[i >> 1u]);
        return select(pair.x, pair.y, (i & 1u) == 1u);
    }
    return bitcast<f32>(w[i]);
}

@compute @workgroup_size(256)
fn conv1d_tiled(@builtin(local_invocation_index) l: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t0 = wid.x * BN;
    let c0 = wid.y * BM;
    let tx = l % NV; // steps t0 + 4tx .. +3
    let ty = l / NV; // channels c0 + 4ty .. +3
    let kt = p.cin * p.k;

    var a0 = vec4<f32>(0.0);
    var a1 = vec4<f32>(0.0);
    var a2 = vec4<f32>(0.0);
    var a3 = vec4<f32>(0.0);
    if ((p.flags & FLAG_BIAS) != 0u) {
        let co = c0 + 4u * ty;
        if (co < p.cout) { a0 = vec4<f32>(bias[co]); }
        if (co + 1u < p.cout) { a1 = vec4<f32>(bias[co + 1u]); }
        if (co + 2u < p.cout) { a2 = vec4<f32>(bias[co + 2u]); }
        if (co + 3u < p.cout) { a3 = vec4<f32>(bias[co + 3u]); }
    }

    for (var j0 = 0u; j0 < kt; j0 += KC) {
        // W: neighbouring invocations read neighbouring j of one row.
        for (var i = l; i < BM * KC; i += WG) {
            let jj = i % KC;
            let c = i / KC;
            let co = c0 + c;
            let j = j0 + jj;
            var v = 0.0;
            if (co < p.cout && j < kt) {
                v = weight(co * kt + j);
            }
            ws[jj * (BM / 4u) + c / 4u][c % 4u] = v;
        }
        // B: neighbouring invocations read neighbouring steps of one row
        // of x, shifted by the tap.
        for (var i = l; i < KC * BN; i += WG) {
            let t = i % BN;
            let jj = i / BN;
            let j = j0 + jj;
            var v = 0.0;
            if (j < kt) {
                let ci = j / p.k;
                let kk = j % p.k;
                let pos = i32(t0 + t + kk * p.dilation) - i32(p.pad);
                if (pos >= 0 && pos < i32(p.tin)) {
                    v = x[ci * p.tin + u32(pos)];
                }
            }
            bs[jj * NV + t / 4u][t % 4u] = v;
        }
        workgroupBarrier();
        for (var jj = 0u; jj < KC; jj++) {
            let wv = ws[jj * (BM / 4u) + ty];
            let xv = bs[jj * NV + tx];
            a0 += wv.x * xv;
            a1 += wv.y * xv;
            a2 += wv.z * xv;
            a3 += wv.w * xv;
        }
        workgroupBarrier();
    }

    let t = t0 + 4u * tx;
    if (t >= p.tout) {
        return;
    }
    var acc = array<vec4<f32>, 4>(a0, a1, a2, a3);
    for (var i = 0u; i < 4u; i++) {
        let co = c0 + 4u * ty + i;
        if (co >= p.cout) {
            break;
        }
        let o = co * p.tout + t;
        for (var s = 0u; s < 4u; s++) {
            if (t + s < p.tout) {
                y[o + s] = acc[i][s];
            }
        }
    }
}
