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
// Constants: WG, the workgroup size (lstm_whh_t: 256; lstm_recur:
// 256 * SPLIT); H, the hidden size; UNITS = ceil(H / 256), the units an
// invocation serves; SPLIT, the K slices of lstm_recur (1 for lstm_whh_t).

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> gates: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> whh_f: array<f32>;
@group(0) @binding(3) var<storage, read_write> whh_b: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

var<workgroup> hs: array<f32, H>;

//!include lstm_common
//!include tanh_common

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

// lstm_recur: one workgroup of WG = 256 * SPLIT invocations per
// direction. Invocation l serves units j = l % 256 + 256 u (u < UNITS) and
// the K slice q = l / 256 of their dot products with h_{t-1}: k in
// [q * KS, (q + 1) * KS). A step's W_hh reads (4H x H floats, 1 MB at
// Kokoro's size) come from L2, and one workgroup has only its own loads in
// flight to hide that latency: splitting K over SPLIT slices puts SPLIT
// times as many invocations, each with eight loads in flight, on it.
// Slices q > 0 leave their partial sums in workgroup memory, and slice 0
// adds them in slice order, updates c and writes h.
const SW: u32 = WG / SPLIT; // invocations per slice, 256
const KS: u32 = (H + SPLIT - 1u) / SPLIT; // k per slice
const PART_LEN: u32 = (SPLIT - 1u) * UNITS * SW + 1u; // + 1: no empty array at SPLIT 1

var<workgroup> part: array<vec4<f32>, PART_LEN>;

@compute @workgroup_size(WG)
fn lstm_recur(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let d = wid.x; // 0 forward, 1 reverse
    let wbase = p.dirs * p.t * H + d * H * H;
    let q = lid / SW;
    let lj = lid % SW;
    let k0 = min(q * KS, H);
    let k1 = min(k0 + KS, H);
    var c: array<f32, UNITS>;
    for (var u = 0u; u < UNITS; u++) {
        c[u] = 0.0;
    }
    for (var j = lid; j < H; j += WG) {
        hs[j] = 0.0;
    }
    workgroupBarrier();
    for (var s = 0u; s < p.t; s++) {
        let t = select(s, p.t - 1u - s, d == 1u);
        let gbase = (d * p.t + t) * H;
        var g: array<vec4<f32>, UNITS>;
        for (var u = 0u; u < UNITS; u++) {
            let j = lj + u * SW;
            if (j >= H) {
                break;
            }
            // Four accumulators and eight loads per iteration.
            var acc0 = vec4(0.0);
            if (q == 0u) {
                acc0 = gates[gbase + j];
            }
            var acc1 = vec4(0.0);
            var acc2 = vec4(0.0);
            var acc3 = vec4(0.0);
            let wj = wbase + j;
            var k = k0;
            for (; k + 8u <= k1; k += 8u) {
                let w0 = gates[wj + k * H];
                let w1 = gates[wj + (k + 1u) * H];
                let w2 = gates[wj + (k + 2u) * H];
                let w3 = gates[wj + (k + 3u) * H];
                let w4 = gates[wj + (k + 4u) * H];
                let w5 = gates[wj + (k + 5u) * H];
                let w6 = gates[wj + (k + 6u) * H];
                let w7 = gates[wj + (k + 7u) * H];
                acc0 += w0 * hs[k];
                acc1 += w1 * hs[k + 1u];
                acc2 += w2 * hs[k + 2u];
                acc3 += w3 * hs[k + 3u];
                acc0 += w4 * hs[k + 4u];
                acc1 += w5 * hs[k + 5u];
                acc2 += w6 * hs[k + 6u];
                acc3 += w7 * hs[k + 7u];
            }
            for (; k < k1; k++) {
                acc0 += gates[wj + k * H] * hs[k];
            }
            g[u] = (acc0 + acc1) + (acc2 + acc3);
            if (q > 0u) {
                part[((q - 1u) * UNITS + u) * SW + lj] = g[u];
            }
        }
        workgroupBarrier(); // every invocation has read h_{t-1}; partials are in
        if (q == 0u) {
            for (var u = 0u; u < UNITS; u++) {
                let j = lj + u * SW;
                if (j >= H) {
                    break;
                }
                var gj = g[u]; // (i, f, g, o)
                for (var r = 1u; r < SPLIT; r++) {
                    gj += part[((r - 1u) * UNITS + u) * SW + lj];
                }
                c[u] = sigmoid(gj.y) * c[u] + sigmoid(gj.x) * tanh_safe(gj.z);
                let h = sigmoid(gj.w) * tanh_safe(c[u]);
                hs[j] = h;
                y[(d * H + j) * p.t + t] = h;
            }
        }
        workgroupBarrier(); // h_t is complete before the next step reads it
    }
}
