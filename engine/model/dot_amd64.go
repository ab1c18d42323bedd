package model

import "golang.org/x/sys/cpu"

// hasFMA gates dotFMA: AVX2's 8-lane fused multiply-adds.
var hasFMA = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// dotFMA is Σ a[i]·b[i] over n values in 16 f32 lanes (two 8-lane
// accumulators of fused multiply-adds, each product rounded once with its
// sum), the lanes summed pairwise at the end, then the n%8 tail in order.
//
//go:noescape
func dotFMA(a, b *float32, n int) float32

// dot4FMA is dotFMA of w with the four rows x[t·stride:][:n], one load of w
// for four products, each row's sum bit for bit dotFMA's.
//
//go:noescape
func dot4FMA(w, x *float32, stride, n int, out *[4]float32)

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

// dotRows sets y[t·ystride] = dot(w, x[t·len(w):][:len(w)]) for each of
// the len(x)/len(w) activation rows, four at a time where it can.
func dotRows(w, x, y []float32, ystride int) {
	n := len(w)
	m := len(x) / n
	t := 0
	if hasFMA && n > 0 {
		var out [4]float32
		for ; t+4 <= m; t += 4 {
			_ = x[(t+4)*n-1]
			dot4FMA(&w[0], &x[t*n], n, n, &out)
			for i, v := range out {
				y[(t+i)*ystride] = v
			}
		}
	}
	for ; t < m; t++ {
		y[t*ystride] = dot(w, x[t*n:(t+1)*n])
	}
}
