//go:build !amd64

package model

// dot is the f32 dot product of the CPU forward's matrix products.
func dot(a, b []float32) float32 { return dotGo(a, b) }
