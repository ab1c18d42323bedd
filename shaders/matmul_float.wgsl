// Matrix products with float weights (F32, F16, BF16): y = W·x (matvec_<type>,
// decode) and Y = X·Wᵀ (matmul_<type>, prefill). W is one row chunk of a GGUF
// tensor read as u32 words: F16 as packed pairs through unpack2x16float (no
// shader-f16 feature needed), BF16 as the upper half of an f32.
//
// Constants: WG invocations per workgroup (a power of two, at least
// ROWS*TM), ROWS output rows per workgroup, TM activation rows per workgroup
// (1 for matvec). Grid: x (+ y past 65535) walks groups of ROWS rows, z walks
// tiles of TM activation rows.
//
// All WG threads stride over units of 8 elements (32 bytes of F32, 16 of F16)
// so neighbouring threads read neighbouring bytes; each thread loads its
// unit of x once for all ROWS rows and each weight unit once for all TM
// activation rows (the split matmul_legacy.wgsl explains), and thread 0 sums
// the k mod 8 tail.

//!include matmul_common
//!include matmul_reduce

// ggml type ids, used as a compile-time selector: each entry point passes a
// literal, so after inlining only one decoder survives.
const F32 = 0u;
const F16 = 1u;
const BF16 = 30u;

// Element e (counted from the chunk's first element) of the weights.
fn elem(qt: u32, e: u32) -> f32 {
    switch qt {
        case F32: { return bitcast<f32>(w[e]); }
        case F16: { return unpack2x16float(w[e >> 1u] >> ((e & 1u) * 16u)).x; }
        default: { return bitcast<f32>(((w[e >> 1u] >> ((e & 1u) * 16u)) & 0xffffu) << 16u); }
    }
}

// The two half-precision elements packed in one word.
fn pair(qt: u32, word: u32) -> vec2<f32> {
    if (qt == F16) {
        return unpack2x16float(word);
    }
    return vec2<f32>(bitcast<f32>(word << 16u), bitcast<f32>(word & 0xffff0000u));
}

// Eight consecutive weights, in two vec4 registers (a scalar array written
// through a pointer spills to local memory on NVIDIA).
struct Unit {
    a: vec4<f32>,
    b: vec4<f32>,
}

// load8 reads elements e..e+7. A half-precision row starts on a word
// boundary only when row*k is even, so an odd k falls back to single halves.
fn load8(qt: u32, e: u32) -> Unit {
    if (qt == F32) {
        return Unit(
            bitcast<vec4<f32>>(vec4<u32>(w[e], w[e + 1u], w[e + 2u], w[e + 3u])),
            bitcast<vec4<f32>>(vec4<u32>(w[e + 4u], w[e + 5u], w[e + 6u], w[e + 7u])));
    }
    if ((e & 1u) == 0u) {
        let i = e >> 1u;
        return Unit(
            vec4<f32>(pair(qt, w[i]), pair(qt, w[i + 1u])),
            vec4<f32>(pair(qt, w[i + 2u]), pair(qt, w[i + 3u])));
    }
    return Unit(
        vec4<f32>(elem(qt, e), elem(qt, e + 1u), elem(qt, e + 2u), elem(qt, e + 3u)),
        vec4<f32>(elem(qt, e + 4u), elem(qt, e + 5u), elem(qt, e + 6u), elem(qt, e + 7u)));
}

fn matmul_body(qt: u32, lid: u32, wid: vec3<u32>, nwg: vec3<u32>) {
    let r0 = (wid.x + wid.y * nwg.x) * ROWS;
    let j0 = wid.z * TM;
    let nu = p.k / 8u;

    var acc: array<f32, NACC>;
    for (var u = lid; u < nu; u += WG) {
        var xa: array<vec4<f32>, TM>;
        var xb: array<vec4<f32>, TM>;
        for (var j = 0u; j < TM; j++) {
            if (j0 + j < p.m) {
                let xo = (j0 + j) * p.x_stride + 8u * u;
                xa[j] = x4(xo);
                xb[j] = x4(xo + 4u);
            }
        }
        for (var i = 0u; i < ROWS; i++) {
            if (r0 + i < p.n) {
                let v = load8(qt, (r0 + i) * p.k + 8u * u);
                for (var j = 0u; j < TM; j++) {
                    acc[i * TM + j] += dot(v.a, xa[j]) + dot(v.b, xb[j]);
                }
            }
        }
    }
    if (lid == 0u) {
        for (var i = 0u; i < ROWS; i++) {
            if (r0 + i < p.n) {
                for (var c = 8u * nu; c < p.k; c++) {
                    let wv = elem(qt, (r0 + i) * p.k + c);
                    for (var j = 0u; j < TM; j++) {
                        if (j0 + j < p.m) {
                            acc[i * TM + j] += wv * x[(j0 + j) * p.x_stride + c];
                        }
                    }
                }
            }
        }
    }

    reduce_and_store(lid, &acc, r0, j0);
}

@compute @workgroup_size(WG)
fn matvec_f32(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_body(F32, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matmul_f32(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_body(F32, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_f16(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_body(F16, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matmul_f16(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_body(F16, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matvec_bf16(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_body(BF16, lid, wid, nwg);
}

@compute @workgroup_size(WG)
fn matmul_bf16(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    matmul_body(BF16, lid, wid, nwg);
}
