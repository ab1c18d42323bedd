// The integer products' output (matvec_q8, matmul_q8), pasted by an include
// line: one text for how a result reaches y.
//
// The includer declares p.flags (bit 0: accumulate into y; bit 5: add the
// row's bias, engine/ops.q8OutputFlags), p.row0 (the chunk's first row),
// bias and y.

// put_y writes v, the result of the chunk's weight row r, to y[yi], plus
// bias[p.row0 + r] with flags bit 5, added to what y holds with bit 0.
fn put_y(yi: u32, r: u32, v: f32) {
    var out = v;
    if ((p.flags & 32u) != 0u) {
        out += bias[p.row0 + r];
    }
    if ((p.flags & 1u) != 0u) {
        y[yi] += out;
    } else {
        y[yi] = out;
    }
}
