package ops

import (
	"fmt"
	"math"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
	"github.com/hearthstudio/hearth/gguf"
)

// kquantTypes are the weight types shaders/matmul_kquant.wgsl decodes.
var kquantTypes = []gguf.Type{gguf.TypeQ2_K, gguf.TypeQ3_K, gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K}

// kquantTol bounds |GPU − oracle| as a fraction of Σ|w·x| of that output.
// The oracle sums exact products of ggml's dequantized weights in float64,
// so the whole difference is the GPU's f32 rounding. Each product p_i is
// rounded once and then passes through at most ~25 additions on its way to
// the result, each off by ≤ 2⁻²⁴ of a partial sum bounded by Σ|w·x|. In
// prefill: 3 inside a vec4 dot, 3 joining a run's 4 dots, 2 joining the
// runs into the lane's sum, ≤ 5 more parts per lane at K=1280, ≤ 6 tree
// levels. In decode: 3 in a dot, 2 joining 4 dots, 1 joining the runs, 1
// joining a 2-part iteration, then the parts a lane adds up (40 parts at
// K=1280 over 4-64 lanes) and LANES/4 + 1 joining the lanes: ≤ 18 for the
// last two together. About 26·2⁻²⁴ ≈ 1.6e-6 relative. A driver may also
// fuse d·q − m into one FMA, moving a weight by ≤ 2⁻²⁴·m; the mins are at
// most the sub-block's largest |w|. 1e-5 leaves a factor ~3 over both;
// observed worst cases are ~1e-7.
// A decoder bug (a wrong nibble, bit, scale or sign) moves a sum by whole
// quantization steps, 1e-3 of Σ|w·x| or more, far above this.
const kquantTol = 1e-5

// ggmlKBlocks cuts ggml's vectors for type t (8 rows × 512 columns, two
// super-blocks per row) into its 16 super-blocks: the quantized bytes and
// ggml's exact dequantization of each, in row order.
func ggmlKBlocks(t *testing.T, typ gguf.Type) (q [][]byte, deq [][]float32) {
	t.Helper()
	raw := ggmlFile(t, typ.String()+".quant.bin")
	f := gpu.F32From(ggmlFile(t, typ.String()+".dequant.f32"))
	bs := typ.TypeSize()
	if len(raw) != 16*bs || len(f) != 16*256 {
		t.Fatalf("%v vectors: %d quant bytes and %d floats, want %d and %d", typ, len(raw), len(f), 16*bs, 16*256)
	}
	for b := range 16 {
		q = append(q, raw[b*bs:(b+1)*bs])
		deq = append(deq, f[b*256:(b+1)*256])
	}
	return q, deq
}

// kquantWeights is a rows×(256·nb) weight matrix assembled from ggml's
// super-blocks: block b of row r is source block pick(r, b). It returns the
// GGUF bytes and the matching f32 weights.
func kquantWeights(q [][]byte, deq [][]float32, rows, nb int, pick func(r, b int) int) ([]byte, []float32) {
	var raw []byte
	var wf []float32
	for r := range rows {
		for b := range nb {
			s := pick(r, b) % len(q)
			raw = append(raw, q[s]...)
			wf = append(wf, deq[s]...)
		}
	}
	return raw, wf
}

// kquantOracle is Y = X·Wᵀ in float64 from the f32 weights, with the
// per-output scale Σ|w·x| the tolerance is relative to.
func kquantOracle(wf []float32, rows, k int, x []float32, m int) (want, scale []float64) {
	want, scale = make([]float64, m*rows), make([]float64, m*rows)
	for j := range m {
		for r := range rows {
			var s, a float64
			for i := range k {
				p := float64(wf[r*k+i]) * float64(x[j*k+i])
				s += p
				a += math.Abs(p)
			}
			want[j*rows+r], scale[j*rows+r] = s, a
		}
	}
	return want, scale
}

// assertKQuantClose fails unless every |got − want| ≤ tol·scale, and returns
// the worst |got − want|/scale seen (0 where scale is 0: those outputs must
// be exact).
func assertKQuantClose(t *testing.T, what string, got []float32, want, scale []float64, tol float64) float64 {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d values, want %d", what, len(got), len(want))
	}
	worst := 0.0
	for i := range want {
		g := float64(got[i])
		if math.IsNaN(g) || math.IsInf(g, 0) {
			t.Fatalf("%s: [%d] = %v, want %v", what, i, g, want[i])
		}
		d := math.Abs(g - want[i])
		if d > tol*scale[i] {
			t.Fatalf("%s: [%d] = %v, want %v (|diff| %.3g > %.0e·Σ|w·x| = %.3g)", what, i, g, want[i], d, tol, tol*scale[i])
		}
		if scale[i] > 0 {
			worst = max(worst, d/scale[i])
		}
	}
	return worst
}

// kquantActs is m activation rows of k values. Unit magnitude tiles ggml's
// act.f32 (rotated per row so rows differ); production magnitude is the
// residual stream of a big model: uniform ±3e4 with a few spikes near the
// f32-safe extreme of a 3e4 stream and some exact zeros.
func kquantActs(t *testing.T, k, m int, production bool, seed uint64) []float32 {
	t.Helper()
	x := make([]float32, m*k)
	if !production {
		act := gpu.F32From(ggmlFile(t, "act.f32"))
		for j := range m {
			for i := range k {
				x[j*k+i] = act[(i+37*j)%len(act)]
			}
		}
		return x
	}
	copy(x, randVec(seed, m*k, 3e4))
	for i := 0; i < len(x); i += 97 {
		x[i] = 0
	}
	for i := 13; i < len(x); i += 211 {
		x[i] = float32(math.Copysign(3e4, float64(x[i])))
	}
	return x
}

// kquantShape is one weight matrix built from ggml's blocks.
type kquantShape struct {
	name     string
	rows, nb int
	pick     func(r, b int) int
	maxChunk int // rows per chunk; 0 = one chunk
}

// The shapes: ggml's own tensor, a single row of the wide-range row 7,
// rows that mix every source block (outliers of row 2, zeros of row 3,
// f16-subnormal scales of row 4) in 3- and 5-super-block rows, and a
// chunked tensor whose last chunk is ragged.
var kquantShapes = []kquantShape{
	{"ggml 8x512", 8, 2, func(r, b int) int { return 2*r + b }, 0},
	{"row7 1x256", 1, 1, func(r, b int) int { return 14 + r + b }, 0},
	{"mixed 9x768", 9, 3, func(r, b int) int { return 5*r + 3*b + 1 }, 4},
	{"mixed 37x1280", 37, 5, func(r, b int) int { return 7*r + 11*b }, 10},
}

func (s kquantShape) tensor(t *testing.T, typ gguf.Type, raw []byte) *gpu.Tensor {
	t.Helper()
	var maxChunk uint64
	if s.maxChunk > 0 {
		rowBytes, _ := typ.RowSize(int64(256 * s.nb))
		maxChunk = uint64(s.maxChunk) * uint64(rowBytes)
	}
	w, err := dev.NewTensor(s.name, typ, s.rows, 256*s.nb, raw, maxChunk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Release)
	if s.maxChunk > 0 && (len(w.Chunks) < 3 || w.Chunks[len(w.Chunks)-1].Rows == s.maxChunk) {
		t.Fatalf("%s: %d chunks, want ≥ 3 with a ragged last one", s.name, len(w.Chunks))
	}
	return w
}

func TestMatVecKQuantMatchesReference(t *testing.T) {
	for _, typ := range kquantTypes {
		q, deq := ggmlKBlocks(t, typ)
		for _, s := range kquantShapes {
			raw, wf := kquantWeights(q, deq, s.rows, s.nb, s.pick)
			w := s.tensor(t, typ, raw)
			k := 256 * s.nb
			worst := 0.0
			for _, production := range []bool{false, true} {
				x := kquantActs(t, k, 1, production, uint64(s.rows))
				want, scale := kquantOracle(wf, s.rows, k, x, 1)
				bx, by := upload(t, "x", x), scratch(t, "y", s.rows)
				run(t, "matvec", func(c *gpu.Chain) error { return MatVec(c, w, bx, by) })
				what := fmt.Sprintf("%v %s production=%v", typ, s.name, production)
				worst = max(worst, assertKQuantClose(t, what, download(t, by, s.rows), want, scale, kquantTol))
			}
			t.Logf("%v %s: worst |diff|/Σ|w·x| = %.2g", typ, s.name, worst)
		}
	}
}

func TestMatMulKQuantMatchesReference(t *testing.T) {
	for _, typ := range kquantTypes {
		q, deq := ggmlKBlocks(t, typ)
		for _, s := range kquantShapes[2:] {
			raw, wf := kquantWeights(q, deq, s.rows, s.nb, s.pick)
			w := s.tensor(t, typ, raw)
			k := 256 * s.nb
			worst := 0.0
			// 1 takes the matvec entry; 3 is a partial tile, 8 exactly one,
			// 9 a full tile plus a one-row tail.
			for _, m := range []int{1, 3, 8, 9} {
				for _, production := range []bool{false, true} {
					x := kquantActs(t, k, m, production, uint64(m))
					want, scale := kquantOracle(wf, s.rows, k, x, m)
					bx, by := upload(t, "x", x), scratch(t, "y", m*s.rows)
					run(t, "matmul", func(c *gpu.Chain) error { return MatMul(c, w, bx, by, m) })
					what := fmt.Sprintf("%v %s m=%d production=%v", typ, s.name, m, production)
					worst = max(worst, assertKQuantClose(t, what, download(t, by, m*s.rows), want, scale, kquantTol))
				}
			}
			t.Logf("%v %s: worst |diff|/Σ|w·x| = %.2g", typ, s.name, worst)
		}
	}
}

// TestMatMulKQuantPlacement checks the kernel's output placement: results
// accumulate onto y, at an offset, with a row stride wider than n.
func TestMatMulKQuantPlacement(t *testing.T) {
	const rows, nb, m, off, stride = 9, 3, 3, 5, 12
	k := 256 * nb
	for _, typ := range kquantTypes {
		q, deq := ggmlKBlocks(t, typ)
		s := kquantShape{"placed 9x768", rows, nb, func(r, b int) int { return 3*r + b }, 4}
		raw, wf := kquantWeights(q, deq, rows, nb, s.pick)
		w := s.tensor(t, typ, raw)
		x := kquantActs(t, k, m, false, 0)
		want, scale := kquantOracle(wf, rows, k, x, m)
		n := off + (m-1)*stride + rows + 2
		base := randVec(3, n, 1)
		bx, by := upload(t, "x", x), upload(t, "y", base)
		run(t, "matmul placed", func(c *gpu.Chain) error {
			return MatMulWith(c, w, bx, by, m, MatmulOptions{Accumulate: true, YOffset: off, YStride: stride})
		})
		got := download(t, by, n)
		// Outputs land at off + j·stride + r on top of base; every other
		// float must be untouched.
		inside := map[int]bool{}
		var placed []float32
		for j := range m {
			for r := range rows {
				i := off + j*stride + r
				inside[i] = true
				placed = append(placed, got[i]-base[i])
				// base is O(1) against sums O(10): the subtraction adds at
				// most one rounding of |y| ≤ Σ|w·x| + 1.
				scale[j*rows+r] += 1
			}
		}
		assertKQuantClose(t, typ.String()+" placed", placed, want, scale, kquantTol)
		for i := range n {
			if !inside[i] && got[i] != base[i] {
				t.Fatalf("%v placed: y[%d] = %v was overwritten (was %v)", typ, i, got[i], base[i])
			}
		}
	}
}

// TestMatVecKQuantRandomWeights quantizes random rows with gguf.Quantize,
// so the decoders also see scales, mins and bit patterns that ggml's eight
// input rows do not produce, and compares with ref.MatVec / ref.MatMul.
func TestMatVecKQuantRandomWeights(t *testing.T) {
	const rows, nb = 11, 3
	k := 256 * nb
	for _, typ := range kquantTypes {
		if !gguf.CanQuantize(typ) {
			t.Fatalf("gguf.Quantize does not support %v", typ)
		}
		// Row r has magnitude 10^(r%5 − 2) and, on odd rows, a positive
		// offset, so some sub-blocks are all-positive and mins come into play.
		src := make([]float32, rows*k)
		for r := range rows {
			v := randVec(uint64(100+r), k, float32(math.Pow(10, float64(r%5-2))))
			for i := range v {
				if r%2 == 1 {
					v[i] += float32(math.Pow(10, float64(r%5-2))) * 0.7
				}
				src[r*k+i] = v[i]
			}
		}
		raw := make([]byte, rows*nb*typ.TypeSize())
		if err := gguf.Quantize(typ, src, raw); err != nil {
			t.Fatal(err)
		}
		wf := make([]float32, rows*k)
		if err := gguf.Dequantize(typ, raw, wf); err != nil {
			t.Fatal(err)
		}
		s := kquantShape{"random 11x768", rows, nb, nil, 4}
		w := s.tensor(t, typ, raw)
		for _, m := range []int{1, 9} {
			x := kquantActs(t, k, m, true, uint64(7+m))
			refY, err := ref.MatMul(typ, rows, k, raw, x, m)
			if err != nil {
				t.Fatal(err)
			}
			_, scale := kquantOracle(wf, rows, k, x, m)
			want := make([]float64, len(refY))
			for i, v := range refY {
				want[i] = float64(v)
			}
			bx, by := upload(t, "x", x), scratch(t, "y", m*rows)
			run(t, "matmul random", func(c *gpu.Chain) error { return MatMul(c, w, bx, by, m) })
			// ref rounds its float64 sum to f32 once more: half an ulp of
			// |y| ≤ Σ|w·x|, inside the tolerance.
			assertKQuantClose(t, fmt.Sprintf("%v random m=%d", typ, m), download(t, by, m*rows), want, scale, kquantTol)
		}
	}
}

func TestMatVecKQuantRejectsShortX(t *testing.T) {
	q, deq := ggmlKBlocks(t, gguf.TypeQ6_K)
	s := kquantShapes[2]
	raw, _ := kquantWeights(q, deq, s.rows, s.nb, s.pick)
	w := s.tensor(t, gguf.TypeQ6_K, raw)
	x, y := upload(t, "x", make([]float32, 256*s.nb-1)), scratch(t, "y", s.rows)
	c, err := dev.NewChain("bad matvec")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	if err := MatVec(c, w, x, y); err == nil {
		t.Fatalf("MatVec accepted a %d-float x for a %d-column Q6_K weight", 256*s.nb-1, 256*s.nb)
	}
}

// TestMatVecKQuantGridWrap runs 65537 row groups, past the 65535-workgroup
// cap of one grid dimension, so the row group index comes from x and y.
// One Q2_K super-block per row (the smallest K-quant row) keeps it cheap;
// row r repeats ggml block r%16, so the oracle is 16 dot products. A
// 4-row launch keeps the tensor small (every shape forms its row index the
// same way).
func TestMatVecKQuantGridWrap(t *testing.T) {
	typ := gguf.TypeQ2_K
	launch := matmulLaunch{wg: 32, rows: 4, tm: 1}
	rows := launch.rows*65535 + 7
	q, deq := ggmlKBlocks(t, typ)
	raw := make([]byte, 0, rows*typ.TypeSize())
	for r := range rows {
		raw = append(raw, q[r%16]...)
	}
	w, err := dev.NewTensor("wrap", typ, rows, 256, raw, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Release)
	x := kquantActs(t, 256, 1, false, 0)
	var blocks []float32
	for _, d := range deq {
		blocks = append(blocks, d...)
	}
	bw, bs := kquantOracle(blocks, 16, 256, x, 1)
	want, scale := make([]float64, rows), make([]float64, rows)
	for r := range rows {
		want[r], scale[r] = bw[r%16], bs[r%16]
	}
	bx, by := upload(t, "x", x), scratch(t, "y", rows)
	kern, _ := matmulKernelFor(typ)
	kern.vec = launch
	run(t, "matvec wrap", func(c *gpu.Chain) error { return matmulWith(c, w, kern, bx, by, 1, MatmulOptions{}) })
	assertKQuantClose(t, "Q2_K grid wrap", download(t, by, rows), want, scale, kquantTol)
}
