// The backward of a mixture of experts' gate and combine, for LoRA
// training through an MoE layer (the experts' own products go back through
// matmul_backward_input's backward_moe_ entries).
//
// moe_combine_backward, for out[t] = scale · Σ_k w[s]·y[s] (s = t·used + k;
// shaders/moe_combine.wgsl) and the gradient dout of out: each slot's
//   dy[s] = scale · w[s] · dout[t]          (rows of p.dim)
//   dw[s] = scale · Σ_i dout[t, i] · y[s, i]
// One workgroup per slot; the grid may wrap into y.
//
// moe_route_backward, for moe_route's weights and the gradient dw of them,
// the choice held fixed: with p the gate values (recomputed from the
// logits: softmax over all, or each sigmoid) and q = p at the chosen
// experts, a weight is sc·q/S (S = Σ q with FLAG_RENORM, else 1; sc the
// per-expert scale with FLAG_SCALE, else 1), so
//   dq = sc·dw  (less Σ_j w_j·dq_j, over S, with FLAG_RENORM)
//   dl_e = p_e · (dq_e − Σ_k q_k·dq_k)     softmax (dq_e 0 unless chosen)
//   dl_e = dq_e · p_e · (1 − p_e)           sigmoid
// One workgroup per token; the grid may wrap into y.
//
// Bindings are shared by both entries (a family has one layout): a, b, c
// read, d and e written (e read as the per-expert scale by the router's).
// Constants: WG, the workgroup size, a power of two; MAX_E, MAX_K as
// moe_route's.

struct Params {
    tokens: u32,
    experts: u32, // moe_route_backward; moe_combine_backward: the row width
    topk: u32,    // experts used a token
    flags: u32,
    scale: f32,   // moe_combine_backward's
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read> c: array<f32>;
@group(0) @binding(3) var<storage, read> c_u32: array<u32>;
@group(0) @binding(4) var<storage, read_write> d: array<f32>;
@group(0) @binding(5) var<storage, read_write> e: array<f32>;

//!include reduce_common
//!include glu_common
//!include moe_common

fn logit(i: u32) -> f32 {
    return a[i];
}

// a = y (slots × dim), b = w (slots), c = dout (tokens × dim); d = dy, e = dw.
@compute @workgroup_size(WG)
fn moe_combine_backward(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let s = wid.x + wid.y * nwg.x;
    if (s >= p.tokens * p.topk) {
        return; // uniform: the whole workgroup leaves together
    }
    let dim = p.experts;
    let t = s / p.topk;
    let ws = p.scale * b[s];
    var acc = 0.0;
    for (var i = lid; i < dim; i += WG) {
        let g = c[t * dim + i];
        acc += g * a[s * dim + i];
        d[s * dim + i] = ws * g;
    }
    let sum = workgroup_sum(acc, lid);
    if (lid == 0u) {
        e[s] = p.scale * sum;
    }
}

var<workgroup> dq: array<f32, MAX_E>; // dq, 0 where unchosen
var<workgroup> qdq: f32;

// a = logits (tokens × experts), b = dw (tokens × topk), c = ids (u32,
// tokens × topk); d = dlogits; e = the per-expert scale.
@compute @workgroup_size(WG)
fn moe_route_backward(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let t = wid.x + wid.y * nwg.x;
    if (t >= p.tokens) {
        return; // uniform: the whole workgroup leaves together
    }
    let row = t * p.experts;
    let sigmoid = (p.flags & FLAG_SIGMOID) != 0u;
    for (var i = lid; i < p.experts; i += WG) {
        dq[i] = 0.0;
    }
    // score: the gate values p, as the forward computed them.
    gate_values(row, lid, sigmoid);
    // The chosen few by one invocation, in choice order (the reference's).
    if (lid == 0u) {
        let k0 = t * p.topk;
        var sum = 1.0;
        if ((p.flags & FLAG_RENORM) != 0u) {
            sum = 0.0;
            for (var k = 0u; k < p.topk; k++) {
                sum += score[c_u32[k0 + k]];
            }
        }
        var wdw = 0.0;
        for (var k = 0u; k < p.topk; k++) {
            let id = c_u32[k0 + k];
            var dw = b[k0 + k];
            if ((p.flags & FLAG_SCALE) != 0u) {
                dw *= e[id];
            }
            dq[id] = dw;
            wdw += score[id] / sum * dw;
        }
        var acc = 0.0;
        for (var k = 0u; k < p.topk; k++) {
            let id = c_u32[k0 + k];
            if ((p.flags & FLAG_RENORM) != 0u) {
                dq[id] = (dq[id] - wdw) / sum;
            }
            acc += score[id] * dq[id];
        }
        qdq = acc;
    }
    workgroupBarrier();
    for (var i = lid; i < p.experts; i += WG) {
        if (sigmoid) {
            d[row + i] = dq[i] * score[i] * (1.0 - score[i]);
        } else {
            d[row + i] = score[i] * (dq[i] - qdq);
        }
    }
}
