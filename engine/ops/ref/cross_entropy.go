package ref

import "math"

// CrossEntropy returns the loss of each of rows rows of vocab logits against
// its target (targets[r] < 0 masks the row: loss 0; a target ≥ vocab gives
// NaN): logsumexp(z) − z[t], z the logits or, with softcap c > 0,
// c·tanh(logit/c). Computed in float64 from the f32 inputs.
func CrossEntropy(logits []float32, targets []int32, rows, vocab int, softcap float32) []float32 {
	loss, _ := CrossEntropyBackward(logits, targets, rows, vocab, 1, softcap)
	return loss
}

// CrossEntropyBackward returns CrossEntropy's losses and the gradient with
// respect to the logits, (softmax(z) − onehot(t))·scale·dz/dlogit, zero for
// masked rows and rows whose target is past the vocabulary.
func CrossEntropyBackward(logits []float32, targets []int32, rows, vocab int, scale, softcap float32) (loss, grad []float32) {
	loss, grad = make([]float32, rows), make([]float32, rows*vocab)
	z := make([]float64, vocab)
	for r := range rows {
		t := int(targets[r])
		switch {
		case t < 0:
			continue
		case t >= vocab:
			loss[r] = float32(math.NaN())
			continue
		}
		for i, v := range logits[r*vocab : (r+1)*vocab] {
			z[i] = float64(v)
		}
		l, g := crossEntropy64(z, t, float64(softcap))
		loss[r] = float32(l)
		for i, v := range g {
			grad[r*vocab+i] = float32(v * float64(scale))
		}
	}
	return loss, grad
}

// crossEntropy64 is one row in float64: the loss of target t over logits x
// (soft-capped at c when c > 0) and its gradient with respect to x.
func crossEntropy64(x []float64, t int, c float64) (loss float64, grad []float64) {
	z := make([]float64, len(x))
	for i, v := range x {
		z[i] = v
		if c > 0 {
			z[i] = c * math.Tanh(v/c)
		}
	}
	m := math.Inf(-1)
	for _, v := range z {
		m = math.Max(m, v)
	}
	sum := 0.0
	for _, v := range z {
		sum += math.Exp(v - m)
	}
	loss = m + math.Log(sum) - z[t]
	grad = make([]float64, len(x))
	for i, v := range z {
		g := math.Exp(v-m) / sum
		if i == t {
			g--
		}
		if c > 0 {
			// 1 − tanh² as 1/cosh²: tanh rounds to exactly 1 past |x/c| ≈ 19,
			// where 1 − tanh² would give 0 for a derivative still ~1e-16
			// (the kernel keeps it, down to f32's range).
			s := 1 / math.Cosh(x[i]/c)
			g *= s * s
		}
		grad[i] = g
	}
	return loss, grad
}
