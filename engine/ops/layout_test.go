package ops

import (
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// The layout kernels move bits, so every comparison is exact (tolerance 0),
// at magnitudes up to 3e4 and on shapes that are not multiples of the
// 256-wide workgroup (one row, one column, 257, 640×13 as the duration
// encoder's channels by a 13-token utterance).
var layoutShapes = [][2]int{{1, 1}, {1, 300}, {300, 1}, {7, 257}, {640, 13}}

func TestTransposeMatchesReference(t *testing.T) {
	for i, s := range layoutShapes {
		rows, cols := s[0], s[1]
		x := randVec(uint64(10+i), rows*cols, 3e4)
		bx, by := upload(t, "x", x), scratch(t, "y", rows*cols)
		run(t, "transpose", func(c *gpu.Chain) error { return Transpose(c, bx, by, rows, cols) })
		assertClose(t, "transpose", download(t, by, rows*cols), ref.Transpose(x, rows, cols), 0, 0)
	}
}

func TestGatherColumnsMatchesReference(t *testing.T) {
	for i, s := range layoutShapes {
		rows, cols := s[0], s[1]
		// Durations 0..3 per column: skipped columns, repeats, and one
		// index past the end, which the kernel clamps to the last column.
		var idx []uint32
		for j := range cols {
			for range (j*7 + i) % 4 {
				idx = append(idx, uint32(j))
			}
		}
		idx = append(idx, uint32(cols+5))
		x := randVec(uint64(20+i), rows*cols, 3e4)
		bx, by := upload(t, "x", x), scratch(t, "y", rows*len(idx))
		bi, err := dev.NewBufferFrom("idx", gpu.U32Bytes(idx))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(bi.Release)
		run(t, "gather", func(c *gpu.Chain) error { return GatherColumns(c, bx, bi, by, rows, cols, len(idx)) })
		assertClose(t, "gather_columns", download(t, by, rows*len(idx)), ref.GatherColumns(x, idx, rows, cols), 0, 0)
	}
}

func TestBroadcastColumnsMatchesReference(t *testing.T) {
	for i, s := range layoutShapes {
		rows, n := s[0], s[1]
		off := 3 + i*5
		v, y := randVec(uint64(30+i), rows, 3e4), randVec(uint64(40+i), off+rows*n+9, 1)
		bv, by := upload(t, "v", v), upload(t, "y", y)
		run(t, "broadcast", func(c *gpu.Chain) error { return BroadcastColumns(c, bv, by, rows, n, off) })
		want := append([]float32(nil), y...)
		ref.BroadcastColumns(v, want, n, off)
		// The floats around the range are left as they were.
		assertClose(t, "broadcast_columns", download(t, by, len(y)), want, 0, 0)
	}
}

func TestUpsampleNearest1DMatchesReference(t *testing.T) {
	for i, s := range layoutShapes {
		rows, length := s[0], s[1]
		for _, scale := range []int{1, 2, 3} {
			x := randVec(uint64(50+i), rows*length, 3e4)
			bx, by := upload(t, "x", x), scratch(t, "y", rows*length*scale)
			run(t, "upsample", func(c *gpu.Chain) error { return UpsampleNearest1D(c, bx, by, rows, length, scale) })
			assertClose(t, "upsample_nearest", download(t, by, rows*length*scale), ref.UpsampleNearest1D(x, rows, length, scale), 0, 0)
		}
	}
}

func TestLayoutRejectsBadShapes(t *testing.T) {
	a, b := scratch(t, "a", 16), scratch(t, "b", 16)
	c, err := dev.NewChain("bad layout")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	for name, err := range map[string]error{
		"transpose past x":       Transpose(c, a, b, 4, 5),
		"transpose in place":     Transpose(c, a, a, 4, 4),
		"transpose zero rows":    Transpose(c, a, b, 0, 4),
		"gather past y":          GatherColumns(c, a, b, b, 4, 4, 5),
		"gather y is idx":        GatherColumns(c, a, b, b, 2, 4, 4),
		"gather no columns out":  GatherColumns(c, a, b, b, 2, 4, 0),
		"broadcast past y":       BroadcastColumns(c, a, b, 4, 4, 1),
		"broadcast negative off": BroadcastColumns(c, a, b, 2, 2, -1),
		"upsample past y":        UpsampleNearest1D(c, a, b, 4, 4, 2),
		"upsample zero scale":    UpsampleNearest1D(c, a, b, 4, 4, 0),
		"upsample nil x":         UpsampleNearest1D(c, nil, b, 2, 2, 2),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
