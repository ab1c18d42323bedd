// Package ref holds the CPU reference of every kernel in engine/ops, with the
// same names: plain f32 loops written for clarity, the oracle the GPU parity
// tests compare against and the CPU backend's building blocks.
package ref

// Add returns x + y element-wise.
func Add(x, y []float32) []float32 {
	out := make([]float32, len(x))
	for i := range x {
		out[i] = x[i] + y[i]
	}
	return out
}
