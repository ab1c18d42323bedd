package ref

import "math"

// PLEArgs shapes Gemma 4's per-layer-embedding gate, as ops.PLEArgs: Tokens
// tokens, Layers layers of Dim floats each, the Layer whose slice is used,
// the norm's Eps, ProjScale (hidden_size^-0.5) and InputScale (2^-0.5).
type PLEArgs struct {
	Tokens, Layers, Dim, Layer int
	Eps, ProjScale, InputScale float32
}

// PLEGate returns, for each token t and j < Dim, with
// p_j = proj[t][Layer*Dim + j] * ProjScale,
//
//	gelu(g[t][j]) * (p_j / sqrt(mean(p^2) + Eps) * w[j] + tok[t][Layer*Dim + j]) * InputScale
//
// where g is [Tokens][Dim], proj and tok [Tokens][Layers*Dim] and w Dim
// floats, gelu being the tanh approximation. In float64 throughout.
func PLEGate(g, proj, tok, w []float32, a PLEArgs) []float32 {
	out := pleInput(proj, tok, w, a)
	for i, v := range out {
		out[i] = gelu(float64(g[i])) * v
	}
	return toF32(out)
}

// PLEInput returns PLEGate's per-layer input without the gate: for each
// token t and j < Dim, (p_j / sqrt(mean(p^2) + Eps) * w[j] + tok[t][Layer*Dim
// + j]) * InputScale. In float64 throughout.
func PLEInput(proj, tok, w []float32, a PLEArgs) []float32 {
	return toF32(pleInput(proj, tok, w, a))
}

// pleInput is PLEInput in float64.
func pleInput(proj, tok, w []float32, a PLEArgs) []float64 {
	out := make([]float64, a.Tokens*a.Dim)
	p := make([]float64, a.Dim)
	for t := range a.Tokens {
		src := t*a.Layers*a.Dim + a.Layer*a.Dim
		ss := 0.0
		for j := range p {
			p[j] = float64(proj[src+j]) * float64(a.ProjScale)
			ss += p[j] * p[j]
		}
		inv := 1 / math.Sqrt(ss/float64(a.Dim)+float64(a.Eps))
		for j, v := range p {
			out[t*a.Dim+j] = (v*inv*float64(w[j]) + float64(tok[src+j])) * float64(a.InputScale)
		}
	}
	return out
}

func toF32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}
