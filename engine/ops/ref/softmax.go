package ref

import "math"

// Softmax returns the softmax of each of rows rows of n values, subtracting
// the row max first. The sum is accumulated in float64 so the oracle's own
// rounding stays far below the kernel's.
func Softmax(x []float32, rows, n int) []float32 {
	out := make([]float32, rows*n)
	for r := range rows {
		row := x[r*n : (r+1)*n]
		m := math.Inf(-1)
		for _, v := range row {
			m = math.Max(m, float64(v))
		}
		sum := 0.0
		for _, v := range row {
			sum += math.Exp(float64(v) - m)
		}
		for i, v := range row {
			out[r*n+i] = float32(math.Exp(float64(v)-m) / sum)
		}
	}
	return out
}
