package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hearthstudio/hearth/gguf"
)

// TestDotWithinRoundingBound checks dot (the FMA kernel where the processor
// has one) against the exact sum in float64 for lengths that exercise the
// 32-wide loop, the 8-wide loop and the scalar tail: any ordering of n f32
// products and sums is within n·2⁻²⁴·Σ|aᵢbᵢ| of the exact value (the
// classic bound for recursive summation), so a wrong lane, a dropped tail
// or a mis-stepped pointer shows as an error far above it.
func TestDotWithinRoundingBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 7, 8, 9, 31, 32, 33, 40, 63, 64, 65, 100, 896, 2048 + 13} {
		a, b := make([]float32, n), make([]float32, n)
		var exact, mag float64
		for i := range a {
			a[i], b[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64()*100)
			exact += float64(a[i]) * float64(b[i])
			mag += math.Abs(float64(a[i]) * float64(b[i]))
		}
		got := float64(dot(a, b))
		if bound := float64(n) * 0x1p-24 * mag; math.Abs(got-exact) > bound {
			t.Errorf("n=%d: dot %v, exact %v: error %.3g above the bound %.3g", n, got, exact, math.Abs(got-exact), bound)
		}
		if g := float64(dotGo(a, b)); math.Abs(g-exact) > float64(n)*0x1p-24*mag {
			t.Errorf("n=%d: dotGo %v, exact %v", n, g, exact)
		}
	}
}

// TestDotRowsMatchesDot: prefill dots a weight row with several activation
// rows at once, decode with one; each row's sum must be bit for bit the
// single dot's, so a token's logits do not depend on how it was batched.
func TestDotRowsMatchesDot(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{1, 7, 8, 15, 16, 17, 24, 40, 896} {
		for _, m := range []int{1, 3, 4, 5, 9} {
			w, x := make([]float32, n), make([]float32, n*m)
			for i := range w {
				w[i] = float32(rng.NormFloat64())
			}
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			const stride = 3
			y := make([]float32, (m-1)*stride+1)
			dotRows(w, x, y, stride)
			for r := range m {
				want := dot(w, x[r*n:(r+1)*n])
				if got := y[r*stride]; math.Float32bits(got) != math.Float32bits(want) {
					t.Errorf("n=%d m=%d row %d: dotRows %v, dot %v", n, m, r, got, want)
				}
			}
		}
	}
}

// TestFusedDotMatchesDot: decode dots Q8_0, Q5_0, Q4_K and Q6_K rows
// without writing the dequantized row; the sum must be bit for bit dot of
// that row, so decode and prefill agree. Rows are real quantized values of
// one to 28 blocks (a Qwen 2.5 0.5B row is 28 Q8_0 blocks; 2048 is a Llama
// 3.2 1B row).
func TestFusedDotMatchesDot(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, typ := range []gguf.Type{gguf.TypeQ8_0, gguf.TypeQ5_0, gguf.TypeQ4_K, gguf.TypeQ6_K} {
		fused := gguf.FusedDot(typ)
		if fused == nil {
			t.Logf("%v: no fused kernel on this processor; nothing to compare", typ)
			continue
		}
		for _, n := range []int{256, 896 / 32 * typ.BlockSize(), 2048} {
			vals, x := make([]float32, n), make([]float32, n)
			for i := range vals {
				vals[i], x[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
			}
			size, _ := typ.RowSize(int64(n))
			row := make([]byte, size)
			if err := gguf.Quantize(typ, vals, row); err != nil {
				t.Fatal(err)
			}
			deq := make([]float32, n)
			if err := gguf.Dequantize(typ, row, deq); err != nil {
				t.Fatal(err)
			}
			if got, want := fused(row, x), dot(deq, x); math.Float32bits(got) != math.Float32bits(want) {
				t.Errorf("%v n=%d: fused %v, dot of the dequantized row %v", typ, n, got, want)
			}
		}
	}
}
