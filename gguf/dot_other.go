//go:build !amd64

package gguf

// FusedDot has no fused kernels off amd64: rows are dequantized first.
func FusedDot(Type) func(row []byte, x []float32) float32 { return nil }
