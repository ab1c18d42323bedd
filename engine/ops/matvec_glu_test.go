package ops

import (
	"math"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
	"github.com/hearthstudio/hearth/gguf"
)

// gluGateUp is one token's [gate | up] at the magnitudes a decoded layer
// feeds its down projection (Llama 3 8B's gate-up outputs reach tens, with
// outliers past 100): gate in ±16 with ±100 at both ends of the row, where
// silu and gelu meet their exp clamp and their linear tail, and up in ±30.
func gluGateUp(seed uint64, ff int) []float32 {
	gate, up := randVec(seed, ff, 16), randVec(seed+1, ff, 30)
	gate[0], gate[ff-1] = -100, 100
	return append(gate, up...)
}

// TestMatVecGLUMatchesReference checks the fused GLU + matvec against
// ref.SwiGLUFused / ref.GeGLUFused followed by ref.MatVec, for every
// quantized type and both activations, through the public entry (the
// 1280-wide row is a partial 4096-float chunk) and through a 512-float chunk
// (two whole chunks and half of one), overwriting y and accumulating into
// it, with rows that leave a ragged last workgroup.
func TestMatVecGLUMatchesReference(t *testing.T) {
	const rows, ff = 37, 1280
	for i, typ := range quantTypes {
		// The staged act(gate)·up values each carry the elementwise GLU's
		// error (gluRTol relative, gluATol absolute, TestGLUFusedMatchesReference),
		// which moves the sum by at most gluRTol·Σ|w·h| + gluATol·Σ|w|, on
		// top of the matvec's own summation error.
		tol := matmulRTol + gluRTol
		if typ.BlockSize() == 256 {
			tol = kquantTol + gluRTol
		}
		q, deq := remix(t, typ, rows, ff)
		w := newTensor(t, "w", typ, rows, ff, q, 0)
		kern, _ := matmulKernelFor(typ)
		chunked := kern.vec
		chunked.xch = 512
		for _, act := range []string{"silu", "gelu", "oai"} {
			gelu := act == "gelu"
			gateUp := gluGateUp(uint64(70+i), ff)
			h := ref.SwiGLUFused(gateUp, 1, ff)
			switch act {
			case "gelu":
				h = ref.GeGLUFused(gateUp, 1, ff)
			case "oai":
				h = ref.SwiGLUOAIFused(gateUp, 1, ff)
			}
			product, err := ref.MatVec(typ, rows, ff, q, h)
			if err != nil {
				t.Fatal(err)
			}
			_, bound := denseMatMul(deq, rows, ff, h, 1)
			absW, _ := denseMatMul(absVec(deq), rows, ff, onesVec(ff), 1)
			y0 := randVec(uint64(90+i), rows, 50)
			bx := upload(t, "gate_up", gateUp)
			a := GLUArgs{FF: ff, GELU: gelu, OAI: act == "oai"}
			for _, via := range []string{"MatVecGLU", "xch512"} {
				for _, acc := range []bool{false, true} {
					by := upload(t, "y", y0)
					o := MatmulOptions{Accumulate: acc}
					run(t, "matvec glu", func(c *gpu.Chain) error {
						if via == "xch512" {
							return matmulDispatch(c, w, kern, bx, by, 1, o, &vecFusion{glu: &a, launch: chunked})
						}
						return MatVecGLU(c, w, bx, by, a, o)
					})
					got := download(t, by, rows)
					for r := range product {
						want, scale := float64(product[r]), float64(bound[r])
						if acc {
							// Adding y0 rounds once more, within the margin.
							want += float64(y0[r])
							scale += math.Abs(float64(y0[r]))
						}
						lim := tol*scale + gluATol*float64(absW[r]) + 1e-30
						if d := math.Abs(float64(got[r]) - want); !(d <= lim) {
							t.Fatalf("%v %s %s accumulate=%v: [%d] = %v, want %v (|diff| %.3g > %.3g)", typ, act, via, acc, r, got[r], want, d, lim)
						}
					}
				}
			}
		}
	}
}

func onesVec(n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = 1
	}
	return out
}

func TestMatVecGLURejectsBadShapes(t *testing.T) {
	q, _ := remix(t, gguf.TypeQ8_0, 4, 64)
	w := newTensor(t, "w", gguf.TypeQ8_0, 4, 64, q, 0)
	fq, _ := remix(t, gguf.TypeF16, 4, 64)
	fw := newTensor(t, "fw", gguf.TypeF16, 4, 64, fq, 0)
	gu, y, half, shortY := scratch(t, "gate_up", 128), scratch(t, "y", 4), scratch(t, "half", 64), scratch(t, "short_y", 3)
	ok := GLUArgs{FF: 64}
	checkMatmulRejects(t, []matmulRejectCase{
		{"float weight", "fused-GLU", func(c *gpu.Chain) error { return MatVecGLU(c, fw, gu, y, ok, MatmulOptions{}) }},
		{"ff != k", "ff 32", func(c *gpu.Chain) error { return MatVecGLU(c, w, gu, y, GLUArgs{FF: 32}, MatmulOptions{}) }},
		{"gate without up", "x buffer", func(c *gpu.Chain) error { return MatVecGLU(c, w, half, y, ok, MatmulOptions{}) }},
		{"short y", "y buffer", func(c *gpu.Chain) error { return MatVecGLU(c, w, gu, shortY, ok, MatmulOptions{}) }},
		{"gate_up is y", "same buffer", func(c *gpu.Chain) error { return MatVecGLU(c, w, gu, gu, ok, MatmulOptions{}) }},
		{"nil tensor", "nil", func(c *gpu.Chain) error { return MatVecGLU(c, nil, gu, y, ok, MatmulOptions{}) }},
	})
}
