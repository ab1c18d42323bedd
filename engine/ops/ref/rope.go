package ref

import "math"

// RoPEArgs shapes a rotary position embedding, as ops.RoPEArgs: x is
// [Tokens, Heads, HeadDim]; the first RopeDims (0 = HeadDim) dims of each
// head rotate, in NeoX pairs (i, i + RopeDims/2) or normal pairs (2i, 2i+1);
// token t sits at Pos0 + t, or positions[t] when positions are given.
type RoPEArgs struct {
	Tokens, Heads, HeadDim int
	RopeDims               int
	NeoX                   bool
	Base, FreqScale        float32
	Pos0                   int
	AttnFactor             float32 // multiplies cos and sin; 0 means 1
}

// attnFactor is a.AttnFactor with 0 meaning 1.
func (a RoPEArgs) attnFactor() float64 {
	if a.AttnFactor == 0 {
		return 1
	}
	return float64(a.AttnFactor)
}

// RoPETheta is the exact angle of pair i at position pos, in float64:
// pos * FreqScale * Base^(-2i / RopeDims) / factors[i] (factors may be nil,
// FreqScale 0 means 1). The kernel carries it in f32; tests size their
// tolerance from it.
func RoPETheta(a RoPEArgs, factors []float32, pos, i int) float64 {
	d := a.RopeDims
	if d == 0 {
		d = a.HeadDim
	}
	scale := float64(a.FreqScale)
	if scale == 0 {
		scale = 1
	}
	theta := float64(pos) * scale * math.Pow(float64(a.Base), -2*float64(i)/float64(d))
	if factors != nil {
		theta /= float64(factors[i])
	}
	return theta
}

// RoPE returns x rotated by each token's position. The angle, its sine and
// cosine and the rotation are all float64: the exact math, which the f32
// kernel can only approach within the rounding of its f32 angle.
func RoPE(x, factors []float32, positions []uint32, a RoPEArgs) []float32 {
	d := a.RopeDims
	if d == 0 {
		d = a.HeadDim
	}
	half := d / 2
	m := a.attnFactor()
	y := append([]float32(nil), x...)
	for t := range a.Tokens {
		pos := a.Pos0 + t
		if positions != nil {
			pos = int(positions[t])
		}
		for h := range a.Heads {
			head := y[(t*a.Heads+h)*a.HeadDim:][:a.HeadDim]
			for i := range half {
				i0, i1 := 2*i, 2*i+1
				if a.NeoX {
					i0, i1 = i, i+half
				}
				s, c := math.Sincos(RoPETheta(a, factors, pos, i))
				s, c = m*s, m*c
				x0, x1 := float64(head[i0]), float64(head[i1])
				head[i0] = float32(x0*c - x1*s)
				head[i1] = float32(x0*s + x1*c)
			}
		}
	}
	return y
}

// YaRNFactors are the per-pair divisors of the angle that make a plain RoPE
// of the given base YaRN's (Peng et al. 2023, as llama.cpp's ggml_rope_yarn
// and transformers' _compute_yarn_parameters compute it): pair i turns at a
// blend of its own frequency (extrapolation) and that frequency over factor
// (interpolation), with the ramp from beta_fast to beta_slow rotations over
// the original context (the bounds floored and ceiled, as both do) and
// extFactor scaling the extrapolated share. The attention scaling that goes
// with it is RoPEArgs.AttnFactor.
func YaRNFactors(base float64, dims int, factor float64, origCtx int, betaFast, betaSlow, extFactor float64) []float32 {
	corr := func(rotations float64) float64 {
		return float64(dims) * math.Log(float64(origCtx)/(rotations*2*math.Pi)) / (2 * math.Log(base))
	}
	half := dims / 2
	low := math.Max(0, math.Floor(corr(betaFast)))
	high := math.Min(float64(dims-1), math.Ceil(corr(betaSlow)))
	out := make([]float32, half)
	for i := range out {
		y := (float64(i) - low) / math.Max(0.001, high-low)
		extrap := (1 - math.Min(1, math.Max(0, y))) * extFactor
		out[i] = float32(1 / ((1-extrap)/factor + extrap))
	}
	return out
}

// RoPEQKVArgs mirror ops.RoPEQKVArgs: the rotation (Heads the query heads),
// the key and value heads (0: qkv holds queries only), the norms' epsilon,
// and VNorm to RMS-normalise each v head without a gain.
type RoPEQKVArgs struct {
	RoPEArgs
	KVHeads int
	Eps     float32
	VNorm   bool
}

// RoPEQKV returns what ops.RoPEQKV writes, from qkv = [Tokens, (Heads +
// 2·KVHeads)·HeadDim]: q = [Tokens, Heads·HeadDim] and the k and v rows of
// the batch's positions, [Tokens, KVHeads·HeadDim] each (nil with KVHeads
// 0). bias (nil for none) is added first, in f32 as the kernel does; norms
// (nil for none), q's gain then, with KVHeads > 0, k's, normalise each q and
// k head (RMSNorm with Eps, in float64), and VNorm each v head without a
// gain; then q and k rotate as RoPE does.
func RoPEQKV(qkv, bias, norms, factors []float32, a RoPEQKVArgs) (q, k, v []float32) {
	hd, kvHeads := a.HeadDim, a.KVHeads
	w := (a.Heads + 2*kvHeads) * hd
	x := append([]float32(nil), qkv[:a.Tokens*w]...)
	if bias != nil {
		for t := range a.Tokens {
			for j := range w {
				x[t*w+j] += bias[j]
			}
		}
	}
	for t := range a.Tokens {
		row := x[t*w : (t+1)*w]
		q = append(q, row[:a.Heads*hd]...)
		k = append(k, row[a.Heads*hd:(a.Heads+kvHeads)*hd]...)
		v = append(v, row[(a.Heads+kvHeads)*hd:]...)
	}
	heads := func(n int) NormArgs { return NormArgs{Rows: a.Tokens * n, Dim: hd, Eps: a.Eps} }
	if norms != nil {
		q = RMSNorm(q, norms[:hd], heads(a.Heads))
		if kvHeads > 0 {
			k = RMSNorm(k, norms[hd:2*hd], heads(kvHeads))
		}
	}
	if a.VNorm && kvHeads > 0 {
		v = RMSNorm(v, nil, heads(kvHeads))
	}
	q = RoPE(q, factors, nil, a.RoPEArgs)
	if kvHeads == 0 {
		return q, nil, nil
	}
	ka := a.RoPEArgs
	ka.Heads = kvHeads
	return q, RoPE(k, factors, nil, ka), v
}
