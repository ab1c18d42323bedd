package ops

import (
	"fmt"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// BenchmarkConvTranspose1DKokoro compares ConvTranspose1D (one output per
// invocation) with ConvTranspose1DTiled, each with f32 and packed-f16
// weights, on Kokoro's two generator upsamplers over a long utterance
// (~3000 frames): ups0, 512 -> 256, k20, x10, padding 5 over 3054 frames,
// and ups1, 256 -> 128, k12, x6, padding 3 over the 30540 steps ups0 makes
// of them. GFLOP/s is 2 per multiply-add that lands on the trimmed output
// (convTransposeMACs), not the zero products of a tile's edges. On
// lavapipe (2 cores) the tiled kernel ran 1.5-2.5 GFLOP/s, 8-12x
// ConvTranspose1D, whose every op there takes 80-120 s: filter with
// -bench 'ConvTranspose1DKokoro/.*/tiled' and -benchtime=1x.
func BenchmarkConvTranspose1DKokoro(b *testing.B) {
	for _, shape := range []struct {
		name string
		a    ConvTranspose1DArgs
	}{
		{"ups0_512x256_k20s10", ConvTranspose1DArgs{InChannels: 512, OutChannels: 256, Length: 3054, Kernel: 20, Stride: 10, Padding: 5}},
		{"ups1_256x128_k12s6", ConvTranspose1DArgs{InChannels: 256, OutChannels: 128, Length: 30540, Kernel: 12, Stride: 6, Padding: 3}},
	} {
		a := shape.a
		x := upload(b, "x", randVec(1, a.InChannels*a.Length, 1))
		y := scratch(b, "y", a.OutChannels*a.OutLength())
		bias := upload(b, "b", randVec(3, a.OutChannels, 0.1))
		w := randVec(2, a.InChannels*a.OutChannels*a.Kernel, 0.05)
		flops := 2 * float64(convTransposeMACs(a))
		for _, f16 := range []bool{false, true} {
			wb := uploadConvWeights(b, w, f16)
			a.F16 = f16
			for _, k := range []struct {
				name string
				run  convTranspose1dKernel
			}{{"conv_transpose1d", ConvTranspose1D}, {"tiled", ConvTranspose1DTiled}} {
				b.Run(fmt.Sprintf("%s/%s/f16=%v", shape.name, k.name, f16), func(b *testing.B) {
					op := func(c *gpu.Chain) error { return k.run(c, x, wb, bias, y, a) }
					benchChain(b, 1, op)
					b.ResetTimer()
					benchChain(b, b.N, op)
					b.StopTimer()
					b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}

// convTransposeMACs counts the multiply-adds of a groups-1 transposed conv
// that land on its output: input step s and tap kk with 0 <= s*stride + kk
// - pad < OutLength, for every (in, out) channel pair. The taps trimmed by
// the padding are left out: 8.0 and 12.0 G for Kokoro's ups0 and ups1.
func convTransposeMACs(a ConvTranspose1DArgs) int64 {
	a = a.norm()
	tout := a.OutLength()
	var taps int64
	for s := range a.Length {
		for kk := range a.Kernel {
			if t := s*a.Stride + kk - a.Padding; t >= 0 && t < tout {
				taps++
			}
		}
	}
	return taps * int64(a.InChannels) * int64(a.OutChannels)
}
