// 1-D convolution, stride 1, groups 1, zero padding, any dilation:
// torch.nn.functional.conv1d for the shapes that carry almost all of
// Kokoro's decoder and generator work (1090->1024 channels at the frame
// rate; 256 and 128 channels with kernels 3/7/11 and dilations 1/3/5 at
// the sample rate / hop). conv1d.wgsl computes one output per invocation
// and reads one weight and one input per multiply-add; here a workgroup
// computes a tile of CT output channels x TT time steps and stages the
// inputs and weights it shares in workgroup memory.
//
// Each invocation keeps 4 channels x 8 time steps of sums (8 vec4
// registers): per input channel and tap it reads one vec4 of weights and
// 8 inputs from workgroup memory for 32 multiply-adds. Time steps of one
// invocation are 8 apart so the 8 invocations of a row read neighbouring
// words. The sum per output is bias, then input channels in order, then
// taps in order: conv1d.wgsl's order and ref.Conv1D's.
//
// Workgroup memory: XS = CI x (TT + HALO) inputs and WS = CI x KMAX x CT
// weights, 2 KiB + 8 KiB, within WebGPU's guaranteed 16 KiB.
// The dispatcher keeps k <= KMAX and (k-1)*dilation <= HALO.
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

const TT: u32 = 64u;   // time steps per tile
const CT: u32 = 32u;   // output channels per tile
const CI: u32 = 4u;    // input channels staged per round
const KMAX: u32 = 16u; // taps
const HALO: u32 = 64u; // (k-1)*dilation
const XW: u32 = 128u;  // TT + HALO

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<u32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

var<workgroup> xs: array<f32, 512>;        // [CI][XW]
var<workgroup> ws: array<vec4<f32>, 512>;  // [CI][KMAX][CT/4]: 4 channels a vec4

fn weight(i: u32) -> f32 {
    if (WF16 == 1u) {
        let pair = unpack2x16float(w[i >> 1u]);
        return select(pair.x, pair.y, (i & 1u) == 1u);
    }
    return bitcast<f32>(w[i]);
}

@compute @workgroup_size(64)
fn conv1d_tiled(@builtin(local_invocation_index) l: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t0 = wid.x * TT;
    let c0 = wid.y * CT;
    let cg = l / 8u; // channels c0 + 4cg .. +3
    let tg = l % 8u; // time steps t0 + tg + 8j, j < 8

    var b = vec4<f32>(0.0);
    if ((p.flags & FLAG_BIAS) != 0u) {
        for (var i = 0u; i < 4u; i++) {
            let co = c0 + 4u * cg + i;
            if (co < p.cout) {
                b[i] = bias[co];
            }
        }
    }
    var a0 = b; var a1 = b; var a2 = b; var a3 = b;
    var a4 = b; var a5 = b; var a6 = b; var a7 = b;

    let taps = CI * p.k;
    for (var cb = 0u; cb < p.cin; cb += CI) {
        // Stage CI input rows over [t0 - pad, t0 - pad + XW), zeros outside.
        for (var i = l; i < CI * XW; i += 64u) {
            let ci = cb + i / XW;
            let pos = i32(t0 + i % XW) - i32(p.pad);
            var v = 0.0;
            if (ci < p.cin && pos >= 0 && pos < i32(p.tin)) {
                v = x[ci * p.tin + u32(pos)];
            }
            xs[i] = v;
        }
        // Stage the CT x CI x k weights: each channel's CI*k taps are one
        // contiguous run of the torch layout [cout][cin][k].
        for (var i = l; i < CT * taps; i += 64u) {
            let co = i / taps;
            let r = i % taps;
            let ci = r / p.k;
            let kk = r % p.k;
            var v = 0.0;
            if (c0 + co < p.cout && cb + ci < p.cin) {
                v = weight(((c0 + co) * p.cin + cb) * p.k + r);
            }
            ws[(ci * KMAX + kk) * (CT / 4u) + co / 4u][co % 4u] = v;
        }
        workgroupBarrier();
        let n = min(CI, p.cin - cb);
        for (var ci = 0u; ci < n; ci++) {
            for (var kk = 0u; kk < p.k; kk++) {
                let wv = ws[(ci * KMAX + kk) * (CT / 4u) + cg];
                let xb = ci * XW + tg + kk * p.dilation;
                a0 += wv * xs[xb];
                a1 += wv * xs[xb + 8u];
                a2 += wv * xs[xb + 16u];
                a3 += wv * xs[xb + 24u];
                a4 += wv * xs[xb + 32u];
                a5 += wv * xs[xb + 40u];
                a6 += wv * xs[xb + 48u];
                a7 += wv * xs[xb + 56u];
            }
        }
        workgroupBarrier();
    }

    var acc = array<vec4<f32>, 8>(a0, a1, a2, a3, a4, a5, a6, a7);
    for (var j = 0u; j < 8u; j++) {
        let t = t0 + tg + 8u * j;
        if (t >= p.tout) {
            break;
        }
        for (var i = 0u; i < 4u; i++) {
            let co = c0 + 4u * cg + i;
            if (co < p.cout) {
                y[co * p.tout + t] = acc[j][i];
            }
        }
    }
}
