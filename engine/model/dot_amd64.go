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
	case gguf.TypeQ4_K:
		return dotQ4K
	case gguf.TypeQ6_K:
		return dotQ6K
	}
	return nil
}

// dotQ4KFMA and dotQ6KFMA add one super-block's products into the two
// 8-lane accumulators acc[0:8] and acc[8:16]. dotQ4KFMA takes the block's
// eight 6-bit scales at sm[0:8] and mins at sm[8:16] and multiplies them by
// d and dmin in place; dotQ6KFMA uses s as scratch for its sixteen scales.
//
//go:noescape
func dotQ4KFMA(b *byte, sm *[16]float32, x *float32, acc *[16]float32)

//go:noescape
func dotQ6KFMA(b *byte, s *[16]float32, x *float32, acc *[16]float32)

// dotQ4K is the fused dot of a Q4_K row (super-blocks of 144 bytes: d, dmin,
// 12 bytes of 6-bit scales and mins, 128 of nibbles) with x.
func dotQ4K(row []byte, x []float32) float32 {
	var sm, acc [16]float32
	for i := range len(x) / 256 {
		b, xs := (*[144]byte)(row[144*i:]), (*[256]float32)(x[256*i:])
		for j := range 8 {
			sc, m := scaleMinK4(j, b[4:16])
			sm[j], sm[8+j] = float32(sc), float32(m)
		}
		dotQ4KFMA(&b[0], &sm, &xs[0], &acc)
	}
	return reduceLanes(&acc)
}

// dotQ6K is the fused dot of a Q6_K row (super-blocks of 210 bytes: 128 of
// low nibbles, 64 of high bit pairs, 16 int8 scales, d) with x.
func dotQ6K(row []byte, x []float32) float32 {
	var s, acc [16]float32
	for i := range len(x) / 256 {
		b, xs := (*[210]byte)(row[210*i:]), (*[256]float32)(x[256*i:])
		dotQ6KFMA(&b[0], &s, &xs[0], &acc)
	}
	return reduceLanes(&acc)
}

// scaleMinK4 unpacks sub-block j's 6-bit scale and min of a Q4_K/Q5_K
// super-block (get_scale_min_k4 in ggml).
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xf | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// reduceLanes sums the two accumulators' lanes in dotFMA's order: lane by
// lane, then the halves 4+4, 2+2 and 1+1.
func reduceLanes(acc *[16]float32) float32 {
	var a [8]float32
	for i := range a {
		a[i] = acc[i] + acc[8+i]
	}
	h0, h1, h2, h3 := a[0]+a[4], a[1]+a[5], a[2]+a[6], a[3]+a[7]
	return (h0 + h2) + (h1 + h3)
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
