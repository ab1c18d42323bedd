package ref

import "math"

// MoECombineBackward is MoECombine's backward for the gradient dout of its
// output (tokens rows of dim): each slot's output row gets
// dY[s] = scale·w[s]·dout[t] and its router weight dW[s] = scale·dout[t]·y[s],
// t = s / used, in float64 (scale 0 means 1).
func MoECombineBackward(y, weights, dout []float32, tokens, used, dim int, scale float32) (dY, dW []float32) {
	if scale == 0 {
		scale = 1
	}
	sc := float64(scale)
	dY = make([]float32, tokens*used*dim)
	dW = make([]float32, tokens*used)
	for s := range tokens * used {
		t := s / used
		d := 0.0
		for i := range dim {
			g := float64(dout[t*dim+i])
			d += g * float64(y[s*dim+i])
			dY[s*dim+i] = float32(sc * float64(weights[s]) * g)
		}
		dW[s] = float32(sc * d)
	}
	return dY, dW
}

// MoERouteBackward is MoERoute's backward: the gradient of the router
// logits (Tokens rows of Experts) for the gradient dweights of the chosen
// weights, the choice (ids) held fixed, in float64. With p the gate values
// (the softmax over all logits, or each logit's sigmoid) and q the chosen
// ones, a chosen weight is sc·q/S (S = Σq with Renorm, else 1; sc the
// per-expert scale, 1 without): dq = sc·dw, less Σ w·dw/S with Renorm;
// then dl = p·(dq − Σ q·dq) through the softmax (dq 0 where unchosen), or
// dq·p·(1 − p) through a sigmoid.
func MoERouteBackward(logits, scale []float32, ids []uint32, dweights []float32, a MoERouteArgs) []float32 {
	dl := make([]float32, a.Tokens*a.Experts)
	p := make([]float64, a.Experts)
	dq := make([]float64, a.Experts)
	for t := range a.Tokens {
		row := logits[t*a.Experts : (t+1)*a.Experts]
		gates(row, a.Sigmoid, p)
		chosen := ids[t*a.TopK : (t+1)*a.TopK]
		sum := 1.0
		if a.Renorm {
			sum = 0
			for _, e := range chosen {
				sum += p[e]
			}
		}
		// dw through the scale, and Σ w·dw with w = q/S.
		dwk := make([]float64, a.TopK)
		wdw := 0.0
		for k, e := range chosen {
			dwk[k] = float64(dweights[t*a.TopK+k])
			if scale != nil {
				dwk[k] *= float64(scale[e])
			}
			wdw += p[e] / sum * dwk[k]
		}
		clear(dq)
		for k, e := range chosen {
			dq[e] = dwk[k]
			if a.Renorm {
				dq[e] = (dwk[k] - wdw) / sum
			}
		}
		out := dl[t*a.Experts : (t+1)*a.Experts]
		if a.Sigmoid {
			for e := range out {
				out[e] = float32(dq[e] * p[e] * (1 - p[e]))
			}
			continue
		}
		qdq := 0.0
		for _, e := range chosen {
			qdq += p[e] * dq[e]
		}
		for e := range out {
			out[e] = float32(p[e] * (dq[e] - qdq))
		}
	}
	return dl
}

// gates writes the gate values of one token's router logits into p: their
// softmax, or each one's sigmoid.
func gates(row []float32, sigmoid bool, p []float64) {
	if sigmoid {
		for e, l := range row {
			p[e] = 1 / (1 + math.Exp(-float64(l)))
		}
		return
	}
	m := math.Inf(-1)
	for _, l := range row {
		m = math.Max(m, float64(l))
	}
	s := 0.0
	for e, l := range row {
		p[e] = math.Exp(float64(l) - m)
		s += p[e]
	}
	for e := range p {
		p[e] /= s
	}
}
