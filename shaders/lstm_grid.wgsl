// The recurrence of nn.LSTM spread over G workgroups per direction, for
// GPUs: lstm_recur.wgsl's single workgroup per direction streams all of
// W_hh (4H x H floats, 1 MB at Kokoro's size) from L2 every step, and one
// SM's share of L2 bandwidth bounds it at ~8 us a step on the H200. Here
// workgroup g of direction d owns U = H / G hidden units, keeps their 4U
// gate rows of W_hh in registers for the whole sequence, and the
// workgroups of a direction exchange h through y itself.
//
// The exchange: lstm_grid_init fills y with SENTINEL (a NaN bit pattern
// no h takes: the recurrence writes a NaN h as the canonical 0x7fc00000);
// at step t each workgroup writes its units' h_t into y[(d*H + j)*T + t]
// with atomic stores, and at the next step every workgroup spins on the H
// values of h_t with atomic loads until none is SENTINEL. Each slot is
// written once, so no ordering across slots is needed: atomics on one
// location are coherent. This needs the G workgroups of a direction to run
// at once, which WebGPU does not promise: ops.ChooseLSTMGrid picks a grid
// only on a discrete GPU that ran one correctly, with at most 64
// workgroups in all, and the spin gives up after SPIN_MAX tries (then h is
// the sentinel, a NaN, which that trial sees) rather than hang a GPU that
// cannot hold them all.
//
// Workgroup layout (WG = 256 invocations): R = 4U gate rows (gate q = r / U
// of unit g*U + r % U) by S = WG / R slices of k, each KPT = H / S wide; an
// invocation holds its row's slice of W_hh in KPT / 4 vec4 registers. Per
// step: the partial dots go to workgroup memory, invocation r < R adds the
// input half (lstm_input's, in the scratch) and the S partials in slice
// order, and invocation u < U updates unit u's c (kept in a register) and
// writes h. Summation order differs from lstm_recur's (slices, then their
// sum), within the same rounding bound.
//
// Constants: H, the hidden size; U, units per workgroup (G = H / U).

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> gates: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> whh_f: array<f32>;
@group(0) @binding(3) var<storage, read_write> whh_b: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<atomic<u32>>;

const WG: u32 = 256u;
const R: u32 = 4u * U; // gate rows per workgroup
const S: u32 = WG / R; // slices of k
const KPT: u32 = H / S; // k per invocation
const KV: u32 = KPT / 4u; // vec4 registers of W_hh per invocation
const SENTINEL: u32 = 0xffffffffu;
const CANONICAL_NAN: u32 = 0x7fc00000u;
// Lavapipe ends any shader loop after 65535 iterations; on a GPU the
// workgroups of a direction are all running, and a value arrives within
// microseconds.
const SPIN_MAX: u32 = 65535u;

var<workgroup> hs: array<f32, H>;
var<workgroup> part: array<f32, WG>;
var<workgroup> gsh: array<f32, R>;

//!include lstm_common
//!include tanh_common

@compute @workgroup_size(WG)
fn lstm_grid_init(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if (i < p.dirs * H * p.t) {
        atomicStore(&y[i], SENTINEL);
    }
}

@compute @workgroup_size(WG)
fn lstm_grid(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) l: u32) {
    let g = wid.x; // workgroup of the direction
    let d = wid.y; // 0 forward, 1 reverse
    let r = l / S;
    let s = l % S;
    let unit = g * U + r % U;
    let row = (r / U) * H + unit; // torch's row of W_hh
    let k0 = s * KPT;
    var w: array<vec4<f32>, KV>;
    for (var i = 0u; i < KV; i++) {
        let k = row * H + k0 + 4u * i;
        if (d == 0u) {
            w[i] = vec4(whh_f[k], whh_f[k + 1u], whh_f[k + 2u], whh_f[k + 3u]);
        } else {
            w[i] = vec4(whh_b[k], whh_b[k + 1u], whh_b[k + 2u], whh_b[k + 3u]);
        }
    }
    var c = 0.0;
    for (var step = 0u; step < p.t; step++) {
        let t = select(step, p.t - 1u - step, d == 1u);
        for (var k = l; k < H; k += WG) {
            var v = 0.0;
            if (step > 0u) {
                let prev = select(t - 1u, t + 1u, d == 1u);
                let at = (d * H + k) * p.t + prev;
                var bits = atomicLoad(&y[at]);
                for (var n = 0u; n < SPIN_MAX && bits == SENTINEL; n++) {
                    bits = atomicLoad(&y[at]);
                }
                v = bitcast<f32>(bits);
            }
            hs[k] = v;
        }
        workgroupBarrier(); // h_{t-1} is complete
        var a0 = 0.0;
        var a1 = 0.0;
        for (var i = 0u; i < KV; i++) {
            let hv = vec4(hs[k0 + 4u * i], hs[k0 + 4u * i + 1u], hs[k0 + 4u * i + 2u], hs[k0 + 4u * i + 3u]);
            let prod = w[i] * hv;
            a0 += prod.x + prod.z;
            a1 += prod.y + prod.w;
        }
        part[l] = a0 + a1;
        workgroupBarrier(); // every partial is in
        if (l < R) {
            let unit_r = g * U + l % U;
            var sum = gates[(d * p.t + t) * H + unit_r][l / U];
            for (var q = 0u; q < S; q++) {
                sum += part[l * S + q];
            }
            gsh[l] = sum;
        }
        workgroupBarrier(); // every gate of the workgroup's units is in
        if (l < U) {
            let gi = gsh[l];
            let gf = gsh[U + l];
            let gg = gsh[2u * U + l];
            let go = gsh[3u * U + l];
            c = sigmoid(gf) * c + sigmoid(gi) * tanh_safe(gg);
            var bits = bitcast<u32>(sigmoid(go) * tanh_safe(c));
            if ((bits & 0x7fffffffu) > 0x7f800000u) {
                bits = CANONICAL_NAN; // never the sentinel
            }
            atomicStore(&y[(d * H + g * U + l) * p.t + t], bits);
        }
    }
}
