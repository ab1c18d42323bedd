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
				x0, x1 := float64(head[i0]), float64(head[i1])
				head[i0] = float32(x0*c - x1*s)
				head[i1] = float32(x0*s + x1*c)
			}
		}
	}
	return y
}
