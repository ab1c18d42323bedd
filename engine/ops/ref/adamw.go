package ref

import "math"

// AdamWArgs mirror ops.AdamWArgs: one step of torch.optim.AdamW.
type AdamWArgs struct {
	LR, Beta1, Beta2, Eps, WeightDecay float64
	Step                               int     // t, from 1
	GradScale                          float64 // 0 means 1
}

// AdamW applies one step of torch.optim.AdamW (amsgrad off, maximize off)
// to param, m and v in place, in float64, with the gradient scaled by
// a.GradScale and clip (GradNorm's clip factor, 1 for none). PyTorch's
// single-tensor step (torch/optim/adamw.py, _single_tensor_adamw), with
// g = grad * scale * clip:
//
//	p  = p * (1 - lr * weight_decay)
//	m  = m + (1 - beta1) * (g - m)          (exp_avg.lerp_(g, 1 - beta1))
//	v  = beta2 * v + (1 - beta2) * g * g    (exp_avg_sq.mul_(beta2).addcmul_)
//	bias_correction1 = 1 - beta1^t
//	bias_correction2 = 1 - beta2^t
//	step_size = lr / bias_correction1
//	denom = sqrt(v) / sqrt(bias_correction2) + eps
//	p  = p - step_size * m / denom
//
// The state stays f32 between steps, as PyTorch's for f32 parameters.
func AdamW(param, grad, m, v []float32, clip float32, a AdamWArgs) {
	lr, b1, b2, eps := a.LR, a.Beta1, a.Beta2, a.Eps
	t := float64(a.Step)
	bc1, bc2 := 1-math.Pow(b1, t), 1-math.Pow(b2, t)
	scale := a.GradScale
	if scale == 0 {
		scale = 1
	}
	scale *= float64(clip)
	for i := range param {
		g := float64(grad[i]) * scale
		p := float64(param[i]) * (1 - lr*a.WeightDecay)
		mi := float64(m[i]) + (1-b1)*(g-float64(m[i]))
		vi := b2*float64(v[i]) + (1-b2)*g*g
		denom := math.Sqrt(vi)/math.Sqrt(bc2) + eps
		param[i] = float32(p - lr/bc1*mi/denom)
		m[i], v[i] = float32(mi), float32(vi)
	}
}

// GradNorm returns the L2 norm of all grads as one vector, times scale (0
// means 1), and torch.nn.utils.clip_grad_norm_'s clip factor
// min(1, maxNorm / (norm + 1e-6)), 1 when maxNorm is 0. In float64.
func GradNorm(grads [][]float32, scale, maxNorm float32) (norm, clip float64) {
	ss := 0.0
	for _, g := range grads {
		for _, v := range g {
			ss += float64(v) * float64(v)
		}
	}
	s := float64(scale)
	if s == 0 {
		s = 1
	}
	norm = math.Sqrt(ss) * s
	clip = 1
	if maxNorm > 0 {
		clip = math.Min(1, float64(maxNorm)/(norm+1e-6))
	}
	return norm, clip
}
