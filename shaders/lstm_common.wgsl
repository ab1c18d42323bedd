// What the LSTM kernels share (pasted by //!include lstm_common): the
// parameters ops.LSTM writes (lstmParams) and the cell's squashing
// functions.

struct Params {
    input: u32,
    t: u32,
    dirs: u32,
    _pad: u32,
}

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
