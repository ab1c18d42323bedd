package ops

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// matmulTNParams mirrors Params in shaders/matmul_tn.wgsl.
type matmulTNParams struct {
	R, K, M                   uint32
	AStride, BStride, GStride uint32
	AOffset, BOffset, GOffset uint32
	Alpha                     float32
	Flags                     uint32
	_                         uint32
}

// matmulTNTile is the side of the G block one workgroup owns (fixed in the
// WGSL, whose 256 threads each keep 2×2 of it).
const matmulTNTile = 32

// MatMulTNOptions scale the product and place the operands inside bigger
// buffers. Zero values mean the dense default.
type MatMulTNOptions struct {
	// Accumulate adds the product to G: gradients summed over several
	// micro-batches, or over the row tiles of one batch.
	Accumulate bool
	// Alpha multiplies the product (a LoRA's scale for dB); 0 means 1.
	Alpha float32
	// AStride, BStride and GStride are the float distances between rows;
	// 0 means r, k and k. A slice of a fused projection's gradient (the Q
	// part of a fused QKV dY) is A with a stride and an offset.
	AStride, BStride, GStride int
	// AOffset, BOffset and GOffset are the float indices of element (0, 0).
	AOffset, BOffset, GOffset int
}

// MatMulTN appends G[r×k] = α·Aᵀ·B for A m×r and B m×k, row-major f32: the
// sum over m rows of the outer products a_iᵀ·b_i. It is the weight gradient
// of a LoRA adapter over a batch of m tokens: dA = dHᵀ·X for h = x·Aᵀ, and
// dB = scale·dYᵀ·H for y += scale·h·Bᵀ. G must not alias A or B.
func MatMulTN(c *gpu.Chain, a, b, g *gpu.Buffer, m, r, k int, o MatMulTNOptions) error {
	const kernel = "matmul_tn"
	if m <= 0 || r <= 0 || k <= 0 {
		return fmt.Errorf("ops: %s: shape m=%d, r=%d, k=%d must be positive", kernel, m, r, k)
	}
	as, bs, gs := o.AStride, o.BStride, o.GStride
	if as == 0 {
		as = r
	}
	if bs == 0 {
		bs = k
	}
	if gs == 0 {
		gs = k
	}
	if as < r || bs < k || gs < k {
		return fmt.Errorf("ops: %s: strides a=%d (< r=%d?), b=%d (< k=%d?), g=%d (< k=%d?) would overlap rows", kernel, as, r, bs, k, gs, k)
	}
	if o.AOffset < 0 || o.BOffset < 0 || o.GOffset < 0 {
		return fmt.Errorf("ops: %s: offsets %d, %d, %d must not be negative", kernel, o.AOffset, o.BOffset, o.GOffset)
	}
	aEnd := uint64(o.AOffset) + uint64(m-1)*uint64(as) + uint64(r)
	bEnd := uint64(o.BOffset) + uint64(m-1)*uint64(bs) + uint64(k)
	gEnd := uint64(o.GOffset) + uint64(r-1)*uint64(gs) + uint64(k)
	if aEnd > math.MaxUint32 || bEnd > math.MaxUint32 || gEnd > math.MaxUint32 {
		return fmt.Errorf("ops: %s: m=%d, r=%d, k=%d overflow 32-bit indexing", kernel, m, r, k)
	}
	if err := needF32(kernel, "a", a, int(aEnd)); err != nil {
		return err
	}
	if err := needF32(kernel, "b", b, int(bEnd)); err != nil {
		return err
	}
	if err := needF32(kernel, "g", g, int(gEnd)); err != nil {
		return err
	}
	if g == a || g == b {
		return fmt.Errorf("ops: %s: g %q aliases an input", kernel, g.Label())
	}
	grid := [3]uint32{uint32((k + matmulTNTile - 1) / matmulTNTile), uint32((r + matmulTNTile - 1) / matmulTNTile), 1}
	if grid[0] > 65535 || grid[1] > 65535 {
		return fmt.Errorf("ops: %s: r=%d, k=%d need a %dx%d grid, over the 65535-workgroup limit", kernel, r, k, grid[0], grid[1])
	}
	alpha := o.Alpha
	if alpha == 0 {
		alpha = 1
	}
	var flags uint32
	if o.Accumulate {
		flags = matmulAccumulate
	}
	return dispatch(c, gpu.Spec("matmul_tn", "matmul_tn"), matmulTNParams{
		R: uint32(r), K: uint32(k), M: uint32(m),
		AStride: uint32(as), BStride: uint32(bs), GStride: uint32(gs),
		AOffset: uint32(o.AOffset), BOffset: uint32(o.BOffset), GOffset: uint32(o.GOffset),
		Alpha: alpha, Flags: flags,
	}, grid, a, b, g)
}
