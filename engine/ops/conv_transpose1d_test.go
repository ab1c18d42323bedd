package ops

import (
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// convTranspose1dRel: each output sums cin/groups * ceil(k/stride) products
// in f32 (at most a few hundred here); measured under 1.5e-7 of the bound
// sum|x*w|. As for Conv1D, 1e-6 still catches a wrong tap, which moves the
// result by a whole term.
const convTranspose1dRel = 1e-6

// convTranspose1dKernel is ConvTranspose1D or a kernel computing the same y
// (ConvTranspose1DTiled).
type convTranspose1dKernel func(c *gpu.Chain, x, w, bias, y *gpu.Buffer, a ConvTranspose1DArgs) error

func checkConvTranspose1D(t *testing.T, seed uint64, a ConvTranspose1DArgs, bias bool, xScale, wScale float32) {
	t.Helper()
	checkConvTranspose1DKernel(t, "conv_transpose1d", ConvTranspose1D, convTranspose1dRel, seed, a, bias, xScale, wScale)
}

// checkConvTranspose1DKernel runs op on random inputs of the given scales
// and checks y against ref.ConvTranspose1D within rel of the bound
// sum|x*w| (+|bias|).
func checkConvTranspose1DKernel(t *testing.T, name string, op convTranspose1dKernel, rel float64, seed uint64, a ConvTranspose1DArgs, bias bool, xScale, wScale float32) {
	t.Helper()
	g := orOne(a.Groups)
	x := randVec(seed, a.InChannels*a.Length, xScale)
	w := randVec(seed+1, a.InChannels*(a.OutChannels/g)*a.Kernel, wScale)
	var b []float32
	if bias {
		b = randVec(seed+2, a.OutChannels, wScale)
	}
	if a.F16 {
		w = f16Round(t, w)
	}
	ra := ref.ConvTranspose1DArgs{InChannels: a.InChannels, OutChannels: a.OutChannels, Length: a.Length, Kernel: a.Kernel,
		Stride: a.Stride, Padding: a.Padding, OutputPadding: a.OutputPadding, Groups: a.Groups}
	want := ref.ConvTranspose1D(x, w, b, ra)
	bound := ref.ConvTranspose1D(absVec(x), absVec(w), absVec(b), ra)
	n := a.OutChannels * a.OutLength()
	if len(want) != n {
		t.Fatalf("ref length %d, ops.OutLength gives %d", len(want), n)
	}
	bx, y := upload(t, "x", x), scratch(t, "y", n)
	bw, bb := uploadConvWeights(t, w, a.F16), uploadOrNil(t, "b", b)
	run(t, name, func(c *gpu.Chain) error { return op(c, bx, bw, bb, y, a) })
	assertWithinBound(t, name, download(t, y, n), want, bound, rel)
}

func TestConvTranspose1DMatchesReference(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    ConvTranspose1DArgs
		bias bool
	}{
		{"stride 1", ConvTranspose1DArgs{InChannels: 3, OutChannels: 5, Length: 37, Kernel: 3, Padding: 1}, true},
		// Kokoro's upsamplers: k=20 u=10 padding 5, and k=12 u=6 padding 3.
		{"x10 upsampler", ConvTranspose1DArgs{InChannels: 8, OutChannels: 4, Length: 29, Kernel: 20, Stride: 10, Padding: 5}, true},
		{"x6 upsampler", ConvTranspose1DArgs{InChannels: 6, OutChannels: 3, Length: 45, Kernel: 12, Stride: 6, Padding: 3}, false},
		// AdainResBlk1d's pool: depthwise, k=3, stride 2, padding 1, output_padding 1.
		{"depthwise pool", ConvTranspose1DArgs{InChannels: 7, OutChannels: 7, Length: 131, Kernel: 3, Stride: 2, Padding: 1, OutputPadding: 1, Groups: 7}, true},
		{"groups 2 odd k", ConvTranspose1DArgs{InChannels: 4, OutChannels: 6, Length: 19, Kernel: 5, Stride: 3, Padding: 2, OutputPadding: 2, Groups: 2}, true},
		{"k < stride", ConvTranspose1DArgs{InChannels: 2, OutChannels: 3, Length: 10, Kernel: 2, Stride: 4, OutputPadding: 3}, true},
		{"f16 x10", ConvTranspose1DArgs{InChannels: 5, OutChannels: 3, Length: 23, Kernel: 20, Stride: 10, Padding: 5, F16: true}, true},
		{"f16 odd count", ConvTranspose1DArgs{InChannels: 3, OutChannels: 1, Length: 40, Kernel: 3, Stride: 2, Padding: 1, F16: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) { checkConvTranspose1D(t, 21, tc.a, tc.bias, 1, 0.5) })
	}
}

func TestConvTranspose1DKokoroLength(t *testing.T) {
	// 400 frames upsampled x10 to 4000 with 64 input channels: the first
	// Kokoro upsampler's length (its 512 -> 256 channels would cost the CPU
	// reference seconds; the reduction per output is what matters).
	checkConvTranspose1D(t, 22, ConvTranspose1DArgs{InChannels: 64, OutChannels: 3, Length: 400, Kernel: 20, Stride: 10, Padding: 5}, true, 1, 0.1)
}

func TestConvTranspose1DWideMagnitude(t *testing.T) {
	checkConvTranspose1D(t, 23, ConvTranspose1DArgs{InChannels: 16, OutChannels: 4, Length: 50, Kernel: 12, Stride: 6, Padding: 3}, true, 500, 20)
	checkConvTranspose1D(t, 24, ConvTranspose1DArgs{InChannels: 16, OutChannels: 4, Length: 50, Kernel: 12, Stride: 6, Padding: 3, F16: true}, true, 1e4, 60)
}

func TestConvTranspose1DRejectsBadShapes(t *testing.T) {
	checkConvTranspose1DRejects(t, "conv_transpose1d", ConvTranspose1D,
		func(a *ConvTranspose1DArgs) { a.Groups = 3 },
	)
}

// checkConvTranspose1DRejects checks that op refuses, before recording
// anything, a valid shape changed by each of bad, and the buffer mistakes
// every transposed conv must catch: y aliasing x, no or too few weights
// (f32 and packed f16), a short bias, output padding not below the stride,
// padding that leaves no output.
func checkConvTranspose1DRejects(t *testing.T, name string, op convTranspose1dKernel, bad ...func(a *ConvTranspose1DArgs)) {
	t.Helper()
	x, w, y := scratch(t, "x", 64), scratch(t, "w", 64), scratch(t, "y", 64)
	c, err := dev.NewChain("bad " + name)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	ok := ConvTranspose1DArgs{InChannels: 2, OutChannels: 2, Length: 16, Kernel: 3, Padding: 1}
	with := func(f func(a *ConvTranspose1DArgs)) ConvTranspose1DArgs { a := ok; f(&a); return a }
	bad = append(bad,
		func(a *ConvTranspose1DArgs) { a.OutputPadding = 1 },
		func(a *ConvTranspose1DArgs) { a.Stride = 3 },
		func(a *ConvTranspose1DArgs) { a.Padding = 20 },
		func(a *ConvTranspose1DArgs) { a.Padding = -1 },
		func(a *ConvTranspose1DArgs) { a.Length = 0 },
		func(a *ConvTranspose1DArgs) { a.OutChannels = 0 },
	)
	var errs []error
	for _, f := range bad {
		errs = append(errs, op(c, x, w, nil, y, with(f)))
	}
	errs = append(errs,
		op(c, x, w, nil, x, ok),
		op(c, x, nil, nil, y, ok),
		op(c, x, scratch(t, "w2", 5), nil, y, ok),
		op(c, x, scratch(t, "w3", 2), nil, y, with(func(a *ConvTranspose1DArgs) { a.F16 = true })),
		op(c, x, w, scratch(t, "b", 1), y, ok),
	)
	for i, err := range errs {
		if err == nil {
			t.Errorf("case %d: accepted", i)
		} else if !strings.Contains(err.Error(), name+":") {
			t.Errorf("case %d: error %q does not name %s", i, err, name)
		}
	}
	if c.Err() != nil {
		t.Errorf("a rejected shape reached the chain: %v", c.Err())
	}
}
