package ops

import (
	"strings"
	"testing"
)

// convTranspose1dTiledRel: the tiled kernel sums each output as
// conv_transpose1d does (bias, then input channels in order, each one's
// taps in increasing kk), adding besides only exact zeros (taps past k in
// a short phase, steps outside the input, K past its end), so the
// reasoning of convTranspose1dRel holds for its longer sums too: with
// random signs the partial sums grow as sqrt(n), and the n roundings add
// up to a few ulp of the bound sum|x*w| whatever n (measured at most
// 2.8e-7 of it at Kokoro's widths here, n up to 512*2 products). 1e-6
// (~17 ulp) still
// catches a wrong or dropped tap, which moves the result by about 1/n of
// the bound: 1e-3 at n = 1024.
const convTranspose1dTiledRel = 1e-6

func checkConvTranspose1DTiled(t *testing.T, seed uint64, a ConvTranspose1DArgs, bias bool, xScale, wScale float32) {
	t.Helper()
	checkConvTranspose1DKernel(t, "conv_transpose1d_tiled", ConvTranspose1DTiled, convTranspose1dTiledRel, seed, a, bias, xScale, wScale)
}

func TestConvTranspose1DTiledMatchesReference(t *testing.T) {
	// Shapes off the 64-channel and 64-step tile and the 16-pair K step
	// (K = cin*ceil(k/stride) of 2, 9, 14, 27, 1024, ...), k not a multiple
	// of the stride (phases with fewer taps), k below the stride (phases
	// with none), padding 0 and padding of more than a stride (the first q
	// of some phases lands before t = 0), output padding, f16 weights.
	for _, tc := range []struct {
		name string
		a    ConvTranspose1DArgs
		bias bool
	}{
		// Kokoro's upsamplers at their widths, short: 512 -> 256, k20 x10
		// padding 5 (4 channel tiles, K = 1024 = 64 steps), and 256 -> 128,
		// k12 x6 padding 3 over enough steps for several q tiles a phase.
		{"kokoro ups0", ConvTranspose1DArgs{InChannels: 512, OutChannels: 256, Length: 37, Kernel: 20, Stride: 10, Padding: 5}, true},
		{"kokoro ups1", ConvTranspose1DArgs{InChannels: 256, OutChannels: 128, Length: 301, Kernel: 12, Stride: 6, Padding: 3}, true},
		{"stride 1", ConvTranspose1DArgs{InChannels: 3, OutChannels: 5, Length: 37, Kernel: 3, Padding: 1}, true},
		{"odd k over stride", ConvTranspose1DArgs{InChannels: 7, OutChannels: 37, Length: 131, Kernel: 5, Stride: 3, Padding: 2, OutputPadding: 1}, true},
		{"padding 0", ConvTranspose1DArgs{InChannels: 9, OutChannels: 65, Length: 70, Kernel: 4, Stride: 2}, true},
		{"k = stride", ConvTranspose1DArgs{InChannels: 5, OutChannels: 3, Length: 67, Kernel: 4, Stride: 4}, false},
		{"k < stride", ConvTranspose1DArgs{InChannels: 2, OutChannels: 3, Length: 10, Kernel: 2, Stride: 4, OutputPadding: 3}, true},
		{"padding over stride", ConvTranspose1DArgs{InChannels: 6, OutChannels: 11, Length: 45, Kernel: 20, Stride: 4, Padding: 9}, true},
		{"padding odd k", ConvTranspose1DArgs{InChannels: 13, OutChannels: 130, Length: 97, Kernel: 11, Stride: 3, Padding: 5, OutputPadding: 2}, true},
		{"one step", ConvTranspose1DArgs{InChannels: 17, OutChannels: 70, Length: 1, Kernel: 12, Stride: 6, Padding: 3}, true},
		{"no bias x10", ConvTranspose1DArgs{InChannels: 33, OutChannels: 31, Length: 29, Kernel: 20, Stride: 10, Padding: 5}, false},
		{"f16 x10", ConvTranspose1DArgs{InChannels: 5, OutChannels: 67, Length: 23, Kernel: 20, Stride: 10, Padding: 5, F16: true}, true},
		{"f16 odd count", ConvTranspose1DArgs{InChannels: 3, OutChannels: 1, Length: 40, Kernel: 3, Stride: 2, Padding: 1, F16: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) { checkConvTranspose1DTiled(t, 31, tc.a, tc.bias, 1, 0.5) })
	}
}

func TestConvTranspose1DTiledWideMagnitude(t *testing.T) {
	// Generator activations reach the hundreds; weight-normed upsampler
	// weights can be tens. The error stays relative to the bound.
	checkConvTranspose1DTiled(t, 32, ConvTranspose1DArgs{InChannels: 40, OutChannels: 70, Length: 50, Kernel: 12, Stride: 6, Padding: 3}, true, 500, 20)
	checkConvTranspose1DTiled(t, 33, ConvTranspose1DArgs{InChannels: 40, OutChannels: 5, Length: 50, Kernel: 20, Stride: 10, Padding: 5, F16: true}, true, 1e4, 60)
}

func TestConvTranspose1DTiledRejectsBadShapes(t *testing.T) {
	checkConvTranspose1DRejects(t, "conv_transpose1d_tiled", ConvTranspose1DTiled,
		func(a *ConvTranspose1DArgs) { a.Groups = 2 },
		func(a *ConvTranspose1DArgs) { a.Groups = 3 },
		func(a *ConvTranspose1DArgs) { a.Stride = 70000 },
	)
}

func TestConvTranspose1DTiledFits(t *testing.T) {
	for _, tc := range []struct {
		a    ConvTranspose1DArgs
		want string // "" when it fits
	}{
		{ConvTranspose1DArgs{InChannels: 512, OutChannels: 256, Length: 3054, Kernel: 20, Stride: 10, Padding: 5}, ""},
		{ConvTranspose1DArgs{InChannels: 256, OutChannels: 128, Length: 30540, Kernel: 12, Stride: 6, Padding: 3}, ""},
		{ConvTranspose1DArgs{InChannels: 4, OutChannels: 4, Length: 8, Kernel: 3}, ""},
		// AdainResBlk1d's pool stays with ConvTranspose1D.
		{ConvTranspose1DArgs{InChannels: 64, OutChannels: 64, Length: 8, Kernel: 3, Stride: 2, Padding: 1, OutputPadding: 1, Groups: 64}, "groups 64"},
	} {
		err := ConvTranspose1DTiledFits(tc.a)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", tc.a, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: error %v, want one saying %q", tc.a, err, tc.want)
		}
	}
}
