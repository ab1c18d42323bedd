// Gemma 3n's activation sparsity (transformers' Gemma3nTextMLP
// ._gaussian_topk): each row of gate values keeps what lies above its mean
// plus mult population standard deviations, less that cutoff,
// max(g - (mean + mult * std), 0), in place, before the GELU.
//
// Rows are stride floats apart and the gate is the first n of each (the
// fused [gate | up] rows have stride 2n). One workgroup per row; the grid
// may wrap into y past 65535 rows, so the row is wid.x + wid.y * nwg.x. The
// mean and then the squared deviations from it go through reduce_common's
// pairwise tree (two passes: the one-pass E[g^2] - E[g]^2 loses the
// variance to cancellation when the mean is large).
//
// gaussian_topk_backward is the backward (the training step's): with the
// mask of the kept values, S = sum mask dy, mean m and std sd,
// dg = mask dy - S/n - S mult (g - m)/(n sd), over the gate values only
// (dg's rest of each stride is left as it is; dg may be dy).
//
// Constants: WG, the workgroup size, a power of two.

struct Params {
    rows: u32,
    n: u32,
    stride: u32,
    mult: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> g: array<f32>;
// gaussian_topk_backward's: the output's gradient and the input's.
@group(0) @binding(2) var<storage, read_write> dy: array<f32>;
@group(0) @binding(3) var<storage, read_write> dg: array<f32>;

//!include reduce_common

// mean_std is the row at base's mean and population standard deviation,
// in two passes (the variance from the centred values).
fn mean_std(base: u32, lid: u32) -> vec2<f32> {
    var sum = 0.0;
    for (var j = lid; j < p.n; j += WG) {
        sum += g[base + j];
    }
    let mean = workgroup_sum(sum, lid) / f32(p.n);
    var ss = 0.0;
    for (var j = lid; j < p.n; j += WG) {
        let d = g[base + j] - mean;
        ss += d * d;
    }
    return vec2<f32>(mean, sqrt(workgroup_sum(ss, lid) / f32(p.n)));
}

@compute @workgroup_size(WG)
fn gaussian_topk(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let r = wid.x + wid.y * nwg.x;
    if (r >= p.rows) {
        return; // uniform: the whole workgroup leaves together
    }
    let base = r * p.stride;
    let ms = mean_std(base, lid);
    let cut = ms.x + p.mult * ms.y;
    for (var j = lid; j < p.n; j += WG) {
        g[base + j] = max(g[base + j] - cut, 0.0);
    }
}

@compute @workgroup_size(WG)
fn gaussian_topk_backward(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let r = wid.x + wid.y * nwg.x;
    if (r >= p.rows) {
        return;
    }
    let base = r * p.stride;
    let ms = mean_std(base, lid);
    let mean = ms.x;
    let sd = ms.y;
    let cut = mean + p.mult * sd;
    var kept = 0.0;
    for (var j = lid; j < p.n; j += WG) {
        if (g[base + j] - cut > 0.0) {
            kept += dy[base + j];
        }
    }
    let s_kept = workgroup_sum(kept, lid);
    for (var j = lid; j < p.n; j += WG) {
        var v = -s_kept / f32(p.n);
        if (sd > 0.0) {
            v -= s_kept * p.mult * (g[base + j] - mean) / (f32(p.n) * sd);
        }
        if (g[base + j] - cut > 0.0) {
            v += dy[base + j];
        }
        dg[base + j] = v;
    }
}
