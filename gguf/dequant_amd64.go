package gguf

import "golang.org/x/sys/cpu"

// hasAVX2 gates the vector dequantizers. Every x86 processor with AVX2 and
// FMA also has F16C (Haswell, Zen), whose VCVTPH2PS widens the block scales.
var hasAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// The vector dequantizers decode with the instructions of the scalar ones,
// one rounding each (an int→float conversion is exact below 2^24, then the
// same multiply and subtract), so their output is bit for bit the scalar
// codecs'; TestVectorDequantizeMatchesScalar holds them to that.

//go:noescape
func dequantQ8_0AVX2(src *byte, dst *float32, blocks int)

//go:noescape
func dequantQ4_0AVX2(src *byte, dst *float32, blocks int)

//go:noescape
func dequantQ5_0AVX2(src *byte, dst *float32, blocks int)

//go:noescape
func dequantF16AVX2(src *byte, dst *float32, n int)

// dequantQ4KAVX2 decodes one Q4_K super-block's qs (128 bytes) with its
// eight scales at sm[0:8] and eight mins at sm[8:16], already multiplied
// by d and dmin.
//
//go:noescape
func dequantQ4KAVX2(qs *byte, sm *[16]float32, dst *float32)

// dequantQ6KAVX2 decodes one Q6_K super-block (ql and qh at b[0:192]) with
// its sixteen scales at s, already multiplied by d.
//
//go:noescape
func dequantQ6KAVX2(b *byte, s *[16]float32, dst *float32)

// vectorDequantize returns the vector dequantizer of t on this processor,
// or nil to keep the scalar codec.
func vectorDequantize(t Type) func(src []byte, dst []float32) {
	if !hasAVX2 {
		return nil
	}
	switch t {
	case TypeF16:
		return dequantizeF16Vector
	case TypeQ8_0:
		return legacyVector(34, dequantQ8_0AVX2)
	case TypeQ4_0:
		return legacyVector(18, dequantQ4_0AVX2)
	case TypeQ5_0:
		return legacyVector(22, dequantQ5_0AVX2)
	case TypeQ4_K:
		return dequantizeQ4_KVector
	case TypeQ6_K:
		return dequantizeQ6_KVector
	}
	return nil
}

// legacyVector wraps the kernel of a 32-value block format of size bytes.
// The slice expressions check the lengths, so a caller's mistake panics
// instead of reading or writing past a buffer.
func legacyVector(size int, kernel func(*byte, *float32, int)) func([]byte, []float32) {
	return func(src []byte, dst []float32) {
		n := len(dst) / qk
		if n == 0 {
			return
		}
		src, dst = src[:n*size], dst[:n*qk]
		kernel(&src[0], &dst[0], n)
	}
}

func dequantizeF16Vector(src []byte, dst []float32) {
	n := len(dst) &^ 7
	if n > 0 {
		src := src[:2*n]
		dequantF16AVX2(&src[0], &dst[0], n)
	}
	dequantizeF16(src[2*n:], dst[n:])
}

func dequantizeQ4_KVector(src []byte, dst []float32) {
	var sm [16]float32
	for i := range len(dst) / qkK {
		b, y := (*[144]byte)(src[144*i:]), (*[qkK]float32)(dst[qkK*i:])
		d, dmin := f16At(b[:]), f16At(b[2:])
		for j := range 8 {
			sc, m := scaleMinK4(j, b[4:16])
			sm[j], sm[8+j] = d*float32(sc), dmin*float32(m)
		}
		dequantQ4KAVX2(&b[16], &sm, &y[0])
	}
}

func dequantizeQ6_KVector(src []byte, dst []float32) {
	var s [16]float32
	for i := range len(dst) / qkK {
		b, y := (*[210]byte)(src[210*i:]), (*[qkK]float32)(dst[qkK*i:])
		d := f16At(b[208:])
		for j := range 16 {
			s[j] = d * float32(int8(b[192+j]))
		}
		dequantQ6KAVX2(&b[0], &s, &y[0])
	}
}
