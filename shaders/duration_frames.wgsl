// Kokoro's duration head, after duration_proj: each token's frame count is
// the sum of the sigmoids of its max_dur logits, divided by speed, rounded
// half to even (torch.round; WGSL's round() is half to even too) and at
// least 1, then capped at 2^30 frames, well inside u32 and exact in f32.
// A row with a NaN logit has no duration: it gets 0 frames, which no row
// of finite logits gets, for the host to report (ops.DurationFramesNaN).
// NaN is found from the bits, which no fast-math assumption can fold away.
//
// logits [rows][n] row-major; out rows u32. One invocation per row: n is
// max_dur (50), too few terms to be worth a workgroup reduction.
//
// Constants: WG, the workgroup size.

struct Params {
    rows: u32,
    n: u32,
    speed: f32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

const MAX_FRAMES: f32 = 1073741824.0; // 2^30

// is_nan reads x's bits: all ones in the exponent, a nonzero mantissa.
fn is_nan(x: f32) -> bool {
    let b = bitcast<u32>(x);
    return (b & 0x7f800000u) == 0x7f800000u && (b & 0x007fffffu) != 0u;
}

@compute @workgroup_size(WG)
fn duration_frames(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let r = gid.x + gid.y * nwg.x * WG;
    if (r >= p.rows) {
        return;
    }
    var sum = 0.0;
    var nan = false;
    for (var j = 0u; j < p.n; j++) {
        let x = logits[r * p.n + j];
        nan = nan || is_nan(x);
        // exp(-x) overflows to inf for x < -88, and 1 / inf is the 0 the
        // sigmoid tends to.
        sum += 1.0 / (1.0 + exp(-x));
    }
    let v = sum / p.speed;
    if (nan || is_nan(v)) {
        out[r] = 0u;
        return;
    }
    out[r] = u32(clamp(round(v), 1.0, MAX_FRAMES));
}
