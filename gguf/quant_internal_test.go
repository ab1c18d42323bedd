package gguf

import (
	"math"
	"testing"

	"github.com/x448/float16"
)

// ggmlFP32ToFP16 is ggml_compute_fp32_to_fp16 (the portable path of
// ggml-impl.h, from the FP16 library), written out here as the oracle for
// f32ToF16, which goes through x448/float16.
func ggmlFP32ToFP16(f float32) uint16 {
	scaleToInf := math.Float32frombits(0x77800000)
	scaleToZero := math.Float32frombits(0x08800000)
	base := float32(abs32(f)*scaleToInf) * scaleToZero
	w := math.Float32bits(f)
	shl1W := w + w
	sign := w & 0x80000000
	bias := shl1W & 0xff000000
	if bias < 0x71000000 {
		bias = 0x71000000
	}
	base = math.Float32frombits(bias>>1+0x07800000) + base
	bits := math.Float32bits(base)
	expBits := bits >> 13 & 0x00007c00
	mantissaBits := bits & 0x00000fff
	nonsign := expBits + mantissaBits
	if shl1W > 0xff000000 {
		nonsign = 0x7e00
	}
	return uint16(sign>>16 | nonsign)
}

func TestQuantF16ConversionMatchesGGML(t *testing.T) {
	// f16ToF32 is ggml's own method; x448/float16 is the independent oracle
	// (exact widening; it too quiets a NaN and keeps its payload).
	for h := range 1 << 16 {
		got, want := f16ToF32(uint16(h)), float16.Frombits(uint16(h)).Float32()
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("f16ToF32(%#04x) = %#08x, x448/float16 %#08x", h, math.Float32bits(got), math.Float32bits(want))
		}
	}
	// Every 4099th float32 bit pattern (a prime stride, so every exponent and
	// many mantissa tails), plus the rounding boundaries around each f16
	// value: exact midpoints and one ulp either side.
	check := func(u uint32) {
		f := math.Float32frombits(u)
		if got, want := f32ToF16(f), ggmlFP32ToFP16(f); got != want {
			t.Fatalf("f32ToF16(%#08x) = %#04x, ggml %#04x", u, got, want)
		}
	}
	for u := uint64(0); u < 1<<32; u += 4099 {
		check(uint32(u))
	}
	for h := range 1 << 15 {
		f := math.Float32bits(f16ToF32(uint16(h)))
		for _, sign := range []uint32{0, 1 << 31} {
			for _, delta := range []int32{-1, 0, 1, 1 << 12, 1<<12 - 1, 1<<12 + 1} {
				check((f + uint32(delta)) | sign)
			}
		}
	}
}

func TestQuantBF16ConversionMatchesGGML(t *testing.T) {
	for _, c := range []struct {
		in   uint32
		want uint16
	}{
		{0x3f800000, 0x3f80}, // 1
		{0x3f808000, 0x3f80}, // tie, even stays
		{0x3f818000, 0x3f82}, // tie, odd rounds up
		{0x3f808001, 0x3f81}, // above the tie
		{0x7f7fffff, 0x7f80}, // max float rounds to +Inf
		{0x80000000, 0x8000}, // −0
		{0x7f800001, 0x7fc0}, // signalling NaN is quieted, not rounded
		{0xffc00001, 0xffc0}, // negative quiet NaN keeps its sign
	} {
		if got := f32ToBF16(math.Float32frombits(c.in)); got != c.want {
			t.Errorf("f32ToBF16(%#08x) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
}

// nearest_int is only exact for |f| ≤ 2^22; inside that range it must be
// round-half-to-even.
func TestQuantNearestInt(t *testing.T) {
	for _, f := range []float32{0, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 3.7, -3.7, 4194303, -4194303, 1e-30} {
		if got, want := nearestInt(f), int32(math.RoundToEven(float64(f))); got != want {
			t.Errorf("nearestInt(%g) = %d, want %d", f, got, want)
		}
	}
}
