package ops

import (
	"fmt"
	"math"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// Tolerances of AdaIN1D and ChannelLayerNorm against float64. As for
// LayerNorm (norm_test.go), the normalised value carries an absolute error
// of a few ulps of itself (the f32 mean and variance; the channel loop sums
// up to 512 terms one after another, ~sqrt(512) ulps of the spread), which
// the affine then multiplies by |w (1 + gamma)|: audioNormATol is per unit
// of the largest such gain (measured up to 7e-7 per unit). The final
// additions of b and beta round at the output's scale: audioNormRTol.
const (
	audioNormATol = 2e-6
	audioNormRTol = 1e-6
)

type audioNormCase struct {
	channels, length int
	weight, bias     bool
	style            bool
}

func (tc audioNormCase) String() string {
	return fmt.Sprintf("%dx%d/w=%v,b=%v,style=%v", tc.channels, tc.length, tc.weight, tc.bias, tc.style)
}

// audioNormInputs: x at xScale plus offset; w and b of +-1.5; gamma of
// +-gScale (so 1 + gamma crosses 0) and beta of +-1.
func audioNormInputs(seed uint64, tc audioNormCase, xScale, offset, gScale float32) (x, w, b, style []float32, gain float64) {
	x = randVec(seed, tc.channels*tc.length, xScale)
	for i := range x {
		x[i] += offset
	}
	gain = 1
	if tc.weight {
		w = randVec(seed+1, tc.channels, 1.5)
		gain *= 1.5
	}
	if tc.bias {
		b = randVec(seed+2, tc.channels, 1.5)
	}
	if tc.style {
		style = append(randVec(seed+3, tc.channels, gScale), randVec(seed+4, tc.channels, 1)...)
		gain *= 1 + float64(gScale)
	}
	return x, w, b, style, gain
}

func uploadOrNil(t testing.TB, label string, v []float32) *gpu.Buffer {
	if v == nil {
		return nil
	}
	return upload(t, label, v)
}

func checkAudioNorm(t *testing.T, instance bool, tc audioNormCase, seed uint64, xScale, offset, gScale float32) {
	t.Helper()
	x, w, b, style, gain := audioNormInputs(seed, tc, xScale, offset, gScale)
	a := AudioNormArgs{Channels: tc.channels, Length: tc.length, Eps: 1e-5}
	ra := ref.AudioNormArgs{Channels: tc.channels, Length: tc.length, Eps: 1e-5}
	var want []float32
	var op func(c *gpu.Chain, x, style, w, b, y *gpu.Buffer) error
	name := "channel_layernorm"
	if instance {
		name = "adain1d"
		want = ref.AdaIN1D(x, style, w, b, ra)
		op = func(c *gpu.Chain, x, style, w, b, y *gpu.Buffer) error { return AdaIN1D(c, x, style, w, b, y, a) }
	} else {
		want = ref.ChannelLayerNorm(x, w, b, style, ra)
		op = func(c *gpu.Chain, x, style, w, b, y *gpu.Buffer) error {
			return ChannelLayerNorm(c, x, w, b, style, y, a)
		}
	}
	n := len(x)
	bx, y := upload(t, "x", x), scratch(t, "y", n)
	bw, bb, bs := uploadOrNil(t, "w", w), uploadOrNil(t, "b", b), uploadOrNil(t, "style", style)
	run(t, name, func(c *gpu.Chain) error { return op(c, bx, bs, bw, bb, y) })
	assertClose(t, name, download(t, y, n), want, audioNormATol*gain, audioNormRTol)
	run(t, name+" in place", func(c *gpu.Chain) error { return op(c, bx, bs, bw, bb, bx) })
	assertClose(t, name+" in place", download(t, bx, n), want, audioNormATol*gain, audioNormRTol)
}

var audioNormAffines = []struct{ weight, bias, style bool }{
	{false, false, false}, {true, true, false}, {false, false, true}, {true, true, true},
}

func TestAdaIN1DMatchesReference(t *testing.T) {
	for _, s := range []struct{ c, l int }{{1, 1}, {3, 255}, {5, 257}, {2, 1000}, {4, 4097}} {
		for _, af := range audioNormAffines {
			tc := audioNormCase{s.c, s.l, af.weight, af.bias, af.style}
			t.Run(tc.String(), func(t *testing.T) { checkAudioNorm(t, true, tc, 51, 2, 0, 1.5) })
		}
	}
	// Kokoro's last stage: ~12000 samples per channel row (2.5 s at 4800
	// frames/s).
	t.Run("kokoro length", func(t *testing.T) { checkAudioNorm(t, true, audioNormCase{3, 12000, true, true, true}, 52, 2, 0, 1.5) })
}

func TestChannelLayerNormMatchesReference(t *testing.T) {
	for _, s := range []struct{ c, l int }{{1, 3}, {3, 255}, {7, 257}, {512, 37}, {640, 5}} {
		for _, af := range audioNormAffines {
			tc := audioNormCase{s.c, s.l, af.weight, af.bias, af.style}
			t.Run(tc.String(), func(t *testing.T) { checkAudioNorm(t, false, tc, 53, 2, 0, 1.5) })
		}
	}
}

func TestAudioNormWideMagnitude(t *testing.T) {
	tc := audioNormCase{6, 1000, true, true, true}
	// Rows offset 3e4 with a spread of 1: the shifted two-pass variance
	// keeps them exact (mean(x^2) - mean^2 would return garbage).
	t.Run("adain offset", func(t *testing.T) { checkAudioNorm(t, true, tc, 54, 1, 3e4, 1.5) })
	t.Run("layernorm offset", func(t *testing.T) {
		checkAudioNorm(t, false, audioNormCase{512, 20, true, true, true}, 55, 1, 3e4, 1.5)
	})
	// Decoder-scale activations of +-3e3 with gammas of +-8.
	t.Run("adain wide", func(t *testing.T) { checkAudioNorm(t, true, tc, 56, 3e3, 0, 8) })
	t.Run("layernorm wide", func(t *testing.T) { checkAudioNorm(t, false, audioNormCase{256, 33, true, true, true}, 57, 3e3, 0, 8) })
}

func TestAudioNormRejectsBadShapes(t *testing.T) {
	x, s, short := scratch(t, "x", 40), scratch(t, "s", 8), scratch(t, "short", 3)
	c, err := dev.NewChain("bad audio norm")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	ok := AudioNormArgs{Channels: 4, Length: 10, Eps: 1e-5}
	for i, err := range []error{
		AdaIN1D(c, x, s, nil, nil, x, AudioNormArgs{Channels: 4, Length: 11, Eps: 1e-5}),
		AdaIN1D(c, x, short, nil, nil, x, ok),
		AdaIN1D(c, x, s, short, nil, x, ok),
		AdaIN1D(c, x, s, nil, nil, s, ok),
		AdaIN1D(c, x, nil, nil, nil, x, AudioNormArgs{Channels: 4, Length: 10, Eps: float32(math.NaN())}),
		ChannelLayerNorm(c, x, nil, short, nil, x, ok),
		ChannelLayerNorm(c, x, nil, nil, nil, x, AudioNormArgs{Channels: 0, Length: 10}),
	} {
		if err == nil {
			t.Errorf("case %d: accepted", i)
		}
	}
	if c.Err() != nil {
		t.Errorf("a rejected shape reached the chain: %v", c.Err())
	}
}
