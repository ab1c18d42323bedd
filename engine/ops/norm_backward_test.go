package ops

import (
	"fmt"
	"math"
	"math/bits"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// rmsNormBackwardTol returns the tolerances of dx and dw against the float64
// references, element by element, from the magnitude of what the kernels
// round (so that a dx that cancels to near zero is held to the size of what
// cancelled, not to its own).
//
// dx_j: r (|g_j dy_j| + |x_j| r^2 sum_k |g_k dy_k x_k| / dim), times a count
// of roundings: the kernel's two row sums are a run of ceil(dim/WG) terms per
// invocation and a log2(WG)-level tree, each adding at most one rounding of
// the partial sum; r carries half the sum of squares' error plus
// inverseSqrt's 2 ulps, k = r^2 sum/dim a few more, and the final expression
// 4: ceil(dim/WG) + log2(WG) + 8, doubled because the bound adds the two
// sums' errors.
//
// dw_j: each term dy x r carries r's error and two products (half the count
// above + 4, of sum |terms|), and the running sums, down each block of 4096
// rows and then over the blocks, a rounding of each partial sum's size: the
// bound follows the kernel's order and adds those |partial sums| exactly,
// which for terms of random sign (partial sums ~ sqrt(k)) is far tighter
// than n eps sum |terms| and catches a dropped row (n eps sum |terms| did
// not: it let lavapipe's 65535-iteration loop limit drop 4465 of 70000
// rows).
func rmsNormBackwardTol(x, w, dy []float32, a NormArgs) (tolX, tolW []float64) {
	wgSize := normWG(a.Dim)
	levels := float64((a.Dim+wgSize-1)/wgSize + bits.Len(uint(wgSize)) - 1 + 8)
	ra := ref.NormArgs{Rows: a.Rows, Dim: a.Dim, Eps: a.Eps, OnePlus: a.OnePlus}
	gain := func(j int) float64 {
		switch {
		case w == nil:
			return 1
		case ra.OnePlus:
			return 1 + float64(w[j])
		}
		return float64(w[j])
	}
	tolX, tolW = make([]float64, a.Rows*a.Dim), make([]float64, a.Dim)
	colAbs := make([]float64, a.Dim)   // sum |terms|
	partials := make([]float64, a.Dim) // the running sum of the current block
	blockSum := make([]float64, a.Dim) // the running sum of finished blocks
	runAbs := make([]float64, a.Dim)   // sum of |running sums|
	for r := range a.Rows {
		ss, sa := 0.0, 0.0
		for j := range a.Dim {
			v := float64(x[r*a.Dim+j])
			ss += v * v
			sa += math.Abs(gain(j) * float64(dy[r*a.Dim+j]) * v)
		}
		inv := 1 / math.Sqrt(ss/float64(a.Dim)+float64(a.Eps))
		for j := range a.Dim {
			i := r*a.Dim + j
			terms := inv * (math.Abs(gain(j)*float64(dy[i])) + math.Abs(float64(x[i]))*inv*inv*sa/float64(a.Dim))
			tolX[i] = 2 * levels * f32Eps * terms
			term := float64(dy[i]) * float64(x[i]) * inv
			colAbs[j] += math.Abs(term)
			partials[j] += term
			runAbs[j] += math.Abs(partials[j])
			if (r+1)%normRowBlock == 0 || r == a.Rows-1 {
				blockSum[j] += partials[j]
				runAbs[j] += math.Abs(blockSum[j])
				partials[j] = 0
			}
		}
	}
	for j := range tolW {
		tolW[j] = 2 * f32Eps * ((levels/2+4)*colAbs[j] + runAbs[j])
	}
	return tolX, tolW
}

// checkRMSNormBackward runs RMSNormBackward out of place, in place over dy
// and accumulating into a buffer that holds values already, and
// RMSNormWeightGrad overwriting and accumulating.
func checkRMSNormBackward(t *testing.T, seed uint64, a NormArgs, weight bool, xScale, wScale, dyScale float32) {
	t.Helper()
	x, w, _ := normInputs(seed, a.Rows, a.Dim, xScale, wScale)
	dy := randVec(seed+3, a.Rows*a.Dim, dyScale)
	if a.OnePlus && a.Dim > 1 {
		w[0] = -1 // a zero gain
	}
	if !weight {
		w = nil
	}
	ra := ref.NormArgs{Rows: a.Rows, Dim: a.Dim, Eps: a.Eps, OnePlus: a.OnePlus}
	want, wantW := ref.RMSNormBackward(x, w, dy, ra), ref.RMSNormWeightGrad(x, dy, ra)
	tolX, tolW := rmsNormBackwardTol(x, w, dy, a)
	n := a.Rows * a.Dim
	bx, bdy, dx := upload(t, "x", x), upload(t, "dy", dy), scratch(t, "dx", n)
	var bw *gpu.Buffer
	if w != nil {
		bw = upload(t, "w", w)
	}
	ba := NormBackwardArgs{NormArgs: a}
	run(t, "rmsnorm backward", func(c *gpu.Chain) error { return RMSNormBackward(c, bx, bw, bdy, dx, ba) })
	assertWithin(t, "rmsnorm backward", download(t, dx, n), want, tolX)

	pre := randVec(seed+4, n, 1)
	acc := upload(t, "dx acc", pre)
	accWant, accTol := make([]float32, n), make([]float64, n)
	for i := range pre {
		accWant[i] = pre[i] + want[i]
		accTol[i] = tolX[i] + 2*f32Eps*math.Abs(float64(accWant[i]))
	}
	ba.Accumulate = true
	run(t, "rmsnorm backward accumulate", func(c *gpu.Chain) error { return RMSNormBackward(c, bx, bw, bdy, acc, ba) })
	assertWithin(t, "rmsnorm backward accumulate", download(t, acc, n), accWant, accTol)

	rstd, dw := scratch(t, "scratch", RMSNormWeightGradScratch(a)), scratch(t, "dw", a.Dim)
	ba.Accumulate = false
	run(t, "rmsnorm weight grad", func(c *gpu.Chain) error { return RMSNormWeightGrad(c, bx, bdy, rstd, dw, ba) })
	assertWithin(t, "rmsnorm weight grad", download(t, dw, a.Dim), wantW, tolW)
	ba.Accumulate = true
	run(t, "rmsnorm weight grad accumulate", func(c *gpu.Chain) error { return RMSNormWeightGrad(c, bx, bdy, rstd, dw, ba) })
	twice, tolW2 := make([]float32, a.Dim), make([]float64, a.Dim)
	for j := range wantW {
		twice[j], tolW2[j] = 2*wantW[j], 2*tolW[j]+f32Eps*math.Abs(2*float64(wantW[j]))
	}
	assertWithin(t, "rmsnorm weight grad accumulate", download(t, dw, a.Dim), twice, tolW2)

	run(t, "rmsnorm backward in place", func(c *gpu.Chain) error { return RMSNormBackward(c, bx, bw, bdy, bdy, NormBackwardArgs{NormArgs: a}) })
	assertWithin(t, "rmsnorm backward in place", download(t, bdy, n), want, tolX)
}

func TestRMSNormBackwardMatchesReference(t *testing.T) {
	// The forward's shapes (norm_test.go), and a per-head QK-norm of 7
	// tokens x 3 heads of 72.
	shapes := append(append([]struct{ rows, dim int }(nil), normShapes...), struct{ rows, dim int }{21, 72})
	for _, s := range shapes {
		for _, wt := range normWeights {
			t.Run(fmt.Sprintf("%dx%d/%s", s.rows, s.dim, wt.name), func(t *testing.T) {
				a := NormArgs{Rows: s.rows, Dim: s.dim, Eps: 1e-6, OnePlus: wt.onePlus}
				checkRMSNormBackward(t, 50, a, wt.weight, 2, 1.5, 1)
			})
		}
	}
}

func TestRMSNormBackwardWideMagnitude(t *testing.T) {
	// The forward's wide cases: residual rows of +-3e4 at Gemma 2 2B's
	// width, a QK-norm of 256 with 1+w weights, weights of 40, rows whose
	// mean square eps dominates; upstream gradients from 1e-3 to 1e3.
	for _, tc := range []struct {
		name                    string
		a                       NormArgs
		weight                  bool
		xScale, wScale, dyScale float32
	}{
		{"residual 3e4", NormArgs{Rows: 3, Dim: 2304, Eps: 1e-6}, true, 3e4, 2, 1e3},
		{"qk-norm 256 1+w", NormArgs{Rows: 8, Dim: 256, Eps: 1e-6, OnePlus: true}, true, 3e4, 1, 1e-3},
		{"weights 40", NormArgs{Rows: 2, Dim: 1000, Eps: 1e-5}, true, 300, 40, 1},
		{"tiny rows", NormArgs{Rows: 2, Dim: 300, Eps: 1e-6}, false, 1e-4, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) { checkRMSNormBackward(t, 51, tc.a, tc.weight, tc.xScale, tc.wScale, tc.dyScale) })
	}
	// An all-zero row: r = 1/sqrt(eps) = 1000 and dx = 1000 gain dy, finite.
	t.Run("zero row", func(t *testing.T) {
		a := NormArgs{Rows: 2, Dim: 257, Eps: 1e-6}
		x := make([]float32, a.Rows*a.Dim)
		dy := randVec(52, len(x), 1)
		want := ref.RMSNormBackward(x, nil, dy, ref.NormArgs{Rows: a.Rows, Dim: a.Dim, Eps: a.Eps})
		tol, _ := rmsNormBackwardTol(x, nil, dy, a)
		bx, bdy, dx := upload(t, "x", x), upload(t, "dy", dy), scratch(t, "dx", len(x))
		run(t, "rmsnorm backward zero", func(c *gpu.Chain) error {
			return RMSNormBackward(c, bx, nil, bdy, dx, NormBackwardArgs{NormArgs: a})
		})
		assertWithin(t, "rmsnorm backward zero row", download(t, dx, len(x)), want, tol)
	})
}

func TestRMSNormBackwardGridWrap(t *testing.T) {
	// 70000 rows: past 65535 workgroups, so the grid wraps into y; the
	// weight gradient sums 70000 rows down each column, 18 blocks of 4096
	// (a single loop over them lost the rows past 65535 on lavapipe).
	checkRMSNormBackward(t, 53, NormArgs{Rows: 70000, Dim: 3, Eps: 1e-6}, true, 2, 1.5, 1)
}

func TestRMSNormBackwardReferenceMatchesFiniteDifferences(t *testing.T) {
	// Rows of 17 with x and w in +-2 (1+w spanning -1..3), eps 1e-2 so that
	// eps's share of the mean square matters. Perturbing one x moves every
	// output of its row, 17 f32 values of up to ~6: their rounding, ~1e-6,
	// over a step of 0.05 is 2e-5 of the derivative; the extrapolated
	// truncation, h^4 |f^(5)| / 30 with f^(5) of order 10 here, 2e-6.
	// 1e-4 of the largest |grad| bounds both with a margin; a formula
	// missing a term is off by order 1.
	const rows, dim = 3, 17
	x, w, _ := normInputs(54, rows, dim, 2, 2)
	dy := randVec(55, rows*dim, 1)
	for _, onePlus := range []bool{false, true} {
		a := ref.NormArgs{Rows: rows, Dim: dim, Eps: 1e-2, OnePlus: onePlus}
		name := fmt.Sprintf("one-plus %v", onePlus)
		checkFiniteDiff(t, "rmsnorm dx "+name, func(x []float32) []float32 { return ref.RMSNorm(x, w, a) },
			x, dy, ref.RMSNormBackward(x, w, dy, a), 0.05, 1e-4)
		checkFiniteDiff(t, "rmsnorm dw "+name, func(w []float32) []float32 { return ref.RMSNorm(x, w, a) },
			w, dy, ref.RMSNormWeightGrad(x, dy, a), 0.05, 1e-4)
	}
	a := ref.NormArgs{Rows: rows, Dim: dim, Eps: 1e-2}
	checkFiniteDiff(t, "rmsnorm dx no weight", func(x []float32) []float32 { return ref.RMSNorm(x, nil, a) },
		x, dy, ref.RMSNormBackward(x, nil, dy, a), 0.05, 1e-4)
}

func TestRMSNormBackwardRejectsBadShapes(t *testing.T) {
	x, w, dy, short := scratch(t, "x", 40), scratch(t, "w", 8), scratch(t, "dy", 40), scratch(t, "short", 7)
	ok := NormBackwardArgs{NormArgs: NormArgs{Rows: 5, Dim: 8, Eps: 1e-6}}
	rstd, dw := scratch(t, "scratch", RMSNormWeightGradScratch(ok.NormArgs)), scratch(t, "dw", 8)
	c, err := dev.NewChain("bad rmsnorm backward")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	with := func(f func(a *NormBackwardArgs)) NormBackwardArgs { a := ok; f(&a); return a }
	for _, tc := range []struct {
		what string
		err  error
	}{
		{"rows 0", RMSNormBackward(c, x, w, dy, x, with(func(a *NormBackwardArgs) { a.Rows = 0 }))},
		{"x too short", RMSNormBackward(c, x, w, dy, x, with(func(a *NormBackwardArgs) { a.Rows = 6 }))},
		{"short dy", RMSNormBackward(c, x, w, short, x, ok)},
		{"short dx", RMSNormBackward(c, x, w, dy, short, ok)},
		{"short weight", RMSNormBackward(c, x, short, dy, x, ok)},
		{"dx is the weight", RMSNormBackward(c, x, w, dy, w, ok)},
		{"eps NaN", RMSNormBackward(c, x, w, dy, x, with(func(a *NormBackwardArgs) { a.Eps = float32(math.NaN()) }))},
		{"one-plus without weight", RMSNormBackward(c, x, nil, dy, x, with(func(a *NormBackwardArgs) { a.OnePlus = true }))},
		{"nil dy", RMSNormBackward(c, x, w, nil, x, ok)},
		{"weight grad nil rstd", RMSNormWeightGrad(c, x, dy, nil, dw, ok)},
		{"weight grad scratch too short", RMSNormWeightGrad(c, x, dy, scratch(t, "s12", 12), dw, ok)},
		{"weight grad short dw", RMSNormWeightGrad(c, x, dy, rstd, short, ok)},
		{"weight grad dw is dy", RMSNormWeightGrad(c, x, dy, rstd, dy, ok)},
		{"weight grad rstd is x", RMSNormWeightGrad(c, x, dy, x, dw, ok)},
	} {
		if tc.err == nil {
			t.Errorf("%s: accepted", tc.what)
		}
	}
	if c.Err() != nil {
		t.Errorf("a rejected shape reached the chain: %v", c.Err())
	}
}
