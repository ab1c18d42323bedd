package ops

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
	"github.com/hearthstudio/hearth/gguf"
)

// tiledTestLaunches are the launch shapes the parity tests run: the two
// MatMulWith picks from (prefetching), a 64×64 tile of 8×8 blocks, and two
// without prefetch (an 8×4 block; a 4×8 block over 8-column stages split in
// 2 slices), each where the device can run it.
func tiledTestLaunches(t testing.TB) []tiledLaunch {
	var out []tiledLaunch
	for _, l := range []tiledLaunch{
		tiledLaunchMain, tiledLaunchLarge,
		{ct: 8, rt: 8, rr: 8, rc: 8, ks: 4, bk: 32, pf: true},
		{ct: 16, rt: 8, rr: 8, rc: 4, ks: 2, bk: 16},
		{ct: 8, rt: 16, rr: 4, rc: 8, ks: 2, bk: 8},
	} {
		if l.check(dev.Limits) == nil {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no tiled launch shape fits the device (%d bytes of workgroup memory)", dev.Limits.MaxComputeWorkgroupStorageSize)
	}
	return out
}

// runMatmulTiled runs the tiled kernel with launch l on the case and checks
// it against ref.MatMul, the reference first checked against ggml's own
// dequantization. The tolerance is matmulBackwardTol's with the k columns
// as the sum's length: an invocation adds its slice's products one after
// another in k order and the slices' sums are added in order, at most
// k/KS + KS ≤ k roundings, and the rest of that argument (one rounding per
// product, two for a decoded weight's d·q − m, a wrong nibble moving a sum
// by ~1e-3 of Σ|w·x|) holds as it is.
func runMatmulTiled(t *testing.T, typ gguf.Type, c matmulCase, l tiledLaunch) {
	t.Helper()
	q, deq := remix(t, typ, c.rows, c.cols)
	x := randVec(uint64(c.rows*131+c.cols*7+c.m), c.m*c.cols, c.xScale)
	want, err := ref.MatMul(typ, c.rows, c.cols, q, x, c.m)
	if err != nil {
		t.Fatal(err)
	}
	oracle, bound := denseMatMul(deq, c.rows, c.cols, x, c.m)
	// Bit-identical weights, both summed in float64 in the same order.
	assertClose(t, "ref.MatMul vs ggml dequant", want, oracle, 0, 1e-6)
	w := newChunkedTensor(t, typ, c.rows, c.cols, q, c.maxChunkRows)
	// y starts as garbage: the kernel must overwrite every element.
	bx, by := upload(t, "x", x), upload(t, "y", randVec(3, c.m*c.rows, 100))
	run(t, "matmul tiled", func(ch *gpu.Chain) error { return matmulTiledWith(ch, w, bx, by, c.m, MatmulOptions{}, l) })
	assertMatmulBackward(t, "gpu", download(t, by, c.m*c.rows), want, bound, c.cols)
}

func TestMatMulTiledMatchesReference(t *testing.T) {
	// Against every tile (16 to 64 activation rows, 64 weight rows, stages
	// of 8-32 columns): m below, between and past the tiles' rows; n = 37
	// and 70, ragged in the last tile; k of one block, of several stages,
	// and not a multiple of the stage.
	shapes := func(typ gguf.Type) []matmulCase {
		switch bs := typ.BlockSize(); {
		case bs == 1:
			// Any row length: 1, 13 and 101 are odd (an F16 row then starts
			// mid-word) and end mid-unit and mid-vec4.
			return []matmulCase{{3, 1, 20, 1, 0}, {70, 13, 17, 1, 0}, {37, 101, 70, 1, 0}}
		default:
			return []matmulCase{{37, bs, 70, 1, 0}, {70, 3 * bs, 17, 1, 0}, {5, 33 * bs, 3, 1, 0}}
		}
	}
	for _, l := range tiledTestLaunches(t) {
		for _, typ := range MatmulBackwardTypes() {
			for _, c := range shapes(typ) {
				t.Run(fmt.Sprintf("%v/%v/%v", l, typ, c), func(t *testing.T) { runMatmulTiled(t, typ, c, l) })
			}
		}
	}
}

func TestMatMulTiledChunkedTensor(t *testing.T) {
	// 150 rows in chunks of 40: 40 + 40 + 40 + 30, so row0 and each chunk's
	// n both matter, and a chunk ends inside a 64-row tile.
	l, _ := matmulTiledLaunchFor(dev.Limits, 70)
	for _, typ := range MatmulBackwardTypes() {
		c := matmulCase{150, 256, 70, 1, 40}
		t.Run(typ.String()+"/"+c.String(), func(t *testing.T) { runMatmulTiled(t, typ, c, l) })
	}
}

func TestMatMulTiledWideMagnitude(t *testing.T) {
	// Production magnitudes: FFN-down inputs after a GeGLU reach ±3e4 and
	// ggml's rows carry weight outliers of 2000 and 9000 next to
	// f16-subnormal block scales; then random weights quantized by the gguf
	// package. The tolerance is relative to Σ|w·x|, so it holds at any scale.
	l, _ := matmulTiledLaunchFor(dev.Limits, 40)
	for _, typ := range MatmulBackwardTypes() {
		t.Run(typ.String()+"/ggml", func(t *testing.T) { runMatmulTiled(t, typ, matmulCase{37, 2048, 40, 3e4, 0}, l) })
		t.Run(typ.String()+"/random", func(t *testing.T) {
			const rows, cols, m = 19, 1024, 20
			q := quantize(t, typ, randVec(7, rows*cols, 40))
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
			bx, by := upload(t, "x", x), scratch(t, "y", m*rows)
			run(t, "matmul tiled wide", func(c *gpu.Chain) error { return matmulTiledWith(c, w, bx, by, m, MatmulOptions{}, l) })
			assertMatmulBackward(t, "gpu", download(t, by, m*rows), want, bound, cols)
		})
	}
}

func TestMatMulTiledOptions(t *testing.T) {
	// A fused QKV's k projection inside a prompt: x rows padded to a stride
	// of 300, y rows at stride 100 from float 9 (the projection's columns
	// 9..9+n of each row), added onto what y holds, through a chunked
	// tensor (70 rows in chunks of 30) so every chunk's row0 lands at its
	// offset.
	const rows, cols, m, xs, ys, yOff = 70, 256, 21, 300, 100, 9
	for _, typ := range []gguf.Type{gguf.TypeQ4_K, gguf.TypeQ8_0, gguf.TypeF16, gguf.TypeQ5_1} {
		t.Run(typ.String(), func(t *testing.T) {
			q, deq := remix(t, typ, rows, cols)
			dense := randVec(21, m*cols, 2)
			xBuf := randVec(23, m*xs, 1e6) // the padding must not be read
			for j := range m {
				copy(xBuf[j*xs:], dense[j*cols:(j+1)*cols])
			}
			prior := randVec(22, yOff+m*ys, 3)
			prod, bound := denseMatMul(deq, rows, cols, dense, m)
			want := append([]float32(nil), prior...)
			wantBound := make([]float32, len(prior))
			for j := range m {
				for r := range rows {
					i := yOff + j*ys + r
					want[i] = float32(float64(prior[i]) + float64(prod[j*rows+r]))
					wantBound[i] = bound[j*rows+r] + float32(math.Abs(float64(prior[i])))
				}
			}
			w := newChunkedTensor(t, typ, rows, cols, q, 30)
			bx, by := upload(t, "x", xBuf), upload(t, "y", prior)
			run(t, "matmul tiled opts", func(c *gpu.Chain) error {
				return MatMulWith(c, w, bx, by, m, MatmulOptions{Accumulate: true, XStride: xs, YStride: ys, YOffset: yOff})
			})
			// Floats outside the m×rows block must be untouched: their bound
			// is 0, so any change fails.
			assertMatmulBackward(t, "gpu", download(t, by, len(prior)), want, wantBound, cols)
		})
	}
}

func TestMatMulRoutesPromptsToTiled(t *testing.T) {
	// Prompts from matmulTiledMinRows rows take the tiled kernel, shorter
	// ones the matmul_<type> entries and one row the matvec.
	q, _ := remix(t, gguf.TypeQ4_K, 8, 256)
	w := newTensor(t, "w", gguf.TypeQ4_K, 8, 256, q, 0)
	const maxM = matmulTiledMinRows
	x, y := upload(t, "x", randVec(1, maxM*256, 1)), scratch(t, "y", maxM*8)
	for _, c := range []struct {
		m    int
		want string
	}{{1, "matvec_q4_k"}, {matmulTiledMinRows - 1, "matmul_q4_k"}, {matmulTiledMinRows, "matmul_tiled_q4_k"}} {
		ch, err := dev.NewChain("route")
		if err != nil {
			t.Fatal(err)
		}
		if err := MatMul(ch, w, x, y, c.m); err != nil {
			ch.Discard()
			t.Fatal(err)
		}
		got := ch.Kernels()
		ch.Discard()
		if !slices.ContainsFunc(got, func(k string) bool { return strings.HasSuffix(k, "."+c.want) }) {
			t.Errorf("m=%d ran %v, want %s", c.m, got, c.want)
		}
	}
}

func TestMatMulTiledRejectsBadShapes(t *testing.T) {
	q, _ := remix(t, gguf.TypeQ4_0, 8, 64)
	w := newTensor(t, "w", gguf.TypeQ4_0, 8, 64, q, 0)
	iq := newTensor(t, "iq", gguf.TypeIQ2_XXS, 1, 256, make([]byte, 66), 0)
	x, y := scratch(t, "x", 20*64), scratch(t, "y", 20*8)
	short := scratch(t, "short", 7)
	l := tiledTestLaunches(t)[0]
	huge := tiledLaunch{ct: 8, rt: 8, rr: 8, rc: 8, ks: 1, bk: 1024}
	tiled := func(w *gpu.Tensor, x, y *gpu.Buffer, m int, o MatmulOptions, l tiledLaunch) func(c *gpu.Chain) error {
		return func(c *gpu.Chain) error { return matmulTiledWith(c, w, x, y, m, o, l) }
	}
	for _, c := range []struct {
		what, wantErr string
		call          func(c *gpu.Chain) error
	}{
		{"unsupported type", "IQ2_XXS", tiled(iq, x, y, 16, MatmulOptions{}, l)},
		{"nil tensor", "nil", tiled(nil, x, y, 16, MatmulOptions{}, l)},
		{"short x", "x buffer", tiled(w, short, y, 16, MatmulOptions{}, l)},
		{"short y for m=21", "y buffer", tiled(w, scratch(t, "x21", 21*64), y, 21, MatmulOptions{}, l)},
		{"x is y", "same buffer", tiled(w, x, x, 16, MatmulOptions{}, l)},
		{"m=0", "m = 0", tiled(w, x, y, 0, MatmulOptions{}, l)},
		{"y stride < n", "stride", tiled(w, x, y, 16, MatmulOptions{YStride: 4}, l)},
		{"x stride < k", "stride", tiled(w, x, y, 16, MatmulOptions{XStride: 10}, l)},
		{"negative offset", "offset", tiled(w, x, y, 16, MatmulOptions{YOffset: -1}, l)},
		{"y offset past y", "y buffer", tiled(w, x, y, 16, MatmulOptions{YOffset: 40}, l)},
		{"tile over the device's memory", "workgroup memory", tiled(w, x, y, 16, MatmulOptions{}, huge)},
		{"stage not split by slices", "slices", tiled(w, x, y, 16, MatmulOptions{}, tiledLaunch{ct: 8, rt: 8, rr: 4, rc: 4, ks: 3, bk: 16})},
		{"register block of 3 outputs", "register block", tiled(w, x, y, 16, MatmulOptions{}, tiledLaunch{ct: 8, rt: 8, rr: 1, rc: 3, ks: 1, bk: 16})},
		{"released tensor", "chunks cover", func(c *gpu.Chain) error {
			gone := newTensor(t, "gone", gguf.TypeQ4_0, 8, 64, q, 0)
			gone.Release()
			return matmulTiledWith(c, gone, x, y, 16, MatmulOptions{}, l)
		}},
	} {
		t.Run(c.what, func(t *testing.T) {
			ch, err := dev.NewChain("bad matmul tiled")
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

// TestMatMulTiledLaunchChoice: the 64×64 tile from tiledLargeMinRows rows
// where the device grants its workgroup memory, the 32×64 one below that
// or on a device with WebGPU's guaranteed 16 KiB.
func TestMatMulTiledLaunchChoice(t *testing.T) {
	lim := func(kib uint32) gpu.Limits {
		return gpu.Limits{MaxComputeWorkgroupStorageSize: kib << 10, MaxComputeInvocationsPerWorkgroup: 256}
	}
	for _, c := range []struct {
		kib  uint32
		m    int
		want tiledLaunch
	}{
		{48, 512, tiledLaunchLarge},
		{48, tiledLargeMinRows, tiledLaunchLarge},
		{48, tiledLargeMinRows - 1, tiledLaunchMain},
		{16, 512, tiledLaunchMain},
	} {
		got, ok := matmulTiledLaunchFor(lim(c.kib), c.m)
		if !ok || got != c.want {
			t.Errorf("%d KiB, m=%d: got %v (ok %v), want %v", c.kib, c.m, got, ok, c.want)
		}
	}
	if _, ok := matmulTiledLaunchFor(lim(8), 512); ok {
		t.Error("8 KiB of workgroup memory fits no tile, yet a launch was offered")
	}
}
