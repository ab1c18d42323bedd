package ops

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/gguf"
)

// matmulBackwardParams mirrors Params in shaders/matmul_backward_input.wgsl.
type matmulBackwardParams struct {
	K, N, M, Row0      uint32
	DYStride, DXStride uint32
	DYOffset, DXOffset uint32
	Flags              uint32
	Scale              float32
	SplitRows, Splits  uint32
}

// The backward launch: 64 threads own 8 columns each (512 columns of dX per
// workgroup) for 8 activation rows, staging 64 rows of dY per step (8×64
// floats, 2 KiB of shared memory). Each decoded unit of 8 weights is reused
// for 8 activation rows, the same reuse as the forward prefill tiles; the 16
// vec4 accumulators per thread stay in registers. Not yet tuned on a GPU
// (BenchmarkMatMulBackwardInput is there for that).
const (
	matmulBackwardWG = 64
	matmulBackwardTM = 8
	matmulBackwardNS = 64
)

// matmulBackwardTypes are the weight types MatMulBackwardInput decodes,
// with their entry point suffix.
var matmulBackwardTypes = map[gguf.Type]string{
	gguf.TypeF32: "f32", gguf.TypeF16: "f16", gguf.TypeBF16: "bf16",
	gguf.TypeQ4_0: "q4_0", gguf.TypeQ4_1: "q4_1", gguf.TypeQ5_0: "q5_0", gguf.TypeQ5_1: "q5_1", gguf.TypeQ8_0: "q8_0",
	gguf.TypeQ2_K: "q2_k", gguf.TypeQ3_K: "q3_k", gguf.TypeQ4_K: "q4_k", gguf.TypeQ5_K: "q5_k", gguf.TypeQ6_K: "q6_k",
}

// MatmulBackwardTypes lists the weight types MatMulBackwardInput supports, in
// type id order.
func MatmulBackwardTypes() []gguf.Type {
	var out []gguf.Type
	for t := gguf.Type(0); t < 64; t++ {
		if _, ok := matmulBackwardTypes[t]; ok {
			out = append(out, t)
		}
	}
	return out
}

// MatmulBackwardOptions place dY and dX inside bigger buffers. Zero values
// mean the dense default.
type MatmulBackwardOptions struct {
	// Accumulate adds the product to dX instead of overwriting it: the
	// gradient of a residual stream collects several projections' terms.
	Accumulate bool
	// Scale multiplies the product (a LoRA's alpha/rank); 0 means 1.
	Scale float32
	// DYOffset, DXOffset are the float indices of element (0, 0): a caller
	// walking row tiles of a batch (the LM head, whose dY rows are as wide as
	// the vocabulary) points them at the tile's first row.
	DYOffset, DXOffset int
	// DYStride is the float distance between rows of dY; 0 means W.Rows.
	DYStride int
	// DXStride is the float distance between rows of dX; 0 means W.Cols.
	DXStride int
	// Partials, when not nil, is scratch space that lets the kernel split
	// W's rows among workgroups when dX alone gives too few of them: the LM
	// head sums 262144 rows into m×2304 outputs, 40 workgroups at m = 64,
	// each walking every row. Each split writes its partial dX (m·k floats)
	// there and one more dispatch sums them. It must not be dY or dX; room
	// for fewer than two partials means no split. nil: no split.
	Partials *gpu.Buffer
}

// matmulBackwardGroups is how many workgroups a split dispatch aims for:
// 16 per SM of a 132-SM H200 (1024 threads of 64-thread workgroups each),
// so each SM has other workgroups to run while one waits on memory.
const matmulBackwardGroups = 2048

// matmulBackwardSplits chooses how many row splits a chunk of n rows gets:
// enough to reach matmulBackwardGroups workgroups with groups·tiles of them
// per split, no split shorter than one staging step of rows, no more than
// room holds (partials of m·k floats) or the 65535 z limit allows.
func matmulBackwardSplits(n, groups, tiles, room int) (splits, rows int) {
	s := (matmulBackwardGroups + groups*tiles - 1) / (groups * tiles)
	s = min(s, (n+matmulBackwardNS-1)/matmulBackwardNS, room, 65535/tiles)
	if s < 2 {
		return 1, n
	}
	rows = (n + s - 1) / s
	return (n + rows - 1) / rows, rows
}

// MatMulBackwardInput appends dX[m×k] = dY[m×n]·W for the n-row, k-column
// weight W of the forward y = W·x (ops.MatMul): the gradient of a loss with
// respect to the input of a frozen projection. W is read as stored (F32,
// F16, BF16, Q4_0…Q8_0, Q2_K…Q6_K). A tensor split into row chunks is walked
// chunk by chunk, every chunk after the first adding its rows' share to dX.
func MatMulBackwardInput(c *gpu.Chain, w *gpu.Tensor, dy, dx *gpu.Buffer, m int) error {
	return MatMulBackwardInputWith(c, w, dy, dx, m, MatmulBackwardOptions{})
}

// MatMulBackwardInputWith is MatMulBackwardInput with the placement and
// scale of o. dy and dx must be different buffers.
func MatMulBackwardInputWith(c *gpu.Chain, w *gpu.Tensor, dy, dx *gpu.Buffer, m int, o MatmulBackwardOptions) error {
	if w == nil {
		return fmt.Errorf("ops: matmul backward: weight tensor is nil")
	}
	name, ok := matmulBackwardTypes[w.Type]
	if !ok {
		return fmt.Errorf("ops: matmul backward %q: weight type %v has no backward kernel", w.Name, w.Type)
	}
	kernel := "matmul backward " + w.Name
	k, n := w.Cols, w.Rows
	if m < 1 {
		return fmt.Errorf("ops: %s: m = %d activation rows, want at least 1", kernel, m)
	}
	dys, dxs := o.DYStride, o.DXStride
	if dys == 0 {
		dys = n
	}
	if dxs == 0 {
		dxs = k
	}
	if dys < n || dxs < k || o.DYOffset < 0 || o.DXOffset < 0 {
		return fmt.Errorf("ops: %s: dy stride %d (< n=%d?), dx stride %d (< k=%d?) or an offset (%d, %d) is invalid", kernel, dys, n, dxs, k, o.DYOffset, o.DXOffset)
	}
	dyEnd := uint64(o.DYOffset) + uint64(m-1)*uint64(dys) + uint64(n)
	dxEnd := uint64(o.DXOffset) + uint64(m-1)*uint64(dxs) + uint64(k)
	if dyEnd > math.MaxUint32 || dxEnd > math.MaxUint32 {
		return fmt.Errorf("ops: %s: m=%d rows overflow 32-bit indexing", kernel, m)
	}
	if err := needF32(kernel, "dy", dy, int(dyEnd)); err != nil {
		return err
	}
	if err := needF32(kernel, "dx", dx, int(dxEnd)); err != nil {
		return err
	}
	if dy == dx {
		return fmt.Errorf("ops: %s: dy and dx are the same buffer %q", kernel, dy.Label())
	}
	room := 0
	if o.Partials != nil {
		if o.Partials == dy || o.Partials == dx {
			return fmt.Errorf("ops: %s: the partials buffer %q is dy or dx", kernel, o.Partials.Label())
		}
		room = int(o.Partials.Size() / 4 / (uint64(m) * uint64(k)))
	}
	if err := checkChunks("matmul backward", w); err != nil {
		return err
	}
	groups := (k + 8*matmulBackwardWG - 1) / (8 * matmulBackwardWG)
	tiles := (m + matmulBackwardTM - 1) / matmulBackwardTM
	if tiles > 65535 {
		return fmt.Errorf("ops: %s: m=%d needs %d activation tiles, over the 65535-workgroup grid limit", kernel, m, tiles)
	}
	spec := gpu.Spec("matmul_backward_input", "backward_input_"+name, "WG", matmulBackwardWG, "TM", matmulBackwardTM, "NS", matmulBackwardNS)
	gk, err := c.Device().Kernel(spec)
	if err != nil {
		return err
	}
	scale := o.Scale
	if scale == 0 {
		scale = 1
	}
	for i, ch := range w.Chunks {
		var flags uint32
		if o.Accumulate || i > 0 {
			flags = matmulAccumulate
		}
		splits, rows := matmulBackwardSplits(ch.Rows, groups, tiles, room)
		params := matmulBackwardParams{
			K: uint32(k), N: uint32(ch.Rows), M: uint32(m), Row0: uint32(ch.FirstRow),
			DYStride: uint32(dys), DXStride: uint32(dxs), DYOffset: uint32(o.DYOffset), DXOffset: uint32(o.DXOffset),
			Flags: flags, Scale: scale, SplitRows: uint32(rows), Splits: uint32(splits),
		}
		partials := dx
		if splits > 1 {
			partials = o.Partials
		}
		grid := [3]uint32{uint32(groups), 1, uint32(tiles * splits)}
		if err := c.Dispatch(gk, params, grid, ch.Buf, dy, dx, partials); err != nil {
			return err
		}
		if splits == 1 {
			continue
		}
		rk, err := c.Device().Kernel(gpu.Spec("matmul_backward_input", "backward_reduce", "WG", wg, "TM", matmulBackwardTM, "NS", matmulBackwardNS))
		if err != nil {
			return err
		}
		if err := c.Dispatch(rk, params, gpu.Grid(m*k, wg), ch.Buf, dy, dx, partials); err != nil {
			return err
		}
	}
	return nil
}
