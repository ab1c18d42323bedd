// A single-layer nn.LSTM over one sequence (batch 1), forward and
// optionally reverse direction, PyTorch's gate order i, f, g, o:
//
//   gates = W_ih x_t + b_ih + W_hh h_{t-1} + b_hh   (4H rows: i | f | g | o)
//   c_t = sigmoid(f) * c_{t-1} + sigmoid(i) * tanh(g)
//   h_t = sigmoid(o) * tanh(c_t),   h_0 = c_0 = 0.
//
// lstm_input computes the input half for every step and direction at once
// (no dependency between steps): gates[d][t][r] = W_ih[d][r] . x[:, t] +
// b_ih[d][r] + b_hh[d][r], x laid out [input][time]. t is fastest across a
// workgroup, so the x reads are neighbouring floats and the weight read is
// shared.
//
// gates is stored unit-major so the recurrence reads a unit's four gates as
// one vec4: gates[(d * T + t) * 4H + 4 j + g] holds gate g (i, f, g, o) of
// hidden unit j, torch's row r = g * H + j.
//
// lstm_recur runs the recurrence: one workgroup per direction walks the
// steps in order (the reverse direction from the last), keeping h in
// workgroup memory and each unit's c in its invocation's registers; each
// invocation owns UNITS = ceil(H / WG) hidden units and their four gate
// rows. It reads W_hh from a transposed, unit-major copy that lstm_whh_t
// writes into the scratch after the gates (see lstm_recur.wgsl), so that at
// each k neighbouring invocations read neighbouring vec4s. The output is y[d*H + j][t] = h_t[j], the [2H][time] layout of
// Kokoro's lstm output after its transpose back to channels-first.
// Lavapipe stops any shader loop after 65535 iterations, so the dispatcher
// keeps the time loop (the longest) below that.
//
// Constants: WG, the workgroup size; H, the hidden size; UNITS =
// ceil(H / WG).

//!include lstm_common

@group(0) @binding(0) var<uniform> p: Params;

// lstm_input's bindings.
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> wih_f: array<f32>;
@group(0) @binding(3) var<storage, read_write> wih_b: array<f32>;
@group(0) @binding(4) var<storage, read_write> bih_f: array<f32>;
@group(0) @binding(5) var<storage, read_write> bhh_f: array<f32>;
@group(0) @binding(6) var<storage, read_write> bih_b: array<f32>;
@group(0) @binding(7) var<storage, read_write> bhh_b: array<f32>;
@group(0) @binding(8) var<storage, read_write> gates: array<f32>;

@compute @workgroup_size(WG)
fn lstm_input(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if (i >= p.dirs * 4u * H * p.t) {
        return;
    }
    let t = i % p.t;
    let r = (i / p.t) % (4u * H);
    let d = i / (p.t * 4u * H);
    var acc = 0.0;
    let wrow = r * p.input;
    if (d == 0u) {
        for (var k = 0u; k < p.input; k++) {
            acc += wih_f[wrow + k] * x[k * p.t + t];
        }
        acc += bih_f[r] + bhh_f[r];
    } else {
        for (var k = 0u; k < p.input; k++) {
            acc += wih_b[wrow + k] * x[k * p.t + t];
        }
        acc += bih_b[r] + bhh_b[r];
    }
    let j = r % H;
    let g = r / H;
    gates[(d * p.t + t) * 4u * H + 4u * j + g] = acc;
}
