package gguf

import "unsafe"

// The dot kernels of dot_amd64.s live beside the vector dequantizers so
// that the fused ones decode blocks with the very same macros
// (avx2_amd64.h): a fused dot is then bit for bit the dot of the row
// dequantize writes.

// HasDotFMA reports whether this processor runs DotFMA, Dot4FMA and
// FusedDot's kernels: AVX2's 8-lane fused multiply-adds.
var HasDotFMA = hasAVX2

// q5Lanes holds 0…31: lane k of Q5_0's decoding takes bit k of qh.
var q5Lanes = [32]uint32{
	0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
	16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31,
}

// DotFMA returns Σ a[i]·b[i] over len(a) values in 16 f32 lanes (two
// 8-lane accumulators of fused multiply-adds, each product rounded once
// with its sum), the lanes summed pairwise at the end, then the len(a)%8
// tail in order. b must hold len(a) values; only where HasDotFMA.
func DotFMA(a, b []float32) float32 {
	b = b[:len(a)]
	return dotFMA(unsafe.SliceData(a), unsafe.SliceData(b), len(a))
}

// Dot4FMA sets out[t] to DotFMA(w, x[t·stride:][:len(w)]) for t < 4, bit
// for bit, loading w once for the four products; only where HasDotFMA.
// The kernels read nothing when len(w) is 0, so an empty slice's nil data
// pointer is safe to pass.
func Dot4FMA(w, x []float32, stride int, out *[4]float32) {
	x = x[:3*stride+len(w)]
	dot4FMA(unsafe.SliceData(w), unsafe.SliceData(x), stride, len(w), out)
}

//go:noescape
func dotFMA(a, b *float32, n int) float32

//go:noescape
func dot4FMA(w, x *float32, stride, n int, out *[4]float32)

// dotQ8_0FMA and dotQ5_0FMA are dotFMA of a row of blocks, dequantized as
// the vector dequantizers do, with x, without writing the row.
//
//go:noescape
func dotQ8_0FMA(row *byte, x *float32, blocks int) float32

//go:noescape
func dotQ5_0FMA(row *byte, x *float32, blocks int) float32

// dotQ4KFMA and dotQ6KFMA add one super-block's products into the two
// 8-lane accumulators acc[0:8] and acc[8:16]. dotQ4KFMA takes the block's
// eight 6-bit scales at sm[0:8] and mins at sm[8:16] and multiplies them by
// d and dmin in place; dotQ6KFMA uses s as scratch for its sixteen scales.
//
//go:noescape
func dotQ4KFMA(b *byte, sm *[16]float32, x *float32, acc *[16]float32)

//go:noescape
func dotQ6KFMA(b *byte, s *[16]float32, x *float32, acc *[16]float32)

// FusedDot returns the kernel that dots a stored row of type t with x
// without writing the dequantized row, its sum bit for bit DotFMA of the
// row Dequantize writes; nil where t has no such kernel on this processor,
// and the row must be dequantized first. The kernel dots the whole blocks
// of x and panics if row holds fewer.
func FusedDot(t Type) func(row []byte, x []float32) float32 {
	if !HasDotFMA {
		return nil
	}
	switch t {
	case TypeQ8_0:
		return blockDot(34, dotQ8_0FMA)
	case TypeQ5_0:
		return blockDot(22, dotQ5_0FMA)
	case TypeQ4_K:
		return dotQ4K
	case TypeQ6_K:
		return dotQ6K
	}
	return nil
}

// blockDot wraps the fused kernel of a 32-value block format of size
// bytes; the slice expressions check the lengths.
func blockDot(size int, kernel func(*byte, *float32, int) float32) func([]byte, []float32) float32 {
	return func(row []byte, x []float32) float32 {
		n := len(x) / qk
		if n == 0 {
			return 0
		}
		row, x = row[:n*size], x[:n*qk]
		return kernel(&row[0], &x[0], n)
	}
}

// dotQ4K is the fused dot of a Q4_K row (super-blocks of 144 bytes: d, dmin,
// 12 bytes of 6-bit scales and mins, 128 of nibbles) with x.
func dotQ4K(row []byte, x []float32) float32 {
	var sm, acc [16]float32
	for i := range len(x) / qkK {
		b, xs := (*[144]byte)(row[144*i:]), (*[qkK]float32)(x[qkK*i:])
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
	for i := range len(x) / qkK {
		b, xs := (*[210]byte)(row[210*i:]), (*[qkK]float32)(x[qkK*i:])
		dotQ6KFMA(&b[0], &s, &xs[0], &acc)
	}
	return reduceLanes(&acc)
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
