// What the LSTM kernels share (pasted by //!include lstm_common): the
// parameters ops.LSTM writes (lstmParams) and the cell's sigmoid. The cell's
// tanh_safe is tanh_common's, which the families that run the cell include
// beside this one (an included file includes nothing further).

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
