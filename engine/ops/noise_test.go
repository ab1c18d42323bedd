package ops

import (
	"math"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// TestGaussianNoiseMatchesReference: both sides draw the same 24-bit
// uniforms exactly; the GPU's f32 log, sqrt and cos against float64 ones
// differ by a few ulp of f32, and the tails (|y| up to 5.8 at u1 = 2⁻²⁵)
// amplify log's error by 1/(2·(−ln u1)) at most: 1e-5 absolute on values
// of that size is ~20 ulp.
func TestGaussianNoiseMatchesReference(t *testing.T) {
	for _, c := range []struct {
		n     int
		key   uint32
		scale float32
	}{{1, 0, 1}, {257, 7, 1}, {100003, 0xdeadbeef, 0.003}} {
		y := scratch(t, "noise", c.n)
		run(t, "noise", func(ch *gpu.Chain) error { return GaussianNoise(ch, y, c.n, c.key, c.scale) })
		assertClose(t, "gaussian noise", download(t, y, c.n), ref.GaussianNoise(c.n, c.key, c.scale), 1e-5*float64(c.scale), 1e-5)
	}
}

// TestGaussianNoiseIsStandardNormal: over 10⁶ draws the mean, variance and
// the fraction beyond 2σ are those of N(0, 1) within 5 standard errors
// (mean: 1/√n = 1e-3; variance: √(2/n) = 1.4e-3; tail 0.0455:
// √(p(1−p)/n) = 2.1e-4); two keys give uncorrelated streams (|r| < 5e-3).
func TestGaussianNoiseIsStandardNormal(t *testing.T) {
	const n = 1000000
	a, b := ref.GaussianNoise(n, 1, 1), ref.GaussianNoise(n, 2, 1)
	var sum, sq, cross float64
	tail := 0
	for i, v := range a {
		sum += float64(v)
		sq += float64(v) * float64(v)
		cross += float64(v) * float64(b[i])
		if math.Abs(float64(v)) > 2 {
			tail++
		}
	}
	mean, variance := sum/n, sq/n-(sum/n)*(sum/n)
	if math.Abs(mean) > 5e-3 || math.Abs(variance-1) > 7e-3 || math.Abs(float64(tail)/n-0.0455) > 1.1e-3 || math.Abs(cross/n) > 5e-3 {
		t.Errorf("mean %.4g, variance %.4g, beyond 2σ %.4g, cross-key correlation %.4g: not N(0, 1)", mean, variance, float64(tail)/n, cross/n)
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
