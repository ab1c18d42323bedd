package gguf

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestVectorDequantizeMatchesScalar holds each vector dequantizer to the
// scalar codec bit for bit on random blocks: random bytes reach every
// nibble, high bit and scale, f16 scales included (subnormal, infinite and
// NaN ones; a NaN matches any NaN, as both paths quiet it alike but the
// payload is not part of the format).
func TestVectorDequantizeMatchesScalar(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, typ := range []Type{TypeF16, TypeQ8_0, TypeQ4_0, TypeQ5_0, TypeQ4_K, TypeQ6_K} {
		vec := vectorDequantize(typ)
		if vec == nil {
			t.Logf("%v: no vector dequantizer on this processor; nothing to compare", typ)
			continue
		}
		// 37 blocks: several loop trips and, for F16, a tail of 5 values
		// after the 8-wide loop.
		n := 37 * typ.BlockSize()
		src := make([]byte, n/typ.BlockSize()*typ.TypeSize())
		for trial := range 20 {
			for i := range src {
				src[i] = byte(rng.Uint32())
			}
			want, got := make([]float32, n), make([]float32, n)
			scalarCodec(typ).dequantize(src, want)
			vec(src, got)
			for i := range want {
				w, g := want[i], got[i]
				if math.Float32bits(w) != math.Float32bits(g) && !(w != w && g != g) {
					t.Fatalf("%v trial %d value %d: vector %v (%#x), scalar %v (%#x)", typ, trial, i, g, math.Float32bits(g), w, math.Float32bits(w))
				}
			}
		}
	}
}
