package ref

import "math"

// GaussianNoise returns n standard normal values drawn from a hash of their
// index and key (Box–Muller on two 24-bit uniforms), times scale: the same
// uniforms and angle as shaders/noise.wgsl bit for bit, the transcendental
// functions in float64.
func GaussianNoise(n int, key uint32, scale float32) []float32 {
	y := make([]float32, n)
	unit := func(h uint32) float64 { return (float64(h>>8) + 0.5) / (1 << 24) }
	for i := range y {
		u1 := unit(pcg(pcg(2*uint32(i)) + key))
		u2 := unit(pcg(pcg(2*uint32(i)+1) + key))
		// The angle as the shader forms it: f32 2π times an exact u2,
		// rounded to f32 (a 1e-6 rad difference from the float64 angle).
		angle := float32(2*math.Pi) * float32(u2)
		y[i] = float32(float64(scale) * math.Sqrt(-2*math.Log(u1)) * math.Cos(float64(angle)))
	}
	return y
}
