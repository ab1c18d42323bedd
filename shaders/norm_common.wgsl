// What the row norms (norm.wgsl) and RMSNorm's backward (norm_backward.wgsl)
// share (pasted by //!include norm_common): the parameters ops writes
// (normParams), the weight flags, and the gain each column is multiplied by.
// The includer binds p and w and gives flag 4 its own meaning.

struct Params {
    rows: u32,
    dim: u32,
    eps: f32,
    flags: u32, // FLAG_* below, and the includer's 4u and up
    scale: f32, // rmsnorm_add's FLAG_SCALE
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

// Flags: a weight is bound; the weight is applied as 1 + w (Gemma stores
// its norm weights minus one).
const FLAG_WEIGHT: u32 = 1u;
const FLAG_ONE_PLUS: u32 = 2u;

// gain is what column j is multiplied by after normalising.
fn gain(j: u32) -> f32 {
    if ((p.flags & FLAG_WEIGHT) == 0u) {
        return 1.0;
    }
    if ((p.flags & FLAG_ONE_PLUS) != 0u) {
        return 1.0 + w[j];
    }
    return w[j];
}
