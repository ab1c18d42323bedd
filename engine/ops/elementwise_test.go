package ops

import (
	"fmt"
	"math"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// elementwiseSizes: 1 element, one short of a workgroup (256), one past it,
// a few workgroups with a ragged tail, and a few hundred workgroups.
var elementwiseSizes = []int{1, 255, 257, 1000, 70001}

func TestAddMatchesReference(t *testing.T) {
	for _, n := range elementwiseSizes {
		for _, scale := range []float32{1, 3e4} { // unit and production residual magnitudes
			x, y := randVec(1, n, scale), randVec(2, n, scale)
			bx, by, out := upload(t, "x", x), upload(t, "y", y), scratch(t, "out", n)
			run(t, "add", func(c *gpu.Chain) error { return Add(c, bx, by, out, n) })
			// One f32 addition rounds identically on GPU and CPU: exact.
			assertClose(t, "add", download(t, out, n), ref.Add(x, y), 0, 0)
		}
	}
}

func TestAddInPlaceMatchesReference(t *testing.T) {
	for _, n := range elementwiseSizes {
		for _, scale := range []float32{1, 3e4} {
			x, y := randVec(3, n, scale), randVec(4, n, scale)
			bx, by := upload(t, "x", x), upload(t, "y", y)
			// Two accumulations in one chain: the second must see the first.
			run(t, "add in place", func(c *gpu.Chain) error {
				if err := AddInPlace(c, bx, by, n); err != nil {
					return err
				}
				return AddInPlace(c, bx, by, n)
			})
			want := append([]float32(nil), x...)
			ref.AddInPlace(want, y)
			ref.AddInPlace(want, y)
			assertClose(t, "add in place", download(t, bx, n), want, 0, 0) // f32 additions: exact
		}
	}
}

// attnScale is 1/sqrt(128), the attention scale of a 128-wide head: an
// inexact f32 factor.
var attnScale = float32(1 / math.Sqrt(128))

// unaryOp is an element-wise op with one input, run out of place and in place.
type unaryOp struct {
	name string
	gpu  func(c *gpu.Chain, x, y *gpu.Buffer, n int) error
	ref  func(x []float32) []float32
	// atol and rtol bound |gpu - ref| <= atol + rtol*|ref|; see unaryOps.
	atol, rtol float64
}

// unaryOps are the kernels under test, each with the tolerance it earns:
//   - scale is one f32 multiply on both sides: exact; clamp is a max and a
//     min: exact.
//   - softcap rounds 1/cap and x/cap (half an ulp each), then its tanh and
//     the product with cap. The tanh's e^-2|z| branch at most doubles exp's
//     error in the 1 - e cancellation: 1e-6 (measured 3.9e-7). Its output is
//     never tinier than x/cap, so no atol is needed. TestSoftcapTaylorBranch
//     holds the small-argument branch to a tighter bound.
//   - silu and gelu: x / (1 + e^-v) is as accurate as f32's exp, whose error
//     grows with its argument (about |v| ulps when computed as 2^(v log2 e)).
//     Up to |v| ~ 30, past which the output is below |x| e^-30 < 1e-10 and
//     atol 1e-12 takes over, that is 30 * 2^-24 = 1.8e-6 per ulp of exp, so
//     1e-5 allows a few (measured on lavapipe: 1.7e-6 and 3.1e-6). The atol
//     also absorbs the kernel's clamp of e^-v at e^88, which leaves
//     |x| * 6e-39 in the deep negative tail instead of the true, smaller value.
var unaryOps = []unaryOp{
	{"scale", func(c *gpu.Chain, x, y *gpu.Buffer, n int) error { return Scale(c, x, y, n, attnScale) },
		func(x []float32) []float32 { return ref.Scale(x, attnScale) }, 0, 0},
	{"softcap30", func(c *gpu.Chain, x, y *gpu.Buffer, n int) error { return Softcap(c, x, y, n, 30) },
		func(x []float32) []float32 { return ref.Softcap(x, 30) }, 0, 1e-6},
	{"softcap0.5", func(c *gpu.Chain, x, y *gpu.Buffer, n int) error { return Softcap(c, x, y, n, 0.5) },
		func(x []float32) []float32 { return ref.Softcap(x, 0.5) }, 0, 1e-6},
	{"clamp", func(c *gpu.Chain, x, y *gpu.Buffer, n int) error { return Clamp(c, x, y, n, -1.5, 2.25) },
		func(x []float32) []float32 { return ref.Clamp(x, -1.5, 2.25) }, 0, 0},
	{"clamp unbounded", func(c *gpu.Chain, x, y *gpu.Buffer, n int) error {
		return Clamp(c, x, y, n, -math.MaxFloat32, math.MaxFloat32)
	},
		func(x []float32) []float32 { return ref.Clamp(x, -math.MaxFloat32, math.MaxFloat32) }, 0, 0},
	{"silu", SiLU, ref.SiLU, 1e-12, 1e-5},
	{"gelu", GELU, ref.GELU, 1e-12, 1e-5},
}

// checkUnary runs op on x out of place, then in place, against its reference.
func checkUnary(t *testing.T, op unaryOp, x []float32) {
	t.Helper()
	n := len(x)
	want := op.ref(x)
	bx, y := upload(t, "x", x), scratch(t, "y", n)
	run(t, op.name, func(c *gpu.Chain) error { return op.gpu(c, bx, y, n) })
	assertClose(t, op.name, download(t, y, n), want, op.atol, op.rtol)
	run(t, op.name+" in place", func(c *gpu.Chain) error { return op.gpu(c, bx, bx, n) })
	assertClose(t, op.name+" in place", download(t, bx, n), want, op.atol, op.rtol)
}

func TestUnaryMatchesReference(t *testing.T) {
	for _, op := range unaryOps {
		for _, n := range elementwiseSizes {
			t.Run(fmt.Sprintf("%s/n=%d", op.name, n), func(t *testing.T) {
				checkUnary(t, op, randVec(5, n, 4)) // the activations' curved part
			})
		}
	}
}

func TestShiftScaleMatchesReference(t *testing.T) {
	// One add and one multiply in f32 on both sides, in the same order:
	// exact. Ragged shapes: a row of 1, a row length that is not a
	// multiple of the workgroup, and many rows.
	for _, s := range [][2]int{{1, 1}, {3, 257}, {300, 64}} {
		rows, n := s[0], s[1]
		t.Run(fmt.Sprintf("%dx%d", rows, n), func(t *testing.T) {
			x, shift, scale := randVec(6, rows*n, 30), randVec(7, n, 2), randVec(8, n, 3)
			bx, bss, y := upload(t, "x", x), upload(t, "shift scale", append(append([]float32(nil), shift...), scale...)), scratch(t, "y", rows*n)
			want := ref.ShiftScale(x, shift, scale)
			run(t, "shift_scale", func(c *gpu.Chain) error { return ShiftScale(c, bx, bss, y, rows, n) })
			assertClose(t, "shift_scale", download(t, y, rows*n), want, 0, 0)
			run(t, "shift_scale in place", func(c *gpu.Chain) error { return ShiftScale(c, bx, bss, bx, rows, n) })
			assertClose(t, "shift_scale in place", download(t, bx, rows*n), want, 0, 0)
		})
	}
}

func TestSoftcapTaylorBranch(t *testing.T) {
	// Below |x/cap| = 0.25 the kernel's tanh is an odd Taylor polynomial:
	// only + and *, which WGSL rounds correctly on every backend, so it earns
	// 2.5e-7 (4 ulps; measured 1.2e-7). The sweep reaches 0.25, where the
	// polynomial's last term is worth 6 ulps, so a truncated one shows.
	n := 1001
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i-n/2) / float32(n/2) * 0.2499 // -0.2499 .. 0.2499
	}
	bx, y := upload(t, "x", x), scratch(t, "y", n)
	run(t, "softcap taylor", func(c *gpu.Chain) error { return Softcap(c, bx, y, n, 1) })
	assertClose(t, "softcap taylor", download(t, y, n), ref.Softcap(x, 1), 0, 2.5e-7)
}

// wideValues spans the magnitudes production models hit: Gemma's gate values
// of +-40 (where the seed's missing tanh clamp produced NaN), residual-stream
// values of +-3e4, +-1e4 logits far past any softcap, exact zeros and a
// sweep through the small-argument branch of the tanh.
func wideValues() []float32 {
	v := []float32{0, -0, 40, -40, 1e4, -1e4, 3e4, -3e4, 44, -44, 89, -89, 1e-30, -1e-30, 0.2499, 0.2501, -0.2501}
	for i := -300; i <= 300; i++ {
		v = append(v, float32(i)*0.15) // -45 .. 45 in steps of 0.15
	}
	return append(v, randVec(6, 999, 3e4)...)
}

func TestElementwiseWideMagnitude(t *testing.T) {
	x := wideValues()
	for _, op := range unaryOps {
		t.Run(op.name, func(t *testing.T) { checkUnary(t, op, x) })
	}
	gate, up := x, randVec(7, len(x), 10)
	for _, g := range gluOps {
		t.Run(g.name, func(t *testing.T) { checkGLU(t, g, gate, up) })
	}
}

// gluOp is a gated linear unit, run on separate and on fused gate and up.
type gluOp struct {
	name     string
	gpu      func(c *gpu.Chain, gate, up, out *gpu.Buffer, n int) error
	fused    func(c *gpu.Chain, gateUp, out *gpu.Buffer, rows, ff int) error
	ref      func(gate, up []float32) []float32
	refFused func(gateUp []float32, rows, ff int) []float32
}

var gluOps = []gluOp{
	{"swiglu", SwiGLU, SwiGLUFused, ref.SwiGLU, ref.SwiGLUFused},
	{"geglu", GeGLU, GeGLUFused, ref.GeGLU, ref.GeGLUFused},
	{"swiglu_oai", SwiGLUOAI, SwiGLUOAIFused, ref.SwiGLUOAI, ref.SwiGLUOAIFused},
}

// gluATol and gluRTol are the activations' tolerances (see unaryOps) with
// the rounding of the product with up (|up| <= 10 here).
const gluATol, gluRTol = 1e-11, 1.1e-5

// checkGLU runs g out of place, in place into gate and into up.
func checkGLU(t *testing.T, g gluOp, gate, up []float32) {
	t.Helper()
	n := len(gate)
	want := g.ref(gate, up)
	bg, bu, out := upload(t, "gate", gate), upload(t, "up", up), scratch(t, "out", n)
	run(t, g.name, func(c *gpu.Chain) error { return g.gpu(c, bg, bu, out, n) })
	assertClose(t, g.name, download(t, out, n), want, gluATol, gluRTol)
	run(t, g.name+" into up", func(c *gpu.Chain) error { return g.gpu(c, bg, bu, bu, n) })
	assertClose(t, g.name+" into up", download(t, bu, n), want, gluATol, gluRTol)
	run(t, g.name+" into gate", func(c *gpu.Chain) error { return g.gpu(c, bg, upload(t, "up", up), bg, n) })
	assertClose(t, g.name+" into gate", download(t, bg, n), want, gluATol, gluRTol)
}

func TestGLUMatchesReference(t *testing.T) {
	for _, g := range gluOps {
		for _, n := range elementwiseSizes {
			t.Run(fmt.Sprintf("%s/n=%d", g.name, n), func(t *testing.T) {
				checkGLU(t, g, randVec(8, n, 4), randVec(9, n, 2))
			})
		}
	}
}

func TestGLUFusedMatchesReference(t *testing.T) {
	// ff not a multiple of the workgroup, rows x ff crossing workgroups
	// mid-row, and Phi-3 mini's real ff of 8192 for two tokens.
	shapes := []struct{ rows, ff int }{{1, 1}, {1, 255}, {3, 257}, {7, 100}, {2, 8192}}
	for _, g := range gluOps {
		for _, s := range shapes {
			for _, scale := range []float32{4, 40} { // curved part; gate values out to Gemma's +-40
				t.Run(fmt.Sprintf("%s/%dx%d/scale=%v", g.name, s.rows, s.ff, scale), func(t *testing.T) {
					gu := randVec(10, s.rows*2*s.ff, scale)
					want := g.refFused(gu, s.rows, s.ff)
					bgu, out := upload(t, "gate_up", gu), scratch(t, "out", s.rows*s.ff)
					run(t, g.name+" fused", func(c *gpu.Chain) error { return g.fused(c, bgu, out, s.rows, s.ff) })
					assertClose(t, g.name+" fused", download(t, out, s.rows*s.ff), want, gluATol, gluRTol)
				})
			}
		}
	}
}

func TestElementwiseGridWrap(t *testing.T) {
	// Past 65535 workgroups gpu.Grid wraps the grid into y and the kernels
	// must rebuild the linear index and bounds-check the overshoot of x*y.
	// At the dispatchers' 256 invocations that takes 16.8M elements (8 s on
	// lavapipe), so the test compiles the kernels with a workgroup of one
	// and wraps at 65536 elements instead: the same index code.
	n := 70001
	x, y := randVec(11, n, 4), randVec(12, n, 4)
	bx, by, out := upload(t, "x", x), upload(t, "y", y), scratch(t, "out", n)
	grid := gpu.Grid(n, 1)
	if grid[1] < 2 {
		t.Fatalf("grid %v does not wrap", grid)
	}
	for _, tc := range []struct {
		entry string
		act   int
		want  []float32
	}{
		{"add", 0, ref.Add(x, y)},
		{"glu", actSiLU, ref.SwiGLU(x, y)},
	} {
		run(t, tc.entry+" wrap", func(c *gpu.Chain) error {
			return dispatch(c, gpu.Spec("elementwise", tc.entry, "WG", 1, "ACT", tc.act), elementwiseParams{N: uint32(n)}, grid, bx, by, out)
		})
		assertClose(t, tc.entry+" wrap", download(t, out, n), tc.want, gluATol, gluRTol)
	}
}

func TestElementwiseRejectsBadShapes(t *testing.T) {
	b10, b9 := scratch(t, "ten", 10), scratch(t, "nine", 9)
	b20, b19 := scratch(t, "twenty", 20), scratch(t, "nineteen", 19)
	c, err := dev.NewChain("bad elementwise")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	nan := float32(math.NaN())
	for _, tc := range []struct {
		what string
		err  error
	}{
		{"add short y", Add(c, b10, b9, b10, 10)},
		{"add short out", Add(c, b10, b10, b9, 10)},
		{"add n=0", Add(c, b10, b10, b10, 0)},
		{"add in place short x", AddInPlace(c, b9, b10, 10)},
		{"scale short y", Scale(c, b10, b9, 10, 2)},
		{"scale negative n", Scale(c, b10, b10, -1, 2)},
		{"clamp short y", Clamp(c, b10, b9, 10, -1, 1)},
		{"clamp reversed bounds", Clamp(c, b10, b10, 10, 1, -1)},
		{"clamp NaN bound", Clamp(c, b10, b10, 10, nan, 1)},
		{"shift_scale short shifts", ShiftScale(c, b20, b9, b20, 4, 5)},
		{"shift_scale short y", ShiftScale(c, b20, b10, b19, 4, 5)},
		{"shift_scale no rows", ShiftScale(c, b20, b10, b20, 0, 5)},
		{"softcap short x", Softcap(c, b9, b10, 10, 30)},
		{"softcap cap 0", Softcap(c, b10, b10, 10, 0)},
		{"softcap cap NaN", Softcap(c, b10, b10, 10, nan)},
		{"softcap cap Inf", Softcap(c, b10, b10, 10, float32(math.Inf(1)))},
		{"silu short y", SiLU(c, b10, b9, 10)},
		{"gelu nil x", GELU(c, nil, b10, 10)},
		{"swiglu short up", SwiGLU(c, b10, b9, b10, 10)},
		{"geglu short gate", GeGLU(c, b9, b10, b10, 10)},
		{"swiglu fused gate_up of rows x ff", SwiGLUFused(c, b10, b20, 2, 5)},
		{"geglu fused gate_up one short", GeGLUFused(c, b19, b10, 2, 5)},
		{"geglu fused short out", GeGLUFused(c, b20, b9, 2, 5)},
		{"swiglu fused out aliases gate_up", SwiGLUFused(c, b20, b20, 2, 5)},
		{"swiglu fused ff 0", SwiGLUFused(c, b20, b10, 2, 0)},
	} {
		if tc.err == nil {
			t.Errorf("%s: accepted", tc.what)
		}
	}
	if c.Err() != nil {
		t.Errorf("a rejected shape reached the chain: %v", c.Err())
	}
}
