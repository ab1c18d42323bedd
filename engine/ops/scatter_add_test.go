package ops

import (
	"math/rand/v2"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// TestScatterAddRowsMatchesReference: ids with many repeats (a small
// vocabulary) and with none, row widths around the workgroup, production
// magnitudes. Both sides sum each destination's rows in token order in
// f32, scale once and add once: exact.
func TestScatterAddRowsMatchesReference(t *testing.T) {
	for _, c := range []struct {
		n, vocab, cols int
		scale          float32
	}{{1, 5, 1, 1}, {37, 5, 16, 0.25}, {300, 1000, 257, 1}, {64, 50, 7, 3e4}} {
		rng := rand.New(rand.NewPCG(uint64(c.n), 3))
		ids := make([]int32, c.n)
		for i := range ids {
			ids[i] = int32(rng.IntN(c.vocab))
		}
		src, dst := randVec(21, c.n*c.cols, c.scale), randVec(22, c.vocab*c.cols, 1)
		plan, segs := ScatterPlan(ids)
		bp, err := dev.NewBuffer("plan", uint64(len(plan))*4)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(bp.Release)
		if err := bp.Write(0, gpu.U32Bytes(plan)); err != nil {
			t.Fatal(err)
		}
		bs, bd := upload(t, "src", src), upload(t, "dst", dst)
		run(t, "scatter", func(ch *gpu.Chain) error {
			return ScatterAddRows(ch, bs, bp, bd, c.n, c.vocab, c.cols, segs, c.scale)
		})
		want := append([]float32(nil), dst...)
		ref.ScatterAddRows(want, src, ids, c.cols, c.scale)
		assertClose(t, "scatter_add_rows", download(t, bd, len(dst)), want, 0, 0)
	}
}
