// The activations of the gated linear units, shared by the families that
// apply them (pasted in by their include line): elementwise (act, glu,
// glu_fused), ple (Gemma 4's gate), moe_route (its sigmoid gates' EXP_MAX),
// the quantized matvecs' matvec_glu_ entries, which apply them to x as
// they stage it, and q8_common's q8_glu (quantize_q8, matvec_q8). One text, so the fused product multiplies by exactly the
// values glu_fused would have written.

// EXP_MAX bounds the argument of exp in the sigmoids below: e^88 ~ 1.65e38 is
// still finite in f32 (whose exp overflows past 88.72), so x / (1 + e) is a
// tiny number, |x| * 6e-39, instead of x / inf. WGSL lets implementations
// assume no infinities occur, so the kernels never create one on purpose.
const EXP_MAX: f32 = 88.0;

// silu(x) = x * sigmoid(x).
fn silu(v: f32) -> f32 {
    return v / (1.0 + exp(min(-v, EXP_MAX)));
}

// gpt-oss's gated unit (transformers' GptOssExperts, llama.cpp's
// swiglu_oai): the gate clamped above at OAI_LIMIT and up to ±OAI_LIMIT,
// then gate · sigmoid(OAI_ALPHA · gate) · (up + 1). Not a product of an
// activation of the gate with up, so the GLU kernels call it on the pair.
const OAI_ALPHA: f32 = 1.702;
const OAI_LIMIT: f32 = 7.0;

fn glu_oai(g: f32, u: f32) -> f32 {
    let x = min(g, OAI_LIMIT);
    let y = clamp(u, -OAI_LIMIT, OAI_LIMIT);
    return x / (1.0 + exp(min(-OAI_ALPHA * x, EXP_MAX))) * (y + 1.0);
}

// GELU's tanh approximation, 0.5 v (1 + tanh(u)) with
// u = sqrt(2/pi) (v + 0.044715 v^3), written as v * sigmoid(2u): the same
// function, since 0.5 (1 + tanh(u)) = 1 / (1 + e^-2u), but with no tanh to
// saturate and full relative precision in the negative tail, where
// 1 + tanh(u) would cancel to nothing. v^3 overflows only past |v| ~ 7e12,
// and then the clamp keeps the quotient finite as well.
fn gelu(v: f32) -> f32 {
    let u = 0.7978845608028654 * (v + 0.044715 * v * v * v);
    return v / (1.0 + exp(min(-2.0 * u, EXP_MAX)));
}
