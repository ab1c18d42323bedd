package ops

import (
	"fmt"
	"math"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// Tolerances of the audio activations against float64. Lavapipe's sin is
// within 6e-8 absolute for arguments up to 3000 (measured; its argument
// reduction is exact enough), tanh_safe within 1.8e-7, exp within a few
// ulps relative. Snake adds (1/alpha) sin^2: with alpha down to 0.1 the
// sine's error is multiplied by up to 2/alpha = 20, plus the f32 rounding of
// x + ... at the scale of |x|. WGSL only promises sin to 2^-11 absolute on
// [-pi, pi]; a driver that far off fails these on purpose, since Kokoro's
// Snake would then differ from PyTorch's audibly.
const (
	sinATol  = 2e-7
	tanhATol = 3e-7
	// exp: WGSL allows 3 + 2|x| ulps, since exp(x) = exp2(x log2 e) rounds
	// the product; lavapipe measured 15 ulps at x = 85. expRTol is per unit
	// of |x| (plus 3 ulps at x = 0).
	expRTol = 2 * 0x1p-23
	// expATol: GPUs flush subnormal results (below 2^-126) to zero.
	expATol   = 0x1p-126
	snakeRTol = 4e-7 // of |y|: alpha*x's f32 rounding (2^-24 |x|) and the final add's
	// snakeATol is per unit of 1/alpha: sin's error (sinATol) twice, through
	// d(sin^2) = 2 sin cos, plus 1/alpha's, which WGSL lets be 2.5 ulps
	// (3e-7 relative). The H200's Vulkan driver needed 2.5e-7 (measured),
	// over the 2e-7 that sufficed on lavapipe.
	snakeATol = 2*sinATol + 3e-7
)

func checkSnake(t *testing.T, seed uint64, channels, steps int, xScale float32, eps float32) {
	t.Helper()
	x := randVec(seed, channels*steps, xScale)
	alpha := randVec(seed+1, channels, 1)
	minAlpha := math.Inf(1)
	for i := range alpha {
		alpha[i] = 1.05 + alpha[i] // 0.05 .. 2.05: learned alphas are positive
		minAlpha = math.Min(minAlpha, float64(alpha[i]))
	}
	want := ref.Snake(x, alpha, steps, eps)
	bx, ba, y := upload(t, "x", x), upload(t, "alpha", alpha), scratch(t, "y", len(x))
	run(t, "snake", func(c *gpu.Chain) error { return Snake(c, bx, ba, y, channels, steps, eps) })
	assertClose(t, "snake", download(t, y, len(x)), want, snakeATol/minAlpha, snakeRTol)
	run(t, "snake in place", func(c *gpu.Chain) error { return Snake(c, bx, ba, bx, channels, steps, eps) })
	assertClose(t, "snake in place", download(t, bx, len(x)), want, snakeATol/minAlpha, snakeRTol)
}

func TestSnakeMatchesReference(t *testing.T) {
	for _, s := range []struct{ c, t int }{{1, 1}, {3, 255}, {5, 257}, {7, 1000}, {2, 70001}} {
		t.Run(fmt.Sprintf("%dx%d", s.c, s.t), func(t *testing.T) { checkSnake(t, 31, s.c, s.t, 3, 0) })
	}
	t.Run("eps 1e-9", func(t *testing.T) { checkSnake(t, 32, 4, 100, 3, 1e-9) })
}

func TestSnakeWideMagnitude(t *testing.T) {
	// Pre-Snake activations of a few hundred: sin's argument reduction at
	// alpha*x ~ 600 must stay exact enough.
	checkSnake(t, 33, 6, 513, 300, 0)
}

func TestAudioActivationsMatchReference(t *testing.T) {
	for _, n := range []int{1, 255, 257, 4099, 100003} {
		for _, scale := range []float32{3, 300} {
			x := randVec(uint64(n), n, scale)
			bx, y := upload(t, "x", x), scratch(t, "y", n)
			name := fmt.Sprintf("n=%d scale=%v", n, scale)
			for _, slope := range []float32{0.1, 0.01, 0.2} {
				run(t, "leaky_relu", func(c *gpu.Chain) error { return LeakyReLU(c, bx, y, n, slope) })
				assertClose(t, name+" leaky_relu", download(t, y, n), ref.LeakyReLU(x, slope), 0, 0)
			}
			run(t, "tanh", func(c *gpu.Chain) error { return Tanh(c, bx, y, n) })
			assertClose(t, name+" tanh", download(t, y, n), ref.Tanh(x), tanhATol, 0)
			run(t, "sin", func(c *gpu.Chain) error { return Sin(c, bx, y, n) })
			assertClose(t, name+" sin", download(t, y, n), ref.Sin(x), sinATol, 0)
			// exp over the range Kokoro's log-magnitudes take (and up to 88).
			top := min(scale, 88)
			xe := randVec(uint64(n)+1, n, top)
			be := upload(t, "xe", xe)
			run(t, "exp in place", func(c *gpu.Chain) error { return Exp(c, be, be, n) })
			assertClose(t, name+" exp", download(t, be, n), ref.Exp(xe), expATol, expRTol*(1.5+float64(top)))
		}
	}
}

func TestAudioActivationGridWrap(t *testing.T) {
	// 65536 workgroups of 256 and one more: the grid wraps into y.
	n := 65536*256 + 1
	x := randVec(34, n, 2)
	bx := upload(t, "x", x)
	run(t, "leaky_relu wrap", func(c *gpu.Chain) error { return LeakyReLU(c, bx, bx, n, 0.1) })
	assertClose(t, "leaky_relu wrap", download(t, bx, n), ref.LeakyReLU(x, 0.1), 0, 0)
}

func TestAudioActivationsRejectBadShapes(t *testing.T) {
	x, a := scratch(t, "x", 10), scratch(t, "a", 2)
	c, err := dev.NewChain("bad audio activation")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	for i, err := range []error{
		Snake(c, x, a, x, 3, 3, 0),
		Snake(c, x, a, x, 2, 6, 0),
		Snake(c, x, a, a, 1, 2, 0),
		Snake(c, x, a, x, 2, 5, float32(math.NaN())),
		LeakyReLU(c, x, x, 11, 0.1),
		LeakyReLU(c, x, x, 10, float32(math.Inf(1))),
		Tanh(c, x, x, 0),
		Exp(c, nil, x, 1),
	} {
		if err == nil {
			t.Errorf("case %d: accepted", i)
		}
	}
	if c.Err() != nil {
		t.Errorf("a rejected shape reached the chain: %v", c.Err())
	}
}
