//go:build !amd64

package gguf

// vectorDequantize has no vector dequantizers off amd64: the scalar codecs
// serve every type.
func vectorDequantize(Type) func(src []byte, dst []float32) { return nil }
