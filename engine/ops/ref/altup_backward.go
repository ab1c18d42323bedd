package ref

import "math"

// The backward of Gemma 3n's AltUp and activation sparsity, for the LoRA
// training step: the gradients of each forward's inputs for the gradients
// of its outputs (the weights are frozen: no gradient of theirs). In
// float64, rounded to f32 once.

// routerBackward adds to dx the gradient of the modalities m =
// tanh(router · rmsnorm(x)·w / Dim) of row x for the gradient dm of m.
func (a AltUpArgs) routerBackward(x, w, router []float32, m, dm []float64, dx []float64) {
	// dr_k = dm_k (1 - m_k^2); d(xn)_e = Σ_k dr_k router[k][e] / Dim.
	dxn := make([]float32, a.Dim)
	for e := range dxn {
		s := 0.0
		for k := range m {
			s += dm[k] * (1 - m[k]*m[k]) * float64(router[k*a.Dim+e])
		}
		dxn[e] = float32(s / float64(a.Dim))
	}
	d := RMSNormBackward(x, w, dxn, NormArgs{Rows: 1, Dim: a.Dim, Eps: a.Eps})
	for e := range dx {
		dx[e] += float64(d[e])
	}
}

// AltUpPredictBackward returns the gradient of AltUpPredict's input s for
// the gradients dPred of its predictions and dActive of its active row
// (which is the active prediction: the two add). With c = coef·m(s_active),
//
//	ds_j = dpred_j + Σ_i c[i*N+j] dpred_i
//
// plus, through the router over s_active, Σ_ij dc_ij s_j·dpred_i's path.
func AltUpPredictBackward(s, w, router, coef, dPred, dActive []float32, a AltUpArgs) []float32 {
	n := a.Streams
	ds := make([]float32, len(s))
	for t := range a.Tokens {
		row := func(buf []float32, k int) []float32 { return buf[a.at(k, t, 0):a.at(k, t, a.Dim)] }
		m := a.modalities(row(s, a.Active), w, router)
		c := make([]float64, n*n)
		for o := range c {
			for k, v := range m {
				c[o] += float64(coef[o*n+k]) * v
			}
		}
		dp := make([][]float64, n)
		for i := range dp {
			dp[i] = make([]float64, a.Dim)
			for e, v := range row(dPred, i) {
				dp[i][e] = float64(v)
			}
			if i == a.Active && dActive != nil {
				for e, v := range dActive[t*a.Dim : (t+1)*a.Dim] {
					dp[i][e] += float64(v)
				}
			}
		}
		out := make([][]float64, n)
		dc := make([]float64, n*n)
		for j := range n {
			out[j] = slicesClone(dp[j])
			sj := row(s, j)
			for i := range n {
				cij := c[i*n+j]
				dot := 0.0
				for e := range a.Dim {
					out[j][e] += cij * dp[i][e]
					dot += dp[i][e] * float64(sj[e])
				}
				dc[i*n+j] = dot
			}
		}
		dm := make([]float64, n)
		for o, v := range dc {
			for k := range dm {
				dm[k] += v * float64(coef[o*n+k])
			}
		}
		a.routerBackward(row(s, a.Active), w, router, m, dm, out[a.Active])
		for j := range n {
			for e, v := range out[j] {
				ds[a.at(j, t, e)] = float32(v)
			}
		}
	}
	return ds
}

// AltUpCorrectBackward returns the gradients of AltUpCorrect's pred and x
// for the gradients dOut of its corrected streams and dFirst of its first
// prediction (first = out_active·scale). With δ = x - pred_active and
// c = coef·m(x) + 1:
//
//	g_i = dout_i (+ dfirst·scale for the active stream)
//	dpred_i = g_i, less Σ_i c_i g_i for the active stream
//	dx = Σ_i c_i g_i, plus the router's path through dc_i = g_i·δ
func AltUpCorrectBackward(pred, x, w, router, coef, scale, dOut, dFirst []float32, a AltUpArgs) (dPred, dX []float32) {
	n := a.Streams
	dPred = make([]float32, len(pred))
	dX = make([]float32, len(x))
	for t := range a.Tokens {
		xt := x[t*a.Dim : (t+1)*a.Dim]
		m := a.modalities(xt, w, router)
		c := make([]float64, n)
		for i := range c {
			c[i] = 1
			for k, v := range m {
				c[i] += float64(coef[i*n+k]) * v
			}
		}
		delta := make([]float64, a.Dim)
		for e := range delta {
			delta[e] = float64(xt[e]) - float64(pred[a.at(a.Active, t, e)])
		}
		dd := make([]float64, a.Dim) // Σ_i c_i g_i
		dc := make([]float64, n)
		for i := range n {
			for e := range a.Dim {
				g := float64(dOut[a.at(i, t, e)])
				if i == a.Active && dFirst != nil {
					g += float64(dFirst[t*a.Dim+e]) * float64(scale[e])
				}
				dPred[a.at(i, t, e)] = float32(g)
				dd[e] += c[i] * g
				dc[i] += g * delta[e]
			}
		}
		dm := make([]float64, n)
		for i, v := range dc {
			for k := range dm {
				dm[k] += v * float64(coef[i*n+k])
			}
		}
		dx := slicesClone(dd)
		a.routerBackward(xt, w, router, m, dm, dx)
		for e := range a.Dim {
			dPred[a.at(a.Active, t, e)] = float32(float64(dPred[a.at(a.Active, t, e)]) - dd[e])
			dX[t*a.Dim+e] = float32(dx[e])
		}
	}
	return dPred, dX
}

// AltUpMergeBackward returns the gradient of AltUpMerge's streams s for the
// gradient dOut of its output. With T = rms(s_0), M_k = sqrt(max(ms(s_k),
// 1e-5)), f_k = T/M_k and g = dout/N:
//
//	ds_k = f_k g - (g·s_k) T s_k / (Dim M_k³)   (the last term only where ms(s_k) > 1e-5)
//	ds_0 = g + Σ_k (g·s_k) s_0 / (Dim T M_k)     (the sum only where T > 0)
func AltUpMergeBackward(s, dOut []float32, a AltUpArgs) []float32 {
	ds := make([]float32, len(s))
	d := float64(a.Dim)
	for t := range a.Tokens {
		ms := func(k int) float64 {
			ss := 0.0
			for e := range a.Dim {
				v := float64(s[a.at(k, t, e)])
				ss += v * v
			}
			return ss / d
		}
		tr := math.Sqrt(ms(0))
		g := make([]float64, a.Dim)
		for e := range g {
			g[e] = float64(dOut[t*a.Dim+e]) / float64(a.Streams)
		}
		d0 := slicesClone(g)
		for k := 1; k < a.Streams; k++ {
			msk := ms(k)
			mk := math.Sqrt(math.Max(msk, altUpMagnitudeEps))
			gs := 0.0
			for e := range a.Dim {
				gs += g[e] * float64(s[a.at(k, t, e)])
			}
			for e := range a.Dim {
				v := tr / mk * g[e]
				if msk > altUpMagnitudeEps {
					v -= gs * tr * float64(s[a.at(k, t, e)]) / (d * mk * mk * mk)
				}
				ds[a.at(k, t, e)] = float32(v)
				if tr > 0 {
					d0[e] += gs * float64(s[a.at(0, t, e)]) / (d * tr * mk)
				}
			}
		}
		for e, v := range d0 {
			ds[a.at(0, t, e)] = float32(v)
		}
	}
	return ds
}

// GaussianTopKBackward returns the gradient of GaussianTopK's input g (rows
// rows of n values, stride apart; the rest of each stride is passed
// through) for the gradient dy of its output. With the mask of the kept
// values, S = Σ mask·dy, μ and σ the row's mean and population std:
//
//	dg_j = mask_j dy_j - S/n - S·mult·(g_j - μ)/(n σ)
func GaussianTopKBackward(g, dy []float32, rows, n, stride int, mult float32) []float32 {
	dg := make([]float32, len(g))
	copy(dg, dy)
	for r := range rows {
		row := g[r*stride : r*stride+n]
		mean, sd := meanStd(row)
		cut := mean + float64(mult)*sd
		sum := 0.0
		for j, v := range row {
			if float64(v)-cut > 0 {
				sum += float64(dy[r*stride+j])
			}
		}
		for j, v := range row {
			x := -sum / float64(n)
			if sd > 0 {
				x -= sum * float64(mult) * (float64(v) - mean) / (float64(n) * sd)
			}
			if float64(v)-cut > 0 {
				x += float64(dy[r*stride+j])
			}
			dg[r*stride+j] = float32(x)
		}
	}
	return dg
}

func slicesClone(v []float64) []float64 { return append([]float64(nil), v...) }
