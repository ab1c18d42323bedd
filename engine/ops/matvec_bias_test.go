package ops

import (
	"fmt"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/gguf"
)

// TestMatVecBias: a bias fused into a decoded token's product adds each
// row's own bias to that row's sum, after the sum and before Accumulate's
// add: y = fl(y0 + fl(W·x + b)) (a product then a separate AddBias rounds
// fl(fl(y0 + W·x) + b) instead, as close). The products without the bias
// are the reference, so the comparison is exact. Plain, normed and GLU products on f32 activations and MatVecQ8,
// whole and in chunks of 15 rows (a ragged last chunk: row0 must index
// the bias), at an offset in y.
func TestMatVecBias(t *testing.T) {
	const rows, k, off = 37, 256, 3
	for i, typ := range []gguf.Type{gguf.TypeQ8_0, gguf.TypeQ4_K, gguf.TypeQ6_K, gguf.TypeMXFP4} {
		q, _ := remix(t, typ, rows, k)
		x := randVec(uint64(90+i), 2*k, 2)
		bias := randVec(uint64(95+i), rows, 3)
		y0 := randVec(uint64(99+i), rows+off, 5)
		bx, bg, bb := upload(t, "x", x), upload(t, "g", randVec(7, k, 0.5)), upload(t, "bias", bias)
		bq := scratch(t, "xq", Q8Words(k))
		run(t, "quantize", func(c *gpu.Chain) error { return QuantizeQ8(c, bx, bq, k, 1) })
		norm := NormArgs{Rows: 1, Dim: k, Eps: 1e-5}
		products := map[string]func(c *gpu.Chain, w *gpu.Tensor, y *gpu.Buffer, o MatmulOptions) error{
			"plain": func(c *gpu.Chain, w *gpu.Tensor, y *gpu.Buffer, o MatmulOptions) error {
				return MatMulWith(c, w, bx, y, 1, o)
			},
			"normed": func(c *gpu.Chain, w *gpu.Tensor, y *gpu.Buffer, o MatmulOptions) error {
				return MatVecNormed(c, w, bx, bg, y, norm, o)
			},
			"glu": func(c *gpu.Chain, w *gpu.Tensor, y *gpu.Buffer, o MatmulOptions) error {
				return MatVecGLU(c, w, bx, y, GLUArgs{FF: k}, o)
			},
		}
		if _, ok := matvecQ8Entries[typ]; ok {
			products["q8"] = func(c *gpu.Chain, w *gpu.Tensor, y *gpu.Buffer, o MatmulOptions) error {
				return MatVecQ8(c, w, bq, y, 1, o)
			}
		}
		for name, product := range products {
			for _, chunk := range []uint64{0, uint64(15 * k / typ.BlockSize() * typ.TypeSize())} {
				w := newTensor(t, "w", typ, rows, k, q, chunk)
				for _, acc := range []bool{false, true} {
					what := fmt.Sprintf("%v %s chunk=%d acc=%v", typ, name, chunk, acc)
					plain, biased := upload(t, "plain", y0), upload(t, "biased", y0)
					run(t, what, func(c *gpu.Chain) error {
						if err := product(c, w, plain, MatmulOptions{YOffset: off}); err != nil {
							return err
						}
						return product(c, w, biased, MatmulOptions{YOffset: off, Accumulate: acc, Bias: bb})
					})
					p, b := download(t, plain, rows+off), download(t, biased, rows+off)
					for r := range off {
						if b[r] != y0[r] {
							t.Fatalf("%s: y[%d] before the offset changed", what, r)
						}
					}
					for r := range rows {
						want := p[off+r] + bias[r]
						if acc {
							want = y0[off+r] + want
						}
						if b[off+r] != want {
							t.Fatalf("%s: row %d = %v, want %v (product %v, bias %v)", what, r, b[off+r], want, p[off+r], bias[r])
						}
					}
				}
			}
		}
	}
}

// TestMatVecBiasRefuses: the bias is for a decoded token's quantized
// product; a batch, float weights, the experts' products (their biases go
// in MoEArgs.Bias), a short bias or one that is y are refused by name.
func TestMatVecBiasRefuses(t *testing.T) {
	q, _ := remix(t, gguf.TypeQ8_0, 4, 64)
	w := newTensor(t, "w", gguf.TypeQ8_0, 4, 64, q, 0)
	fq, _ := remix(t, gguf.TypeF16, 4, 64)
	fw := newTensor(t, "fw", gguf.TypeF16, 4, 64, fq, 0)
	x, y, bias, short := scratch(t, "x", 64*40), scratch(t, "y", 4*40), scratch(t, "bias", 4), scratch(t, "short", 3)
	xq := scratch(t, "xq", Q8Words(64))
	checkMatmulRejects(t, []matmulRejectCase{
		{"two rows", "decoded token", func(c *gpu.Chain) error { return MatMulWith(c, w, x, y, 2, MatmulOptions{Bias: bias}) }},
		{"tiled batch", "decoded token", func(c *gpu.Chain) error { return MatMulWith(c, w, x, y, 40, MatmulOptions{Bias: bias}) }},
		{"float weight", "decoded token", func(c *gpu.Chain) error { return MatMulWith(c, fw, x, y, 1, MatmulOptions{Bias: bias}) }},
		{"short bias", "bias", func(c *gpu.Chain) error { return MatMulWith(c, w, x, y, 1, MatmulOptions{Bias: short}) }},
		{"bias is y", "same buffer", func(c *gpu.Chain) error { return MatMulWith(c, w, x, y, 1, MatmulOptions{Bias: y}) }},
		{"q8 short bias", "bias", func(c *gpu.Chain) error { return MatVecQ8(c, w, xq, y, 1, MatmulOptions{Bias: short}) }},
		{"q8 bias is y", "same buffer", func(c *gpu.Chain) error { return MatVecQ8(c, w, xq, y, 1, MatmulOptions{Bias: y}) }},
	})
}
