// What the float and legacy matmul families share beyond the contract, pasted
// in by their include line (shaders.Source): the activation load, the
// partial-sum array and the tree reduction and store they end with.

fn x4(o: u32) -> vec4<f32> {
    return vec4<f32>(x[o], x[o + 1u], x[o + 2u], x[o + 3u]);
}

// ROWS×TM partial sums per thread (naga wants plain identifiers as array
// sizes). The launch shapes in engine/ops/matmul.go keep WG×NACC floats at
// 8 KiB or less (256×8 float matvec, 256×4 legacy matvec, 64×32 matmul),
// within WebGPU's guaranteed 16 KiB of workgroup memory.
const NACC = ROWS * TM;
const RED_SIZE = WG * NACC;
var<workgroup> red: array<f32, RED_SIZE>;

// reduce_and_store sums each of the NACC partial results acc[i*TM + j] (row
// r0+i, activation row j0+j) over the workgroup's threads in the workgroup
// array red (declared by the including family, NACC*WG floats), then thread q
// writes result q, adding to y when flags bit 0 asks for it.
fn reduce_and_store(lid: u32, acc: ptr<function, array<f32, NACC>>, r0: u32, j0: u32) {
    for (var q = 0u; q < NACC; q++) {
        red[q * WG + lid] = (*acc)[q];
    }
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            for (var q = 0u; q < NACC; q++) {
                red[q * WG + lid] += red[q * WG + lid + s];
            }
        }
        workgroupBarrier();
    }
    // Thread q writes output (row q / TM, activation row q % TM).
    let r = r0 + lid / TM;
    let j = j0 + lid % TM;
    if (lid < NACC && r < p.n && j < p.m) {
        let yi = p.y_offset + j * p.y_stride + p.row0 + r;
        var out = red[lid * WG];
        if ((p.flags & 1u) != 0u) {
            out += y[yi];
        }
        y[yi] = out;
    }
}
