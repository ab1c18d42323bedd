package gguf

import (
	"encoding/binary"
	"math"
)

// The legacy 32-element block formats, Q4_0 … Q8_1 (ggml-common.h):
//
//	Q4_0  d f16, qs[16]          x = (q−8)·d
//	Q4_1  d f16, m f16, qs[16]   x = q·d + m
//	Q5_0  d f16, qh u32, qs[16]  x = (q−16)·d, bit j of qh is bit 4 of q_j
//	Q5_1  d, m, qh u32, qs[16]   x = q·d + m
//	Q8_0  d f16, qs int8[32]     x = q·d
//	Q8_1  d f16, s f16, qs[32]   x = q·d, s = d·Σq (vec_dot activations)
//
// Nibble layouts put element j in the low nibble of qs[j] and element j+16
// in the high nibble. The quantizers mirror quantize_row_*_ref, including
// their rounding: Q4/Q5 add 8.5 (16.5, 0.5) and truncate toward zero, Q8
// uses roundf (half away from zero).

const qk = 32 // elements per legacy block (QK4_0 … QK8_1)

// f16At reads the little-endian binary16 at b[0:2] as float32.
func f16At(b []byte) float32 { return f16ToF32(binary.LittleEndian.Uint16(b)) }

// putF16 stores f rounded to binary16 (GGML_FP32_TO_FP16) at b[0:2].
func putF16(b []byte, f float32) {
	binary.LittleEndian.PutUint16(b, f32ToF16(f))
}

// absMaxSigned returns the largest |x| and the signed value that has it, the
// first one on ties ("if (amax < fabsf(v))" in ggml).
func absMaxSigned(x []float32) (amax, max float32) {
	for _, v := range x {
		if a := abs32(v); amax < a {
			amax, max = a, v
		}
	}
	return amax, max
}

// minMax is the loop of quantize_row_q4_1_ref: FLT_MAX/-FLT_MAX seeds and
// strict comparisons.
func minMax(x []float32) (lo, hi float32) {
	lo, hi = math.MaxFloat32, -math.MaxFloat32
	for _, v := range x {
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	return lo, hi
}

func abs32(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }

// inv is ggml's "d ? 1.0f/d : 0.0f".
func inv(d float32) float32 {
	if d == 0 {
		return 0
	}
	return 1 / d
}

// truncInt is C's float-to-int conversion: toward zero. Go's conversion does
// the same, and on amd64 both give 0x80000000 for out-of-range values.
//
// Its callers write float32(x*id) + 8.5, not x*id + 8.5: ggml rounds the
// product to float before adding, and Go may fuse x*y + z into one FMA on
// arm64, ppc64le, s390x and riscv64 unless the product is converted.
func truncInt(f float32) int32 { return int32(f) }

func dequantizeQ4_0(src []byte, dst []float32) {
	for i := range len(dst) / qk {
		b, y := (*[18]byte)(src[18*i:]), (*[qk]float32)(dst[qk*i:])
		d := f16At(b[:])
		for j, q := range b[2:] {
			y[j] = float32(int32(q&0xf)-8) * d
			y[j+16] = float32(int32(q>>4)-8) * d
		}
	}
}

// quantizeQ4_0 mirrors quantize_row_q4_0_ref: d = max/−8 maps the signed
// extreme to q = 0, so the 16th level (+8·|d|) is never used.
func quantizeQ4_0(src []float32, dst []byte) {
	for len(src) >= qk {
		x, b := src[:qk:qk], dst[:18:18]
		_, max := absMaxSigned(x)
		d := max / -8
		id := inv(d)
		putF16(b, d)
		for j := range 16 {
			xi0 := min(15, int8(truncInt(float32(x[j]*id)+8.5)))
			xi1 := min(15, int8(truncInt(float32(x[j+16]*id)+8.5)))
			b[2+j] = uint8(xi0) | uint8(xi1)<<4
		}
		src, dst = src[qk:], dst[18:]
	}
}

func dequantizeQ4_1(src []byte, dst []float32) {
	for i := range len(dst) / qk {
		b, y := (*[20]byte)(src[20*i:]), (*[qk]float32)(dst[qk*i:])
		d, m := f16At(b[:]), f16At(b[2:])
		for j, q := range b[4:] {
			// ggml rounds the product before adding m: no FMA.
			y[j] = float32(float32(q&0xf)*d) + m
			y[j+16] = float32(float32(q>>4)*d) + m
		}
	}
}

// quantizeQ4_1 mirrors quantize_row_q4_1_ref.
func quantizeQ4_1(src []float32, dst []byte) {
	for len(src) >= qk {
		x, b := src[:qk:qk], dst[:20:20]
		lo, hi := minMax(x)
		d := (hi - lo) / 15
		id := inv(d)
		putF16(b, d)
		putF16(b[2:], lo)
		for j := range 16 {
			xi0 := min(15, int8(truncInt(float32((x[j]-lo)*id)+0.5)))
			xi1 := min(15, int8(truncInt(float32((x[j+16]-lo)*id)+0.5)))
			b[4+j] = uint8(xi0) | uint8(xi1)<<4
		}
		src, dst = src[qk:], dst[20:]
	}
}

func dequantizeQ5_0(src []byte, dst []float32) {
	for i := range len(dst) / qk {
		b, y := (*[22]byte)(src[22*i:]), (*[qk]float32)(dst[qk*i:])
		d := f16At(b[:])
		qh := binary.LittleEndian.Uint32(b[2:])
		for j, q := range b[6:] {
			// Bit j of qh is bit 4 of value j, bit j+16 that of value j+16;
			// shifting qh one place per value avoids variable shifts.
			h0 := int32(qh&1) << 4
			h1 := int32(qh>>16&1) << 4
			qh >>= 1
			y[j] = float32((int32(q&0xf)|h0)-16) * d
			y[j+16] = float32((int32(q>>4)|h1)-16) * d
		}
	}
}

// quantizeQ5_0 mirrors quantize_row_q5_0_ref.
func quantizeQ5_0(src []float32, dst []byte) {
	for len(src) >= qk {
		x, b := src[:qk:qk], dst[:22:22]
		_, max := absMaxSigned(x)
		d := max / -16
		id := inv(d)
		putF16(b, d)
		var qh uint32
		for j := range 16 {
			xi0 := uint8(min(31, int8(truncInt(float32(x[j]*id)+16.5))))
			xi1 := uint8(min(31, int8(truncInt(float32(x[j+16]*id)+16.5))))
			b[6+j] = xi0&0xf | (xi1&0xf)<<4
			qh |= uint32(xi0&0x10) >> 4 << j
			qh |= uint32(xi1&0x10) >> 4 << (j + 16)
		}
		binary.LittleEndian.PutUint32(b[2:], qh)
		src, dst = src[qk:], dst[22:]
	}
}

func dequantizeQ5_1(src []byte, dst []float32) {
	for i := range len(dst) / qk {
		b, y := (*[24]byte)(src[24*i:]), (*[qk]float32)(dst[qk*i:])
		d, m := f16At(b[:]), f16At(b[2:])
		qh := binary.LittleEndian.Uint32(b[4:])
		for j, q := range b[8:] {
			h0 := uint8(qh&1) << 4
			h1 := uint8(qh>>16&1) << 4
			qh >>= 1
			y[j] = float32(float32(q&0xf|h0)*d) + m
			y[j+16] = float32(float32(q>>4|h1)*d) + m
		}
	}
}

// quantizeQ5_1 mirrors quantize_row_q5_1_ref, which casts to uint8_t without
// clamping: (x−min)·id never exceeds 31 by enough to round past it.
func quantizeQ5_1(src []float32, dst []byte) {
	for len(src) >= qk {
		x, b := src[:qk:qk], dst[:24:24]
		lo, hi := minMax(x)
		d := (hi - lo) / 31
		id := inv(d)
		putF16(b, d)
		putF16(b[2:], lo)
		var qh uint32
		for j := range 16 {
			xi0 := uint8(truncInt(float32((x[j]-lo)*id) + 0.5))
			xi1 := uint8(truncInt(float32((x[j+16]-lo)*id) + 0.5))
			b[8+j] = xi0&0xf | (xi1&0xf)<<4
			qh |= uint32(xi0&0x10) >> 4 << j
			qh |= uint32(xi1&0x10) >> 4 << (j + 16)
		}
		binary.LittleEndian.PutUint32(b[4:], qh)
		src, dst = src[qk:], dst[24:]
	}
}

func dequantizeQ8_0(src []byte, dst []float32) {
	for i := range len(dst) / qk {
		b, y := (*[34]byte)(src[34*i:]), (*[qk]float32)(dst[qk*i:])
		d := f16At(b[:])
		for j, q := range b[2:] {
			y[j] = float32(int8(q)) * d
		}
	}
}

// absMax is the MAX(amax, fabsf(v)) loop of the Q8 quantizers.
func absMax(x []float32) float32 {
	var amax float32
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax = a
		}
	}
	return amax
}

// roundf is C's roundf, half away from zero; exact through float64.
func roundf(f float32) int32 { return int32(math.Round(float64(f))) }

// quantizeQ8_0 mirrors quantize_row_q8_0_ref.
func quantizeQ8_0(src []float32, dst []byte) {
	for len(src) >= qk {
		x, b := src[:qk:qk], dst[:34:34]
		d := absMax(x) / 127
		id := inv(d)
		putF16(b, d)
		for j := range qk {
			b[2+j] = uint8(int8(roundf(x[j] * id)))
		}
		src, dst = src[qk:], dst[34:]
	}
}

// dequantizeQ8_1 decodes q·d; s, the precomputed d·Σq, is ignored.
func dequantizeQ8_1(src []byte, dst []float32) {
	for i := range len(dst) / qk {
		b, y := (*[36]byte)(src[36*i:]), (*[qk]float32)(dst[qk*i:])
		d := f16At(b[:])
		for j, q := range b[4:] {
			y[j] = float32(int8(q)) * d
		}
	}
}

// quantizeQ8_1 mirrors quantize_row_q8_1_ref. s is rounded from the f32 d,
// not from the stored f16 one.
func quantizeQ8_1(src []float32, dst []byte) {
	for len(src) >= qk {
		x, b := src[:qk:qk], dst[:36:36]
		d := absMax(x) / 127
		id := inv(d)
		putF16(b, d)
		var sum int32
		for j := range qk {
			q := int8(roundf(x[j] * id))
			b[4+j] = uint8(q)
			sum += int32(q)
		}
		putF16(b[2:], float32(sum)*d)
		src, dst = src[qk:], dst[36:]
	}
}
