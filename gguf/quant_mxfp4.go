package gguf

import "math"

// MXFP4 (OCP microscaling FP4): 32 values share an E8M0 exponent e.
//
//	MXFP4  e u8; qs[16]   x = kvalues_mxfp4[q] · 2^(e−128)
//
// kvalues_mxfp4 are the E2M1 values doubled (0, 0.5, 1, … 6 → 0, 1, 2, … 12),
// which is why the scale is 2^(e−128), half the E8M0 value 2^(e−127).
// Nibbles are laid out as in Q4_0.

// kvaluesMXFP4 is kvalues_mxfp4 (ggml-common.h).
var kvaluesMXFP4 = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// e8m0Half is GGML_E8M0_TO_FP32_HALF: 2^(e−128), built from bits. e = 0 and
// 1 are the subnormals 2^−128 and 2^−127.
func e8m0Half(e uint8) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

func dequantizeMXFP4(src []byte, dst []float32) {
	for i := range len(dst) / 32 {
		b, y := (*[17]byte)(src[17*i:]), (*[32]float32)(dst[32*i:])
		d := e8m0Half(b[0])
		for j, q := range b[1:] {
			y[j] = float32(kvaluesMXFP4[q&0xf]) * d
			y[j+16] = float32(kvaluesMXFP4[q>>4]) * d
		}
	}
}

// bestIndexMXFP4 is best_index_mxfp4: a linear scan for the level whose
// scaled value is nearest x, the first one on ties (so +0, index 0, wins
// over −0, index 8). The product is rounded before the subtraction, as in C.
func bestIndexMXFP4(x, d float32) uint8 {
	best := 0
	bestErr := abs32(float32(float32(kvaluesMXFP4[0])*d) - x)
	for i := 1; i < 16; i++ {
		if err := abs32(float32(float32(kvaluesMXFP4[i])*d) - x); err < bestErr {
			best, bestErr = i, err
		}
	}
	return uint8(best)
}

// log2f is glibc's log2f where it matters here: the float64 logarithm
// rounded to float32 is the correctly rounded log2f, so floor() of it drops
// to the lower power of two exactly when C's does, including for a value
// just below a power of two whose log2f rounds up to the integer.
func log2f(x float32) float32 { return float32(math.Log2(float64(x))) }

// quantizeMXFP4 mirrors quantize_row_mxfp4_ref: the shared exponent is
// floor(log2(amax)) − 2, so amax lands in the top level range (4…6 of E2M1,
// 8…12 doubled), and each value takes the nearest level.
func quantizeMXFP4(src []float32, dst []byte) {
	for len(src) >= 32 {
		x, b := src[:32:32], dst[:17:17]
		var amax float32
		for _, v := range x {
			if a := abs32(v); amax < a {
				amax = a
			}
		}
		var e uint8
		if amax > 0 {
			e = uint8(truncInt(float32(math.Floor(float64(log2f(amax)))) - 2 + 127))
		}
		d := e8m0Half(e)
		b[0] = e
		for j := range 16 {
			b[1+j] = bestIndexMXFP4(x[j], d) | bestIndexMXFP4(x[j+16], d)<<4
		}
		src, dst = src[32:], dst[17:]
	}
}
