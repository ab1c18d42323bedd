// G[R×K] = α·Aᵀ·B (+ G), with A M×R and B M×K row-major f32: a sum over M
// rows of outer products a_mᵀ·b_m. It is the weight gradient of a LoRA
// adapter, summed over a batch of M tokens: dA = dHᵀ·X (R×K) for
// h = x·Aᵀ, and dB = scale·dYᵀ·H (N×R) for y += scale·h·Bᵀ.
//
// Tiling: a workgroup owns a TILE×TILE block of G and walks M in steps of
// TILE rows, staging the step's TILE×TILE slices of A and B in shared memory
// (coalesced: consecutive threads load consecutive floats of a row); each of
// the 16×16 threads then accumulates its 2×2 outputs, rows tr and tr+16,
// columns tk and tk+16 of the block, so neighbouring threads read
// neighbouring shared floats. Each staged float is reused 32 times. M has no
// limit (the loop walks it); G's size only sets the grid.
//
// Grid: x walks column blocks (K/32), y row blocks (R/32); neither reaches
// 65535 for any K that fits a binding. Constants: none beyond TILE = 32 and
// 256 invocations, fixed here because the 2×2-per-thread split depends on
// them.

struct Params {
    r: u32,        // rows of G: columns of A
    k: u32,        // columns of G: columns of B
    m: u32,        // rows of A and B: the sum axis
    a_stride: u32, // floats between rows of A
    b_stride: u32, // floats between rows of B
    g_stride: u32, // floats between rows of G
    a_offset: u32, // float index of A's element (0, 0)
    b_offset: u32, // float index of B's element (0, 0)
    g_offset: u32, // float index of G's element (0, 0)
    alpha: f32,    // multiplies the product
    flags: u32,    // bit 0: add to G
    _p0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> g: array<f32>;

const TILE: u32 = 32u;
const HALF: u32 = 16u;
const TT: u32 = 1024u; // TILE * TILE

var<workgroup> as_: array<f32, TT>;
var<workgroup> bs: array<f32, TT>;

@compute @workgroup_size(256)
fn matmul_tn(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let r0 = wid.y * TILE;
    let k0 = wid.x * TILE;
    let tr = lid / HALF;
    let tk = lid % HALF;

    var acc = mat2x2<f32>(0.0, 0.0, 0.0, 0.0); // acc[c][r]: column tk + 16c, row tr + 16r
    for (var m0 = 0u; m0 < p.m; m0 += TILE) {
        if (m0 > 0u) {
            workgroupBarrier(); // the previous step's reads are done
        }
        // Stage rows m0..m0+31: thread lid loads floats lid, lid+256, ...
        // of each 32×32 slice, zero past M, R or K.
        for (var q = lid; q < TT; q += 256u) {
            let i = q / TILE;
            let c = q % TILE;
            var va = 0.0;
            var vb = 0.0;
            if (m0 + i < p.m) {
                if (r0 + c < p.r) {
                    va = a[p.a_offset + (m0 + i) * p.a_stride + r0 + c];
                }
                if (k0 + c < p.k) {
                    vb = b[p.b_offset + (m0 + i) * p.b_stride + k0 + c];
                }
            }
            as_[q] = va;
            bs[q] = vb;
        }
        workgroupBarrier();
        let steps = min(TILE, p.m - m0);
        for (var i = 0u; i < steps; i++) {
            let av = vec2<f32>(as_[i * TILE + tr], as_[i * TILE + tr + HALF]);
            let bv = vec2<f32>(bs[i * TILE + tk], bs[i * TILE + tk + HALF]);
            acc += mat2x2<f32>(av * bv.x, av * bv.y);
        }
    }

    for (var ci = 0u; ci < 2u; ci++) {
        let col = k0 + tk + HALF * ci;
        for (var ri = 0u; ri < 2u; ri++) {
            let row = r0 + tr + HALF * ri;
            if (row < p.r && col < p.k) {
                let gi = p.g_offset + row * p.g_stride + col;
                var v = p.alpha * acc[ci][ri];
                if ((p.flags & 1u) != 0u) {
                    v += g[gi];
                }
                g[gi] = v;
            }
        }
    }
}
