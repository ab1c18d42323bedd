// tanh_safe, shared by every family that squashes with tanh (pasted by
// //!include tanh_common): elementwise, audio_activation, cross_entropy's
// soft-cap and the LSTM cells.
//
// tanh for any finite argument. The textbook (e^2z - 1) / (e^2z + 1)
// overflows to inf / inf = NaN past |z| ~ 44, and some backends' built-in
// tanh is written that way (the seed's May 2026 bug surfaced at gate values
// of 40). Here the exponential only ever sees -2|z| <= 0, so it stays in
// (0, 1]. Below |z| = 0.25 that form would lose bits to the cancellation in
// 1 - e, so the odd Taylor series takes over; its first omitted term,
// 1382 z^11 / 155925, is under 3e-9 there, below half an f32 ulp of tanh.
// (Lavapipe's built-in tanh has that cancellation: 1.3e-5 relative error for
// small arguments, against 1.2e-7 here.)
fn tanh_safe(z: f32) -> f32 {
    let z2 = z * z;
    let series = z * (1.0 + z2 * (-1.0 / 3.0 + z2 * (2.0 / 15.0 + z2 * (-17.0 / 315.0 + z2 * (62.0 / 2835.0)))));
    let e = exp(-2.0 * abs(z));
    let tail = sign(z) * (1.0 - e) / (1.0 + e);
    return select(tail, series, abs(z) < 0.25);
}
