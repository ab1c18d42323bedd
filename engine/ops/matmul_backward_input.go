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
	Experts            uint32 // backward_moe_ entries: the experts of this chunk
	_                  [3]uint32
}

// backwardLaunch is a launch shape of the backward kernel (the constants of
// shaders/matmul_backward_input.wgsl): a workgroup of ks slices of ct×rt
// invocations owns a (4·rt)×(8·ct) tile of dX and stages bn rows of W at a
// time.
type backwardLaunch struct{ ct, rt, ks, bn int }

func (l backwardLaunch) wg() int   { return l.ct * l.rt * l.ks }
func (l backwardLaunch) rows() int { return 4 * l.rt } // activation rows of a tile
func (l backwardLaunch) cols() int { return 8 * l.ct } // columns of a tile

// sharedBytes is the workgroup memory the shape declares: bn rows of W
// (8·ct floats) and of dY (4·rt floats and a 4-float pad).
func (l backwardLaunch) sharedBytes() int { return 16 * l.bn * (2*l.ct + l.rt + 1) }

// backwardLaunchFor picks the shape for a k-column weight. The main shape
// is a 32×64 tile of dX over 256 invocations (4 slices of 8×8, each owning
// a 4×8 block in registers), staging 32 rows of W (8 KiB decoded) and dY
// (4.5 KiB) per step, under WebGPU's guaranteed 16 KiB of workgroup
// memory. A narrow dX (a LoRA B of rank 8-32, k = r) keeps the 256
// invocations by giving fewer of them columns and more of them rows of W:
// at k = 16 two column threads and 16 slices, else 14 of every 16
// invocations would idle while one walks all of a tall B's rows.
func backwardLaunchFor(k int) backwardLaunch {
	switch {
	case k <= 8:
		return backwardLaunch{ct: 1, rt: 8, ks: 32, bn: 64}
	case k <= 16:
		return backwardLaunch{ct: 2, rt: 8, ks: 16, bn: 64}
	case k <= 32:
		return backwardLaunch{ct: 4, rt: 8, ks: 8, bn: 64}
	}
	return backwardLaunch{ct: 8, rt: 8, ks: 4, bn: 32}
}

// matmulBackwardTypes are the weight types MatMulBackwardInput decodes,
// with their entry point suffix.
var matmulBackwardTypes = map[gguf.Type]string{
	gguf.TypeF32: "f32", gguf.TypeF16: "f16", gguf.TypeBF16: "bf16",
	gguf.TypeQ4_0: "q4_0", gguf.TypeQ4_1: "q4_1", gguf.TypeQ5_0: "q5_0", gguf.TypeQ5_1: "q5_1", gguf.TypeQ8_0: "q8_0", gguf.TypeMXFP4: "mxfp4",
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
// 8 per SM of a 132-SM H200 (2048 threads of 256-thread workgroups each),
// so each SM has other workgroups to run while one waits on memory.
const matmulBackwardGroups = 1024

// matmulBackwardSplits chooses how many row splits a chunk of n rows gets:
// enough to reach matmulBackwardGroups workgroups with groups·tiles of them
// per split, no split shorter than one stage of bn rows, no more than room
// holds (partials of m·k floats) or the 65535 z limit allows.
func matmulBackwardSplits(n, groups, tiles, room, bn int) (splits, rows int) {
	s := (matmulBackwardGroups + groups*tiles - 1) / (groups * tiles)
	s = min(s, (n+bn-1)/bn, room, 65535/tiles)
	if s < 2 {
		return 1, n
	}
	rows = (n + s - 1) / s
	return (n + rows - 1) / rows, rows
}

// MatMulBackwardInput appends dX[m×k] = dY[m×n]·W for the n-row, k-column
// weight W of the forward y = W·x (ops.MatMul): the gradient of a loss with
// respect to the input of a frozen projection. W is read as stored (F32,
// F16, BF16, Q4_0…Q8_0, MXFP4, Q2_K…Q6_K). A tensor split into row chunks
// is walked chunk by chunk, every chunk after the first adding its rows'
// share to dX.
func MatMulBackwardInput(c *gpu.Chain, w *gpu.Tensor, dy, dx *gpu.Buffer, m int) error {
	return MatMulBackwardInputWith(c, w, dy, dx, m, MatmulBackwardOptions{})
}

// MatMulBackwardInputWith is MatMulBackwardInput with the placement and
// scale of o. dy and dx must be different buffers.
func MatMulBackwardInputWith(c *gpu.Chain, w *gpu.Tensor, dy, dx *gpu.Buffer, m int, o MatmulBackwardOptions) error {
	if w == nil {
		return fmt.Errorf("ops: matmul backward: weight tensor is nil")
	}
	return matmulBackwardWith(c, w, dy, dx, m, o, backwardLaunchFor(w.Cols))
}

// matmulBackwardWith dispatches with an explicit launch shape, so tuning
// benchmarks can try others.
func matmulBackwardWith(c *gpu.Chain, w *gpu.Tensor, dy, dx *gpu.Buffer, m int, o MatmulBackwardOptions, l backwardLaunch) error {
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
	lim := c.Device().Limits
	if l.bn%l.ks != 0 || 4*l.rows()*l.cols() > l.sharedBytes() || l.sharedBytes() > int(lim.MaxComputeWorkgroupStorageSize) || l.wg() > int(lim.MaxComputeInvocationsPerWorkgroup) {
		return fmt.Errorf("ops: %s: launch %+v does not fit the kernel or the device (%d bytes of workgroup memory, %d invocations)", kernel, l, l.sharedBytes(), l.wg())
	}
	groups := (k + l.cols() - 1) / l.cols()
	tiles := (m + l.rows() - 1) / l.rows()
	if tiles > 65535 || groups > 65535 {
		return fmt.Errorf("ops: %s: m=%d, k=%d need %d×%d tiles, over the 65535-workgroup grid limit", kernel, m, k, tiles, groups)
	}
	consts := []any{"CT", l.ct, "RT", l.rt, "KS", l.ks, "BN", l.bn}
	gk, err := c.Device().Kernel(gpu.Spec("matmul_backward_input", "backward_input_"+name, consts...))
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
		splits, rows := matmulBackwardSplits(ch.Rows, groups, tiles, room, l.bn)
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
		// Binding 5 is the backward_moe_ entries' groups; dy fills it here.
		if err := c.Dispatch(gk, params, grid, ch.Buf, dy, dx, partials, dy); err != nil {
			return err
		}
		if splits == 1 {
			continue
		}
		rk, err := c.Device().Kernel(gpu.Spec("matmul_backward_input", "backward_reduce", consts...))
		if err != nil {
			return err
		}
		if err := c.Dispatch(rk, params, gpu.Grid(m*k, l.wg()), ch.Buf, dy, dx, partials, dy); err != nil {
			return err
		}
	}
	return nil
}
