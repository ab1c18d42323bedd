package ops

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// NormArgs shapes a row normalisation: Rows rows of Dim floats, row-major,
// each normalised on its own (a whole vector is one row; per-head QK-norm is
// tokens*heads rows of head_dim).
type NormArgs struct {
	Rows, Dim int
	// Eps is added to the mean square (RMSNorm) or the variance (LayerNorm)
	// before the square root: the model's rms_norm_eps or layer_norm_eps.
	Eps float32
	// OnePlus applies the weight as 1 + w: Gemma stores its norm weights
	// minus one. It needs a weight.
	OnePlus bool
}

// normParams mirrors Params in shaders/norm_common.wgsl.
type normParams struct {
	Rows, Dim uint32
	Eps       float32
	Flags     uint32
}

// Flags of normParams, as FLAG_* in shaders/norm_common.wgsl and
// shaders/norm.wgsl.
const (
	normWeight  = 1
	normOnePlus = 2
	normBias    = 4
)

// normWG is the workgroup size for rows of dim floats: one invocation per
// float up to 256, the most WebGPU guarantees, so that a 64- or 128-float
// QK-norm row does not leave most of a 256-wide workgroup idle; at least 32,
// NVIDIA's SIMD width, below which a workgroup wastes a warp anyway.
func normWG(dim int) int {
	n := 32
	for n < dim && n < 256 {
		n *= 2
	}
	return n
}

// RMSNorm appends y = x / sqrt(mean(x^2) + eps) * w for each row of x. w is
// Dim floats, or nil for no weight; with a.OnePlus it is applied as 1 + w. y
// may be x, normalising in place; it must not be w.
func RMSNorm(c *gpu.Chain, x, w, y *gpu.Buffer, a NormArgs) error {
	return norm(c, "rmsnorm", x, w, nil, y, a)
}

// LayerNorm appends y = (x - mean) / sqrt(var + eps) * w + b for each row of
// x, the variance being the biased one (divided by Dim) as in PyTorch. w and
// b are Dim floats each, either may be nil; a.OnePlus applies w as 1 + w. y
// may be x; it must not be w or b.
func LayerNorm(c *gpu.Chain, x, w, b, y *gpu.Buffer, a NormArgs) error {
	return norm(c, "layernorm", x, w, b, y, a)
}

func norm(c *gpu.Chain, kernel string, x, w, b, y *gpu.Buffer, a NormArgs) error {
	if a.Rows <= 0 || a.Dim <= 0 {
		return fmt.Errorf("ops: %s: shape %dx%d must be positive", kernel, a.Rows, a.Dim)
	}
	n := a.Rows * a.Dim
	if int64(n) > math.MaxUint32 {
		return fmt.Errorf("ops: %s: %dx%d floats overflow the kernel's 32-bit index", kernel, a.Rows, a.Dim)
	}
	if !(a.Eps >= 0) || math.IsInf(float64(a.Eps), 0) {
		return fmt.Errorf("ops: %s: eps %v must be finite and >= 0", kernel, a.Eps)
	}
	if err := needF32(kernel, "x", x, n); err != nil {
		return err
	}
	if err := needF32(kernel, "y", y, n); err != nil {
		return err
	}
	var flags uint32
	if w != nil {
		if err := needF32(kernel, "weight", w, a.Dim); err != nil {
			return err
		}
		if w == y {
			return fmt.Errorf("ops: %s: y %q must not be the weight", kernel, y.Label())
		}
		flags |= normWeight
	} else {
		w = x // fills the slot; the kernel does not read it
	}
	if a.OnePlus {
		if flags&normWeight == 0 {
			return fmt.Errorf("ops: %s: OnePlus needs a weight", kernel)
		}
		flags |= normOnePlus
	}
	if b != nil {
		if err := needF32(kernel, "bias", b, a.Dim); err != nil {
			return err
		}
		if b == y {
			return fmt.Errorf("ops: %s: y %q must not be the bias", kernel, y.Label())
		}
		flags |= normBias
	} else {
		b = x
	}
	params := normParams{Rows: uint32(a.Rows), Dim: uint32(a.Dim), Eps: a.Eps, Flags: flags}
	return dispatch(c, gpu.Spec("norm", kernel, "WG", normWG(a.Dim)), params, gpu.Grid(a.Rows, 1), x, w, b, y)
}
