package ref

import "math"

// MoERouteArgs shape a mixture-of-experts gate, as ops.MoERouteArgs:
// Tokens rows of Experts router logits, TopK experts chosen a token.
// Sigmoid gates each expert with sigmoid(logit) instead of a softmax over
// all of them; Renorm divides the chosen weights by their sum; Scale, when
// not nil, multiplies each chosen expert's weight by its entry.
type MoERouteArgs struct {
	Tokens, Experts, TopK int
	Sigmoid, Renorm       bool
}

// MoERoute returns each token's TopK experts (the largest gate values,
// ties to the lower index, largest first) and their weights, in float64
// throughout: ids and weights are [Tokens][TopK]. A NaN gate value goes
// ahead of every number, as the kernel's order puts it: the token still
// gets TopK distinct experts.
func MoERoute(logits, scale []float32, a MoERouteArgs) (ids []uint32, weights []float32) {
	ids = make([]uint32, a.Tokens*a.TopK)
	weights = make([]float32, a.Tokens*a.TopK)
	p := make([]float64, a.Experts)
	for t := range a.Tokens {
		gates(logits[t*a.Experts:(t+1)*a.Experts], a.Sigmoid, p)
		sum := 0.0
		out := ids[t*a.TopK : (t+1)*a.TopK]
		w := make([]float64, a.TopK)
		taken := make([]bool, a.Experts)
		for k := range out {
			best := -1
			for e, v := range p {
				if !taken[e] && (best < 0 || ahead(v, p[best])) {
					best = e
				}
			}
			out[k], w[k] = uint32(best), p[best]
			sum += p[best]
			taken[best] = true
		}
		for k, v := range w {
			if a.Renorm {
				v /= sum
			}
			if scale != nil {
				v *= float64(scale[out[k]])
			}
			weights[t*a.TopK+k] = float32(v)
		}
	}
	return ids, weights
}

// ahead says whether gate value v goes before b: it is larger, or NaN
// where b is not.
func ahead(v, b float64) bool {
	if math.IsNaN(v) {
		return !math.IsNaN(b)
	}
	return v > b
}
