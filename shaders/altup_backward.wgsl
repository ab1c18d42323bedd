// Backward of altup.wgsl's predict, correct and merge for the LoRA
// training step (engine/ops/ref's AltUpPredictBackward,
// AltUpCorrectBackward, AltUpMergeBackward): the gradients of each
// forward's activations; the weights are frozen. Layouts, the packed
// weights and the router: altup_common. Sums go through reduce_common's
// pairwise tree. Every binding is read_write so that an entry point may
// fill the slots it does not use with any buffer.
//
// Constants: WG, the workgroup size, a power of two.

@group(0) @binding(0) var<uniform> p: Params;
// The forward's streams: predict's input s, correct's predictions, or
// merge's unembedded streams.
@group(0) @binding(1) var<storage, read_write> s: array<f32>;
// The layer's weights packed (altup_common).
@group(0) @binding(2) var<storage, read_write> wts: array<f32>;
// correct's x (the block's output), one row a token.
@group(0) @binding(3) var<storage, read_write> x: array<f32>;
// The streams' gradient (predict's dpred, correct's dout).
@group(0) @binding(4) var<storage, read_write> dstreams: array<f32>;
// A row gradient added in: correct's dfirst, predict's dactive; merge's
// dout.
@group(0) @binding(5) var<storage, read_write> drow: array<f32>;
// The gradient of the streams input (predict's ds, correct's dpred,
// merge's du).
@group(0) @binding(6) var<storage, read_write> ds: array<f32>;
// correct's dx, one row a token.
@group(0) @binding(7) var<storage, read_write> dx: array<f32>;

//!include reduce_common
//!include altup_common

var<workgroup> dcoefs: array<f32, 64>;
var<workgroup> dmod: array<f32, MAX_STREAMS>;

// router_k finishes the router's backward: with dmod set, it sets norm_k.y
// to the RMS norm's backward factor k = inv^2 mean(w dxn x) of the row, so
// that the row's gradient is inv (w dxn - x k), dxn = sum_k dr_k router_k /
// dim and dr_k = dmod_k (1 - modality_k^2) (router_dxn).
fn router_k(src: u32, base: u32, lid: u32) {
    var sd = 0.0;
    for (var e = lid; e < p.dim; e += WG) {
        sd += w(e) * router_dxn(e) * row_value(src, base + e);
    }
    let total = workgroup_sum(sd, lid);
    if (lid == 0u) {
        norm_k.y = norm_k.x * norm_k.x * total / f32(p.dim);
    }
    workgroupBarrier();
}

fn router_dxn(e: u32) -> f32 {
    var v = 0.0;
    for (var k = 0u; k < p.streams; k++) {
        let m = modality[k];
        v += dmod[k] * (1.0 - m * m) * router(k * p.dim + e);
    }
    return v / f32(p.dim);
}

// The router's gradient of element e of the row whose value is xe.
fn router_grad(e: u32, xe: f32) -> f32 {
    return norm_k.x * (w(e) * router_dxn(e) - xe * norm_k.y);
}

// ds_j = dp_j + sum_i c[i*N+j] dp_i, dp the predictions' gradient (dactive
// added to the active one), plus the router's path into the active stream.
@compute @workgroup_size(WG)
fn altup_predict_backward(
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
    // dc_ij = sum_e dp_i s_j, one reduction each.
    for (var o = 0u; o < n * n; o++) {
        let i = o / n;
        let j = o % n;
        var v = 0.0;
        for (var e = lid; e < p.dim; e += WG) {
            v += dpred(i, t, e) * s[at(j, t) + e];
        }
        let r = workgroup_sum(v, lid);
        if (lid == 0u) {
            dcoefs[o] = r;
        }
    }
    workgroupBarrier();
    for (var k = lid; k < n; k += WG) {
        var v = 0.0;
        for (var o = 0u; o < n * n; o++) {
            v += dcoefs[o] * predict_coef(o * n + k);
        }
        dmod[k] = v;
    }
    workgroupBarrier();
    let base = at(p.act, t);
    router_k(0u, base, lid);
    for (var e = lid; e < p.dim; e += WG) {
        for (var j = 0u; j < n; j++) {
            var v = dpred(j, t, e);
            for (var i = 0u; i < n; i++) {
                v += coefs[i * n + j] * dpred(i, t, e);
            }
            if (j == p.act) {
                v += router_grad(e, s[base + e]);
            }
            ds[at(j, t) + e] = v;
        }
    }
}

// The predictions' gradient: dstreams, with drow (dactive) added to the
// active stream when bound.
fn dpred(i: u32, t: u32, e: u32) -> f32 {
    var v = dstreams[at(i, t) + e];
    if (i == p.act && p.has_row != 0u) {
        v += drow[t * p.dim + e];
    }
    return v;
}

// g_i = dout_i (+ dfirst * scale on the active stream); dpred_i = g_i, less
// sum_i c_i g_i on the active stream; dx = sum_i c_i g_i plus the router's
// path through dc_i = g_i . (x - pred_active).
@compute @workgroup_size(WG)
fn altup_correct_backward(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let t = token(wid, nwg);
    if (t >= p.tokens) {
        return;
    }
    let n = p.streams;
    let row = t * p.dim;
    route(1u, row, lid);
    correct_coefs(lid);
    for (var i = 0u; i < n; i++) {
        var v = 0.0;
        for (var e = lid; e < p.dim; e += WG) {
            v += dout_g(i, t, e) * (x[row + e] - s[at(p.act, t) + e]);
        }
        let r = workgroup_sum(v, lid);
        if (lid == 0u) {
            dcoefs[i] = r;
        }
    }
    workgroupBarrier();
    for (var k = lid; k < n; k += WG) {
        var v = 0.0;
        for (var i = 0u; i < n; i++) {
            v += dcoefs[i] * correct_coef(i * n + k);
        }
        dmod[k] = v;
    }
    workgroupBarrier();
    router_k(1u, row, lid);
    for (var e = lid; e < p.dim; e += WG) {
        var dd = 0.0;
        for (var i = 0u; i < n; i++) {
            let g = dout_g(i, t, e);
            dd += coefs[i] * g;
            ds[at(i, t) + e] = g;
        }
        ds[at(p.act, t) + e] -= dd;
        dx[row + e] = dd + router_grad(e, x[row + e]);
    }
}

// correct's g_i: the corrected streams' gradient, with dfirst * scale on
// the active stream when bound.
fn dout_g(i: u32, t: u32, e: u32) -> f32 {
    var v = dstreams[at(i, t) + e];
    if (i == p.act && p.has_row != 0u) {
        v += drow[t * p.dim + e] * scale(e);
    }
    return v;
}

// With T = rms(s_0), M_k = sqrt(max(ms(s_k), 1e-5)) and g = dout / N:
// ds_k = (T/M_k) g - (g . s_k) T s_k / (dim M_k^3) (the last term where
// ms(s_k) > 1e-5), ds_0 = g + sum_k (g . s_k) s_0 / (dim T M_k) (where T >
// 0). dout is drow.
@compute @workgroup_size(WG)
fn altup_merge_backward(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let t = token(wid, nwg);
    if (t >= p.tokens) {
        return;
    }
    let n = p.streams;
    let d = f32(p.dim);
    let inv_n = 1.0 / f32(n);
    var ss0 = 0.0;
    for (var e = lid; e < p.dim; e += WG) {
        let v = s[at(0u, t) + e];
        ss0 += v * v;
    }
    let tr = sqrt(workgroup_sum(ss0, lid) / d);
    // modality[k] = mean square of s_k, dmod[k] = g . s_k.
    for (var k = 1u; k < n; k++) {
        var ss = 0.0;
        var gs = 0.0;
        for (var e = lid; e < p.dim; e += WG) {
            let v = s[at(k, t) + e];
            ss += v * v;
            gs += drow[t * p.dim + e] * inv_n * v;
        }
        let r = workgroup_sum2(vec2<f32>(ss, gs), lid);
        if (lid == 0u) {
            modality[k] = r.x / d;
            dmod[k] = r.y;
        }
    }
    workgroupBarrier();
    for (var e = lid; e < p.dim; e += WG) {
        let g = drow[t * p.dim + e] * inv_n;
        var d0 = g;
        for (var k = 1u; k < n; k++) {
            let ms = modality[k];
            let mk = sqrt(max(ms, MAGNITUDE_EPS));
            let sk = s[at(k, t) + e];
            var v = tr / mk * g;
            if (ms > MAGNITUDE_EPS) {
                v -= dmod[k] * tr * sk / (d * mk * mk * mk);
            }
            ds[at(k, t) + e] = v;
            if (tr > 0.0) {
                d0 += dmod[k] * s[at(0u, t) + e] / (d * tr * mk);
            }
        }
        ds[at(0u, t) + e] = d0;
    }
}
