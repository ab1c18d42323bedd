package ops

import (
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// BenchmarkLSTMKokoro times one of Kokoro's BiLSTMs (input 640, hidden 256
// per direction, bidirectional) over 512 steps, its 510-phoneme limit plus
// the boundary tokens. µs/step is the whole LSTM call (input projection and
// recurrence) per time step; the recurrence, one workgroup per direction
// reading all of W_hh each step, is what dominates it on a GPU.
func BenchmarkLSTMKokoro(b *testing.B) {
	a := LSTMArgs{Input: 640, Hidden: 256, Length: 512}
	fwd := lstmWeights(b, 10, a, 1/16.0)
	bwd := lstmWeights(b, 20, a, 1/16.0)
	x := upload(b, "x", randVec(1, a.Input*a.Length, 1))
	sc := scratch(b, "gates", a.ScratchFloats(true))
	y := scratch(b, "y", 2*a.Hidden*a.Length)
	op := func(c *gpu.Chain) error { return LSTM(c, x, fwd.bufs, &bwd.bufs, sc, y, a) }
	benchChain(b, 1, op)
	b.ResetTimer()
	benchChain(b, b.N, op)
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(a.Length), "µs/step")
}
