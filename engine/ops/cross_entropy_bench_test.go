package ops

import (
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// BenchmarkCrossEntropyBackward measures the loss and in-place gradient of
// one row tile at Llama 3's vocabulary, T = 64 rows × V = 128256 (31 MiB of
// logits, under lavapipe's 128 MiB binding), as GB/s of logits traffic
// (read twice, written once). Each op rewrites the tile with its gradient,
// so later ops see gradients as logits: the same memory traffic and
// arithmetic, which is what is measured.
func BenchmarkCrossEntropyBackward(b *testing.B) {
	const rows, vocab = 64, 128256
	logits := upload(b, "logits", randVec(5, rows*vocab, 8))
	t := make([]int32, rows)
	for r := range t {
		t[r] = int32(r * 1999 % vocab)
	}
	t[0] = -1 // one prompt token
	targets, loss := uploadI32(b, "targets", t), scratch(b, "loss", rows)
	o := CrossEntropyOptions{Scale: 1.0 / (rows - 1)}
	op := func(c *gpu.Chain) error { return CrossEntropyBackward(c, logits, targets, loss, rows, vocab, o) }
	benchChain(b, 1, op)
	b.ResetTimer()
	benchChain(b, b.N, op)
	b.StopTimer()
	b.ReportMetric(3*4*float64(rows)*float64(vocab)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
}
