package ref

import (
	"math"
	"testing"

	"github.com/hearthstudio/hearth/gguf"
)

// TestMatMulTNFiniteDifference proves MatMulTN as the LoRA down-projection's
// weight gradient: for h = MatMul(A, X) (h = x·Aᵀ, A r×k in F32) and
// L(A) = Σ G ⊙ h, every ∂L/∂A[j,c] from a central difference of MatMul must
// equal MatMulTN(G, X)[j,c]. L is linear in A, so the quotient is exact for
// any step; as in TestMatMulBackwardInputFiniteDifference the step is 1 and
// the error left is the f32 rounding of MatMul's outputs,
// 2⁻²⁴·Σ|G|·(|h⁺| + |h⁻|) over the step, doubled for margin. dB is the same
// product with other operands (dYᵀ·H), so this covers it too; alpha is
// checked to scale the result exactly.
func TestMatMulTNFiniteDifference(t *testing.T) {
	const m, r, k = 5, 4, 37
	a := fdRandF32(11, r*k, 1)
	x := fdRandF32(12, m*k, 2)
	g := fdRandF32(13, m*r, 1)
	grad := MatMulTN(g, x, m, r, k, 1)
	wbytes := func(a []float32) []byte {
		b := make([]byte, 4*len(a))
		if err := gguf.Quantize(gguf.TypeF32, a, b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	loss := func(a []float32) (l, mag float64) {
		h, err := MatMul(gguf.TypeF32, r, k, wbytes(a), x, m)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range h {
			l += float64(g[i]) * float64(v)
			mag += math.Abs(float64(g[i]) * float64(v))
		}
		return l, mag
	}
	ap := append([]float32(nil), a...)
	worst := 0.0
	for i := range a {
		hi, lo := a[i]+1, a[i]-1
		ap[i] = hi
		lp, mp := loss(ap)
		ap[i] = lo
		lm, mm := loss(ap)
		ap[i] = a[i]
		step := float64(hi) - float64(lo)
		fd := (lp - lm) / step
		tol := 2 * 0x1p-24 * (mp + mm) / step
		if e := math.Abs(fd - float64(grad[i])); e > tol {
			t.Fatalf("dA[%d]: finite difference %v, MatMulTN %v (|diff| %.3g > %.3g)", i, fd, grad[i], e, tol)
		} else {
			worst = max(worst, e/tol)
		}
	}
	t.Logf("worst error %.3g of the tolerance", worst)
	scaled := MatMulTN(g, x, m, r, k, 0.25)
	for i := range grad {
		if scaled[i] != grad[i]*0.25 {
			t.Fatalf("alpha 0.25: [%d] = %v, want %v", i, scaled[i], grad[i]*0.25)
		}
	}
}
