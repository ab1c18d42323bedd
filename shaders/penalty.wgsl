// Repetition penalties applied in place to a logits vector before sampling:
// llama.cpp's repeat penalty (a positive logit divided by it, a negative one
// multiplied, so both move toward "less likely") and OpenAI's frequency and
// presence penalties (logit -= count * frequency + presence). The sampler
// lists each token of its recent history once with its count, so one
// invocation owns one logit: ids must be unique, or two invocations would
// race on the same element.
//
// Constants: WG, the workgroup size.

struct Params {
    n: u32,     // entries of ids and counts
    vocab: u32, // logits[0, vocab); ids at or past it are skipped
    repeat: f32,
    frequency: f32,
    presence: f32,
    _p0: u32,
    _p1: u32,
    _p2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> logits: array<f32>;
@group(0) @binding(2) var<storage, read> ids: array<u32>;
@group(0) @binding(3) var<storage, read> counts: array<u32>;

// EXP_MASK selects an f32's exponent bits; all ones is ±inf or NaN.
const EXP_MASK: u32 = 0x7f800000u;

// logits[ids[i]] penalised for counts[i] occurrences, i < n; the grid may
// wrap into y.
@compute @workgroup_size(WG)
fn penalize(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if (i >= p.n) {
        return;
    }
    let id = ids[i];
    let count = counts[i];
    if (id >= p.vocab || count == 0u) {
        return;
    }
    let v = logits[id];
    // A masked (-inf) logit must stay masked. IEEE arithmetic would keep
    // ±inf and NaN as they are, but WGSL lets implementations assume no
    // infinities occur, so the kernel leaves them untouched explicitly.
    if ((bitcast<u32>(v) & EXP_MASK) == EXP_MASK) {
        return;
    }
    var r = v / p.repeat;
    if (v <= 0.0) {
        r = v * p.repeat;
    }
    logits[id] = r - (f32(count) * p.frequency + p.presence);
}
