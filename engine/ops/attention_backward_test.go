package ops

import (
	"fmt"
	"math"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// attentionBackwardTol bounds the kernel's error on every element of dq, dk
// and dv by following the reference's loops with absolute values: a
// first-order sum of each f32 rounding the kernel makes, times the size of
// what it rounds, doubled. With G = 4 invocations per row in the dot
// products and a rounding per added term (f32Eps each):
//   - a dot product over head_dim carries head_dim/4 + 6 roundings of the
//     sum of |terms| (eDot);
//   - the log-sum-exp, summed key by key by one invocation, n + 4 of l, and
//     the subtraction s - lse 2 of |s| + |lse|; with the scores' own error
//     that is an absolute error of the exponent, which exp turns into a
//     relative error of P, plus WGSL's exp allowance of 3 + 2|x| ulps;
//   - delta = sum P dP carries n + 4 of sum P |dP| plus P's and dP's errors;
//   - the soft-cap derivative 4e/(1+e)^2 moves by 2/c per unit of error in
//     the capped score, plus 6 + 4|z/c| roundings through exp;
//   - each gradient sums its terms in G groups: n/4 + 6 roundings of
//     sum |term|;
//   - a sink (sinks[h], nil for none) is folded into l and delta after the
//     keys: alpha = exp(m - m') and e = exp(sink - m'), m' = max(m, sink)
//     (one of them exactly 1), err by WGSL's 3 + 2|x| ulps, alpha on the
//     keys' part of l and e on its own share e/l, and the fold rounds 4
//     more times: a relative error of l, so of every P, and of delta.
func attentionBackwardTol(q, k, v, dout []float32, a AttentionArgs, sinks []float32) (tq, tk, tv []float64) {
	hd := a.HeadDim
	scale := float64(a.scale())
	group := a.Heads / a.KVHeads
	c := float64(a.Softcap)
	eDot := (float64(hd)/4 + 6) * f32Eps
	eAcc := func(n int) float64 { return (float64(n)/4 + 6) * f32Eps }
	tq = make([]float64, a.Tokens*a.Heads*hd)
	tk, tv = make([]float64, a.KVLen*a.KVHeads*hd), make([]float64, a.KVLen*a.KVHeads*hd)
	magK, magV := make([]float64, len(tk)), make([]float64, len(tv))
	rowsSeeing := make([]int, a.KVLen*a.KVHeads)
	for t := range a.Tokens {
		i := a.Pos0 + t
		j0, j1 := 0, min(i+1, a.KVLen)
		if a.Window > 0 {
			j0 = max(0, i+1-a.Window)
		}
		n := j1 - j0
		for h := range a.Heads {
			qo, kvh := (t*a.Heads+h)*hd, h/group
			s, sAbs, dp, dpAbs, dcap, z := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
			m, sAbsMax := math.Inf(-1), 0.0
			for jj := range n {
				ko := ((j0+jj)*a.KVHeads + kvh) * hd
				for d := range hd {
					qk := float64(q[qo+d]) * float64(k[ko+d])
					ov := float64(dout[qo+d]) * float64(v[ko+d])
					s[jj] += qk
					sAbs[jj] += math.Abs(qk)
					dp[jj] += ov
					dpAbs[jj] += math.Abs(ov)
				}
				z[jj], sAbs[jj] = s[jj]*scale, sAbs[jj]*scale
				s[jj], dcap[jj] = z[jj], 1
				if c > 0 {
					th := math.Tanh(z[jj] / c)
					s[jj], dcap[jj] = c*th, 1-th*th
				}
				m, sAbsMax = math.Max(m, s[jj]), math.Max(sAbsMax, sAbs[jj])
			}
			l := 0.0
			for jj := range n {
				l += math.Exp(s[jj] - m)
			}
			fold := 0.0
			if sinks != nil {
				sk := float64(sinks[h])
				mf := math.Max(m, sk)
				e := math.Exp(sk - mf)
				l = l*math.Exp(m-mf) + e
				fold = (10 + 2*(mf-m) + 2*(mf-sk)*e/l) * f32Eps
				m = mf
			}
			lse := m + math.Log(l)
			p, relP := make([]float64, n), make([]float64, n)
			delta, deltaAbs, errDelta := 0.0, 0.0, 0.0
			for jj := range n {
				p[jj] = math.Exp(s[jj] - lse)
				arg := eDot*(sAbs[jj]+sAbsMax) + float64(n+4)*f32Eps + 2*f32Eps*(math.Abs(s[jj])+math.Abs(lse)) + fold
				relP[jj] = arg + (3+2*math.Abs(s[jj]-lse))*f32Eps
				delta += p[jj] * dp[jj]
				deltaAbs += p[jj] * dpAbs[jj]
				errDelta += p[jj] * (relP[jj]*math.Abs(dp[jj]) + eDot*dpAbs[jj])
			}
			errDelta += (float64(n+4)*f32Eps + fold) * deltaAbs
			for jj := range n {
				j := j0 + jj
				dz := p[jj] * (dp[jj] - delta) * dcap[jj] * scale
				relCap := 0.0
				if c > 0 {
					relCap = (6+4*math.Abs(z[jj]/c))*f32Eps + 2*eDot*sAbs[jj]/c
				}
				dzErr := scale*dcap[jj]*p[jj]*(relP[jj]*math.Abs(dp[jj]-delta)+eDot*dpAbs[jj]+errDelta) + math.Abs(dz)*relCap
				ko := (j*a.KVHeads + kvh) * hd
				rowsSeeing[j*a.KVHeads+kvh]++
				for d := range hd {
					kd, qd, od := math.Abs(float64(k[ko+d])), math.Abs(float64(q[qo+d])), math.Abs(float64(dout[qo+d]))
					tq[qo+d] += dzErr*kd + eAcc(n)*math.Abs(dz)*kd
					tk[ko+d] += dzErr * qd
					magK[ko+d] += math.Abs(dz) * qd
					tv[ko+d] += p[jj] * relP[jj] * od
					magV[ko+d] += p[jj] * od
				}
			}
		}
	}
	for i := range tk {
		rows := rowsSeeing[i/hd]
		tk[i] = 2 * (tk[i] + eAcc(rows)*magK[i])
		tv[i] = 2 * (tv[i] + eAcc(rows)*magV[i])
	}
	for i := range tq {
		tq[i] *= 2
	}
	return tq, tk, tv
}

// checkAttentionBackward runs AttentionBackward on random inputs of the
// given magnitudes (in.QK for q and k, in.V for v, dScale for dout, every
// 97th key spiked as in attention_test.go) and compares with the float64
// reference under attentionBackwardTol. The K and V buffers hold 3 slots
// past KVLen filled with NaN, so a read past the history poisons the
// gradients.
func checkAttentionBackward(t *testing.T, seed uint64, a AttentionArgs, in attentionInputs, dScale float32) {
	t.Helper()
	qn, kvn := a.Tokens*a.Heads*a.HeadDim, a.KVLen*a.KVHeads*a.HeadDim
	pad := 3 * a.KVHeads * a.HeadDim
	q, dout := randVec(seed, qn, in.QK), randVec(seed+1, qn, dScale)
	k, v := randVec(seed+2, kvn+pad, in.QK), randVec(seed+3, kvn+pad, in.V)
	if in.Spike > 0 {
		row := a.KVHeads * a.HeadDim
		for j := 50; j < a.KVLen; j += 97 {
			for d := range row {
				k[j*row+d] *= in.Spike
			}
		}
	}
	nan := float32(math.NaN())
	for i := kvn; i < kvn+pad; i++ {
		k[i], v[i] = nan, nan
	}
	wq, wk, wv := ref.AttentionBackward(q, k[:kvn], v[:kvn], dout, refAttentionArgs(a, in.Sinks))
	tq, tk, tv := attentionBackwardTol(q, k[:kvn], v[:kvn], dout, a, in.Sinks)
	if in.Sinks != nil {
		a.Sinks = upload(t, "sinks", in.Sinks)
	}

	bq, bk, bv, bd := upload(t, "q", q), upload(t, "k", k), upload(t, "v", v), upload(t, "dout", dout)
	st := scratch(t, "stats", AttentionStatsFloats(a))
	dq, dk, dv := scratch(t, "dq", qn), scratch(t, "dk", kvn), scratch(t, "dv", kvn)
	run(t, "attention backward", func(c *gpu.Chain) error { return AttentionBackward(c, bq, bk, bv, bd, st, dq, dk, dv, a) })
	gq, gk, gv := download(t, dq, qn), download(t, dk, kvn), download(t, dv, kvn)
	assertWithin(t, "dq", gq, wq, tq)
	assertWithin(t, "dk", gk, wk, tk)
	assertWithin(t, "dv", gv, wv, tv)

	run(t, "attention backward again", func(c *gpu.Chain) error { return AttentionBackward(c, bq, bk, bv, bd, st, dq, dk, dv, a) })
	for _, r := range []struct {
		what  string
		buf   *gpu.Buffer
		first []float32
		n     int
	}{{"dq", dq, gq, qn}, {"dk", dk, gk, kvn}, {"dv", dv, gv, kvn}} {
		for i, x := range download(t, r.buf, r.n) {
			if math.Float32bits(x) != math.Float32bits(r.first[i]) {
				t.Fatalf("%s[%d]: %v on a second run, %v on the first: not deterministic", r.what, i, x, r.first[i])
			}
		}
	}
}

// attentionBackwardCases: GQA ratios 1, 2, 3 and 4 and MQA; head widths 1,
// 8, 72, 96, 256 and 512 (Gemma 4's global heads, unscaled, with its one
// KV head of eight queries; 300, ragged past the narrow kernel's 256);
// sequences of 1, one tile +- 1 and a training
// sequence of 512; windows shorter than the sequence; soft-caps; a
// history longer than the queries (pos0 > 0), whose last slots no query
// sees.
var attentionBackwardCases = []struct {
	name string
	a    AttentionArgs
}{
	{"one token", AttentionArgs{HeadDim: 8, Heads: 2, KVHeads: 1, Tokens: 1, KVLen: 1}},
	{"hd1 5 tokens", AttentionArgs{HeadDim: 1, Heads: 3, KVHeads: 3, Tokens: 5, KVLen: 5}},
	{"hd8 gqa2 63", AttentionArgs{HeadDim: 8, Heads: 2, KVHeads: 1, Tokens: 63, KVLen: 63}},
	{"hd72 gqa3 65", AttentionArgs{HeadDim: 72, Heads: 6, KVHeads: 2, Tokens: 65, KVLen: 65}},
	{"hd64 mqa4 window50 softcap20", AttentionArgs{HeadDim: 64, Heads: 4, KVHeads: 1, Tokens: 130, KVLen: 130, Window: 50, Softcap: 20}},
	{"hd256 64", AttentionArgs{HeadDim: 256, Heads: 2, KVHeads: 2, Tokens: 64, KVLen: 64, Scale: 1.0 / 16}},
	{"hd512 gqa8 unscaled 70", AttentionArgs{HeadDim: 512, Heads: 8, KVHeads: 1, Tokens: 70, KVLen: 70, Scale: 1}},
	{"hd300 window 20", AttentionArgs{HeadDim: 300, Heads: 2, KVHeads: 1, Tokens: 40, KVLen: 40, Window: 20, Scale: 1.0 / 16}},
	{"history pos0 11 window 20", AttentionArgs{HeadDim: 96, Heads: 8, KVHeads: 2, Tokens: 33, Pos0: 11, KVLen: 50, Window: 20}},
	{"training 512", AttentionArgs{HeadDim: 64, Heads: 2, KVHeads: 1, Tokens: 512, KVLen: 512}},
}

func TestAttentionBackwardMatchesReference(t *testing.T) {
	for i, tc := range attentionBackwardCases {
		t.Run(tc.name, func(t *testing.T) {
			checkAttentionBackward(t, uint64(200+10*i), tc.a, attentionInputs{QK: 1, V: 1}, 1)
		})
	}
}

func TestAttentionBackwardWideMagnitude(t *testing.T) {
	// Gemma 2's attention soft-cap of 50 against scores in the hundreds
	// (q, k of +-30 at scale 1/12: most scores saturate, s' down to 1e-10
	// and below), values of +-100 with an outlier key 30 times the others,
	// and upstream gradients of +-1e3; then no cap, scores of +-100, where
	// the softmax is all but one-hot and exp sees arguments of -200.
	t.Run("softcap 50", func(t *testing.T) {
		a := AttentionArgs{HeadDim: 128, Heads: 4, KVHeads: 2, Tokens: 100, KVLen: 100, Scale: 1.0 / 12, Softcap: 50}
		checkAttentionBackward(t, 300, a, attentionInputs{QK: 30, V: 100, Spike: 30}, 1e3)
	})
	t.Run("one-hot", func(t *testing.T) {
		a := AttentionArgs{HeadDim: 64, Heads: 2, KVHeads: 1, Tokens: 70, KVLen: 70, Window: 40}
		checkAttentionBackward(t, 301, a, attentionInputs{QK: 8, V: 10}, 1e-3)
	})
}

func TestAttentionBackwardReferenceMatchesFiniteDifferences(t *testing.T) {
	// Small enough to difference every input: 6 queries after a history
	// of 2, a window of 4, GQA 2, head_dim 5, a scale of 0.7 so that the
	// scores move the softmax, and a soft-cap of 3 against scores of up to
	// ~4, where the cap's derivative is far from 1 (a missing s' would be
	// off by half). With sinks, one per head among the scores (-1 to 2.5),
	// so each takes a real share of its rows' weight: a gradient that left
	// the sink out of the denominator would be off by that share. The
	// outputs are (sub-)convex combinations of values in +-1 and a
	// perturbation moves at most the 40 outputs of the rows that see it:
	// f32 rounding of 40 * 6e-8 over the step of 0.05 is 5e-5 at worst
	// (random signs: 8e-6); the extrapolated truncation, h^4 |f^(5)| / 30,
	// about 1e-6 for derivatives of order 5. 1e-4 of the largest |grad|.
	for _, softcap := range []float32{0, 3} {
		for _, sinks := range [][]float32{nil, {0.5, -1, 2.5, 1}} {
			a := ref.AttentionArgs{HeadDim: 5, Heads: 4, KVHeads: 2, Tokens: 6, Pos0: 2, KVLen: 8, Scale: 0.7, Window: 4, Softcap: softcap, Sinks: sinks}
			qn, kvn := a.Tokens*a.Heads*a.HeadDim, a.KVLen*a.KVHeads*a.HeadDim
			q, k, v, dout := randVec(310, qn, 1.5), randVec(311, kvn, 1.5), randVec(312, kvn, 1), randVec(313, qn, 1)
			dq, dk, dv := ref.AttentionBackward(q, k, v, dout, a)
			name := "softcap 3"
			if softcap == 0 {
				name = "no softcap"
			}
			if sinks != nil {
				name += " sinks"
			}
			checkFiniteDiff(t, name+" dq", func(q []float32) []float32 { return ref.Attention(q, k, v, a) }, q, dout, dq, 0.05, 1e-4)
			checkFiniteDiff(t, name+" dk", func(k []float32) []float32 { return ref.Attention(q, k, v, a) }, k, dout, dk, 0.05, 1e-4)
			checkFiniteDiff(t, name+" dv", func(v []float32) []float32 { return ref.Attention(q, k, v, a) }, v, dout, dv, 0.05, 1e-4)
		}
	}
}

func TestAttentionBackwardRejectsBadShapes(t *testing.T) {
	ok := AttentionArgs{HeadDim: 8, Heads: 2, KVHeads: 1, Tokens: 4, KVLen: 4}
	qn, kvn := 4*2*8, 4*8
	q, k, v, d := scratch(t, "q", qn), scratch(t, "k", kvn), scratch(t, "v", kvn), scratch(t, "dout", qn)
	st, dq, dk, dv := scratch(t, "stats", AttentionStatsFloats(ok)), scratch(t, "dq", qn), scratch(t, "dk", kvn), scratch(t, "dv", kvn)
	short := scratch(t, "short", 7)
	c, err := dev.NewChain("bad attention backward")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	with := func(f func(a *AttentionArgs)) AttentionArgs { a := ok; f(&a); return a }
	for _, tc := range []struct {
		what string
		err  error
	}{
		{"head_dim 257", AttentionBackward(c, q, k, v, d, st, dq, dk, dv, with(func(a *AttentionArgs) { a.HeadDim = 257 }))},
		{"heads not a multiple", AttentionBackward(c, q, k, v, d, st, dq, dk, dv, with(func(a *AttentionArgs) { a.Heads, a.KVHeads = 3, 2 }))},
		{"kv_len short of the queries", AttentionBackward(c, q, k, v, d, st, dq, dk, dv, with(func(a *AttentionArgs) { a.KVLen = 3 }))},
		{"kv_len over 65535", AttentionBackward(c, q, k, v, d, st, dq, dk, dv, with(func(a *AttentionArgs) { a.KVLen = 70000 }))},
		{"softcap NaN", AttentionBackward(c, q, k, v, d, st, dq, dk, dv, with(func(a *AttentionArgs) { a.Softcap = float32(math.NaN()) }))},
		{"short k", AttentionBackward(c, q, short, v, d, st, dq, dk, dv, ok)},
		{"short dout", AttentionBackward(c, q, k, v, short, st, dq, dk, dv, ok)},
		{"short stats", AttentionBackward(c, q, k, v, d, short, dq, dk, dv, ok)},
		{"short dv", AttentionBackward(c, q, k, v, d, st, dq, dk, short, ok)},
		{"nil dq", AttentionBackward(c, q, k, v, d, st, nil, dk, dv, ok)},
		{"dk is dv", AttentionBackward(c, q, k, v, d, st, dq, dk, dk, ok)},
		{"dq is q", AttentionBackward(c, q, k, v, d, st, q, dk, dv, ok)},
		{"stats is dout", AttentionBackward(c, q, k, v, d, d, dq, dk, dv, ok)},
	} {
		if tc.err == nil {
			t.Errorf("%s: accepted", tc.what)
		}
	}
	if c.Err() != nil {
		t.Errorf("a rejected shape reached the chain: %v", c.Err())
	}
}

// BenchmarkAttentionBackward times the three dispatches of
// AttentionBackward at training shapes (a 512-token sequence) next to the
// forward over the same shape, so that the ratio shows what the backward
// costs; on lavapipe the shapes shrink to 128 tokens.
//
// On the H200 through Vulkan (20 runs of 5 calls each): Llama 3 8B shapes
// forward 1274 µs, backward 4602 µs (stats 1469, dq 1683, dk/dv 1689);
// Gemma 2 2B with its cap forward 506 µs, backward 2390 µs (744, 742, 761).
// Each pass streams rows like the forward and costs about as much: the K and
// V rows are re-read by every query head of a GQA group and the q and dout
// rows by every key. Sharing those loads (a workgroup per KV head and token
// for stats and dq, several keys per workgroup for dk/dv) is the next step;
// at these shapes the projections' matmuls still cost far more.
func BenchmarkAttentionBackward(b *testing.B) {
	tokens := 512
	if dev.Info.Type == "cpu" {
		tokens = 128
	}
	for _, bc := range []struct {
		name string
		a    AttentionArgs
	}{
		{"llama8b", AttentionArgs{HeadDim: 128, Heads: 32, KVHeads: 8, Tokens: tokens, KVLen: tokens}},
		{"gemma2-2b softcap", AttentionArgs{HeadDim: 256, Heads: 8, KVHeads: 4, Tokens: tokens, KVLen: tokens, Softcap: 50}},
	} {
		a := bc.a
		qn, kvn := a.Tokens*a.Heads*a.HeadDim, a.KVLen*a.KVHeads*a.HeadDim
		q, k, v, d := upload(b, "q", randVec(1, qn, 1)), upload(b, "k", randVec(2, kvn, 1)), upload(b, "v", randVec(3, kvn, 1)), upload(b, "dout", randVec(4, qn, 1))
		st, dq, dk, dv := scratch(b, "stats", AttentionStatsFloats(a)), scratch(b, "dq", qn), scratch(b, "dk", kvn), scratch(b, "dv", kvn)
		out, sc := scratch(b, "out", qn), scratch(b, "scratch", 1)
		b.Run(fmt.Sprintf("%s T%d/forward", bc.name, tokens), func(b *testing.B) {
			benchDispatches(b, 5, 0, out, func(c *gpu.Chain) error { return Attention(c, q, k, v, sc, out, a) })
		})
		b.Run(fmt.Sprintf("%s T%d/backward", bc.name, tokens), func(b *testing.B) {
			benchDispatches(b, 5, 0, dv, func(c *gpu.Chain) error { return AttentionBackward(c, q, k, v, d, st, dq, dk, dv, a) })
		})
	}
}
