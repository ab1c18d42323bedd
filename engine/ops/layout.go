package ops

import (
	"fmt"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// layoutParams mirrors Params in shaders/layout.wgsl.
type layoutParams struct {
	Rows, Cols, N, Off uint32
}

// Transpose appends y = xᵀ for x [rows][cols] row-major, y [cols][rows]:
// PL-BERT's token rows to the duration encoder's channels-first layout and
// back. y must be another buffer than x.
func Transpose(c *gpu.Chain, x, y *gpu.Buffer, rows, cols int) error {
	const kernel = "transpose"
	if err := layoutCheck(kernel, rows, cols, x, y, operand{"x", x, rows * cols}, operand{"y", y, rows * cols}); err != nil {
		return err
	}
	return layoutDispatch(c, kernel, layoutParams{Rows: uint32(rows), Cols: uint32(cols)}, rows*cols, x, x, y)
}

// GatherColumns appends y[r][f] = x[r][idx[f]] for x [rows][cols] and y
// [rows][n], idx n u32 column indices: Kokoro's alignment, each token's
// column repeated over its frames (x @ pred_aln_trg). An index past the
// last column reads the last column on the GPU; check indices on the host.
// y must be another buffer than x and idx.
func GatherColumns(c *gpu.Chain, x, idx, y *gpu.Buffer, rows, cols, n int) error {
	const kernel = "gather_columns"
	if n <= 0 {
		return fmt.Errorf("ops: %s: %d output columns must be positive", kernel, n)
	}
	if err := layoutCheck(kernel, rows, cols, x, y, operand{"x", x, rows * cols}, operand{"idx", idx, n}, operand{"y", y, rows * n}); err != nil {
		return err
	}
	if y == idx {
		return fmt.Errorf("ops: %s: y %q must be another buffer than idx", kernel, y.Label())
	}
	return layoutDispatch(c, kernel, layoutParams{Rows: uint32(rows), Cols: uint32(cols), N: uint32(n)}, rows*n, x, idx, y)
}

// BroadcastColumns appends y[off + r*n + t] = v[r] for r < rows, t < n: a
// vector repeated along time, written as rows rows of n floats starting at
// float off of y (Kokoro appends the style to the duration encoder's
// channels this way). y must be another buffer than v.
func BroadcastColumns(c *gpu.Chain, v, y *gpu.Buffer, rows, n, off int) error {
	const kernel = "broadcast_columns"
	if off < 0 {
		return fmt.Errorf("ops: %s: offset %d is negative", kernel, off)
	}
	if err := layoutCheck(kernel, rows, n, v, y, operand{"v", v, rows}, operand{"y", y, off + rows*n}); err != nil {
		return err
	}
	return layoutDispatch(c, kernel, layoutParams{Rows: uint32(rows), N: uint32(n), Off: uint32(off)}, rows*n, v, v, y)
}

// UpsampleNearest1D appends y = F.interpolate(x, scale_factor=scale,
// mode='nearest') for x [rows][length]: y [rows][scale*length], each step
// repeated scale times (the shortcut of AdainResBlk1d's upsampling block).
// y must be another buffer than x.
func UpsampleNearest1D(c *gpu.Chain, x, y *gpu.Buffer, rows, length, scale int) error {
	const kernel = "upsample_nearest"
	if scale <= 0 {
		return fmt.Errorf("ops: %s: scale %d must be positive", kernel, scale)
	}
	if err := layoutCheck(kernel, rows, length, x, y, operand{"x", x, rows * length}, operand{"y", y, rows * length * scale}); err != nil {
		return err
	}
	p := layoutParams{Rows: uint32(rows), Cols: uint32(length), N: uint32(length * scale)}
	return layoutDispatch(c, kernel, p, rows*length*scale, x, x, y)
}

func layoutCheck(kernel string, rows, cols int, x, y *gpu.Buffer, bufs ...operand) error {
	if rows <= 0 || cols <= 0 {
		return fmt.Errorf("ops: %s: shape %dx%d must be positive", kernel, rows, cols)
	}
	if err := checkSizes(kernel, bufs...); err != nil {
		return err
	}
	if x == y {
		return fmt.Errorf("ops: %s: y %q must be another buffer than the input", kernel, y.Label())
	}
	return nil
}

func layoutDispatch(c *gpu.Chain, entry string, p layoutParams, n int, x, idx, y *gpu.Buffer) error {
	return dispatch(c, gpu.Spec("layout", entry, "WG", wg), p, gpu.Grid(n, wg), x, idx, y)
}
