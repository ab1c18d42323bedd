package ref

import "math"

// AltUpArgs shapes Gemma 3n's AltUp, as ops.AltUpArgs: Streams residual
// streams of Tokens rows of Dim floats, stream-major (stream k's row t at
// (k*Tokens + t)*Dim), Active the stream the layer computes on, Eps the
// router norm's.
type AltUpArgs struct {
	Tokens, Dim, Streams, Active int
	Eps                          float32
}

// at is the index of element e of stream k's row t.
func (a AltUpArgs) at(k, t, e int) int { return (k*a.Tokens+t)*a.Dim + e }

// altUpMagnitudeEps floors the mean square a rescaled stream is divided by
// (transformers' Gemma3nTextModel: 1e-5).
const altUpMagnitudeEps = 1e-5

// modalities are AltUp's router outputs for row x: tanh(router ·
// (rmsnorm(x)·w / Dim)), one per stream (router is Streams rows of Dim).
func (a AltUpArgs) modalities(x []float32, w, router []float32) []float64 {
	ss := 0.0
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	inv := 1 / math.Sqrt(ss/float64(a.Dim)+float64(a.Eps))
	m := make([]float64, a.Streams)
	for j := range m {
		dot := 0.0
		for e, v := range x {
			dot += float64(v) * inv * float64(w[e]) * float64(router[j*a.Dim+e])
		}
		m[j] = math.Tanh(dot / float64(a.Dim))
	}
	return m
}

// AltUpPredict returns AltUp's predictions of every stream and the active
// one's alone (Tokens rows): for each token, with m the modalities of
// the active stream and c = coef·m (coef is Streams² rows of Streams),
//
//	pred_i = s_i + Σ_j c[i*Streams + j] · s_j
//
// (transformers' Gemma3nTextAltUp.predict). In float64.
func AltUpPredict(s, w, router, coef []float32, a AltUpArgs) (pred, active []float32) {
	n := a.Streams
	pred = make([]float32, len(s))
	active = make([]float32, a.Tokens*a.Dim)
	for t := range a.Tokens {
		x := s[a.at(a.Active, t, 0):a.at(a.Active, t, a.Dim)]
		m := a.modalities(x, w, router)
		c := make([]float64, n*n)
		for o := range c {
			for k, v := range m {
				c[o] += float64(coef[o*n+k]) * v
			}
		}
		for i := range n {
			for e := range a.Dim {
				v := float64(s[a.at(i, t, e)])
				for j := range n {
					v += c[i*n+j] * float64(s[a.at(j, t, e)])
				}
				pred[a.at(i, t, e)] = float32(v)
				if i == a.Active {
					active[t*a.Dim+e] = float32(v)
				}
			}
		}
	}
	return pred, active
}

// AltUpCorrect returns the corrected streams and the first prediction:
// for each token, with m the modalities of x (the layer's output on the
// active prediction) and c = coef·m + 1 (coef is Streams rows of Streams),
//
//	out_i = pred_i + c_i · (x - pred_active)
//	first = out_active · scale
//
// (transformers' Gemma3nTextAltUp.correct and scale_corrected_output). In
// float64.
func AltUpCorrect(pred, x, w, router, coef, scale []float32, a AltUpArgs) (out, first []float32) {
	n := a.Streams
	out = make([]float32, len(pred))
	first = make([]float32, a.Tokens*a.Dim)
	for t := range a.Tokens {
		xt := x[t*a.Dim : (t+1)*a.Dim]
		m := a.modalities(xt, w, router)
		for i := range n {
			c := 1.0
			for k, v := range m {
				c += float64(coef[i*n+k]) * v
			}
			for e := range a.Dim {
				p := float64(pred[a.at(i, t, e)])
				v := p + c*(float64(xt[e])-float64(pred[a.at(a.Active, t, e)]))
				out[a.at(i, t, e)] = float32(v)
				if i == a.Active {
					first[t*a.Dim+e] = float32(v * float64(scale[e]))
				}
			}
		}
	}
	return out, first
}

// AltUpAddNormed adds rmsnorm(f)·w (f Tokens rows of Dim) to every stream
// but stream 0, in place: where Gemma 3n's per-layer embedding goes
// (corrected_predictions[1:] += first_prediction).
func AltUpAddNormed(s, f, w []float32, a AltUpArgs) {
	y := RMSNorm(f, w, NormArgs{Rows: a.Tokens, Dim: a.Dim, Eps: a.Eps})
	for k := 1; k < a.Streams; k++ {
		for t := range a.Tokens {
			for e := range a.Dim {
				s[a.at(k, t, e)] += y[t*a.Dim+e]
			}
		}
	}
}

// AltUpRescale scales each token's row of every stream but stream 0 to
// stream 0's RMS, in place: each is multiplied by rms(s_0) /
// sqrt(max(mean(s_k^2), 1e-5)), as Gemma 3n makes its streams from the
// embedding. In float64.
func AltUpRescale(s []float32, a AltUpArgs) {
	for t := range a.Tokens {
		for k := 1; k < a.Streams; k++ {
			f := a.rescale(s, k, t)
			for e := range a.Dim {
				s[a.at(k, t, e)] = float32(float64(s[a.at(k, t, e)]) * f)
			}
		}
	}
}

// AltUpMerge returns the mean of the streams (Tokens rows) after
// rescaling every stream but stream 0 as AltUpRescale does: Gemma 3n's
// end of the stack, s_k for k > 0 being altup_unembd_proj's outputs. In
// float64.
func AltUpMerge(s []float32, a AltUpArgs) []float32 {
	out := make([]float32, a.Tokens*a.Dim)
	for t := range a.Tokens {
		f := make([]float64, a.Streams)
		f[0] = 1
		for k := 1; k < a.Streams; k++ {
			f[k] = a.rescale(s, k, t)
		}
		for e := range a.Dim {
			v := 0.0
			for k := range a.Streams {
				v += float64(s[a.at(k, t, e)]) * f[k]
			}
			out[t*a.Dim+e] = float32(v / float64(a.Streams))
		}
	}
	return out
}

// rescale is the factor stream k's row t is scaled by to stream 0's RMS.
func (a AltUpArgs) rescale(s []float32, k, t int) float64 {
	ms := func(k int) float64 {
		ss := 0.0
		for e := range a.Dim {
			v := float64(s[a.at(k, t, e)])
			ss += v * v
		}
		return ss / float64(a.Dim)
	}
	return math.Sqrt(ms(0)) / math.Sqrt(math.Max(ms(k), altUpMagnitudeEps))
}

// GaussianTopK sparsifies each of rows rows of n gate values in place (row
// r at r*stride): with the row's mean and population standard deviation,
// g = max(g - (mean + mult·std), 0), Gemma 3n's activation sparsity
// (transformers' Gemma3nTextMLP._gaussian_topk). In float64.
func GaussianTopK(g []float32, rows, n, stride int, mult float32) {
	for r := range rows {
		row := g[r*stride : r*stride+n]
		mean, sd := meanStd(row)
		cut := mean + float64(mult)*sd
		for j, v := range row {
			row[j] = float32(math.Max(float64(v)-cut, 0))
		}
	}
}

// meanStd is row's mean and population standard deviation, in two passes.
func meanStd(row []float32) (mean, sd float64) {
	for _, v := range row {
		mean += float64(v)
	}
	mean /= float64(len(row))
	vr := 0.0
	for _, v := range row {
		d := float64(v) - mean
		vr += d * d
	}
	return mean, math.Sqrt(vr / float64(len(row)))
}
