package ref

import "math"

// NormArgs shapes a row normalisation, as ops.NormArgs: Rows rows of Dim
// floats, Eps, and OnePlus to apply the weight as 1 + w (Gemma).
type NormArgs struct {
	Rows, Dim int
	Eps       float32
	OnePlus   bool
}

// gain is the factor column j gets after normalising.
func (a NormArgs) gain(w []float32, j int) float64 {
	switch {
	case w == nil:
		return 1
	case a.OnePlus:
		return 1 + float64(w[j])
	}
	return float64(w[j])
}

// RMSNorm returns x / sqrt(mean(x^2) + eps) * w for each row of x; w may be
// nil for no weight. Sums are in float64, so the oracle carries none of the
// kernel's f32 rounding.
func RMSNorm(x, w []float32, a NormArgs) []float32 {
	y := make([]float32, a.Rows*a.Dim)
	for r := range a.Rows {
		row := x[r*a.Dim : (r+1)*a.Dim]
		ss := 0.0
		for _, v := range row {
			ss += float64(v) * float64(v)
		}
		inv := 1 / math.Sqrt(ss/float64(a.Dim)+float64(a.Eps))
		for j, v := range row {
			y[r*a.Dim+j] = float32(float64(v) * inv * a.gain(w, j))
		}
	}
	return y
}

// LayerNorm returns (x - mean) / sqrt(var + eps) * w + b for each row of x,
// with the biased variance; w and b may be nil. In float64 throughout.
func LayerNorm(x, w, b []float32, a NormArgs) []float32 {
	y := make([]float32, a.Rows*a.Dim)
	for r := range a.Rows {
		row := x[r*a.Dim : (r+1)*a.Dim]
		mean := 0.0
		for _, v := range row {
			mean += float64(v)
		}
		mean /= float64(a.Dim)
		vr := 0.0
		for _, v := range row {
			d := float64(v) - mean
			vr += d * d
		}
		inv := 1 / math.Sqrt(vr/float64(a.Dim)+float64(a.Eps))
		for j, v := range row {
			o := (float64(v) - mean) * inv * a.gain(w, j)
			if b != nil {
				o += float64(b[j])
			}
			y[r*a.Dim+j] = float32(o)
		}
	}
	return y
}
