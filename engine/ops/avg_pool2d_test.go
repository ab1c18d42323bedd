package ops

import (
	"fmt"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

func TestAvgPool2DMatchesReference(t *testing.T) {
	for _, tc := range []struct{ c, h, w, kh, kw int }{
		{3, 80, 37, 2, 2}, // odd width: the last column is dropped
		{2, 41, 30, 2, 1}, // 'timepreserve', odd height
		{5, 7, 9, 3, 3},
		{1, 2, 2, 2, 2},
	} {
		t.Run(fmt.Sprintf("%dx%dx%d/%dx%d", tc.c, tc.h, tc.w, tc.kh, tc.kw), func(t *testing.T) {
			for _, scale := range []float32{1, 3e4} {
				x := randVec(93, tc.c*tc.h*tc.w, scale)
				want := ref.AvgPool2D(x, tc.c, tc.h, tc.w, tc.kh, tc.kw)
				bx, y := upload(t, "x", x), scratch(t, "y", len(want))
				run(t, "avg_pool2d", func(c *gpu.Chain) error { return AvgPool2D(c, bx, y, tc.c, tc.h, tc.w, tc.kh, tc.kw) })
				// A sum of at most 9 floats then one division: a few ulps of
				// the window's largest |x|.
				assertWithinBound(t, "avg_pool2d", download(t, y, len(want)), want, ref.AvgPool2D(absVec(x), tc.c, tc.h, tc.w, tc.kh, tc.kw), 1e-6)
			}
		})
	}
}

func TestAvgPool2DRejectsBadShapes(t *testing.T) {
	x, y := scratch(t, "x", 64), scratch(t, "y", 16)
	c, err := dev.NewChain("bad avg_pool2d")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	for i, err := range []error{
		AvgPool2D(c, x, y, 1, 8, 8, 9, 1),
		AvgPool2D(c, x, y, 2, 8, 8, 2, 2),
		AvgPool2D(c, x, x, 1, 8, 8, 2, 2),
		AvgPool2D(c, x, y, 1, 8, 8, 0, 2),
	} {
		if err == nil {
			t.Errorf("case %d: accepted", i)
		}
	}
	if c.Err() != nil {
		t.Errorf("a rejected shape reached the chain: %v", c.Err())
	}
}
