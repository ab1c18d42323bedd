// Workgroup reductions shared by the row kernels (pasted by //!include
// reduce_common): norm, norm_backward, audio_norm, grad_norm, softmax,
// cross_entropy, quantize_q8, matvec_q8, ple, rope_qkv, moe_route, moe_router,
// moe_backward, altup and gaussian_topk. Each combines one value per invocation through shared
// memory in the same pairwise tree, which also keeps the f32 sum of
// thousands of terms accurate, and hands the result to every invocation.
//
// Call them in uniform control flow (every invocation of the workgroup, or
// none: they hold barriers). Each ends with a barrier so that the next call
// may reuse the shared array while no invocation still reads element 0.
// Both arrays come with the include, 12 * WG bytes: 3 KiB at the largest WG
// the includers launch (256), far inside WebGPU's guaranteed 16 KiB
// (moe_router adds its own 8 KiB to them).
//
// Constants: WG, the workgroup size, a power of two (the includer's kernel
// spec sets it).

// The lowest finite f32: the running max of a lane that has seen nothing
// yet. exp(LOWEST - m) underflows to 0 for any real m, and no inf - inf =
// NaN arises when two empty lanes combine (WGSL has no infinity literal
// anyway).
const LOWEST: f32 = -3.40282347e38;

var<workgroup> red: array<f32, WG>;
var<workgroup> red2: array<vec2<f32>, WG>;

// workgroup_sum adds every invocation's v.
fn workgroup_sum(v: f32, lid: u32) -> f32 {
    red[lid] = v;
    workgroupBarrier();
    for (var half = WG / 2u; half > 0u; half >>= 1u) {
        if (lid < half) {
            red[lid] += red[lid + half];
        }
        workgroupBarrier();
    }
    let total = red[0];
    workgroupBarrier();
    return total;
}

// workgroup_sum2 adds every invocation's v, two sums at once.
fn workgroup_sum2(v: vec2<f32>, lid: u32) -> vec2<f32> {
    red2[lid] = v;
    workgroupBarrier();
    for (var half = WG / 2u; half > 0u; half >>= 1u) {
        if (lid < half) {
            red2[lid] += red2[lid + half];
        }
        workgroupBarrier();
    }
    let total = red2[0];
    workgroupBarrier();
    return total;
}

// workgroup_max_sumexp combines every invocation's online softmax state,
// (m, s) with s = sum of exp(v - m) over the values it saw, into the row's
// (max, sum of exp(v - max)).
fn workgroup_max_sumexp(m: f32, s: f32, lid: u32) -> vec2<f32> {
    red2[lid] = vec2<f32>(m, s);
    workgroupBarrier();
    for (var half = WG / 2u; half > 0u; half >>= 1u) {
        if (lid < half) {
            let a = red2[lid];
            let b = red2[lid + half];
            let mm = max(a.x, b.x);
            red2[lid] = vec2<f32>(mm, a.y * exp(a.x - mm) + b.y * exp(b.x - mm));
        }
        workgroupBarrier();
    }
    let total = red2[0];
    workgroupBarrier();
    return total;
}
