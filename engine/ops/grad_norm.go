package ops

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// GradBuffer is one gradient tensor of a global norm: N floats of Buf.
type GradBuffer struct {
	Buf *gpu.Buffer
	N   int
}

// GradNormArgs configure GradNorm.
type GradNormArgs struct {
	// Scale multiplies the norm: the same factor AdamWArgs.GradScale applies
	// to the gradients (1/steps when accumulating micro-batches by sum), so
	// that the norm clipped is the norm of the gradients stepped. 0 means 1.
	Scale float32
	// MaxNorm is the clipping threshold; 0 means no clipping (clip = 1).
	MaxNorm float32
}

// gradNormParams mirrors Params in shaders/grad_norm.wgsl.
type gradNormParams struct {
	N, Offset      uint32
	Scale, MaxNorm float32
}

// gradNormPer is PER in shaders/grad_norm.wgsl: each invocation of the
// first pass squares 16 floats, so a workgroup covers 4096 and a buffer of
// a million floats leaves 245 partials, which the single finishing
// workgroup folds in one stride each.
const (
	gradNormPer   = 16
	gradNormChunk = wg * gradNormPer
)

// GradNormPartials is the number of floats of the partials scratch that
// GradNorm needs for buffers of these lengths.
func GradNormPartials(lengths ...int) int {
	n := 0
	for _, l := range lengths {
		n += (l + gradNormChunk - 1) / gradNormChunk
	}
	return n
}

// GradNorm appends the global L2 norm of all grads, as one vector, and the
// clip factor torch.nn.utils.clip_grad_norm_ would use:
//
//	out[0] = norm = sqrt(sum of squares) * a.Scale
//	out[1] = clip = min(1, a.MaxNorm / (norm + 1e-6))   (1 without MaxNorm)
//
// in two passes with no atomics, so the result is the same bits on every
// run. partials is scratch of GradNormPartials(lengths...) floats. Pass out
// as AdamW's clip buffer to clip in the same chain, with no readback.
func GradNorm(c *gpu.Chain, grads []GradBuffer, partials, out *gpu.Buffer, a GradNormArgs) error {
	const kernel = "grad_norm"
	if len(grads) == 0 {
		return fmt.Errorf("ops: %s: no gradient buffers", kernel)
	}
	if !(a.Scale >= 0) || math.IsInf(float64(a.Scale), 0) || !(a.MaxNorm >= 0) || math.IsInf(float64(a.MaxNorm), 0) {
		return fmt.Errorf("ops: %s: scale %v and max_norm %v must be finite and >= 0", kernel, a.Scale, a.MaxNorm)
	}
	lengths := make([]int, len(grads))
	for i, g := range grads {
		if g.N <= 0 || int64(g.N) > math.MaxUint32-gradNormChunk {
			return fmt.Errorf("ops: %s: gradient %d: length %d outside 1..2^32-%d", kernel, i, g.N, gradNormChunk)
		}
		if err := needF32(kernel, fmt.Sprintf("gradient %d", i), g.Buf, g.N); err != nil {
			return err
		}
		if g.Buf == partials || g.Buf == out {
			return fmt.Errorf("ops: %s: gradient %d %q is also the partials or the output", kernel, i, g.Buf.Label())
		}
		lengths[i] = g.N
	}
	total := GradNormPartials(lengths...)
	if err := needF32(kernel, "partials", partials, total); err != nil {
		return err
	}
	if err := needF32(kernel, "out", out, 2); err != nil {
		return err
	}
	if partials == out {
		return fmt.Errorf("ops: %s: partials and out are both %q", kernel, out.Label())
	}
	off := 0
	for _, g := range grads {
		groups := (g.N + gradNormChunk - 1) / gradNormChunk
		params := gradNormParams{N: uint32(g.N), Offset: uint32(off)}
		spec := gpu.Spec("grad_norm", "sumsq_partial", "WG", wg, "PER", gradNormPer)
		if err := dispatch(c, spec, params, gpu.Grid(groups, 1), g.Buf, partials, out); err != nil {
			return err
		}
		off += groups
	}
	scale := a.Scale
	if scale == 0 {
		scale = 1
	}
	params := gradNormParams{N: uint32(total), Scale: scale, MaxNorm: a.MaxNorm}
	spec := gpu.Spec("grad_norm", "grad_norm_finish", "WG", wg, "PER", gradNormPer)
	return dispatch(c, spec, params, [3]uint32{1, 1, 1}, partials, partials, out)
}
