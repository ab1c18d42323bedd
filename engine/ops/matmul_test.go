package ops

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
	"github.com/hearthstudio/hearth/gguf"
)

// floatLegacyTypes are the weight types of matmul_float.wgsl and
// matmul_legacy.wgsl.
var floatLegacyTypes = []gguf.Type{
	gguf.TypeF32, gguf.TypeF16, gguf.TypeBF16,
	gguf.TypeQ4_0, gguf.TypeQ4_1, gguf.TypeQ5_0, gguf.TypeQ5_1, gguf.TypeQ8_0,
	gguf.TypeMXFP4,
}

// ggmlMatrix is ggml's 8×512 test matrix in type typ: the stored bytes
// ggml's quantizer wrote and ggml's own dequantization of them. F32 has no
// files (the README calls it trivial), so its matrix is input.f32 itself.
func ggmlMatrix(t testing.TB, typ gguf.Type) (q []byte, deq []float32) {
	t.Helper()
	if typ == gguf.TypeF32 {
		q = ggmlFile(t, "input.f32")
		return q, gpu.F32From(q)
	}
	return ggmlFile(t, typ.String()+".quant.bin"), gpu.F32From(ggmlFile(t, typ.String()+".dequant.f32"))
}

// remix builds a rows×cols matrix of type typ out of the blocks of ggml's
// test matrix: block j of row r is pool block (r*nb+j)*7 mod poolSize, so
// neighbouring blocks come from different source rows (outliers next to
// subnormal scales next to zeros) and any shape can be made. deq is ggml's
// dequantization of the same blocks, an oracle that does not depend on the
// gguf package.
func remix(t testing.TB, typ gguf.Type, rows, cols int) (q []byte, deq []float32) {
	t.Helper()
	srcQ, srcDeq := ggmlMatrix(t, typ)
	bs, ts := typ.BlockSize(), typ.TypeSize()
	if cols%bs != 0 {
		t.Fatalf("remix: %d columns is not a multiple of %v's block size %d", cols, typ, bs)
	}
	pool := len(srcDeq) / bs
	nb := cols / bs
	q = make([]byte, 0, rows*nb*ts)
	deq = make([]float32, 0, rows*cols)
	for r := range rows {
		for j := range nb {
			b := (r*nb + j) * 7 % pool
			q = append(q, srcQ[b*ts:(b+1)*ts]...)
			deq = append(deq, srcDeq[b*bs:(b+1)*bs]...)
		}
	}
	return q, deq
}

// newTensor uploads a tensor, with chunks of at most maxChunk bytes (0: the
// device limit).
func newTensor(t testing.TB, name string, typ gguf.Type, rows, cols int, data []byte, maxChunk uint64) *gpu.Tensor {
	t.Helper()
	w, err := dev.NewTensor(name, typ, rows, cols, data, maxChunk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Release)
	return w
}

// denseMatMul is Y = X·Wᵀ over already dequantized W, summed in float64, and
// bound[i] = Σ|w·x| for each output: the scale a float32 sum's rounding
// error is proportional to, used for tolerances (|want| alone can be near
// zero after cancellation while the error is not).
func denseMatMul(w []float32, rows, cols int, x []float32, m int) (y, bound []float32) {
	y, bound = make([]float32, m*rows), make([]float32, m*rows)
	for j := range m {
		for r := range rows {
			var s, a float64
			for i := range cols {
				p := float64(w[r*cols+i]) * float64(x[j*cols+i])
				s += p
				a += math.Abs(p)
			}
			y[j*rows+r], bound[j*rows+r] = float32(s), float32(a)
		}
	}
	return y, bound
}

// matmulRTol bounds the GPU's float32 summation error relative to Σ|w·x|.
// Prefill and float decode: each output is a sum tree of depth at most 8
// (one 8-weight part: two 4-term dots and their sum) + the parts one thread
// walks (≤ 8 here) + 1 (the block scale) + log2(256) (the workgroup
// reduction) = 25 roundings of 2^-24 each. Quantized decode: 8 for a
// 32-weight block (product, 3 in a dot, 3 joining 8 dots, the scale), then
// ≤ 17 blocks a lane adds up plus 1 for a 2-unit iteration (K ≤ 2080 is 65
// blocks over ≥ 4 lanes), then LANES/4 − 1 + 2 to join the lanes; fewer
// lanes mean more blocks each, and the sum of both stays ≤ 20 for 4-64
// lanes: 28 roundings. Both are below 2e-6, still ~10^4 times smaller than
// the error of a wrong nibble or scale. (Measured worst on lavapipe: 0.14
// of it.)
const matmulRTol = 2e-6

// assertMatmul compares got with want within matmulRTol·bound (plus a tiny
// absolute floor for all-zero rows), reporting the worst element.
func assertMatmul(t testing.TB, what string, got, want, bound []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d values, want %d", what, len(got), len(want))
	}
	worst, at := 0.0, -1
	for i := range want {
		g, w := float64(got[i]), float64(want[i])
		if math.IsNaN(g) || math.IsInf(g, 0) {
			t.Fatalf("%s: [%d] = %v, want %v", what, i, g, w)
		}
		tol := matmulRTol*float64(bound[i]) + 1e-30
		if e := math.Abs(g-w) / tol; e > 1 && e > worst {
			worst, at = e, i
		}
	}
	if at >= 0 {
		t.Fatalf("%s: [%d] = %v, want %v (|diff| %.3g is %.3g× the tolerance %.3g·Σ|wx| = %.3g)",
			what, at, got[at], want[at], math.Abs(float64(got[at]-want[at])), worst, matmulRTol, matmulRTol*float64(bound[at]))
	}
}

// matmulCase is one shape of the parity tests.
type matmulCase struct {
	rows, cols, m int
	xScale        float32
	maxChunkRows  int // rows per chunk; 0 for one chunk
}

func (c matmulCase) String() string {
	s := fmt.Sprintf("%dx%d_m%d_x%g", c.rows, c.cols, c.m, c.xScale)
	if c.maxChunkRows > 0 {
		s += fmt.Sprintf("_chunk%d", c.maxChunkRows)
	}
	return s
}

// runMatmulCase checks ref.MatMul against ggml's dequantization, then the
// newChunkedTensor uploads q as the weight "w", split into chunks of
// chunkRows rows (0: as few chunks as the binding limit allows), and fails
// unless a split was asked for and made.
func newChunkedTensor(t *testing.T, typ gguf.Type, rows, cols int, q []byte, chunkRows int) *gpu.Tensor {
	t.Helper()
	var maxChunk uint64
	if chunkRows > 0 {
		rb, _ := typ.RowSize(int64(cols))
		maxChunk = uint64(chunkRows) * uint64(rb)
	}
	w := newTensor(t, "w", typ, rows, cols, q, maxChunk)
	if chunkRows > 0 && len(w.Chunks) < 2 {
		t.Fatalf("wanted a chunked tensor, got %d chunk(s)", len(w.Chunks))
	}
	return w
}

// GPU against ref.MatMul, for one type and shape.
func runMatmulCase(t *testing.T, typ gguf.Type, c matmulCase) {
	t.Helper()
	q, deq := remix(t, typ, c.rows, c.cols)
	x := randVec(uint64(c.rows*131+c.cols), c.m*c.cols, c.xScale)
	want, err := ref.MatMul(typ, c.rows, c.cols, q, x, c.m)
	if err != nil {
		t.Fatal(err)
	}
	oracle, bound := denseMatMul(deq, c.rows, c.cols, x, c.m)
	// The reference and the ggml oracle see bit-identical weights and both
	// sum in float64: they agree to float32 rounding.
	assertClose(t, "ref.MatMul vs ggml dequant", want, oracle, 0, 1e-6)

	w := newChunkedTensor(t, typ, c.rows, c.cols, q, c.maxChunkRows)
	bx, by := upload(t, "x", x), scratch(t, "y", c.m*c.rows)
	run(t, "matmul", func(ch *gpu.Chain) error {
		if c.m == 1 {
			return MatVec(ch, w, bx, by)
		}
		return MatMul(ch, w, bx, by, c.m)
	})
	assertMatmul(t, "gpu", download(t, by, c.m*c.rows), want, bound)
}

func TestMatVecMatchesReference(t *testing.T) {
	// ggml's own 8×512 rows first, then shapes that are not multiples of the
	// 4-row workgroup or the 64-thread row stride: one block, 3 blocks,
	// 33 blocks (K=1056), 1 row, 37 and 65 rows.
	quantShapes := []matmulCase{
		{8, 512, 1, 1, 0}, {1, 32, 1, 1, 0}, {5, 96, 1, 1, 0},
		{37, 1056, 1, 1, 0}, {65, 160, 1, 1, 0}, {3, 2080, 1, 1, 0},
	}
	// Float rows may have any length: k below one 8-element unit, odd k (an
	// F16 row then starts mid-word), and k%8 tails.
	floatShapes := append([]matmulCase{{1, 1, 1, 1, 0}, {3, 13, 1, 1, 0}, {37, 517, 1, 1, 0}, {6, 1023, 1, 1, 0}}, quantShapes...)
	for _, typ := range floatLegacyTypes {
		shapes := quantShapes
		if typ.BlockSize() == 1 {
			shapes = floatShapes
		}
		for _, c := range shapes {
			t.Run(typ.String()+"/"+c.String(), func(t *testing.T) { runMatmulCase(t, typ, c) })
		}
	}
}

func TestMatMulMatchesReference(t *testing.T) {
	// m below, at and past the 8-row activation tile, with ragged tiles.
	shapes := []matmulCase{
		{8, 512, 2, 1, 0}, {37, 96, 8, 1, 0}, {5, 1056, 9, 1, 0}, {65, 64, 17, 1, 0},
	}
	for _, typ := range floatLegacyTypes {
		for _, c := range shapes {
			if typ.BlockSize() == 1 && c.cols == 96 {
				c.cols = 101 // an odd row length for the float kernels
			}
			t.Run(typ.String()+"/"+c.String(), func(t *testing.T) { runMatmulCase(t, typ, c) })
		}
	}
}

func TestMatmulChunkedTensor(t *testing.T) {
	// 37 rows in chunks of 15: 15 + 15 + 7, a ragged last chunk, so row0
	// and the per-chunk n both matter.
	for _, typ := range floatLegacyTypes {
		for _, m := range []int{1, 10} {
			c := matmulCase{37, 160, m, 1, 15}
			t.Run(typ.String()+"/"+c.String(), func(t *testing.T) { runMatmulCase(t, typ, c) })
		}
	}
}

func TestMatmulWideMagnitude(t *testing.T) {
	// Production magnitudes: FFN-down inputs after a GeGLU reach ±3e4, and
	// the remixed ggml rows carry weight outliers of 2000 and 9000 next to
	// f16-subnormal block scales. Random weights quantized by the gguf
	// package add blocks ggml's rows do not have. The tolerance is relative
	// to Σ|w·x|, so it stays meaningful at any scale.
	for _, typ := range floatLegacyTypes {
		for _, c := range []matmulCase{{37, 1056, 1, 3e4, 0}, {9, 2048, 11, 3e4, 0}} {
			t.Run(typ.String()+"/ggml/"+c.String(), func(t *testing.T) { runMatmulCase(t, typ, c) })
		}
		t.Run(typ.String()+"/random", func(t *testing.T) {
			const rows, cols, m = 19, 1024, 3
			wf := randVec(7, rows*cols, 40)
			q := quantize(t, typ, wf)
			x := randVec(8, m*cols, 3e4)
			want, err := ref.MatMul(typ, rows, cols, q, x, m)
			if err != nil {
				t.Fatal(err)
			}
			deq := make([]float32, rows*cols)
			if err := gguf.Dequantize(typ, q, deq); err != nil {
				t.Fatal(err)
			}
			_, bound := denseMatMul(deq, rows, cols, x, m)
			w := newTensor(t, "w", typ, rows, cols, q, 0)
			bx, by, by1 := upload(t, "x", x), scratch(t, "y", m*rows), scratch(t, "y1", rows)
			run(t, "matmul wide", func(c *gpu.Chain) error {
				if err := MatMul(c, w, bx, by, m); err != nil {
					return err
				}
				return MatVec(c, w, bx, by1)
			})
			assertMatmul(t, "matmul", download(t, by, m*rows), want, bound)
			assertMatmul(t, "matvec", download(t, by1, rows), want[:rows], bound[:rows])
		})
	}
}

// quantize encodes f32 values as typ with the gguf package.
func quantize(t testing.TB, typ gguf.Type, v []float32) []byte {
	t.Helper()
	n, _ := typ.RowSize(int64(len(v)))
	q := make([]byte, n)
	if err := gguf.Quantize(typ, v, q); err != nil {
		t.Fatal(err)
	}
	return q
}

func TestMatmulGridWrap(t *testing.T) {
	// 65535 workgroups of 4 rows and 7 rows more is just past the
	// 65535-per-dimension cap, so the grid wraps into y. K=32 (one Q4_0
	// block per row) and a 4-row launch (every shape forms its row index
	// the same way) keep it cheap on lavapipe.
	const rows, cols = 4*65535 + 7, 32
	typ := gguf.TypeQ4_0
	kern, _ := matmulKernelFor(typ)
	kern.vec = matmulLaunch{wg: 32, rows: 4, tm: 1}
	q, _ := remix(t, typ, rows, cols)
	x := randVec(3, cols, 1)
	want, err := ref.MatVec(typ, rows, cols, q, x)
	if err != nil {
		t.Fatal(err)
	}
	deq := make([]float32, rows*cols)
	if err := gguf.Dequantize(typ, q, deq); err != nil {
		t.Fatal(err)
	}
	_, bound := denseMatMul(deq, rows, cols, x, 1)
	w := newTensor(t, "w", typ, rows, cols, q, 0)
	bx, by := upload(t, "x", x), scratch(t, "y", rows)
	run(t, "matvec wrap", func(c *gpu.Chain) error { return matmulWith(c, w, kern, bx, by, 1, MatmulOptions{}) })
	assertMatmul(t, "gpu", download(t, by, rows), want, bound)
}

func TestMatmulOptions(t *testing.T) {
	// A fused-QKV style output: Q (12 rows), K (5) and V (5) written side by
	// side into one 22-wide row per activation, K accumulated onto a bias
	// already in y, and x rows padded to a stride of 200 floats.
	const cols, m, xs, ys = 160, 3, 200, 22
	type part struct {
		typ  gguf.Type
		rows int
		off  int
		acc  bool
	}
	parts := []part{{gguf.TypeQ8_0, 12, 0, false}, {gguf.TypeQ4_1, 5, 12, true}, {gguf.TypeF16, 5, 17, false}}
	x := randVec(11, (m-1)*xs+cols, 2)
	bias := randVec(12, m*ys, 1)
	want := append([]float32(nil), bias...)
	bound := make([]float32, m*ys)
	dense := make([]float32, m*cols)
	for j := range m {
		copy(dense[j*cols:], x[j*xs:j*xs+cols])
	}
	by := upload(t, "y", bias)
	bx := upload(t, "x", x)
	var ws []*gpu.Tensor
	for i, p := range parts {
		q, deq := remix(t, p.typ, p.rows, cols)
		y, b := denseMatMul(deq, p.rows, cols, dense, m)
		for j := range m {
			for r := range p.rows {
				k := j*ys + p.off + r
				if p.acc {
					want[k] += y[j*p.rows+r]
					b[j*p.rows+r] += float32(math.Abs(float64(bias[k]))) // the bias is one more term of the sum
				} else {
					want[k] = y[j*p.rows+r]
				}
				bound[k] = b[j*p.rows+r]
			}
		}
		ws = append(ws, newTensor(t, fmt.Sprint("w", i), p.typ, p.rows, cols, q, 0))
	}
	for _, mm := range []int{m, 1} {
		by := by
		if mm == 1 {
			by = upload(t, "y1", bias)
		}
		run(t, "matmul opts", func(c *gpu.Chain) error {
			for i, p := range parts {
				o := MatmulOptions{Accumulate: p.acc, YOffset: p.off, YStride: ys, XStride: xs}
				if err := MatMulWith(c, ws[i], bx, by, mm, o); err != nil {
					return err
				}
			}
			return nil
		})
		assertMatmul(t, fmt.Sprint("m=", mm), download(t, by, mm*ys), want[:mm*ys], bound[:mm*ys])
	}
}

func TestMatmulRejectsBadShapes(t *testing.T) {
	q, _ := remix(t, gguf.TypeQ4_0, 8, 64)
	w := newTensor(t, "w", gguf.TypeQ4_0, 8, 64, q, 0)
	iq := newTensor(t, "iq", gguf.TypeIQ2_XXS, 1, 256, make([]byte, 66), 0)
	x, y := scratch(t, "x", 4*64), scratch(t, "y", 3*8)
	short := scratch(t, "short", 63)
	checkMatmulRejects(t, []matmulRejectCase{
		{"unsupported type", "IQ2_XXS", func(c *gpu.Chain) error { return MatVec(c, iq, x, y) }},
		{"short x", "x buffer", func(c *gpu.Chain) error { return MatVec(c, w, short, y) }},
		{"short y for m=4", "y buffer", func(c *gpu.Chain) error { return MatMul(c, w, x, y, 4) }},
		{"x is y", "same buffer", func(c *gpu.Chain) error { return MatVec(c, w, x, x) }},
		{"m=0", "m = 0", func(c *gpu.Chain) error { return MatMul(c, w, x, y, 0) }},
		{"x stride < k", "stride", func(c *gpu.Chain) error {
			return MatMulWith(c, w, x, y, 2, MatmulOptions{XStride: 10})
		}},
		{"y stride < n", "overlap", func(c *gpu.Chain) error {
			return MatMulWith(c, w, x, y, 2, MatmulOptions{YStride: 4})
		}},
		{"y offset past y", "y buffer", func(c *gpu.Chain) error {
			return MatMulWith(c, w, x, y, 1, MatmulOptions{YOffset: 20})
		}},
		{"nil tensor", "nil", func(c *gpu.Chain) error { return MatVec(c, nil, x, y) }},
		{"released tensor", "chunks cover", func(c *gpu.Chain) error {
			gone := newTensor(t, "gone", gguf.TypeQ4_0, 8, 64, q, 0)
			gone.Release()
			return MatVec(c, gone, x, y)
		}},
	})
}

// TestMatmulTypesListed pins the type table: every float and legacy type is
// served, by the family the contract names, and every table shape is one
// its kernel can run.
func TestMatmulTypesListed(t *testing.T) {
	for _, typ := range floatLegacyTypes {
		k, ok := matmulKernelFor(typ)
		if !ok {
			t.Fatalf("%v has no matmul kernel", typ)
		}
		if k.name != strings.ToLower(typ.String()) {
			t.Errorf("%v: entry suffix %q, want %q", typ, k.name, strings.ToLower(typ.String()))
		}
		launches := []matmulLaunch{k.vec, k.mat}
		if typ.BlockSize() > 1 {
			if err := checkVecLaunch(dev, typ.String(), k.vec); err != nil {
				t.Error(err)
			}
			launches = launches[1:]
		}
		for _, l := range launches {
			if l.wg&(l.wg-1) != 0 || l.wg < l.rows*l.tm {
				t.Errorf("%v: launch %+v: WG must be a power of two of at least ROWS*TM", typ, l)
			}
		}
	}
	for _, typ := range kquantTypes {
		k, _ := matmulKernelFor(typ)
		if err := checkVecLaunch(dev, typ.String(), k.vec); err != nil {
			t.Error(err)
		}
	}
}

// quantTypes are the weight types whose matvec runs on the skeleton of
// shaders/matvec_common.wgsl.
var quantTypes = []gguf.Type{
	gguf.TypeQ4_0, gguf.TypeQ4_1, gguf.TypeQ5_0, gguf.TypeQ5_1, gguf.TypeQ8_0,
	gguf.TypeQ2_K, gguf.TypeQ3_K, gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K,
	gguf.TypeMXFP4, // last, so the types before it keep their seeds
}

// matvecLaunchVariants are the quantized matvec shapes BenchmarkMatVecLaunch
// sweeps: 4 to 64 lanes per row, x from global memory (xch 0) or staged in
// chunks up to the 32 KiB of workgroup memory a big GPU offers. Every one
// is parity-tested, so a shape the lead picks from the sweep is known good.
var matvecLaunchVariants = []matmulLaunch{
	{wg: 256, rows: 64, tm: 1}, {wg: 256, rows: 32, tm: 1}, {wg: 256, rows: 16, tm: 1},
	{wg: 256, rows: 8, tm: 1}, {wg: 256, rows: 4, tm: 1},
	{wg: 128, rows: 16, tm: 1}, {wg: 128, rows: 8, tm: 1}, {wg: 64, rows: 8, tm: 1},
	{wg: 256, rows: 32, tm: 1, unroll: 2}, {wg: 256, rows: 16, tm: 1, unroll: 2},
	{wg: 128, rows: 8, tm: 1, unroll: 2}, {wg: 256, rows: 64, tm: 1, unroll: 2},
	{wg: 256, rows: 32, tm: 1, xch: 2048}, {wg: 256, rows: 32, tm: 1, xch: 4096},
	{wg: 256, rows: 16, tm: 1, xch: 4096}, {wg: 256, rows: 64, tm: 1, xch: 4096},
	{wg: 256, rows: 32, tm: 1, xch: 4096, unroll: 2}, {wg: 256, rows: 32, tm: 1, xch: 7168},
}

func (l matmulLaunch) String() string {
	return fmt.Sprintf("wg%d_rows%d_xch%d_u%d", l.wg, l.rows, l.xch, max(l.unroll, 1))
}

// TestMatVecLaunchShapesMatchReference runs every quantized type through
// every benchmarked matvec shape against ref.MatMul, on rows that leave a
// ragged last workgroup (37 rows against 4-64 per workgroup), a row of a
// single block, and rows that end in a partial staging chunk (chunks of 256
// and 512 floats over K = 1280 or 1056), at unit and production (±3e4)
// activation magnitudes.
func TestMatVecLaunchShapesMatchReference(t *testing.T) {
	launches := append([]matmulLaunch{{wg: 256, rows: 32, tm: 1, xch: 256}, {wg: 128, rows: 8, tm: 1, xch: 512}}, matvecLaunchVariants...)
	for _, typ := range quantTypes {
		bs := typ.BlockSize()
		tol := matmulRTol
		if bs == 256 {
			tol = kquantTol
		}
		shapes := []struct{ rows, cols int }{{37, 5 * 256}, {70, bs}}
		if bs == 32 {
			shapes = append(shapes, struct{ rows, cols int }{5, 33 * 32})
		}
		for _, sh := range shapes {
			q, deq := remix(t, typ, sh.rows, sh.cols)
			w := newTensor(t, "w", typ, sh.rows, sh.cols, q, 0)
			for _, scale := range []float32{1, 3e4} {
				x := randVec(uint64(sh.rows+sh.cols), sh.cols, scale)
				want, err := ref.MatVec(typ, sh.rows, sh.cols, q, x)
				if err != nil {
					t.Fatal(err)
				}
				_, bound := denseMatMul(deq, sh.rows, sh.cols, x, 1)
				bx := upload(t, "x", x)
				for _, l := range launches {
					if checkVecLaunch(dev, "w", l) != nil {
						continue // more workgroup memory than this adapter has
					}
					kern, _ := matmulKernelFor(typ)
					kern.vec = l
					by := scratch(t, "y", sh.rows)
					run(t, "matvec", func(c *gpu.Chain) error { return matmulWith(c, w, kern, bx, by, 1, MatmulOptions{}) })
					got := download(t, by, sh.rows)
					what := fmt.Sprintf("%v %dx%d x%g %v", typ, sh.rows, sh.cols, scale, l)
					for i := range want {
						if d := math.Abs(float64(got[i] - want[i])); !(d <= tol*float64(bound[i])+1e-30) {
							t.Fatalf("%s: [%d] = %v, want %v (|diff| %.3g > %.0e·Σ|wx|)", what, i, got[i], want[i], d, tol)
						}
					}
				}
			}
		}
	}
}

// TestMatVecRejectsBadLaunch: a quantized matvec shape the WGSL cannot run
// is an error naming the constraint, not a wrong result.
func TestMatVecRejectsBadLaunch(t *testing.T) {
	q, _ := remix(t, gguf.TypeQ4_K, 4, 256)
	w := newTensor(t, "w", gguf.TypeQ4_K, 4, 256, q, 0)
	x, y := scratch(t, "x", 256), scratch(t, "y", 4)
	huge := int(dev.Limits.MaxComputeWorkgroupStorageSize)/4/256*256 + 256
	var cases []matmulRejectCase
	for _, c := range []struct {
		launch  matmulLaunch
		wantErr string
	}{
		{matmulLaunch{wg: 256, rows: 128, tm: 1}, "multiple of 4 lanes"},
		{matmulLaunch{wg: 96, rows: 16, tm: 1}, "multiple of 4 lanes"},
		{matmulLaunch{wg: 256, rows: 3, tm: 1}, "multiple of 4 lanes"},
		{matmulLaunch{wg: 256, rows: 16, tm: 1, xch: 1000}, "not a multiple of 256"},
		{matmulLaunch{wg: 256, rows: 16, tm: 1, unroll: 3}, "unroll"},
		{matmulLaunch{wg: 256, rows: 16, tm: 1, xch: huge}, "workgroup memory"},
	} {
		kern, _ := matmulKernelFor(gguf.TypeQ4_K)
		kern.vec = c.launch
		cases = append(cases, matmulRejectCase{c.launch.String(), c.wantErr, func(ch *gpu.Chain) error {
			return matmulWith(ch, w, kern, x, y, 1, MatmulOptions{})
		}})
	}
	checkMatmulRejects(t, cases)
}

// matmulRejectCase is a call that must fail with an error mentioning wantErr.
type matmulRejectCase struct {
	what, wantErr string
	call          func(c *gpu.Chain) error
}

func checkMatmulRejects(t *testing.T, cases []matmulRejectCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.what, func(t *testing.T) {
			ch, err := dev.NewChain("bad " + c.what)
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

// normedExtraTol is what fusing RMSNorm adds to a matvec's tolerance
// (relative to Σ|w·x̂|, x̂ the normalised x). The GPU's sum of squares takes
// ≤ ~75 roundings (vec4 dots, the ≤ 4 vec4s a thread adds at k ≤ 4096, 64
// partial vec4s joined serially), so mean(x²) is off by ≤ 75·2⁻²⁴ ≈ 4.5e-6
// relative and its inverse square root (2 ulp in Vulkan) by half that plus
// 1.2e-7; scaling x by it and by the gain rounds twice more. Every x̂ moves
// by the same ≤ ~2.5e-6 factor, which moves the sum by ≤ 2.5e-6·Σ|w·x̂|.
const normedExtraTol = 3e-6

// TestMatVecNormedMatchesReference checks the fused RMSNorm + matvec against
// ref.RMSNorm followed by ref.MatVec, for every quantized type, through the
// public entry (one staged chunk) and through a 256-float chunk that
// normalises x in 5 passes, with a plain and a 1 + g gain, on a
// production-magnitude residual stream (±3e4) and rows that leave a ragged
// last workgroup.
func TestMatVecNormedMatchesReference(t *testing.T) {
	const rows, k = 37, 1280
	for i, typ := range quantTypes {
		tol := matmulRTol + normedExtraTol
		if typ.BlockSize() == 256 {
			tol = kquantTol + normedExtraTol
		}
		q, deq := remix(t, typ, rows, k)
		w := newTensor(t, "w", typ, rows, k, q, 0)
		x := randVec(uint64(40+i), k, 3e4)
		g := randVec(uint64(60+i), k, 0.5)
		a := NormArgs{Rows: 1, Dim: k, Eps: 1e-5, OnePlus: i%2 == 1}
		xn := ref.RMSNorm(x, g, ref.NormArgs{Rows: 1, Dim: k, Eps: a.Eps, OnePlus: a.OnePlus})
		want, err := ref.MatVec(typ, rows, k, q, xn)
		if err != nil {
			t.Fatal(err)
		}
		_, bound := denseMatMul(deq, rows, k, xn, 1)
		bx, bg := upload(t, "x", x), upload(t, "g", g)
		kern, _ := matmulKernelFor(typ)
		chunked := kern.vec
		chunked.xch = 256
		for _, via := range []string{"MatVecNormed", "xch256"} {
			by := scratch(t, "y", rows)
			run(t, "matvec normed", func(c *gpu.Chain) error {
				if via == "xch256" {
					return matmulDispatch(c, w, kern, bx, by, 1, MatmulOptions{}, &vecFusion{g: bg, norm: a, launch: chunked})
				}
				return MatVecNormed(c, w, bx, bg, by, a, MatmulOptions{})
			})
			got := download(t, by, rows)
			for r := range want {
				if d := math.Abs(float64(got[r] - want[r])); !(d <= tol*float64(bound[r])+1e-30) {
					t.Fatalf("%v %s one_plus=%v: [%d] = %v, want %v (|diff| %.3g > %.1e·Σ|w·x̂|)", typ, via, a.OnePlus, r, got[r], want[r], d, tol)
				}
			}
		}
	}
}

func TestMatVecNormedRejectsBadShapes(t *testing.T) {
	q, _ := remix(t, gguf.TypeQ8_0, 4, 64)
	w := newTensor(t, "w", gguf.TypeQ8_0, 4, 64, q, 0)
	fq, _ := remix(t, gguf.TypeF16, 4, 64)
	fw := newTensor(t, "fw", gguf.TypeF16, 4, 64, fq, 0)
	x, g, y, short := scratch(t, "x", 64), scratch(t, "g", 64), scratch(t, "y", 4), scratch(t, "short", 63)
	wide := scratch(t, "wide", 64)
	ok := NormArgs{Rows: 1, Dim: 64, Eps: 1e-6}
	checkMatmulRejects(t, []matmulRejectCase{
		{"float weight", "fused-norm", func(c *gpu.Chain) error { return MatVecNormed(c, fw, x, g, y, ok, MatmulOptions{}) }},
		{"dim != k", "norm shape", func(c *gpu.Chain) error {
			return MatVecNormed(c, w, x, g, y, NormArgs{Rows: 1, Dim: 32, Eps: 1e-6}, MatmulOptions{})
		}},
		{"two rows", "norm shape", func(c *gpu.Chain) error {
			return MatVecNormed(c, w, x, g, y, NormArgs{Rows: 2, Dim: 64, Eps: 1e-6}, MatmulOptions{})
		}},
		{"negative eps", "eps", func(c *gpu.Chain) error {
			return MatVecNormed(c, w, x, g, y, NormArgs{Rows: 1, Dim: 64, Eps: -1}, MatmulOptions{})
		}},
		{"short gain", "gain", func(c *gpu.Chain) error { return MatVecNormed(c, w, x, short, y, ok, MatmulOptions{}) }},
		{"nil gain", "gain", func(c *gpu.Chain) error { return MatVecNormed(c, w, x, nil, y, ok, MatmulOptions{}) }},
		{"gain is y", "same buffer", func(c *gpu.Chain) error { return MatVecNormed(c, w, x, wide, wide, ok, MatmulOptions{}) }},
		{"short x", "x buffer", func(c *gpu.Chain) error { return MatVecNormed(c, w, short, g, y, ok, MatmulOptions{}) }},
		{"nil tensor", "nil", func(c *gpu.Chain) error { return MatVecNormed(c, nil, x, g, y, ok, MatmulOptions{}) }},
	})
}

// TestFitVecLaunch: the table's 4096-float staging chunk (17 KiB with the
// partial sums) is halved on a device granting WebGPU's guaranteed 16 KiB
// and kept where the memory is there (lavapipe's 32, the H200's 48).
func TestFitVecLaunch(t *testing.T) {
	for _, c := range []struct {
		kib  uint32
		want int
	}{{16, 2048}, {32, 4096}, {48, 4096}} {
		d := &gpu.Device{Limits: gpu.Limits{MaxComputeWorkgroupStorageSize: c.kib << 10}}
		if got := fitVecLaunch(d, vecLaunch); got.xch != c.want || checkVecLaunch(d, "w", got) != nil {
			t.Errorf("%d KiB: chunk %d (%v), want %d", c.kib, got.xch, checkVecLaunch(d, "w", got), c.want)
		}
	}
}
