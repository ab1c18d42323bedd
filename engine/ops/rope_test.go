package ops

import (
	"math"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// llama3Factors are Llama 3.1's rope_freqs as convert_hf_to_gguf.py writes
// them (factor 8, low 1, high 4, original context 8192): 1 for the fast pairs,
// 8 for the slow ones, a smooth ramp between.
func llama3Factors(base float64, dims int) []float32 {
	const factor, low, high, orig = 8.0, 1.0, 4.0, 8192.0
	f := make([]float32, dims/2)
	for i := range f {
		wavelen := 2 * math.Pi / math.Pow(base, -2*float64(i)/float64(dims))
		switch {
		case wavelen < orig/high:
			f[i] = 1
		case wavelen > orig/low:
			f[i] = factor
		default:
			smooth := (orig/wavelen - low) / (high - low)
			f[i] = float32(1 / ((1-smooth)/factor + smooth))
		}
	}
	return f
}

// longFactors are LongRoPE-like long factors for n pairs: 1 for the fastest
// pair, growing to 40 for the slowest, as Phi-3.5-mini's do.
func longFactors(n int) []float32 {
	f := make([]float32, n)
	for i := range f {
		f[i] = float32(math.Pow(40, float64(i)/float64(n-1)))
	}
	return f
}

type ropeCase struct {
	name      string
	a         RoPEArgs
	factors   []float32
	positions []uint32
	xScale    float32
}

func (rc ropeCase) refArgs() ref.RoPEArgs {
	a := rc.a
	return ref.RoPEArgs{Tokens: a.Tokens, Heads: a.Heads, HeadDim: a.HeadDim, RopeDims: a.RopeDims, NeoX: a.NeoX, Base: a.Base, FreqScale: a.FreqScale, Pos0: a.Pos0, AttnFactor: a.AttnFactor}
}

func (rc ropeCase) pos(t int) int {
	if rc.positions != nil {
		return int(rc.positions[t])
	}
	return rc.a.Pos0 + t
}

// Tolerances of RoPE, per rotated pair (x0, x1), in units of |x0| + |x1|:
//
// ropeSinCosTol bounds the kernel's sincos and rotation for the f32 angle it
// computes: the Cody-Waite reduction errs by at most 6e-8 rad (checked
// against a 300-bit reduction), the Taylor polynomials' truncation and
// rounding by about 1e-7, and x0 cos - x1 sin rounds its two products and
// the difference (1.5 half-ulps, 9e-8): 2.5e-7 (measured on these cases,
// positions to 411000 included: 1.3e-7; without the polynomial's r^9 term,
// 3.9e-7).
//
// ropeAngleHalfUlps (ropeFactorAngleHalfUlps with factors) bounds that f32
// angle against the exact one, in half-ulps of |theta|: the two table
// entries and their product (1 each), the product with the position (1),
// plus WGSL's 2.5-ulp division (5) when factors divide it. Most of it cannot
// be avoided: at position 131072 half an ulp of theta is 0.008 rad, the same
// for llama.cpp and transformers, which carry theta in f32 too. (Measured:
// differences reach 0.46 of the tolerance this gives.)
//
// ropeScaleTol is the one extra rounding of sin and cos multiplied by an
// attention factor other than 1 (half an ulp, relative); the bounds above
// then scale with the factor.
const (
	ropeSinCosTol           = 2.5e-7
	ropeAngleHalfUlps       = 4 + 1 // one half-ulp of margin
	ropeFactorAngleHalfUlps = 4 + 5 + 1
)

// ropeScale is the attention factor of a and the sincos tolerance it adds.
func ropeScale(a RoPEArgs) (m, tol float64) {
	m = float64(a.attnFactor())
	if m != 1 {
		tol = 0x1p-24
	}
	return m, tol
}

// kernelTheta is the f32 angle the kernel computes for pair i at pos,
// without factors: the same roundings in the same order (products only, so
// no fused multiply-add can change it).
func kernelTheta(a RoPEArgs, pos, i int) float32 {
	lo, hi := ropeTables(a.Base, a.freqScale(), a.ropeDims())
	freq := lo[i%16] * hi[i/16]
	return float32(pos) * freq
}

func checkRoPE(t *testing.T, rc ropeCase, seed uint64) {
	t.Helper()
	a := rc.a
	n := a.Tokens * a.Heads * a.HeadDim
	x := randVec(seed, n, rc.xScale)
	want := ref.RoPE(x, rc.factors, rc.positions, rc.refArgs())

	bx := upload(t, "x", x)
	var bf, bp *gpu.Buffer
	if rc.factors != nil {
		bf = upload(t, "factors", rc.factors)
	}
	if rc.positions != nil {
		var err error
		if bp, err = dev.NewBufferFrom("positions", gpu.U32Bytes(rc.positions)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(bp.Release)
	}
	run(t, "rope", func(c *gpu.Chain) error { return RoPE(c, bx, bf, bp, a) })
	got := download(t, bx, n)

	d := a.ropeDims()
	half := d / 2
	angleHalfUlps := float64(ropeAngleHalfUlps)
	if rc.factors != nil {
		angleHalfUlps = ropeFactorAngleHalfUlps
	}
	m, scaleTol := ropeScale(a)
	for tok := range a.Tokens {
		pos := rc.pos(tok)
		for h := range a.Heads {
			base := (tok*a.Heads + h) * a.HeadDim
			for j := d; j < a.HeadDim; j++ {
				if got[base+j] != x[base+j] {
					t.Fatalf("%s: token %d head %d dim %d (past rope_dims %d) = %v, want it untouched: %v", rc.name, tok, h, j, d, got[base+j], x[base+j])
				}
			}
			for i := range half {
				i0, i1 := base+2*i, base+2*i+1
				if a.NeoX {
					i0, i1 = base+i, base+i+half
				}
				mag := math.Abs(float64(x[i0])) + math.Abs(float64(x[i1]))
				theta := ref.RoPETheta(rc.refArgs(), rc.factors, pos, i)

				// Against the exact rotation: the f32 angle's rounding plus
				// the sincos error.
				tol := m * mag * (math.Abs(theta)*angleHalfUlps*0x1p-24 + ropeSinCosTol + scaleTol)
				for _, k := range []int{i0, i1} {
					if diff := math.Abs(float64(got[k]) - float64(want[k])); !(diff <= tol) {
						t.Fatalf("%s: token %d (pos %d) head %d pair %d (theta %.6g): [%d] = %v, want %v (|diff| %.3g over %.3g)", rc.name, tok, pos, h, i, theta, k, got[k], want[k], diff, tol)
					}
				}

				// Against the exact rotation by the kernel's own f32 angle:
				// only the sincos error, whatever the position.
				if rc.factors != nil {
					continue
				}
				s, c := math.Sincos(float64(kernelTheta(a, pos, i)))
				s, c = m*s, m*c
				x0, x1 := float64(x[i0]), float64(x[i1])
				tight := m * mag * (ropeSinCosTol + scaleTol)
				for _, e := range []struct {
					k int
					v float64
				}{{i0, x0*c - x1*s}, {i1, x0*s + x1*c}} {
					if diff := math.Abs(float64(got[e.k]) - e.v); !(diff <= tight) {
						t.Fatalf("%s: token %d (pos %d) head %d pair %d, f32 theta %v: [%d] = %v, want %v (|diff| %.3g over %.3g)", rc.name, tok, pos, h, i, kernelTheta(a, pos, i), e.k, got[e.k], e.v, diff, tight)
					}
				}
			}
		}
	}
}

func TestRoPEMatchesReference(t *testing.T) {
	for _, rc := range []ropeCase{
		{name: "one pair", a: RoPEArgs{Tokens: 1, Heads: 1, HeadDim: 2, Base: 10000, Pos0: 3}},
		{name: "normal", a: RoPEArgs{Tokens: 3, Heads: 5, HeadDim: 64, Base: 10000, Pos0: 10}},
		{name: "neox", a: RoPEArgs{Tokens: 3, Heads: 5, HeadDim: 64, NeoX: true, Base: 1e6, Pos0: 10}},
		{name: "partial neox", a: RoPEArgs{Tokens: 2, Heads: 3, HeadDim: 80, RopeDims: 32, NeoX: true, Base: 10000, Pos0: 5}},
		{name: "partial normal", a: RoPEArgs{Tokens: 2, Heads: 3, HeadDim: 80, RopeDims: 32, Base: 10000, Pos0: 5}},
		// 255 and 257 pairs: one short of a workgroup and one past.
		{name: "255 pairs", a: RoPEArgs{Tokens: 1, Heads: 5, HeadDim: 102, NeoX: true, Base: 10000, Pos0: 1}},
		{name: "257 pairs", a: RoPEArgs{Tokens: 1, Heads: 257, HeadDim: 2, Base: 10000, Pos0: 1}},
		{name: "ragged", a: RoPEArgs{Tokens: 7, Heads: 9, HeadDim: 128, NeoX: true, Base: 10000}},
		{name: "factors", a: RoPEArgs{Tokens: 4, Heads: 2, HeadDim: 128, Base: 500000, Pos0: 100}, factors: llama3Factors(500000, 128)},
		{name: "positions", a: RoPEArgs{Tokens: 5, Heads: 2, HeadDim: 64, Base: 10000}, positions: []uint32{5, 0, 4097, 17, 3}},
		{name: "freq scale", a: RoPEArgs{Tokens: 3, Heads: 2, HeadDim: 64, NeoX: true, Base: 10000, FreqScale: 0.25, Pos0: 1000}},
		{name: "head 256", a: RoPEArgs{Tokens: 2, Heads: 4, HeadDim: 256, NeoX: true, Base: 10000, Pos0: 7}},
		{name: "rope 512", a: RoPEArgs{Tokens: 1, Heads: 2, HeadDim: 512, NeoX: true, Base: 10000, Pos0: 9}},
		// LongRoPE: Phi-3's per-pair factors and attention scaling
		// sqrt(1 + ln 32 / ln 4096).
		{name: "longrope", a: RoPEArgs{Tokens: 4, Heads: 3, HeadDim: 96, NeoX: true, Base: 10000, Pos0: 5000, AttnFactor: 1.1902}, factors: longFactors(48)},
		{name: "attn factor alone", a: RoPEArgs{Tokens: 3, Heads: 2, HeadDim: 64, Base: 10000, Pos0: 40, AttnFactor: 0.75}},
	} {
		rc.xScale = 2
		t.Run(rc.name, func(t *testing.T) { checkRoPE(t, rc, 1) })
	}
}

func TestRoPEWideMagnitude(t *testing.T) {
	// head_dim 2 turns at exactly 1 rad per position: 8000 positions spread
	// to 410000 sweep the sincos over every quadrant and reduced argument.
	sweep := make([]uint32, 8000)
	for i := range sweep {
		sweep[i] = uint32(i*51 + 3)
	}
	for _, rc := range []ropeCase{
		{name: "sincos sweep", a: RoPEArgs{Tokens: len(sweep), Heads: 1, HeadDim: 2, Base: 10000}, positions: sweep, xScale: 1},
		// Llama 3.1 at its full 128K context: base 500000, rope_freqs, the
		// last positions, q and k values to 3e4.
		{name: "llama3.1 128K", a: RoPEArgs{Tokens: 4, Heads: 3, HeadDim: 128, Base: 500000, Pos0: 131069}, factors: llama3Factors(500000, 128), xScale: 3e4},
		{name: "llama3 131072 no factors", a: RoPEArgs{Tokens: 4, Heads: 3, HeadDim: 128, Base: 500000, Pos0: 131069}, xScale: 3e4},
		// Gemma 3's global layers: head_dim 256, base 1e6, linear scaling 8.
		{name: "gemma3 global", a: RoPEArgs{Tokens: 3, Heads: 2, HeadDim: 256, NeoX: true, Base: 1e6, FreqScale: 0.125, Pos0: 131000}, xScale: 1e3},
		// Qwen 2.5 with YaRN factor 4 over 32768 at its 131072: the blended
		// frequencies and 1 + 0.1 ln 4.
		{name: "yarn 128K", a: RoPEArgs{Tokens: 3, Heads: 2, HeadDim: 128, NeoX: true, Base: 1e6, Pos0: 131069, AttnFactor: 1.1386294}, factors: ref.YaRNFactors(1e6, 128, 4, 32768, 32, 1, 1), xScale: 3e4},
		// Angles to the edge of the exact reduction (411774 rad) in a prefill
		// at arbitrary positions.
		{name: "theta 4e5", a: RoPEArgs{Tokens: 6, Heads: 1, HeadDim: 64, Base: 10000}, positions: []uint32{411000, 300885, 262144, 131072, 65536, 1}, xScale: 100},
	} {
		t.Run(rc.name, func(t *testing.T) { checkRoPE(t, rc, 2) })
	}
}

func TestRoPEGridWrap(t *testing.T) {
	// 70000 pairs at a workgroup of one wrap the grid into y (at the
	// dispatcher's 256 it would take 16.8M pairs); the index code is the same.
	rc := ropeCase{name: "wrap", a: RoPEArgs{Tokens: 1000, Heads: 7, HeadDim: 20, NeoX: true, Base: 10000}, xScale: 2}
	a := rc.a
	n := a.Tokens * a.Heads * a.HeadDim
	grid := gpu.Grid(n/2, 1)
	if grid[1] < 2 {
		t.Fatalf("grid %v does not wrap", grid)
	}
	x := randVec(3, n, 2)
	bx := upload(t, "x", x)
	run(t, "rope wrap", func(c *gpu.Chain) error {
		return dispatch(c, gpu.Spec("rope", "rope", "WG", 1), a.params(false, false), grid, bx, bx, bx)
	})
	// Positions below 1000: the angle term is under 1e-4 of |x|.
	assertClose(t, "rope wrap", download(t, bx, n), ref.RoPE(x, nil, nil, rc.refArgs()), 1e-4, 0)
}

func TestRoPERejectsBadShapes(t *testing.T) {
	x, f8, f7, pos := scratch(t, "x", 2*3*16), scratch(t, "factors", 8), scratch(t, "factors7", 7), scratch(t, "positions", 2)
	c, err := dev.NewChain("bad rope")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	ok := RoPEArgs{Tokens: 2, Heads: 3, HeadDim: 16, Base: 10000}
	with := func(f func(a *RoPEArgs)) RoPEArgs { a := ok; f(&a); return a }
	for _, tc := range []struct {
		what string
		err  error
	}{
		{"tokens 0", RoPE(c, x, nil, nil, with(func(a *RoPEArgs) { a.Tokens = 0 }))},
		{"x too short", RoPE(c, x, nil, nil, with(func(a *RoPEArgs) { a.Tokens = 3 }))},
		{"odd rope_dims", RoPE(c, x, nil, nil, with(func(a *RoPEArgs) { a.RopeDims = 7 }))},
		{"rope_dims over head_dim", RoPE(c, x, nil, nil, with(func(a *RoPEArgs) { a.RopeDims = 18 }))},
		{"rope_dims over 512", RoPE(c, scratch(t, "big", 1024), nil, nil, RoPEArgs{Tokens: 1, Heads: 1, HeadDim: 1024, Base: 10000})},
		{"odd head_dim", RoPE(c, x, nil, nil, with(func(a *RoPEArgs) { a.HeadDim = 15 }))},
		{"base 0", RoPE(c, x, nil, nil, with(func(a *RoPEArgs) { a.Base = 0 }))},
		{"base NaN", RoPE(c, x, nil, nil, with(func(a *RoPEArgs) { a.Base = float32(math.NaN()) }))},
		{"freq_scale < 0", RoPE(c, x, nil, nil, with(func(a *RoPEArgs) { a.FreqScale = -1 }))},
		{"attn_factor < 0", RoPE(c, x, nil, nil, with(func(a *RoPEArgs) { a.AttnFactor = -1 }))},
		{"attn_factor Inf", RoPE(c, x, nil, nil, with(func(a *RoPEArgs) { a.AttnFactor = float32(math.Inf(1)) }))},
		{"pos0 < 0", RoPE(c, x, nil, nil, with(func(a *RoPEArgs) { a.Pos0 = -1 }))},
		{"positions past 2^24", RoPE(c, x, nil, nil, with(func(a *RoPEArgs) { a.Pos0 = 1<<24 - 1 }))},
		{"short factors", RoPE(c, x, f7, nil, ok)},
		{"factors are x", RoPE(c, x, x, nil, ok)},
		{"short positions", RoPE(c, x, f8, scratch(t, "one position", 1), ok)},
		{"positions are x", RoPE(c, x, nil, x, ok)},
		{"pos0 with positions", RoPE(c, x, nil, pos, with(func(a *RoPEArgs) { a.Pos0 = 4 }))},
		{"nil x", RoPE(c, nil, nil, nil, ok)},
	} {
		if tc.err == nil {
			t.Errorf("%s: accepted", tc.what)
		}
	}
	if c.Err() != nil {
		t.Errorf("a rejected shape reached the chain: %v", c.Err())
	}
}
