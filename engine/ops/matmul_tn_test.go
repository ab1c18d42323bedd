package ops

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// matmulTNBound is Σ_i |a_ij·b_ic| for each output of G = Aᵀ·B: the scale of
// the f32 sum's rounding error.
func matmulTNBound(a, b []float32, m, r, k int) []float32 {
	out := make([]float32, r*k)
	for j := range r {
		for c := range k {
			var s float64
			for i := range m {
				s += math.Abs(float64(a[i*r+j]) * float64(b[i*k+c]))
			}
			out[j*k+c] = float32(s)
		}
	}
	return out
}

// runMatMulTN checks one shape: G = α·Aᵀ·B on the GPU against ref.MatMulTN,
// over a G that starts as garbage.
//
// The tolerance is matmulBackwardTol(m) of |α|·Σ|a·b|: each thread adds its
// m products one after another, so a recursive f32 sum's bound applies,
// m·2⁻²⁴, plus one rounding for the product and one for α (+2, and +2 of
// margin). For the m = 2000 case that is 1.2e-4 of Σ|a·b| — the worst case,
// which random signs never approach (measured on lavapipe, logged by -v:
// 0.002 of it at m = 2000, 0.24 at m = 5); a missed row or a wrong column is
// off by whole products, ~1/m of Σ|a·b| = 5e-4 at m = 2000, still above it.
func runMatMulTN(t *testing.T, m, r, k int, aScale, bScale, alpha float32) {
	t.Helper()
	a := randVec(uint64(m*31+r), m*r, aScale)
	b := randVec(uint64(m*17+k), m*k, bScale)
	want := ref.MatMulTN(a, b, m, r, k, alpha)
	bound := matmulTNBound(a, b, m, r, k)
	for i := range bound {
		bound[i] *= float32(math.Abs(float64(alpha)))
	}
	ba, bb, bg := upload(t, "a", a), upload(t, "b", b), upload(t, "g", randVec(9, r*k, 50))
	run(t, "matmul_tn", func(c *gpu.Chain) error { return MatMulTN(c, ba, bb, bg, m, r, k, MatMulTNOptions{Alpha: alpha}) })
	assertMatmulBackward(t, "gpu", download(t, bg, r*k), want, bound, m)
}

func TestMatMulTNMatchesReference(t *testing.T) {
	// Shapes around the 32×32 block and the 32-row step: one element, LoRA
	// ranks 8 and 16 against ragged k, r past one block (65), m below, at
	// and past a step; and the size LoRA training meets, m = 2000 tokens
	// against k = 8192 features (dA of a rank-8 adapter on a 7B model's FFN
	// down-projection input).
	for _, c := range []struct {
		m, r, k int
		alpha   float32
	}{
		{1, 1, 1, 1}, {37, 8, 100, 1}, {32, 16, 33, 0.5}, {70, 65, 47, 2}, {5, 3, 1030, 1}, {2000, 8, 8192, 0.25},
	} {
		t.Run(fmt.Sprintf("m%d_r%d_k%d", c.m, c.r, c.k), func(t *testing.T) { runMatMulTN(t, c.m, c.r, c.k, 1, 1, c.alpha) })
	}
}

func TestMatMulTNWideMagnitude(t *testing.T) {
	// Gradients at ±3e4 (under a loss scale) against activations at ±300
	// (a GeGLU output): products near 1e7, sums near 1e9, still far from
	// f32's range; the tolerance is relative to Σ|a·b|.
	for _, c := range []struct{ m, r, k int }{{300, 16, 257}, {41, 64, 9}} {
		t.Run(fmt.Sprintf("m%d_r%d_k%d", c.m, c.r, c.k), func(t *testing.T) { runMatMulTN(t, c.m, c.r, c.k, 3e4, 300, 1) })
	}
}

func TestMatMulTNOptions(t *testing.T) {
	// A is the middle 8 of 20 columns of a fused gradient (stride 20,
	// offset 5), B rows padded to 40 from float 3, and G a block of a
	// bigger buffer (stride 50 from float 7) that already holds a gradient
	// from a previous micro-batch: G += 0.5·AᵀB.
	const m, r, k, as, bs, gs, aOff, bOff, gOff = 19, 8, 33, 20, 40, 50, 5, 3, 7
	const alpha = 0.5
	aBuf := randVec(51, aOff+m*as, 1)
	bBuf := randVec(52, bOff+m*bs, 1)
	prior := randVec(53, gOff+r*gs, 2)
	a, b := make([]float32, m*r), make([]float32, m*k)
	for i := range m {
		copy(a[i*r:], aBuf[aOff+i*as:aOff+i*as+r])
		copy(b[i*k:], bBuf[bOff+i*bs:bOff+i*bs+k])
	}
	prod := ref.MatMulTN(a, b, m, r, k, alpha)
	pb := matmulTNBound(a, b, m, r, k)
	want := append([]float32(nil), prior...)
	bound := make([]float32, len(prior))
	for j := range r {
		for c := range k {
			i := gOff + j*gs + c
			want[i] = float32(float64(prior[i]) + float64(prod[j*k+c]))
			bound[i] = alpha*pb[j*k+c] + float32(math.Abs(float64(prior[i])))
		}
	}
	ba, bb, bg := upload(t, "a", aBuf), upload(t, "b", bBuf), upload(t, "g", prior)
	run(t, "matmul_tn opts", func(c *gpu.Chain) error {
		return MatMulTN(c, ba, bb, bg, m, r, k, MatMulTNOptions{
			Accumulate: true, Alpha: alpha, AStride: as, BStride: bs, GStride: gs, AOffset: aOff, BOffset: bOff, GOffset: gOff,
		})
	})
	// Floats of g outside the block must be untouched (bound 0).
	assertMatmulBackward(t, "gpu", download(t, bg, len(prior)), want, bound, m)
}

func TestMatMulTNRejectsBadShapes(t *testing.T) {
	a, b, g := scratch(t, "a", 4*8), scratch(t, "b", 4*10), scratch(t, "g", 8*10)
	for _, c := range []struct {
		what, wantErr string
		call          func(c *gpu.Chain) error
	}{
		{"zero m", "must be positive", func(c *gpu.Chain) error { return MatMulTN(c, a, b, g, 0, 8, 10, MatMulTNOptions{}) }},
		{"short a", "a buffer", func(c *gpu.Chain) error { return MatMulTN(c, a, b, g, 5, 8, 8, MatMulTNOptions{}) }},
		{"short b", "b buffer", func(c *gpu.Chain) error { return MatMulTN(c, a, b, g, 4, 8, 11, MatMulTNOptions{}) }},
		{"short g", "g buffer", func(c *gpu.Chain) error { return MatMulTN(c, a, b, g, 4, 8, 10, MatMulTNOptions{GOffset: 1}) }},
		{"stride below width", "overlap", func(c *gpu.Chain) error {
			return MatMulTN(c, a, b, g, 2, 8, 10, MatMulTNOptions{BStride: 9})
		}},
		{"negative offset", "negative", func(c *gpu.Chain) error {
			return MatMulTN(c, a, b, g, 2, 8, 10, MatMulTNOptions{AOffset: -2})
		}},
		{"g is a", "aliases", func(c *gpu.Chain) error { return MatMulTN(c, a, b, a, 1, 2, 10, MatMulTNOptions{}) }},
	} {
		t.Run(c.what, func(t *testing.T) {
			ch, err := dev.NewChain("bad matmul_tn")
			if err != nil {
				t.Fatal(err)
			}
			defer ch.Discard()
			err = c.call(ch)
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("got error %v, want one mentioning %q", err, c.wantErr)
			}
		})
	}
}
