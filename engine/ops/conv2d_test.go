package ops

import (
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// conv2dRel: as Conv1D, an f32 sum of cin/groups*kh*kw products in the
// reference's order, within ~sqrt(n) ulps of the bound sum |x w|; 1e-6 of
// the bound still catches a wrong tap.
const conv2dRel = 1e-6

func checkConv2D(t *testing.T, seed uint64, a Conv2DArgs, bias bool, xScale, wScale float32) {
	t.Helper()
	g := orOne(a.Groups)
	x := randVec(seed, a.InChannels*a.Height*a.Width, xScale)
	w := randVec(seed+1, a.OutChannels*(a.InChannels/g)*a.KernelH*a.KernelW, wScale)
	var b []float32
	if bias {
		b = randVec(seed+2, a.OutChannels, wScale)
	}
	if a.F16 {
		w = f16Round(t, w)
	}
	ra := ref.Conv2DArgs{InChannels: a.InChannels, OutChannels: a.OutChannels, Height: a.Height, Width: a.Width,
		KernelH: a.KernelH, KernelW: a.KernelW, StrideH: a.StrideH, StrideW: a.StrideW, PadH: a.PadH, PadW: a.PadW, Groups: a.Groups}
	want := ref.Conv2D(x, w, b, ra)
	bound := ref.Conv2D(absVec(x), absVec(w), absVec(b), ra)
	ho, wo := a.OutSize()
	n := a.OutChannels * ho * wo
	if len(want) != n {
		t.Fatalf("ref has %d values, OutSize gives %d", len(want), n)
	}
	bx, y := upload(t, "x", x), scratch(t, "y", n)
	bw, bb := uploadConvWeights(t, w, a.F16), uploadOrNil(t, "b", b)
	run(t, "conv2d", func(c *gpu.Chain) error { return Conv2D(c, bx, bw, bb, y, a) })
	assertWithinBound(t, "conv2d", download(t, y, n), want, bound, conv2dRel)
}

func TestConv2DMatchesReference(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    Conv2DArgs
		bias bool
	}{
		// The style encoder: a 1 -> C 3x3 stem on an 80-mel spectrogram
		// slice, 3x3 same convs, 1x1 shortcuts, depthwise learned
		// downsampling by 2 and (2, 1), a final 5x5 without padding.
		{"stem 3x3", Conv2DArgs{InChannels: 1, OutChannels: 6, Height: 80, Width: 37, KernelH: 3, KernelW: 3, PadH: 1, PadW: 1}, true},
		{"3x3 same", Conv2DArgs{InChannels: 5, OutChannels: 7, Height: 19, Width: 23, KernelH: 3, KernelW: 3, PadH: 1, PadW: 1}, true},
		{"1x1 nobias", Conv2DArgs{InChannels: 9, OutChannels: 4, Height: 10, Width: 13, KernelH: 1, KernelW: 1}, false},
		{"depthwise s2", Conv2DArgs{InChannels: 6, OutChannels: 6, Height: 21, Width: 17, KernelH: 3, KernelW: 3, StrideH: 2, StrideW: 2, PadH: 1, PadW: 1, Groups: 6}, true},
		{"depthwise (2,1)", Conv2DArgs{InChannels: 4, OutChannels: 4, Height: 20, Width: 31, KernelH: 3, KernelW: 1, StrideH: 2, StrideW: 1, PadH: 1, Groups: 4}, true},
		{"5x5 valid", Conv2DArgs{InChannels: 3, OutChannels: 5, Height: 9, Width: 14, KernelH: 5, KernelW: 5}, true},
		{"groups 2 rect", Conv2DArgs{InChannels: 4, OutChannels: 6, Height: 11, Width: 7, KernelH: 2, KernelW: 3, StrideH: 3, StrideW: 2, PadH: 1, PadW: 2, Groups: 2}, true},
		{"f16 3x3", Conv2DArgs{InChannels: 5, OutChannels: 3, Height: 15, Width: 16, KernelH: 3, KernelW: 3, PadH: 1, PadW: 1, F16: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) { checkConv2D(t, 91, tc.a, tc.bias, 1, 0.5) })
	}
}

func TestConv2DWideMagnitude(t *testing.T) {
	checkConv2D(t, 92, Conv2DArgs{InChannels: 16, OutChannels: 4, Height: 12, Width: 25, KernelH: 3, KernelW: 3, PadH: 1, PadW: 1}, true, 300, 30)
}

func TestConv2DRejectsBadShapes(t *testing.T) {
	x, w, y := scratch(t, "x", 64), scratch(t, "w", 64), scratch(t, "y", 64)
	c, err := dev.NewChain("bad conv2d")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	ok := Conv2DArgs{InChannels: 1, OutChannels: 1, Height: 8, Width: 8, KernelH: 3, KernelW: 3, PadH: 1, PadW: 1}
	with := func(f func(a *Conv2DArgs)) Conv2DArgs { a := ok; f(&a); return a }
	for i, err := range []error{
		Conv2D(c, x, w, nil, y, with(func(a *Conv2DArgs) { a.Groups = 2 })),
		Conv2D(c, x, w, nil, y, with(func(a *Conv2DArgs) { a.Height = 9 })),
		Conv2D(c, x, w, nil, y, with(func(a *Conv2DArgs) { a.KernelW = 11 })),
		Conv2D(c, x, w, nil, x, ok),
		Conv2D(c, x, scratch(t, "w2", 8), nil, y, ok),
		Conv2D(c, x, w, nil, y, with(func(a *Conv2DArgs) { a.PadH = -1 })),
	} {
		if err == nil {
			t.Errorf("case %d: accepted", i)
		}
	}
	if c.Err() != nil {
		t.Errorf("a rejected shape reached the chain: %v", c.Err())
	}
}
