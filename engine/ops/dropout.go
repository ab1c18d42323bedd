package ops

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// dropoutParams mirrors Params in shaders/dropout.wgsl.
type dropoutParams struct {
	Rows, Cols, Token0, Key uint32
	Threshold               uint32
	Scale                   float32
	XOffset, YOffset, Flags uint32
	_                       [3]uint32
}

// DropoutArgs describe one Dropout dispatch. Key, Threshold and Scale are
// a ref.DropoutMask's (ref.NewDropoutMask(ref.DropoutKey(seed, step,
// site), p)): the mask is a hash of its indices, the same on the CPU.
type DropoutArgs struct {
	Rows, Cols int
	// Token0 is the mask row of x's first row: a row tile of a longer
	// sequence, or an example at an offset in its micro-batch, keeps its
	// tokens' masks.
	Token0         int
	Key, Threshold uint32
	Scale          float32
	// XOffset and YOffset are the float indices of element (0, 0).
	XOffset, YOffset int
	// Accumulate adds the masked x to y instead of overwriting it: the
	// backward of a dropped-out input adds its masked gradient to dX.
	Accumulate bool
}

// Dropout appends y (+)= mask(x)·Scale for a Rows × Cols x: LoRA dropout on
// the input of A·x, and with the same mask its backward on dA·x's input
// gradient. x and y must be different buffers.
func Dropout(c *gpu.Chain, x, y *gpu.Buffer, a DropoutArgs) error {
	const kernel = "dropout"
	if a.Rows <= 0 || a.Cols <= 0 || a.Token0 < 0 || a.XOffset < 0 || a.YOffset < 0 {
		return fmt.Errorf("ops: %s: shape %d×%d, token %d, offsets %d and %d: shape positive, the rest not negative", kernel, a.Rows, a.Cols, a.Token0, a.XOffset, a.YOffset)
	}
	n := uint64(a.Rows) * uint64(a.Cols)
	if n+uint64(max(a.XOffset, a.YOffset)) > math.MaxUint32 || uint64(a.Token0+a.Rows) > math.MaxUint32 {
		return fmt.Errorf("ops: %s: %d×%d at offsets %d, %d overflows 32-bit indexing", kernel, a.Rows, a.Cols, a.XOffset, a.YOffset)
	}
	if math.IsNaN(float64(a.Scale)) || math.IsInf(float64(a.Scale), 0) {
		return fmt.Errorf("ops: %s: scale %v is not finite", kernel, a.Scale)
	}
	if err := needF32(kernel, "x", x, a.XOffset+int(n)); err != nil {
		return err
	}
	if err := needF32(kernel, "y", y, a.YOffset+int(n)); err != nil {
		return err
	}
	if x == y {
		return fmt.Errorf("ops: %s: x and y are the same buffer %q", kernel, x.Label())
	}
	p := dropoutParams{
		Rows: uint32(a.Rows), Cols: uint32(a.Cols), Token0: uint32(a.Token0), Key: a.Key,
		Threshold: a.Threshold, Scale: a.Scale, XOffset: uint32(a.XOffset), YOffset: uint32(a.YOffset),
	}
	if a.Accumulate {
		p.Flags = 1
	}
	return dispatch(c, gpu.Spec("dropout", "dropout", "WG", wg), p, gpu.Grid(int(n), wg), x, y)
}
