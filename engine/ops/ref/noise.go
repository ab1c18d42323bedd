package ref

import "math"

// GaussianNoise returns n standard normal values drawn from a hash of their
// index and key (Box–Muller on two 24-bit uniforms), times scale: the same
// uniforms as shaders/noise.wgsl bit for bit, the transcendental functions
// in float64.
func GaussianNoise(n int, key uint32, scale float32) []float32 {
	y := make([]float32, n)
	unit := func(h uint32) float64 { return (float64(h>>8) + 0.5) / (1 << 24) }
	for i := range y {
		u1 := unit(pcg(2*uint32(i) + key))
		u2 := unit(pcg(2*uint32(i) + 1 + key))
		y[i] = float32(float64(scale) * math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2))
	}
	return y
}
