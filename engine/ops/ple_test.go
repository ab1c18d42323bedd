package ops

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// Gemma 4's PLE scales: hidden_size^-0.5 for E2B (1536) and 2^-0.5.
var (
	pleProjScale  = float32(1 / math.Sqrt(1536))
	pleInputScale = float32(1 / math.Sqrt2)
)

// Tolerances of PLEGate against its float64 reference, per element, as
// |got - want| <= pleGELURTol*|want| + pleNormRTol*|gelu(g)|*InputScale*(|pn| + |tok|) + pleATol:
//   - The normalised projection pn carries RMSNorm's relative error
//     (rmsNormRTol, 1e-6, measured 2.3e-7) plus half an ulp from rounding
//     proj * ProjScale; adding tok and multiplying by InputScale round half
//     an ulp each of values within |pn| + |tok|. pn + tok may cancel, so
//     that error is absolute, in units of |pn| + |tok|, not relative to the
//     output: 1.5e-6 covers 1e-6 + 3 * 6e-8 with room to spare.
//   - gelu is glu_common's, within 1e-5 relative (see unaryOps: f32 exp's
//     error grows with its argument), and the product with ple rounds once
//     more: gluRTol's 1.1e-5.
//   - The atol covers gelu's clamp at e^88 in the deep negative tail, which
//     leaves |g| * 6e-39 instead of the true, smaller value.
//
// Measured on lavapipe: at most 12% of the tolerance (the spike case), errors
// within 1e-6 of |want| + the norm term's scale.
const (
	pleNormRTol = 1.5e-6
	pleGELURTol = 1.1e-5
	pleATol     = 1e-11
)

// pleInputs are the host operands of one PLE gate.
type pleInputs struct {
	g, proj, tok, w []float32
}

// newPLEInputs draws g, proj and tok uniform within +-gScale, +-projScale
// and +-tokScale, and the weight within +-wScale.
func newPLEInputs(seed uint64, a PLEArgs, gScale, projScale, tokScale, wScale float32) pleInputs {
	n := a.Tokens * a.Layers * a.Dim
	return pleInputs{
		g:    randVec(seed, a.Tokens*a.Dim, gScale),
		proj: randVec(seed+1, n, projScale),
		tok:  randVec(seed+2, n, tokScale),
		w:    randVec(seed+3, a.Dim, wScale),
	}
}

// refPLEArgs converts the args; the conversion stops compiling if the two
// structs drift apart.
func refPLEArgs(a PLEArgs) ref.PLEArgs { return ref.PLEArgs(a) }

// pleSlice is the layer's [Tokens][Dim] slice of a [Tokens][Layers*Dim]
// buffer.
func pleSlice(v []float32, a PLEArgs) []float32 {
	out := make([]float32, 0, a.Tokens*a.Dim)
	for t := range a.Tokens {
		src := (t*a.Layers + a.Layer) * a.Dim
		out = append(out, v[src:src+a.Dim]...)
	}
	return out
}

// checkPLEClose holds got to want within the tolerances above, the error
// scales taken from the float64 norm and gelu of the same inputs.
func checkPLEClose(t *testing.T, what string, got, want []float32, in pleInputs, a PLEArgs) {
	t.Helper()
	pn := ref.RMSNorm(ref.Scale(pleSlice(in.proj, a), a.ProjScale), in.w, ref.NormArgs{Rows: a.Tokens, Dim: a.Dim, Eps: a.Eps})
	tok := pleSlice(in.tok, a)
	act := ref.GELU(in.g)
	for i := range want {
		g, w := float64(got[i]), float64(want[i])
		scale := math.Abs(float64(act[i])) * float64(a.InputScale) * (math.Abs(float64(pn[i])) + math.Abs(float64(tok[i])))
		tol := pleGELURTol*math.Abs(w) + pleNormRTol*scale + pleATol
		if diff := math.Abs(g - w); !(diff <= tol) {
			t.Fatalf("%s %+v: [%d] = %v, want %v (|diff| %.3g over %.3g)", what, a, i, got[i], want[i], diff, tol)
		}
	}
}

// checkPLE runs PLEGate into a fresh buffer and in place over g against the
// reference.
func checkPLE(t *testing.T, in pleInputs, a PLEArgs) {
	t.Helper()
	want := ref.PLEGate(in.g, in.proj, in.tok, in.w, refPLEArgs(a))
	n := a.Tokens * a.Dim
	bg, bp, bt, bw := upload(t, "g", in.g), upload(t, "proj", in.proj), upload(t, "tok", in.tok), upload(t, "w", in.w)
	out := scratch(t, "out", n)
	run(t, "ple_gate", func(c *gpu.Chain) error { return PLEGate(c, bg, bp, bt, bw, out, a) })
	checkPLEClose(t, "ple_gate", download(t, out, n), want, in, a)
	run(t, "ple_gate in place", func(c *gpu.Chain) error { return PLEGate(c, bg, bp, bt, bw, bg, a) })
	checkPLEClose(t, "ple_gate in place", download(t, bg, n), want, in, a)

	// The input alone: the same bound with the gate's factor 1 (the norm
	// term's scale is InputScale·(|pn| + |tok|)).
	run(t, "ple_input", func(c *gpu.Chain) error { return PLEInput(c, bp, bt, bw, out, a) })
	got, wantIn := download(t, out, n), ref.PLEInput(in.proj, in.tok, in.w, refPLEArgs(a))
	pn := ref.RMSNorm(ref.Scale(pleSlice(in.proj, a), a.ProjScale), in.w, ref.NormArgs{Rows: a.Tokens, Dim: a.Dim, Eps: a.Eps})
	tok := pleSlice(in.tok, a)
	for i := range wantIn {
		scale := float64(a.InputScale) * (math.Abs(float64(pn[i])) + math.Abs(float64(tok[i])))
		if d := math.Abs(float64(got[i]) - float64(wantIn[i])); !(d <= pleNormRTol*scale+pleATol) {
			t.Fatalf("ple_input %+v: [%d] = %v, want %v (|diff| %.3g)", a, i, got[i], wantIn[i], d)
		}
	}
}

func TestPLEGateMatchesReference(t *testing.T) {
	// Dims: one float; 7 and 37, multiples of neither 4 nor normWG's 32 or
	// 64; the real 256, one full workgroup; 300, past it with a ragged
	// second stride. Layers 1 and E2B's 35, with the first, a middle and
	// the last layer's slice.
	for _, dim := range []int{1, 7, 37, 256, 300} {
		for _, layers := range []int{1, 35} {
			for _, layer := range slices.Compact([]int{0, layers / 2, layers - 1}) {
				for _, tokens := range []int{1, 13} {
					a := PLEArgs{Tokens: tokens, Layers: layers, Dim: dim, Layer: layer, Eps: 1e-6, ProjScale: pleProjScale, InputScale: pleInputScale}
					t.Run(fmt.Sprintf("%dx%dx%d/layer%d", tokens, layers, dim, layer), func(t *testing.T) {
						checkPLE(t, newPLEInputs(1, a, 3, 30, 2, 1.5), a)
					})
				}
			}
		}
	}
}

func TestPLEGateWideMagnitude(t *testing.T) {
	a := PLEArgs{Tokens: 13, Layers: 35, Dim: 256, Layer: 17, Eps: 1e-6, ProjScale: pleProjScale, InputScale: pleInputScale}
	// Production magnitudes: projections of +-50, gates of +-40, where
	// gelu is the identity on one side and underflows on the other, tok of
	// +-16 (embeddings of +-1 times sqrt(256)) and norm weights of +-3.
	t.Run("production", func(t *testing.T) {
		in := newPLEInputs(2, a, 40, 50, 16, 3)
		// Gates at the edges: exactly 0, past saturation both ways, and past
		// where the kernel clamps e^-2u at e^88.
		copy(in.g, []float32{0, 40, -40, 100, -100, 1e4, -1e4, -3, 3})
		checkPLE(t, in, a)
	})
	// A row spiking on one float: the norm brings it to about sqrt(Dim)
	// while the rest sink towards 0, next to tok values that do not.
	t.Run("spike", func(t *testing.T) {
		in := newPLEInputs(3, a, 5, 1, 2, 1.5)
		for tk := range a.Tokens {
			in.proj[(tk*a.Layers+a.Layer)*a.Dim+tk] = 5e3
		}
		checkPLE(t, in, a)
	})
	// Projections of +-0.01, whose mean square, 3e-5, is well over eps 1e-6
	// before the scale and well under it after (2e-8): there the order
	// matters, and applying ProjScale after the norm instead of before it
	// would give a normalised projection about 6 times too small.
	t.Run("scale before the norm", func(t *testing.T) {
		checkPLE(t, newPLEInputs(4, a, 3, 0.01, 0.05, 1.5), a)
	})
	// A zero projection row: pn is exactly 0, not NaN, and out is
	// gelu(g) * tok * InputScale.
	t.Run("zero projection", func(t *testing.T) {
		in := newPLEInputs(5, a, 3, 0, 2, 1.5)
		checkPLE(t, in, a)
	})
}

func TestPLEGateGridWrap(t *testing.T) {
	// 70000 tokens: past 65535 workgroups, so the grid wraps into y.
	a := PLEArgs{Tokens: 70000, Layers: 2, Dim: 3, Layer: 1, Eps: 1e-6, ProjScale: pleProjScale, InputScale: pleInputScale}
	checkPLE(t, newPLEInputs(6, a, 3, 30, 2, 1.5), a)
}

// TestPLEGateReference checks the reference itself, independently of its
// code: against a case worked by hand, and against the model's steps
// composed from the other references (scale, RMSNorm, add, scale, GeGLU),
// as transformers writes them.
func TestPLEGateReference(t *testing.T) {
	t.Run("by hand", func(t *testing.T) {
		// One token, two layers of two floats, layer 1. Its projection
		// slice (4, -4) scaled by 1/2 is (2, -2), of mean square 4, so it
		// normalises to (1, -1); times w = (3, 1/2) that is (3, -1/2); plus
		// tok (1, 5/2) is (4, 2); times 1/2, (2, 1). GELU's tanh
		// approximation, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), is
		// 0.8411919906 at 1 and -0.1588080094 at -1 (Python's math.tanh).
		// Layer 0's slice is junk that must not leak in.
		a := PLEArgs{Tokens: 1, Layers: 2, Dim: 2, Layer: 1, Eps: 0, ProjScale: 0.5, InputScale: 0.5}
		in := pleInputs{
			g:    []float32{1, -1},
			proj: []float32{100, 7, 4, -4},
			tok:  []float32{9, -9, 1, 2.5},
			w:    []float32{3, 0.5},
		}
		want := []float32{2 * 0.8411919906, 1 * -0.1588080094}
		// float32 rounding of float64 values: 1e-7 relative.
		assertClose(t, "ref.PLEGate", ref.PLEGate(in.g, in.proj, in.tok, in.w, refPLEArgs(a)), want, 0, 1e-7)
		checkPLE(t, in, a)
	})
	t.Run("composed", func(t *testing.T) {
		a := PLEArgs{Tokens: 3, Layers: 4, Dim: 37, Layer: 2, Eps: 1e-6, ProjScale: pleProjScale, InputScale: pleInputScale}
		in := newPLEInputs(7, a, 3, 30, 2, 1.5)
		pn := ref.RMSNorm(ref.Scale(pleSlice(in.proj, a), a.ProjScale), in.w, ref.NormArgs{Rows: a.Tokens, Dim: a.Dim, Eps: a.Eps})
		ple := ref.Scale(ref.Add(pn, pleSlice(in.tok, a)), a.InputScale)
		composed := ref.GeGLU(in.g, ple)
		// The composition rounds to f32 after each of its five steps, the
		// fused reference once: each step's half ulp, 6e-8, of values
		// within the same |pn| + |tok| scale as the kernel's, which the
		// kernel's tolerances cover.
		checkPLEClose(t, "composed", ref.PLEGate(in.g, in.proj, in.tok, in.w, refPLEArgs(a)), composed, in, a)
		// PLEInput is that ple, which PLEGate multiplies gelu(g) by.
		assertClose(t, "ref.PLEInput", ref.PLEInput(in.proj, in.tok, in.w, refPLEArgs(a)), ple, 1e-6, 1e-6)
	})
}

func TestPLEGateRejectsBadShapes(t *testing.T) {
	ok := PLEArgs{Tokens: 2, Layers: 3, Dim: 4, Layer: 1, Eps: 1e-6, ProjScale: pleProjScale, InputScale: pleInputScale}
	g, out := scratch(t, "g", 8), scratch(t, "out", 8)
	proj, tok, w := scratch(t, "proj", 24), scratch(t, "tok", 24), scratch(t, "w", 4)
	short := scratch(t, "short", 3)
	c, err := dev.NewChain("bad ple")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	with := func(f func(a *PLEArgs)) PLEArgs { a := ok; f(&a); return a }
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	for _, tc := range []struct {
		what string
		err  error
	}{
		{"tokens 0", PLEGate(c, g, proj, tok, w, out, with(func(a *PLEArgs) { a.Tokens = 0 }))},
		{"layers 0", PLEGate(c, g, proj, tok, w, out, with(func(a *PLEArgs) { a.Layers, a.Layer = 0, 0 }))},
		{"dim -1", PLEGate(c, g, proj, tok, w, out, with(func(a *PLEArgs) { a.Dim = -1 }))},
		{"layer -1", PLEGate(c, g, proj, tok, w, out, with(func(a *PLEArgs) { a.Layer = -1 }))},
		{"layer = layers", PLEGate(c, g, proj, tok, w, out, with(func(a *PLEArgs) { a.Layer = 3 }))},
		{"index overflow", PLEGate(c, g, proj, tok, w, out, with(func(a *PLEArgs) { a.Tokens, a.Layers, a.Dim = 1<<12, 35, 1<<15 }))},
		{"layers x dim overflow", PLEGate(c, g, proj, tok, w, out, with(func(a *PLEArgs) { a.Layers, a.Dim = 1<<20, 1<<20 }))},
		{"huge overflow", PLEGate(c, g, proj, tok, w, out, with(func(a *PLEArgs) { a.Tokens, a.Layers, a.Dim = 1<<40, 1<<40, 1<<40 }))},
		{"eps NaN", PLEGate(c, g, proj, tok, w, out, with(func(a *PLEArgs) { a.Eps = nan }))},
		{"eps < 0", PLEGate(c, g, proj, tok, w, out, with(func(a *PLEArgs) { a.Eps = -1e-6 }))},
		{"proj scale 0 (unset)", PLEGate(c, g, proj, tok, w, out, with(func(a *PLEArgs) { a.ProjScale = 0 }))},
		{"proj scale inf", PLEGate(c, g, proj, tok, w, out, with(func(a *PLEArgs) { a.ProjScale = inf }))},
		{"input scale 0 (unset)", PLEGate(c, g, proj, tok, w, out, with(func(a *PLEArgs) { a.InputScale = 0 }))},
		{"input scale NaN", PLEGate(c, g, proj, tok, w, out, with(func(a *PLEArgs) { a.InputScale = nan }))},
		{"short g", PLEGate(c, short, proj, tok, w, out, ok)},
		{"short proj", PLEGate(c, g, g, tok, w, out, ok)},
		{"short tok", PLEGate(c, g, proj, g, w, out, ok)},
		{"short weight", PLEGate(c, g, proj, tok, short, out, ok)},
		{"short out", PLEGate(c, g, proj, tok, w, short, ok)},
		{"more tokens than the buffers hold", PLEGate(c, g, proj, tok, w, out, with(func(a *PLEArgs) { a.Tokens = 3 }))},
		{"nil g", PLEGate(c, nil, proj, tok, w, out, ok)},
		{"nil weight", PLEGate(c, g, proj, tok, nil, out, ok)},
		{"out is proj", PLEGate(c, g, proj, tok, w, proj, ok)},
		{"out is tok", PLEGate(c, g, proj, tok, w, tok, ok)},
		{"out is the weight", PLEGate(c, g, proj, tok, out, out, ok)},
	} {
		if tc.err == nil {
			t.Errorf("%s: accepted", tc.what)
		} else if !strings.HasPrefix(tc.err.Error(), "ops: ple_gate: ") {
			t.Errorf("%s: error %q does not name the op", tc.what, tc.err)
		}
	}
	if c.Err() != nil {
		t.Errorf("a rejected shape reached the chain: %v", c.Err())
	}
}
