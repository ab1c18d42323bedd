package ops

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// sinkUnderflow is an absolute floor under the sink tests' tolerances: WGSL
// lets an implementation flush f32 subnormals (below 1.2e-38) to zero, so a
// row whose keys keep less weight than that next to a far larger sink (its
// alpha = exp(m - sink) underflows) may come out 0, off by at most that
// weight times |v| <= 30.
const sinkUnderflow = 1e-35

// sinkMass is, for every element of Attention's output under ra, the weight
// its row's keys keep next to the row's sink: the row's sum of softmax
// weights over its keys, 1 without sinks. It is the reference's output
// with every value 1.
func sinkMass(q, k []float32, ra ref.AttentionArgs) []float64 {
	ones := make([]float32, ra.KVLen*ra.KVHeads*ra.HeadDim)
	for i := range ones {
		ones[i] = 1
	}
	out := ref.Attention(q, k, ones, ra)
	mass := make([]float64, len(out))
	for i, x := range out {
		mass[i] = float64(x)
	}
	return mass
}

// gptOSS20B is gpt-oss-20b's attention (64 query heads on 8 KV heads of 64;
// its layers alternate a 128-position sliding window, window 128 here, and
// full attention, window 0) for tokens queries from pos0 over kvLen keys.
func gptOSS20B(tokens, pos0, kvLen, window int) AttentionArgs {
	return AttentionArgs{HeadDim: 64, Heads: 64, KVHeads: 8, Tokens: tokens, Pos0: pos0, KVLen: kvLen, Window: window}
}

// attentionSinkCases: gpt-oss-20b's shape decoding at histories of 1, 130
// (past the window), 700 (split-K on every kernel that splits) and 4099 in
// its window, 3 tokens through the decode kernel and a prefill of 40 (the
// tiled kernel) from position 100, the window cutting its last 12 queries'
// keys; odd shapes: head_dim 37 (no
// vec4 rows: per-query and tiled only) with MQA 7 and GQA 3, soft-caps
// (the sink joins the capped scores), head_dim 80 and 96, a query mid
// history, no GQA (the per-query kernel's split-K), Gemma 4's 512-wide
// heads (the kernels' MAX_HD 512 builds) and a bidirectional encoder.
var attentionSinkCases = []struct {
	name string
	a    AttentionArgs
}{
	{"gpt-oss decode kv1", gptOSS20B(1, 0, 1, 0)},
	{"gpt-oss decode kv130 window128", gptOSS20B(1, 129, 130, 128)},
	{"gpt-oss decode kv700", gptOSS20B(1, 699, 700, 0)},
	{"gpt-oss decode kv4099 window128", gptOSS20B(1, 4098, 4099, 128)},
	{"gpt-oss 3 tokens at pos0 300 window128", gptOSS20B(3, 300, 303, 128)},
	{"gpt-oss prefill 40 at pos0 100 window128", gptOSS20B(40, 100, 140, 128)},
	{"prefill 5 at pos0 11 hd37 mqa7", AttentionArgs{HeadDim: 37, Heads: 7, KVHeads: 1, Tokens: 5, Pos0: 11, KVLen: 16}},
	{"prefill 45 at pos0 20 hd37 gqa3 window30 softcap", AttentionArgs{HeadDim: 37, Heads: 6, KVHeads: 2, Tokens: 45, Pos0: 20, KVLen: 65, Window: 30, Softcap: 50}},
	{"decode kv300 hd80 gqa3 softcap", AttentionArgs{HeadDim: 80, Heads: 6, KVHeads: 2, Tokens: 1, Pos0: 299, KVLen: 300, Scale: 1.0 / 12, Softcap: 50}},
	{"decode mid-history hd96 gqa4", AttentionArgs{HeadDim: 96, Heads: 8, KVHeads: 2, Tokens: 1, Pos0: 40, KVLen: 300}},
	{"decode kv2000 hd64 mha split", AttentionArgs{HeadDim: 64, Heads: 2, KVHeads: 2, Tokens: 1, Pos0: 1999, KVLen: 2000}},
	{"decode kv700 hd512 gqa8", AttentionArgs{HeadDim: 512, Heads: 8, KVHeads: 1, Tokens: 1, Pos0: 699, KVLen: 700}},
	{"bidirectional 70 hd16 gqa2", AttentionArgs{HeadDim: 16, Heads: 4, KVHeads: 2, Tokens: 70, KVLen: 70, Bidirectional: true}},
}

// sinkRuns are every kernel that takes a: the per-query kernel split as
// far as it asks and in a single pass, Attention's own choice, the tiled
// kernel's tiledRuns and, for a few tokens of a head the decode kernel
// reads and this device fits, its decodeRuns (forced splits included).
func sinkRuns(a AttentionArgs) []attentionRun {
	full := int(AttentionScratchBytes(a))
	runs := []attentionRun{
		{fmt.Sprintf("per-query with %d scratch bytes", full), full, AttentionOptions{Path: AttentionPerQuery}},
		{"per-query with 4 scratch bytes", 4, AttentionOptions{Path: AttentionPerQuery}},
		{"auto", full, AttentionOptions{}},
	}
	runs = append(runs, tiledRuns(a)...)
	if a.Tokens <= attentionDecodeMaxTokens {
		if _, err := attentionDecodeShapeFor(a, dev.Limits.MaxComputeWorkgroupStorageSize); err == nil {
			for _, r := range decodeRuns(a) {
				if r.name != "auto" {
					runs = append(runs, r)
				}
			}
		}
	}
	return runs
}

// gptOSSSinks are sink logits at gpt-oss's magnitudes, a few units: one per
// head, uniform in [-1, 9], so some heads' sinks sit above their scores and
// some below.
func gptOSSSinks(seed uint64, heads int) []float32 {
	s := randVec(seed, heads, 5)
	for i := range s {
		s[i] += 4
	}
	return s
}

// constSinks are heads sinks of about x: x plus uniform ±spread.
func constSinks(seed uint64, heads int, x, spread float32) []float32 {
	s := randVec(seed, heads, spread)
	for i := range s {
		s[i] += x
	}
	return s
}

// TestAttentionSinksMatchesReference runs attentionSinkCases through every
// kernel (sinkRuns) with sinks at gpt-oss's magnitudes and with sinks far
// above every score, at unit and at wide magnitudes, against the
// reference. Every path folds the sink in once per row, at its end: the
// split-K runs would count it once per split otherwise.
func TestAttentionSinksMatchesReference(t *testing.T) {
	for i, tc := range attentionSinkCases {
		runs := sinkRuns(tc.a)
		seed := uint64(2100 + 10*i)
		for _, sc := range []struct {
			name  string
			in    attentionInputs
			atol  float64
			sinks []float32
		}{
			// As TestAttentionMatchesReference: unit q, k, v, scores of a
			// few units, f32 sums erring by ~1e-6 relative: atol 3e-6,
			// here of the row's keys' weight (checkAttentionRuns).
			{"gpt-oss sinks", attentionInputs{QK: 1, V: 1}, 3e-6, gptOSSSinks(seed+7, tc.a.Heads)},
			// Sinks of 30 +- 1 against scores of a few units: the keys
			// keep ~1e-12 of the weight, and the output is that small.
			// Relative to it, the sums' 3e-6 plus the fold's exp at
			// x ~ -30, which WGSL allows 3 + 2|x| = 63 ulps (4e-6).
			{"dominant sinks", attentionInputs{QK: 1, V: 1}, 1e-5, constSinks(seed+7, tc.a.Heads, 30, 1)},
			// As TestAttentionWideMagnitude: scores of hundreds, spiked
			// keys, outputs up to 30 moved by a score's f32 error of
			// ~1e-5 relative: atol 1e-3 of the keys' weight.
			{"gpt-oss sinks/wide", attentionInputs{QK: 8, V: 30, Spike: 4}, 1e-3, gptOSSSinks(seed+7, tc.a.Heads)},
			// Sinks of 100 +- 10, above most rows' scores but under the
			// spiked keys': the keys keep from 1 down to e^-100 of the
			// weight. Where the sink dominates, the output is about
			// exp(s_max - sink) v_max, so a score's absolute f32 error
			// becomes the output's relative error (without a sink a
			// near one-hot softmax cancels it): dots of hundreds over up
			// to 512 terms err by a few 1e-5 (lavapipe: 4.6e-5 relative,
			// Gemma 4's 512-wide heads), times |v| <= 30, plus the fold's
			// exp at x down to -150, allowed 300 ulps (2e-5 relative):
			// atol 5e-3 of the keys' weight.
			{"dominant sinks/wide", attentionInputs{QK: 8, V: 30, Spike: 4}, 5e-3, constSinks(seed+7, tc.a.Heads, 100, 10)},
		} {
			t.Run(tc.name+"/"+sc.name, func(t *testing.T) {
				in := sc.in
				in.Sinks = sc.sinks
				checkAttentionRuns(t, seed, tc.a, in, sc.atol, 0, runs)
			})
		}
	}
}

// TestAttentionNegligibleSinksAreNone checks that sinks far below every
// score change nothing: on every kernel, sinks of -1e30 give the output
// without sinks, and both match the reference without sinks. The fold
// (sink_fold) then has alpha = 1 and l' = l + exp(-1e30 - m) = l exactly,
// and divides alpha by l' where no sink divides 1 by l: the same bits
// unless a compiler lowers the two divisions differently (lavapipe gives
// the same bits), so 2 ulps (4 f32Eps relative) at most.
func TestAttentionNegligibleSinksAreNone(t *testing.T) {
	for i, tc := range attentionSinkCases {
		a := tc.a
		t.Run(tc.name, func(t *testing.T) {
			seed := uint64(2500 + 10*i)
			qn, kvn := a.Tokens*a.Heads*a.HeadDim, a.KVLen*a.KVHeads*a.HeadDim
			q, k, v := randVec(seed, qn, 1), randVec(seed+1, kvn, 1), randVec(seed+2, kvn, 1)
			sinks := make([]float32, a.Heads)
			for h := range sinks {
				sinks[h] = -1e30
			}
			want := ref.Attention(q, k, v, refAttentionArgs(a, nil))
			bq, bk, bv := upload(t, "q", q), upload(t, "k", k), upload(t, "v", v)
			with := a
			with.Sinks = upload(t, "sinks", sinks)
			bitwise := true
			for _, r := range sinkRuns(a) {
				sc, plain, sunk := scratch(t, "scratch", (r.bytes+3)/4), scratch(t, "plain", qn), scratch(t, "sunk", qn)
				run(t, "attention", func(c *gpu.Chain) error {
					if err := AttentionWith(c, bq, bk, bv, sc, plain, a, r.o); err != nil {
						return err
					}
					return AttentionWith(c, bq, bk, bv, sc, sunk, with, r.o)
				})
				got, none := download(t, sunk, qn), download(t, plain, qn)
				// As TestAttentionMatchesReference.
				assertClose(t, r.name+" without sinks", none, want, 3e-6, 0)
				assertClose(t, r.name+" with sinks of -1e30", got, none, 0, 4*f32Eps)
				for j := range got {
					bitwise = bitwise && math.Float32bits(got[j]) == math.Float32bits(none[j])
				}
			}
			t.Logf("sinks of -1e30 give the output without sinks bit for bit on every path: %v", bitwise)
		})
	}
}

// attentionBackwardSinkCases: gpt-oss-20b's shape at a short training
// sequence and with 200 positions of history before 40 queries, so that
// its 128-position window cuts every row (the 64 heads make these two
// the slowest on lavapipe, so they run with gpt-oss's sinks alone); an odd
// head (37) with GQA 3, a window and a soft-cap, and a history before the
// queries (pos0 11).
var attentionBackwardSinkCases = []struct {
	name string
	a    AttentionArgs
	gpt  bool
}{
	{"gpt-oss 70", gptOSS20B(70, 0, 70, 0), true},
	{"gpt-oss 40 at pos0 200 window128", gptOSS20B(40, 200, 240, 128), true},
	{"hd37 gqa3 window50 softcap20 65", AttentionArgs{HeadDim: 37, Heads: 6, KVHeads: 2, Tokens: 65, KVLen: 65, Window: 50, Softcap: 20}, false},
	{"history pos0 11 window 20", AttentionArgs{HeadDim: 96, Heads: 8, KVHeads: 2, Tokens: 33, Pos0: 11, KVLen: 50, Window: 20}, false},
}

// TestAttentionBackwardSinksMatchesReference runs the backward with sinks
// at gpt-oss's magnitudes, far above the scores (the keys' P ~1e-12, and
// every gradient as small) and far below (-1e30, no sinks in effect),
// under attentionBackwardTol, which bounds the error relative to the
// gradients' own terms; then Gemma 2's cap and a near one-hot softmax
// (TestAttentionBackwardWideMagnitude) with gpt-oss sinks.
func TestAttentionBackwardSinksMatchesReference(t *testing.T) {
	for i, tc := range attentionBackwardSinkCases {
		seed := uint64(2700 + 10*i)
		negligible := make([]float32, tc.a.Heads)
		for h := range negligible {
			negligible[h] = -1e30
		}
		for _, sc := range []struct {
			name  string
			sinks []float32
		}{
			{"gpt-oss sinks", gptOSSSinks(seed+7, tc.a.Heads)},
			{"dominant sinks", constSinks(seed+7, tc.a.Heads, 30, 1)},
			{"negligible sinks", negligible},
		} {
			if tc.gpt && sc.name != "gpt-oss sinks" {
				continue
			}
			t.Run(tc.name+"/"+sc.name, func(t *testing.T) {
				checkAttentionBackward(t, seed, tc.a, attentionInputs{QK: 1, V: 1, Sinks: sc.sinks}, 1)
			})
		}
	}
	t.Run("softcap 50", func(t *testing.T) {
		a := AttentionArgs{HeadDim: 128, Heads: 4, KVHeads: 2, Tokens: 100, KVLen: 100, Scale: 1.0 / 12, Softcap: 50}
		checkAttentionBackward(t, 2800, a, attentionInputs{QK: 30, V: 100, Spike: 30, Sinks: gptOSSSinks(2807, a.Heads)}, 1e3)
	})
	t.Run("one-hot", func(t *testing.T) {
		a := AttentionArgs{HeadDim: 64, Heads: 2, KVHeads: 1, Tokens: 70, KVLen: 70, Window: 40}
		checkAttentionBackward(t, 2801, a, attentionInputs{QK: 8, V: 10, Sinks: gptOSSSinks(2808, a.Heads)}, 1e-3)
	})
}

// TestAttentionSinksRejectBadBuffers checks that a sinks buffer shorter than
// Heads, or bound as an output too, is refused by name on every forward
// path and by the backward, before anything reaches the chain, and that
// sinks sharing a read-only input's buffer are taken.
func TestAttentionSinksRejectBadBuffers(t *testing.T) {
	a := AttentionArgs{HeadDim: 64, Heads: 8, KVHeads: 2, Tokens: 1, Pos0: 4, KVLen: 5}
	qn, kvn := a.Tokens*a.Heads*a.HeadDim, a.KVLen*a.KVHeads*a.HeadDim
	q, k, v, out := upload(t, "q", make([]float32, qn)), upload(t, "k", make([]float32, kvn)), upload(t, "v", make([]float32, kvn)), scratch(t, "out", qn)
	sc := scratch(t, "scratch", 2*a.Heads) // room for sinks, not for a split
	short := scratch(t, "seven sinks", a.Heads-1)
	c, err := dev.NewChain("bad sinks")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	with := func(sinks *gpu.Buffer) AttentionArgs { b := a; b.Sinks = sinks; return b }
	for _, path := range []AttentionPath{AttentionAuto, AttentionPerQuery, AttentionTiled, AttentionDecode} {
		for _, tc := range []struct {
			what   string
			sinks  *gpu.Buffer
			scr    *gpu.Buffer
			saying string
		}{
			{"7 sinks for 8 heads", short, sc, `sinks buffer "seven sinks" holds 7 floats, need 8`},
			{"sinks as out", out, sc, `sinks "out" is also an output`},
			{"sinks as scratch", sc, sc, `sinks "scratch" is also an output`},
		} {
			err := AttentionWith(c, q, k, v, tc.scr, out, with(tc.sinks), AttentionOptions{Path: path})
			if err == nil || !strings.Contains(err.Error(), tc.saying) {
				t.Errorf("path %d, %s: %v, want an error saying %q", path, tc.what, err, tc.saying)
			}
		}
	}
	// 8 sinks in q's first floats: q is read-only too.
	if err := Attention(c, q, k, v, sc, out, with(q)); err != nil {
		t.Errorf("sinks sharing q's buffer: %v", err)
	}

	b := AttentionArgs{HeadDim: 8, Heads: 8, KVHeads: 2, Tokens: 4, KVLen: 4}
	qn, kvn = b.Tokens*b.Heads*b.HeadDim, b.KVLen*b.KVHeads*b.HeadDim
	bq, bk, bv, d := scratch(t, "q", qn), scratch(t, "k", kvn), scratch(t, "v", kvn), scratch(t, "dout", qn)
	st, dq, dk, dv := scratch(t, "stats", AttentionStatsFloats(b)), scratch(t, "dq", qn), scratch(t, "dk", kvn), scratch(t, "dv", kvn)
	for _, tc := range []struct {
		what   string
		sinks  *gpu.Buffer
		saying string
	}{
		{"7 sinks for 8 heads", short, `sinks buffer "seven sinks" holds 7 floats, need 8`},
		{"sinks as stats", st, `sinks and stats are both "stats"`},
		{"sinks as dq", dq, `sinks and dq are both "dq"`},
	} {
		bs := b
		bs.Sinks = tc.sinks
		err := AttentionBackward(c, bq, bk, bv, d, st, dq, dk, dv, bs)
		if err == nil || !strings.Contains(err.Error(), tc.saying) {
			t.Errorf("backward, %s: %v, want an error saying %q", tc.what, err, tc.saying)
		}
	}
	if c.Err() != nil {
		t.Errorf("a refused call reached the chain: %v", c.Err())
	}
}

// TestAttentionSinksReferenceMatchesSoftmax checks ref.Attention's sinks
// against the definition written out for one row: scores s_j, p_j =
// exp(s_j) / (sum_j exp(s_j) + exp(sink)), out = sum_j p_j v_j, with a sink
// below, among and above the scores, and none.
func TestAttentionSinksReferenceMatchesSoftmax(t *testing.T) {
	// One query at position 2 over 3 keys, head_dim 1, scale 1: the scores
	// are q k_j = 0.5 * (1, -2, 4) = 0.5, -1, 2.
	q, k, v := []float32{0.5}, []float32{1, -2, 4}, []float32{3, -1, 2}
	scores := []float64{0.5, -1, 2}
	for _, sink := range []float64{math.Inf(-1), -3, 1, 40} {
		den := math.Exp(sink)
		for _, s := range scores {
			den += math.Exp(s)
		}
		want := 0.0
		for j, s := range scores {
			want += math.Exp(s) / den * float64(v[j])
		}
		a := ref.AttentionArgs{HeadDim: 1, Heads: 1, KVHeads: 1, Tokens: 1, Pos0: 2, KVLen: 3, Scale: 1}
		if !math.IsInf(sink, -1) {
			a.Sinks = []float32{float32(sink)}
		}
		got := float64(ref.Attention(q, k, v, a)[0])
		if math.Abs(got-want) > 1e-7*math.Abs(want) {
			t.Errorf("sink %v: %v, want %v", sink, got, want)
		}
	}
}
