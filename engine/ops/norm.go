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
	// Scale, RMSNormAdd's only, multiplies each updated row of y (before
	// any next norm reads it): Gemma 4's layer output scale, folded into
	// the layer's last residual add. 0 means none.
	Scale float32
}

// normParams mirrors Params in shaders/norm_common.wgsl.
type normParams struct {
	Rows, Dim uint32
	Eps       float32
	Flags     uint32
	Scale     float32
	_         [3]uint32
}

// Flags of normParams, as FLAG_* in shaders/norm_common.wgsl and
// shaders/norm.wgsl.
const (
	normWeight  = 1
	normOnePlus = 2
	normBias    = 4
	normNext    = 8
	normScale   = 16
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
	return norm(c, "rmsnorm", x, w, nil, y, nil, nil, a)
}

// RMSNormAdd appends y += x / sqrt(mean(x^2) + eps) * w for each row of x:
// the post-norm and residual add of Gemma 2 and 3 in one dispatch, where
// RMSNorm and an add took two; with a.Scale, y = (y + ...) * a.Scale. w is
// as in RMSNorm; y must be neither x nor w.
func RMSNormAdd(c *gpu.Chain, x, w, y *gpu.Buffer, a NormArgs) error {
	return RMSNormAddNorm(c, x, w, y, nil, nil, a)
}

// RMSNormAddNorm is RMSNormAdd followed by z = rmsnorm(y)·w2 of the updated
// rows, the pre-norm of whatever reads the residual stream next, in the same
// dispatch and to the bit what RMSNorm would give. w2 is a weight as w (a.OnePlus
// applies to both); z must be none of the other buffers. z nil is RMSNormAdd.
func RMSNormAddNorm(c *gpu.Chain, x, w, y, w2, z *gpu.Buffer, a NormArgs) error {
	if x != nil && x == y {
		return fmt.Errorf("ops: rmsnorm_add: y %q must not be x", y.Label())
	}
	if w == nil {
		return fmt.Errorf("ops: rmsnorm_add: the weight is nil")
	}
	if z != nil {
		if w2 == nil {
			return fmt.Errorf("ops: rmsnorm_add: next norm's weight is nil")
		}
		if err := needF32("rmsnorm_add", "next weight", w2, a.Dim); err != nil {
			return err
		}
		if z == x || z == w || z == y || z == w2 || w2 == y {
			return fmt.Errorf("ops: rmsnorm_add: next norm's output %q must be none of x, w, y and its weight, and y not its weight", z.Label())
		}
	}
	return norm(c, "rmsnorm_add", x, w, nil, y, w2, z, a)
}

// LayerNorm appends y = (x - mean) / sqrt(var + eps) * w + b for each row of
// x, the variance being the biased one (divided by Dim) as in PyTorch. w and
// b are Dim floats each, either may be nil; a.OnePlus applies w as 1 + w. y
// may be x; it must not be w or b.
func LayerNorm(c *gpu.Chain, x, w, b, y *gpu.Buffer, a NormArgs) error {
	return norm(c, "layernorm", x, w, b, y, nil, nil, a)
}

// norm dispatches kernel of shaders/norm.wgsl; w2 and z, rmsnorm_add's next
// norm, are nil for the others.
func norm(c *gpu.Chain, kernel string, x, w, b, y, w2, z *gpu.Buffer, a NormArgs) error {
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
	if z != nil {
		if err := needF32(kernel, "z", z, n); err != nil {
			return err
		}
		flags |= normNext
	} else {
		w2, z = x, x // fill the slots; the kernel does not read them
	}
	if a.Scale != 0 {
		if kernel != "rmsnorm_add" {
			return fmt.Errorf("ops: %s: a scale is rmsnorm_add's only", kernel)
		}
		if math.IsNaN(float64(a.Scale)) || math.IsInf(float64(a.Scale), 0) {
			return fmt.Errorf("ops: %s: scale %v must be finite", kernel, a.Scale)
		}
		flags |= normScale
	}
	params := normParams{Rows: uint32(a.Rows), Dim: uint32(a.Dim), Eps: a.Eps, Flags: flags, Scale: a.Scale}
	return dispatch(c, gpu.Spec("norm", kernel, "WG", normWG(a.Dim)), params, gpu.Grid(a.Rows, 1), x, w, b, y, w2, z)
}
