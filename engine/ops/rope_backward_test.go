package ops

import (
	"math"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// ropeBuffers uploads a case's factors and positions (nil when absent).
func ropeBuffers(t *testing.T, rc ropeCase) (factors, positions *gpu.Buffer) {
	t.Helper()
	if rc.factors != nil {
		factors = upload(t, "factors", rc.factors)
	}
	if rc.positions != nil {
		var err error
		if positions, err = dev.NewBufferFrom("positions", gpu.U32Bytes(rc.positions)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(positions.Release)
	}
	return factors, positions
}

// checkRoPEBackward compares RoPEBackward with the float64 reference under
// the forward's tolerances (rope_test.go: the f32 angle's rounding plus the
// sincos error, and the sincos error alone against a rotation by the
// kernel's own f32 angle), then checks that RoPE followed by RoPEBackward
// gives x back: the same f32 angle both ways, so only twice the sincos and
// rotation error, ropeSinCosTol each, remains at any position.
func checkRoPEBackward(t *testing.T, rc ropeCase, seed uint64) {
	t.Helper()
	a := rc.a
	n := a.Tokens * a.Heads * a.HeadDim
	dy := randVec(seed, n, rc.xScale)
	want := ref.RoPEBackward(dy, rc.factors, rc.positions, rc.refArgs())
	bf, bp := ropeBuffers(t, rc)
	bdy := upload(t, "dy", dy)
	run(t, "rope backward", func(c *gpu.Chain) error { return RoPEBackward(c, bdy, bf, bp, a) })
	got := download(t, bdy, n)

	x := randVec(seed+1, n, rc.xScale)
	bx := upload(t, "x", x)
	run(t, "rope round trip", func(c *gpu.Chain) error {
		if err := RoPE(c, bx, bf, bp, a); err != nil {
			return err
		}
		return RoPEBackward(c, bx, bf, bp, a)
	})
	back := download(t, bx, n)

	d := a.ropeDims()
	half := d / 2
	angleHalfUlps := float64(ropeAngleHalfUlps)
	if rc.factors != nil {
		angleHalfUlps = ropeFactorAngleHalfUlps
	}
	m, scaleTol := ropeScale(a)
	worst, worstTrip := 0.0, 0.0
	for tok := range a.Tokens {
		pos := rc.pos(tok)
		for h := range a.Heads {
			base := (tok*a.Heads + h) * a.HeadDim
			for j := d; j < a.HeadDim; j++ {
				if got[base+j] != dy[base+j] || back[base+j] != x[base+j] {
					t.Fatalf("%s: token %d head %d dim %d (past rope_dims %d) changed", rc.name, tok, h, j, d)
				}
			}
			for i := range half {
				i0, i1 := base+2*i, base+2*i+1
				if a.NeoX {
					i0, i1 = base+i, base+i+half
				}
				mag := math.Abs(float64(dy[i0])) + math.Abs(float64(dy[i1]))
				theta := ref.RoPETheta(rc.refArgs(), rc.factors, pos, i)
				tol := m * mag * (math.Abs(theta)*angleHalfUlps*f32Eps + ropeSinCosTol + scaleTol)
				g0, g1 := float64(dy[i0]), float64(dy[i1])
				exact := [2]float64{float64(want[i0]), float64(want[i1])}
				tight := math.Inf(1)
				if rc.factors == nil {
					s, c := math.Sincos(float64(kernelTheta(a, pos, i)))
					s, c = m*s, m*c
					exact = [2]float64{g0*c + g1*s, -g0*s + g1*c}
					tight = m * mag * (ropeSinCosTol + scaleTol)
				}
				for e, k := range []int{i0, i1} {
					diff := math.Abs(float64(got[k]) - float64(want[k]))
					tightDiff := math.Abs(float64(got[k]) - exact[e])
					if !(diff <= tol) || !(tightDiff <= tight) {
						t.Fatalf("%s: token %d (pos %d) head %d pair %d (theta %.6g): [%d] = %v, want %v (|diff| %.3g over %.3g; against the f32 angle's rotation %.3g over %.3g)",
							rc.name, tok, pos, h, i, theta, k, got[k], want[k], diff, tol, tightDiff, tight)
					}
					worst = math.Max(worst, diff/tol)
				}
				xmag := math.Abs(float64(x[i0])) + math.Abs(float64(x[i1]))
				// The round trip scales by the attention factor twice.
				tripTol := 2 * (ropeSinCosTol + scaleTol) * m * m * xmag
				for _, k := range []int{i0, i1} {
					diff := math.Abs(float64(back[k]) - m*m*float64(x[k]))
					if !(diff <= tripTol) {
						t.Fatalf("%s: round trip token %d head %d pair %d: [%d] = %v, want %v back (|diff| %.3g over %.3g)", rc.name, tok, h, i, k, back[k], m*m*float64(x[k]), diff, tripTol)
					}
					worstTrip = math.Max(worstTrip, diff/tripTol)
				}
			}
		}
	}
	t.Logf("%s: worst error %.2g of the tolerance, round trip %.2g", rc.name, worst, worstTrip)
}

func TestRoPEBackwardMatchesReference(t *testing.T) {
	for _, rc := range []ropeCase{
		{name: "one pair", a: RoPEArgs{Tokens: 1, Heads: 1, HeadDim: 2, Base: 10000, Pos0: 3}},
		{name: "normal", a: RoPEArgs{Tokens: 3, Heads: 5, HeadDim: 64, Base: 10000, Pos0: 10}},
		{name: "neox", a: RoPEArgs{Tokens: 3, Heads: 5, HeadDim: 64, NeoX: true, Base: 1e6, Pos0: 10}},
		{name: "partial neox", a: RoPEArgs{Tokens: 2, Heads: 3, HeadDim: 80, RopeDims: 32, NeoX: true, Base: 10000, Pos0: 5}},
		{name: "partial normal", a: RoPEArgs{Tokens: 2, Heads: 3, HeadDim: 80, RopeDims: 32, Base: 10000, Pos0: 5}},
		{name: "255 pairs", a: RoPEArgs{Tokens: 1, Heads: 5, HeadDim: 102, NeoX: true, Base: 10000, Pos0: 1}},
		{name: "257 pairs", a: RoPEArgs{Tokens: 1, Heads: 257, HeadDim: 2, Base: 10000, Pos0: 1}},
		{name: "factors", a: RoPEArgs{Tokens: 4, Heads: 2, HeadDim: 128, Base: 500000, Pos0: 100}, factors: llama3Factors(500000, 128)},
		{name: "positions", a: RoPEArgs{Tokens: 5, Heads: 2, HeadDim: 64, Base: 10000}, positions: []uint32{5, 0, 4097, 17, 3}},
		{name: "freq scale", a: RoPEArgs{Tokens: 3, Heads: 2, HeadDim: 64, NeoX: true, Base: 10000, FreqScale: 0.25, Pos0: 1000}},
		{name: "head 256", a: RoPEArgs{Tokens: 2, Heads: 4, HeadDim: 256, NeoX: true, Base: 10000, Pos0: 7}},
		{name: "longrope", a: RoPEArgs{Tokens: 4, Heads: 3, HeadDim: 96, NeoX: true, Base: 10000, Pos0: 5000, AttnFactor: 1.1902}, factors: longFactors(48)},
		{name: "attn factor alone", a: RoPEArgs{Tokens: 3, Heads: 2, HeadDim: 64, Base: 10000, Pos0: 40, AttnFactor: 0.75}},
	} {
		rc.xScale = 2
		t.Run(rc.name, func(t *testing.T) { checkRoPEBackward(t, rc, 60) })
	}
}

func TestRoPEBackwardWideMagnitude(t *testing.T) {
	// The forward's long-context cases, with gradients of up to 3e4: Llama
	// 3.1 at 128K with rope_freqs, Gemma 3's scaled global layers, and
	// angles near the end of the kernel's exact reduction.
	for _, rc := range []ropeCase{
		{name: "llama3.1 128K", a: RoPEArgs{Tokens: 4, Heads: 3, HeadDim: 128, Base: 500000, Pos0: 131069}, factors: llama3Factors(500000, 128), xScale: 3e4},
		{name: "gemma3 global", a: RoPEArgs{Tokens: 3, Heads: 2, HeadDim: 256, NeoX: true, Base: 1e6, FreqScale: 0.125, Pos0: 131000}, xScale: 1e3},
		{name: "yarn 128K", a: RoPEArgs{Tokens: 3, Heads: 2, HeadDim: 128, NeoX: true, Base: 1e6, Pos0: 131069, AttnFactor: 1.1386294}, factors: ref.YaRNFactors(1e6, 128, 4, 32768, 32, 1, 1), xScale: 3e4},
		{name: "theta 4e5", a: RoPEArgs{Tokens: 6, Heads: 1, HeadDim: 64, Base: 10000}, positions: []uint32{411000, 300885, 262144, 131072, 65536, 1}, xScale: 100},
	} {
		t.Run(rc.name, func(t *testing.T) { checkRoPEBackward(t, rc, 61) })
	}
}

func TestRoPEBackwardReferenceMatchesFiniteDifferences(t *testing.T) {
	// RoPE is linear in x, so central differences are exact whatever the
	// step; what remains is the f32 rounding of the two outputs a
	// perturbation moves (|y| <= 4: 5e-7) over the step of 1: 1e-6 of the
	// gradient's scale bounds it.
	for _, rc := range []ropeCase{
		{name: "partial neox factors positions", a: RoPEArgs{Tokens: 3, Heads: 2, HeadDim: 12, RopeDims: 8, NeoX: true, Base: 10000}, factors: []float32{1, 2, 4, 8}, positions: []uint32{7, 0, 300}},
		{name: "normal scaled", a: RoPEArgs{Tokens: 3, Heads: 2, HeadDim: 8, Base: 10000, FreqScale: 0.5, Pos0: 5}},
		{name: "yarn attn factor", a: RoPEArgs{Tokens: 3, Heads: 2, HeadDim: 8, NeoX: true, Base: 100, Pos0: 20, AttnFactor: 1.1386294}, factors: ref.YaRNFactors(100, 8, 4, 16, 32, 1, 1)},
	} {
		n := rc.a.Tokens * rc.a.Heads * rc.a.HeadDim
		x, dy := randVec(62, n, 2), randVec(63, n, 1)
		grad := ref.RoPEBackward(dy, rc.factors, rc.positions, rc.refArgs())
		checkFiniteDiff(t, rc.name, func(x []float32) []float32 { return ref.RoPE(x, rc.factors, rc.positions, rc.refArgs()) }, x, dy, grad, 1, 1e-6)
	}
}

func TestRoPEBackwardRejectsBadShapes(t *testing.T) {
	x, f7, pos := scratch(t, "x", 2*3*16), scratch(t, "factors7", 7), scratch(t, "positions", 2)
	c, err := dev.NewChain("bad rope backward")
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
		{"tokens 0", RoPEBackward(c, x, nil, nil, with(func(a *RoPEArgs) { a.Tokens = 0 }))},
		{"dy too short", RoPEBackward(c, x, nil, nil, with(func(a *RoPEArgs) { a.Tokens = 3 }))},
		{"odd rope_dims", RoPEBackward(c, x, nil, nil, with(func(a *RoPEArgs) { a.RopeDims = 7 }))},
		{"base 0", RoPEBackward(c, x, nil, nil, with(func(a *RoPEArgs) { a.Base = 0 }))},
		{"short factors", RoPEBackward(c, x, f7, nil, ok)},
		{"factors are dy", RoPEBackward(c, x, x, nil, ok)},
		{"short positions", RoPEBackward(c, x, nil, scratch(t, "one position", 1), ok)},
		{"positions are dy", RoPEBackward(c, x, nil, x, ok)},
		{"pos0 with positions", RoPEBackward(c, x, nil, pos, with(func(a *RoPEArgs) { a.Pos0 = 4 }))},
		{"nil dy", RoPEBackward(c, nil, nil, nil, ok)},
	} {
		if tc.err == nil {
			t.Errorf("%s: accepted", tc.what)
		}
	}
	if c.Err() != nil {
		t.Errorf("a rejected shape reached the chain: %v", c.Err())
	}
}
