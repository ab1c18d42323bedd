// Rotary position embedding, in place on x = [tokens, heads, head_dim] f32.
//
// Pair i (i < rope_dims / 2) of every head rotates by theta_i = pos * freq_i
// (/ factor_i when a factors buffer is bound), with
// freq_i = base^(-2i / rope_dims) * freq_scale, and is then multiplied by
// mscale (YaRN's and LongRoPE's attention scaling, 1 otherwise: exact). NeoX style pairs dims
// (i, i + rope_dims/2), normal style (2i, 2i + 1); dims from rope_dims on pass
// through untouched. Token t sits at pos0 + t, or at positions[t] when a
// positions buffer is bound. One invocation per pair; the grid may wrap into
// y past 65535 workgroups, so the linear index is
// gid.x + gid.y * num_workgroups.x * WG.
//
// Precision. theta is an f32, as in llama.cpp and in Hugging Face's
// transformers (position_ids.float() * inv_freq): at position 131072 an f32
// theta is only good to ulp(131072) / 2 = 0.008 rad, and every
// implementation shares that. This kernel adds as little as it can on top:
//   - freq_i comes from two tables the host computes in float64 and rounds,
//     lo[i % 16] * hi[i / 16], within 1.5 ulps of the exact value. WGSL's
//     pow is exp2(y * log2(x)), allowed 3 + 2|y log2 x| ulps (41 for base
//     5e5): up to half a radian at position 131072 for the fast pairs.
//   - sin and cos are not the built-ins: WGSL guarantees those only inside
//     [-pi, pi] (absolute error 2^-11). On an NVIDIA H200 through Vulkan the
//     built-ins erred by 0.013 at theta ~ 1e5 and by 0.038 at 4e5 (measured
//     against float64 sin of the same f32 theta). sincos() below reduces
//     theta exactly (Cody-Waite) and evaluates Taylor polynomials: 1.0e-7
//     on the same machine and on lavapipe, for any |theta| < 2^18 * pi/2 =
//     411774.
//
// x is the only buffer written; the factors and positions slots are filled
// with x itself when absent (never read), which is allowed because all three
// bindings are read_write: WebGPU refuses a buffer bound both read-only and
// writable in a dispatch, not one bound writable twice.
//
// Constants: WG, the workgroup size.

struct Params {
    tokens: u32,
    heads: u32,
    head_dim: u32,
    rope_dims: u32,
    pos0: u32,
    flags: u32, // FLAG_* below
    mscale: f32,
    _p1: u32,
    // lo[b] = base^(-2b / rope_dims), hi[a] = base^(-32a / rope_dims) * freq_scale,
    // 16 each, packed in vec4s since uniform arrays have a 16-byte stride.
    lo: array<vec4<f32>, 4>,
    hi: array<vec4<f32>, 4>,
}

const FLAG_NEOX: u32 = 1u;
const FLAG_FACTORS: u32 = 2u;
const FLAG_POSITIONS: u32 = 4u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> factors: array<f32>;
@group(0) @binding(3) var<storage, read_write> positions: array<u32>;

//!include rope_common

@compute @workgroup_size(WG)
fn rope(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let half = p.rope_dims / 2u;
    let idx = gid.x + gid.y * nwg.x * WG;
    if (idx >= p.tokens * p.heads * half) {
        return;
    }
    let i = idx % half;
    let th = idx / half; // token * heads + head
    let t = th / p.heads;

    var pos = p.pos0 + t;
    if ((p.flags & FLAG_POSITIONS) != 0u) {
        pos = positions[t];
    }
    let freq = p.lo[(i % 16u) / 4u][i % 4u] * p.hi[i / 64u][(i / 16u) % 4u];
    var theta = f32(pos) * freq;
    if ((p.flags & FLAG_FACTORS) != 0u) {
        theta = theta / factors[i];
    }
    let sc = sincos(theta) * p.mscale;

    let base = th * p.head_dim;
    var i0 = base + 2u * i;
    var i1 = i0 + 1u;
    if ((p.flags & FLAG_NEOX) != 0u) {
        i0 = base + i;
        i1 = i0 + half;
    }
    let a = x[i0];
    let b = x[i1];
    x[i0] = a * sc.y - b * sc.x;
    x[i1] = a * sc.x + b * sc.y;
}
