// Transposed 1-D convolution, groups 1 (any kernel, stride, padding,
// output_padding): torch.nn.functional.conv_transpose1d for Kokoro's two
// upsamplers (512 -> 256, k20, x10 over ~3000 frames; 256 -> 128, k12, x6
// over ~30000 steps: 8 and 12 GMAC a long utterance), as one implicit GEMM
// per output phase with the tiling of conv1d_tiled.wgsl.
//
// Output t is reached from input step s through tap kk when s*stride + kk
// = t + pad. Write tp = t + pad = q*stride + r with phase r = tp % stride:
// only the taps kk = r + m*stride (m = 0, 1, ..., T-1, T = ceil(k/stride))
// reach it, from s = q - m. So the outputs of one phase form a GEMM
//
//   y[co][q*stride + r - pad] = bias[co] + sum over j = ci*T + m of
//       A_r[co][j] * B[j][q],
//   A_r[co][j] = W[ci][co][r + m*stride] (0 when r + m*stride >= k),
//   B[j][q] = x[ci][q - m] (0 outside the input),
//
// M = cout, N = the phase's q, K = cin*T. Neither matrix is stored: each K
// step gathers A's columns from torch's [cin][cout][k] weight and B's rows
// from x. B is the same for every phase.
//
// A workgroup owns one phase (workgroup_id.z) and a TILE_M x TILE_N tile
// of it (channels x q) and walks K in steps of KC exactly as
// conv1d_tiled.wgsl does: it stages A^T's KC x TILE_M and B's KC x TILE_N
// in workgroup memory (4*KC*(TILE_M + TILE_N) bytes, within WebGPU's
// guaranteed 16 KiB), and each of its (TILE_M/TM)*(TILE_N/TN) invocations
// adds KC products to a TM x TN block of outputs held in vec4 registers,
// an invocation's vec4s interleaved across the tile. Past K, past k and
// outside the input the stage holds zeros, which add exactly nothing.
//
// Summation order: every output is bias, then j = 0, 1, ..., K-1, i.e.
// input channels in order and, within one, its taps in increasing kk:
// conv_transpose1d.wgsl's order (which skips the zero terms).
//
// Grid: x walks q tiles from q = qbase = floor(pad/stride), y channel
// tiles, z the stride phases (no wrap: the dispatcher checks all three
// fit 65535). Outputs a tile's q maps outside [0, tout) are not written.
//
// Constants (prepended by gpu.Spec, which carries at most four): WF16, the
// weight format (as conv1d.wgsl: f32 bit patterns or packed f16 pairs, low
// half first); TILE_M, TILE_N, the tile; TMNK = TM | TN << 8 | KC << 16,
// the per-invocation block (multiples of 4) and the K step.

struct Params {
    cin: u32,
    cout: u32,
    tin: u32,
    tout: u32,
    k: u32,
    stride: u32,
    pad: u32,
    flags: u32, // FLAG_BIAS
    taps: u32, // T = ceil(k/stride), the taps of the fullest phase
    qbase: u32, // floor(pad/stride), the first q with an output
    _pad0: u32,
    _pad1: u32,
}

const FLAG_BIAS: u32 = 1u;

const TM: u32 = TMNK & 0xffu; // output channels per invocation
const TN: u32 = (TMNK >> 8u) & 0xffu; // q per invocation
const KC: u32 = TMNK >> 16u; // GEMM K (input channel, tap) pairs per step
const MV: u32 = TILE_M / 4u; // vec4s of a staged A^T row
const NV: u32 = TILE_N / 4u; // vec4s of a staged B row
const NY: u32 = TILE_M / TM; // invocations along channels
const NX: u32 = TILE_N / TN; // invocations along q
const WG: u32 = NX * NY;
const QM: u32 = TM / 4u; // vec4s of weights per invocation per product
const QN: u32 = TN / 4u; // vec4s of inputs per invocation per product
const NACC: u32 = TM * QN; // accumulator vec4s
const WS_LEN: u32 = KC * MV;
const BS_LEN: u32 = KC * NV;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<u32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

var<workgroup> ws: array<vec4<f32>, WS_LEN>; // [KC][TILE_M/4]: A_r^T, 4 channels a vec4
var<workgroup> bs: array<vec4<f32>, BS_LEN>; // [KC][TILE_N/4]: B, 4 q a vec4

//!include conv_weight_common

@compute @workgroup_size(WG)
fn conv_transpose1d_tiled(@builtin(local_invocation_index) l: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let r = wid.z;
    let q0 = p.qbase + wid.x * TILE_N;
    let c0 = wid.y * TILE_M;
    let tx = l % NX; // q0 + 4(qn*NX + tx) .. +3, qn < QN
    let ty = l / NX; // channels c0 + 4(qm*NY + ty) .. +3, qm < QM
    let kt = p.cin * p.taps;

    // acc[(4*qm + r)*QN + qn]: channel c0 + 4(qm*NY + ty) + r, q
    // q0 + 4(qn*NX + tx) .. +3.
    var acc: array<vec4<f32>, NACC>;
    for (var i = 0u; i < NACC; i++) {
        acc[i] = vec4<f32>(0.0);
    }
    if ((p.flags & FLAG_BIAS) != 0u) {
        for (var qm = 0u; qm < QM; qm++) {
            for (var e = 0u; e < 4u; e++) {
                let co = c0 + 4u * (qm * NY + ty) + e;
                if (co < p.cout) {
                    let bv = vec4<f32>(bias[co]);
                    for (var qn = 0u; qn < QN; qn++) {
                        acc[(4u * qm + e) * QN + qn] = bv;
                    }
                }
            }
        }
    }

    for (var j0 = 0u; j0 < kt; j0 += KC) {
        // A: neighbouring invocations take neighbouring channels, so their
        // workgroup-memory writes are neighbouring floats; their weight
        // reads are k floats apart (torch's layout puts no two of one
        // phase's taps side by side), served from cache: every q tile of
        // the phase reads the same A.
        for (var i = l; i < KC * TILE_M; i += WG) {
            let c = i % TILE_M;
            let jj = i / TILE_M;
            let co = c0 + c;
            let j = j0 + jj;
            var v = 0.0;
            if (co < p.cout && j < kt) {
                let kk = r + (j % p.taps) * p.stride;
                if (kk < p.k) {
                    v = weight(((j / p.taps) * p.cout + co) * p.k + kk);
                }
            }
            ws[jj * MV + c / 4u][c % 4u] = v;
        }
        // B: neighbouring invocations read neighbouring steps of one row
        // of x, shifted back by the tap's m.
        for (var i = l; i < KC * TILE_N; i += WG) {
            let n = i % TILE_N;
            let jj = i / TILE_N;
            let j = j0 + jj;
            var v = 0.0;
            if (j < kt) {
                let s = i32(q0 + n) - i32(j % p.taps);
                if (s >= 0 && s < i32(p.tin)) {
                    v = x[(j / p.taps) * p.tin + u32(s)];
                }
            }
            bs[jj * NV + n / 4u][n % 4u] = v;
        }
        workgroupBarrier();
        for (var jj = 0u; jj < KC; jj++) {
            var wv: array<vec4<f32>, QM>;
            var xv: array<vec4<f32>, QN>;
            for (var qm = 0u; qm < QM; qm++) {
                wv[qm] = ws[jj * MV + qm * NY + ty];
            }
            for (var qn = 0u; qn < QN; qn++) {
                xv[qn] = bs[jj * NV + qn * NX + tx];
            }
            for (var qm = 0u; qm < QM; qm++) {
                for (var e = 0u; e < 4u; e++) {
                    let we = wv[qm][e];
                    for (var qn = 0u; qn < QN; qn++) {
                        let ai = (4u * qm + e) * QN + qn;
                        acc[ai] += we * xv[qn];
                    }
                }
            }
        }
        workgroupBarrier();
    }

    for (var qm = 0u; qm < QM; qm++) {
        for (var e = 0u; e < 4u; e++) {
            let co = c0 + 4u * (qm * NY + ty) + e;
            if (co >= p.cout) {
                continue;
            }
            for (var qn = 0u; qn < QN; qn++) {
                let q = q0 + 4u * (qn * NX + tx);
                let v = acc[(4u * qm + e) * QN + qn];
                for (var s = 0u; s < 4u; s++) {
                    // tp = t + pad; outputs before t = 0 or from tout on
                    // belong to no one.
                    let tp = (q + s) * p.stride + r;
                    if (tp >= p.pad && tp - p.pad < p.tout) {
                        y[co * p.tout + tp - p.pad] = v[s];
                    }
                }
            }
        }
    }
}
