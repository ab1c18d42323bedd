// The gate values of a mixture of experts' router, shared by moe_route and
// moe_backward (pasted in by their include line, after reduce_common and
// glu_common), so that the backward recomputes exactly the forward's
// values: score[e] for one token's row of logits, the softmax over all
// experts, or each logit's sigmoid. The includer provides logit(i), the
// i-th logit of its logits binding, and the MAX_E constant.

// The router's flags, ops' moeSigmoid, moeRenorm and moeScale: sigmoid
// gates, the chosen weights renormalised, the per-expert scale.
const FLAG_SIGMOID: u32 = 1u;
const FLAG_RENORM: u32 = 2u;
const FLAG_SCALE: u32 = 4u;

var<workgroup> score: array<f32, MAX_E>;

// is_nan tests the bits: a compiler may fold x != x away.
fn is_nan(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

// gate_values fills score[0, p.experts) from the logits at row. Every
// invocation calls it (its reductions hold barriers); it ends with one, so
// every invocation then sees all of score.
fn gate_values(row: u32, lid: u32, sigmoid: bool) {
    var m = LOWEST;
    var s = 0.0;
    for (var e = lid; e < p.experts; e += WG) {
        let l = logit(row + e);
        if (sigmoid) {
            // WGSL's min may drop a NaN (IEEE minNum) and score a NaN
            // logit near 0; it stays NaN, as the reference's does.
            score[e] = select(1.0 / (1.0 + exp(min(-l, EXP_MAX))), l, is_nan(l));
        } else {
            // The running (max, sum of exp) of this invocation's logits.
            let mm = max(m, l);
            s = s * exp(m - mm) + exp(l - mm);
            m = mm;
            score[e] = l;
        }
    }
    if (!sigmoid) {
        let ms = workgroup_max_sumexp(m, s, lid);
        for (var e = lid; e < p.experts; e += WG) {
            score[e] = exp(score[e] - ms.x) / ms.y;
        }
    }
    workgroupBarrier();
}
