package ref

import "math"

// AttentionBackward returns the gradients of Attention(q, k, v, a) for the
// upstream gradient dout: dq [Tokens, Heads, HeadDim] and dk, dv [KVLen,
// KVHeads, HeadDim], the latter summed over the query heads of each KV
// head's group. Per query row i, over its visible keys j, with
// z = scale q_i.k_j, s = softcap(z) (or z), P = softmax(s) (with a sink,
// P_ij = exp(s_ij) / (sum_j exp(s_ij) + exp(sink_h)): the sink, frozen and
// without a value, changes only P):
//
//	dP_ij = dout_i.v_j,  delta_i = sum_j P_ij dP_ij
//	dZ_ij = P_ij (dP_ij - delta_i) s'(z_ij),  s' = 1 - tanh^2(z/cap) or 1
//	dq_i += scale dZ_ij k_j,  dk_j += scale dZ_ij q_i,  dv_j += P_ij dout_i
//
// All in float64.
func AttentionBackward(q, k, v, dout []float32, a AttentionArgs) (dq, dk, dv []float32) {
	hd := a.HeadDim
	scale := float64(a.Scale)
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(hd))
	}
	group := a.Heads / a.KVHeads
	gq := make([]float64, a.Tokens*a.Heads*hd)
	gk := make([]float64, a.KVLen*a.KVHeads*hd)
	gv := make([]float64, len(gk))
	s := make([]float64, a.KVLen)
	dcap := make([]float64, a.KVLen)
	prob := make([]float64, a.KVLen)
	dp := make([]float64, a.KVLen)
	for t := range a.Tokens {
		i := a.Pos0 + t
		j0, j1 := 0, min(i+1, a.KVLen)
		if a.Window > 0 {
			j0 = max(0, i+1-a.Window)
		}
		for h := range a.Heads {
			qo := (t*a.Heads + h) * hd
			kvh := h / group
			sink := a.sink(h)
			m := sink
			for j := j0; j < j1; j++ {
				ko := (j*a.KVHeads + kvh) * hd
				dot, dpv := 0.0, 0.0
				for d := range hd {
					dot += float64(q[qo+d]) * float64(k[ko+d])
					dpv += float64(dout[qo+d]) * float64(v[ko+d])
				}
				z := dot * scale
				s[j], dcap[j], dp[j] = z, 1, dpv
				if a.Softcap > 0 {
					c := float64(a.Softcap)
					th := math.Tanh(z / c)
					s[j], dcap[j] = c*th, 1-th*th
				}
				m = math.Max(m, s[j])
			}
			sum := math.Exp(sink - m)
			for j := j0; j < j1; j++ {
				prob[j] = math.Exp(s[j] - m)
				sum += prob[j]
			}
			delta := 0.0
			for j := j0; j < j1; j++ {
				prob[j] /= sum
				delta += prob[j] * dp[j]
			}
			for j := j0; j < j1; j++ {
				dz := prob[j] * (dp[j] - delta) * dcap[j] * scale
				ko := (j*a.KVHeads + kvh) * hd
				for d := range hd {
					gq[qo+d] += dz * float64(k[ko+d])
					gk[ko+d] += dz * float64(q[qo+d])
					gv[ko+d] += prob[j] * float64(dout[qo+d])
				}
			}
		}
	}
	return roundF32(gq), roundF32(gk), roundF32(gv)
}

// roundF32 rounds a float64 result to f32.
func roundF32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}
