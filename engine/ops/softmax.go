package ops

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// softmaxParams mirrors Params in shaders/softmax.wgsl.
type softmaxParams struct {
	Rows, N uint32
	_, _    uint32
}

// softmaxWG is the softmax workgroup size: one workgroup per row, 256
// invocations each striding over the row, the most WebGPU guarantees.
const softmaxWG = 256

// Softmax appends y = softmax(x) over each of rows rows of n floats, stable
// for any magnitude (the row max is subtracted before exp). Pass the same
// buffer as x and y to work in place. Out of place, x is first copied into y
// (WebGPU forbids one buffer bound read-only and writable in a dispatch, and
// a kernel family has one layout, so the kernel itself only works in place);
// the copy ends the current compute pass and costs one extra read and write
// of the rows, 1 MiB for a 262144-token vocabulary row.
func Softmax(c *gpu.Chain, x, y *gpu.Buffer, rows, n int) error {
	if rows <= 0 || n <= 0 {
		return fmt.Errorf("ops: softmax: shape %dx%d must be positive", rows, n)
	}
	if int64(rows)*int64(n) > math.MaxUint32 {
		return fmt.Errorf("ops: softmax: %dx%d elements overflow the kernel's 32-bit index", rows, n)
	}
	if err := needF32("softmax", "x", x, rows*n); err != nil {
		return err
	}
	if err := needF32("softmax", "y", y, rows*n); err != nil {
		return err
	}
	if x != y {
		if err := c.Copy(x, 0, y, 0, uint64(rows*n)*4); err != nil {
			return fmt.Errorf("ops: softmax: %w", err)
		}
	}
	return dispatch(c, gpu.Spec("softmax", "softmax", "WG", softmaxWG),
		softmaxParams{Rows: uint32(rows), N: uint32(n)}, gpu.Grid(rows, 1), y)
}
