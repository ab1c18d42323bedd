// The gate of a mixture-of-experts layer: each token's router logits (one
// per expert, from the router's projection) to the experts it runs and
// their weights.
//
//   softmax gating (Qwen 3 MoE, gpt-oss, Mixtral, Gemma 4 26B-A4B):
//     p_e = exp(l_e - max) / sum_e' exp(l_e' - max)
//   sigmoid gating (DeepSeek-style routers):
//     p_e = 1 / (1 + exp(-l_e))
//   then the TOPK largest p_e (ties to the lower expert index), each weight
//   p_e, divided by their sum with FLAG_RENORM (norm_topk_prob; softmax over
//   the chosen logits, gpt-oss's and Mixtral's order, is the same weights),
//   times scale[e] with FLAG_SCALE (Gemma 4's per-expert scale). With
//   FLAG_BIAS each logit l_e is read as l_e + bias[e] (gpt-oss's router
//   bias), the logits left as they are.
//
// One workgroup per token; the grid may wrap into y past 65535 tokens. The
// token's scores stay in workgroup memory (MAX_E of them), and the k rounds
// of selection are k workgroup argmax reductions, the chosen score set to
// LOWEST after each. ids and weights are [tokens, topk].
//
// Constants: WG, the workgroup size, a power of two; MAX_E, the most
// experts; MAX_K, the most chosen a token.

struct Params {
    tokens: u32,
    experts: u32,
    topk: u32,
    flags: u32,
}

// moe_common has flags 1, 2 and 4.
const FLAG_BIAS: u32 = 8u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> scale: array<f32>;
@group(0) @binding(3) var<storage, read_write> ids: array<u32>;
@group(0) @binding(4) var<storage, read_write> weights: array<f32>;
// read_write like the others, so logits can fill the slot when unbiased.
@group(0) @binding(5) var<storage, read_write> bias: array<f32>;

//!include reduce_common
//!include glu_common
//!include moe_common

fn logit(i: u32) -> f32 {
    if ((p.flags & FLAG_BIAS) != 0u) {
        return logits[i] + bias[i % p.experts];
    }
    return logits[i];
}
var<workgroup> best_v: array<f32, WG>;
var<workgroup> best_i: array<u32, WG>;
var<workgroup> chosen: array<f32, MAX_K>; // the chosen experts' p, by round
var<workgroup> chosen_i: array<u32, MAX_K>; // and their ids

@compute @workgroup_size(WG)
fn moe_route(
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

    // The gating scores.
    gate_values(row, lid, sigmoid);

    // k rounds of argmax; each winner leaves the running.
    var sum = 0.0;
    for (var k = 0u; k < p.topk; k++) {
        var v = LOWEST;
        var i = 0xffffffffu;
        for (var e = lid; e < p.experts; e += WG) {
            if (score[e] > v) {
                v = score[e];
                i = e;
            }
        }
        best_v[lid] = v;
        best_i[lid] = i;
        workgroupBarrier();
        for (var half = WG / 2u; half > 0u; half >>= 1u) {
            if (lid < half) {
                let ov = best_v[lid + half];
                let oi = best_i[lid + half];
                if (ov > best_v[lid] || (ov == best_v[lid] && oi < best_i[lid])) {
                    best_v[lid] = ov;
                    best_i[lid] = oi;
                }
            }
            workgroupBarrier();
        }
        // NaN logits win no comparison and leave no index: the expert
        // stays in range (0), and its NaN weight carries on.
        let win = min(best_i[0], p.experts - 1u);
        let pv = best_v[0];
        workgroupBarrier();
        if (lid == 0u) {
            chosen[k] = pv;
            chosen_i[k] = win;
            score[win] = LOWEST;
        }
        sum += pv;
        workgroupBarrier();
    }

    for (var k = lid; k < p.topk; k += WG) {
        var w = chosen[k];
        if ((p.flags & FLAG_RENORM) != 0u) {
            w = w / sum;
        }
        if ((p.flags & FLAG_SCALE) != 0u) {
            w = w * scale[chosen_i[k]];
        }
        ids[t * p.topk + k] = chosen_i[k];
        weights[t * p.topk + k] = w;
    }
}
