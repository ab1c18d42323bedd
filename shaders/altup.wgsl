// Gemma 3n's AltUp over its residual streams (transformers'
// Gemma3nTextAltUp and the stream set-up and merge of Gemma3nTextModel):
// predict and correct around each layer, the per-layer embedding's add to
// the streams beside stream 0, and the RMS matching that makes and merges
// the streams at the ends of the stack.
//
// The streams are stream-major: element e of stream k's row t is at
// (k * tokens + t) * dim + e, so that each stream is one matrix of tokens
// rows, which a matmul reads and writes whole.
//
// One workgroup per token; the grid may wrap into y past 65535 tokens
// (gpu.Grid with one "thread" per token), so the token is wid.x + wid.y *
// nwg.x. Invocations stride over the row by WG (coalesced); sums go
// through reduce_common's pairwise tree.
//
// Every storage binding is read_write so that an entry point may fill the
// slots it does not use with any buffer, and so that altup_add_normed and
// altup_rescale update s in place (each invocation reads the elements it
// then writes, after the reductions that read the row have finished).
//
// Constants: WG, the workgroup size, a power of two.

struct Params {
    tokens: u32,
    dim: u32,
    streams: u32, // at most MAX_STREAMS
    act: u32,     // the active stream: the one the layer computes on
    eps: f32,     // the router's (or the added norm's) RMSNorm eps
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

const MAX_STREAMS: u32 = 8u;
// The mean square a rescaled stream is divided by is at least this
// (transformers: torch.maximum(mean(x^2), 1e-5)).
const MAGNITUDE_EPS: f32 = 1e-5;

@group(0) @binding(0) var<uniform> p: Params;
// The streams: altup_predict's input, altup_correct's output, updated in
// place by altup_add_normed and altup_rescale, read by altup_merge.
@group(0) @binding(1) var<storage, read_write> s: array<f32>;
// A norm's gain (dim): the router's, or the added row's.
@group(0) @binding(2) var<storage, read_write> w: array<f32>;
// The router, streams rows of dim.
@group(0) @binding(3) var<storage, read_write> router: array<f32>;
// The coefficients: streams^2 rows of streams (predict) or streams rows of
// streams (correct).
@group(0) @binding(4) var<storage, read_write> coef: array<f32>;
// The predictions, laid out as s.
@group(0) @binding(5) var<storage, read_write> pred: array<f32>;
// One row a token (tokens x dim): the active prediction (predict's
// output), the layer's output (correct's input), the row to add
// (add_normed), the merged row (merge's output).
@group(0) @binding(6) var<storage, read_write> x: array<f32>;
// correct_output_scale (dim).
@group(0) @binding(7) var<storage, read_write> scale: array<f32>;
// The corrected active stream times scale (tokens x dim).
@group(0) @binding(8) var<storage, read_write> first: array<f32>;

//!include reduce_common

var<workgroup> modality: array<f32, MAX_STREAMS>;
var<workgroup> coefs: array<f32, 64>; // MAX_STREAMS^2

fn token(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.x + wid.y * nwg.x;
}

fn at(k: u32, t: u32) -> u32 {
    return (k * p.tokens + t) * p.dim;
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
// row starting at base of s (src 0) or of x (src 1).
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
            let v = row_value(src, base + e);
            dot += v * inv * w[e] * router[j * p.dim + e];
        }
        let r = workgroup_sum(dot, lid);
        if (lid == 0u) {
            modality[j] = tanh(r / f32(p.dim));
        }
    }
    workgroupBarrier();
}

// pred_i = s_i + sum_j c[i * streams + j] * s_j, c = coef . modality of the
// active stream; x gets the active prediction.
@compute @workgroup_size(WG)
fn altup_predict(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let t = token(wid, nwg);
    if (t >= p.tokens) {
        return; // uniform: the whole workgroup leaves together
    }
    let n = p.streams;
    route(0u, at(p.act, t), lid);
    for (var o = lid; o < n * n; o += WG) {
        var c = 0.0;
        for (var k = 0u; k < n; k++) {
            c += coef[o * n + k] * modality[k];
        }
        coefs[o] = c;
    }
    workgroupBarrier();
    for (var e = lid; e < p.dim; e += WG) {
        var v: array<f32, MAX_STREAMS>;
        for (var j = 0u; j < n; j++) {
            v[j] = s[at(j, t) + e];
        }
        for (var i = 0u; i < n; i++) {
            var y = v[i];
            for (var j = 0u; j < n; j++) {
                y += coefs[i * n + j] * v[j];
            }
            pred[at(i, t) + e] = y;
            if (i == p.act) {
                x[t * p.dim + e] = y;
            }
        }
    }
}

// s_i = pred_i + (coef . modality(x) + 1)_i * (x - pred_active); first =
// s_active * scale.
@compute @workgroup_size(WG)
fn altup_correct(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let t = token(wid, nwg);
    if (t >= p.tokens) {
        return;
    }
    let n = p.streams;
    route(1u, t * p.dim, lid);
    for (var o = lid; o < n; o += WG) {
        var c = 1.0;
        for (var k = 0u; k < n; k++) {
            c += coef[o * n + k] * modality[k];
        }
        coefs[o] = c;
    }
    workgroupBarrier();
    for (var e = lid; e < p.dim; e += WG) {
        let innovation = x[t * p.dim + e] - pred[at(p.act, t) + e];
        for (var i = 0u; i < n; i++) {
            let y = pred[at(i, t) + e] + coefs[i] * innovation;
            s[at(i, t) + e] = y;
            if (i == p.act) {
                first[t * p.dim + e] = y * scale[e];
            }
        }
    }
}

// s_k += rmsnorm(x) * w for every stream k but stream 0.
@compute @workgroup_size(WG)
fn altup_add_normed(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let t = token(wid, nwg);
    if (t >= p.tokens) {
        return;
    }
    var ss = 0.0;
    for (var e = lid; e < p.dim; e += WG) {
        let v = x[t * p.dim + e];
        ss += v * v;
    }
    let inv = inverseSqrt(workgroup_sum(ss, lid) / f32(p.dim) + p.eps);
    for (var e = lid; e < p.dim; e += WG) {
        let y = x[t * p.dim + e] * inv * w[e];
        for (var k = 1u; k < p.streams; k++) {
            s[at(k, t) + e] += y;
        }
    }
}

// factors returns, in modality[k] for k > 0, the factor that brings stream
// k's row t to stream 0's RMS.
fn factors(t: u32, lid: u32) {
    var ss0 = 0.0;
    for (var e = lid; e < p.dim; e += WG) {
        let v = s[at(0u, t) + e];
        ss0 += v * v;
    }
    let target_rms = sqrt(workgroup_sum(ss0, lid) / f32(p.dim));
    for (var k = 1u; k < p.streams; k++) {
        var ss = 0.0;
        for (var e = lid; e < p.dim; e += WG) {
            let v = s[at(k, t) + e];
            ss += v * v;
        }
        let ms = workgroup_sum(ss, lid) / f32(p.dim);
        if (lid == 0u) {
            modality[k] = target_rms / sqrt(max(ms, MAGNITUDE_EPS));
        }
    }
    workgroupBarrier();
}

// Each stream but stream 0 scaled to stream 0's RMS, in place.
@compute @workgroup_size(WG)
fn altup_rescale(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let t = token(wid, nwg);
    if (t >= p.tokens) {
        return;
    }
    factors(t, lid);
    for (var e = lid; e < p.dim; e += WG) {
        for (var k = 1u; k < p.streams; k++) {
            s[at(k, t) + e] *= modality[k];
        }
    }
}

// x = the mean of the streams, each but stream 0 scaled to its RMS.
@compute @workgroup_size(WG)
fn altup_merge(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let t = token(wid, nwg);
    if (t >= p.tokens) {
        return;
    }
    factors(t, lid);
    for (var e = lid; e < p.dim; e += WG) {
        var y = s[at(0u, t) + e];
        for (var k = 1u; k < p.streams; k++) {
            y += s[at(k, t) + e] * modality[k];
        }
        x[t * p.dim + e] = y / f32(p.streams);
    }
}
