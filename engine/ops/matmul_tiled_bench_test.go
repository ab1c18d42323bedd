package ops

import (
	"fmt"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/gguf"
)

// tiledSweepLaunches are the launch shapes BenchmarkMatMulTiled compares at
// m = 512 besides the default: 4×4, 4×8 and 8×8 register blocks; 32×64,
// 64×64, 64×128 and 128×128 tiles; stages of 16 and 32 columns; 64 to 256
// invocations; with and without prefetch. A shape needing more workgroup
// memory than the device grants is skipped (the 128×128 tile with
// 32-column stages needs 36 KiB).
var tiledSweepLaunches = []tiledLaunch{
	{ct: 8, rt: 8, rr: 4, rc: 8, ks: 4, bk: 32}, // the main shape without prefetch
	tiledLaunchMain,
	{ct: 8, rt: 8, rr: 8, rc: 8, ks: 4, bk: 32},
	{ct: 16, rt: 16, rr: 4, rc: 4, ks: 1, bk: 16, pf: true},
	{ct: 8, rt: 16, rr: 4, rc: 8, ks: 2, bk: 32, pf: true},
	{ct: 8, rt: 8, rr: 8, rc: 8, ks: 1, bk: 32, pf: true},
	{ct: 16, rt: 8, rr: 8, rc: 8, ks: 1, bk: 32, pf: true},
	{ct: 16, rt: 16, rr: 8, rc: 8, ks: 1, bk: 16, pf: true},
	{ct: 16, rt: 16, rr: 8, rc: 8, ks: 1, bk: 32, pf: true},
	{ct: 16, rt: 16, rr: 8, rc: 8, ks: 1, bk: 32},
}

// tiledShortLaunches are the shapes BenchmarkMatMulTiled adds below 64
// rows, where few tiles cover the prompt: a 16×32 tile in 8 slices, a
// 16×64 one, and the main shape.
var tiledShortLaunches = []tiledLaunch{
	{ct: 8, rt: 4, rr: 4, rc: 4, ks: 8, bk: 32, pf: true},
	{ct: 16, rt: 4, rr: 4, rc: 4, ks: 4, bk: 32, pf: true},
	tiledLaunchMain,
}

// q8TileSweep are the shapes of matmul_q8 BenchmarkMatMulTiled tries at m =
// 512 besides the default: 64×128, 128×64 and 128×128 tiles, 4×8, 8×4
// and 8×8 blocks, 128 and 256 invocations.
var q8TileSweep = []q8TileLaunch{
	{rt: 16, ct: 16, rr: 4, rc: 8},
	{rt: 16, ct: 16, rr: 8, rc: 4},
	{rt: 16, ct: 16, rr: 8, rc: 8},
	{rt: 8, ct: 16, rr: 8, rc: 4},
	{rt: 16, ct: 8, rr: 4, rc: 8},
}

// BenchmarkMatMulTiled compares the prefill kernels, Y = X·Wᵀ, on the
// projections of llama-3.1-8b (4096×4096 q/o, 1024×4096 k/v, 14336×4096
// gate/up, 4096×14336 down) and llama-3.2-1b (2048×2048, 8192×2048), n×k, in the
// types of the common files. For each it runs, at m = 512 (pp512), the
// matmul_<type> entries ("old"), the tiled kernel with the launch
// MatMulWith picks (the first "tiled_" line, named by its shape) and every
// shape of tiledSweepLaunches; at m = 16, 32 and 64 old, the picked launch
// and tiledShortLaunches, to place matmulTiledMinRows. Where the device
// takes dot4I8Packed it adds, for Q4_K, Q6_K and Q8_0, MatMulQ8 on x
// quantized beforehand ("q8_" and the shape, with q8TileSweep at m = 512)
// and with QuantizeQ8 in the timing ("quantize+q8"). TFLOP/s counts
// 2·m·n·k per op. On a software adapter it runs 256×256 weights only, which
// compares the kernels with each other and nothing more.
//
// On an H200 (about 90 s; add e.g. '/m512' or '/Q4_K' to the pattern to
// run a part):
//
//	go test ./engine/ops -run '^$' -bench 'MatMulTiled' -benchtime 20x
func BenchmarkMatMulTiled(b *testing.B) {
	shapes := [][2]int{{4096, 4096}, {1024, 4096}, {14336, 4096}, {4096, 14336}, {2048, 2048}, {8192, 2048}}
	if dev.Info.Type == "cpu" {
		shapes = [][2]int{{256, 256}}
	}
	types := []gguf.Type{gguf.TypeQ4_K, gguf.TypeQ6_K, gguf.TypeQ8_0, gguf.TypeQ4_0, gguf.TypeF16}
	for _, s := range shapes {
		for _, typ := range types {
			b.Run(fmt.Sprintf("%dx%d/%v", s[0], s[1], typ), func(b *testing.B) {
				w := benchWeight(b, typ, s[0], s[1])
				for _, m := range []int{512, 16, 32, 64} {
					b.Run(fmt.Sprintf("m%d", m), func(b *testing.B) { benchMatMulTiled(b, w, m) })
				}
			})
		}
	}
}

// benchMatMulTiled times w against the old kernel and the tiled launches
// for m rows.
func benchMatMulTiled(b *testing.B, w *gpu.Tensor, m int) {
	n, k := w.Rows, w.Cols
	x, y := upload(b, "x", randVec(2, m*k, 1)), scratch(b, "y", m*n)
	kern, ok := matmulKernelFor(w.Type)
	if !ok {
		b.Fatalf("%v has no matmul kernel", w.Type)
	}
	flops := 2 * float64(m) * float64(n) * float64(k)
	time := func(name string, op func(c *gpu.Chain) error) {
		b.Run(name, func(b *testing.B) {
			benchChain(b, 1, op) // compile the pipeline outside the timing
			b.ResetTimer()
			benchChain(b, b.N, op)
			b.StopTimer()
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e12, "TFLOP/s")
		})
	}
	time("old", func(c *gpu.Chain) error { return matmulWith(c, w, kern, x, y, m, MatmulOptions{}) })
	picked, ok := matmulTiledLaunchFor(dev.Limits, m)
	if !ok {
		b.Fatalf("no tiled launch fits the device")
	}
	launches := append([]tiledLaunch{picked}, tiledShortLaunches...)
	if m >= 64 {
		launches = append([]tiledLaunch{picked}, tiledSweepLaunches...)
	}
	for i, l := range launches {
		if l.check(dev.Limits) != nil || (i > 0 && l == picked) {
			continue
		}
		time("tiled_"+l.String(), func(c *gpu.Chain) error { return matmulTiledWith(c, w, x, y, m, MatmulOptions{}, l) })
	}
	if !HasMatMulQ8(dev, w.Type) {
		return
	}
	xq := scratch(b, "xq", int(Q8Bytes(k, m)/4))
	benchChain(b, 1, func(c *gpu.Chain) error { return QuantizeQ8(c, x, xq, k, m) })
	time("quantize+q8", func(c *gpu.Chain) error {
		if err := QuantizeQ8(c, x, xq, k, m); err != nil {
			return err
		}
		return MatMulQ8(c, w, xq, y, m, MatmulOptions{})
	})
	q8Launches := []q8TileLaunch{q8TileLaunchMain}
	if m >= 64 {
		q8Launches = append(q8Launches, q8TileSweep...)
	}
	for _, l := range q8Launches {
		if l.check(dev.Limits) != nil {
			continue
		}
		time(fmt.Sprintf("q8_%dx%d_r%dx%d", l.rows(), l.cols(), l.rr, l.rc), func(c *gpu.Chain) error { return matmulQ8With(c, w, xq, y, m, MatmulOptions{}, l) })
	}
}

func TestMatMulTiledSweepLaunches(t *testing.T) {
	// Every shape the benchmark tries computes the same Y: ragged tiles in
	// both directions, k over several stages.
	for _, l := range append(tiledSweepLaunches, tiledShortLaunches...) {
		if l.check(dev.Limits) != nil {
			continue
		}
		for _, c := range []struct {
			typ gguf.Type
			mc  matmulCase
		}{{gguf.TypeQ4_K, matmulCase{150, 512, 70, 1, 0}}, {gguf.TypeF16, matmulCase{97, 200, 41, 1, 0}}} {
			t.Run(fmt.Sprintf("%v/%v", l, c.typ), func(t *testing.T) { runMatmulTiled(t, c.typ, c.mc, l) })
		}
	}
}

// BenchmarkMatMulSigLIP runs MatMul on the products of a block of Gemma
// 3's SigLIP tower (F16 weights as llama.cpp's converter writes them: q, k,
// v and o of 1152×1152, up 4304×1152, down 1152×4304) over the 4096
// patches of an 896×896 image, the launch MatMul picks; 256 rows on a
// software adapter. With BenchmarkAttentionPrefill's siglip_T4096 it says
// where BenchmarkGPUTower's time goes.
func BenchmarkMatMulSigLIP(b *testing.B) {
	m := 4096
	if dev.Info.Type == "cpu" {
		m = 256
	}
	for _, s := range [][2]int{{1152, 1152}, {4304, 1152}, {1152, 4304}} {
		b.Run(fmt.Sprintf("%dx%d", s[0], s[1]), func(b *testing.B) {
			w := benchWeight(b, gguf.TypeF16, s[0], s[1])
			x, y := upload(b, "x", randVec(2, m*s[1], 1)), scratch(b, "y", m*s[0])
			op := func(c *gpu.Chain) error { return MatMul(c, w, x, y, m) }
			benchChain(b, 1, op)
			b.ResetTimer()
			benchChain(b, b.N, op)
			b.StopTimer()
			b.ReportMetric(2*float64(m*s[0]*s[1])*float64(b.N)/b.Elapsed().Seconds()/1e12, "TFLOP/s")
		})
	}
}
