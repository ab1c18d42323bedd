package model

import "golang.org/x/sys/cpu"

// hasFMA gates dotFMA: AVX2's 8-lane fused multiply-adds.
var hasFMA = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// dotFMA is Σ a[i]·b[i] over n values in 32 f32 lanes (four 8-lane
// accumulators of fused multiply-adds, each product rounded once with its
// sum), the lanes summed pairwise at the end, then the n%8 tail in order.
//
//go:noescape
func dotFMA(a, b *float32, n int) float32

// dot is the f32 dot product of the CPU forward's matrix products.
func dot(a, b []float32) float32 {
	if len(a) == 0 {
		return 0
	}
	b = b[:len(a)]
	if hasFMA {
		return dotFMA(&a[0], &b[0], len(a))
	}
	return dotGo(a, b)
}
