package ops

import (
	"fmt"
	"math"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// adamWState is one parameter tensor's optimizer state.
type adamWState struct{ p, g, m, v []float32 }

func newAdamWState(seed uint64, n int, pScale, gScale float32, fresh bool) adamWState {
	s := adamWState{p: randVec(seed, n, pScale), g: randVec(seed+1, n, gScale), m: make([]float32, n), v: make([]float32, n)}
	if n > 2 {
		s.g[0] = 0 // v stays 0 at step 1: denom is eps alone
	}
	if !fresh {
		// Mid-training moments: m of the gradients' size and either sign
		// (so that the new gradient may cancel it), v up to their square.
		s.m = randVec(seed+2, n, gScale)
		for i, u := range randVec(seed+3, n, 1) {
			s.v[i] = u * u * gScale * gScale
		}
	}
	return s
}

// adamWTol is the tolerance of one step from a given state, per element of
// p, m and v, from the magnitude of the terms each update sums (so that a
// cancelling m is held to the size of what cancelled). In f32Eps units:
//   - g = grad * scale * clip: 2 roundings;
//   - m = b1 m + (1-b1) g: (1-b1) rounded once from float64, two products
//     and a sum, plus g's 2: 6 of |b1 m| + |(1-b1) g|;
//   - v likewise with g^2 (g's error doubled): 8 of |b2 v| + |(1-b2) g^2|;
//   - p = p decay - step_size m / denom: decay and its product 2 of |p|;
//     the update carries m's 6, sqrt(v)'s 4 + 1, the scalars' 2, the
//     division and product 2: 16 of step_size (|b1 m| + |(1-b1) g|) / denom;
//     the final difference 1 of the new |p|, and 1 more for the
//     reference's own rounding to f32.
func adamWTol(before, after adamWState, clip float32, a AdamWArgs) (tp, tm, tv []float64) {
	n := len(before.p)
	tp, tm, tv = make([]float64, n), make([]float64, n), make([]float64, n)
	b1, b2 := a.Beta1, a.Beta2
	scale := a.GradScale
	if scale == 0 {
		scale = 1
	}
	stepSize := a.LR / (1 - math.Pow(b1, float64(a.Step)))
	isb := 1 / math.Sqrt(1-math.Pow(b2, float64(a.Step)))
	for i := range n {
		g := float64(before.g[i]) * scale * float64(clip)
		mTerms := b1*math.Abs(float64(before.m[i])) + (1-b1)*math.Abs(g)
		vTerms := b2*float64(before.v[i]) + (1-b2)*g*g
		denom := math.Sqrt(float64(after.v[i]))*isb + a.Eps
		tm[i] = 6 * f32Eps * mTerms
		tv[i] = 8 * f32Eps * vTerms
		tp[i] = f32Eps * (2*math.Abs(float64(before.p[i])) + 2*math.Abs(float64(after.p[i])) + 16*stepSize*mTerms/denom)
	}
	return tp, tm, tv
}

func copyState(s adamWState) adamWState {
	c := func(v []float32) []float32 { return append([]float32(nil), v...) }
	return adamWState{p: c(s.p), g: c(s.g), m: c(s.m), v: c(s.v)}
}

// checkAdamW runs one AdamW step on the GPU from state s and compares p, m
// and v with ref.AdamW from the same state. clip > 0 passes a clip buffer
// holding it.
func checkAdamW(t *testing.T, s adamWState, a AdamWArgs, clip float32) {
	t.Helper()
	want := copyState(s)
	refClip := float32(1)
	if clip > 0 {
		refClip = clip
	}
	ref.AdamW(want.p, want.g, want.m, want.v, refClip, ref.AdamWArgs{LR: a.LR, Beta1: a.Beta1, Beta2: a.Beta2, Eps: a.Eps, WeightDecay: a.WeightDecay, Step: a.Step, GradScale: a.GradScale})
	tp, tm, tv := adamWTol(s, want, refClip, a)
	bp, bg, bm, bv := upload(t, "p", s.p), upload(t, "g", s.g), upload(t, "m", s.m), upload(t, "v", s.v)
	var bc *gpu.Buffer
	if clip > 0 {
		bc = upload(t, "clip", []float32{123, clip})
	}
	run(t, "adamw", func(c *gpu.Chain) error { return AdamW(c, bp, bg, bm, bv, bc, a) })
	assertWithin(t, "adamw m", download(t, bm, a.N), want.m, tm)
	assertWithin(t, "adamw v", download(t, bv, a.N), want.v, tv)
	assertWithin(t, "adamw p", download(t, bp, a.N), want.p, tp)
}

func TestAdamWMatchesReference(t *testing.T) {
	for _, n := range []int{1, 255, 257, 1000} {
		for _, step := range []int{1, 10} {
			for _, clip := range []float32{0, 0.37} {
				t.Run(fmt.Sprintf("n%d/step%d/clip%v", n, step, clip), func(t *testing.T) {
					a := AdamWArgs{N: n, LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: step, GradScale: 0.25}
					checkAdamW(t, newAdamWState(70, n, 1, 0.1, step == 1), a, clip)
				})
			}
		}
	}
}

func TestAdamWWideMagnitude(t *testing.T) {
	// Gradients from 1e-6 to 1e4 (an exploding step before clipping),
	// parameters to 1e3, moments of a long run (step 5000, where the bias
	// corrections are 1 to f32 precision), a large learning rate and decay,
	// and betas of (0.5, 0.95) where 1 - beta is not small.
	for _, tc := range []struct {
		name           string
		pScale, gScale float32
		a              AdamWArgs
	}{
		{"grads 1e4", 1e3, 1e4, AdamWArgs{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1, Step: 5000}},
		{"grads 1e-6", 1, 1e-6, AdamWArgs{LR: 1e-4, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0, Step: 3}},
		{"betas 0.5 0.95", 10, 3, AdamWArgs{LR: 0.5, Beta1: 0.5, Beta2: 0.95, Eps: 1e-6, WeightDecay: 0.5, Step: 2, GradScale: 1.0 / 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.a
			a.N = 3000
			checkAdamW(t, newAdamWState(71, a.N, tc.pScale, tc.gScale, false), a, 0)
			checkAdamW(t, newAdamWState(72, a.N, tc.pScale, tc.gScale, false), a, 1e-3)
		})
	}
}

func TestAdamWReferenceWorkedExample(t *testing.T) {
	// torch.optim.AdamW([p], lr=0.1, weight_decay=0.1) from p = 1 with
	// grad 0.5 at step 1: the decay gives 0.99, and the first step moves by
	// lr * m^/(sqrt(v^) + eps) = 0.1 * 0.5 / (0.5 + 1e-8) against the
	// gradient: 0.89 (to 2e-9). m = 0.05, v = 0.00025.
	p, g, m, v := []float32{1}, []float32{0.5}, []float32{0}, []float32{0}
	ref.AdamW(p, g, m, v, 1, ref.AdamWArgs{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1, Step: 1})
	if want := float32(0.99 - 0.1*0.5/(0.5+1e-8)); p[0] != want || m[0] != 0.05 || v[0] != 0.00025 {
		t.Fatalf("p, m, v = %v, %v, %v; want %v, 0.05, 0.00025", p[0], m[0], v[0], want)
	}
}

// gradNormRTol: the sum of squares is a sum of positive terms, so its
// relative error is at most one rounding per addition on the longest path:
// PER (16) terms per invocation and 8 tree levels in the first pass, the
// ceil(partials/256) strided terms and 8 levels in the second, plus the
// squares, the sqrt, the scale: under 40 for these cases' few hundred
// partials. clip adds the division and the 1e-6.
const gradNormRTol = 40 * f32Eps

func checkGradNorm(t *testing.T, grads [][]float32, a GradNormArgs) (out *gpu.Buffer) {
	t.Helper()
	var bufs []GradBuffer
	var lengths []int
	for i, g := range grads {
		bufs = append(bufs, GradBuffer{upload(t, fmt.Sprint("grad ", i), g), len(g)})
		lengths = append(lengths, len(g))
	}
	partials, out := scratch(t, "partials", GradNormPartials(lengths...)), scratch(t, "norm", 2)
	run(t, "grad norm", func(c *gpu.Chain) error { return GradNorm(c, bufs, partials, out, a) })
	got := download(t, out, 2)
	norm, clip := ref.GradNorm(grads, a.Scale, a.MaxNorm)
	assertWithin(t, "grad norm", got[:1], []float32{float32(norm)}, []float64{gradNormRTol * norm})
	assertWithin(t, "grad clip", got[1:], []float32{float32(clip)}, []float64{(gradNormRTol + 2*f32Eps) * clip})

	run(t, "grad norm again", func(c *gpu.Chain) error { return GradNorm(c, bufs, partials, out, a) })
	if again := download(t, out, 2); again[0] != got[0] || again[1] != got[1] {
		t.Fatalf("grad norm: a second run gave %v, the first %v: not deterministic", again, got)
	}
	return out
}

func TestGradNormMatchesReference(t *testing.T) {
	// One float; one chunk of 4096 -1 and +1; several buffers of ragged
	// lengths; clipping on and off, and a scale.
	t.Run("one float", func(t *testing.T) { checkGradNorm(t, [][]float32{{-3}}, GradNormArgs{MaxNorm: 1}) })
	t.Run("chunk edges", func(t *testing.T) {
		checkGradNorm(t, [][]float32{randVec(80, 4095, 1), randVec(81, 4097, 1)}, GradNormArgs{})
	})
	t.Run("several clipped", func(t *testing.T) {
		checkGradNorm(t, [][]float32{randVec(82, 300, 1), randVec(83, 100000, 0.01), randVec(84, 7, 5), randVec(85, 9000, 0.1)}, GradNormArgs{Scale: 0.25, MaxNorm: 1})
	})
	t.Run("under max norm", func(t *testing.T) {
		checkGradNorm(t, [][]float32{randVec(86, 1000, 1e-3)}, GradNormArgs{MaxNorm: 1})
	})
}

func TestGradNormWideMagnitude(t *testing.T) {
	// Gradients of 1e15 (squares 1e30, their sum 1e34: still finite in f32)
	// and of 1e-15 (squares 1e-30: still normal), each clipped to 1.
	checkGradNorm(t, [][]float32{randVec(87, 10000, 1e15), randVec(88, 50, 1)}, GradNormArgs{MaxNorm: 1})
	checkGradNorm(t, [][]float32{randVec(89, 10000, 1e-15)}, GradNormArgs{MaxNorm: 1, Scale: 0.5})
}

func TestAdamWClipsInOneChain(t *testing.T) {
	// A training step's tail: the global norm of three gradient tensors,
	// then AdamW on each with the clip factor read from the GPU, all in one
	// chain; three steps in a row. The reference steps each tensor with the
	// clip factor the GPU computed (TestGradNormMatchesReference checks that
	// on its own) from the state the GPU left, so each step is checked with
	// the one-step tolerance.
	sizes := []int{300, 5000, 17}
	states := make([]adamWState, len(sizes))
	type bufs struct{ p, g, m, v *gpu.Buffer }
	dbuf := make([]bufs, len(sizes))
	var grads []GradBuffer
	for i, n := range sizes {
		states[i] = newAdamWState(uint64(90+10*i), n, 1, 3, true)
		s := states[i]
		dbuf[i] = bufs{upload(t, "p", s.p), upload(t, "g", s.g), upload(t, "m", s.m), upload(t, "v", s.v)}
		grads = append(grads, GradBuffer{dbuf[i].g, n})
	}
	partials, out := scratch(t, "partials", GradNormPartials(sizes...)), scratch(t, "norm", 2)
	base := AdamWArgs{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01}
	for step := 1; step <= 3; step++ {
		run(t, "train step tail", func(c *gpu.Chain) error {
			if err := GradNorm(c, grads, partials, out, GradNormArgs{MaxNorm: 1}); err != nil {
				return err
			}
			for i, n := range sizes {
				a := base
				a.N, a.Step = n, step
				if err := AdamW(c, dbuf[i].p, dbuf[i].g, dbuf[i].m, dbuf[i].v, out, a); err != nil {
					return err
				}
			}
			return nil
		})
		clip := download(t, out, 2)[1]
		if !(clip < 1) {
			t.Fatalf("step %d: clip %v, want < 1 for gradients of norm ~100", step, clip)
		}
		for i, n := range sizes {
			a := base
			a.N, a.Step = n, step
			want := copyState(states[i])
			ref.AdamW(want.p, want.g, want.m, want.v, clip, ref.AdamWArgs{LR: a.LR, Beta1: a.Beta1, Beta2: a.Beta2, Eps: a.Eps, WeightDecay: a.WeightDecay, Step: step})
			tp, tm, tv := adamWTol(states[i], want, clip, a)
			got := adamWState{p: download(t, dbuf[i].p, n), g: states[i].g, m: download(t, dbuf[i].m, n), v: download(t, dbuf[i].v, n)}
			what := fmt.Sprintf("step %d tensor %d", step, i)
			assertWithin(t, what+" m", got.m, want.m, tm)
			assertWithin(t, what+" v", got.v, want.v, tv)
			assertWithin(t, what+" p", got.p, want.p, tp)
			states[i] = got
		}
	}
}

func TestAdamWRejectsBadArgs(t *testing.T) {
	p, g, m, v, short := scratch(t, "p", 8), scratch(t, "g", 8), scratch(t, "m", 8), scratch(t, "v", 8), scratch(t, "short", 7)
	one := scratch(t, "one", 1)
	c, err := dev.NewChain("bad adamw")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	ok := AdamWArgs{N: 8, LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Step: 1}
	with := func(f func(a *AdamWArgs)) AdamWArgs { a := ok; f(&a); return a }
	nan := float32(math.NaN())
	partials, out := scratch(t, "partials", 1), scratch(t, "out", 2)
	for _, tc := range []struct {
		what string
		err  error
	}{
		{"n 0", AdamW(c, p, g, m, v, nil, with(func(a *AdamWArgs) { a.N = 0 }))},
		{"step 0", AdamW(c, p, g, m, v, nil, with(func(a *AdamWArgs) { a.Step = 0 }))},
		{"beta1 1", AdamW(c, p, g, m, v, nil, with(func(a *AdamWArgs) { a.Beta1 = 1 }))},
		{"beta2 NaN", AdamW(c, p, g, m, v, nil, with(func(a *AdamWArgs) { a.Beta2 = math.NaN() }))},
		{"eps 0", AdamW(c, p, g, m, v, nil, with(func(a *AdamWArgs) { a.Eps = 0 }))},
		{"lr NaN", AdamW(c, p, g, m, v, nil, with(func(a *AdamWArgs) { a.LR = math.NaN() }))},
		{"weight decay < 0", AdamW(c, p, g, m, v, nil, with(func(a *AdamWArgs) { a.WeightDecay = -1 }))},
		{"short v", AdamW(c, p, g, m, short, nil, ok)},
		{"short clip", AdamW(c, p, g, m, v, one, ok)},
		{"m is v", AdamW(c, p, g, m, m, nil, ok)},
		{"clip is grad", AdamW(c, p, g, m, v, g, ok)},
		{"norm no buffers", GradNorm(c, nil, partials, out, GradNormArgs{})},
		{"norm length 0", GradNorm(c, []GradBuffer{{g, 0}}, partials, out, GradNormArgs{})},
		{"norm short grad", GradNorm(c, []GradBuffer{{short, 8}}, partials, out, GradNormArgs{})},
		{"norm short partials", GradNorm(c, []GradBuffer{{g, 8}, {m, 8}}, partials, out, GradNormArgs{})},
		{"norm short out", GradNorm(c, []GradBuffer{{g, 8}}, partials, one, GradNormArgs{})},
		{"norm out is a grad", GradNorm(c, []GradBuffer{{g, 8}}, partials, g, GradNormArgs{})},
		{"norm max NaN", GradNorm(c, []GradBuffer{{g, 8}}, partials, out, GradNormArgs{MaxNorm: nan})},
	} {
		if tc.err == nil {
			t.Errorf("%s: accepted", tc.what)
		}
	}
	if c.Err() != nil {
		t.Errorf("a rejected shape reached the chain: %v", c.Err())
	}
}

func TestAdamWGridWrap(t *testing.T) {
	// 70000 elements at a workgroup of one wrap the grid into y; the
	// index code is the dispatcher's.
	const n = 70000
	a := AdamWArgs{N: n, LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: 7}
	s := newAdamWState(73, n, 1, 0.1, false)
	want := copyState(s)
	ref.AdamW(want.p, want.g, want.m, want.v, 1, ref.AdamWArgs{LR: a.LR, Beta1: a.Beta1, Beta2: a.Beta2, Eps: a.Eps, WeightDecay: a.WeightDecay, Step: a.Step})
	tp, tm, tv := adamWTol(s, want, 1, a)
	bp, bg, bm, bv := upload(t, "p", s.p), upload(t, "g", s.g), upload(t, "m", s.m), upload(t, "v", s.v)
	run(t, "adamw wrap", func(c *gpu.Chain) error {
		return dispatch(c, gpu.Spec("adamw", "adamw", "WG", 1), a.params(false), gpu.Grid(n, 1), bp, bg, bm, bv, bg)
	})
	assertWithin(t, "adamw wrap m", download(t, bm, n), want.m, tm)
	assertWithin(t, "adamw wrap v", download(t, bv, n), want.v, tv)
	assertWithin(t, "adamw wrap p", download(t, bp, n), want.p, tp)
}

func TestGradNormGridWrap(t *testing.T) {
	// The first pass at a workgroup of one float (WG 1, PER 1): 70000
	// partials, past 65535 workgroups, so the grid wraps into y; the
	// finishing pass, at the dispatcher's 256, folds 274 partials per
	// invocation and 8 tree levels: 300 roundings of the sum of positive
	// terms at most. (A finishing pass at WG 1 would loop 70000 times, past
	// the 65535 loop iterations lavapipe lets an invocation run.)
	const n = 70000
	g := randVec(74, n, 1)
	bg, partials, out := upload(t, "grad", g), scratch(t, "partials", n), scratch(t, "out", 2)
	run(t, "grad norm wrap", func(c *gpu.Chain) error {
		if err := dispatch(c, gpu.Spec("grad_norm", "sumsq_partial", "WG", 1, "PER", 1), gradNormParams{N: n}, gpu.Grid(n, 1), bg, partials, out); err != nil {
			return err
		}
		return dispatch(c, gpu.Spec("grad_norm", "grad_norm_finish", "WG", wg, "PER", 1), gradNormParams{N: n, Scale: 1}, [3]uint32{1, 1, 1}, partials, partials, out)
	})
	norm, _ := ref.GradNorm([][]float32{g}, 1, 0)
	assertWithin(t, "grad norm wrap", download(t, out, 1), []float32{float32(norm)}, []float64{300 * f32Eps * norm})
}
