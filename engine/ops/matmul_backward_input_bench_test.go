package ops

import (
	"fmt"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/gguf"
)

// BenchmarkMatMulBackwardInput measures dX = dY·W at the square sizes of a
// 2B and a 7B model's projections, 2048² and 4096², for m =
// HEARTH_BENCH_M activation rows (default 128, a training micro-batch), as
// GFLOP/s (2·m·n·k per op) and GB/s of weight bytes read. The lavapipe
// numbers only compare kernels with each other; the H200 gives the real
// ones.
func BenchmarkMatMulBackwardInput(b *testing.B) {
	m := benchSize(b, "HEARTH_BENCH_M", 128)
	for _, n := range []int{2048, 4096} {
		for _, typ := range []gguf.Type{gguf.TypeF16, gguf.TypeBF16, gguf.TypeQ8_0, gguf.TypeQ4_0, gguf.TypeQ4_K, gguf.TypeQ6_K} {
			b.Run(fmt.Sprintf("%dx%d/%v", n, n, typ), func(b *testing.B) {
				w := benchWeight(b, typ, n, n)
				dy, dx := upload(b, "dy", randVec(2, m*n, 1)), scratch(b, "dx", m*n)
				op := func(c *gpu.Chain) error { return MatMulBackwardInput(c, w, dy, dx, m) }
				benchChain(b, 1, op) // compile the pipeline outside the timing
				b.ResetTimer()
				benchChain(b, b.N, op)
				b.StopTimer()
				s := b.Elapsed().Seconds()
				b.ReportMetric(2*float64(m)*float64(n)*float64(n)*float64(b.N)/s/1e9, "GFLOP/s")
				b.ReportMetric(float64(w.Bytes())*float64(b.N)/s/1e9, "GB/s")
			})
		}
	}
}

// BenchmarkMatMulTN measures the LoRA weight gradients at a 7B model's
// shapes: dA = dHᵀ·X (rank 16 × 4096 features) and dB = dYᵀ·H (14336
// FFN rows × rank 16), over m = HEARTH_BENCH_M tokens (default 512).
func BenchmarkMatMulTN(b *testing.B) {
	m := benchSize(b, "HEARTH_BENCH_M", 512)
	for _, s := range []struct {
		name string
		r, k int
	}{{"dA_r16_k4096", 16, 4096}, {"dB_n14336_r16", 14336, 16}} {
		b.Run(s.name, func(b *testing.B) {
			a, x, g := upload(b, "a", randVec(3, m*s.r, 1)), upload(b, "b", randVec(4, m*s.k, 1)), scratch(b, "g", s.r*s.k)
			op := func(c *gpu.Chain) error { return MatMulTN(c, a, x, g, m, s.r, s.k, MatMulTNOptions{}) }
			benchChain(b, 1, op)
			b.ResetTimer()
			benchChain(b, b.N, op)
			b.StopTimer()
			b.ReportMetric(2*float64(m)*float64(s.r)*float64(s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
