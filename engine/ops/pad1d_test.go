package ops

import (
	"fmt"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// Padding copies floats: the GPU must match the reference exactly.
func TestPad1DMatchesReference(t *testing.T) {
	for _, tc := range []struct {
		channels, t, left, right int
		mode                     PadMode
	}{
		{3, 257, 1, 0, PadReflect}, // Kokoro's ReflectionPad1d((1, 0))
		{2, 5, 4, 4, PadReflect},
		{1, 2, 1, 1, PadReflect},
		{4, 300, 3, 7, PadZeros},
		{5, 1, 0, 2, PadZeros},
	} {
		t.Run(fmt.Sprintf("%dx%d(%d,%d)/%d", tc.channels, tc.t, tc.left, tc.right, tc.mode), func(t *testing.T) {
			x := randVec(41, tc.channels*tc.t, 1e4)
			want := ref.Pad1D(x, tc.channels, tc.t, tc.left, tc.right, tc.mode == PadReflect)
			bx, y := upload(t, "x", x), scratch(t, "y", len(want))
			run(t, "pad1d", func(c *gpu.Chain) error { return Pad1D(c, bx, y, tc.channels, tc.t, tc.left, tc.right, tc.mode) })
			assertClose(t, "pad1d", download(t, y, len(want)), want, 0, 0)
		})
	}
}

func TestPad1DRejectsBadShapes(t *testing.T) {
	x, y := scratch(t, "x", 10), scratch(t, "y", 20)
	c, err := dev.NewChain("bad pad1d")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	for i, err := range []error{
		Pad1D(c, x, y, 2, 5, 5, 0, PadReflect),
		Pad1D(c, x, y, 2, 5, 0, 6, PadZeros),
		Pad1D(c, x, x, 2, 5, 0, 0, PadZeros),
		Pad1D(c, x, y, 2, 5, -1, 0, PadZeros),
		Pad1D(c, x, y, 2, 5, 1, 1, PadMode(7)),
	} {
		if err == nil {
			t.Errorf("case %d: accepted", i)
		}
	}
	if c.Err() != nil {
		t.Errorf("a rejected shape reached the chain: %v", c.Err())
	}
}
