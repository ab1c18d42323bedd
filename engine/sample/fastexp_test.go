package sample

import (
	"math"
	"testing"
)

// TestExpNeg holds expNeg to math.Exp: 2e-14 relative allows the series'
// 6.3e-15 remainder plus the rounding of twelve Horner steps (about 1e-16
// each) with room; a wrong coefficient is off by 1e-9 or more.
func TestExpNeg(t *testing.T) {
	worst := 0.0
	for i := range 2_000_000 {
		d := -708 * float64(i) / 2_000_000
		if i%2 == 1 {
			d = -float64(i) * 1e-6 // dense near 0, where r is the whole argument
		}
		got, want := expNeg(d), math.Exp(d)
		if rel := math.Abs(got-want) / want; rel > worst {
			worst = rel
			if rel > 2e-14 {
				t.Fatalf("expNeg(%v) = %v, math.Exp = %v (relative %.3g)", d, got, want, rel)
			}
		}
	}
	t.Logf("worst relative error %.3g", worst)
	for _, tc := range []struct{ d, want float64 }{
		{0, 1}, {math.Copysign(0, -1), 1}, {-800, 0}, {math.Inf(-1), 0}, {1, math.E},
	} {
		if got := expNeg(tc.d); got != tc.want && math.Abs(got-tc.want) > 1e-15 {
			t.Errorf("expNeg(%v) = %v, want %v", tc.d, got, tc.want)
		}
	}
	if !math.IsNaN(expNeg(math.NaN())) {
		t.Error("expNeg(NaN) is not NaN")
	}
}

func BenchmarkExpNeg(b *testing.B) {
	x := make([]float64, 4096)
	for i := range x {
		x[i] = -float64(i) / 200
	}
	var s float64
	for b.Loop() {
		for _, v := range x {
			s += expNeg(v)
		}
	}
	_ = s
}
