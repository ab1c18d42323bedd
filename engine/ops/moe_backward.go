package ops

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// moeBackwardParams mirrors Params in shaders/moe_backward.wgsl.
type moeBackwardParams struct {
	Tokens, Experts, TopK, Flags uint32
	Scale                        float32
	_                            [3]uint32
}

// moeBackwardWG is the backward kernels' workgroup size.
const moeBackwardWG = 64

func moeBackwardSpec(entry string) gpu.KernelSpec {
	return gpu.Spec("moe_backward", entry, "WG", moeBackwardWG, "MAX_E", moeMaxExperts, "MAX_K", moeMaxTopK)
}

// MoECombineBackward appends MoECombine's backward for the gradient dout of
// its output (a.Tokens rows of a.Dim): dY[s] = scale·w[s]·dout[t] (the
// slots' rows) and dW[s] = scale·dout[t]·y[s] (their router weights'), t
// the slot's token. a.Accumulate is not taken: both are written.
func MoECombineBackward(c *gpu.Chain, y, weights, dout, dY, dW *gpu.Buffer, a MoECombineArgs) error {
	const kernel = "moe_combine_backward"
	if a.Tokens <= 0 || a.Used <= 0 || a.Dim <= 0 {
		return fmt.Errorf("ops: %s: %d tokens, %d experts used, width %d must be positive", kernel, a.Tokens, a.Used, a.Dim)
	}
	if a.Accumulate {
		return fmt.Errorf("ops: %s: the gradients are written, not accumulated", kernel)
	}
	slots := a.Tokens * a.Used
	if uint64(slots)*uint64(a.Dim) > math.MaxUint32 {
		return fmt.Errorf("ops: %s: %d slots overflow the kernel's 32-bit index", kernel, slots)
	}
	for _, o := range []operand{{"y", y, slots * a.Dim}, {"weights", weights, slots}, {"dout", dout, a.Tokens * a.Dim}, {"dy", dY, slots * a.Dim}, {"dw", dW, slots}} {
		if err := needF32(kernel, o.what, o.buf, o.n); err != nil {
			return err
		}
	}
	if dY == dW || dY == y || dY == weights || dY == dout || dW == y || dW == weights || dW == dout {
		return fmt.Errorf("ops: %s: dy and dw must be two buffers apart from the inputs", kernel)
	}
	p := moeBackwardParams{Tokens: uint32(a.Tokens), Experts: uint32(a.Dim), TopK: uint32(a.Used), Scale: a.Scale}
	if p.Scale == 0 {
		p.Scale = 1
	}
	return dispatch(c, moeBackwardSpec(kernel), p, gpu.Grid(slots, 1), y, weights, dout, dY, dW)
}

// MoERouteBackward appends MoERoute's backward: the gradient of the router
// logits (a.Tokens rows of a.Experts) for the gradient dweights of the
// chosen weights, the choice (ids) held fixed; scale is the per-expert
// scale MoERoute applied, nil for none.
func MoERouteBackward(c *gpu.Chain, logits, scale, ids, dweights, dlogits *gpu.Buffer, a MoERouteArgs) error {
	const kernel = "moe_route_backward"
	switch {
	case a.Tokens <= 0 || a.Experts <= 0:
		return fmt.Errorf("ops: %s: %d tokens of %d experts must be positive", kernel, a.Tokens, a.Experts)
	case a.Experts > moeMaxExperts:
		return fmt.Errorf("ops: %s: %d experts, at most %d", kernel, a.Experts, moeMaxExperts)
	case a.TopK <= 0 || a.TopK > min(a.Experts, moeMaxTopK):
		return fmt.Errorf("ops: %s: top-k %d must be 1 to the %d experts, at most %d", kernel, a.TopK, a.Experts, moeMaxTopK)
	case int64(a.Tokens)*int64(a.Experts) > math.MaxUint32:
		return fmt.Errorf("ops: %s: %d tokens of %d experts overflow the kernel's 32-bit index", kernel, a.Tokens, a.Experts)
	}
	n := a.Tokens * a.TopK
	for _, o := range []operand{{"logits", logits, a.Tokens * a.Experts}, {"ids", ids, n}, {"dweights", dweights, n}, {"dlogits", dlogits, a.Tokens * a.Experts}} {
		if err := needF32(kernel, o.what, o.buf, o.n); err != nil {
			return err
		}
	}
	if dlogits == logits || dlogits == ids || dlogits == dweights {
		return fmt.Errorf("ops: %s: dlogits must not be an input", kernel)
	}
	p := moeBackwardParams{Tokens: uint32(a.Tokens), Experts: uint32(a.Experts), TopK: uint32(a.TopK)}
	if a.Sigmoid {
		p.Flags |= moeSigmoid
	}
	if a.Renorm {
		p.Flags |= moeRenorm
	}
	if scale != nil {
		if err := needF32(kernel, "scale", scale, a.Experts); err != nil {
			return err
		}
		if scale == dlogits {
			return fmt.Errorf("ops: %s: scale %q must not be the output", kernel, scale.Label())
		}
		p.Flags |= moeScale
	} else {
		scale = dlogits // fills the (writable) slot; the kernel does not read it
	}
	return dispatch(c, moeBackwardSpec(kernel), p, gpu.Grid(a.Tokens, 1), logits, dweights, ids, dlogits, scale)
}
