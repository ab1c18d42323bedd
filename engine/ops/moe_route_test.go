package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
	"github.com/hearthstudio/hearth/gguf"
)

// moeLogits are tokens rows of experts router logits whose values are
// distinct by at least 1e-3 of the spread inside a row, so that f32
// rounding of the gate values (a few ulps) cannot reorder the top k: the
// shuffled multiples of spread/(experts) plus a per-token offset.
func moeLogits(seed uint64, tokens, experts int, spread float32) []float32 {
	r := rand.New(rand.NewPCG(seed, 0x40e))
	out := make([]float32, tokens*experts)
	for t := range tokens {
		perm := r.Perm(experts)
		off := (r.Float32()*2 - 1) * spread
		for e, k := range perm {
			out[t*experts+e] = off + spread*(float32(k)/float32(experts)-0.5)
		}
	}
	return out
}

// checkMoERoute runs MoERoute on logits and compares with ref.MoERoute:
// the experts exactly, the weights within f32 rounding.
func checkMoERoute(t *testing.T, logits, scale []float32, a MoERouteArgs) {
	t.Helper()
	ra := ref.MoERouteArgs{Tokens: a.Tokens, Experts: a.Experts, TopK: a.TopK, Sigmoid: a.Sigmoid, Renorm: a.Renorm}
	wantIDs, wantW := ref.MoERoute(logits, scale, ra)
	bl := upload(t, "logits", logits)
	ids, w := scratch(t, "ids", a.Tokens*a.TopK), scratch(t, "weights", a.Tokens*a.TopK)
	var bs *gpu.Buffer
	if scale != nil {
		bs = upload(t, "scale", scale)
	}
	run(t, "moe_route", func(c *gpu.Chain) error { return MoERoute(c, bl, bs, ids, w, a) })
	if got := downloadU32(t, ids, a.Tokens*a.TopK); !slices.Equal(got, wantIDs) {
		t.Fatalf("%+v: experts\n got %v\nwant %v", a, got, wantIDs)
	}
	// exp (softmax) or the sigmoid's exp and division, the softmax's sum
	// of up to 1024 terms and the renormalising sum of the chosen: f32
	// roundings of each weight, measured on lavapipe at 2e-7 relative
	// choosing 8 (of 128 or 1024) and 1.6e-6 choosing 64, whose sum rounds
	// 64 times; 5e-6 leaves a 3x margin and still catches a weight left
	// unnormalised or unscaled (tens of percent).
	assertClose(t, fmt.Sprintf("%+v weights", a), download(t, w, a.Tokens*a.TopK), wantW, 1e-9, 5e-6)
}

// TestMoERouteMatchesReference covers the routers in use: Qwen 3 MoE's and
// Gemma 4 26B-A4B's 128 experts choosing 8 (softmax, renormalised; Gemma's
// per-expert scale), gpt-oss's 32 choosing 4, DeepSeek's 256 choosing 8
// with sigmoid gates, a router without renormalisation, and awkward
// counts (an expert count below and past the workgroup, top-k of 1 and of
// the most, 64, tokens past one row of workgroups).
func TestMoERouteMatchesReference(t *testing.T) {
	for _, tc := range []struct {
		name   string
		a      MoERouteArgs
		spread float32
		scale  bool
	}{
		{"qwen3-moe", MoERouteArgs{Tokens: 7, Experts: 128, TopK: 8, Renorm: true}, 8, false},
		{"gemma4-26b", MoERouteArgs{Tokens: 5, Experts: 128, TopK: 8, Renorm: true}, 8, true},
		{"gpt-oss", MoERouteArgs{Tokens: 9, Experts: 32, TopK: 4, Renorm: true}, 12, false},
		{"sigmoid-256", MoERouteArgs{Tokens: 3, Experts: 256, TopK: 8, Sigmoid: true, Renorm: true}, 10, false},
		{"no renorm", MoERouteArgs{Tokens: 4, Experts: 60, TopK: 6}, 6, false},
		{"one of five", MoERouteArgs{Tokens: 2, Experts: 5, TopK: 1, Renorm: true}, 4, false},
		{"64 of ninety", MoERouteArgs{Tokens: 2, Experts: 90, TopK: 64, Renorm: true}, 4, true},
		{"1024 experts", MoERouteArgs{Tokens: 2, Experts: 1024, TopK: 8, Renorm: true}, 30, false},
		// Production magnitudes: router logits of tens.
		{"large logits", MoERouteArgs{Tokens: 3, Experts: 128, TopK: 8, Renorm: true}, 80, false},
		// Past 65535 workgroups the grid wraps into y.
		{"grid wrap", MoERouteArgs{Tokens: 65600, Experts: 8, TopK: 2, Renorm: true}, 6, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logits := moeLogits(1, tc.a.Tokens, tc.a.Experts, tc.spread)
			var scale []float32
			if tc.scale {
				scale = randVec(2, tc.a.Experts, 2)
			}
			checkMoERoute(t, logits, scale, tc.a)
		})
	}
}

// TestMoERouteBias: a router bias read with the logits (gpt-oss's) routes
// as the reference does on the logits plus the bias, at a bias large
// enough to change the choice, and leaves the logits as they were.
func TestMoERouteBias(t *testing.T) {
	a := MoERouteArgs{Tokens: 9, Experts: 32, TopK: 4, Renorm: true}
	logits := moeLogits(3, a.Tokens, a.Experts, 12)
	// The reference gets the same f32 sums the kernel forms. The logits
	// are a token's offset plus multiples of 12/32 = 3/8, the biases
	// multiples of 1/8: biased values are equal (ties, which both order by
	// index from the same exact scores) or at least 1/8 apart.
	bias := make([]float32, a.Experts)
	for e := range bias {
		bias[e] = float32((e*13)%32) / 8
	}
	biased := slices.Clone(logits)
	for i := range biased {
		biased[i] += bias[i%a.Experts]
	}
	wantIDs, wantW := ref.MoERoute(biased, nil, ref.MoERouteArgs{Tokens: a.Tokens, Experts: a.Experts, TopK: a.TopK, Renorm: true})
	plainIDs, _ := ref.MoERoute(logits, nil, ref.MoERouteArgs{Tokens: a.Tokens, Experts: a.Experts, TopK: a.TopK, Renorm: true})
	if slices.Equal(wantIDs, plainIDs) {
		t.Fatal("the bias changes no choice: the test cannot tell it is applied")
	}
	bl, bb := upload(t, "logits", logits), upload(t, "bias", bias)
	ids, w := scratch(t, "ids", a.Tokens*a.TopK), scratch(t, "weights", a.Tokens*a.TopK)
	a.Bias = bb
	run(t, "moe_route bias", func(c *gpu.Chain) error { return MoERoute(c, bl, nil, ids, w, a) })
	if got := downloadU32(t, ids, a.Tokens*a.TopK); !slices.Equal(got, wantIDs) {
		t.Fatalf("experts\n got %v\nwant %v", got, wantIDs)
	}
	// As checkMoERoute's weights.
	assertClose(t, "weights", download(t, w, a.Tokens*a.TopK), wantW, 1e-9, 5e-6)
	if got := download(t, bl, len(logits)); !slices.Equal(got, logits) {
		t.Error("the biased route wrote the logits")
	}
}

// TestMoERouteTies: equal gate values go to the lower expert index, in
// every round, as the reference and torch.topk on CPU order them.
func TestMoERouteTies(t *testing.T) {
	logits := make([]float32, 100)
	for e := range logits {
		logits[e] = float32(e % 7) // values 0-6, each 14-15 times
	}
	checkMoERoute(t, logits, nil, MoERouteArgs{Tokens: 1, Experts: 100, TopK: 20, Renorm: true})
	ids, _ := ref.MoERoute(logits, nil, ref.MoERouteArgs{Tokens: 1, Experts: 100, TopK: 3})
	if !slices.Equal(ids, []uint32{6, 13, 20}) {
		t.Errorf("reference chose %v, want the lowest experts of value 6: 6 13 20", ids)
	}
}

// TestMoERouteNaN: a token whose logits hold NaN (a diverged layer) still
// gets TopK distinct experts in range, which the expert products index
// weights with, from the kernel and the reference alike; softmax and
// sigmoid gates, one NaN and a row of them. With sigmoid gates the NaN
// expert is chosen first in both. What the weights are is left to the
// arithmetic (NaN, in practice).
func TestMoERouteNaN(t *testing.T) {
	for _, sigmoid := range []bool{false, true} {
		a := MoERouteArgs{Tokens: 2, Experts: 32, TopK: 8, Sigmoid: sigmoid, Renorm: true}
		logits := moeLogits(5, a.Tokens, a.Experts, 8)
		nan := float32(math.NaN())
		logits[3] = nan
		for e := range a.Experts {
			logits[a.Experts+e] = nan
		}
		bl := upload(t, "logits", logits)
		ids, w := scratch(t, "ids", a.Tokens*a.TopK), scratch(t, "weights", a.Tokens*a.TopK)
		run(t, "moe_route NaN", func(c *gpu.Chain) error { return MoERoute(c, bl, nil, ids, w, a) })
		refIDs, _ := ref.MoERoute(logits, nil, ref.MoERouteArgs{Tokens: a.Tokens, Experts: a.Experts, TopK: a.TopK, Sigmoid: sigmoid, Renorm: true})
		kernelIDs := downloadU32(t, ids, a.Tokens*a.TopK)
		// Sigmoid gates score each logit alone: the NaN expert goes first
		// and the others keep their order, in the kernel as in the
		// reference. (A softmax's NaN reaches every score of its row.)
		if sigmoid && !slices.Equal(kernelIDs[:a.TopK], refIDs[:a.TopK]) {
			t.Errorf("sigmoid, one NaN logit: experts %v, reference %v", kernelIDs[:a.TopK], refIDs[:a.TopK])
		}
		for who, got := range map[string][]uint32{"kernel": kernelIDs, "reference": refIDs} {
			for tok := range a.Tokens {
				row := slices.Clone(got[tok*a.TopK : (tok+1)*a.TopK])
				slices.Sort(row)
				if row[len(row)-1] >= uint32(a.Experts) || len(slices.Compact(row)) != a.TopK {
					t.Errorf("%s, sigmoid %v, token %d: experts %v, want %d distinct below %d", who, sigmoid, tok, got[tok*a.TopK:(tok+1)*a.TopK], a.TopK, a.Experts)
				}
			}
		}
	}
}

// TestMoERouteReference checks the reference against a hand-computed case:
// logits (1, 3, 2, 0) choose experts 1 and 2 with softmax weights
// e^3/Z and e^2/Z, renormalised to e/(1+e) and 1/(1+e).
func TestMoERouteReference(t *testing.T) {
	ids, w := ref.MoERoute([]float32{1, 3, 2, 0}, nil, ref.MoERouteArgs{Tokens: 1, Experts: 4, TopK: 2, Renorm: true})
	e := math.E
	if !slices.Equal(ids, []uint32{1, 2}) || math.Abs(float64(w[0])-e/(1+e)) > 1e-7 || math.Abs(float64(w[1])-1/(1+e)) > 1e-7 {
		t.Errorf("ids %v weights %v, want [1 2] [%v %v]", ids, w, e/(1+e), 1/(1+e))
	}
	// Sigmoid gates without renormalisation are the sigmoids themselves.
	_, w = ref.MoERoute([]float32{0, 2}, nil, ref.MoERouteArgs{Tokens: 1, Experts: 2, TopK: 2, Sigmoid: true})
	if math.Abs(float64(w[0])-1/(1+math.Exp(-2))) > 1e-7 || math.Abs(float64(w[1])-0.5) > 1e-7 {
		t.Errorf("sigmoid weights %v", w)
	}
}

func TestMoERouteRejectsBadShapes(t *testing.T) {
	logits, ids, w := scratch(t, "logits", 64), scratch(t, "ids", 16), scratch(t, "weights", 16)
	c, err := dev.NewChain("bad moe_route")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	ok := MoERouteArgs{Tokens: 2, Experts: 32, TopK: 8}
	with := func(f func(a *MoERouteArgs)) MoERouteArgs { a := ok; f(&a); return a }
	for _, tc := range []struct {
		what string
		err  error
	}{
		{"no tokens", MoERoute(c, logits, nil, ids, w, with(func(a *MoERouteArgs) { a.Tokens = 0 }))},
		{"top-k 0", MoERoute(c, logits, nil, ids, w, with(func(a *MoERouteArgs) { a.TopK = 0 }))},
		{"top-k past the experts", MoERoute(c, logits, nil, ids, w, with(func(a *MoERouteArgs) { a.Experts, a.TopK = 4, 5 }))},
		{"top-k past 64", MoERoute(c, scratch(t, "big", 200), nil, scratch(t, "ids2", 65), scratch(t, "w2", 65), MoERouteArgs{Tokens: 1, Experts: 200, TopK: 65})},
		{"too many experts", MoERoute(c, scratch(t, "huge", 2000), nil, ids, w, MoERouteArgs{Tokens: 1, Experts: 2000, TopK: 8})},
		{"short logits", MoERoute(c, logits, nil, ids, w, with(func(a *MoERouteArgs) { a.Tokens = 3 }))},
		{"short ids", MoERoute(c, logits, nil, scratch(t, "short", 15), w, ok)},
		{"short scale", MoERoute(c, logits, scratch(t, "scale", 31), ids, w, ok)},
		{"ids are weights", MoERoute(c, logits, nil, w, w, ok)},
		{"scale is ids", MoERoute(c, logits, ids, scratch(t, "ids3", 32), w, MoERouteArgs{Tokens: 1, Experts: 32, TopK: 8})},
		{"short bias", MoERoute(c, logits, nil, ids, w, with(func(a *MoERouteArgs) { a.Bias = scratch(t, "bias", 31) }))},
		{"bias is weights", MoERoute(c, logits, nil, ids, w, with(func(a *MoERouteArgs) { a.Bias = w }))},
		{"backward with a bias", MoERouteBackward(c, logits, nil, ids, w, scratch(t, "dlogits", 64), with(func(a *MoERouteArgs) { a.Bias = scratch(t, "bias2", 32) }))},
	} {
		if tc.err == nil {
			t.Errorf("%s: accepted", tc.what)
		}
	}
	if c.Err() != nil {
		t.Errorf("a rejected shape reached the chain: %v", c.Err())
	}
}

// TestMoERouterNormedMatchesReference checks the fused norm and router
// product of a decoded token against the float64 RMSNorm and product: xn
// within RMSNorm's tolerance, the logits within a product's relative to
// Σ|w·xn| (its sum, 3 vec4 steps a thread and an 8-level tree at k = 2880,
// rounds about 20 times, as matmulRTol's budget) plus xn's own error
// carried through it. Shapes: gpt-oss's 32 experts of 2880, Qwen 3's 128
// of 2048, and 60 experts (a partial last workgroup) of 2052 (a row that
// is not whole vec4 steps of the workgroup); Gemma's 1 + g gain; a stream
// of unit size and one of tens of thousands.
func TestMoERouterNormedMatchesReference(t *testing.T) {
	for i, tc := range []struct {
		experts, k int
		onePlus    bool
		scale      float32
	}{
		{32, 2880, false, 1}, {128, 2048, false, 3e4}, {60, 2052, true, 1}, {60, 2052, false, 3e4},
	} {
		t.Run(fmt.Sprintf("%dx%d_oneplus%v_x%v", tc.experts, tc.k, tc.onePlus, tc.scale), func(t *testing.T) {
			wv := randVec(uint64(90+i), tc.experts*tc.k, 1/float32(math.Sqrt(float64(tc.k))))
			w := newTensor(t, "router", gguf.TypeF32, tc.experts, tc.k, gpu.F32Bytes(wv), 0)
			x, g := randVec(uint64(91+i), tc.k, tc.scale), randVec(uint64(92+i), tc.k, 1)
			a := NormArgs{Rows: 1, Dim: tc.k, Eps: 1e-6, OnePlus: tc.onePlus}
			wantXN := ref.RMSNorm(x, g, ref.NormArgs{Rows: 1, Dim: tc.k, Eps: 1e-6, OnePlus: tc.onePlus})
			want, bound := denseMatMul(wv, tc.experts, tc.k, wantXN, 1)
			bx, bg := upload(t, "x", x), upload(t, "gain", g)
			logits, xn := scratch(t, "logits", tc.experts), scratch(t, "xn", tc.k)
			run(t, "moe router normed", func(c *gpu.Chain) error { return MoERouterNormed(c, w, bx, bg, logits, xn, a) })
			assertClose(t, "xn", download(t, xn, tc.k), wantXN, 0, rmsNormRTol)
			got := download(t, logits, tc.experts)
			for e := range want {
				tol := (matmulRTol+rmsNormRTol)*float64(bound[e]) + 1e-30
				if d := math.Abs(float64(got[e]) - float64(want[e])); !(d <= tol) {
					t.Fatalf("logit %d = %v, want %v (|diff| %.3g > %.3g)", e, got[e], want[e], d, tol)
				}
			}
		})
	}
}

// TestMoERouterNormedRefuses: what the fused router cannot run is refused
// by name before anything is recorded.
func TestMoERouterNormedRefuses(t *testing.T) {
	const experts, k = 8, 64
	w := newTensor(t, "router", gguf.TypeF32, experts, k, gpu.F32Bytes(randVec(1, experts*k, 1)), 0)
	f16 := newTensor(t, "router16", gguf.TypeF16, experts, k, make([]byte, experts*k*2), 0)
	x, g, logits, xn := scratch(t, "x", k), scratch(t, "g", k), scratch(t, "logits", experts), scratch(t, "xn", k)
	a := NormArgs{Rows: 1, Dim: k, Eps: 1e-6}
	c, err := dev.NewChain("bad router")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	for _, tc := range []struct {
		name, want string
		err        error
	}{
		{"f16 router", "want F32", MoERouterNormed(c, f16, x, g, logits, xn, a)},
		{"two rows", "norm shape 2x64", MoERouterNormed(c, w, x, g, logits, xn, NormArgs{Rows: 2, Dim: k, Eps: 1e-6})},
		{"negative eps", "eps", MoERouterNormed(c, w, x, g, logits, xn, NormArgs{Rows: 1, Dim: k, Eps: -1})},
		{"short logits", "logits buffer", MoERouterNormed(c, w, x, g, scratch(t, "short", experts-1), xn, a)},
		{"xn is x", "two buffers apart", MoERouterNormed(c, w, x, g, logits, x, a)},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, tc.err, tc.want)
		}
	}
	if c.Err() != nil {
		t.Errorf("a refused call reached the chain: %v", c.Err())
	}
}
