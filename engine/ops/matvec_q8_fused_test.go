package ops

import (
	"math"
	"slices"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
	"github.com/hearthstudio/hearth/gguf"
)

// q8Input is one way a product's f32 activations become its 8-bit input,
// run both ways: quantized by the product itself (fused) and by the
// quantizer into xq beforehand.
type q8Input struct {
	name  string
	xlen  func(k int) int // floats of x the row reads
	fused func(c *gpu.Chain, w *gpu.Tensor, x, g, y *gpu.Buffer, o MatmulOptions) error
	quant func(c *gpu.Chain, k int, x, g, xq *gpu.Buffer) error
}

func q8Inputs() []q8Input {
	plain := func(k int) int { return k }
	normed := func(onePlus bool) (func(c *gpu.Chain, w *gpu.Tensor, x, g, y *gpu.Buffer, o MatmulOptions) error, func(c *gpu.Chain, k int, x, g, xq *gpu.Buffer) error) {
		args := func(k int) NormArgs { return NormArgs{Rows: 1, Dim: k, Eps: 1e-5, OnePlus: onePlus} }
		return func(c *gpu.Chain, w *gpu.Tensor, x, g, y *gpu.Buffer, o MatmulOptions) error {
				return matvecQ8NormedFused(c, w, x, g, y, args(w.Cols), o)
			}, func(c *gpu.Chain, k int, x, g, xq *gpu.Buffer) error {
				return QuantizeQ8Normed(c, x, g, xq, args(k))
			}
	}
	glu := func(gelu bool) (func(c *gpu.Chain, w *gpu.Tensor, x, g, y *gpu.Buffer, o MatmulOptions) error, func(c *gpu.Chain, k int, x, g, xq *gpu.Buffer) error) {
		return func(c *gpu.Chain, w *gpu.Tensor, x, g, y *gpu.Buffer, o MatmulOptions) error {
				return matvecQ8GLUFused(c, w, x, y, GLUArgs{FF: w.Cols, GELU: gelu}, o)
			}, func(c *gpu.Chain, k int, x, g, xq *gpu.Buffer) error {
				return QuantizeQ8GLU(c, x, xq, GLUArgs{FF: k, GELU: gelu}, 1)
			}
	}
	n0, q0 := normed(false)
	n1, q1 := normed(true)
	s, qs := glu(false)
	e, qe := glu(true)
	return []q8Input{
		{"plain", plain, func(c *gpu.Chain, w *gpu.Tensor, x, g, y *gpu.Buffer, o MatmulOptions) error {
			return matvecQ8OfFused(c, w, x, y, o)
		}, func(c *gpu.Chain, k int, x, g, xq *gpu.Buffer) error { return QuantizeQ8(c, x, xq, k, 1) }},
		{"normed", plain, n0, q0},
		{"normed 1+g", plain, n1, q1},
		{"swiglu", func(k int) int { return 2 * k }, s, qs},
		{"geglu", func(k int) int { return 2 * k }, e, qe},
	}
}

// TestMatVecQ8QuantizesItsInput checks the products that quantize their
// own f32 input (matvec_q8 with IN > 0) on every q8Cases matrix, unit and
// production activations, at an offset, accumulating and with a bias:
// each workgroup runs quantize_q8's arithmetic (q8_common, the same text),
// so the result must equal, to the bit, the quantizer's dispatch followed
// by MatVecQ8; and that pair against ref.MatVecQ8 on the levels the
// quantizer wrote (q8Tol, as TestMatVecQ8MatchesReference).
func TestMatVecQ8QuantizesItsInput(t *testing.T) {
	for _, typ := range q8Types {
		for si, s := range q8Cases(t, typ) {
			w, k := s.w, s.k
			bias := upload(t, "bias", randVec(uint64(90+si), s.rows, 2))
			for _, in := range q8Inputs() {
				for _, production := range []bool{false, true} {
					x := kquantActs(t, k, 1, production, uint64(40+si))
					if in.xlen(k) > k { // the GLU's up half
						x = append(x, randVec(uint64(50+si), k, 2)...)
					}
					bx, bg := upload(t, "x", x), upload(t, "g", randVec(uint64(60+si), k, 0.5))
					bq := scratch(t, "xq", Q8Words(k))
					run(t, "quantize q8", func(c *gpu.Chain) error { return in.quant(c, k, bx, bg, bq) })
					xq := downloadQ8(t, bq, k)
					want, scale, err := ref.MatVecQ8(typ, s.rows, k, s.raw, xq)
					if err != nil {
						t.Fatal(err)
					}
					const off = 3
					y0 := randVec(uint64(80+si), s.rows+off, 1e3)
					for _, o := range []MatmulOptions{{YOffset: off}, {YOffset: off, Accumulate: true, Bias: bias}} {
						what := typ.String() + " " + s.name + " " + in.name
						fused, apart := upload(t, "y", y0), upload(t, "y", y0)
						run(t, "matvec q8 fused", func(c *gpu.Chain) error { return in.fused(c, w, bx, bg, fused, o) })
						run(t, "matvec q8", func(c *gpu.Chain) error { return MatVecQ8(c, w, bq, apart, 1, o) })
						got, ref := download(t, fused, s.rows+off), download(t, apart, s.rows+off)
						if !slices.Equal(got, ref) {
							for i := range got {
								if got[i] != ref[i] {
									t.Fatalf("%s production=%v acc=%v: y[%d] = %v quantized in the product, %v by the quantizer", what, production, o.Accumulate, i, got[i], ref[i])
								}
							}
						}
						if o.Accumulate {
							continue // the accumulated sum's rounding is TestMatVecQ8MatchesReference's
						}
						for r := range s.rows {
							if d := math.Abs(float64(got[off+r] - want[r])); !(d <= q8Tol*scale[r]) {
								t.Fatalf("%s production=%v: [%d] = %v, ref.MatVecQ8 %v (|diff| %.3g > %.0e·%.3g)", what, production, r, got[off+r], want[r], d, q8Tol, scale[r])
							}
						}
					}
				}
			}
		}
	}
}

// TestMatVecQ8FusedLaunch checks when a product quantizes its own input:
// one activation row whose quantized copy fits the device's workgroup
// memory, in at most Q8FuseMaxWorkgroups workgroups (none by default);
// and that the public entry points take the quantizer's path otherwise,
// with its result.
func TestMatVecQ8FusedLaunch(t *testing.T) {
	tensor := func(rows, k int) *gpu.Tensor { return &gpu.Tensor{Name: "w", Type: gguf.TypeQ4_K, Rows: rows, Cols: k} }
	limit := int(dev.Limits.MaxComputeWorkgroupStorageSize)
	saved := Q8FuseMaxWorkgroups
	t.Cleanup(func() { Q8FuseMaxWorkgroups = saved })
	for _, c := range []struct {
		name string
		max  int // Q8FuseMaxWorkgroups
		w    *gpu.Tensor
		m    int
		want bool
	}{
		{"one row", 4096, tensor(4096, 4096), 1, true},
		{"one row, fusing off", 0, tensor(4096, 4096), 1, false},
		{"two rows", 4096, tensor(4096, 4096), 2, false},
		{"a head", 4096, tensor(128256, 4096), 1, false},
		{"the last workgroup allowed", 512, tensor(4096, 4096), 1, true},
		{"a workgroup more", 511, tensor(4096, 4096), 1, false},
		{"the widest row that fits", 4096, tensor(64, 256*((limit-16*256)/4/(256/2+256/32+256/16))), 1, true},
		{"a row past the device's memory", 4096, tensor(64, 256*((limit-16*256)/4/(256/2+256/32+256/16)+1)), 1, false},
	} {
		Q8FuseMaxWorkgroups = c.max
		if got := Q8Fuses(dev, c.w, c.m); got != c.want {
			t.Errorf("%s (%d×%d, %d rows, at most %d workgroups): fused = %v, want %v", c.name, c.w.Rows, c.w.Cols, c.m, c.max, got, c.want)
		}
	}
	Q8FuseMaxWorkgroups = 4096
	// Two rows through MatMulQ8Normed: the quantizer's path, each row
	// what it gets alone.
	const n, k = 9, 512
	raw, _ := remix(t, gguf.TypeQ4_K, n, k)
	w := newTensor(t, "w", gguf.TypeQ4_K, n, k, raw, 0)
	x := append(kquantActs(t, k, 1, true, 1), kquantActs(t, k, 1, false, 2)...)
	bx, bg := upload(t, "x", x), upload(t, "g", randVec(3, k, 0.5))
	xq, y := scratch(t, "xq", int(Q8Bytes(k, 2)/4)), scratch(t, "y", 2*n)
	a := NormArgs{Rows: 2, Dim: k, Eps: 1e-6}
	run(t, "matvec q8 normed", func(c *gpu.Chain) error { return MatMulQ8Normed(c, w, bx, bg, xq, y, a, MatmulOptions{}) })
	got := download(t, y, 2*n)
	for r := range 2 {
		one := scratch(t, "y1", n)
		xr := upload(t, "x row", x[r*k:(r+1)*k])
		a1 := a
		a1.Rows = 1
		run(t, "matvec q8 normed", func(c *gpu.Chain) error { return MatMulQ8Normed(c, w, xr, bg, xq, one, a1, MatmulOptions{}) })
		if want := download(t, one, n); !slices.Equal(got[r*n:(r+1)*n], want) {
			t.Fatalf("row %d of two differs from the row alone", r)
		}
	}
}

// TestMatVecQ8FusedRejectsBadShapes: with fusing on, the public entry
// points take the fused path and refuse its bad inputs by name.
func TestMatVecQ8FusedRejectsBadShapes(t *testing.T) {
	saved := Q8FuseMaxWorkgroups
	t.Cleanup(func() { Q8FuseMaxWorkgroups = saved })
	Q8FuseMaxWorkgroups = 4096
	raw, _ := remix(t, gguf.TypeQ4_K, 4, 512)
	w := newTensor(t, "w", gguf.TypeQ4_K, 4, 512, raw, 0)
	x := upload(t, "x", randVec(1, 1024, 1))
	xq, y := scratch(t, "xq", Q8Words(512)), scratch(t, "y", 8)
	checkRejects(t, []rejectCase{
		{"short x", "x buffer", func(c *gpu.Chain) error { return MatMulQ8Of(c, w, scratch(t, "x", 100), xq, y, 1, MatmulOptions{}) }},
		{"x is y", "same buffer", func(c *gpu.Chain) error { return MatMulQ8Of(c, w, x, xq, x, 1, MatmulOptions{}) }},
		{"nil weight", "nil", func(c *gpu.Chain) error { return MatMulQ8Of(c, nil, x, xq, y, 1, MatmulOptions{}) }},
		{"normed width", "want the weight's 512 columns", func(c *gpu.Chain) error {
			return MatMulQ8Normed(c, w, x, x, xq, y, NormArgs{Rows: 1, Dim: 256, Eps: 1e-5}, MatmulOptions{})
		}},
		{"normed eps", "eps", func(c *gpu.Chain) error {
			return MatMulQ8Normed(c, w, x, x, xq, y, NormArgs{Rows: 1, Dim: 512, Eps: float32(math.Inf(1))}, MatmulOptions{})
		}},
		{"normed short gain", "gain buffer", func(c *gpu.Chain) error {
			return MatMulQ8Normed(c, w, x, scratch(t, "g", 100), xq, y, NormArgs{Rows: 1, Dim: 512, Eps: 1e-5}, MatmulOptions{})
		}},
		{"glu width", "want the weight's 512 columns", func(c *gpu.Chain) error {
			return MatMulQ8GLU(c, w, x, xq, y, GLUArgs{FF: 256}, 1, MatmulOptions{})
		}},
		{"glu short", "gate and up buffer", func(c *gpu.Chain) error {
			return MatMulQ8GLU(c, w, scratch(t, "gu", 1000), xq, y, GLUArgs{FF: 512}, 1, MatmulOptions{})
		}},
		{"glu of gpt-oss", "gpt-oss", func(c *gpu.Chain) error {
			return MatMulQ8GLU(c, w, x, xq, y, GLUArgs{FF: 512, OAI: true}, 1, MatmulOptions{})
		}},
		{"two rows in the product", "want 1", func(c *gpu.Chain) error {
			return matvecQ8Dispatch(c, w, q8Source{in: q8InPlain, x: x, g: x}, y, 2, MatmulOptions{}, q8Launch)
		}},
	})
}
