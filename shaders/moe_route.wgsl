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
// token's scores stay in workgroup memory (MAX_E of them). The selection
// ranks every expert at once: an expert's rank is the number of experts
// ahead of it (a larger score, or an equal one at a lower index), and the
// experts ranked below TOPK are the chosen, in rank order, the order k
// rounds of argmax would take them. That is one pass over the scores and
// two barriers, where k argmax reductions cost k·log2(WG) barriers (the
// profile gives a decoded token's router about 11 µs a layer either way
// on an H100, docs/moe.md §5: mostly the wait on the product before it).
// Scores are compared as order_key's integers, a total order, so the
// ranks are distinct even with NaN among them. ids and weights are
// [tokens, topk].
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
var<workgroup> key: array<u32, MAX_E>; // order_key of each score
var<workgroup> chosen: array<f32, MAX_K>; // the chosen experts' p, by rank
var<workgroup> chosen_i: array<u32, MAX_K>; // and their ids

// order_key maps a score to a u32 whose unsigned order is the floats' order
// (negative floats' bits reversed under the positives'). Every NaN, of
// either sign, keys above every number, so a NaN logit's expert is chosen
// and its NaN weight carries on to the layer's output rather than
// vanishing from it.
fn order_key(v: f32) -> u32 {
    if (is_nan(v)) {
        return 0xffffffffu;
    }
    let b = bitcast<u32>(v);
    if ((b & 0x80000000u) != 0u) {
        return ~b;
    }
    return b | 0x80000000u;
}

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
    for (var e = lid; e < p.experts; e += WG) {
        key[e] = order_key(score[e]);
    }
    workgroupBarrier();

    // Each expert's rank; the first TOPK take their slots.
    for (var e = lid; e < p.experts; e += WG) {
        let ke = key[e];
        var r = 0u;
        for (var o = 0u; o < p.experts && r < p.topk; o++) {
            let ko = key[o];
            if (ko > ke || (ko == ke && o < e)) {
                r++;
            }
        }
        if (r < p.topk) {
            chosen[r] = score[e];
            chosen_i[r] = e;
        }
    }
    workgroupBarrier();

    // The sum in rank order, as the rounds of argmax added it.
    var sum = 0.0;
    for (var k = 0u; k < p.topk; k++) {
        sum += chosen[k];
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
