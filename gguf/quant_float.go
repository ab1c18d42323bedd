package gguf

import (
	"encoding/binary"
	"math"

	"github.com/x448/float16"
)

// f16ToF32 widens an IEEE binary16 to float32 (exact), with
// ggml_compute_fp16_to_fp32's branch-free method: shifted into float32
// position, the half's exponent is 112 too small, which one multiplication
// by 2^112 fixes for normals, infinities and NaNs (quieted, payload kept);
// subnormals (exponent 0) are instead built as 0.5 + m·2^-24 − 0.5 by a
// magic-number subtraction. It inlines, which matters for F16 tensors.
func f16ToF32(h uint16) float32 {
	w := uint32(h) << 16
	sign := w & 0x80000000
	twoW := w + w // drop the sign
	r := math.Float32frombits(twoW>>4+0x70000000) * 0x1p-112
	if twoW < 1<<27 { // exponent 0: zero or subnormal
		r = math.Float32frombits(twoW>>17|126<<23) - 0.5
	}
	return math.Float32frombits(sign | math.Float32bits(r))
}

// f32ToF16 rounds a float32 to binary16 as GGML_FP32_TO_FP16 does
// (ggml_compute_fp32_to_fp16 on a build without F16C): round to nearest,
// ties to even, subnormals kept, overflow to ±Inf. x448/float16 does exactly
// that except for NaN, where ggml drops the payload and returns sign|0x7E00.
func f32ToF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16)&0x8000 | 0x7e00
	}
	return float16.Fromfloat32(f).Bits()
}

// bf16ToF32 widens a bfloat16: its bits are the top half of a float32.
func bf16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// f32ToBF16 is ggml_compute_fp32_to_bf16: round to nearest even by adding
// 0x7fff plus the lowest kept bit, and quiet a NaN by setting bit 6 (0x40)
// rather than rounding it, which could carry it into an infinity.
func f32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 64
	}
	return uint16((u + 0x7fff + (u>>16)&1) >> 16)
}

func dequantizeF32(src []byte, dst []float32) {
	src = src[:4*len(dst)]
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

func quantizeF32(src []float32, dst []byte) {
	for i, v := range src {
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
	}
}

func dequantizeF16(src []byte, dst []float32) {
	src = src[:2*len(dst)]
	for i := range dst {
		dst[i] = f16ToF32(uint16(src[2*i]) | uint16(src[2*i+1])<<8)
	}
}

// quantizeF16 mirrors ggml_fp32_to_fp16_row.
func quantizeF16(src []float32, dst []byte) {
	dst = dst[:2*len(src)]
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], f32ToF16(v))
	}
}

func dequantizeBF16(src []byte, dst []float32) {
	src = src[:2*len(dst)]
	for i := range dst {
		dst[i] = bf16ToF32(uint16(src[2*i]) | uint16(src[2*i+1])<<8)
	}
}

// quantizeBF16 mirrors ggml_fp32_to_bf16_row_ref.
func quantizeBF16(src []float32, dst []byte) {
	dst = dst[:2*len(src)]
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], f32ToBF16(v))
	}
}

// The integer types convert exactly up to ±2^24; I32 beyond that rounds to
// the nearest float32, as a C (float) cast does.

func dequantizeI8(src []byte, dst []float32) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] = float32(int8(src[i]))
	}
}

func dequantizeI16(src []byte, dst []float32) {
	src = src[:2*len(dst)]
	for i := range dst {
		dst[i] = float32(int16(binary.LittleEndian.Uint16(src[2*i:])))
	}
}

func dequantizeI32(src []byte, dst []float32) {
	src = src[:4*len(dst)]
	for i := range dst {
		dst[i] = float32(int32(binary.LittleEndian.Uint32(src[4*i:])))
	}
}
