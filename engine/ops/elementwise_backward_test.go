package ops

import (
	"fmt"
	"math"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// gluBackwardTol is the tolerance of the GLU backward kernels per element,
// in units of f32Eps times the magnitude of the terms that make the result
// (|dy up| (|S| + |x S(1-S) z'|) for dGate, |dy x S| for dUp, where S is the
// sigmoid of z = x (SiLU) or z = 2u (GELU)). Two parts:
//   - a fixed 16: the dozen roundings of the sigmoid, the product and the
//     sum, with a factor of about 1.5 for margin;
//   - 4|z|: WGSL allows exp 3 + 2|z| ulps, and GELU's z = 2u itself carries
//     a few roundings (x^3, the products) that exp turns into a relative
//     error of |z| times theirs;
//   - a floor of 2^-100 |dy up|: WGSL lets exp lose its accuracy as the
//     result nears the subnormal range and lets implementations flush
//     subnormals (lavapipe returns 0 for a GELU gradient of 4e-35 at gate
//     -7.7). Nothing in f32 training sees a gradient that far below the
//     others.
//
// Measured on lavapipe: see the logged worst fraction.
func gluBackwardTol(act int, gate, up, dy []float32) (tolG, tolU []float64) {
	tolG, tolU = make([]float64, len(gate)), make([]float64, len(gate))
	c := math.Sqrt(2 / math.Pi)
	for i, g32 := range gate {
		x := float64(g32)
		z, dz := x, 1.0
		u := float64(up[i])
		switch act {
		case actGELU:
			z, dz = 2*c*(x+0.044715*x*x*x), 2*c*(1+3*0.044715*x*x)
		case actOAI:
			// gpt-oss's unit: the clamped gate through sigmoid(1.702 x),
			// times the clamped up plus 1 in place of up.
			x = math.Min(x, 7)
			z, dz = 1.702*x, 1.702
			u = math.Max(-7, math.Min(u, 7)) + 1
		}
		e := math.Exp(-math.Abs(z))
		s := 1 / (1 + e)
		if z < 0 {
			s = e / (1 + e)
		}
		ds := e / ((1 + e) * (1 + e))
		k := (16 + 4*math.Abs(z)) * f32Eps
		d := math.Abs(float64(dy[i]))
		floor := 0x1p-100 * d * math.Abs(u)
		tolG[i] = k*d*math.Abs(u)*(s+math.Abs(x*ds*dz)) + floor
		tolU[i] = k*d*math.Abs(x*s) + floor
	}
	return tolG, tolU
}

type gluBackwardCase struct {
	name              string
	act               int
	ref               func(gate, up, dy []float32) (dGate, dUp []float32)
	refFused          func(gateUp, dy []float32, rows, ff int) []float32
	fwd               func(gate, up []float32) []float32
	split             func(c *gpu.Chain, gate, up, dy, dGate, dUp *gpu.Buffer, n int) error
	fused             func(c *gpu.Chain, gateUp, dy, dGateUp *gpu.Buffer, rows, ff int) error
	gateScale, upWide float32
}

var gluBackwardCases = []gluBackwardCase{
	{name: "swiglu", act: actSiLU, ref: ref.SwiGLUBackward, refFused: ref.SwiGLUFusedBackward, fwd: ref.SwiGLU, split: SwiGLUBackward, fused: SwiGLUFusedBackward},
	{name: "geglu", act: actGELU, ref: ref.GeGLUBackward, refFused: ref.GeGLUFusedBackward, fwd: ref.GeGLU, split: GeGLUBackward, fused: GeGLUFusedBackward},
	{name: "swiglu_oai", act: actOAI, ref: ref.SwiGLUOAIBackward, refFused: ref.SwiGLUOAIFusedBackward, fwd: ref.SwiGLUOAI, split: SwiGLUOAIBackward, fused: SwiGLUOAIFusedBackward},
}

// checkGLUBackward runs the split kernel out of place and in place (dGate
// over gate, dUp over up) on rows x ff values of the given magnitudes, and
// the fused kernel out of place and in place on the same values laid out as
// rows of [gate | up].
func checkGLUBackward(t *testing.T, tc gluBackwardCase, seed uint64, rows, ff int, gScale, uScale, dScale float32) {
	t.Helper()
	n := rows * ff
	gate, up, dy := randVec(seed, n, gScale), randVec(seed+1, n, uScale), randVec(seed+2, n, dScale)
	if n > 2 {
		gate[0], gate[1] = 0, -gScale // the origin and the negative extreme
	}
	wantG, wantU := tc.ref(gate, up, dy)
	tolG, tolU := gluBackwardTol(tc.act, gate, up, dy)

	bg, bu, bd := upload(t, "gate", gate), upload(t, "up", up), upload(t, "dy", dy)
	dg, du := scratch(t, "d_gate", n), scratch(t, "d_up", n)
	run(t, tc.name+" backward", func(c *gpu.Chain) error { return tc.split(c, bg, bu, bd, dg, du, n) })
	assertWithin(t, tc.name+" d_gate", download(t, dg, n), wantG, tolG)
	assertWithin(t, tc.name+" d_up", download(t, du, n), wantU, tolU)
	run(t, tc.name+" backward in place", func(c *gpu.Chain) error { return tc.split(c, bg, bu, bd, bg, bu, n) })
	assertWithin(t, tc.name+" d_gate in place", download(t, bg, n), wantG, tolG)
	assertWithin(t, tc.name+" d_up in place", download(t, bu, n), wantU, tolU)

	gateUp := make([]float32, 0, 2*n)
	fusedTol := make([]float64, 0, 2*n)
	for r := range rows {
		gateUp = append(append(gateUp, gate[r*ff:(r+1)*ff]...), up[r*ff:(r+1)*ff]...)
		fusedTol = append(append(fusedTol, tolG[r*ff:(r+1)*ff]...), tolU[r*ff:(r+1)*ff]...)
	}
	want := tc.refFused(gateUp, dy, rows, ff)
	bgu, out := upload(t, "gate_up", gateUp), scratch(t, "d_gate_up", 2*n)
	run(t, tc.name+" fused backward", func(c *gpu.Chain) error { return tc.fused(c, bgu, bd, out, rows, ff) })
	assertWithin(t, tc.name+" fused", download(t, out, 2*n), want, fusedTol)
	run(t, tc.name+" fused backward in place", func(c *gpu.Chain) error { return tc.fused(c, bgu, bd, bgu, rows, ff) })
	assertWithin(t, tc.name+" fused in place", download(t, bgu, 2*n), want, fusedTol)
}

func TestGLUBackwardMatchesReference(t *testing.T) {
	// rows x ff: one float, workgroup 256 -1 and +1, ragged rows.
	for _, tc := range gluBackwardCases {
		for _, s := range []struct{ rows, ff int }{{1, 1}, {1, 255}, {1, 257}, {3, 37}, {7, 100}} {
			t.Run(fmt.Sprintf("%s/%dx%d", tc.name, s.rows, s.ff), func(t *testing.T) {
				checkGLUBackward(t, tc, 10, s.rows, s.ff, 4, 2, 1)
			})
		}
	}
}

func TestGLUBackwardWideMagnitude(t *testing.T) {
	// Gates of +-80: past both saturation tails of the sigmoid (and of
	// GELU's 2u, which reaches 1e4), the regime where the seed's tanh-clamp
	// bug surfaced at gate values of 40; ups of +-30 and dys of +-5.
	for _, tc := range gluBackwardCases {
		t.Run(tc.name, func(t *testing.T) { checkGLUBackward(t, tc, 20, 4, 300, 80, 30, 5) })
	}
}

func TestGLUBackwardReferenceMatchesFiniteDifferences(t *testing.T) {
	// Gates within +-5, where both activations curve, ups within +-2.
	// Each perturbation changes one f32 output, of up to 10: its rounding
	// (6e-7) divided by the step, 0.05, is 1.2e-5 at most; the extrapolated
	// truncation, h^4 f^(5) / 30 with f^(5) of order 1, is 2e-7. 3e-5 of
	// the largest |grad| bounds both.
	const n = 64
	gate, up, dy := randVec(30, n, 5), randVec(31, n, 2), randVec(32, n, 1)
	for _, tc := range gluBackwardCases {
		dg, du := tc.ref(gate, up, dy)
		checkFiniteDiff(t, tc.name+" d_gate", func(g []float32) []float32 { return tc.fwd(g, up) }, gate, dy, dg, 0.05, 3e-5)
		checkFiniteDiff(t, tc.name+" d_up", func(u []float32) []float32 { return tc.fwd(gate, u) }, up, dy, du, 0.05, 3e-5)
	}
}

// softcapBackwardTol: dx = dy (1 - t^2), t = y * (1/c). 1/c, t and t^2 are
// rounded (3 eps relative on t^2 <= 1: 3 eps absolute on 1 - t^2) and the
// final product 1 eps: 4 eps |dy|, doubled for margin. Absolute in |dy| not
// relative in dx: in the saturated tail 1 - t^2 is a difference of nearly
// equal numbers, and the forward's y already carries that much rounding.
const softcapBackwardTol = 8 * f32Eps

func checkSoftcapBackward(t *testing.T, seed uint64, n int, xScale, limit float32) {
	t.Helper()
	x, dy := randVec(seed, n, xScale), randVec(seed+1, n, 3)
	y := ref.Softcap(x, limit)
	want := ref.SoftcapBackward(y, dy, limit)
	tol := make([]float64, n)
	for i := range tol {
		tol[i] = softcapBackwardTol * math.Abs(float64(dy[i]))
	}
	by, bd, dx := upload(t, "y", y), upload(t, "dy", dy), scratch(t, "dx", n)
	run(t, "softcap backward", func(c *gpu.Chain) error { return SoftcapBackward(c, by, bd, dx, n, limit) })
	assertWithin(t, "softcap backward", download(t, dx, n), want, tol)
	run(t, "softcap backward in place", func(c *gpu.Chain) error { return SoftcapBackward(c, by, bd, bd, n, limit) })
	assertWithin(t, "softcap backward in place", download(t, bd, n), want, tol)
}

func TestSoftcapBackwardMatchesReference(t *testing.T) {
	for _, n := range []int{1, 255, 257, 1000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) { checkSoftcapBackward(t, 40, n, 60, 30) })
	}
	// Gemma 2's final-logit cap of 30 and attention cap of 50 against
	// inputs of +-1e4: almost every element saturated, y within an ulp of
	// the cap (and sometimes past it by rounding, which the clamp handles).
	t.Run("wide magnitude", func(t *testing.T) {
		checkSoftcapBackward(t, 41, 3000, 1e4, 30)
		checkSoftcapBackward(t, 42, 3000, 1e4, 50)
	})
}

func TestSoftcapBackwardReferenceMatchesFiniteDifferences(t *testing.T) {
	// A cap of 5 against inputs of +-12: 1 - t^2 spans 1 to 1e-4. The
	// outputs reach 5, so their f32 rounding is 3e-7, which a step of 0.1
	// turns into 3e-6 of the derivative; the extrapolated truncation,
	// h^4 f^(5) / 30 with f^(5) ~ 16/c^4, is 1e-7. The gradient is computed
	// from the f32 y, whose rounding moves 1 - t^2 by up to 1.2e-7. 3e-5 of
	// the scale bounds the sum with a margin.
	const n, limit = 64, 5
	x, dy := randVec(43, n, 12), randVec(44, n, 1)
	grad := ref.SoftcapBackward(ref.Softcap(x, limit), dy, limit)
	checkFiniteDiff(t, "softcap", func(x []float32) []float32 { return ref.Softcap(x, limit) }, x, dy, grad, 0.1, 3e-5)
}

func TestElementwiseBackwardRejectsBadShapes(t *testing.T) {
	a, b, d, short := scratch(t, "a", 40), scratch(t, "b", 40), scratch(t, "d", 40), scratch(t, "short", 7)
	c, err := dev.NewChain("bad elementwise backward")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	for _, tc := range []struct {
		what string
		err  error
	}{
		{"glu n 0", SwiGLUBackward(c, a, b, d, a, b, 0)},
		{"glu short up", GeGLUBackward(c, a, short, d, a, b, 8)},
		{"glu short d_up", SwiGLUBackward(c, a, b, d, a, short, 8)},
		{"glu nil dy", SwiGLUBackward(c, a, b, nil, a, b, 8)},
		{"glu d_gate is d_up", SwiGLUBackward(c, a, b, d, a, a, 8)},
		{"fused rows 0", SwiGLUFusedBackward(c, a, d, b, 0, 4)},
		{"fused gate_up short", GeGLUFusedBackward(c, a, d, b, 3, 8)},
		{"fused dy short", GeGLUFusedBackward(c, a, short, b, 2, 8)},
		{"fused out is dy", SwiGLUFusedBackward(c, a, d, d, 2, 8)},
		{"softcap cap 0", SoftcapBackward(c, a, d, b, 8, 0)},
		{"softcap cap inf", SoftcapBackward(c, a, d, b, 8, float32(math.Inf(1)))},
		{"softcap short dx", SoftcapBackward(c, a, d, short, 8, 30)},
	} {
		if tc.err == nil {
			t.Errorf("%s: accepted", tc.what)
		}
	}
	if c.Err() != nil {
		t.Errorf("a rejected shape reached the chain: %v", c.Err())
	}
}

func TestElementwiseBackwardGridWrap(t *testing.T) {
	// 70000 elements at a workgroup of one wrap the grid into y (at the
	// dispatchers' 256 it would take 16.8M); the index code is the same.
	const n = 70000
	grid := gpu.Grid(n, 1)
	if grid[1] < 2 {
		t.Fatalf("grid %v does not wrap", grid)
	}
	gate, up, dy := randVec(45, n, 4), randVec(46, n, 2), randVec(47, n, 1)
	wantG, wantU := ref.GeGLUBackward(gate, up, dy)
	tolG, tolU := gluBackwardTol(actGELU, gate, up, dy)
	bg, bu, bd := upload(t, "gate", gate), upload(t, "up", up), upload(t, "dy", dy)
	dg, du := scratch(t, "d_gate", n), scratch(t, "d_up", n)
	run(t, "geglu backward wrap", func(c *gpu.Chain) error {
		spec := gpu.Spec("elementwise_backward", "glu_backward", "WG", 1, "ACT", actGELU)
		return dispatch(c, spec, elementwiseBackwardParams{N: n}, grid, bg, bu, bd, dg, du)
	})
	assertWithin(t, "geglu backward wrap d_gate", download(t, dg, n), wantG, tolG)
	assertWithin(t, "geglu backward wrap d_up", download(t, du, n), wantU, tolU)
}
