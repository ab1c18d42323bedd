// One AdamW step over a flat f32 parameter buffer, as torch.optim.AdamW
// (amsgrad off) computes it, per element:
//
//   g  = grad * grad_scale * clip        (clip = clip[1] of grad_norm.wgsl, or 1)
//   p  = p * (1 - lr * weight_decay)     (decoupled weight decay, first)
//   m  = lerp(m, g, 1 - beta1)            (= beta1 * m + (1 - beta1) * g)
//   v  = beta2 * v + (1 - beta2) * g^2
//   p  = p - step_size * m / (sqrt(v) / sqrt_bc2 + eps)
//
// with step_size = lr / (1 - beta1^t) and sqrt_bc2 = sqrt(1 - beta2^t)
// computed by the host in float64 (PyTorch computes them in Python floats
// too), like 1 - lr * weight_decay, 1 - beta1 and 1 - beta2. One invocation per element; the grid may wrap into y past 65535
// workgroups. The clip factor comes from a buffer so that it can be computed
// on the GPU in the same chain (no readback between norm and step).
//
// Constants: WG, the workgroup size.

struct Params {
    n: u32,
    flags: u32, // FLAG_CLIP: read the clip factor from clip[1]
    grad_scale: f32,
    decay: f32, // 1 - lr * weight_decay
    beta1: f32,
    beta2: f32,
    step_size: f32,
    sqrt_bc2: f32,
    eps: f32,
    one_minus_beta1: f32, // 1 - beta1 and 1 - beta2 rounded once from float64,
    one_minus_beta2: f32, // as PyTorch passes them: 1 - f32(0.999) is 1.3e-5 off
    _p0: u32,
}

const FLAG_CLIP: u32 = 1u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> param: array<f32>;
@group(0) @binding(2) var<storage, read_write> grad: array<f32>;
@group(0) @binding(3) var<storage, read_write> m: array<f32>;
@group(0) @binding(4) var<storage, read_write> v: array<f32>;
@group(0) @binding(5) var<storage, read_write> clip: array<f32>;

@compute @workgroup_size(WG)
fn adamw(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if (i >= p.n) {
        return;
    }
    var scale = p.grad_scale;
    if ((p.flags & FLAG_CLIP) != 0u) {
        scale *= clip[1];
    }
    let g = grad[i] * scale;
    // PyTorch's lerp, both branches: the weight's side of 0.5 picks the
    // form whose rounding stays small.
    let w1 = p.one_minus_beta1;
    let m0 = m[i];
    let mi = select(g - (g - m0) * (1.0 - w1), m0 + w1 * (g - m0), w1 < 0.5);
    let vi = p.beta2 * v[i] + p.one_minus_beta2 * (g * g);
    m[i] = mi;
    v[i] = vi;
    let denom = sqrt(vi) / p.sqrt_bc2 + p.eps;
    param[i] = param[i] * p.decay - p.step_size * (mi / denom);
}
