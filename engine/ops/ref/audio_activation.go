package ref

import "math"

// Snake is Kokoro's Snake1D, x + (1/(alpha+eps)) * sin(alpha*x)^2 with alpha
// of shape (1, C, 1), on x laid out [len(alpha)][t]. Kokoro writes 1/alpha
// (eps 0). In float64.
func Snake(x, alpha []float32, t int, eps float32) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		a := float64(alpha[i/t])
		s := math.Sin(a * float64(v))
		y[i] = float32(float64(v) + 1/(a+float64(eps))*s*s)
	}
	return y
}

// LeakyReLU is F.leaky_relu(x, negative_slope=slope).
func LeakyReLU(x []float32, slope float32) []float32 {
	return mapF32(x, func(v float64) float64 {
		if v >= 0 {
			return v
		}
		return v * float64(slope)
	})
}

// Tanh is torch.tanh.
func Tanh(x []float32) []float32 { return mapF32(x, math.Tanh) }

// Sin is torch.sin.
func Sin(x []float32) []float32 { return mapF32(x, math.Sin) }

// Exp is torch.exp.
func Exp(x []float32) []float32 { return mapF32(x, math.Exp) }

func mapF32(x []float32, f func(float64) float64) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = float32(f(float64(v)))
	}
	return y
}
