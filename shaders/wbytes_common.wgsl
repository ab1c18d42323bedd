// Byte access into the weight words w (array<u32>, the includer's
// binding) for block formats that are only 2-byte aligned (the legacy
// blocks, Q3_K 110 bytes, Q6_K 210), and the Q4_K/Q5_K packed scales,
// pasted in by the include line of matmul_legacy, matmul_kquant and
// matvec_q8.

// load16 is the 16 bytes at any even byte offset b, as 4 little-endian
// words. It always reads the fifth word (select, not a branch: lanes of one
// warp decode blocks of both alignments) and uses it only when b is not a
// multiple of 4. Where a field ends with its block (Q8_0's second half),
// that word may lie past the end of the buffer for its last block: WGSL's
// bounds-checked read then returns some value, which the select drops.
fn load16(b: u32) -> vec4<u32> {
    let i = b >> 2u;
    let a = vec4<u32>(w[i], w[i + 1u], w[i + 2u], w[i + 3u]);
    let next = vec4<u32>(a.yzw, w[i + 4u]);
    let sh = (b & 3u) * 8u;
    // A shift by 32 - 0 wraps to 0 in WGSL; select drops that lane.
    return select((a >> vec4<u32>(sh)) | (next << vec4<u32>(32u - sh)), a, sh == 0u);
}

// byte_at is the byte at byte offset b.
fn byte_at(b: u32) -> u32 {
    return (w[b >> 2u] >> ((b & 3u) * 8u)) & 0xffu;
}

// f16_at is the binary16 at the even byte offset b, widened to f32.
fn f16_at(b: u32) -> f32 {
    return unpack2x16float(w[b >> 2u] >> ((b & 2u) * 8u)).x;
}

// scale_min_k4 is ggml's get_scale_min_k4: the 6-bit scale and min of
// sub-block j (0..7) from the 12 bytes in s. Both of ggml's cases are
// computed and one selected: lanes of a warp decode different sub-blocks,
// and a branch would run both paths anyway.
fn scale_min_k4(j: u32, s: vec3<u32>) -> vec2<u32> {
    let a = kbyte(s, j);
    let c = kbyte(s, j + 4u);
    let e = kbyte(s, j & 3u); // byte j - 4 when j >= 4
    let lo = vec2<u32>(a & 63u, c & 63u);
    let hi = vec2<u32>((c & 15u) | ((e >> 6u) << 4u), (c >> 4u) | ((a >> 6u) << 4u));
    return select(hi, lo, j < 4u);
}

fn kbyte(s: vec3<u32>, i: u32) -> u32 {
    return (s[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu;
}
