package ops

import (
	"math"
	"testing"
)

// The backward kernels are tested twice: the GPU against its CPU reference,
// and the reference against finite differences of the existing forward
// reference, so that a reference carrying the same wrong formula as its
// kernel cannot pass. The helpers here serve the second kind.

// f32Eps is the f32 unit roundoff, 2^-24: a correctly rounded operation errs
// by at most this much relative to its result.
const f32Eps = 1.0 / (1 << 24)

// checkFiniteDiff verifies grad = dL/dx for L(x) = sum_i dy_i * f(x)_i, one
// coordinate of x at a time, with central differences at steps h and h/2
// combined by Richardson extrapolation, (4 D(h/2) - D(h)) / 3, whose
// truncation error is O(h^4). f is a forward reference; it returns f32, so L
// (summed in float64) carries f32 rounding of about 6e-8 of each changed
// output, which the difference divides by the step: h is chosen per call to
// balance that noise against the truncation. Each step is the one the f32 x
// really moved by. The error bound is tol times the largest |grad|.
func checkFiniteDiff(t *testing.T, what string, f func(x []float32) []float32, x, dy, grad []float32, h, tol float64) {
	t.Helper()
	loss := func(x []float32) float64 {
		y := f(x)
		s := 0.0
		for i, v := range y {
			s += float64(dy[i]) * float64(v)
		}
		return s
	}
	scale := 0.0
	for _, g := range grad {
		scale = math.Max(scale, math.Abs(float64(g)))
	}
	xp := append([]float32(nil), x...)
	central := func(i int, h float64) float64 {
		x0 := x[i]
		hi, lo := float32(float64(x0)+h), float32(float64(x0)-h)
		xp[i] = hi
		lp := loss(xp)
		xp[i] = lo
		lm := loss(xp)
		xp[i] = x0
		return (lp - lm) / (float64(hi) - float64(lo))
	}
	worst, at, fdAt := 0.0, -1, 0.0
	for i := range x {
		fd := (4*central(i, h/2) - central(i, h)) / 3
		if d := math.Abs(fd - float64(grad[i])); d > worst {
			worst, at, fdAt = d, i, fd
		}
	}
	if worst > tol*scale {
		t.Fatalf("%s: d/dx[%d] = %v, finite differences give %v (|diff| %.3g over %.3g = %.3g of the largest |grad| %.3g)",
			what, at, grad[at], fdAt, worst, tol*scale, tol, scale)
	}
	t.Logf("%s: finite differences within %.2g of the largest |grad| %.3g", what, worst/math.Max(scale, 1e-300), scale)
}

// assertWithin fails unless |got_i - want_i| <= tol_i everywhere and reports
// the worst element relative to its tolerance; NaN or Inf in got fails. It
// logs the worst ratio so that a run shows how much of the tolerance the
// kernel uses.
func assertWithin(t testing.TB, what string, got, want []float32, tol []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d values, want %d", what, len(got), len(want))
	}
	worst, at := 0.0, -1
	for i := range want {
		g, w := float64(got[i]), float64(want[i])
		if math.IsNaN(g) || math.IsInf(g, 0) {
			t.Fatalf("%s: [%d] = %v, want %v", what, i, g, w)
		}
		d := math.Abs(g - w)
		if d == 0 {
			continue
		}
		r := math.Inf(1)
		if tol[i] > 0 {
			r = d / tol[i]
		}
		if r > worst {
			worst, at = r, i
		}
	}
	if worst > 1 {
		t.Fatalf("%s: [%d] = %v, want %v (|diff| %.3g, tolerance %.3g)", what, at, got[at], want[at], math.Abs(float64(got[at]-want[at])), tol[at])
	}
	t.Logf("%s: worst error %.2g of its tolerance", what, worst)
}
