package ops

import (
	"math"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// ropeQKVNormTol bounds the relative error of a value the kernel's q/k norm
// produced: the f32 sum of at most 512 squares (a stride of 8 per
// invocation, then 6 pairwise levels: 14 roundings, 8.3e-7 of the sum,
// halved by the square root), inverseSqrt's 2 ulps (2.4e-7), the division
// by head_dim and the epsilon (1.2e-7), and the two products by inv and the
// gain (1.2e-7): 9e-7, rounded up.
const ropeQKVNormTol = 1e-6

// ropeQKVSentinel fills the caches' other rows, which the kernel must leave.
const ropeQKVSentinel = -7.25

type ropeQKVCase struct {
	name        string
	a           RoPEQKVArgs
	bias, norms bool
	factors     []float32
}

func (rc ropeQKVCase) refArgs() ref.RoPEQKVArgs {
	a := rc.a
	return ref.RoPEQKVArgs{RoPEArgs: ropeCase{a: a.RoPEArgs}.refArgs(), KVHeads: a.KVHeads, Eps: a.Eps, VNorm: a.VNorm}
}

// gemma4Factors are Gemma 4's global layers' rope_freqs at head_dim 512
// ("proportional" RoPE, a quarter of the pairs turning): 64 pairs at 1 and
// 192 at 1e30, which leaves those pairs unrotated.
func gemma4Factors() []float32 {
	f := make([]float32, 256)
	for i := range f {
		f[i] = 1
		if i >= 64 {
			f[i] = 1e30
		}
	}
	return f
}

func checkRoPEQKV(t *testing.T, rc ropeQKVCase, xScale float32) {
	t.Helper()
	a := rc.a
	hd, kvd := a.HeadDim, a.KVHeads*a.HeadDim
	w := (a.Heads + 2*a.KVHeads) * hd
	qkv := randVec(11, a.Tokens*w, xScale)
	var bias, norms []float32
	var bb, bn, bf *gpu.Buffer
	if rc.bias {
		bias = randVec(12, w, xScale/2)
		bb = upload(t, "bias", bias)
	}
	if rc.norms {
		// Gains around 1, as trained q/k norms are, some negative; q's
		// alone when there is no k.
		gains := 2
		if a.KVHeads == 0 {
			gains = 1
		}
		norms = randVec(13, gains*hd, 1.5)
		bn = upload(t, "norms", norms)
	}
	if rc.factors != nil {
		bf = upload(t, "factors", rc.factors)
	}
	bqkv, bq := upload(t, "qkv", qkv), scratch(t, "q", a.Tokens*a.Heads*hd)
	rows := a.Pos0 + a.Tokens + 2 // two rows past the batch, to stay untouched
	var bk, bv *gpu.Buffer
	if kvd > 0 {
		fill := make([]float32, rows*kvd)
		for i := range fill {
			fill[i] = ropeQKVSentinel
		}
		bk, bv = upload(t, "k cache", fill), upload(t, "v cache", fill)
	}
	run(t, rc.name, func(c *gpu.Chain) error { return RoPEQKV(c, bqkv, bb, bn, bf, bq, bk, bv, a) })
	wantQ, wantK, wantV := ref.RoPEQKV(qkv, bias, norms, rc.factors, rc.refArgs())
	gotQ := download(t, bq, a.Tokens*a.Heads*hd)
	var gotK, gotV []float32
	if kvd > 0 {
		gotK, gotV = download(t, bk, rows*kvd), download(t, bv, rows*kvd)
	}
	// qkv is only read, also where it fills the absent caches' slots.
	for i, v := range download(t, bqkv, len(qkv)) {
		if v != qkv[i] {
			t.Fatalf("%s: qkv[%d] was written: %v, was %v", rc.name, i, v, qkv[i])
		}
	}

	for i, v := range gotK[:a.Pos0*kvd] {
		if v != ropeQKVSentinel || gotV[i] != ropeQKVSentinel {
			t.Fatalf("%s: cache float %d (row %d, before pos0 %d) was written: k %v v %v", rc.name, i, i/kvd, a.Pos0, v, gotV[i])
		}
	}
	for i := (a.Pos0 + a.Tokens) * kvd; i < rows*kvd; i++ {
		if gotK[i] != ropeQKVSentinel || gotV[i] != ropeQKVSentinel {
			t.Fatalf("%s: cache float %d (row %d, past the batch) was written: k %v v %v", rc.name, i, i/kvd, gotK[i], gotV[i])
		}
	}
	batch := gotV[a.Pos0*kvd : (a.Pos0+a.Tokens)*kvd]
	if a.VNorm {
		// Normed as q and k are, without the gain's product:
		// ropeQKVNormTol bounds it.
		assertClose(t, rc.name+": v", batch, wantV, 0, ropeQKVNormTol)
	} else {
		// v is the projection plus its bias: one f32 add, the same either
		// side.
		for i, v := range batch {
			if v != wantV[i] {
				t.Fatalf("%s: v[%d] = %v, want %v", rc.name, i, v, wantV[i])
			}
		}
	}

	d := a.ropeDims()
	half := d / 2
	angleHalfUlps := float64(ropeAngleHalfUlps)
	if rc.factors != nil {
		angleHalfUlps = ropeFactorAngleHalfUlps
	}
	normTol := 0.0
	if rc.norms {
		normTol = ropeQKVNormTol
	}
	_, scaleTol := ropeScale(a.RoPEArgs)
	check := func(what string, got, want []float32, heads int) {
		for tok := range a.Tokens {
			pos := a.Pos0 + tok
			for h := range heads {
				base := (tok*heads + h) * hd
				for j := d; j < hd; j++ {
					k := base + j
					if diff := math.Abs(float64(got[k]) - float64(want[k])); !(diff <= normTol*math.Abs(float64(want[k]))) {
						t.Fatalf("%s: %s token %d head %d dim %d (past rope_dims %d) = %v, want %v", rc.name, what, tok, h, j, d, got[k], want[k])
					}
				}
				for i := range half {
					i0, i1 := base+2*i, base+2*i+1
					if a.NeoX {
						i0, i1 = base+i, base+i+half
					}
					// A rotation scaled by m keeps the pair's length times m,
					// and |x0| + |x1| <= sqrt 2 times that length, so m·(|x0| +
					// |x1|), what RoPE's tolerance scales with, is at most
					// sqrt 2 times the length of the wanted pair.
					mag := math.Sqrt2 * math.Hypot(float64(want[i0]), float64(want[i1]))
					theta := ref.RoPETheta(rc.refArgs().RoPEArgs, rc.factors, pos, i)
					tol := mag * (math.Abs(theta)*angleHalfUlps*0x1p-24 + ropeSinCosTol + scaleTol + normTol)
					for _, k := range []int{i0, i1} {
						if diff := math.Abs(float64(got[k]) - float64(want[k])); !(diff <= tol) {
							t.Fatalf("%s: %s token %d (pos %d) head %d pair %d: [%d] = %v, want %v (|diff| %.3g over %.3g)", rc.name, what, tok, pos, h, i, k, got[k], want[k], diff, tol)
						}
					}
				}
			}
		}
	}
	check("q", gotQ, wantQ, a.Heads)
	if kvd > 0 {
		check("k", gotK[a.Pos0*kvd:(a.Pos0+a.Tokens)*kvd], wantK, a.KVHeads)
	}
}

func TestRoPEQKVMatchesReference(t *testing.T) {
	rope := func(tokens, heads, hd int, neox bool, base float32, pos0 int) RoPEArgs {
		return RoPEArgs{Tokens: tokens, Heads: heads, HeadDim: hd, NeoX: neox, Base: base, Pos0: pos0}
	}
	for _, rc := range []ropeQKVCase{
		// Llama 3.2 1B's decode: GQA 4:1, head_dim 64, rope_freqs.
		{name: "llama decode", a: RoPEQKVArgs{RoPEArgs: rope(1, 8, 64, false, 500000, 37), KVHeads: 2}, factors: llama3Factors(500000, 64)},
		// Qwen 2: q, k and v biases, NeoX, a prefill from position 0 with
		// 5 heads over 1.
		{name: "qwen2 bias", a: RoPEQKVArgs{RoPEArgs: rope(3, 5, 64, true, 1e6, 0), KVHeads: 1}, bias: true},
		// Qwen 3: per-head norms, head_dim 128, 6 heads over 3.
		{name: "qwen3 norms", a: RoPEQKVArgs{RoPEArgs: rope(4, 6, 128, true, 1e6, 100), KVHeads: 3, Eps: 1e-6}, norms: true},
		// Gemma 3: norms at head_dim 256 (four strides of the workgroup),
		// linear scaling.
		{name: "gemma3 global", a: RoPEQKVArgs{RoPEArgs: RoPEArgs{Tokens: 2, Heads: 3, HeadDim: 256, NeoX: true, Base: 1e6, FreqScale: 0.125, Pos0: 5}, KVHeads: 1, Eps: 1e-6}, norms: true},
		// Partial rotation with everything on: the pass-through dims are
		// biased and normed too, both pairings.
		{name: "partial neox", a: RoPEQKVArgs{RoPEArgs: RoPEArgs{Tokens: 2, Heads: 3, HeadDim: 80, RopeDims: 32, NeoX: true, Base: 10000, Pos0: 9}, KVHeads: 3, Eps: 1e-5}, bias: true, norms: true},
		{name: "partial normal", a: RoPEQKVArgs{RoPEArgs: RoPEArgs{Tokens: 2, Heads: 3, HeadDim: 80, RopeDims: 32, Base: 10000, Pos0: 9}, KVHeads: 1, Eps: 1e-5}, norms: true},
		// Phi-3's LongRoPE: per-pair factors and attention scaling.
		{name: "longrope", a: RoPEQKVArgs{RoPEArgs: RoPEArgs{Tokens: 2, Heads: 4, HeadDim: 96, NeoX: true, Base: 10000, Pos0: 5000, AttnFactor: 1.1902}, KVHeads: 4}, factors: longFactors(48)},
		// The widest head, 256 pairs: four per invocation.
		{name: "rope 512", a: RoPEQKVArgs{RoPEArgs: rope(1, 2, 512, false, 10000, 3), KVHeads: 1, Eps: 1e-6}, norms: true, bias: true},
		// Odd everything: 7 tokens, 9 heads over 3, head_dim 6.
		{name: "ragged", a: RoPEQKVArgs{RoPEArgs: rope(7, 9, 6, true, 10000, 1), KVHeads: 3, Eps: 1e-6}, norms: true, bias: true},
		// Gemma 4's sliding layers: q/k norms and the gainless v norm at
		// head_dim 256, 8 heads over 1.
		{name: "gemma4 sliding vnorm", a: RoPEQKVArgs{RoPEArgs: rope(3, 8, 256, true, 10000, 7), KVHeads: 1, Eps: 1e-6, VNorm: true}, norms: true},
		// Its global layers: head_dim 512 (four pairs an invocation) with
		// proportional RoPE's 1e30 factors, 8 heads over 2.
		{name: "gemma4 global proportional", a: RoPEQKVArgs{RoPEArgs: rope(2, 8, 512, true, 1e6, 1000), KVHeads: 2, Eps: 1e-6, VNorm: true}, norms: true, factors: gemma4Factors()},
		// The v norm alone, after the bias, on a ragged shape.
		{name: "vnorm ragged", a: RoPEQKVArgs{RoPEArgs: rope(7, 9, 6, false, 10000, 1), KVHeads: 3, Eps: 1e-5, VNorm: true}, bias: true},
		// Queries only (Gemma 4's KV-shared layers): q's gain alone, at
		// both of Gemma 4's head dims, and a ragged one with a bias. VNorm
		// has no v to act on.
		{name: "q only sliding", a: RoPEQKVArgs{RoPEArgs: rope(3, 8, 256, true, 10000, 40), Eps: 1e-6, VNorm: true}, norms: true},
		{name: "q only global proportional", a: RoPEQKVArgs{RoPEArgs: rope(2, 8, 512, true, 1e6, 40), Eps: 1e-6}, norms: true, factors: gemma4Factors()},
		{name: "q only ragged", a: RoPEQKVArgs{RoPEArgs: rope(5, 3, 10, false, 10000, 2), Eps: 1e-6}, norms: true, bias: true},
	} {
		t.Run(rc.name, func(t *testing.T) { checkRoPEQKV(t, rc, 2) })
		// Production magnitudes: q and k of a late layer reach the
		// hundreds, where a missing or misplaced norm stands out and an
		// unnormed rotation meets its angle tolerance at full size.
		t.Run(rc.name+" wide", func(t *testing.T) { checkRoPEQKV(t, rc, 300) })
	}
}

func TestRoPEQKVRejectsBadShapes(t *testing.T) {
	a := RoPEQKVArgs{RoPEArgs: RoPEArgs{Tokens: 2, Heads: 4, HeadDim: 16, Base: 10000, Pos0: 3}, KVHeads: 2}
	w, kvd := 8*16, 2*16
	qkv, q := scratch(t, "qkv", 2*w), scratch(t, "q", 2*4*16)
	kc, vc := scratch(t, "k cache", 5*kvd), scratch(t, "v cache", 5*kvd)
	bias, norms := scratch(t, "bias", w), scratch(t, "norms", 32)
	c, err := dev.NewChain("bad rope_qkv")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	with := func(f func(a *RoPEQKVArgs)) RoPEQKVArgs { b := a; f(&b); return b }
	for _, tc := range []struct {
		what string
		err  error
	}{
		{"kv_heads -1", RoPEQKV(c, qkv, nil, nil, nil, q, kc, vc, with(func(a *RoPEQKVArgs) { a.KVHeads = -1 }))},
		{"q only with caches", RoPEQKV(c, qkv, nil, nil, nil, q, kc, vc, with(func(a *RoPEQKVArgs) { a.KVHeads = 0 }))},
		{"q only with a v cache", RoPEQKV(c, qkv, nil, nil, nil, q, nil, vc, with(func(a *RoPEQKVArgs) { a.KVHeads = 0 }))},
		{"q only, short norms", RoPEQKV(c, qkv, nil, scratch(t, "norms 15", 15), nil, q, nil, nil, with(func(a *RoPEQKVArgs) { a.KVHeads = 0 }))},
		{"q only, q is qkv", RoPEQKV(c, qkv, nil, nil, nil, qkv, nil, nil, with(func(a *RoPEQKVArgs) { a.KVHeads = 0 }))},
		{"nil k cache", RoPEQKV(c, qkv, nil, nil, nil, q, nil, vc, a)},
		{"cache past its end", RoPEQKV(c, qkv, nil, nil, nil, q, kc, vc, with(func(a *RoPEQKVArgs) { a.Pos0 = 4 }))},
		{"qkv too short", RoPEQKV(c, qkv, nil, nil, nil, q, kc, vc, with(func(a *RoPEQKVArgs) { a.KVHeads = 3 }))},
		{"odd rope_dims", RoPEQKV(c, qkv, nil, nil, nil, q, kc, vc, with(func(a *RoPEQKVArgs) { a.RopeDims = 5 }))},
		{"eps NaN", RoPEQKV(c, qkv, nil, norms, nil, q, kc, vc, with(func(a *RoPEQKVArgs) { a.Eps = float32(math.NaN()) }))},
		{"short bias", RoPEQKV(c, qkv, norms, nil, nil, q, kc, vc, a)},
		{"short norms", RoPEQKV(c, qkv, nil, scratch(t, "norms 31", 31), nil, q, kc, vc, a)},
		{"short factors", RoPEQKV(c, qkv, nil, nil, scratch(t, "factors 7", 7), q, kc, vc, a)},
		{"bias is an output", RoPEQKV(c, qkv, kc, nil, nil, q, kc, vc, a)},
		{"q is qkv", RoPEQKV(c, qkv, nil, nil, nil, qkv, kc, vc, a)},
		{"one cache", RoPEQKV(c, qkv, nil, nil, nil, q, kc, kc, a)},
		{"nil q", RoPEQKV(c, qkv, bias, nil, nil, nil, kc, vc, a)},
	} {
		if tc.err == nil {
			t.Errorf("%s: accepted", tc.what)
		}
	}
	// q only takes q's gain alone, or both gains (k's unread).
	qOnly := with(func(a *RoPEQKVArgs) { a.KVHeads = 0 })
	for _, n := range []int{16, 32} {
		if err := RoPEQKV(c, qkv, nil, scratch(t, "norms", n), nil, q, nil, nil, qOnly); err != nil {
			t.Errorf("q only with %d norm floats: %v", n, err)
		}
	}
	if c.Err() != nil {
		t.Errorf("a rejected shape reached the chain: %v", c.Err())
	}
}

// TestRoPEQKVProportionalUnrotated checks Gemma 4's proportional RoPE up to
// the last position the kernel takes, where angles are largest (queries
// only there: a cache of 2^24 rows would not fit): the pairs whose factor is
// 1e30 must come out exactly as they went in (no norm, no bias, so nothing
// else rounds them), and nothing may be NaN or inf.
func TestRoPEQKVProportionalUnrotated(t *testing.T) {
	factors := gemma4Factors()
	for _, a := range []RoPEQKVArgs{
		{RoPEArgs: RoPEArgs{Tokens: 2, Heads: 8, HeadDim: 512, NeoX: true, Base: 1e6, Pos0: ropeMaxPos - 2}},
		{RoPEArgs: RoPEArgs{Tokens: 3, Heads: 8, HeadDim: 512, NeoX: true, Base: 1e6, Pos0: 5000}, KVHeads: 2},
	} {
		hd, kvd := a.HeadDim, a.KVHeads*a.HeadDim
		w := (a.Heads + 2*a.KVHeads) * hd
		qkv := randVec(21, a.Tokens*w, 300)
		bq := scratch(t, "q", a.Tokens*a.Heads*hd)
		var bk, bv *gpu.Buffer
		if kvd > 0 {
			bk, bv = scratch(t, "k cache", (a.Pos0+a.Tokens)*kvd), scratch(t, "v cache", (a.Pos0+a.Tokens)*kvd)
		}
		run(t, "proportional", func(c *gpu.Chain) error {
			return RoPEQKV(c, upload(t, "qkv", qkv), nil, nil, upload(t, "factors", factors), bq, bk, bv, a)
		})
		half := hd / 2
		check := func(what string, got []float32, heads, first int) {
			for tok := range a.Tokens {
				for h := range heads {
					out := got[(tok*heads+h)*hd:][:hd]
					in := qkv[tok*w+(first+h)*hd:][:hd]
					for j, v := range out {
						if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
							t.Fatalf("pos0 %d: %s token %d head %d dim %d = %v", a.Pos0, what, tok, h, j, v)
						}
						if i := j % half; factors[i] == 1e30 && v != in[j] {
							t.Fatalf("pos0 %d: %s token %d head %d dim %d (pair %d, factor 1e30) = %v, want it unrotated: %v", a.Pos0, what, tok, h, j, i, v, in[j])
						}
					}
				}
			}
		}
		check("q", download(t, bq, a.Tokens*a.Heads*hd), a.Heads, 0)
		if kvd > 0 {
			rows, err := bk.ReadF32(a.Pos0*kvd, a.Tokens*kvd)
			if err != nil {
				t.Fatal(err)
			}
			check("k", rows, a.KVHeads, a.Heads)
		}
	}
}
