// Gemma 3n's AltUp over its residual streams (transformers'
// Gemma3nTextAltUp and the stream set-up and merge of Gemma3nTextModel):
// predict and correct around each layer, the per-layer embedding's add to
// the streams beside stream 0, and the RMS matching that makes and merges
// the streams at the ends of the stack. Layouts, the packed weights and the
// router: altup_common.
//
// Invocations stride over the row by WG (coalesced); sums go through
// reduce_common's pairwise tree. Every storage binding is read_write so
// that an entry point may fill the slots it does not use with any buffer,
// and so that altup_add_normed and altup_rescale update s in place (each
// invocation reads the elements it then writes, after the reductions that
// read the row have finished).
//
// Constants: WG, the workgroup size, a power of two.

@group(0) @binding(0) var<uniform> p: Params;
// The streams: altup_predict's input, altup_correct's output, updated in
// place by altup_add_normed and altup_rescale, read by altup_merge.
@group(0) @binding(1) var<storage, read_write> s: array<f32>;
// The layer's weights packed (altup_common); altup_add_normed's norm gain.
@group(0) @binding(2) var<storage, read_write> wts: array<f32>;
// The predictions, laid out as s.
@group(0) @binding(3) var<storage, read_write> pred: array<f32>;
// One row a token (tokens x dim): the active prediction (predict's
// output), the layer's output (correct's input), the row to add
// (add_normed), the merged row (merge's output).
@group(0) @binding(4) var<storage, read_write> x: array<f32>;
// The corrected active stream times the correction scale (tokens x dim).
@group(0) @binding(5) var<storage, read_write> first: array<f32>;

//!include reduce_common
//!include altup_common

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
    predict_coefs(lid);
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
    route(1u, t * p.dim, lid);
    correct_coefs(lid);
    for (var e = lid; e < p.dim; e += WG) {
        let innovation = x[t * p.dim + e] - pred[at(p.act, t) + e];
        for (var i = 0u; i < p.streams; i++) {
            let y = pred[at(i, t) + e] + coefs[i] * innovation;
            s[at(i, t) + e] = y;
            if (i == p.act) {
                first[t * p.dim + e] = y * scale(e);
            }
        }
    }
}

// s_k += rmsnorm(x) * w for every stream k but stream 0 (wts is the norm's
// gain alone).
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
        let y = x[t * p.dim + e] * inv * w(e);
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
