package ops

import (
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
	"github.com/hearthstudio/hearth/gguf"
)

// TestLMHeadTileLoop walks a batch through the LM head in row tiles the way
// a training step must when T×V logits pass the binding limit, with a head
// split into row chunks as a big vocabulary is: for each tile, copy its
// hidden rows out (ops.MatmulOptions has no x offset), logits = W·h,
// CrossEntropyBackward in place with the tile's target and loss offsets,
// then dH[tile] = dLogits·W straight into the whole batch's dH (DXOffset),
// with row splits. Each stage is checked against the reference of what it
// was given, with that stage's tolerance: logits within matmulRTol,
// loss and gradient within assertCrossEntropy's bounds, dH within
// matmulBackwardTol(V).
func TestLMHeadTileLoop(t *testing.T) {
	const rows, vocab, k, tile = 10, 300, 256, 4
	const softcap = 30
	typ := gguf.TypeQ6_K
	q, deq := remix(t, typ, vocab, k)
	rb, _ := typ.RowSize(k)
	head := newTensor(t, "head", typ, vocab, k, q, uint64(128*rb)) // chunks of 128 rows: 128 + 128 + 44
	hidden := randVec(71, rows*k, 1)
	targets := ceTargets(rows, vocab, func(r int) bool { return r < 3 }) // a 3-token prompt
	scale := float32(1.0 / 7)

	bh, bt := upload(t, "hidden", hidden), uploadI32(t, "targets", targets)
	bloss, bdh := scratch(t, "loss", rows), scratch(t, "dH", rows*k)
	htile, logits := scratch(t, "h tile", tile*k), scratch(t, "logits tile", tile*vocab)
	parts := scratch(t, "partials", 4*tile*k)
	var gotLogits, gotGrad []float32
	for r0 := 0; r0 < rows; r0 += tile {
		n := min(tile, rows-r0)
		run(t, "head logits", func(c *gpu.Chain) error {
			if err := CopyF32(c, bh, r0*k, htile, 0, n*k); err != nil {
				return err
			}
			return MatMul(c, head, htile, logits, n)
		})
		gotLogits = append(gotLogits, download(t, logits, n*vocab)...)
		run(t, "head backward", func(c *gpu.Chain) error {
			o := CrossEntropyOptions{Scale: scale, Softcap: softcap, TargetOffset: r0, LossOffset: r0}
			if err := CrossEntropyBackward(c, logits, bt, bloss, n, vocab, o); err != nil {
				return err
			}
			return MatMulBackwardInputWith(c, head, logits, bdh, n, MatmulBackwardOptions{DXOffset: r0 * k, Partials: parts})
		})
		gotGrad = append(gotGrad, download(t, logits, n*vocab)...)
	}

	wantLogits, err := ref.MatMul(typ, vocab, k, q, hidden, rows)
	if err != nil {
		t.Fatal(err)
	}
	_, bound := denseMatMul(deq, vocab, k, hidden, rows)
	assertMatmul(t, "logits", gotLogits, wantLogits, bound)
	assertCrossEntropy(t, gotLogits, targets, rows, vocab, scale, softcap, download(t, bloss, rows), gotGrad)
	wantDH, err := ref.MatMulBackwardInput(typ, vocab, k, q, gotGrad, rows)
	if err != nil {
		t.Fatal(err)
	}
	_, dhBound := matmulBackwardOracle(deq, vocab, k, gotGrad, rows)
	assertMatmulBackward(t, "dH", download(t, bdh, rows*k), wantDH, dhBound, vocab)
}
