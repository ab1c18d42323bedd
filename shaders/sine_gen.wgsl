// The harmonic source of Kokoro's iSTFTNet generator: nn.Upsample(nearest)
// of the frame-rate F0 by U = prod(upsample_rates) * hop, then SineGen:
//
//   rad   = (f0 * h / sr) % 1 per sample and harmonic h = 1..H, plus the
//           initial phase rand_ini on sample 0;
//   rad_d = F.interpolate(rad, scale_factor=1/U, mode='linear');
//   phase = F.interpolate(cumsum(rad_d) * 2pi * U, scale_factor=U,
//           mode='linear');
//   out   = sine_amp * sin(phase) * uv + noise_amp * noise,
//           uv = f0 > threshold, noise_amp = uv ? noise_std : sine_amp / 3.
//
// The phase reaches 2pi * 9 * 500 Hz * seconds: 3e5 rad after ten seconds,
// where an f32 has 0.03 rad of ulp. Only the phase modulo 2pi matters, so
// it is carried in cycles modulo 1: with P[i] = U * cumsum(rad_d)[i], the
// interpolated phase (1 - l) P[i0] + l P[i1] equals P[i0] + l * U * rad_d[i1]
// (i1 = i0 + 1), and frac(P[i]) is a prefix scan of frac(U * rad_d[k])
// modulo 1. frac(U * r) is exact for U <= 4096: r is split into a 12-bit
// head and the rest, each of whose products with U fits f32's 24 bits.
// The scan's error is then at most 1.2e-7 cycles per frame.
//
// The index arithmetic of the two interpolations copies PyTorch's CPU
// kernel in f32 (source index = ratio * (i + 0.5) - 0.5, clamped at 0;
// lambda = src - floor(src)), because at frame 1000 an ulp of the source
// index is 6e-5 of a frame, which is 1.4e-3 cycles of a 9th harmonic's
// phase: that rounding is torch's, and this kernel reproduces it.
//
// Two entries: sine_phase (one workgroup per harmonic scans the frames)
// writes [H][Td][2] = (frac(P), rad_d) to the scratch buffer; sine_gen
// (one invocation per output sample and harmonic) interpolates and writes
// [H][L].
//
// Constants: WG, the workgroup size (a power of two).

struct Params {
    frames: u32,     // f0 frames
    up: u32,         // U
    harmonics: u32,  // H = harmonic_num + 1
    td: u32,         // downsampled length, floor(L / U)
    samples: u32,    // L = frames * U
    flags: u32,      // FLAG_*
    sr: f32,
    sine_amp: f32,
    noise_std: f32,
    threshold: f32,
    ratio_down: f32, // f32(1 / (1/U)): the downsampling interpolation's scale
    ratio_up: f32,   // f32(1 / U)
    zero: u32,       // 0, unknown to the compiler: see rounded
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

const FLAG_INIT: u32 = 1u;  // an initial phase per harmonic is bound
const FLAG_NOISE: u32 = 2u; // standard-normal noise [H][L] is bound

const TWO_PI: f32 = 6.283185307179586;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> f0: array<f32>;
@group(0) @binding(2) var<storage, read_write> init: array<f32>;
@group(0) @binding(3) var<storage, read_write> noise: array<f32>;
@group(0) @binding(4) var<storage, read_write> scratch: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;

var<workgroup> tot: array<f32, WG>;

// rounded is x, the f32 a product was rounded to, passed through an
// integer xor with a uniform zero: a compiler that contracts a * b + c
// into one fused multiply-add (NVIDIA's does; WGSL allows it, and naga
// cannot forbid it) cannot see through it, so the products this kernel
// relies on being rounded (torch's arithmetic, Dekker's split) stay
// rounded on every GPU.
fn rounded(x: f32) -> f32 {
    return bitcast<f32>(bitcast<u32>(x) ^ p.zero);
}

// split is Veltkamp's: a = hi + lo, each with at most 12 significant
// bits, so the products of two halves are exact.
fn split(a: f32) -> vec2<f32> {
    let c = rounded(4097.0 * a);
    let hi = c - (c - a);
    return vec2<f32>(hi, a - hi);
}

// prod_err is a * b - p exactly, for p the rounded product: Dekker's
// error from the halves, whose products are exact.
fn prod_err(a: f32, b: f32, p: f32) -> f32 {
    let as_ = split(a);
    let bs = split(b);
    return ((as_.x * bs.x - p) + as_.x * bs.y + as_.y * bs.x) + as_.y * bs.y;
}

// rem_of is x - c * y for a candidate quotient c near x / y, rounded once
// (x - p is exact there, by Sterbenz).
fn rem_of(x: f32, y: f32, c: f32) -> f32 {
    let p = rounded(c * y);
    return (x - p) - prod_err(c, y, p);
}

// div_rn is x / y rounded to nearest, as torch's f32 division, for x >= 0
// and y > 0: WGSL's division may be off by 2.5 ulps (a GPU may divide by a
// reciprocal and a product), which over a thousand frames of the same f0
// would add up coherently. Of the quotient and the two floats on each side it
// keeps the one with the least remainder, ties to the even one: no step
// depends on how the GPU divides or rounds a product.
fn div_rn(x: f32, y: f32) -> f32 {
    let q = x / y;
    if (!(q > 0.0)) {
        return q; // x = 0; f0 is never negative
    }
    let qb = bitcast<u32>(q);
    var best = q;
    var best_r = abs(rem_of(x, y, q));
    for (var k = 0u; k < 4u; k++) {
        // qb - 2, qb - 1, qb + 1, qb + 2 (q's neighbours, all positive
        // normals for Kokoro's f0 / sr)
        let cb = select(qb + k - 1u, qb + k - 2u, k < 2u);
        let c = bitcast<f32>(cb);
        let r = abs(rem_of(x, y, c));
        if (r < best_r || (r == best_r && (cb & 1u) == 0u)) {
            best = c;
            best_r = r;
        }
    }
    return best;
}

// rad is SineGen's rad_values at upsampled sample j of harmonic h (0-based).
fn rad(j: u32, h: u32) -> f32 {
    let fn_ = f0[j / p.up] * f32(h + 1u);
    var r = fract(div_rn(fn_, p.sr));
    if (j == 0u && (p.flags & FLAG_INIT) != 0u) {
        r += init[h];
    }
    return r;
}

// Linear interpolation's source index as torch computes it (not aligned
// corners): index i0, its neighbour i1 (i0 at the end), and lambda1.
struct Lerp {
    i0: u32,
    i1: u32,
    l1: f32,
}

fn lerp_index(i: u32, ratio: f32, in_size: u32) -> Lerp {
    let src = max(rounded(ratio * (f32(i) + 0.5)) - 0.5, 0.0);
    let i0 = min(u32(floor(src)), in_size - 1u);
    let l1 = clamp(src - f32(i0), 0.0, 1.0);
    return Lerp(i0, select(i0, i0 + 1u, i0 + 1u < in_size), l1);
}

// rad_d[i] of harmonic h: the downsampling interpolation, in torch's order.
fn rad_down(i: u32, h: u32) -> f32 {
    let l = lerp_index(i, p.ratio_down, p.samples);
    return rounded((1.0 - l.l1) * rad(l.i0, h)) + rounded(l.l1 * rad(l.i1, h));
}

// frac(U * r), exact for U <= 4096 and r in [0, 2).
fn frac_times_up(r: f32) -> f32 {
    let head = bitcast<f32>(bitcast<u32>(r) & 0xFFFFF000u);
    let u = f32(p.up);
    return fract(fract(u * head) + u * (r - head));
}

@compute @workgroup_size(WG)
fn sine_phase(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wid.x;
    let chunk = (p.td + WG - 1u) / WG;
    let first = min(lid * chunk, p.td);
    let last = min(first + chunk, p.td);
    var s = 0.0;
    for (var i = first; i < last; i++) {
        s = fract(s + frac_times_up(rad_down(i, h)));
    }
    // Inclusive scan of the chunk sums, modulo 1 (Hillis-Steele).
    tot[lid] = s;
    workgroupBarrier();
    for (var off = 1u; off < WG; off <<= 1u) {
        var v = tot[lid];
        if (lid >= off) {
            v = fract(v + tot[lid - off]);
        }
        workgroupBarrier();
        tot[lid] = v;
        workgroupBarrier();
    }
    var run = 0.0;
    if (lid > 0u) {
        run = tot[lid - 1u];
    }
    let base = h * p.td * 2u;
    for (var i = first; i < last; i++) {
        let r = rad_down(i, h);
        run = fract(run + frac_times_up(r));
        scratch[base + 2u * i] = run;
        scratch[base + 2u * i + 1u] = r;
    }
}

@compute @workgroup_size(WG)
fn sine_gen(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let idx = gid.x + gid.y * nwg.x * WG;
    if (idx >= p.harmonics * p.samples) {
        return;
    }
    let h = idx / p.samples;
    let j = idx % p.samples;
    let l = lerp_index(j, p.ratio_up, p.td);
    let base = h * p.td * 2u;
    var cyc = scratch[base + 2u * l.i0];
    if (l.i1 != l.i0) {
        cyc = fract(cyc + rounded(l.l1 * rounded(f32(p.up) * scratch[base + 2u * l.i1 + 1u])));
    }
    let sine = p.sine_amp * sin(TWO_PI * (cyc - round(cyc)));
    let voiced = f0[j / p.up] > p.threshold;
    var out = select(0.0, sine, voiced);
    if ((p.flags & FLAG_NOISE) != 0u) {
        out += rounded(select(p.sine_amp / 3.0, p.noise_std, voiced) * noise[idx]);
    }
    y[idx] = out;
}
