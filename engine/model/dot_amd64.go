package model

import (
	"github.com/hearthstudio/hearth/gguf"
	"golang.org/x/sys/cpu"
)

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

// dotQ8_0FMA and dotQ5_0FMA are dotFMA of a row of blocks, dequantized as
// gguf does, with x: bit for bit dot(dequantized row, x), without the row.
//
//go:noescape
func dotQ8_0FMA(row *byte, x *float32, blocks int) float32

//go:noescape
func dotQ5_0FMA(row *byte, x *float32, blocks int) float32

// fusedDot returns the kernel that dots a stored row of type t with x
// directly, or nil where the row must be dequantized first.
func fusedDot(t gguf.Type) func(row []byte, x []float32) float32 {
	if !hasFMA {
		return nil
	}
	switch t {
	case gguf.TypeQ8_0:
		return blockDot(34, dotQ8_0FMA)
	case gguf.TypeQ5_0:
		return blockDot(22, dotQ5_0FMA)
	}
	return nil
}

// blockDot wraps the fused kernel of a 32-value block format of size
// bytes; the slice expressions check the lengths.
func blockDot(size int, kernel func(*byte, *float32, int) float32) func([]byte, []float32) float32 {
	return func(row []byte, x []float32) float32 {
		n := len(x) / 32
		if n == 0 {
			return 0
		}
		row, x = row[:n*size], x[:n*32]
		return kernel(&row[0], &x[0], n)
	}
}

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
