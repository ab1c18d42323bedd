// What altup.wgsl and altup_backward.wgsl share (pasted by //!include
// altup_common): the params, the stream-major indexing, the layer's AltUp
// weights packed in one buffer (ops.PackAltUp: the router norm's gain
// (dim), the router (streams rows of dim), the prediction coefficients
// (streams^3), the correction coefficients (streams^2), the correction
// scale (dim)), and the router.
//
// The includer declares the bindings s (streams) and x (one row a token)
// and wts (the packed weights), the uniform p, and includes reduce_common.
// Streams are stream-major: element e of stream k's row t is at
// (k * tokens + t) * dim + e. One workgroup per token; the grid may wrap
// into y past 65535 tokens, so the token is wid.x + wid.y * nwg.x.

struct Params {
    tokens: u32,
    dim: u32,
    streams: u32, // at most MAX_STREAMS
    act: u32,     // the active stream: the one the layer computes on
    eps: f32,     // the router's (or the added norm's) RMSNorm eps
    has_row: u32, // backward: a row gradient is bound (see altup_backward)
    _pad0: u32,
    _pad1: u32,
}

const MAX_STREAMS: u32 = 8u;
// The mean square a rescaled stream is divided by is at least this
// (transformers: torch.maximum(mean(x^2), 1e-5)).
const MAGNITUDE_EPS: f32 = 1e-5;

var<workgroup> modality: array<f32, MAX_STREAMS>;
var<workgroup> coefs: array<f32, 64>; // MAX_STREAMS^2
// The router row's inverse RMS, and the norm backward's factor.
var<workgroup> norm_k: vec2<f32>;

fn token(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.x + wid.y * nwg.x;
}

fn at(k: u32, t: u32) -> u32 {
    return (k * p.tokens + t) * p.dim;
}

// The packed weights. w is also the gain of altup_add_normed, whose wts is
// that norm's weight alone.
fn w(e: u32) -> f32 {
    return wts[e];
}

fn router(i: u32) -> f32 {
    return wts[p.dim + i];
}

fn predict_coef(i: u32) -> f32 {
    return wts[p.dim * (1u + p.streams) + i];
}

fn correct_coef(i: u32) -> f32 {
    return wts[p.dim * (1u + p.streams) + p.streams * p.streams * p.streams + i];
}

fn scale(e: u32) -> f32 {
    return wts[p.dim * (1u + p.streams) + p.streams * p.streams * (p.streams + 1u) + e];
}

// row_value is element i of s (src 0) or x (src 1). A branch, not select,
// which would read both: index i of s lies past the end of x.
fn row_value(src: u32, i: u32) -> f32 {
    if (src == 0u) {
        return s[i];
    }
    return x[i];
}

// route fills modality with tanh(router . (rmsnorm(row) * w / dim)) for the
// row at base of s (src 0) or of x (src 1), and norm_k.x with the row's
// inverse RMS.
fn route(src: u32, base: u32, lid: u32) {
    var ss = 0.0;
    for (var e = lid; e < p.dim; e += WG) {
        let v = row_value(src, base + e);
        ss += v * v;
    }
    let inv = inverseSqrt(workgroup_sum(ss, lid) / f32(p.dim) + p.eps);
    for (var j = 0u; j < p.streams; j++) {
        var dot = 0.0;
        for (var e = lid; e < p.dim; e += WG) {
            dot += row_value(src, base + e) * inv * w(e) * router(j * p.dim + e);
        }
        let r = workgroup_sum(dot, lid);
        if (lid == 0u) {
            modality[j] = tanh(r / f32(p.dim));
        }
    }
    if (lid == 0u) {
        norm_k.x = inv;
    }
    workgroupBarrier();
}

// predict_coefs fills coefs with the prediction's c = coef . modality
// (streams^2 values); correct_coefs with the correction's coef . modality
// + 1 (streams values).
fn predict_coefs(lid: u32) {
    let n = p.streams;
    for (var o = lid; o < n * n; o += WG) {
        var c = 0.0;
        for (var k = 0u; k < n; k++) {
            c += predict_coef(o * n + k) * modality[k];
        }
        coefs[o] = c;
    }
    workgroupBarrier();
}

fn correct_coefs(lid: u32) {
    let n = p.streams;
    for (var o = lid; o < n; o += WG) {
        var c = 1.0;
        for (var k = 0u; k < n; k++) {
            c += correct_coef(o * n + k) * modality[k];
        }
        coefs[o] = c;
    }
    workgroupBarrier();
}
