// The 8-bit activation arithmetic that quantize_q8 and matvec_q8's own
// quantizing (IN > 0) share, pasted by an include line: one text, so a
// product that quantizes its input itself multiplies by exactly the levels,
// scales and sums quantize_q8 would have written.
//
// The includer declares x (array<vec4<f32>>, the f32 row), p.k (floats to
// quantize) and p.flags (bit 1: a norm's gain is 1 + g; bit 2: the GLU
// takes GELU), and includes reduce_common and glu_common.

// q8_step is a block's scale d = max|x|·(1/127) and the factor its levels
// are taken with, 1/d (0 for a block of zeros): d is amax times the f32
// nearest 1/127, exact to half an ulp on every device, where a quotient is
// only to 2.5 ulp in WGSL.
fn q8_step(amax: f32) -> vec2<f32> {
    let d = amax * (1.0 / 127.0);
    return vec2<f32>(d, select(0.0, 1.0 / d, d > 0.0));
}

// q8_levels is the levels of four values at factor id: round half to even
// (WGSL's round), clamped to -127..127.
fn q8_levels(v: vec4<f32>, id: f32) -> vec4<i32> {
    return clamp(vec4<i32>(round(v * id)), vec4<i32>(-127), vec4<i32>(127));
}

// q8_pack is the two words of four levels q0..q3, offset to u = q + 128, in
// the order the SWAR products want (DOT = 0): u2 | u0 << 16, u3 | u1 << 16
// (matvec_q8 says why). The packed products' word is pack4xI8(q).
fn q8_pack(q: vec4<i32>) -> vec2<u32> {
    let u = vec4<u32>(q + 128);
    return vec2<u32>(u.z | (u.x << 16u), u.w | (u.y << 16u));
}

// q8_glu is act(gate) ⊙ up for four values: SiLU, or GELU's tanh
// approximation with flags bit 2; the values elementwise's glu_fused
// writes.
fn q8_glu(gt: vec4<f32>, up: vec4<f32>) -> vec4<f32> {
    let act = select(
        vec4<f32>(silu(gt.x), silu(gt.y), silu(gt.z), silu(gt.w)),
        vec4<f32>(gelu(gt.x), gelu(gt.y), gelu(gt.z), gelu(gt.w)),
        (p.flags & 4u) != 0u);
    return act * up;
}

// q8_gain is a norm's gain g read as the row is scaled: g, or 1 + g with
// flags bit 1.
fn q8_gain(g: vec4<f32>) -> vec4<f32> {
    return select(g, g + 1.0, (p.flags & 2u) != 0u);
}

// q8_inv_rms is 1/sqrt(mean(x²) + eps) of the row of x from vec4 xb, summed
// by the whole workgroup (uniform control flow): four loads in flight per
// invocation and pass, then reduce_common's tree, the same in every
// workgroup and kernel that calls it, so the same scale.
fn q8_inv_rms(xb: u32, lid: u32, eps: f32) -> f32 {
    let n4 = p.k / 4u;
    var ss = 0.0;
    for (var i = lid; i < n4; i += 4u * WG) {
        let a0 = x[xb + i];
        let a1 = select(vec4<f32>(0.0), x[xb + min(i + WG, n4 - 1u)], i + WG < n4);
        let a2 = select(vec4<f32>(0.0), x[xb + min(i + 2u * WG, n4 - 1u)], i + 2u * WG < n4);
        let a3 = select(vec4<f32>(0.0), x[xb + min(i + 3u * WG, n4 - 1u)], i + 3u * WG < n4);
        ss += (dot(a0, a0) + dot(a1, a1)) + (dot(a2, a2) + dot(a3, a3));
    }
    return inverseSqrt(workgroup_sum(ss, lid) / f32(p.k) + eps);
}
