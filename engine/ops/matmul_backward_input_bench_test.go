package ops

import (
	"fmt"
	"os"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/gguf"
)

// BenchmarkMatMulBackwardInput measures dX = dY·W at the square sizes of a
// 2B and a 7B model's projections, 2048² and 4096², for m =
// HEARTH_BENCH_M activation rows (default 128, a training micro-batch), as
// GFLOP/s (2·m·n·k per op) and GB/s of weight bytes read, each without row
// splits ("direct") and with room for them ("split", see
// MatmulBackwardOptions.Partials). The lavapipe numbers only compare
// kernels with each other; the H200 gives the real ones.
func BenchmarkMatMulBackwardInput(b *testing.B) {
	m := benchSize(b, "HEARTH_BENCH_M", 128)
	for _, n := range []int{2048, 4096} {
		for _, typ := range []gguf.Type{gguf.TypeF16, gguf.TypeBF16, gguf.TypeQ8_0, gguf.TypeQ4_0, gguf.TypeQ4_K, gguf.TypeQ6_K} {
			benchMatMulBackward(b, fmt.Sprintf("%dx%d/%v", n, n, typ), typ, n, n, m)
		}
	}
}

// BenchmarkMatMulBackwardInputHead is the LM head's backward, the largest
// sum of a training step: Gemma's 262144-token vocabulary × 2304 hidden in
// Q6_K (496 MB, chunked on lavapipe), one 64-row tile of dLogits. Skipped on
// a software adapter, where one op takes minutes, unless HEARTH_BENCH_HEAD
// is set.
func BenchmarkMatMulBackwardInputHead(b *testing.B) {
	if dev.Info.Type == "cpu" && os.Getenv("HEARTH_BENCH_HEAD") == "" {
		b.Skip("a software adapter; set HEARTH_BENCH_HEAD=1 to run it anyway")
	}
	benchMatMulBackward(b, "262144x2304/Q6_K", gguf.TypeQ6_K, 262144, 2304, 64)
}

func benchMatMulBackward(b *testing.B, name string, typ gguf.Type, n, k, m int) {
	b.Run(name, func(b *testing.B) {
		w := benchWeight(b, typ, n, k)
		dy, dx := upload(b, "dy", randVec(2, m*n, 1)), scratch(b, "dx", m*k)
		parts := scratch(b, "partials", min(64*m*k, int(dev.Limits.MaxStorageBufferBindingSize/4)))
		for _, split := range []bool{false, true} {
			o := MatmulBackwardOptions{}
			mode := "direct"
			if split {
				o.Partials, mode = parts, "split"
			}
			b.Run(mode, func(b *testing.B) {
				op := func(c *gpu.Chain) error { return MatMulBackwardInputWith(c, w, dy, dx, m, o) }
				benchChain(b, 1, op) // compile the pipeline outside the timing
				b.ResetTimer()
				benchChain(b, b.N, op)
				b.StopTimer()
				s := b.Elapsed().Seconds()
				b.ReportMetric(2*float64(m)*float64(n)*float64(k)*float64(b.N)/s/1e9, "GFLOP/s")
				b.ReportMetric(float64(w.Bytes())*float64(b.N)/s/1e9, "GB/s")
			})
		}
	})
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

// backwardTrainingShapes are the frozen projections a LoRA step of a
// llama-3.2-1b-shaped model runs dX = dY·W through, n rows × k columns of
// W: q and o, k and v (GQA: 8 heads of 64), gate and up, down.
var backwardTrainingShapes = []struct {
	name string
	n, k int
}{{"qo_2048x2048", 2048, 2048}, {"kv_512x2048", 512, 2048}, {"gateup_8192x2048", 8192, 2048}, {"down_2048x8192", 2048, 8192}}

// BenchmarkMatMulBackwardInputTraining measures the backward of each of
// those projections for m = HEARTH_BENCH_M token rows (default 512, the
// training benchmark's sequence), dispatched as training/step_gpu.go does
// (no partials), and a rank-16 LoRA B (F32, n × 16) of the tallest and the
// commonest projection.
func BenchmarkMatMulBackwardInputTraining(b *testing.B) {
	m := benchSize(b, "HEARTH_BENCH_M", 512)
	for _, s := range backwardTrainingShapes {
		for _, typ := range []gguf.Type{gguf.TypeF16, gguf.TypeQ8_0, gguf.TypeQ4_0, gguf.TypeQ4_K, gguf.TypeQ6_K} {
			benchBackwardOnce(b, fmt.Sprintf("%s/%v", s.name, typ), typ, s.n, s.k, m, nil)
		}
	}
	for _, n := range []int{2048, 8192} {
		benchBackwardOnce(b, fmt.Sprintf("loraB_%dx16/F32", n), gguf.TypeF32, n, 16, m, nil)
	}
}

// BenchmarkMatMulBackwardInputLlamaHead is the Llama 3 head's backward in
// the training step: 128256 × 2048 rows of W, one tile of 512 token rows,
// with room for 4 partials as training/step_gpu.go gives it. Skipped on a
// software adapter unless HEARTH_BENCH_HEAD is set.
func BenchmarkMatMulBackwardInputLlamaHead(b *testing.B) {
	if dev.Info.Type == "cpu" && os.Getenv("HEARTH_BENCH_HEAD") == "" {
		b.Skip("a software adapter; set HEARTH_BENCH_HEAD=1 to run it anyway")
	}
	const n, k, m = 128256, 2048, 512
	parts := scratch(b, "partials", 4*m*k)
	for _, typ := range []gguf.Type{gguf.TypeQ4_K, gguf.TypeQ6_K} {
		benchBackwardOnce(b, fmt.Sprintf("128256x2048/%v", typ), typ, n, k, m, parts)
	}
}

// benchBackwardOnce times dX = dY·W for an n×k weight of type typ over m
// rows, with partials (nil: none), as GFLOP/s and GB/s of weight bytes.
func benchBackwardOnce(b *testing.B, name string, typ gguf.Type, n, k, m int, parts *gpu.Buffer) {
	b.Run(name, func(b *testing.B) {
		w := benchWeight(b, typ, n, k)
		dy, dx := upload(b, "dy", randVec(2, m*n, 1)), scratch(b, "dx", m*k)
		o := MatmulBackwardOptions{Partials: parts}
		op := func(c *gpu.Chain) error { return MatMulBackwardInputWith(c, w, dy, dx, m, o) }
		benchChain(b, 1, op) // compile the pipeline outside the timing
		b.ResetTimer()
		benchChain(b, b.N, op)
		b.StopTimer()
		s := b.Elapsed().Seconds()
		b.ReportMetric(2*float64(m)*float64(n)*float64(k)*float64(b.N)/s/1e9, "GFLOP/s")
		b.ReportMetric(float64(w.Bytes())*float64(b.N)/s/1e9, "GB/s")
	})
}
