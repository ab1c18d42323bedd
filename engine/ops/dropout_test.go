package ops

import (
	"math"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

func dropoutArgs(rows, cols, token0 int, m ref.DropoutMask) DropoutArgs {
	return DropoutArgs{Rows: rows, Cols: cols, Token0: token0, Key: m.Key, Threshold: m.Threshold, Scale: m.Scale}
}

// TestDropoutMatchesReference: the WGSL hash and the Go one draw the same
// mask bit for bit, and a kept element is one f32 multiply on both sides,
// so the comparison is exact — at awkward shapes, at production
// magnitudes, with offsets and accumulation.
func TestDropoutMatchesReference(t *testing.T) {
	for _, c := range []struct {
		rows, cols, token0 int
		p                  float32
		scale              float32
	}{{1, 1, 0, 0.5, 1}, {3, 255, 7, 0.1, 1}, {5, 257, 0, 0.5, 3e4}, {40, 896, 1000, 0.9, 1}, {2, 300, 0, 0, 1}} {
		m := ref.NewDropoutMask(ref.DropoutKey(12345, uint64(c.rows), uint32(c.cols)), c.p)
		n := c.rows * c.cols
		x := randVec(11, n+5, c.scale)
		bx, y := upload(t, "x", x), scratch(t, "y", n+3)
		a := dropoutArgs(c.rows, c.cols, c.token0, m)
		a.XOffset, a.YOffset = 5, 3
		run(t, "dropout", func(ch *gpu.Chain) error { return Dropout(ch, bx, y, a) })
		want := ref.Dropout(x[5:], c.rows, c.cols, c.token0, m)
		assertClose(t, "dropout", download(t, y, n+3)[3:], want, 0, 0)
		// Accumulating adds the same masked values again: 2·want, exact.
		a.Accumulate = true
		run(t, "dropout accumulate", func(ch *gpu.Chain) error { return Dropout(ch, bx, y, a) })
		for i := range want {
			want[i] += want[i]
		}
		assertClose(t, "dropout accumulate", download(t, y, n+3)[3:], want, 0, 0)
	}
}

// TestDropoutRate: the mask drops a fraction p of the elements and keeps
// the mean: over n = 2·10⁵ elements the dropped count is Binomial(n, p),
// within 5 standard deviations of n·p; rows, columns and keys are
// uncorrelated enough that neighbouring tokens and columns do not share
// masks (their agreement is p² + (1−p)², as for independent draws).
func TestDropoutRate(t *testing.T) {
	const rows, cols = 400, 500
	for _, p := range []float32{0.05, 0.1, 0.5} {
		for _, step := range []uint64{0, 1, 1 << 40} {
			m := ref.NewDropoutMask(ref.DropoutKey(7, step, 3), p)
			dropped, sameRow, sameCol := 0, 0, 0
			for i := range rows {
				for j := range cols {
					k := m.Keep(uint32(i), uint32(j))
					if !k {
						dropped++
					}
					if i > 0 && k == m.Keep(uint32(i-1), uint32(j)) {
						sameRow++
					}
					if j > 0 && k == m.Keep(uint32(i), uint32(j-1)) {
						sameCol++
					}
				}
			}
			n, pf := float64(rows*cols), float64(p)
			sd := math.Sqrt(n * pf * (1 - pf))
			if d := math.Abs(float64(dropped) - n*pf); d > 5*sd {
				t.Errorf("p=%v step %d: %d dropped of %v, want %v ± %.0f", p, step, dropped, n, n*pf, 5*sd)
			}
			agree := pf*pf + (1-pf)*(1-pf)
			for name, same := range map[string]int{"tokens": sameRow, "columns": sameCol} {
				pairs := n - float64(cols)
				if name == "columns" {
					pairs = n - float64(rows)
				}
				sdA := math.Sqrt(pairs * agree * (1 - agree))
				if d := math.Abs(float64(same) - pairs*agree); d > 5*sdA {
					t.Errorf("p=%v: neighbouring %s agree %d times of %v, want %.0f ± %.0f", p, name, same, pairs, pairs*agree, 5*sdA)
				}
			}
		}
	}
	// Another step or site is another mask.
	a, b := ref.NewDropoutMask(ref.DropoutKey(7, 1, 3), 0.5), ref.NewDropoutMask(ref.DropoutKey(7, 2, 3), 0.5)
	c := ref.NewDropoutMask(ref.DropoutKey(7, 1, 4), 0.5)
	diffB, diffC := 0, 0
	for j := range 1000 {
		if a.Keep(0, uint32(j)) != b.Keep(0, uint32(j)) {
			diffB++
		}
		if a.Keep(0, uint32(j)) != c.Keep(0, uint32(j)) {
			diffC++
		}
	}
	if diffB < 400 || diffC < 400 {
		t.Errorf("masks of another step or site differ in %d and %d of 1000 places, want about 500", diffB, diffC)
	}
}

func TestDropoutRejectsBadShapes(t *testing.T) {
	a, b := scratch(t, "a", 16), scratch(t, "b", 16)
	c, err := dev.NewChain("bad")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	for name, err := range map[string]error{
		"past x":     Dropout(c, a, b, DropoutArgs{Rows: 2, Cols: 9, Scale: 1}),
		"past y":     Dropout(c, a, b, DropoutArgs{Rows: 2, Cols: 8, YOffset: 1, Scale: 1}),
		"same":       Dropout(c, a, a, DropoutArgs{Rows: 2, Cols: 8, Scale: 1}),
		"empty":      Dropout(c, a, b, DropoutArgs{Rows: 0, Cols: 8, Scale: 1}),
		"inf scale":  Dropout(c, a, b, DropoutArgs{Rows: 2, Cols: 8, Scale: float32(math.Inf(1))}),
		"neg offset": Dropout(c, a, b, DropoutArgs{Rows: 2, Cols: 8, XOffset: -1, Scale: 1}),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
