package model

import (
	"testing"
)

// BenchmarkDecode measures decode tokens/s of a tiny model on the test
// adapter (lavapipe in CI): one forward pass, one submit and the greedy
// token read back per token, as generation runs. ns/op is per token; the
// dispatches a token records are reported beside it.
func BenchmarkDecode(b *testing.B) {
	for _, name := range []string{"tiny-llama", "tiny-gemma3"} {
		b.Run(name, func(b *testing.B) {
			m := synthModel(b, name, "Q8_0")
			g, err := NewGPU(dev, m, GPUOptions{Context: 256})
			if err != nil {
				b.Fatal(err)
			}
			defer g.Close()
			res, err := g.Forward([]int32{1}, 0, Output{TopK: 1})
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				res, err = g.Forward([]int32{int32(res.IDs[0])}, 1+i%250, Output{TopK: 1})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
			k, err := g.DecodeKernels(1)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(len(k)), "dispatches/token")
		})
	}
}
