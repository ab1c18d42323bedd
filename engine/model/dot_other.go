//go:build !amd64

package model

// dot is the f32 dot product of the CPU forward's matrix products.
func dot(a, b []float32) float32 { return dotGo(a, b) }

// dotRows sets y[t·ystride] = dot(w, x[t·len(w):][:len(w)]) for each of
// the len(x)/len(w) activation rows.
func dotRows(w, x, y []float32, ystride int) {
	n := len(w)
	for t := range len(x) / n {
		y[t*ystride] = dot(w, x[t*n:(t+1)*n])
	}
}
