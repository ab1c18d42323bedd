// The rotation's sine and cosine, shared by rope.wgsl and rope_qkv.wgsl:
// WGSL's sin and cos are guaranteed only inside [-pi, pi], so sincos reduces
// the angle exactly first (see the precision notes in rope.wgsl).

// pi/2 as a sum of five f32s, the first four of 6 significant bits, so that
// k * PIO2_n is exact for every integer |k| < 2^18 and the reduction
// theta - k * pi/2 loses nothing until the last, tiny term (checked against
// a 300-bit reduction for every position below 411774: error <= 6e-8). Exact
// products also make it immune to the compiler fusing a multiply and a
// subtract. The literals are the exact decimal values of the f32s.
const PIO2_1: f32 = 1.5625;
const PIO2_2: f32 = 0.00830078125;
const PIO2_3: f32 = -4.41074371337890625e-06;
const PIO2_4: f32 = -4.3772161006927490234375e-08;
const PIO2_5: f32 = 6.077100628276710381214797962456941604614e-11;
const TWO_OVER_PI: f32 = 0.636619746685028076171875;

// sincos returns (sin t, cos t).
fn sincos(t: f32) -> vec2<f32> {
    let k = round(t * TWO_OVER_PI);
    var r = t - k * PIO2_1;
    r -= k * PIO2_2;
    r -= k * PIO2_3;
    r -= k * PIO2_4;
    r -= k * PIO2_5;
    // |r| <= pi/4 plus the rounding of t * 2/pi: under 0.8, where the first
    // omitted Taylor terms, r^11/11! and r^12/12!, are below 3e-9.
    let r2 = r * r;
    let s = r + r * r2 * (-1.0 / 6.0 + r2 * (1.0 / 120.0 + r2 * (-1.0 / 5040.0 + r2 * (1.0 / 362880.0))));
    let c = 1.0 + r2 * (-0.5 + r2 * (1.0 / 24.0 + r2 * (-1.0 / 720.0 + r2 * (1.0 / 40320.0 + r2 * (-1.0 / 3628800.0)))));
    // t = r + q * pi/2: rotate (s, c) by the quadrant q = k mod 4.
    let q = u32(i32(k)) & 3u;
    var sc = vec2<f32>(s, c);
    if ((q & 1u) != 0u) {
        sc = vec2<f32>(c, -s);
    }
    if ((q & 2u) != 0u) {
        sc = -sc;
    }
    return sc;
}
