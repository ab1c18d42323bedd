package ref

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hearthstudio/hearth/gguf"
)

// fdRandF32 is n values uniform in [-scale, scale), reproducible from seed.
func fdRandF32(seed uint64, n int, scale float64) []float32 {
	r := rand.New(rand.NewPCG(seed, 0x9e37))
	v := make([]float32, n)
	for i := range v {
		v[i] = float32((r.Float64()*2 - 1) * scale)
	}
	return v
}

// fdQuantized encodes random rows×cols weights as t.
func fdQuantized(t *testing.T, typ gguf.Type, rows, cols int) []byte {
	t.Helper()
	n, _ := typ.RowSize(int64(cols))
	q := make([]byte, int(n)*rows)
	if err := gguf.Quantize(typ, fdRandF32(1, rows*cols, 1), q); err != nil {
		t.Fatal(err)
	}
	return q
}

// TestMatMulBackwardInputFiniteDifference proves the backward reference from
// the forward one: for L(X) = Σ G ⊙ MatMul(W, X), every ∂L/∂X[j,i] from a
// central difference of MatMul must equal MatMulBackwardInput(W, G)[j,i].
// L is linear in X, so the difference quotient is exact for any step; the
// step is 1 to make the f32 rounding of MatMul's outputs small next to the
// change it measures, and the perturbed input is divided by the step it
// really took (x ± 1 rounds in f32). The only error left is that output
// rounding: 2⁻²⁴·Σ_n |G|·(|Y⁺| + |Y⁻|) over the step, doubled for margin.
func TestMatMulBackwardInputFiniteDifference(t *testing.T) {
	const rows, cols, m = 23, 256, 3
	for _, typ := range []gguf.Type{gguf.TypeF32, gguf.TypeF16, gguf.TypeQ8_0, gguf.TypeQ4_0, gguf.TypeQ4_K, gguf.TypeQ6_K} {
		t.Run(typ.String(), func(t *testing.T) {
			w := fdQuantized(t, typ, rows, cols)
			x := fdRandF32(2, m*cols, 1)
			g := fdRandF32(3, m*rows, 1)
			grad, err := MatMulBackwardInput(typ, rows, cols, w, g, m)
			if err != nil {
				t.Fatal(err)
			}
			loss := func(x []float32) (l, mag float64) {
				y, err := MatMul(typ, rows, cols, w, x, m)
				if err != nil {
					t.Fatal(err)
				}
				for i, v := range y {
					l += float64(g[i]) * float64(v)
					mag += math.Abs(float64(g[i]) * float64(v))
				}
				return l, mag
			}
			xp := append([]float32(nil), x...)
			worst := 0.0
			for i := range x {
				hi, lo := x[i]+1, x[i]-1
				xp[i] = hi
				lp, mp := loss(xp)
				xp[i] = lo
				lm, mm := loss(xp)
				xp[i] = x[i]
				step := float64(hi) - float64(lo)
				fd := (lp - lm) / step
				tol := 2 * 0x1p-24 * (mp + mm) / step
				e := math.Abs(fd - float64(grad[i]))
				if e > tol {
					t.Fatalf("dX[%d]: finite difference %v, backward %v (|diff| %.3g > %.3g)", i, fd, grad[i], e, tol)
				}
				worst = max(worst, e/tol)
			}
			t.Logf("worst error %.3g of the tolerance", worst)
		})
	}
}
