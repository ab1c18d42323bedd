package ops

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// AdamWArgs configure one AdamW step, with torch.optim.AdamW's names and
// meaning (amsgrad off).
//
// The scalars are float64, as PyTorch's are Python floats: the kernel gets
// 1 - beta1, 1 - beta2 and 1 - lr*wd each rounded once from float64, as
// PyTorch passes them. From f32 betas it could not: 1 - f32(0.999) is
// 1.3e-5 away from 0.001, a bias on every second moment.
type AdamWArgs struct {
	N           int     // floats in the parameter, gradient and moment buffers
	LR          float64 // learning rate of this step (the schedule is the caller's)
	Beta1       float64 // e.g. 0.9
	Beta2       float64 // e.g. 0.999
	Eps         float64 // e.g. 1e-8
	WeightDecay float64 // decoupled: p *= 1 - LR*WeightDecay before the update
	// Step is t, counting from 1: the bias corrections 1 - beta^t use it.
	Step int
	// GradScale multiplies the gradient first (1/steps to average micro-
	// batches accumulated by sum); 0 means 1.
	GradScale float64
}

// adamWParams mirrors Params in shaders/adamw.wgsl.
type adamWParams struct {
	N, Flags                       uint32
	GradScale, Decay, Beta1, Beta2 float32
	StepSize, SqrtBC2, Eps         float32
	OneMinusBeta1, OneMinusBeta2   float32
	_                              uint32
}

func (a AdamWArgs) check() error {
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case a.N <= 0 || int64(a.N) > math.MaxUint32:
		return fmt.Errorf("ops: adamw: length %d outside 1..2^32-1", a.N)
	case a.Step < 1:
		return fmt.Errorf("ops: adamw: step %d must count from 1", a.Step)
	case !finite(a.LR) || a.LR < 0:
		return fmt.Errorf("ops: adamw: lr %v must be finite and >= 0", a.LR)
	case !(a.Beta1 >= 0 && a.Beta1 < 1) || !(a.Beta2 >= 0 && a.Beta2 < 1):
		return fmt.Errorf("ops: adamw: betas (%v, %v) must lie in [0, 1)", a.Beta1, a.Beta2)
	case !finite(a.Eps) || a.Eps <= 0:
		return fmt.Errorf("ops: adamw: eps %v must be finite and > 0", a.Eps)
	case !finite(a.WeightDecay) || a.WeightDecay < 0:
		return fmt.Errorf("ops: adamw: weight_decay %v must be finite and >= 0", a.WeightDecay)
	case !finite(a.GradScale) || a.GradScale < 0:
		return fmt.Errorf("ops: adamw: grad_scale %v must be finite and >= 0", a.GradScale)
	}
	return nil
}

// params computes the step's scalars in float64, as PyTorch does in Python
// floats, and rounds each once.
func (a AdamWArgs) params(clip bool) adamWParams {
	t := float64(a.Step)
	bc1 := 1 - math.Pow(a.Beta1, t)
	bc2 := 1 - math.Pow(a.Beta2, t)
	scale := a.GradScale
	if scale == 0 {
		scale = 1
	}
	p := adamWParams{
		N: uint32(a.N), GradScale: float32(scale),
		Decay: float32(1 - a.LR*a.WeightDecay), Beta1: float32(a.Beta1), Beta2: float32(a.Beta2),
		StepSize: float32(a.LR / bc1), SqrtBC2: float32(math.Sqrt(bc2)), Eps: float32(a.Eps),
		OneMinusBeta1: float32(1 - a.Beta1), OneMinusBeta2: float32(1 - a.Beta2),
	}
	if clip {
		p.Flags = 1
	}
	return p
}

// AdamW appends one AdamW step over a.N floats, updating param, m and v in
// place (see shaders/adamw.wgsl for the formula, PyTorch's):
//
//	g = grad * GradScale * clip[1]
//	p *= 1 - lr*wd;  m = lerp(m, g, 1-b1);  v = b2 v + (1-b2) g^2
//	p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
//
// clip is GradNorm's output (its clip factor at index 1), or nil for none.
// m and v start as zeros at step 1. param, grad, m, v and clip must be five
// distinct buffers.
func AdamW(c *gpu.Chain, param, grad, m, v, clip *gpu.Buffer, a AdamWArgs) error {
	if err := a.check(); err != nil {
		return err
	}
	for _, o := range []operand{{"param", param, a.N}, {"grad", grad, a.N}, {"m", m, a.N}, {"v", v, a.N}} {
		if err := needF32("adamw", o.what, o.buf, o.n); err != nil {
			return err
		}
	}
	bufs := []*gpu.Buffer{param, grad, m, v}
	if clip != nil {
		if err := needF32("adamw", "clip", clip, 2); err != nil {
			return err
		}
		bufs = append(bufs, clip)
	}
	for i := range bufs {
		for j := range i {
			if bufs[i] == bufs[j] {
				return fmt.Errorf("ops: adamw: buffer %q fills two of param, grad, m, v, clip", bufs[i].Label())
			}
		}
	}
	params := a.params(clip != nil)
	if clip == nil {
		clip = grad // fills the slot; the kernel does not read it
	}
	return dispatch(c, gpu.Spec("adamw", "adamw", "WG", wg), params, gpu.Grid(a.N, wg), param, grad, m, v, clip)
}
