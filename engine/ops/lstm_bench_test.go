package ops

import (
	"fmt"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// BenchmarkLSTMKokoro times one of Kokoro's BiLSTMs (input 640, hidden 256
// per direction, bidirectional) over 512 steps, its 510-phoneme limit plus
// the boundary tokens. µs/step is the whole LSTM call (input projection and
// recurrence) per time step; the recurrence's sequential steps dominate it
// on a GPU.
//
// Sub-benchmarks split=1, 2, 4 time each split of the streaming
// recurrence's dot products (LSTMArgs.Split; those the device cannot run
// are not listed), and grid=N the grid recurrence where lstmGrid picks it.
func BenchmarkLSTMKokoro(b *testing.B) {
	base := LSTMArgs{Input: 640, Hidden: 256, Length: 512}
	fwd := lstmWeights(b, 10, base, 1/16.0)
	bwd := lstmWeights(b, 20, base, 1/16.0)
	x := upload(b, "x", randVec(1, base.Input*base.Length, 1))
	sc := scratch(b, "gates", base.ScratchFloats(true))
	y := scratch(b, "y", 2*base.Hidden*base.Length)
	bench := func(name string, a LSTMArgs) {
		b.Run(name, func(b *testing.B) {
			op := func(c *gpu.Chain) error { return LSTM(c, x, fwd.bufs, &bwd.bufs, sc, y, a) }
			benchChain(b, 1, op)
			b.ResetTimer()
			benchChain(b, b.N, op)
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(a.Length), "µs/step")
		})
	}
	for _, split := range []int{1, 2, 4} {
		if lstmSplitFits(dev.Limits, base.Hidden, 1, split) == nil {
			a := base
			a.Split, a.Grid = split, LSTMStream
			bench(fmt.Sprintf("split=%d", split), a)
		}
	}
	// The grid recurrence, where the device runs it (discrete GPUs).
	g, err := ChooseLSTMGrid(dev, base.Hidden, true)
	if err != nil {
		b.Fatal(err)
	}
	if g != LSTMStream {
		a := base
		a.Grid = g
		bench(fmt.Sprintf("grid=%d", g), a)
	}
}
