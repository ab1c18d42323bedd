package ops

import (
	"math"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// TestGaussianNoiseMatchesReference: both sides draw the same 24-bit
// uniforms and the same f32 angle, so they differ by the GPU's log, sqrt
// and cos against float64 ones. Lavapipe's cos measured 2.6e-5 absolute
// per unit of scale near π/2 (where the value is near zero, so relative
// error says nothing); WGSL allows cos 2⁻¹¹ absolute. The bound, 1e-4 of
// scale, is 4× the measured and 5× under the spec's.
func TestGaussianNoiseMatchesReference(t *testing.T) {
	for _, c := range []struct {
		n     int
		key   uint32
		scale float32
	}{{1, 0, 1}, {257, 7, 1}, {100003, 0xdeadbeef, 0.003}} {
		y := scratch(t, "noise", c.n)
		run(t, "noise", func(ch *gpu.Chain) error { return GaussianNoise(ch, y, c.n, c.key, c.scale) })
		assertClose(t, "gaussian noise", download(t, y, c.n), ref.GaussianNoise(c.n, c.key, c.scale), 1e-4*float64(c.scale), 1e-5)
	}
}

// TestGaussianNoiseIsStandardNormal: over 10⁶ draws the mean, variance and
// the fraction beyond 2σ are those of N(0, 1) within 5 standard errors
// (mean: 1/√n = 1e-3; variance: √(2/n) = 1.4e-3; tail 0.0455:
// √(p(1−p)/n) = 2.1e-4); streams of neighbouring keys are uncorrelated at
// lags 0 to 2 (|r| < 5e-3, 5 standard errors), so no key's stream is
// another's shifted.
func TestGaussianNoiseIsStandardNormal(t *testing.T) {
	const n = 1000000
	a := ref.GaussianNoise(n, 1, 1)
	var sum, sq float64
	tail := 0
	for _, v := range a {
		sum += float64(v)
		sq += float64(v) * float64(v)
		if math.Abs(float64(v)) > 2 {
			tail++
		}
	}
	mean, variance := sum/n, sq/n-(sum/n)*(sum/n)
	if math.Abs(mean) > 5e-3 || math.Abs(variance-1) > 7e-3 || math.Abs(float64(tail)/n-0.0455) > 1.1e-3 {
		t.Errorf("mean %.4g, variance %.4g, beyond 2σ %.4g: not N(0, 1)", mean, variance, float64(tail)/n)
	}
	for _, key := range []uint32{2, 3} {
		b := ref.GaussianNoise(n, key, 1)
		for lag := range 3 {
			var cross float64
			for i := lag; i < n; i++ {
				cross += float64(a[i]) * float64(b[i-lag])
			}
			if r := cross / float64(n-lag); math.Abs(r) > 5e-3 {
				t.Errorf("keys 1 and %d at lag %d: correlation %.4g", key, lag, r)
			}
		}
	}
}

func TestGaussianNoiseRejects(t *testing.T) {
	y := scratch(t, "noise", 4)
	for _, c := range []struct {
		n     int
		scale float32
	}{{0, 1}, {5, 1}, {4, float32(math.NaN())}} {
		ch, err := dev.NewChain("noise bad")
		if err != nil {
			t.Fatal(err)
		}
		if err := GaussianNoise(ch, y, c.n, 1, c.scale); err == nil {
			t.Errorf("n %d scale %v: accepted", c.n, c.scale)
		}
		ch.Discard()
	}
}
