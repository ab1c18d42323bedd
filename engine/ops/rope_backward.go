package ops

import (
	"fmt"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// RoPEBackward turns the gradient of RoPE's output, dy = [Tokens, Heads,
// HeadDim], into the gradient of its input, in place: each pair rotates by
// -theta, the transpose of the forward's rotation, and the dims past
// RopeDims pass through. a, factors and positions are the forward's.
//
// It runs the forward's kernel (shaders/rope.wgsl) with the frequency table
// negated. Negation is exact in f32, so every angle is exactly minus the one
// the forward computed, and the kernel's sincos is exactly odd in sin and
// even in cos (round-half-even reduction, odd and even polynomials): the
// backward applies the transpose of the very matrix the forward applied, bit
// for bit, at any position. A kernel of its own would have to keep its angle
// code identical to the forward's forever to promise that.
func RoPEBackward(c *gpu.Chain, dy, factors, positions *gpu.Buffer, a RoPEArgs) error {
	if err := a.check(); err != nil {
		return fmt.Errorf("%w (backward)", err)
	}
	if err := needF32("rope_backward", "dy", dy, a.Tokens*a.Heads*a.HeadDim); err != nil {
		return err
	}
	if factors != nil {
		if err := needF32("rope_backward", "factors", factors, a.ropeDims()/2); err != nil {
			return err
		}
		if factors == dy {
			return fmt.Errorf("ops: rope_backward: factors %q must be another buffer than dy", factors.Label())
		}
	}
	if positions != nil {
		if a.Pos0 != 0 {
			return fmt.Errorf("ops: rope_backward: pos0 %d with a positions buffer; the buffer gives every position", a.Pos0)
		}
		if positions.Size() < uint64(a.Tokens)*4 {
			return fmt.Errorf("ops: rope_backward: positions buffer %q holds %d positions, need %d", positions.Label(), positions.Size()/4, a.Tokens)
		}
		if positions == dy {
			return fmt.Errorf("ops: rope_backward: positions %q must be another buffer than dy", positions.Label())
		}
	}
	params := a.params(factors != nil, positions != nil)
	for i := range params.Hi {
		params.Hi[i] = -params.Hi[i]
	}
	if factors == nil {
		factors = dy // fills the slot; the kernel does not read it
	}
	if positions == nil {
		positions = dy
	}
	pairs := a.Tokens * a.Heads * a.ropeDims() / 2
	return dispatch(c, gpu.Spec("rope", "rope", "WG", ropeWG), params, gpu.Grid(pairs, ropeWG), dy, factors, positions)
}
