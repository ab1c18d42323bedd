package ops

import (
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

func TestAddMatchesReference(t *testing.T) {
	// 1 element, one short of a workgroup, a few workgroups and a ragged tail.
	for _, n := range []int{1, 255, 257, 1000, 70001} {
		for _, scale := range []float32{1, 3e4} { // unit and production residual magnitudes
			x, y := randVec(1, n, scale), randVec(2, n, scale)
			bx, by, out := upload(t, "x", x), upload(t, "y", y), scratch(t, "out", n)
			run(t, "add", func(c *gpu.Chain) error { return Add(c, bx, by, out, n) })
			// One f32 addition rounds identically on GPU and CPU: exact.
			assertClose(t, "add", download(t, out, n), ref.Add(x, y), 0, 0)
		}
	}
}

func TestAddRejectsShortBuffers(t *testing.T) {
	x, y, out := upload(t, "x", make([]float32, 10)), upload(t, "y", make([]float32, 9)), scratch(t, "out", 10)
	c, err := dev.NewChain("bad add")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	if err := Add(c, x, y, out, 10); err == nil {
		t.Fatal("Add accepted a 9-float y for n=10")
	}
}
