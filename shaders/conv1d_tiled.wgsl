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
// A workgroup owns a TILE_M x TILE_N tile (channels x steps) and walks K
// in steps of KC: per step it stages W's TILE_M x KC and B's KC x TILE_N
// in workgroup memory (4*KC*(TILE_M + TILE_N) bytes, within WebGPU's
// guaranteed 16 KiB), then each of its (TILE_M/TM)*(TILE_N/TN) invocations
// adds KC taps to a TM x TN block of outputs in TM*TN/4 vec4 registers,
// reading TM/4 vec4s of weights and TN/4 vec4s of inputs per tap. An
// invocation's vec4s are interleaved across the tile (vec4 q of invocation
// tx is vec4 q*NX + tx of the row), so neighbouring invocations read
// neighbouring shared vec4s and write neighbouring outputs.
// Past K the stage holds zeros, which add exactly nothing.
//
// Summation order: every output is bias, then j = 0, 1, ..., K-1 one after
// another, i.e. input channels in order and taps in order within a
// channel: conv1d.wgsl's order and ref.Conv1D's.
//
// Grid: x walks time tiles, y channel tiles (no wrap: the dispatcher
// checks both fit 65535).
//
// Constants (prepended by gpu.Spec, which carries at most four): WF16, the
// weight format (as conv1d.wgsl: f32 bit patterns or packed f16 pairs, low
// half first); TILE_M, TILE_N, the tile; TMNK = TM | TN << 8 | KC << 16,
// the per-invocation block (multiples of 4) and the K step. The dispatcher
// (ops.Conv1DTile.validate) checks TILE_M % TM == TILE_N % TN == 0, the
// workgroup size <= 256 and the workgroup memory <= 16 KiB.

//!include conv1d_tiled_common

const QM: u32 = TM / 4u; // vec4s of weights per invocation per tap
const QN: u32 = TN / 4u; // vec4s of inputs per invocation per tap
const NACC: u32 = TM * QN; // accumulator vec4s
const WS_LEN: u32 = KC * MV;
const BS_LEN: u32 = KC * NV;

var<workgroup> ws: array<vec4<f32>, WS_LEN>; // [KC][TILE_M/4]: W^T, 4 channels a vec4
var<workgroup> bs: array<vec4<f32>, BS_LEN>; // [KC][TILE_N/4]: B, 4 steps a vec4

//!include conv_weight_common

@compute @workgroup_size(WG)
fn conv1d_tiled(@builtin(local_invocation_index) l: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t0 = wid.x * TILE_N;
    let c0 = wid.y * TILE_M;
    let tx = l % NX; // steps t0 + 4(q*NX + tx) .. +3, q < QN
    let ty = l / NX; // channels c0 + 4(q*NY + ty) .. +3, q < QM
    let kt = p.cin * p.k;

    // acc[(4*qm + r)*QN + qn]: channel c0 + 4(qm*NY + ty) + r, steps
    // t0 + 4(qn*NX + tx) .. +3.
    var acc: array<vec4<f32>, NACC>;
    for (var i = 0u; i < NACC; i++) {
        acc[i] = vec4<f32>(0.0);
    }
    if ((p.flags & FLAG_BIAS) != 0u) {
        for (var qm = 0u; qm < QM; qm++) {
            for (var r = 0u; r < 4u; r++) {
                let co = c0 + 4u * (qm * NY + ty) + r;
                if (co < p.cout) {
                    let bv = vec4<f32>(bias[co]);
                    for (var qn = 0u; qn < QN; qn++) {
                        acc[(4u * qm + r) * QN + qn] = bv;
                    }
                }
            }
        }
    }

    for (var j0 = 0u; j0 < kt; j0 += KC) {
        // W: neighbouring invocations read neighbouring j of one row.
        for (var i = l; i < TILE_M * KC; i += WG) {
            let jj = i % KC;
            let c = i / KC;
            let co = c0 + c;
            let j = j0 + jj;
            var v = 0.0;
            if (co < p.cout && j < kt) {
                v = weight(co * kt + j);
            }
            ws[jj * MV + c / 4u][c % 4u] = v;
        }
        // B: neighbouring invocations read neighbouring steps of one row
        // of x, shifted by the tap.
        for (var i = l; i < KC * TILE_N; i += WG) {
            let t = i % TILE_N;
            let jj = i / TILE_N;
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
            var wv: array<vec4<f32>, QM>;
            var xv: array<vec4<f32>, QN>;
            for (var qm = 0u; qm < QM; qm++) {
                wv[qm] = ws[jj * MV + qm * NY + ty];
            }
            for (var qn = 0u; qn < QN; qn++) {
                xv[qn] = bs[jj * NV + qn * NX + tx];
            }
            for (var qm = 0u; qm < QM; qm++) {
                for (var r = 0u; r < 4u; r++) {
                    let wr = wv[qm][r];
                    for (var qn = 0u; qn < QN; qn++) {
                        let ai = (4u * qm + r) * QN + qn;
                        acc[ai] += wr * xv[qn];
                    }
                }
            }
        }
        workgroupBarrier();
    }

    for (var qm = 0u; qm < QM; qm++) {
        for (var r = 0u; r < 4u; r++) {
            let co = c0 + 4u * (qm * NY + ty) + r;
            if (co >= p.cout) {
                continue;
            }
            for (var qn = 0u; qn < QN; qn++) {
                let t = t0 + 4u * (qn * NX + tx);
                let v = acc[(4u * qm + r) * QN + qn];
                let o = co * p.tout + t;
                for (var s = 0u; s < 4u; s++) {
                    if (t + s < p.tout) {
                        y[o + s] = v[s];
                    }
                }
            }
        }
    }
}
