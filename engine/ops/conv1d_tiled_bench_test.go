package ops

import (
	"fmt"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// BenchmarkConv1DKokoro compares Conv1D (one output per invocation) with
// Conv1DTiled in every tile of Conv1DTileVariants (sub-benchmarks
// tiled/<tile>, e.g. tiled/m128n64t8x4k16), each with f32 and packed-f16
// weights, on the conv shapes that carry Kokoro's work: a decoder block
// conv (1090 -> 1024, k3, at the frame rate) and generator resblock convs
// (256 -> 256, k7, dilation 3, at the first stage's rate; 128 -> 128, k11,
// dilation 5, at the second's, T = 24000) plus a 512 -> 256 k7 conv, for
// ~100 frames; then the real chunk sizes of a long utterance: the decoder
// conv at 1527 frames and the first stage's resblock conv at 30540 steps.
// Tiles the device lacks the workgroup memory for are left out.
// GFLOP/s is 2 per multiply-add.
func BenchmarkConv1DKokoro(b *testing.B) {
	for _, shape := range []struct {
		name string
		a    Conv1DArgs
	}{
		{"decoder_1090x1024_k3", Conv1DArgs{InChannels: 1090, OutChannels: 1024, Length: 100, Kernel: 3, Padding: 1}},
		{"resblock_256x256_k7d3", Conv1DArgs{InChannels: 256, OutChannels: 256, Length: 1000, Kernel: 7, Padding: 9, Dilation: 3}},
		{"resblock_128x128_k11d5", Conv1DArgs{InChannels: 128, OutChannels: 128, Length: 24000, Kernel: 11, Padding: 25, Dilation: 5}},
		{"conv_512x256_k7", Conv1DArgs{InChannels: 512, OutChannels: 256, Length: 1000, Kernel: 7, Padding: 3}},
		{"decoder_1090x1024_k3_L1527", Conv1DArgs{InChannels: 1090, OutChannels: 1024, Length: 1527, Kernel: 3, Padding: 1}},
		{"resblock_256x256_k7d3_L30540", Conv1DArgs{InChannels: 256, OutChannels: 256, Length: 30540, Kernel: 7, Padding: 9, Dilation: 3}},
	} {
		a := shape.a
		x := upload(b, "x", randVec(1, a.InChannels*a.Length, 1))
		y := scratch(b, "y", a.OutChannels*a.OutLength())
		bias := upload(b, "b", randVec(3, a.OutChannels, 0.1))
		w := randVec(2, a.OutChannels*a.InChannels*a.Kernel, 0.05)
		for _, f16 := range []bool{false, true} {
			wb := uploadConvWeights(b, w, f16)
			a.F16 = f16
			kernels := []struct {
				name string
				run  func(c *gpu.Chain, x, w, bias, y *gpu.Buffer, a Conv1DArgs) error
			}{{"conv1d", Conv1D}}
			for _, tile := range Conv1DTileVariants {
				if tile.FitsDevice(dev) != nil {
					continue // more workgroup memory than this device has
				}
				run := func(c *gpu.Chain, x, w, bias, y *gpu.Buffer, a Conv1DArgs) error {
					return Conv1DTiledWith(c, x, w, bias, y, a, Conv1DTiledOptions{Tile: tile})
				}
				kernels = append(kernels, struct {
					name string
					run  func(c *gpu.Chain, x, w, bias, y *gpu.Buffer, a Conv1DArgs) error
				}{"tiled/" + tile.String(), run})
			}
			for _, k := range kernels {
				name := fmt.Sprintf("%s/%s/f16=%v", shape.name, k.name, f16)
				b.Run(name, func(b *testing.B) {
					op := func(c *gpu.Chain) error { return k.run(c, x, wb, bias, y, a) }
					benchChain(b, 1, op)
					b.ResetTimer()
					benchChain(b, b.N, op)
					b.StopTimer()
					flops := 2 * float64(a.OutChannels*a.OutLength()*a.InChannels*a.Kernel)
					b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}
