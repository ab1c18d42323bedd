// conv1d_tiled.wgsl's implicit GEMM (the same y, summed in the same order:
// bias, then j = ci*k + kk = 0, 1, ..., K-1), rescheduled so that nothing
// of a K step waits on anything it need not:
//
//   - Software pipeline: each step's global loads of the NEXT step's W and
//     B tiles are issued into registers before this step's multiply-adds,
//     and stored to the other half of a double-buffered stage after them;
//     one barrier per step instead of two. conv1d_tiled.wgsl waits a full
//     global-load latency per step (two barriers around it), which is all
//     a short shape's few workgroups do (the 1090->1024 decoder conv at
//     100 frames is 32 workgroups walking 205 K steps each).
//   - No private arrays: the TM x TN block is up to 2x2 quads of 4 channels
//     x 4 steps, each a mat4x4 in a named variable (a00, a01, a10, a11),
//     the quads TM/TN do not use switched off by constant conditions. An
//     array indexed by a loop counter stays in registers only if the driver
//     unrolls naga's loop form completely; named variables need no unroll.
//   - No division per staged element: each invocation stages the same K
//     column(s) every step, so its (input channel, tap) advances by KC with
//     a carry (one division at the start, none in the loop).
//   - Bounds as selects: every staged element is loaded from a clamped
//     index and zeroed by a select, so the loads of a step issue back to
//     back without branches.
//
// Staging. W: invocation l stages W[c .. c+3][j] (c = 4*(l / KC), j = l %
// KC, and up to three more quads WG/KC quads apart where the tile needs
// them: WPER in all, named registers sw0..sw3 switched by constants):
// neighbouring invocations read neighbouring j of a row. It stores the
// vec4 at ws[j][c/4 ^ (j & 7)]: the XOR swizzle puts the 8 invocations of a
// quarter warp (j = 0..7, one vec4 each) in 8 different bank groups, where
// the plain [j][c/4] layout (rows 4*MV words apart) lands all of them in
// one. The readers undo the XOR.
// B: invocation l stages the vec4 u = l % NV of row jj = l / NV (and up to
// three more rows WG/NV apart: BPER in all, sb0..sb3): steps u, u + NV,
// u + 2NV, u + 3NV of the tile, so neighbouring invocations read
// neighbouring steps of x for every component and store neighbouring
// vec4s. An invocation's x vec4s, and so
// its accumulators and outputs, are those strided steps: output column
// t0 + u + s*NV is component s.
//
// Grid: x walks time tiles, y channel tiles (as conv1d_tiled.wgsl).
//
// Constants (prepended by gpu.Spec): WF16, TILE_M, TILE_N, TMNK = TM | TN
// << 8 | KC << 16 as in conv1d_tiled.wgsl. The dispatcher
// (ops.Conv1DTile.Validate) checks TM, TN in {4, 8}; TILE_M % 32 == 0 (the
// swizzle's 8 vec4 groups); WG % KC == 0 and WG % NV == 0 (an invocation's
// later staged vec4s lie in its first's column); at most 4 staged vec4s of
// W and of B per invocation; and Conv1DTiledWith checks the double stage,
// 2*4*KC*(TILE_M + TILE_N) bytes, against the device's workgroup memory
// (WebGPU guarantees 16 KiB; the H200 grants 48, lavapipe 32).

//!include conv1d_tiled_common

const WS_LEN: u32 = KC * MV; // vec4s of one W stage
const BS_LEN: u32 = KC * NV; // vec4s of one B stage
const WS_LEN2: u32 = 2u * WS_LEN;
const BS_LEN2: u32 = 2u * BS_LEN;
const WQS: u32 = WG / KC; // quads between an invocation's staged W vec4s
const BRS: u32 = WG / NV; // rows between an invocation's staged B vec4s
const WPER: u32 = (MV + WQS - 1u) / WQS; // staged W vec4s per invocation, 1..4
const BPER: u32 = (KC + BRS - 1u) / BRS; // staged B vec4s per invocation, 1..4

// Two stages each: step s computes from half s & 1 while the registers of
// step s+1 go to the other half.
var<workgroup> ws: array<vec4<f32>, WS_LEN2>; // [2][KC][MV], swizzled
var<workgroup> bs: array<vec4<f32>, BS_LEN2>; // [2][KC][NV]

//!include conv_weight_common

// wload is W[co][j], 0 past the channels or K.
fn wload(co: u32, j: u32, kt: u32) -> f32 {
    let ok = co < p.cout && j < kt;
    return select(0.0, weight(select(0u, co * kt + j, ok)), ok);
}

// wquad is W[co .. co+3][j].
fn wquad(co: u32, j: u32, kt: u32) -> vec4<f32> {
    return vec4<f32>(wload(co, j, kt), wload(co + 1u, j, kt), wload(co + 2u, j, kt), wload(co + 3u, j, kt));
}

// xload is x[ci][pos], 0 past the input channels (K) or either end.
fn xload(ci: u32, pos: i32) -> f32 {
    let ok = ci < p.cin && pos >= 0 && pos < i32(p.tin);
    return select(0.0, x[select(0u, ci * p.tin + u32(pos), ok)], ok);
}

// xquad is B's row (ci, kk) at the strided steps u + s*NV of a tile, pos
// being the first's input position.
fn xquad(ci: u32, pos: i32) -> vec4<f32> {
    let n = i32(NV);
    return vec4<f32>(xload(ci, pos), xload(ci, pos + n), xload(ci, pos + 2 * n), xload(ci, pos + 3 * n));
}

// Tap is a K index j as (input channel, tap).
struct Tap {
    ci: u32,
    kk: u32,
}

// next is the tap KC further on: dq = KC / k channels and dr = KC % k taps,
// with a carry.
fn next(t: Tap, dq: u32, dr: u32) -> Tap {
    var ci = t.ci + dq;
    var kk = t.kk + dr;
    if (kk >= p.k) {
        kk -= p.k;
        ci += 1u;
    }
    return Tap(ci, kk);
}

fn tap_pos(t: Tap, t0u: u32) -> i32 {
    return i32(t0u + t.kk * p.dilation) - i32(p.pad);
}

// mac adds one tap to a quad: column r (channel r) += w[r] * x (4 steps).
fn mac(a: mat4x4<f32>, wv: vec4<f32>, xv: vec4<f32>) -> mat4x4<f32> {
    return mat4x4<f32>(a[0] + wv.x * xv, a[1] + wv.y * xv, a[2] + wv.z * xv, a[3] + wv.w * xv);
}

fn bias_at(co: u32) -> f32 {
    let ok = (p.flags & FLAG_BIAS) != 0u && co < p.cout;
    return select(0.0, bias[select(0u, co, ok)], ok);
}

// bias_quad starts a quad whose first channel is co.
fn bias_quad(co: u32) -> mat4x4<f32> {
    return mat4x4<f32>(vec4<f32>(bias_at(co)), vec4<f32>(bias_at(co + 1u)), vec4<f32>(bias_at(co + 2u)), vec4<f32>(bias_at(co + 3u)));
}

// store_row writes channel co's component s at step t + s*NV.
fn store_row(v: vec4<f32>, co: u32, t: u32) {
    if (co >= p.cout) {
        return;
    }
    let o = co * p.tout + t;
    if (t < p.tout) {
        y[o] = v.x;
    }
    if (t + NV < p.tout) {
        y[o + NV] = v.y;
    }
    if (t + 2u * NV < p.tout) {
        y[o + 2u * NV] = v.z;
    }
    if (t + 3u * NV < p.tout) {
        y[o + 3u * NV] = v.w;
    }
}

fn store_quad(a: mat4x4<f32>, co: u32, t: u32) {
    store_row(a[0], co, t);
    store_row(a[1], co + 1u, t);
    store_row(a[2], co + 2u, t);
    store_row(a[3], co + 3u, t);
}

@compute @workgroup_size(WG)
fn conv1d_tiled_pipelined(@builtin(local_invocation_index) l: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t0 = wid.x * TILE_N;
    let c0 = wid.y * TILE_M;
    let tx = l % NX; // step vec4s tx and NX + tx of the tile
    let ty = l / NX; // channel quads ty and NY + ty of the tile
    let kt = p.cin * p.k;
    let nsteps = (kt + KC - 1u) / KC;

    // W staging: column wj, quads wq0 + i*WQS for i < WPER (if on: a
    // quad past MV is off). The constant WPER > i switches off the
    // registers a tile does not use.
    let wj = l % KC;
    let wq0 = l / KC;
    let wq1 = wq0 + WQS;
    let wq2 = wq0 + 2u * WQS;
    let wq3 = wq0 + 3u * WQS;
    let w0on = wq0 < MV;
    let w1on = WPER > 1u && wq1 < MV;
    let w2on = WPER > 2u && wq2 < MV;
    let w3on = WPER > 3u && wq3 < MV;
    let wsw = wj & 7u;
    let wrow0 = wj * MV;
    // B staging: vec4 bu of rows br0 + i*BRS for i < BPER (if on).
    let bu = l % NV;
    let br0 = l / NV;
    let br1 = br0 + BRS;
    let br2 = br0 + 2u * BRS;
    let br3 = br0 + 3u * BRS;
    let b0on = br0 < KC;
    let b1on = BPER > 1u && br1 < KC;
    let b2on = BPER > 2u && br2 < KC;
    let b3on = BPER > 3u && br3 < KC;
    let dq = KC / p.k;
    let dr = KC % p.k;
    var tap0 = Tap(br0 / p.k, br0 % p.k);
    var tap1 = Tap(br1 / p.k, br1 % p.k);
    var tap2 = Tap(br2 / p.k, br2 % p.k);
    var tap3 = Tap(br3 / p.k, br3 % p.k);
    let tb = t0 + bu;

    // Step 0's stage.
    var j = wj;
    var sw0 = vec4<f32>(0.0);
    var sw1 = vec4<f32>(0.0);
    var sw2 = vec4<f32>(0.0);
    var sw3 = vec4<f32>(0.0);
    var sb0 = vec4<f32>(0.0);
    var sb1 = vec4<f32>(0.0);
    var sb2 = vec4<f32>(0.0);
    var sb3 = vec4<f32>(0.0);
    if (w0on) {
        sw0 = wquad(c0 + 4u * wq0, j, kt);
    }
    if (w1on) {
        sw1 = wquad(c0 + 4u * wq1, j, kt);
    }
    if (w2on) {
        sw2 = wquad(c0 + 4u * wq2, j, kt);
    }
    if (w3on) {
        sw3 = wquad(c0 + 4u * wq3, j, kt);
    }
    if (b0on) {
        sb0 = xquad(tap0.ci, tap_pos(tap0, tb));
    }
    if (b1on) {
        sb1 = xquad(tap1.ci, tap_pos(tap1, tb));
    }
    if (b2on) {
        sb2 = xquad(tap2.ci, tap_pos(tap2, tb));
    }
    if (b3on) {
        sb3 = xquad(tap3.ci, tap_pos(tap3, tb));
    }
    if (w0on) {
        ws[wrow0 + (wq0 ^ wsw)] = sw0;
    }
    if (w1on) {
        ws[wrow0 + (wq1 ^ wsw)] = sw1;
    }
    if (w2on) {
        ws[wrow0 + (wq2 ^ wsw)] = sw2;
    }
    if (w3on) {
        ws[wrow0 + (wq3 ^ wsw)] = sw3;
    }
    if (b0on) {
        bs[br0 * NV + bu] = sb0;
    }
    if (b1on) {
        bs[br1 * NV + bu] = sb1;
    }
    if (b2on) {
        bs[br2 * NV + bu] = sb2;
    }
    if (b3on) {
        bs[br3 * NV + bu] = sb3;
    }

    // Quad (qm, qn): channels c0 + 4(qm*NY + ty) .. +3 (columns), step
    // vec4 qn*NX + tx (components). Quads TM or TN leave out stay unused.
    var a00 = bias_quad(c0 + 4u * ty);
    var a01 = a00;
    var a10 = bias_quad(c0 + 4u * (NY + ty));
    var a11 = a10;
    workgroupBarrier();

    for (var s = 0u; s < nsteps; s++) {
        let cur = s & 1u;
        let more = s + 1u < nsteps;
        // Issue step s+1's loads; they land while step s computes.
        if (more) {
            j += KC;
            tap0 = next(tap0, dq, dr);
            if (BPER > 1u) {
                tap1 = next(tap1, dq, dr);
            }
            if (BPER > 2u) {
                tap2 = next(tap2, dq, dr);
            }
            if (BPER > 3u) {
                tap3 = next(tap3, dq, dr);
            }
            if (w0on) {
                sw0 = wquad(c0 + 4u * wq0, j, kt);
            }
            if (w1on) {
                sw1 = wquad(c0 + 4u * wq1, j, kt);
            }
            if (w2on) {
                sw2 = wquad(c0 + 4u * wq2, j, kt);
            }
            if (w3on) {
                sw3 = wquad(c0 + 4u * wq3, j, kt);
            }
            if (b0on) {
                sb0 = xquad(tap0.ci, tap_pos(tap0, tb));
            }
            if (b1on) {
                sb1 = xquad(tap1.ci, tap_pos(tap1, tb));
            }
            if (b2on) {
                sb2 = xquad(tap2.ci, tap_pos(tap2, tb));
            }
            if (b3on) {
                sb3 = xquad(tap3.ci, tap_pos(tap3, tb));
            }
        }
        let wb = cur * WS_LEN;
        let bb = cur * BS_LEN;
        for (var jj = 0u; jj < KC; jj++) {
            let wrow = wb + jj * MV;
            let sw = jj & 7u;
            let brow = bb + jj * NV;
            let w0 = ws[wrow + (ty ^ sw)];
            let x0 = bs[brow + tx];
            a00 = mac(a00, w0, x0);
            if (TN == 8u) {
                let x1 = bs[brow + NX + tx];
                a01 = mac(a01, w0, x1);
                if (TM == 8u) {
                    let w1 = ws[wrow + ((NY + ty) ^ sw)];
                    a10 = mac(a10, w1, x0);
                    a11 = mac(a11, w1, x1);
                }
            } else if (TM == 8u) {
                let w1 = ws[wrow + ((NY + ty) ^ sw)];
                a10 = mac(a10, w1, x0);
            }
        }
        // Half cur ^ 1 was last read in step s-1, before its barrier.
        if (more) {
            let nw = (cur ^ 1u) * WS_LEN;
            let nb = (cur ^ 1u) * BS_LEN;
            let nwr = nw + wrow0;
            if (w0on) {
                ws[nwr + (wq0 ^ wsw)] = sw0;
            }
            if (w1on) {
                ws[nwr + (wq1 ^ wsw)] = sw1;
            }
            if (w2on) {
                ws[nwr + (wq2 ^ wsw)] = sw2;
            }
            if (w3on) {
                ws[nwr + (wq3 ^ wsw)] = sw3;
            }
            if (b0on) {
                bs[nb + br0 * NV + bu] = sb0;
            }
            if (b1on) {
                bs[nb + br1 * NV + bu] = sb1;
            }
            if (b2on) {
                bs[nb + br2 * NV + bu] = sb2;
            }
            if (b3on) {
                bs[nb + br3 * NV + bu] = sb3;
            }
        }
        workgroupBarrier();
    }

    store_quad(a00, c0 + 4u * ty, t0 + tx);
    if (TN == 8u) {
        store_quad(a01, c0 + 4u * ty, t0 + NX + tx);
    }
    if (TM == 8u) {
        store_quad(a10, c0 + 4u * (NY + ty), t0 + tx);
        if (TN == 8u) {
            store_quad(a11, c0 + 4u * (NY + ty), t0 + NX + tx);
        }
    }
}
