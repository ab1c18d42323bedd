// A decoded token's router with the feed-forward's RMSNorm before it, in
// one dispatch (Qwen 3 MoE, gpt-oss):
//   xn = x ⊙ gain / sqrt(mean(x²) + eps)   (gain 1 + g with flags bit 1)
//   logits[e] = W[e] · xn
// where the pass would otherwise run norm.rmsnorm and then the F32 router
// product, two dependent dispatches. Every workgroup sums x² itself (k
// floats from L2, as the matvec_normed_ entries do) and serves ROWS
// experts; workgroup 0 also writes xn, which the experts' gate-up product
// reads after the route. xn is x·inv·gain in rmsnorm's order.
//
// Constants: WG, the workgroup size, a power of two; ROWS, experts a
// workgroup. k is a multiple of 4 (x, gain and W's rows read as vec4s).

struct Params {
    k: u32,
    experts: u32,
    eps: f32,
    flags: u32,
}

const FLAG_ONE_PLUS: u32 = 2u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> g: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> logits: array<f32>;
@group(0) @binding(5) var<storage, read_write> xn: array<vec4<f32>>;

//!include reduce_common

// The experts' partial sums, one tree for all ROWS of them (reduce_common's
// workgroup_sum would take a tree of barriers per expert).
var<workgroup> sums: array<array<f32, WG>, ROWS>;

@compute @workgroup_size(WG)
fn moe_router_normed(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let r0 = (wid.x + wid.y * nwg.x) * ROWS;
    let kv = p.k / 4u;

    var ss = 0.0;
    for (var v = lid; v < kv; v += WG) {
        let a = x[v];
        ss += dot(a, a);
    }
    let inv = inverseSqrt(workgroup_sum(ss, lid) / f32(p.k) + p.eps);

    var acc: array<f32, ROWS>;
    for (var v = lid; v < kv; v += WG) {
        var gv = g[v];
        if ((p.flags & FLAG_ONE_PLUS) != 0u) {
            gv += 1.0;
        }
        let xv = x[v] * inv * gv;
        if (r0 == 0u) {
            xn[v] = xv;
        }
        for (var r = 0u; r < ROWS; r++) {
            if (r0 + r < p.experts) {
                acc[r] += dot(w[(r0 + r) * kv + v], xv);
            }
        }
    }
    for (var r = 0u; r < ROWS; r++) {
        sums[r][lid] = acc[r];
    }
    workgroupBarrier();
    for (var h = WG / 2u; h > 0u; h >>= 1u) {
        if (lid < h) {
            for (var r = 0u; r < ROWS; r++) {
                sums[r][lid] += sums[r][lid + h];
            }
        }
        workgroupBarrier();
    }
    if (lid < ROWS && r0 + lid < p.experts) {
        logits[r0 + lid] = sums[lid][0];
    }
}
