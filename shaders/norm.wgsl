// Row normalisations: RMSNorm and LayerNorm over each of rows rows of dim
// floats, with an optional weight (plain w, or Gemma's 1 + w) and, for
// LayerNorm, an optional bias. A whole vector is one row.
//
// One workgroup per row; the grid may wrap into y past 65535 rows (gpu.Grid
// with one "thread" per row), so the row is wid.x + wid.y * nwg.x. Each
// invocation strides over the row by WG, which keeps neighbouring
// invocations on neighbouring floats (coalesced), and the workgroup combines
// its partial sums in shared memory, pairwise, which also keeps the f32 sum
// of thousands of squares accurate.
//
// Every storage binding is read_write so that one buffer may fill several
// slots: y may be x (in place), and an absent weight or bias is filled by x
// (never read). WebGPU allows one buffer in several writable bindings of a
// dispatch, unlike a read-only and a writable one. In place is race-free:
// every read of the row happens before the reductions finish, and in the
// final pass each invocation reads x[i] just before writing y[i] itself.
//
// Constants: WG, the workgroup size, a power of two.

//!include norm_common

// A bias is bound (LayerNorm).
const FLAG_BIAS: u32 = 4u;
// rmsnorm_add only: also z = rmsnorm(y) * gain2 of the updated row.
const FLAG_NEXT: u32 = 8u;
// rmsnorm_add: the updated row is multiplied by p.scale (Gemma 4's layer
// output scale, after its last residual add).
const FLAG_SCALE: u32 = 16u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> b: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
// rmsnorm_add's next norm: its weight and its output.
@group(0) @binding(5) var<storage, read_write> w2: array<f32>;
@group(0) @binding(6) var<storage, read_write> z: array<f32>;

//!include reduce_common

// rms_inv is 1 / sqrt(mean(x^2) + eps) of the row at base; every
// invocation of the workgroup must call it (it synchronises them).
fn rms_inv(base: u32, lid: u32) -> f32 {
    var ss = 0.0;
    for (var j = lid; j < p.dim; j += WG) {
        let v = x[base + j];
        ss += v * v;
    }
    return inverseSqrt(workgroup_sum(ss, lid) / f32(p.dim) + p.eps);
}

// y = x / sqrt(mean(x^2) + eps) * gain.
@compute @workgroup_size(WG)
fn rmsnorm(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let row = wid.x + wid.y * nwg.x;
    if (row >= p.rows) {
        return; // uniform: the whole workgroup leaves together
    }
    let base = row * p.dim;
    let inv = rms_inv(base, lid);
    for (var j = lid; j < p.dim; j += WG) {
        y[base + j] = x[base + j] * inv * gain(j);
    }
}

// y += x / sqrt(mean(x^2) + eps) * gain: a post-norm's residual add (Gemma
// 2/3 normalise an attention or feed-forward output before adding it to the
// residual stream) in one dispatch; with FLAG_NEXT also the norm that
// follows it, z = y / sqrt(mean(y^2) + eps) * gain2 of the updated row,
// summed in rmsnorm's order (each invocation over its own stride, which it
// wrote itself, then the same tree), so z is what rmsnorm would give. y must
// not be x: the first pass would otherwise read values the last already
// changed in another invocation.
@compute @workgroup_size(WG)
fn rmsnorm_add(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let row = wid.x + wid.y * nwg.x;
    if (row >= p.rows) {
        return;
    }
    let base = row * p.dim;
    let inv = rms_inv(base, lid);
    var ss = 0.0;
    let scaled = (p.flags & FLAG_SCALE) != 0u;
    for (var j = lid; j < p.dim; j += WG) {
        var v = y[base + j] + x[base + j] * inv * gain(j);
        if (scaled) {
            v = v * p.scale;
        }
        y[base + j] = v;
        ss += v * v;
    }
    if ((p.flags & FLAG_NEXT) == 0u) {
        return; // uniform
    }
    let inv2 = inverseSqrt(workgroup_sum(ss, lid) / f32(p.dim) + p.eps);
    for (var j = lid; j < p.dim; j += WG) {
        var g = w2[j];
        if ((p.flags & FLAG_ONE_PLUS) != 0u) {
            g = 1.0 + g;
        }
        z[base + j] = y[base + j] * inv2 * g;
    }
}

// y = (x - mean) / sqrt(var + eps) * gain + bias.
//
// Two things keep this accurate when the mean is large against the spread
// (a residual stream with an offset of 1e3 and a spread of 1): the variance
// is a second pass over the centred values rather than mean(x^2) - mean^2,
// which would cancel catastrophically; and the values are first shifted by
// the row's first element, so the sums see the spread, not the offset (x - x0
// is exact when the two are within a factor of two), and the mean of the
// shifted values is small and exact enough to centre them.
@compute @workgroup_size(WG)
fn layernorm(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let row = wid.x + wid.y * nwg.x;
    if (row >= p.rows) {
        return;
    }
    let base = row * p.dim;
    let x0 = x[base];
    var s = 0.0;
    for (var j = lid; j < p.dim; j += WG) {
        s += x[base + j] - x0;
    }
    let mean = workgroup_sum(s, lid) / f32(p.dim); // of x - x0
    var ss = 0.0;
    for (var j = lid; j < p.dim; j += WG) {
        let d = (x[base + j] - x0) - mean;
        ss += d * d;
    }
    let inv = inverseSqrt(workgroup_sum(ss, lid) / f32(p.dim) + p.eps);
    let has_bias = (p.flags & FLAG_BIAS) != 0u;
    for (var j = lid; j < p.dim; j += WG) {
        var v = ((x[base + j] - x0) - mean) * inv * gain(j);
        if (has_bias) {
            v += b[j];
        }
        y[base + j] = v;
    }
}
