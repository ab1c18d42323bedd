package ref

import (
	"fmt"
	"math"
	"testing"
)

// TestCrossEntropyFiniteDifference proves the gradient of the reference
// from its own loss: every ∂loss/∂x_i from a central difference in float64
// must match crossEntropy64's gradient. With step h = 1e-5 the difference
// quotient's truncation error is h²/6·|∂³loss| (the third derivatives of a
// log-sum-exp are below 1, and the cap only shrinks them) ≈ 2e-11, and the
// loss's float64 rounding adds ~1e-16·|loss|/h ≈ 2e-9 at the largest loss
// here (160, logits ±80): a tolerance of 1e-8 is 5× that (measured worst
// 4e-10), while a wrong term (a missing cap derivative, an off-by-one
// target) is off by 1e-3 or more.
func TestCrossEntropyFiniteDifference(t *testing.T) {
	const h = 1e-5
	for _, tc := range []struct {
		vocab, target int
		spread, cap   float64
	}{
		{1, 0, 1, 0}, {7, 3, 4, 0}, {50, 0, 4, 0}, {50, 49, 80, 0}, {50, 17, 80, 30}, {33, 5, 4, 30},
	} {
		t.Run(fmt.Sprintf("v%d_t%d_x%g_cap%g", tc.vocab, tc.target, tc.spread, tc.cap), func(t *testing.T) {
			x := make([]float64, tc.vocab)
			for i, v := range fdRandF32(uint64(tc.vocab), tc.vocab, tc.spread) {
				x[i] = float64(v)
			}
			_, grad := crossEntropy64(x, tc.target, tc.cap)
			worst := 0.0
			for i := range x {
				x0 := x[i]
				x[i] = x0 + h
				lp, _ := crossEntropy64(x, tc.target, tc.cap)
				x[i] = x0 - h
				lm, _ := crossEntropy64(x, tc.target, tc.cap)
				x[i] = x0
				fd := (lp - lm) / (2 * h)
				e := math.Abs(fd - grad[i])
				if e > 1e-8 {
					t.Fatalf("d/dx[%d]: finite difference %v, gradient %v (|diff| %.3g)", i, fd, grad[i], e)
				}
				worst = max(worst, e)
			}
			t.Logf("worst |difference| %.3g", worst)
		})
	}
}

// TestCrossEntropyBackwardMasksAndScales pins the f32 wrapper: masked rows
// are zero, a target past the vocabulary is NaN with a zero gradient, and
// scale multiplies the gradient only.
func TestCrossEntropyBackwardMasksAndScales(t *testing.T) {
	logits := fdRandF32(9, 3*5, 3)
	loss, grad := CrossEntropyBackward(logits, []int32{-1, 2, 5}, 3, 5, 0.5, 0)
	if loss[0] != 0 || !math.IsNaN(float64(loss[2])) {
		t.Fatalf("losses %v: want 0 for the masked row and NaN for target 5 of 5", loss)
	}
	for i, g := range grad {
		if (i < 5 || i >= 10) && g != 0 {
			t.Fatalf("grad[%d] = %v, want 0 outside the live row", i, g)
		}
	}
	x := make([]float64, 5)
	for i, v := range logits[5:10] {
		x[i] = float64(v)
	}
	l, g := crossEntropy64(x, 2, 0)
	if float32(l) != loss[1] || float32(g[4]*0.5) != grad[9] {
		t.Fatalf("row 1: loss %v grad %v, want %v and %v", loss[1], grad[9], l, g[4]*0.5)
	}
}
