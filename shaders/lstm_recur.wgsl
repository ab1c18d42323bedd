// The recurrence of nn.LSTM; see lstm.wgsl for the whole picture. A family
// of its own because its bindings differ from lstm_input's and Hearth's
// kernel loader gives a family one binding list.
//
// The scratch buffer (gates, read as vec4s) holds, in vec4 units:
//   [0, D*T*H)          the input half of every step's gates, unit-major:
//                       gates[(d * T + t) * H + j] = (i, f, g, o) of unit j;
//   [D*T*H, +D*H*H)     W_hh transposed and unit-major, written by
//                       lstm_whh_t: gates[D*T*H + (d * H + k) * H + j] =
//                       (W_hh[j][k], W_hh[H+j][k], W_hh[2H+j][k],
//                       W_hh[3H+j][k]) of direction d.
// At step k of the dot product, invocation j reads vec4 k * H + j, so a
// subgroup's reads are one contiguous run (coalesced); reading torch's
// row-major W_hh directly put neighbouring invocations H floats apart.
//
// Constants: WG, the workgroup size; H, the hidden size; UNITS =
// ceil(H / WG).

struct Params {
    input: u32,
    t: u32,
    dirs: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> gates: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> whh_f: array<f32>;
@group(0) @binding(3) var<storage, read_write> whh_b: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

var<workgroup> hs: array<f32, H>;

// sigmoid with the exponent clamped: e^88 is still finite in f32.
fn sigmoid(v: f32) -> f32 {
    return 1.0 / (1.0 + exp(min(-v, 88.0)));
}

// tanh for any finite argument (see elementwise.wgsl's tanh_safe).
fn tanh_safe(z: f32) -> f32 {
    let z2 = z * z;
    let series = z * (1.0 + z2 * (-1.0 / 3.0 + z2 * (2.0 / 15.0 + z2 * (-17.0 / 315.0 + z2 * (62.0 / 2835.0)))));
    let e = exp(-2.0 * abs(z));
    let tail = sign(z) * (1.0 - e) / (1.0 + e);
    return select(tail, series, abs(z) < 0.25);
}

// lstm_whh_t writes the transposed W_hh after the gates, one vec4 per
// invocation (i = (d * H + k) * H + j): the writes are coalesced, the four
// reads strided, once per LSTM call (D * 4H * H floats, 2 MB at Kokoro's
// size).
@compute @workgroup_size(WG)
fn lstm_whh_t(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if (i >= p.dirs * H * H) {
        return;
    }
    let j = i % H;
    let k = (i / H) % H;
    let d = i / (H * H);
    var w: vec4<f32>;
    if (d == 0u) {
        w = vec4(whh_f[j * H + k], whh_f[(H + j) * H + k], whh_f[(2u * H + j) * H + k], whh_f[(3u * H + j) * H + k]);
    } else {
        w = vec4(whh_b[j * H + k], whh_b[(H + j) * H + k], whh_b[(2u * H + j) * H + k], whh_b[(3u * H + j) * H + k]);
    }
    gates[p.dirs * p.t * H + i] = w;
}

@compute @workgroup_size(WG)
fn lstm_recur(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let d = wid.x; // 0 forward, 1 reverse
    let wbase = p.dirs * p.t * H + d * H * H;
    var c: array<f32, UNITS>;
    var hn: array<f32, UNITS>;
    for (var u = 0u; u < UNITS; u++) {
        c[u] = 0.0;
        let j = lid + u * WG;
        if (j < H) {
            hs[j] = 0.0;
        }
    }
    workgroupBarrier();
    for (var s = 0u; s < p.t; s++) {
        let t = select(s, p.t - 1u - s, d == 1u);
        let gbase = (d * p.t + t) * H;
        for (var u = 0u; u < UNITS; u++) {
            let j = lid + u * WG;
            if (j >= H) {
                break;
            }
            // Two accumulators and four loads per iteration, so several
            // loads are in flight per invocation.
            var acc0 = gates[gbase + j];
            var acc1 = vec4(0.0);
            let wj = wbase + j;
            var k = 0u;
            for (; k + 4u <= H; k += 4u) {
                let w0 = gates[wj + k * H];
                let w1 = gates[wj + (k + 1u) * H];
                let w2 = gates[wj + (k + 2u) * H];
                let w3 = gates[wj + (k + 3u) * H];
                acc0 += w0 * hs[k];
                acc1 += w1 * hs[k + 1u];
                acc0 += w2 * hs[k + 2u];
                acc1 += w3 * hs[k + 3u];
            }
            for (; k < H; k++) {
                acc0 += gates[wj + k * H] * hs[k];
            }
            let g = acc0 + acc1; // (i, f, g, o)
            c[u] = sigmoid(g.y) * c[u] + sigmoid(g.x) * tanh_safe(g.z);
            hn[u] = sigmoid(g.w) * tanh_safe(c[u]);
        }
        workgroupBarrier(); // every invocation has read h_{t-1}
        for (var u = 0u; u < UNITS; u++) {
            let j = lid + u * WG;
            if (j < H) {
                hs[j] = hn[u];
                y[(d * H + j) * p.t + t] = hn[u];
            }
        }
        workgroupBarrier(); // h_t is complete before the next step reads it
    }
}
