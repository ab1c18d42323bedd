package ops

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"

	"github.com/hearthstudio/hearth/engine/ops/ref"
)

func checkConv1DTiled(t *testing.T, seed uint64, a Conv1DArgs, bias bool, xScale, wScale float32) {
	t.Helper()
	checkConv1DTiledTile(t, Conv1DTile{}, seed, a, bias, xScale, wScale)
}

// checkConv1DTiledTile is checkConv1DTiled with the tile shape tile (zero:
// the default).
func checkConv1DTiledTile(t *testing.T, tile Conv1DTile, seed uint64, a Conv1DArgs, bias bool, xScale, wScale float32) {
	t.Helper()
	// Each output is one f32 sum in the reference's order (bias, then j =
	// ci*k + kk in order; a tile's zero padding adds exact zeros), the order
	// of conv1d, so conv1dRel's reasoning holds: with random signs the
	// partial sums grow as sqrt(j), so the n roundings add to a few ulp of
	// the bound sum|x*w| whatever n (measured below 2e-7 here, n up to
	// 1090*3); 1e-6 (~17 ulp) still catches a wrong or dropped tap, which
	// is off by about 1/n of the bound: 3e-4 at n = 3270.
	op := func(c *gpu.Chain, x, w, bias, y *gpu.Buffer, a Conv1DArgs) error {
		return Conv1DTiledWith(c, x, w, bias, y, a, Conv1DTiledOptions{Tile: tile})
	}
	checkConv1DKernel(t, "conv1d_tiled", op, ref.Conv1DTiled, seed, a, bias, xScale, wScale)
}

func TestConv1DTiledMatchesReference(t *testing.T) {
	// Every tile variant on shapes off its tile (32/64/128 channels x
	// 64/128 steps) and its K step (8/16/32) in every direction (K =
	// cin*k of 9, 15, 42, 77, 56, 3270, ...), taps reaching past both
	// ends, dilations whose taps span more than a tile, and f16 weights.
	for _, tile := range Conv1DTileVariants {
		t.Run(tile.String(), func(t *testing.T) { testConv1DTiledShapes(t, tile) })
	}
}

func testConv1DTiledShapes(t *testing.T, tile Conv1DTile) {
	for _, tc := range []struct {
		name string
		a    Conv1DArgs
		bias bool
	}{
		{"k1 linear", Conv1DArgs{InChannels: 9, OutChannels: 1, Length: 301, Kernel: 1}, true},
		{"k1 one step", Conv1DArgs{InChannels: 128, OutChannels: 70, Length: 1, Kernel: 1}, true},
		{"k3 same", Conv1DArgs{InChannels: 5, OutChannels: 37, Length: 259, Kernel: 3, Padding: 1}, true},
		{"k7 nobias", Conv1DArgs{InChannels: 6, OutChannels: 4, Length: 37, Kernel: 7, Padding: 3}, false},
		{"dilated 5 k11", Conv1DArgs{InChannels: 7, OutChannels: 33, Length: 130, Kernel: 11, Padding: 25, Dilation: 5}, true},
		{"dilated 3 k7", Conv1DArgs{InChannels: 8, OutChannels: 8, Length: 65, Kernel: 7, Padding: 9, Dilation: 3}, true},
		{"span 64", Conv1DArgs{InChannels: 3, OutChannels: 3, Length: 90, Kernel: 5, Padding: 32, Dilation: 16}, true},
		{"k16", Conv1DArgs{InChannels: 3, OutChannels: 2, Length: 70, Kernel: 16, Padding: 7}, true},
		{"k17", Conv1DArgs{InChannels: 3, OutChannels: 65, Length: 70, Kernel: 17, Padding: 8}, true},
		{"dilated 33", Conv1DArgs{InChannels: 5, OutChannels: 6, Length: 150, Kernel: 3, Padding: 33, Dilation: 33}, true},
		{"span over tile", Conv1DArgs{InChannels: 4, OutChannels: 3, Length: 200, Kernel: 11, Padding: 50, Dilation: 10}, true},
		{"two channel tiles", Conv1DArgs{InChannels: 16, OutChannels: 130, Length: 129, Kernel: 3, Padding: 1}, true},
		{"no padding short", Conv1DArgs{InChannels: 2, OutChannels: 3, Length: 5, Kernel: 5}, true},
		{"padding over halo", Conv1DArgs{InChannels: 2, OutChannels: 3, Length: 9, Kernel: 3, Padding: 70}, true},
		{"f16 k7", Conv1DArgs{InChannels: 5, OutChannels: 35, Length: 263, Kernel: 7, Padding: 3, F16: true}, true},
		{"f16 odd count", Conv1DArgs{InChannels: 3, OutChannels: 1, Length: 40, Kernel: 3, Padding: 1, F16: true}, false},
		// A decoder conv's reduction: 1090 inputs x 3 taps.
		{"decoder width", Conv1DArgs{InChannels: 1090, OutChannels: 40, Length: 67, Kernel: 3, Padding: 1}, true},
		// Off the 128-channel and 128-step tiles: 2 and 3 tiles, partial last.
		{"large tile edges", Conv1DArgs{InChannels: 11, OutChannels: 131, Length: 263, Kernel: 3, Padding: 1}, true},
		{"large tile dilated", Conv1DArgs{InChannels: 9, OutChannels: 257, Length: 300, Kernel: 7, Padding: 9, Dilation: 3}, true},
		{"f16 large tile", Conv1DArgs{InChannels: 7, OutChannels: 129, Length: 200, Kernel: 11, Padding: 25, Dilation: 5, F16: true}, false},
		// A generator resblock conv, smaller: many time tiles, the last
		// partial, K = 280 (an odd and an even number of K steps, as the
		// pipelined kernel alternates its two stages).
		{"resblock k7 d3", Conv1DArgs{InChannels: 40, OutChannels: 96, Length: 1001, Kernel: 7, Padding: 9, Dilation: 3}, true},
		{"resblock k11 d5", Conv1DArgs{InChannels: 24, OutChannels: 33, Length: 517, Kernel: 11, Padding: 25, Dilation: 5}, true},
	} {
		t.Run(tc.name, func(t *testing.T) { checkConv1DTiledTile(t, tile, 21, tc.a, tc.bias, 1, 0.5) })
	}
}

func TestConv1DTiledWideMagnitude(t *testing.T) {
	// Decoder activations reach the hundreds before an AdaIN; weights of a
	// weight-normed conv can be tens. The error stays relative to the bound.
	for _, tile := range Conv1DTileVariants {
		t.Run(tile.String(), func(t *testing.T) {
			checkConv1DTiledTile(t, tile, 24, Conv1DArgs{InChannels: 16, OutChannels: 35, Length: 77, Kernel: 5, Padding: 2}, true, 300, 30)
			checkConv1DTiledTile(t, tile, 25, Conv1DArgs{InChannels: 16, OutChannels: 5, Length: 77, Kernel: 5, Padding: 2, F16: true}, true, 1e4, 60)
		})
	}
}

func TestConv1DTiledVariantsAgreeBitwise(t *testing.T) {
	// The contract is the summation order itself, not just the tolerance:
	// every variant adds bias, then j = 0..K-1, each a rounded multiply and
	// a rounded add, so on one device every variant's y is the default
	// tile's bit for bit (as measured on lavapipe). A tile that reordered
	// taps or split K would differ in the last bits of most outputs while
	// staying within conv1dRel. (A driver that fused the multiply-adds in
	// one kernel and not another would also show here.)
	for _, tc := range []struct {
		name string
		a    Conv1DArgs
	}{
		{"k7 d3", Conv1DArgs{InChannels: 90, OutChannels: 70, Length: 301, Kernel: 7, Padding: 9, Dilation: 3}},
		{"f16 k3", Conv1DArgs{InChannels: 45, OutChannels: 131, Length: 150, Kernel: 3, Padding: 1, F16: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.a
			w := randVec(2, a.OutChannels*a.InChannels*a.Kernel, 0.5)
			if a.F16 {
				w = f16Round(t, w)
			}
			x, b := upload(t, "x", randVec(1, a.InChannels*a.Length, 1)), upload(t, "b", randVec(3, a.OutChannels, 0.5))
			bw := uploadConvWeights(t, w, a.F16)
			n := a.OutChannels * a.OutLength()
			conv := func(tile Conv1DTile) []float32 {
				y := scratch(t, "y", n)
				run(t, tile.String(), func(c *gpu.Chain) error {
					return Conv1DTiledWith(c, x, bw, b, y, a, Conv1DTiledOptions{Tile: tile})
				})
				return download(t, y, n)
			}
			want := conv(DefaultConv1DTile)
			for _, tile := range Conv1DTileVariants {
				got, diff := conv(tile), 0
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						diff++
					}
				}
				if diff > 0 {
					t.Errorf("%v: %d of %d outputs differ from %v's in their bits", tile, diff, n, DefaultConv1DTile)
				}
			}
		})
	}
}

// TestConv1DTileForPicksVariants checks Conv1DTileFor's choices for a
// short, a medium and a long output are tiles of Conv1DTileVariants (which
// the parity tests run) and differ.
func TestConv1DTileForPicksVariants(t *testing.T) {
	short := Conv1DTileFor(Conv1DArgs{InChannels: 1090, OutChannels: 1024, Length: 150, Kernel: 3, Padding: 1})
	medium := Conv1DTileFor(Conv1DArgs{InChannels: 1090, OutChannels: 1024, Length: 1527, Kernel: 3, Padding: 1})
	long := Conv1DTileFor(Conv1DArgs{InChannels: 256, OutChannels: 256, Length: 30540, Kernel: 7, Padding: 9, Dilation: 3})
	if short == medium || medium == long || short == long {
		t.Errorf("short, medium and long outputs get %v, %v, %v", short, medium, long)
	}
	for _, tile := range []Conv1DTile{short, medium, long} {
		if !slices.Contains(Conv1DTileVariants, tile) {
			t.Errorf("%v is not in Conv1DTileVariants", tile)
		}
		// Conv1DTiled runs its choice on every device: WebGPU guarantees
		// 16 KiB of workgroup memory and no more.
		if b := tile.SharedBytes(); b > 16384 {
			t.Errorf("%v: %d bytes of workgroup memory, over WebGPU's guaranteed 16384", tile, b)
		}
	}
}

func TestConv1DTileVariantsFit(t *testing.T) {
	if DefaultConv1DTile != (Conv1DTile{M: 64, N: 64, TM: 4, TN: 4, KC: 16}) {
		t.Errorf("default tile %v, want m64n64t4x4k16", DefaultConv1DTile)
	}
	// Every variant must run on the test device, or the parity and bitwise
	// tests would not cover it: a tile over lavapipe's 32 KiB fails here
	// rather than being skipped there.
	for _, tile := range Conv1DTileVariants {
		if err := tile.Validate(); err != nil {
			t.Errorf("%v: %v", tile, err)
		}
		if n := tile.Invocations(); n > 256 {
			t.Errorf("%v: %d invocations", tile, n)
		}
		if err := tile.FitsDevice(dev); err != nil {
			t.Errorf("%v does not run on the test device %s, so its parity goes untested: %v", tile, dev.Info.Label(), err)
		}
	}
}

func TestConv1DTiledRejectsBadTiles(t *testing.T) {
	// The tile is checked before anything is recorded, so no chain or
	// buffers are needed.
	a := Conv1DArgs{InChannels: 4, OutChannels: 4, Length: 16, Kernel: 3, Padding: 1}
	for _, tc := range []struct {
		tile Conv1DTile
		want string
	}{
		{Conv1DTile{M: 64, N: 64, TM: 4, TN: 4, KC: 0}, "positive"},
		{Conv1DTile{M: 64, N: 64, TM: 6, TN: 4, KC: 16}, "multiples of 4"},
		{Conv1DTile{M: 64, N: 64, TM: 4, TN: 32, KC: 16}, "multiples of 4"},
		{Conv1DTile{M: 60, N: 64, TM: 8, TN: 4, KC: 16}, "whole number"},
		{Conv1DTile{M: 128, N: 128, TM: 4, TN: 4, KC: 8}, "over 256"},
		{Conv1DTile{M: 128, N: 128, TM: 8, TN: 8, KC: 32}, "over 16384"},
		{Conv1DTile{M: 64, N: 64, TM: 4, TN: 4, KC: 64}, "over 16384"},
		// The pipelined kernel's narrower limits (its memory is the
		// device's: TestConv1DTiledRejectsTileOverDeviceMemory).
		{Conv1DTile{M: 64, N: 64, TM: 16, TN: 4, KC: 8, Pipelined: true}, "4 or 8"},
		{Conv1DTile{M: 48, N: 64, TM: 4, TN: 4, KC: 8, Pipelined: true}, "multiple of 32"},
		{Conv1DTile{M: 64, N: 64, TM: 8, TN: 8, KC: 12, Pipelined: true}, "must divide"},
		{Conv1DTile{M: 64, N: 64, TM: 8, TN: 8, KC: 32, Pipelined: true}, "over 4 per invocation"},
		{Conv1DTile{M: 128, N: 64, TM: 8, TN: 8, KC: 32, Pipelined: true}, "over 4 per invocation"},
	} {
		err := Conv1DTiledWith(nil, nil, nil, nil, nil, a, Conv1DTiledOptions{Tile: tc.tile})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("tile %v: error %v, want one saying %q", tc.tile, err, tc.want)
		}
	}
}

func TestConv1DTiledRejectsTileOverDeviceMemory(t *testing.T) {
	// m128n128t8x8k32p is a valid pipelined tile (two staged vec4s of W
	// and four of B an invocation) whose double stage, 64 KiB, is over
	// lavapipe's 32 KiB and the H200's 48.
	tile := Conv1DTile{M: 128, N: 128, TM: 8, TN: 8, KC: 32, Pipelined: true}
	if err := tile.Validate(); err != nil {
		t.Fatalf("%v: %v", tile, err)
	}
	have := int(dev.Limits.MaxComputeWorkgroupStorageSize)
	if tile.SharedBytes() <= have {
		t.Fatalf("%v stages %d bytes, within the test device's %d: pick a bigger tile", tile, tile.SharedBytes(), have)
	}
	a := Conv1DArgs{InChannels: 4, OutChannels: 4, Length: 16, Kernel: 3, Padding: 1}
	x, w, y := scratch(t, "x", 64), scratch(t, "w", 64), scratch(t, "y", 64)
	c, err := dev.NewChain("tile over memory")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	err = Conv1DTiledWith(c, x, w, nil, y, a, Conv1DTiledOptions{Tile: tile})
	for _, want := range []string{tile.String(), fmt.Sprint(tile.SharedBytes()), fmt.Sprint(have)} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want one naming %q", err, want)
		}
	}
}

func TestConv1DTiledRejectsBadShapes(t *testing.T) {
	checkConv1DRejects(t, "conv1d_tiled", Conv1DTiled,
		func(a *Conv1DArgs) { a.Stride = 2 },
		func(a *Conv1DArgs) { a.Groups = 2 },
		func(a *Conv1DArgs) { a.PadMode = PadReflect },
		func(a *Conv1DArgs) { a.Length = 40 },
		func(a *Conv1DArgs) { a.Padding = -1 },
		func(a *Conv1DArgs) { a.Kernel = 40 },
	)
}
