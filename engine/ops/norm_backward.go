package ops

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// NormBackwardArgs shape the backward of a row normalisation: the forward's
// NormArgs (rows, dim, eps, 1 + w), and Accumulate to add the gradient into
// the output buffer rather than overwrite it (a residual stream's gradient
// collecting its branches, or a weight gradient collecting micro-batches).
type NormBackwardArgs struct {
	NormArgs
	Accumulate bool
}

// normAccumulate is FLAG_ACCUMULATE of shaders/norm_backward.wgsl; its
// FLAG_WEIGHT and FLAG_ONE_PLUS are the forward's normWeight and normOnePlus,
// and its uniform is the forward's normParams.
const normAccumulate = 4

func (a NormBackwardArgs) check(kernel string) error {
	switch {
	case a.Rows <= 0 || a.Dim <= 0:
		return fmt.Errorf("ops: %s: shape %dx%d must be positive", kernel, a.Rows, a.Dim)
	case int64(a.Rows)*int64(a.Dim) > math.MaxUint32:
		return fmt.Errorf("ops: %s: %dx%d floats overflow the kernel's 32-bit index", kernel, a.Rows, a.Dim)
	case !(a.Eps >= 0) || math.IsInf(float64(a.Eps), 0):
		return fmt.Errorf("ops: %s: eps %v must be finite and >= 0", kernel, a.Eps)
	}
	return nil
}

func (a NormBackwardArgs) params(weight bool) normParams {
	var flags uint32
	if weight {
		flags |= normWeight
	}
	if a.OnePlus {
		flags |= normOnePlus
	}
	if a.Accumulate {
		flags |= normAccumulate
	}
	return normParams{Rows: uint32(a.Rows), Dim: uint32(a.Dim), Eps: a.Eps, Flags: flags}
}

// RMSNormBackward appends dx, the gradient of y = RMSNorm(x, w) for the
// upstream gradient dy (rows x dim, as the forward):
//
//	dx = (gain * dy - x^ * mean(gain * dy * x^)) / rms,  x^ = x / rms
//
// with gain = w, 1 + w (a.OnePlus) or 1 (w nil), and rms recomputed from x.
// A per-head QK-norm is tokens*heads rows of head_dim. dx may be x or dy; it
// must not be w. With a.Accumulate, dx += the gradient.
func RMSNormBackward(c *gpu.Chain, x, w, dy, dx *gpu.Buffer, a NormBackwardArgs) error {
	const kernel = "rmsnorm_backward"
	if err := a.check(kernel); err != nil {
		return err
	}
	n := a.Rows * a.Dim
	for _, o := range []operand{{"x", x, n}, {"dy", dy, n}, {"dx", dx, n}} {
		if err := needF32(kernel, o.what, o.buf, o.n); err != nil {
			return err
		}
	}
	if w != nil {
		if err := needF32(kernel, "weight", w, a.Dim); err != nil {
			return err
		}
		if w == dx {
			return fmt.Errorf("ops: %s: dx %q must not be the weight", kernel, dx.Label())
		}
	} else if a.OnePlus {
		return fmt.Errorf("ops: %s: OnePlus needs a weight", kernel)
	}
	params := a.params(w != nil)
	if w == nil {
		w = x // fills the slot; the kernel does not read it
	}
	return dispatch(c, gpu.Spec("norm_backward", "rmsnorm_backward", "WG", normWG(a.Dim)), params,
		gpu.Grid(a.Rows, 1), x, w, dy, x, dx)
}

// normRowBlock is ROW_BLOCK in shaders/norm_backward.wgsl.
const normRowBlock = 4096

// RMSNormWeightGradScratch is the scratch, in floats, RMSNormWeightGrad
// needs for a: each row's 1/rms, then a partial sum per column per block of
// 4096 rows.
func RMSNormWeightGradScratch(a NormArgs) int {
	return a.Rows + (a.Rows+normRowBlock-1)/normRowBlock*a.Dim
}

// RMSNormWeightGrad appends dw = sum over rows of dy * x^, the gradient of
// RMSNorm's weight (the same whether it is applied as w or as 1 + w), Dim
// floats; with a.Accumulate, dw += it. scratch holds
// RMSNormWeightGradScratch(a.NormArgs) floats. dw must be another buffer
// than x, dy and scratch. The sum runs in a fixed order (blocks of rows,
// then the blocks in order): the same bits every run.
func RMSNormWeightGrad(c *gpu.Chain, x, dy, scratch, dw *gpu.Buffer, a NormBackwardArgs) error {
	const kernel = "rmsnorm_weight_grad"
	if err := a.check(kernel); err != nil {
		return err
	}
	n := a.Rows * a.Dim
	need := RMSNormWeightGradScratch(a.NormArgs)
	if int64(a.Rows)+int64((a.Rows+normRowBlock-1)/normRowBlock)*int64(a.Dim) > math.MaxUint32 {
		return fmt.Errorf("ops: %s: scratch for %dx%d overflows the kernel's 32-bit index", kernel, a.Rows, a.Dim)
	}
	for _, o := range []operand{{"x", x, n}, {"dy", dy, n}, {"scratch", scratch, need}, {"dw", dw, a.Dim}} {
		if err := needF32(kernel, o.what, o.buf, o.n); err != nil {
			return err
		}
	}
	if dw == x || dw == dy || dw == scratch || scratch == x || scratch == dy {
		return fmt.Errorf("ops: %s: dw %q and scratch %q must be distinct from each other and the inputs", kernel, dw.Label(), scratch.Label())
	}
	params := a.params(false)
	if err := dispatch(c, gpu.Spec("norm_backward", "rmsnorm_rstd", "WG", normWG(a.Dim)), params,
		gpu.Grid(a.Rows, 1), x, x, dy, scratch, dw); err != nil {
		return err
	}
	cols := (a.Dim + wg - 1) / wg
	blocks := (a.Rows + normRowBlock - 1) / normRowBlock
	if cols > 65535 || blocks > 65535 {
		return fmt.Errorf("ops: %s: %dx%d needs a %dx%d grid, over 65535", kernel, a.Rows, a.Dim, cols, blocks)
	}
	if err := dispatch(c, gpu.Spec("norm_backward", "rmsnorm_weight_partial", "WG", wg), params,
		[3]uint32{uint32(cols), uint32(blocks), 1}, x, x, dy, scratch, dw); err != nil {
		return err
	}
	return dispatch(c, gpu.Spec("norm_backward", "rmsnorm_weight_grad", "WG", wg), params,
		gpu.Grid(a.Dim, wg), x, x, dy, scratch, dw)
}
