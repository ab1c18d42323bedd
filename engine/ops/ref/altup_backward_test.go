package ref

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func randF32(r *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() * scale)
	}
	return v
}

// dotF64 is Σ a·b in float64: the scalar loss whose gradient each check
// takes, its weights b drawn at random.
func dotF64(a, b []float32) float64 {
	s := 0.0
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// checkGradient holds the analytic gradient got of loss(x) against the
// central difference at every entry of x. The forwards round to f32, so a
// difference over 2h = 2e-3 carries ~1e-7·|L|/1e-3 of noise; the bound,
// 1e-3 of the gradient's largest entry, is some 50× that here (|L| ~ 5)
// and 1e-2 of a wrong factor of 2 or a missing term.
func checkGradient(t *testing.T, what string, x []float32, got []float32, loss func() float64) {
	t.Helper()
	const h = 1e-3
	big := 0.0
	for _, v := range got {
		big = math.Max(big, math.Abs(float64(v)))
	}
	for j := range x {
		orig := x[j]
		x[j] = orig + h
		up := loss()
		x[j] = orig - h
		down := loss()
		x[j] = orig
		fd := (up - down) / (2 * h)
		if d := math.Abs(fd - float64(got[j])); d > 1e-3*big {
			t.Errorf("%s[%d]: analytic %.6g, finite difference %.6g", what, j, got[j], fd)
		}
	}
}

func TestAltUpBackwardMatchesFiniteDifference(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	for _, a := range []AltUpArgs{
		{Tokens: 2, Dim: 5, Streams: 3, Active: 1, Eps: 1e-6},
		{Tokens: 1, Dim: 8, Streams: 4, Active: 0, Eps: 1e-6},
	} {
		n := a.Streams
		s := randF32(r, n*a.Tokens*a.Dim, 1)
		w := shifted(randF32(r, a.Dim, 0.3), 1)
		// Router outputs of order 1 (rmsnorm(x)·w/Dim summed over Dim is
		// ~1/sqrt(Dim) per unit of weight), so tanh bends.
		router := randF32(r, n*a.Dim, 3*math.Sqrt(float64(a.Dim)))
		coefP, coefC := randF32(r, n*n*n, 0.5), randF32(r, n*n, 0.5)
		scale := randF32(r, a.Dim, 1)
		x := randF32(r, a.Tokens*a.Dim, 1)
		rp, ra := randF32(r, len(s), 1), randF32(r, len(x), 1)

		pred, _ := AltUpPredict(s, w, router, coefP, a)
		got := AltUpPredictBackward(s, w, router, coefP, rp, ra, a)
		checkGradient(t, "predict ds", s, got, func() float64 {
			p, act := AltUpPredict(s, w, router, coefP, a)
			return dotF64(p, rp) + dotF64(act, ra)
		})

		rf := randF32(r, len(x), 1)
		dPred, dX := AltUpCorrectBackward(pred, x, w, router, coefC, scale, rp, rf, a)
		loss := func() float64 {
			out, first := AltUpCorrect(pred, x, w, router, coefC, scale, a)
			return dotF64(out, rp) + dotF64(first, rf)
		}
		checkGradient(t, "correct dpred", pred, dPred, loss)
		checkGradient(t, "correct dx", x, dX, loss)

		ds := AltUpMergeBackward(s, ra, a)
		checkGradient(t, "merge ds", s, ds, func() float64 { return dotF64(AltUpMerge(s, a), ra) })
	}
}

func TestGaussianTopKBackwardMatchesFiniteDifference(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	const rows, n, stride = 3, 40, 50
	for _, mult := range []float32{1.6448533, 0, -0.5} {
		g := randF32(r, (rows-1)*stride+n, 1)
		dy := randF32(r, len(g), 1)
		got := GaussianTopKBackward(g, dy, rows, n, stride, mult)
		checkGradient(t, "topk dg", g, got, func() float64 {
			y := slices.Clone(g)
			GaussianTopK(y, rows, n, stride, mult)
			return dotF64(y, dy)
		})
	}
}

func shifted(v []float32, by float32) []float32 {
	for i := range v {
		v[i] += by
	}
	return v
}
