package ops

import (
	"fmt"
	"math"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// normShapes: a single float; rows around the workgroup sizes normWG picks
// (32, 64, 256: one short, one past); a QK-norm of 4 heads of 128; and
// single long vectors with ragged tails, where each invocation sums many
// floats before the shared-memory reduction.
var normShapes = []struct{ rows, dim int }{
	{1, 1}, {3, 31}, {2, 33}, {5, 63}, {2, 255}, {3, 257}, {4, 128}, {1, 1000}, {1, 4097},
}

// normWeights are the weight forms the kernels take.
var normWeights = []struct {
	name    string
	weight  bool
	onePlus bool
}{{"none", false, false}, {"w", true, false}, {"1+w", true, true}}

// Tolerances of the norms against their float64 references. The kernel's
// f32 sum of squares is a per-invocation run of at most dim/32 terms and then
// a pairwise tree, within about 20 ulps (1.2e-6) of the exact sum; the
// square root halves that, inverseSqrt adds 2 ulps and the products with x
// and the weight one each: ~1.5e-6 if every rounding went the same way.
// They do not (measured: 2.3e-7 at dims up to 4097), so 1e-6 relative,
// whatever the output's size: RMSNorm is a product and needs no atol. LayerNorm subtracts the mean, whose rounding
// is an absolute error of a few ulps of the normalised values (at most
// sqrt(3) for uniform rows), then multiplies by the weight and adds the
// bias: its atol is 1e-6 per unit of the largest |weight| (measured: 3e-7,
// with the rows offset by 3e4 too).
const (
	rmsNormRTol   = 1e-6
	layerNormRTol = 2e-6
	layerNormATol = 1e-6
)

// normInputs is rows x dim of x and the weight and bias vectors at the given
// magnitudes. Gemma-style 1+w weights are centred near 0 so that 1 + w
// spans 0.5 .. 1.5 and touches 1 + w = 0.
func normInputs(seed uint64, rows, dim int, xScale, wScale float32) (x, w, b []float32) {
	return randVec(seed, rows*dim, xScale), randVec(seed+1, dim, wScale), randVec(seed+2, dim, 1)
}

func checkRMSNorm(t *testing.T, seed uint64, a NormArgs, weight bool, xScale, wScale float32) {
	t.Helper()
	x, w, _ := normInputs(seed, a.Rows, a.Dim, xScale, wScale)
	if a.OnePlus && a.Dim > 1 {
		w[0] = -1 // a zero gain: y must be exactly 0, not NaN
	}
	if !weight {
		w = nil
	}
	want := ref.RMSNorm(x, w, ref.NormArgs{Rows: a.Rows, Dim: a.Dim, Eps: a.Eps, OnePlus: a.OnePlus})
	n := a.Rows * a.Dim
	bx, y := upload(t, "x", x), scratch(t, "y", n)
	var bw *gpu.Buffer
	if w != nil {
		bw = upload(t, "w", w)
	}
	run(t, "rmsnorm", func(c *gpu.Chain) error { return RMSNorm(c, bx, bw, y, a) })
	assertClose(t, "rmsnorm", download(t, y, n), want, 0, rmsNormRTol)
	run(t, "rmsnorm in place", func(c *gpu.Chain) error { return RMSNorm(c, bx, bw, bx, a) })
	assertClose(t, "rmsnorm in place", download(t, bx, n), want, 0, rmsNormRTol)
}

func TestRMSNormMatchesReference(t *testing.T) {
	for _, s := range normShapes {
		for _, wt := range normWeights {
			t.Run(fmt.Sprintf("%dx%d/%s", s.rows, s.dim, wt.name), func(t *testing.T) {
				a := NormArgs{Rows: s.rows, Dim: s.dim, Eps: 1e-6, OnePlus: wt.onePlus}
				checkRMSNorm(t, 1, a, wt.weight, 2, 1.5)
			})
		}
	}
}

// checkRMSNormAdd runs y += rmsnorm(x) * w against the float64 norm added
// to y: the norm's relative error (rmsNormRTol) of the normalised value,
// plus the rounding of the add, half an ulp of the sum (with a factor two of
// margin for the ulp of a sum the float64 one rounds just under). With next,
// the fused z = rmsnorm(y) * w2 is checked against the float64 norm of the
// kernel's own y, within the norm's tolerance.
func checkRMSNormAdd(t *testing.T, seed uint64, a NormArgs, xScale, wScale, yScale float32, next bool) {
	t.Helper()
	x, w, _ := normInputs(seed, a.Rows, a.Dim, xScale, wScale)
	y := randVec(seed+3, a.Rows*a.Dim, yScale)
	w2 := randVec(seed+4, a.Dim, wScale)
	ra := ref.NormArgs{Rows: a.Rows, Dim: a.Dim, Eps: a.Eps, OnePlus: a.OnePlus}
	normed := ref.RMSNorm(x, w, ra)
	n := a.Rows * a.Dim
	bx, bw, by := upload(t, "x", x), upload(t, "w", w), upload(t, "y", y)
	var bw2, bz *gpu.Buffer
	if next {
		bw2, bz = upload(t, "w2", w2), scratch(t, "z", n)
	}
	run(t, "rmsnorm_add", func(c *gpu.Chain) error { return RMSNormAddNorm(c, bx, bw, by, bw2, bz, a) })
	got := download(t, by, n)
	scale := 1.0
	if a.Scale != 0 {
		scale = float64(a.Scale)
	}
	if next {
		assertClose(t, "rmsnorm_add next norm", download(t, bz, n), ref.RMSNorm(got, w2, ra), 0, rmsNormRTol)
	}
	for i := range got {
		want := (float64(y[i]) + float64(normed[i])) * scale
		// The scale's product rounds once more: another ulp of the result.
		tol := rmsNormRTol*math.Abs(float64(normed[i])*scale) + 0x1p-22*math.Abs(want)
		if diff := math.Abs(float64(got[i]) - want); !(diff <= tol) {
			t.Fatalf("rmsnorm_add %dx%d: [%d] = %v, want %v (y %v + norm %v; |diff| %.3g over %.3g)", a.Rows, a.Dim, i, got[i], want, y[i], normed[i], diff, tol)
		}
	}
}

func TestRMSNormAddMatchesReference(t *testing.T) {
	for _, s := range normShapes {
		for _, wt := range normWeights[1:] {
			t.Run(fmt.Sprintf("%dx%d/%s", s.rows, s.dim, wt.name), func(t *testing.T) {
				a := NormArgs{Rows: s.rows, Dim: s.dim, Eps: 1e-6, OnePlus: wt.onePlus}
				// No scale, and Gemma 4's layer output scale (E2B's run
				// 0.03-0.9).
				for _, scale := range []float32{0, 0.6875} {
					a.Scale = scale
					for _, next := range []bool{false, true} {
						checkRMSNormAdd(t, 1, a, 2, 1.5, 3, next)
						// Production magnitudes: a Gemma residual stream in the
						// hundreds to thousands, attention outputs of tens.
						checkRMSNormAdd(t, 2, a, 40, 1.5, 3e3, next)
					}
				}
			})
		}
	}
}

func checkLayerNorm(t *testing.T, x, w, b []float32, a NormArgs, atol float64) {
	t.Helper()
	want := ref.LayerNorm(x, w, b, ref.NormArgs{Rows: a.Rows, Dim: a.Dim, Eps: a.Eps, OnePlus: a.OnePlus})
	n := a.Rows * a.Dim
	bx, y := upload(t, "x", x), scratch(t, "y", n)
	var bw, bb *gpu.Buffer
	if w != nil {
		bw = upload(t, "w", w)
	}
	if b != nil {
		bb = upload(t, "b", b)
	}
	run(t, "layernorm", func(c *gpu.Chain) error { return LayerNorm(c, bx, bw, bb, y, a) })
	assertClose(t, "layernorm", download(t, y, n), want, atol, layerNormRTol)
	run(t, "layernorm in place", func(c *gpu.Chain) error { return LayerNorm(c, bx, bw, bb, bx, a) })
	assertClose(t, "layernorm in place", download(t, bx, n), want, atol, layerNormRTol)
}

func TestLayerNormMatchesReference(t *testing.T) {
	for _, s := range normShapes {
		for _, aff := range []struct {
			name         string
			weight, bias bool
		}{{"none", false, false}, {"w", true, false}, {"b", false, true}, {"w+b", true, true}} {
			t.Run(fmt.Sprintf("%dx%d/%s", s.rows, s.dim, aff.name), func(t *testing.T) {
				x, w, b := normInputs(2, s.rows, s.dim, 2, 1.5)
				if !aff.weight {
					w = nil
				}
				if !aff.bias {
					b = nil
				}
				checkLayerNorm(t, x, w, b, NormArgs{Rows: s.rows, Dim: s.dim, Eps: 1e-5}, layerNormATol*1.5)
			})
		}
	}
}

func TestNormWideMagnitude(t *testing.T) {
	// Residual-stream rows of +-3e4 at Gemma 2 2B's width (2304), Gemma's
	// QK-norm over head_dim 256 with 1+w weights, and weights of +-40.
	for _, tc := range []struct {
		name           string
		a              NormArgs
		weight         bool
		xScale, wScale float32
	}{
		{"residual 3e4", NormArgs{Rows: 3, Dim: 2304, Eps: 1e-6}, true, 3e4, 2},
		{"qk-norm 256 1+w", NormArgs{Rows: 8, Dim: 256, Eps: 1e-6, OnePlus: true}, true, 3e4, 1},
		{"weights 40", NormArgs{Rows: 2, Dim: 1000, Eps: 1e-5}, true, 300, 40},
		{"tiny rows", NormArgs{Rows: 2, Dim: 300, Eps: 1e-6}, false, 1e-4, 1}, // eps dominates the mean square
	} {
		t.Run("rmsnorm/"+tc.name, func(t *testing.T) { checkRMSNorm(t, 3, tc.a, tc.weight, tc.xScale, tc.wScale) })
	}

	// An all-zero row: eps keeps the scale finite, the output is exactly 0.
	t.Run("rmsnorm/zero row", func(t *testing.T) {
		a := NormArgs{Rows: 2, Dim: 257, Eps: 1e-6}
		x := make([]float32, a.Rows*a.Dim)
		bx := upload(t, "x", x)
		run(t, "rmsnorm zero", func(c *gpu.Chain) error { return RMSNorm(c, bx, nil, bx, a) })
		assertClose(t, "rmsnorm zero", download(t, bx, len(x)), x, 0, 0)
	})

	// LayerNorm rows offset far from zero: 3e4 +- 1 (the offset is 2^15 times
	// the spread) and +-3e4 with weights of 40. A kernel taking the variance
	// as mean(x^2) - mean^2 returns garbage for the first.
	t.Run("layernorm/offset", func(t *testing.T) {
		a := NormArgs{Rows: 3, Dim: 1000, Eps: 1e-5}
		x, w, b := normInputs(4, a.Rows, a.Dim, 1, 1.5)
		for i := range x {
			x[i] += 3e4
		}
		// The f32 inputs are themselves quantised to ulp(3e4) = 2^-9, coarser
		// than the kernel's errors: they are exact data for both sides.
		checkLayerNorm(t, x, w, b, a, layerNormATol*1.5)
	})
	t.Run("layernorm/wide", func(t *testing.T) {
		a := NormArgs{Rows: 2, Dim: 2304, Eps: 1e-5}
		x, w, b := normInputs(5, a.Rows, a.Dim, 3e4, 40)
		checkLayerNorm(t, x, w, b, a, layerNormATol*40)
	})
}

func TestNormGridWrap(t *testing.T) {
	// 70000 rows: past 65535 workgroups, so the grid wraps into y.
	a := NormArgs{Rows: 70000, Dim: 3, Eps: 1e-6}
	x, w, b := normInputs(6, a.Rows, a.Dim, 2, 1.5)
	checkRMSNorm(t, 6, a, true, 2, 1.5)
	checkLayerNorm(t, x, w, b, a, layerNormATol*1.5)
}

func TestNormRejectsBadShapes(t *testing.T) {
	x, w, short := scratch(t, "x", 40), scratch(t, "w", 8), scratch(t, "short", 7)
	wide := scratch(t, "y and w", 40)
	c, err := dev.NewChain("bad norm")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	ok := NormArgs{Rows: 5, Dim: 8, Eps: 1e-6}
	with := func(f func(a *NormArgs)) NormArgs { a := ok; f(&a); return a }
	for _, tc := range []struct {
		what string
		err  error
	}{
		{"rmsnorm rows 0", RMSNorm(c, x, w, x, with(func(a *NormArgs) { a.Rows = 0 }))},
		{"rmsnorm dim -1", RMSNorm(c, x, w, x, with(func(a *NormArgs) { a.Dim = -1 }))},
		{"rmsnorm x too short", RMSNorm(c, x, w, x, with(func(a *NormArgs) { a.Rows = 6 }))},
		{"rmsnorm short y", RMSNorm(c, x, w, short, ok)},
		{"rmsnorm short weight", RMSNorm(c, x, short, x, ok)},
		{"rmsnorm y is the weight", RMSNorm(c, x, x, x, ok)},
		{"rmsnorm eps NaN", RMSNorm(c, x, w, x, with(func(a *NormArgs) { a.Eps = float32(math.NaN()) }))},
		{"rmsnorm eps < 0", RMSNorm(c, x, w, x, with(func(a *NormArgs) { a.Eps = -1 }))},
		{"rmsnorm one-plus without weight", RMSNorm(c, x, nil, x, with(func(a *NormArgs) { a.OnePlus = true }))},
		{"rmsnorm nil x", RMSNorm(c, nil, w, x, ok)},
		{"rmsnorm_add y is x", RMSNormAdd(c, x, w, x, ok)},
		{"rmsnorm_add short y", RMSNormAdd(c, x, w, short, ok)},
		{"rmsnorm_add y is the weight", RMSNormAdd(c, x, wide, wide, ok)},
		{"rmsnorm_add no weight", RMSNormAdd(c, x, nil, wide, ok)},
		{"rmsnorm_add next without weight", RMSNormAddNorm(c, x, w, wide, nil, scratch(t, "z", 40), ok)},
		{"rmsnorm_add short next weight", RMSNormAddNorm(c, x, w, wide, short, scratch(t, "z", 40), ok)},
		{"rmsnorm_add z is y", RMSNormAddNorm(c, x, w, wide, w, wide, ok)},
		{"rmsnorm_add short z", RMSNormAddNorm(c, x, w, wide, w, short, ok)},
		{"rmsnorm_add scale NaN", RMSNormAdd(c, x, w, wide, with(func(a *NormArgs) { a.Scale = float32(math.NaN()) }))},
		{"rmsnorm scale", RMSNorm(c, x, w, x, with(func(a *NormArgs) { a.Scale = 0.5 }))},
		{"layernorm short bias", LayerNorm(c, x, w, short, x, ok)},
		{"layernorm short weight", LayerNorm(c, x, short, w, x, ok)},
		{"layernorm y is the bias", LayerNorm(c, x, w, x, x, ok)},
		{"layernorm x too short", LayerNorm(c, short, w, w, x, ok)},
	} {
		if tc.err == nil {
			t.Errorf("%s: accepted", tc.what)
		}
	}
	if c.Err() != nil {
		t.Errorf("a rejected shape reached the chain: %v", c.Err())
	}
}
