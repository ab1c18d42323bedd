package ref

import "math"

// RoPEBackward returns the gradient of RoPE's input for the gradient dy of
// its output: each pair rotated by -theta and scaled by AttnFactor (the
// transpose of the forward's map), the dims past RopeDims unchanged. In
// float64, as RoPE.
func RoPEBackward(dy, factors []float32, positions []uint32, a RoPEArgs) []float32 {
	d := a.RopeDims
	if d == 0 {
		d = a.HeadDim
	}
	half := d / 2
	m := a.attnFactor()
	dx := append([]float32(nil), dy...)
	for t := range a.Tokens {
		pos := a.Pos0 + t
		if positions != nil {
			pos = int(positions[t])
		}
		for h := range a.Heads {
			head := dx[(t*a.Heads+h)*a.HeadDim:][:a.HeadDim]
			for i := range half {
				i0, i1 := 2*i, 2*i+1
				if a.NeoX {
					i0, i1 = i, i+half
				}
				s, c := math.Sincos(RoPETheta(a, factors, pos, i))
				s, c = m*s, m*c
				g0, g1 := float64(head[i0]), float64(head[i1])
				head[i0] = float32(g0*c + g1*s)
				head[i1] = float32(-g0*s + g1*c)
			}
		}
	}
	return dx
}
