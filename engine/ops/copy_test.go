package ops

import (
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

func TestCopyF32MatchesReference(t *testing.T) {
	// Lengths around a workgroup; offsets that are not multiples of 4 or of
	// the workgroup, as a KV-cache slot of an odd head layout is.
	cases := []struct{ n, srcOff, dstOff int }{{1, 0, 0}, {255, 3, 7}, {257, 0, 513}, {1000, 17, 0}}
	for _, tc := range cases {
		src := randVec(5, tc.srcOff+tc.n+9, 3e4)
		dst := randVec(6, tc.dstOff+tc.n+11, 1)
		bs, bd := upload(t, "src", src), upload(t, "dst", dst)
		run(t, "copy", func(c *gpu.Chain) error { return CopyF32(c, bs, tc.srcOff, bd, tc.dstOff, tc.n) })
		want := append([]float32(nil), dst...)
		ref.CopyF32(src, tc.srcOff, want, tc.dstOff, tc.n)
		// A copy moves bits: exact, and the floats around the range untouched.
		assertClose(t, "copy", download(t, bd, len(dst)), want, 0, 0)
	}
}

func TestAddBiasMatchesReference(t *testing.T) {
	for _, shape := range [][2]int{{1, 7}, {3, 255}, {5, 257}, {40, 896}} {
		rows, n := shape[0], shape[1]
		x, bias := randVec(7, rows*n, 3e4), randVec(8, n, 1)
		bx, bb := upload(t, "x", x), upload(t, "bias", bias)
		run(t, "add_bias", func(c *gpu.Chain) error { return AddBias(c, bx, bb, rows, n) })
		want := append([]float32(nil), x...)
		ref.AddBias(want, bias)
		assertClose(t, "add_bias", download(t, bx, rows*n), want, 0, 0) // one f32 addition: exact
	}
}

func TestCopyAndAddBiasRejectBadShapes(t *testing.T) {
	a, b := scratch(t, "a", 16), scratch(t, "b", 16)
	c, err := dev.NewChain("bad")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	for name, err := range map[string]error{
		"copy past src":  CopyF32(c, a, 10, b, 0, 7),
		"copy past dst":  CopyF32(c, a, 0, b, 10, 7),
		"copy same":      CopyF32(c, a, 0, a, 8, 4),
		"copy empty":     CopyF32(c, a, 0, b, 0, 0),
		"bias too long":  AddBias(c, a, b, 2, 9),
		"bias zero rows": AddBias(c, a, b, 0, 4),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
