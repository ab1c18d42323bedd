package ops

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// The AltUp kernels against their float64 references. Each bound is
// relative to a per-token scale, the largest magnitude among the values
// the result is summed from, because the outputs are sums of terms that
// may cancel:
//   - predict and correct: the router's dot products over Dim (pairwise
//     f32 sums, ~1e-6 relative at Dim 300) move each tanh, and so each
//     coefficient, by ~1e-6; a coefficient multiplies values up to the
//     token's largest, and Streams (up to 8) of them are summed. 1e-5 of
//     the token's largest input covers 8 × 1e-6 with room; a coefficient
//     read from the wrong row moves a result by ~0.1 of that scale.
//   - add_normed, rescale and merge: RMSNorm's and the RMS factors' f32
//     error, 1e-6 relative (rmsNormRTol), of each term, plus the add's
//     half ulp: 2e-6 of the sum of the terms' magnitudes.
//   - gaussian_topk: the mean and std carry ~1e-6 relative error, so the
//     cutoff moves by 1e-6 × (|mean| + mult·std), and g - cut rounds once:
//     2e-6 of |g| + |mean| + |mult|·std.
//
// Measured on lavapipe: at most a fifth of each bound.
const (
	altUpCoefRTol = 1e-5
	altUpNormRTol = 2e-6
	topKRTol      = 2e-6
)

// altUpInputs are one AltUp layer's host operands.
type altUpInputs struct {
	s, w, router, predict, correct, scale, x []float32
}

func newAltUpInputs(seed uint64, a AltUpArgs, sScale float32) altUpInputs {
	n := a.Streams
	return altUpInputs{
		s: randVec(seed, n*a.Tokens*a.Dim, sScale),
		// Gains around 1 and a router large enough that tanh is far from
		// linear (rmsnorm(x)·w/Dim summed over Dim is ~1/sqrt(Dim) per
		// unit of router).
		w:       shift(randVec(seed+1, a.Dim, 0.5), 1),
		router:  randVec(seed+2, n*a.Dim, 4*float32(math.Sqrt(float64(a.Dim)))),
		predict: randVec(seed+3, n*n*n, 0.6),
		correct: randVec(seed+4, n*n, 0.6),
		scale:   randVec(seed+5, a.Dim, 1.5),
		x:       randVec(seed+6, a.Tokens*a.Dim, sScale),
	}
}

func shift(v []float32, by float32) []float32 {
	for i := range v {
		v[i] += by
	}
	return v
}

// tokenScales is, for each element of a Tokens×Dim result (repeated for
// each of reps streams), the largest magnitude in that token's rows of
// the given stream-major (Streams×Tokens×Dim) and row (Tokens×Dim) inputs.
func tokenScales(a AltUpArgs, reps int, streams [][]float32, rows [][]float32) []float64 {
	per := make([]float64, a.Tokens)
	for t := range a.Tokens {
		for _, s := range streams {
			for k := range a.Streams {
				for _, v := range s[(k*a.Tokens+t)*a.Dim : (k*a.Tokens+t+1)*a.Dim] {
					per[t] = math.Max(per[t], math.Abs(float64(v)))
				}
			}
		}
		for _, r := range rows {
			for _, v := range r[t*a.Dim : (t+1)*a.Dim] {
				per[t] = math.Max(per[t], math.Abs(float64(v)))
			}
		}
	}
	out := make([]float64, 0, reps*a.Tokens*a.Dim)
	for range reps {
		for t := range a.Tokens {
			for range a.Dim {
				out = append(out, per[t])
			}
		}
	}
	return out
}

// assertScaled fails unless |got - want| <= rtol·scale element-wise.
func assertScaled(t *testing.T, what string, got, want []float32, scale []float64, rtol float64) {
	t.Helper()
	for i := range want {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if !(d <= rtol*scale[i]) {
			t.Fatalf("%s: [%d] = %v, want %v (|diff| %.3g over %.3g)", what, i, got[i], want[i], d, rtol*scale[i])
		}
	}
}

func refAltUpArgs(a AltUpArgs) ref.AltUpArgs { return ref.AltUpArgs(a) }

// checkAltUp runs the five AltUp entry points on in against the
// references.
func checkAltUp(t *testing.T, in altUpInputs, a AltUpArgs) {
	t.Helper()
	ra := refAltUpArgs(a)
	all, rows := a.Streams*a.Tokens*a.Dim, a.Tokens*a.Dim
	bs, bw, bx := upload(t, "s", in.s), upload(t, "w", in.w), upload(t, "x", in.x)
	wts := upload(t, "packed", PackAltUp(in.w, in.router, in.predict, in.correct, in.scale))
	pred, active, out, first := scratch(t, "pred", all), scratch(t, "active", rows), scratch(t, "out", all), scratch(t, "first", rows)

	wantPred, wantActive := ref.AltUpPredict(in.s, in.w, in.router, in.predict, ra)
	run(t, "altup_predict", func(c *gpu.Chain) error { return AltUpPredict(c, bs, wts, pred, active, a) })
	assertScaled(t, "altup_predict", download(t, pred, all), wantPred, tokenScales(a, a.Streams, [][]float32{in.s}, nil), altUpCoefRTol)
	assertScaled(t, "altup_predict active", download(t, active, rows), wantActive, tokenScales(a, 1, [][]float32{in.s}, nil), altUpCoefRTol)

	// The correction reads the reference's predictions, so that its own
	// error is measured alone.
	bpred := upload(t, "pred.ref", wantPred)
	wantOut, wantFirst := ref.AltUpCorrect(wantPred, in.x, in.w, in.router, in.correct, in.scale, ra)
	run(t, "altup_correct", func(c *gpu.Chain) error { return AltUpCorrect(c, bpred, bx, wts, out, first, a) })
	corrScale := tokenScales(a, a.Streams, [][]float32{wantPred}, [][]float32{in.x})
	assertScaled(t, "altup_correct", download(t, out, all), wantOut, corrScale, altUpCoefRTol)
	firstScale := tokenScales(a, 1, [][]float32{wantPred}, [][]float32{in.x})
	for i := range firstScale {
		firstScale[i] *= math.Abs(float64(in.scale[i%a.Dim]))
	}
	assertScaled(t, "altup_correct first", download(t, first, rows), wantFirst, firstScale, altUpCoefRTol)

	// add_normed, in place over a copy of s.
	added := slices.Clone(in.s)
	ref.AltUpAddNormed(added, in.x, in.w, ra)
	bs2 := upload(t, "s.add", in.s)
	run(t, "altup_add_normed", func(c *gpu.Chain) error { return AltUpAddNormed(c, bx, bw, bs2, a) })
	normed := ref.RMSNorm(in.x, in.w, ref.NormArgs{Rows: a.Tokens, Dim: a.Dim, Eps: a.Eps})
	addScale := make([]float64, all)
	for i := range addScale {
		addScale[i] = math.Abs(float64(in.s[i])) + math.Abs(float64(normed[i%rows]))
	}
	assertScaled(t, "altup_add_normed", download(t, bs2, all), added, addScale, altUpNormRTol)

	// rescale in place, and merge.
	rescaled := slices.Clone(in.s)
	ref.AltUpRescale(rescaled, ra)
	bs3 := upload(t, "s.rescale", in.s)
	run(t, "altup_rescale", func(c *gpu.Chain) error { return AltUpRescale(c, bs3, a) })
	absScale := make([]float64, all)
	for i, v := range rescaled {
		absScale[i] = math.Abs(float64(v))
	}
	assertScaled(t, "altup_rescale", download(t, bs3, all), rescaled, absScale, altUpNormRTol)
	merged := scratch(t, "merged", rows)
	run(t, "altup_merge", func(c *gpu.Chain) error { return AltUpMerge(c, bs, merged, a) })
	mergeScale := make([]float64, rows)
	for k := range a.Streams {
		for i := range mergeScale {
			mergeScale[i] += math.Abs(float64(rescaled[k*rows+i])) / float64(a.Streams)
		}
	}
	assertScaled(t, "altup_merge", download(t, merged, rows), ref.AltUpMerge(in.s, ra), mergeScale, altUpNormRTol)
}

func TestAltUpMatchesReference(t *testing.T) {
	// Dims 1, 7, 37 (no multiple of 4 or of normWG's 32), 256 (one
	// workgroup), 300 (a ragged second stride); 2, E2B's 4 and the most, 8,
	// streams, with the first and the last one active.
	for _, dim := range []int{1, 7, 37, 256, 300} {
		for _, streams := range []int{2, 4, 8} {
			for _, active := range slices.Compact([]int{0, streams - 1}) {
				for _, tokens := range []int{1, 13} {
					a := AltUpArgs{Tokens: tokens, Dim: dim, Streams: streams, Active: active, Eps: 1e-6}
					t.Run(fmt.Sprintf("%dx%dx%d/active%d", streams, tokens, dim, active), func(t *testing.T) {
						checkAltUp(t, newAltUpInputs(1, a, 3), a)
					})
				}
			}
		}
	}
}

func TestAltUpProductionMagnitudes(t *testing.T) {
	a := AltUpArgs{Tokens: 5, Dim: 2048, Streams: 4, Eps: 1e-6}
	// Streams of +-200 (Gemma 3n's residual grows to hundreds), a stream
	// of zeros (its rescale floors at 1e-5, not a division by 0), and a
	// token whose stream 0 is zero (everything rescales to 0).
	in := newAltUpInputs(2, a, 200)
	for e := range a.Dim {
		in.s[(2*a.Tokens+1)*a.Dim+e] = 0
		in.s[(0*a.Tokens+3)*a.Dim+e] = 0
	}
	checkAltUp(t, in, a)
}

func TestAltUpGridWrap(t *testing.T) {
	// 70000 tokens: past 65535 workgroups, so the grid wraps into y.
	a := AltUpArgs{Tokens: 70000, Dim: 3, Streams: 2, Active: 1, Eps: 1e-6}
	checkAltUp(t, newAltUpInputs(3, a, 3), a)
}

// TestAltUpReference checks the prediction's coefficient layout by hand:
// transformers reshapes prediction_coefs(m) to [streams, streams] and
// transposes it before the matmul, so stream i's prediction takes row i.
func TestAltUpReference(t *testing.T) {
	a := ref.AltUpArgs{Tokens: 1, Dim: 1, Streams: 2, Active: 0}
	// One dim, so rmsnorm(s_0) = sign(s_0) = 1 with w 1; router (atanh(0.5))
	// makes the modality 0.5 (tanh(r·1/1)); the coefficient matrix [[1, 2],
	// [3, 4]] times (0.5, 0) is c = (0.5, 1, 1.5, 2): pred_0 = 2 + 0.5·2 +
	// 1·10 = 13 and pred_1 = 10 + 1.5·2 + 2·10 = 33.
	s := []float32{2, 10}
	router := []float32{float32(math.Atanh(0.5)), 0}
	coef := []float32{1, 0, 2, 0, 3, 0, 4, 0}
	pred, active := ref.AltUpPredict(s, []float32{1}, router, coef, a)
	assertClose(t, "ref.AltUpPredict", pred, []float32{13, 33}, 0, 1e-6)
	assertClose(t, "ref.AltUpPredict active", active, []float32{13}, 0, 1e-6)
	// Correction with x = 20 (modality tanh(atanh 0.5) = 0.5 again) and
	// coef [[2, 0], [4, 0]]: c = (2, 3); the innovation 20 - 13 = 7, so s
	// = (13 + 14, 33 + 21) = (27, 54) and first = 27 · 0.5.
	out, first := ref.AltUpCorrect(pred, []float32{20}, []float32{1}, router, []float32{2, 0, 4, 0}, []float32{0.5}, a)
	assertClose(t, "ref.AltUpCorrect", out, []float32{27, 54}, 0, 1e-6)
	assertClose(t, "ref.AltUpCorrect first", first, []float32{13.5}, 0, 1e-6)
	// Merge: stream 1 (3, 4) rescaled to stream 0's RMS, then the mean.
	b := ref.AltUpArgs{Tokens: 1, Dim: 2, Streams: 2}
	m := ref.AltUpMerge([]float32{0, 10, 3, 4}, b)
	// rms(s_0) = sqrt(50), rms(s_1) = sqrt(12.5): factor 2, so (6, 8);
	// the mean with (0, 10) is (3, 9).
	assertClose(t, "ref.AltUpMerge", m, []float32{3, 9}, 0, 1e-6)
}

func TestAltUpRejectsBadShapes(t *testing.T) {
	ok := AltUpArgs{Tokens: 2, Dim: 4, Streams: 4, Eps: 1e-6}
	s, pred, s2 := scratch(t, "s", 32), scratch(t, "pred", 32), scratch(t, "s2", 32)
	x, first, w := scratch(t, "x", 8), scratch(t, "first", 8), scratch(t, "w", 4)
	wts := scratch(t, "packed", ok.packedFloats())
	short := scratch(t, "short", 3)
	c, err := dev.NewChain("bad altup")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	with := func(f func(a *AltUpArgs)) AltUpArgs { a := ok; f(&a); return a }
	for _, tc := range []struct {
		what string
		err  error
	}{
		{"tokens 0", AltUpPredict(c, s, wts, pred, x, with(func(a *AltUpArgs) { a.Tokens = 0 }))},
		{"one stream", AltUpPredict(c, s, wts, pred, x, with(func(a *AltUpArgs) { a.Streams, a.Active = 1, 0 }))},
		{"9 streams", AltUpPredict(c, s, wts, pred, x, with(func(a *AltUpArgs) { a.Streams = 9 }))},
		{"active past the streams", AltUpPredict(c, s, wts, pred, x, with(func(a *AltUpArgs) { a.Active = 4 }))},
		{"eps NaN", AltUpPredict(c, s, wts, pred, x, with(func(a *AltUpArgs) { a.Eps = float32(math.NaN()) }))},
		{"index overflow", AltUpMerge(c, s, x, with(func(a *AltUpArgs) { a.Tokens, a.Dim = 1<<20, 1<<10 }))},
		{"predict in place", AltUpPredict(c, s, wts, s, x, ok)},
		{"correct in place", AltUpCorrect(c, pred, x, wts, pred, first, ok)},
		{"short weights", AltUpPredict(c, s, short, pred, x, ok)},
		{"short streams", AltUpRescale(c, short, ok)},
		{"short first", AltUpCorrect(c, pred, x, wts, s2, short, ok)},
		{"merge into s", AltUpMerge(c, s, s, ok)},
		{"add into x", AltUpAddNormed(c, s, w, s, ok)},
		{"topk rows 0", GaussianTopK(c, s, 0, 4, 4, 1.6)},
		{"topk stride < n", GaussianTopK(c, s, 2, 4, 3, 1.6)},
		{"topk short", GaussianTopK(c, short, 2, 4, 4, 1.6)},
		{"topk mult inf", GaussianTopK(c, s, 2, 4, 4, float32(math.Inf(1)))},
	} {
		if tc.err == nil {
			t.Errorf("%s: accepted", tc.what)
		}
	}
}

func TestGaussianTopKMatchesReference(t *testing.T) {
	// E2B's 8192-wide gate (fused rows, stride 2n) and ragged widths;
	// Gemma 3n's multiplier icdf(0.95) and icdf(0.5) = 0 (the mean).
	for _, c := range []struct {
		rows, n, stride int
		mult            float32
		mean            float32
	}{
		{1, 1, 1, 1.6448533, 0}, {13, 37, 74, 1.6448533, 0.5}, {3, 300, 300, 0, 0},
		{4, 8192, 16384, 1.6448533, 3}, {70000, 3, 3, 1.6448533, 0},
	} {
		t.Run(fmt.Sprintf("%dx%d/%d/mult%v", c.rows, c.n, c.stride, c.mult), func(t *testing.T) {
			size := (c.rows-1)*c.stride + c.n
			g := shift(randVec(uint64(c.n), size, 4), c.mean)
			want := slices.Clone(g)
			ref.GaussianTopK(want, c.rows, c.n, c.stride, c.mult)
			b := upload(t, "g", g)
			run(t, "gaussian_topk", func(ch *gpu.Chain) error { return GaussianTopK(ch, b, c.rows, c.n, c.stride, c.mult) })
			got := download(t, b, size)
			scale := make([]float64, size)
			kept := 0
			for r := range c.rows {
				row := g[r*c.stride : r*c.stride+c.n]
				mean, sd := meanStd(row)
				for j, v := range row {
					scale[r*c.stride+j] = math.Abs(float64(v)) + math.Abs(mean) + math.Abs(float64(c.mult))*sd
					if want[r*c.stride+j] > 0 {
						kept++
					}
				}
			}
			// Past the gate, the rows' other halves stay as they were.
			for i := range scale {
				if scale[i] == 0 {
					scale[i] = math.SmallestNonzeroFloat32
				}
			}
			assertScaled(t, "gaussian_topk", got, want, scale, topKRTol)
			if c.n >= 300 && c.mult > 1 && (kept == 0 || kept > c.rows*c.n/5) {
				t.Fatalf("%d of %d values kept: icdf(0.95) should keep about 5%%", kept, c.rows*c.n)
			}
		})
	}
}

func meanStd(v []float32) (mean, sd float64) {
	for _, x := range v {
		mean += float64(x)
	}
	mean /= float64(len(v))
	for _, x := range v {
		d := float64(x) - mean
		sd += d * d
	}
	return mean, math.Sqrt(sd / float64(len(v)))
}

// The backward kernels against their float64 references
// (ref.AltUp*Backward, themselves checked against finite differences in
// engine/ops/ref). Their outputs are sums over the streams and the dims
// (the coefficients' gradients dc, the router's back through tanh and the
// norm) that may cancel, so each is bounded by altUpBackwardRTol of the
// largest magnitude among the token's results: f32 sums of up to 2048
// terms carry ~1e-6 of their terms' scale, a few of them chained.
// Measured on lavapipe: at most 3.3% of it (predict's).
const altUpBackwardRTol = 2e-5

// tokenMax is, for each element of a stream-major (reps streams) or row
// (reps 1) result, the largest magnitude of want over that token.
func tokenMax(a AltUpArgs, reps int, want []float32) []float64 {
	per := make([]float64, a.Tokens)
	for k := range reps {
		for t := range a.Tokens {
			for _, v := range want[(k*a.Tokens+t)*a.Dim : (k*a.Tokens+t+1)*a.Dim] {
				per[t] = math.Max(per[t], math.Abs(float64(v)))
			}
		}
	}
	out := make([]float64, len(want))
	for i := range out {
		out[i] = per[(i/a.Dim)%a.Tokens]
	}
	return out
}

func TestAltUpBackwardMatchesReference(t *testing.T) {
	for _, a := range []AltUpArgs{
		{Tokens: 3, Dim: 37, Streams: 4, Active: 0, Eps: 1e-6},
		{Tokens: 2, Dim: 300, Streams: 3, Active: 2, Eps: 1e-6},
		{Tokens: 5, Dim: 2048, Streams: 4, Active: 0, Eps: 1e-6},
		{Tokens: 1, Dim: 7, Streams: 8, Active: 5, Eps: 1e-6},
	} {
		t.Run(fmt.Sprintf("%dx%dx%d/active%d", a.Streams, a.Tokens, a.Dim, a.Active), func(t *testing.T) {
			in := newAltUpInputs(11, a, 3)
			ra := refAltUpArgs(a)
			all, rows := a.Streams*a.Tokens*a.Dim, a.Tokens*a.Dim
			dOut, dRow := randVec(12, all, 1), randVec(13, rows, 1)
			bs, bx := upload(t, "s", in.s), upload(t, "x", in.x)
			wts := upload(t, "packed", PackAltUp(in.w, in.router, in.predict, in.correct, in.scale))
			bd, brow := upload(t, "dout", dOut), upload(t, "drow", dRow)

			ds := scratch(t, "ds", all)
			run(t, "altup_predict_backward", func(c *gpu.Chain) error { return AltUpPredictBackward(c, bs, wts, bd, brow, ds, a) })
			want := ref.AltUpPredictBackward(in.s, in.w, in.router, in.predict, dOut, dRow, ra)
			assertScaled(t, "altup_predict_backward", download(t, ds, all), want, tokenMax(a, a.Streams, want), altUpBackwardRTol)
			run(t, "altup_predict_backward without dactive", func(c *gpu.Chain) error { return AltUpPredictBackward(c, bs, wts, bd, nil, ds, a) })
			want = ref.AltUpPredictBackward(in.s, in.w, in.router, in.predict, dOut, nil, ra)
			assertScaled(t, "altup_predict_backward without dactive", download(t, ds, all), want, tokenMax(a, a.Streams, want), altUpBackwardRTol)

			dPred, dX := scratch(t, "dpred", all), scratch(t, "dx", rows)
			run(t, "altup_correct_backward", func(c *gpu.Chain) error {
				return AltUpCorrectBackward(c, bs, bx, wts, bd, brow, dPred, dX, a)
			})
			wantP, wantX := ref.AltUpCorrectBackward(in.s, in.x, in.w, in.router, in.correct, in.scale, dOut, dRow, ra)
			assertScaled(t, "altup_correct_backward dpred", download(t, dPred, all), wantP, tokenMax(a, a.Streams, wantP), altUpBackwardRTol)
			assertScaled(t, "altup_correct_backward dx", download(t, dX, rows), wantX, tokenMax(a, 1, wantX), altUpBackwardRTol)

			run(t, "altup_merge_backward", func(c *gpu.Chain) error { return AltUpMergeBackward(c, bs, brow, ds, a) })
			want = ref.AltUpMergeBackward(in.s, dRow, ra)
			assertScaled(t, "altup_merge_backward", download(t, ds, all), want, tokenMax(a, a.Streams, want), altUpBackwardRTol)
		})
	}
}

func TestGaussianTopKBackwardMatchesReference(t *testing.T) {
	for _, c := range []struct {
		rows, n, stride int
		mult            float32
	}{{1, 1, 1, 1.6448533}, {13, 37, 74, 1.6448533}, {3, 300, 300, 0}, {4, 8192, 8192, 1.6448533}} {
		t.Run(fmt.Sprintf("%dx%d/%d/mult%v", c.rows, c.n, c.stride, c.mult), func(t *testing.T) {
			size := (c.rows-1)*c.stride + c.n
			g, dy := randVec(uint64(c.n)+1, size, 4), randVec(uint64(c.n)+2, size, 1)
			want := ref.GaussianTopKBackward(g, dy, c.rows, c.n, c.stride, c.mult)
			bg, bdy := upload(t, "g", g), upload(t, "dy", dy)
			// dg starts as dy: the rest of each stride is left as it is,
			// where the reference passes dy through.
			bdg := upload(t, "dg", dy)
			run(t, "gaussian_topk_backward", func(ch *gpu.Chain) error {
				return GaussianTopKBackward(ch, bg, bdy, bdg, c.rows, c.n, c.stride, c.mult)
			})
			// Each value is mask·dy less two terms of S = Σ mask·dy (a sum
			// of up to n/20 kept values, f32, ~1e-6 of Σ|mask·dy|), times
			// O(1) factors: 1e-5 of the row's Σ|dy| bounds it.
			scale := make([]float64, size)
			for r := range c.rows {
				s := 0.0
				for _, v := range dy[r*c.stride : r*c.stride+c.n] {
					s += math.Abs(float64(v))
				}
				for j := range c.stride {
					if r*c.stride+j < size {
						scale[r*c.stride+j] = math.Max(s/float64(c.n), math.Abs(float64(dy[r*c.stride+j])))
					}
				}
			}
			assertScaled(t, "gaussian_topk_backward", download(t, bdg, size), want, scale, 1e-5)
			// In place over dy.
			run(t, "gaussian_topk_backward in place", func(ch *gpu.Chain) error {
				return GaussianTopKBackward(ch, bg, bdy, bdy, c.rows, c.n, c.stride, c.mult)
			})
			assertScaled(t, "gaussian_topk_backward in place", download(t, bdy, size), want, scale, 1e-5)
		})
	}
}
