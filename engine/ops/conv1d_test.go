package ops

import (
	"math"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// assertWithinBound fails unless |got-want| <= rel * bound[i] everywhere,
// bound being the sum of the magnitudes of the terms that made want[i] (the
// same op run on |x| and |w|). An f32 sum of n terms is off the exact one by
// at most (n-1) * 2^-24 of that sum in the worst case, and by about
// sqrt(n) * 2^-24 of it in practice; cancellation can make want[i] itself
// tiny, so the bound, not |want|, is the right scale.
func assertWithinBound(t testing.TB, what string, got, want []float32, bound []float32, rel float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d values, want %d", what, len(got), len(want))
	}
	worst, at := 0.0, -1
	for i := range want {
		g, w := float64(got[i]), float64(want[i])
		if math.IsNaN(g) || math.IsInf(g, 0) {
			t.Fatalf("%s: [%d] = %v, want %v", what, i, g, w)
		}
		if excess := math.Abs(g-w) - rel*float64(bound[i]); excess > worst {
			worst, at = excess, i
		}
	}
	if at >= 0 {
		t.Fatalf("%s: [%d] = %v, want %v (|diff| %.3g over %.3g x bound %.3g)", what, at, got[at], want[at], math.Abs(float64(got[at]-want[at])), rel, bound[at])
	}
}

func absVec(v []float32) []float32 {
	if v == nil {
		return nil
	}
	a := make([]float32, len(v))
	for i, x := range v {
		a[i] = float32(math.Abs(float64(x)))
	}
	return a
}

// uploadBytes puts raw bytes on the device.
func uploadBytes(t testing.TB, label string, b []byte) *gpu.Buffer {
	t.Helper()
	buf, err := dev.NewBufferFrom(label, b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(buf.Release)
	return buf
}

// uploadConvWeights puts a convolution's weights on the device: packed f16
// pairs (PackF16) for an F16 launch, f32 otherwise.
func uploadConvWeights(t testing.TB, w []float32, f16 bool) *gpu.Buffer {
	t.Helper()
	if !f16 {
		return upload(t, "w", w)
	}
	packed, err := PackF16(w)
	if err != nil {
		t.Fatal(err)
	}
	return uploadBytes(t, "w16", packed)
}

// f16Round is w rounded through PackF16, what the f16 kernels multiply by.
func f16Round(t testing.TB, w []float32) []float32 {
	t.Helper()
	b, err := PackF16(w)
	if err != nil {
		t.Fatal(err)
	}
	r := make([]float32, len(w))
	for i := range r {
		h := uint16(b[2*i]) | uint16(b[2*i+1])<<8
		r[i] = halfToFloat(h)
	}
	return r
}

// halfToFloat decodes an IEEE binary16, for checking PackF16 independently
// of gguf's decoder.
func halfToFloat(h uint16) float32 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e, m := int(h>>10&0x1f), float64(h&0x3ff)
	switch e {
	case 0:
		return float32(sign * m * math.Pow(2, -24))
	case 31:
		return float32(sign * math.Inf(1))
	}
	return float32(sign * (1 + m/1024) * math.Pow(2, float64(e-15)))
}

// conv1dRel: the kernel sums in f32 in the reference's order (bias, then ci,
// then k), at most 512*11 terms here; measured at most 1.5e-7 of the bound
// sum|x*w|, the sqrt(n) growth of random rounding. 1e-6 leaves room for a
// longer sum without hiding a wrong tap, which is off by a whole term.
const conv1dRel = 1e-6

func checkConv1D(t *testing.T, seed uint64, a Conv1DArgs, bias bool, xScale, wScale float32) {
	t.Helper()
	checkConv1DKernel(t, "conv1d", Conv1D, ref.Conv1D, seed, a, bias, xScale, wScale)
}

// conv1dKernel is Conv1D or a kernel computing the same y (Conv1DTiled).
type conv1dKernel func(c *gpu.Chain, x, w, bias, y *gpu.Buffer, a Conv1DArgs) error

// checkConv1DKernel runs op on random inputs of a's shape against
// reference.
func checkConv1DKernel(t *testing.T, name string, op conv1dKernel, reference func(x, w, bias []float32, a ref.Conv1DArgs) []float32,
	seed uint64, a Conv1DArgs, bias bool, xScale, wScale float32) {
	t.Helper()
	g := orOne(a.Groups)
	x := randVec(seed, a.InChannels*a.Length, xScale)
	w := randVec(seed+1, a.OutChannels*(a.InChannels/g)*a.Kernel, wScale)
	var b []float32
	if bias {
		b = randVec(seed+2, a.OutChannels, wScale)
	}
	if a.F16 {
		w = f16Round(t, w)
	}
	ra := ref.Conv1DArgs{InChannels: a.InChannels, OutChannels: a.OutChannels, Length: a.Length, Kernel: a.Kernel,
		Stride: a.Stride, Padding: a.Padding, Dilation: a.Dilation, Groups: a.Groups, Reflect: a.PadMode == PadReflect}
	want := reference(x, w, b, ra)
	bound := reference(absVec(x), absVec(w), absVec(b), ra)
	n := a.OutChannels * a.OutLength()
	if len(want) != n {
		t.Fatalf("ref length %d, ops.OutLength gives %d", len(want), n)
	}
	bx, y := upload(t, "x", x), scratch(t, "y", n)
	bw, bb := uploadConvWeights(t, w, a.F16), uploadOrNil(t, "b", b)
	run(t, name, func(c *gpu.Chain) error { return op(c, bx, bw, bb, y, a) })
	assertWithinBound(t, name, download(t, y, n), want, bound, conv1dRel)
}

func TestConv1DMatchesReference(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    Conv1DArgs
		bias bool
	}{
		{"k1 linear", Conv1DArgs{InChannels: 9, OutChannels: 1, Length: 301, Kernel: 1}, true},
		{"k3 same", Conv1DArgs{InChannels: 5, OutChannels: 7, Length: 259, Kernel: 3, Padding: 1}, true},
		{"k7 nobias", Conv1DArgs{InChannels: 6, OutChannels: 4, Length: 37, Kernel: 7, Padding: 3}, false},
		{"dilated 5", Conv1DArgs{InChannels: 8, OutChannels: 8, Length: 70, Kernel: 3, Padding: 5, Dilation: 5}, true},
		{"dilated k11", Conv1DArgs{InChannels: 3, OutChannels: 3, Length: 90, Kernel: 11, Padding: 15, Dilation: 3}, true},
		{"stride 2", Conv1DArgs{InChannels: 3, OutChannels: 5, Length: 31, Kernel: 3, Stride: 2, Padding: 1}, true},
		// Kokoro's first noise_conv: 22 -> C, kernel 2*6, stride 6, padding 3.
		{"noise conv", Conv1DArgs{InChannels: 22, OutChannels: 10, Length: 241, Kernel: 12, Stride: 6, Padding: 3}, true},
		{"groups 2", Conv1DArgs{InChannels: 6, OutChannels: 4, Length: 33, Kernel: 5, Padding: 2, Groups: 2}, true},
		{"depthwise", Conv1DArgs{InChannels: 7, OutChannels: 7, Length: 300, Kernel: 3, Padding: 1, Groups: 7}, true},
		{"reflect", Conv1DArgs{InChannels: 4, OutChannels: 3, Length: 20, Kernel: 7, Padding: 3, PadMode: PadReflect}, true},
		{"reflect dilated", Conv1DArgs{InChannels: 2, OutChannels: 2, Length: 12, Kernel: 3, Padding: 5, Dilation: 5, PadMode: PadReflect}, false},
		{"no padding short", Conv1DArgs{InChannels: 2, OutChannels: 3, Length: 5, Kernel: 5}, true},
		{"f16 k7", Conv1DArgs{InChannels: 5, OutChannels: 3, Length: 263, Kernel: 7, Padding: 3, F16: true}, true},
		{"f16 odd count", Conv1DArgs{InChannels: 3, OutChannels: 1, Length: 40, Kernel: 3, Padding: 1, F16: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) { checkConv1D(t, 11, tc.a, tc.bias, 1, 0.5) })
	}
}

func TestConv1DKokoroLength(t *testing.T) {
	// An AdaINResBlock1 conv at Kokoro's last stage: 3000 frames, kernel 11,
	// dilation 5, and a 512-channel conv_post-sized reduction (conv_post is
	// 128 -> 22 over ~10k frames in the real model; the reduction length,
	// not the frame count, is what stresses f32).
	checkConv1D(t, 12, Conv1DArgs{InChannels: 8, OutChannels: 6, Length: 3000, Kernel: 11, Padding: 25, Dilation: 5}, true, 1, 0.3)
	checkConv1D(t, 13, Conv1DArgs{InChannels: 512, OutChannels: 3, Length: 200, Kernel: 7, Padding: 3}, true, 1, 0.05)
}

func TestConv1DWideMagnitude(t *testing.T) {
	// Decoder activations reach the hundreds before an AdaIN; weights of a
	// weight-normed conv can be tens. The error stays relative to the bound.
	checkConv1D(t, 14, Conv1DArgs{InChannels: 16, OutChannels: 5, Length: 77, Kernel: 5, Padding: 2}, true, 300, 30)
	checkConv1D(t, 15, Conv1DArgs{InChannels: 16, OutChannels: 5, Length: 77, Kernel: 5, Padding: 2, F16: true}, true, 1e4, 60)
}

func TestConv1DRejectsBadShapes(t *testing.T) {
	checkConv1DRejects(t, "conv1d", Conv1D,
		func(a *Conv1DArgs) { a.Groups = 3 },
		func(a *Conv1DArgs) { a.Length = 40 },
		func(a *Conv1DArgs) { a.Kernel = 40 },
		func(a *Conv1DArgs) { a.Padding = 16; a.PadMode = PadReflect },
		func(a *Conv1DArgs) { a.Stride = -1 },
	)
}

// checkConv1DRejects has op refuse a valid conv with each change of bad
// made to its arguments, then with the buffers no conv takes: y the same
// as x, no weights, a short bias, short f32 and f16 weights. No refused
// call may reach the chain.
func checkConv1DRejects(t *testing.T, name string, op conv1dKernel, bad ...func(a *Conv1DArgs)) {
	t.Helper()
	x, w, y := scratch(t, "x", 64), scratch(t, "w", 64), scratch(t, "y", 64)
	c, err := dev.NewChain("bad " + name)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	ok := Conv1DArgs{InChannels: 2, OutChannels: 2, Length: 16, Kernel: 3, Padding: 1}
	with := func(f func(a *Conv1DArgs)) Conv1DArgs { a := ok; f(&a); return a }
	var errs []error
	for _, f := range bad {
		errs = append(errs, op(c, x, w, nil, y, with(f)))
	}
	errs = append(errs,
		op(c, x, w, nil, x, ok),
		op(c, x, nil, nil, y, ok),
		op(c, x, w, scratch(t, "b", 1), y, ok),
		op(c, x, scratch(t, "w2", 5), nil, y, ok),
		op(c, x, scratch(t, "w3", 2), nil, y, with(func(a *Conv1DArgs) { a.F16 = true })),
	)
	for i, err := range errs {
		if err == nil {
			t.Errorf("case %d: accepted", i)
		}
	}
	if c.Err() != nil {
		t.Errorf("a rejected shape reached the chain: %v", c.Err())
	}
}
