package ops

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
	"github.com/hearthstudio/hearth/gguf"
)

// matmulQ8Cases are q8Cases plus a matrix of 150 rows, three tiles of
// weight rows with a ragged last one.
func matmulQ8Cases(t *testing.T, typ gguf.Type) []q8Weights {
	cases := q8Cases(t, typ)
	if typ.BlockSize() == 256 {
		q, deq := ggmlKBlocks(t, typ)
		s := kquantShape{"tall 150x512", 150, 2, func(r, b int) int { return 3*r + 5*b + 2 }, 0}
		raw, wf := kquantWeights(q, deq, s.rows, s.nb, s.pick)
		return append(cases, q8Weights{s.name, typ, s.rows, 512, raw, wf, s.tensor(t, typ, raw)})
	}
	raw, wf := remix(t, typ, 150, 160) // 5 blocks: the second stage is mostly past k
	return append(cases, q8Weights{"remix 150x160", typ, 150, 160, raw, wf, newTensor(t, "w", typ, 150, 160, raw, 0)})
}

// quantizeRowsOn runs QuantizeQ8 over m rows of x and decodes each row's
// words.
func quantizeRowsOn(t *testing.T, x []float32, k, m int) (*gpu.Buffer, []ref.Q8) {
	t.Helper()
	bx, bq := upload(t, "x", x), scratch(t, "xq", int(Q8Bytes(k, m)/4))
	run(t, "quantize q8 rows", func(c *gpu.Chain) error { return QuantizeQ8(c, bx, bq, k, m) })
	raw, err := bq.Read(0, Q8Bytes(k, m))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]ref.Q8, m)
	for r := range m {
		words := make([]uint32, Q8Words(k))
		for i := range words {
			words[i] = binary.LittleEndian.Uint32(raw[4*(r*Q8RowWords(k)+i):])
		}
		if out[r], err = ref.DecodeQ8(words, k, Q8Packed(dev)); err != nil {
			t.Fatal(err)
		}
	}
	return bq, out
}

// TestMatMulQ8MatchesReference checks the tiled kernel on every
// matmulQ8Cases matrix with 1, 5 and 70 activation rows (two tiles of 64,
// a ragged last one), production activations, at an offset with a row
// stride past W's rows, overwriting and then accumulating with a bias, in
// MatMulQ8's launch; and in every q8TileSweep shape the device fits at 70
// rows, overwriting: each activation row's outputs against ref.MatVecQ8 on
// the levels the quantizer wrote.
// The integer sums are the same; the f32 terms are grouped alike and
// added one granule after another, at most k/16 = 80 additions here, so
// q8Tol (a factor 5 over the matvec's ~30 roundings) is kept, and the
// bias and the accumulated value add one rounding each of their own size.
func TestMatMulQ8MatchesReference(t *testing.T) {
	if !HasMatMulQ8(dev, gguf.TypeQ4_K) {
		t.Skipf("the device's compiler takes no dot4I8Packed (it takes %v): prefill stays on the f32 tiled kernel", dev.Language)
	}
	for _, typ := range q8Types {
		for si, s := range matmulQ8Cases(t, typ) {
			for _, run1 := range q8TileRuns() {
				m, l := run1.m, run1.l
				k := s.k
				bq, xq := quantizeRowsOn(t, kquantActs(t, k, m, true, uint64(10*si+m)), k, m)
				want := make([][]float32, m)
				scale := make([][]float64, m)
				for j := range m {
					var err error
					if want[j], scale[j], err = ref.MatVecQ8(typ, s.rows, k, s.raw, xq[j]); err != nil {
						t.Fatal(err)
					}
				}
				const off, pad = 3, 2
				ys := s.rows + pad
				n := off + m*ys
				y0 := randVec(uint64(70+si), n, 1e3)
				bias := randVec(uint64(75+si), s.rows, 2)
				for _, acc := range []bool{false, true} {
					if acc && l != q8TileLaunchMain {
						break
					}
					o := MatmulOptions{YOffset: off, YStride: ys, Accumulate: acc}
					if acc {
						o.Bias = upload(t, "bias", bias)
					}
					by := upload(t, "y", y0)
					run(t, "matmul q8", func(c *gpu.Chain) error { return matmulQ8With(c, s.w, bq, by, m, o, l) })
					got := download(t, by, n)
					what := fmt.Sprintf("%v %s launch %+v", typ, s.name, l)
					for i := range n {
						j, r := (i-off)/ys, (i-off)%ys
						if i < off || r >= s.rows {
							if got[i] != y0[i] {
								t.Fatalf("%s m=%d: y[%d] outside the outputs changed", what, m, i)
							}
							continue
						}
						base, extra := 0.0, 0.0
						if acc {
							base = float64(y0[i]) + float64(bias[r])
							extra = 1e-6 * (math.Abs(float64(y0[i])) + math.Abs(float64(bias[r])))
						}
						if d := math.Abs(float64(got[i]) - base - float64(want[j][r])); !(d <= q8Tol*scale[j][r]+extra) {
							t.Fatalf("%s m=%d acc=%v: row %d output %d = %v, want %v (|diff| %.3g > %.0e·%.3g)", what, m, acc, j, r, float64(got[i])-base, want[j][r], d, q8Tol, scale[j][r])
						}
					}
				}
			}
		}
	}
}

type q8TileRun struct {
	m int
	l q8TileLaunch
}

// q8TileRuns are TestMatMulQ8MatchesReference's row counts and launches.
func q8TileRuns() []q8TileRun {
	runs := []q8TileRun{{1, q8TileLaunchMain}, {5, q8TileLaunchMain}, {70, q8TileLaunchMain}}
	for _, l := range q8TileSweep {
		if l.check(dev.Limits) == nil {
			runs = append(runs, q8TileRun{70, l})
		}
	}
	return runs
}

func TestMatMulQ8RejectsBadShapes(t *testing.T) {
	if !HasMatMulQ8(dev, gguf.TypeQ4_K) {
		t.Skipf("the device's compiler takes no dot4I8Packed (it takes %v)", dev.Language)
	}
	q4, _ := remix(t, gguf.TypeQ4_K, 4, 512)
	w := newTensor(t, "w", gguf.TypeQ4_K, 4, 512, q4, 0)
	q40, _ := remix(t, gguf.TypeQ4_0, 4, 512)
	w40 := newTensor(t, "w40", gguf.TypeQ4_0, 4, 512, q40, 0)
	xq := scratch(t, "xq", int(Q8Bytes(512, 3)/4))
	y := scratch(t, "y", 12)
	tiled := func(c *gpu.Chain, w *gpu.Tensor, xq, y *gpu.Buffer, m int, o MatmulOptions) error {
		return matmulQ8With(c, w, xq, y, m, o, q8TileLaunchMain)
	}
	swar := func(c *gpu.Chain) error {
		Q8PackedDot = false
		defer func() { Q8PackedDot = true }()
		return matmulQ8With(c, w, xq, y, 3, MatmulOptions{}, q8TileLaunchMain)
	}
	checkRejects(t, []rejectCase{
		{"q4_0 weight", "Q4_K, Q6_K and Q8_0 only", func(c *gpu.Chain) error { return tiled(c, w40, xq, y, 3, MatmulOptions{}) }},
		{"nil weight", "nil", func(c *gpu.Chain) error { return tiled(c, nil, xq, y, 3, MatmulOptions{}) }},
		{"no rows", "want at least 1", func(c *gpu.Chain) error { return tiled(c, w, xq, y, 0, MatmulOptions{}) }},
		{"xq short of 4 rows", "xq buffer", func(c *gpu.Chain) error { return tiled(c, w, xq, scratch(t, "y16", 16), 4, MatmulOptions{}) }},
		{"y past the end", "y buffer", func(c *gpu.Chain) error { return tiled(c, w, xq, y, 3, MatmulOptions{YOffset: 1}) }},
		{"y stride under a row", "y stride", func(c *gpu.Chain) error { return tiled(c, w, xq, y, 3, MatmulOptions{YStride: 3}) }},
		{"xq is y", "same buffer", func(c *gpu.Chain) error { return tiled(c, w, xq, xq, 3, MatmulOptions{}) }},
		{"bias is y", "same buffer", func(c *gpu.Chain) error { return tiled(c, w, xq, y, 3, MatmulOptions{Bias: y}) }},
		{"swar packing", "dot4I8Packed", swar},
	})
}

func TestQ8TileFromEnv(t *testing.T) {
	def := q8TileLaunch{rt: 16, ct: 16, rr: 4, rc: 4}
	if l, err := q8TileFromEnv("", def); err != nil || l != def {
		t.Errorf(`"" gave %+v, %v; want the default`, l, err)
	}
	if l, err := q8TileFromEnv("8,16,8,4", def); err != nil || l != (q8TileLaunch{rt: 8, ct: 16, rr: 8, rc: 4}) {
		t.Errorf(`"8,16,8,4" gave %+v, %v`, l, err)
	}
	for _, bad := range []string{"16,16,4", "16x16x4x4", "16,16,0,4", "a,b,c,d"} {
		if l, err := q8TileFromEnv(bad, def); err == nil || l != def {
			t.Errorf("%q gave %+v, %v; want the default and an error", bad, l, err)
		}
	}
}

func TestQ8RowsFromEnv(t *testing.T) {
	def := matvecQ8Launch{wg: 256, rows: 8}
	if l, err := q8RowsFromEnv("", def); err != nil || l != def {
		t.Errorf(`"" gave %+v, %v; want the default`, l, err)
	}
	if l, err := q8RowsFromEnv("16", def); err != nil || l != (matvecQ8Launch{wg: 256, rows: 16}) {
		t.Errorf(`"16" gave %+v, %v`, l, err)
	}
	for _, bad := range []string{"0", "12", "512", "x"} {
		if l, err := q8RowsFromEnv(bad, def); err == nil || l != def {
			t.Errorf("%q gave %+v, %v; want the default and an error", bad, l, err)
		}
	}
}
