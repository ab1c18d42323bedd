// The recurrence of nn.LSTM; see lstm.wgsl for the whole picture. A family
// of its own because its bindings differ from lstm_input's and Hearth's
// kernel loader gives a family one binding list.
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
@group(0) @binding(1) var<storage, read_write> gates: array<f32>;
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

fn whh(d: u32, i: u32) -> f32 {
    if (d == 0u) {
        return whh_f[i];
    }
    return whh_b[i];
}

@compute @workgroup_size(WG)
fn lstm_recur(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let d = wid.x; // 0 forward, 1 reverse
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
        let gbase = (d * p.t + t) * 4u * H;
        for (var u = 0u; u < UNITS; u++) {
            let j = lid + u * WG;
            if (j >= H) {
                break;
            }
            var gi = gates[gbase + j];
            var gf = gates[gbase + H + j];
            var gg = gates[gbase + 2u * H + j];
            var go = gates[gbase + 3u * H + j];
            for (var k = 0u; k < H; k++) {
                let hk = hs[k];
                gi += whh(d, j * H + k) * hk;
                gf += whh(d, (H + j) * H + k) * hk;
                gg += whh(d, (2u * H + j) * H + k) * hk;
                go += whh(d, (3u * H + j) * H + k) * hk;
            }
            c[u] = sigmoid(gf) * c[u] + sigmoid(gi) * tanh_safe(gg);
            hn[u] = sigmoid(go) * tanh_safe(c[u]);
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
