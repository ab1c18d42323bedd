// Short-time Fourier transforms of one signal as iSTFTNet's TorchSTFT uses
// them, torch.stft / torch.istft with center=True, onesided, no
// normalisation:
//
//   stft: reflect-pad n_fft/2 on both sides, frame m starts at m*hop, each
//     frame is multiplied by the window and transformed; writes
//     [abs | angle], 2 * bins rows of frames (torch.cat([abs, angle], 1),
//     which is what the generator feeds its noise convs).
//   istft: magnitude * exp(i phase) per (bin, frame), inverse real DFT of
//     each frame (irfft, 1/n_fft, imaginary parts of the DC and Nyquist bins
//     ignored as any c2r transform does), times the window, overlap-added
//     and divided by the overlap-added squared window, n_fft/2 trimmed from
//     both ends.
//
// Both are direct DFTs, O(n_fft) per output: Kokoro's n_fft is 20 with hop
// 5, where an FFT would save nothing. The table binding holds the window
// (zero-padded to n_fft, centred) and cos, sin of 2*pi*i/n_fft computed in
// float64 on the host, indexed by (k*n) mod n_fft so no large angle ever
// reaches the GPU's cos and sin.
//
// Constants: WG, the workgroup size.

struct Params {
    n_fft: u32,
    hop: u32,
    bins: u32,     // n_fft / 2 + 1
    frames: u32,
    length: u32,   // stft: input samples; istft: output samples
    mag_off: u32,  // istft: float offsets of the magnitude and phase planes
    phase_off: u32,
    flags: u32,    // istft: FLAG_*
}

// istft flags: the magnitude plane holds log-magnitudes (Kokoro's
// spec = exp(x)); the phase plane holds pre-phases (Kokoro's phase = sin(x)).
const FLAG_EXP_MAG: u32 = 1u;
const FLAG_SIN_PHASE: u32 = 2u;

const PI: f32 = 3.14159265358979;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> table: array<f32>; // window | cos | sin, n_fft each
@group(0) @binding(2) var<storage, read> a: array<f32>;     // stft: signal; istft: magnitude plane
@group(0) @binding(3) var<storage, read> b: array<f32>;     // istft: phase plane (stft: unused)
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

fn window(n: u32) -> f32 { return table[n]; }
fn tcos(i: u32) -> f32 { return table[p.n_fft + i]; }
fn tsin(i: u32) -> f32 { return table[2u * p.n_fft + i]; }

// One invocation per (bin, frame), frame fastest.
@compute @workgroup_size(WG)
fn stft(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if (i >= p.bins * p.frames) {
        return;
    }
    let f = i / p.frames;
    let m = i % p.frames;
    let n = i32(p.length);
    let start = i32(m * p.hop) - i32(p.n_fft / 2u);
    var re = 0.0;
    var im = 0.0;
    for (var k = 0u; k < p.n_fft; k++) {
        // Reflect padding (torch's 'reflect': -1 -> 1); the dispatcher keeps
        // n_fft/2 < length so one reflection suffices.
        var q = abs(start + i32(k));
        q = select(q, 2 * (n - 1) - q, q >= n);
        let v = window(k) * a[u32(q)];
        let t = (f * k) % p.n_fft;
        re += v * tcos(t);
        im -= v * tsin(t);
    }
    // A real signal's DC and Nyquist bins are real: FFTs return an exact
    // +0 imaginary part there, so torch.angle gives 0 or pi, never a
    // rounding-noise angle near 0 or a -pi.
    if (f == 0u || 2u * f == p.n_fft) {
        im = 0.0;
    }
    y[i] = sqrt(re * re + im * im);
    var ang: f32;
    if (im == 0.0) {
        ang = select(0.0, PI, re < 0.0); // atan2(+0, x): pi for x < 0, as torch
    } else {
        ang = atan2_accurate(im, re);
    }
    y[p.bins * p.frames + i] = ang;
}

// atan2_accurate refines the built-in atan2 with one Newton step on
// tan(theta - phi) = (y cos phi - x sin phi) / (x cos phi + y sin phi).
// WGSL allows atan2 4096 ulps and lavapipe's is off by up to 2.5e-6 rad,
// while its sin and cos are within 6e-8; the step brings the angle to
// within a few ulps. The clamp keeps it in torch's [-pi, pi] (pi rounded to
// f32, 3.1415927, as torch.angle returns for a negative real).
fn atan2_accurate(y: f32, x: f32) -> f32 {
    let phi = atan2(y, x);
    let c = cos(phi);
    let s = sin(phi);
    let r = phi + (y * c - x * s) / (x * c + y * s);
    return clamp(r, -PI, PI);
}

// One invocation per output sample.
@compute @workgroup_size(WG)
fn istft(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let j = gid.x + gid.y * nwg.x * WG;
    if (j >= p.length) {
        return;
    }
    let pos = j + p.n_fft / 2u; // in the untrimmed overlap-add
    // Frames m with m*hop <= pos < m*hop + n_fft.
    var m0 = 0u;
    if (pos + 1u > p.n_fft) {
        m0 = (pos + 1u - p.n_fft + p.hop - 1u) / p.hop;
    }
    let m1 = min(pos / p.hop, p.frames - 1u);
    let even = (p.n_fft & 1u) == 0u;
    let kmax = (p.n_fft - 1u) / 2u; // bins with a conjugate twin
    var acc = 0.0;
    var env = 0.0;
    for (var m = m0; m <= m1; m++) {
        let n = pos - m * p.hop;
        var v = re_of(0u, m);
        if (even) {
            let ny = re_of(p.bins - 1u, m);
            v += select(ny, -ny, (n & 1u) == 1u);
        }
        for (var k = 1u; k <= kmax; k++) {
            let c = bin(k, m);
            let t = (k * n) % p.n_fft;
            v += 2.0 * (c.x * tcos(t) - c.y * tsin(t));
        }
        let w = window(n);
        acc += v / f32(p.n_fft) * w;
        env += w * w;
    }
    y[j] = acc / env;
}

// bin is magnitude * exp(i phase) of bin k in frame m.
fn bin(k: u32, m: u32) -> vec2<f32> {
    var mag = a[p.mag_off + k * p.frames + m];
    var ph = b[p.phase_off + k * p.frames + m];
    if ((p.flags & FLAG_EXP_MAG) != 0u) {
        mag = exp(min(mag, 88.0));
    }
    if ((p.flags & FLAG_SIN_PHASE) != 0u) {
        ph = sin(ph);
    }
    return mag * vec2<f32>(cos(ph), sin(ph));
}

// re_of is the real part of bin k in frame m (the DC and Nyquist bins,
// whose imaginary parts the inverse real transform ignores).
fn re_of(k: u32, m: u32) -> f32 {
    return bin(k, m).x;
}
