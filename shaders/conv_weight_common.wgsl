// weight(i) reads element i of a conv's weights w (binding `w`, u32
// words): f32 bit patterns, or with WF16 = 1 packed f16 pairs, low half
// first. Shared by the conv1d and conv_transpose1d kernels
// (//!include conv_weight_common); the includer declares w and WF16.
fn weight(i: u32) -> f32 {
    if (WF16 == 1u) {
        let pair = unpack2x16float(w[i >> 1u]);
        return select(pair.x, pair.y, (i & 1u) == 1u);
    }
    return bitcast<f32>(w[i]);
}
