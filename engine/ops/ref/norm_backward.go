package ref

import "math"

// RMSNormBackward returns dx, the gradient of y = RMSNorm(x, w) for the
// upstream gradient dy: per row, with r = 1/sqrt(mean(x^2) + eps) and
// x^ = x r, dx = r (gain dy - x^ mean(gain dy x^)). In float64.
func RMSNormBackward(x, w, dy []float32, a NormArgs) []float32 {
	dx := make([]float32, a.Rows*a.Dim)
	for r := range a.Rows {
		row, drow := x[r*a.Dim:(r+1)*a.Dim], dy[r*a.Dim:(r+1)*a.Dim]
		ss, sd := 0.0, 0.0
		for j, v := range row {
			ss += float64(v) * float64(v)
			sd += a.gain(w, j) * float64(drow[j]) * float64(v)
		}
		inv := 1 / math.Sqrt(ss/float64(a.Dim)+float64(a.Eps))
		k := inv * inv * sd / float64(a.Dim) // x^ mean(gain dy x^) = x k
		for j, v := range row {
			dx[r*a.Dim+j] = float32(inv * (a.gain(w, j)*float64(drow[j]) - float64(v)*k))
		}
	}
	return dx
}

// RMSNormWeightGrad returns dw = sum over rows of dy x^, the gradient of
// RMSNorm's weight whether applied as w or 1 + w. In float64.
func RMSNormWeightGrad(x, dy []float32, a NormArgs) []float32 {
	acc := make([]float64, a.Dim)
	for r := range a.Rows {
		row := x[r*a.Dim : (r+1)*a.Dim]
		ss := 0.0
		for _, v := range row {
			ss += float64(v) * float64(v)
		}
		inv := 1 / math.Sqrt(ss/float64(a.Dim)+float64(a.Eps))
		for j, v := range row {
			acc[j] += float64(dy[r*a.Dim+j]) * float64(v) * inv
		}
	}
	dw := make([]float32, a.Dim)
	for j, v := range acc {
		dw[j] = float32(v)
	}
	return dw
}
