package ops

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// crossEntropyParams mirrors Params in shaders/cross_entropy.wgsl.
type crossEntropyParams struct {
	Rows, N                  uint32
	TargetOffset, LossOffset uint32
	Scale, Cap               float32
	_, _                     uint32
}

// crossEntropyWG: one workgroup per row, 256 invocations striding over the
// vocabulary, the most WebGPU guarantees.
const crossEntropyWG = 256

// CrossEntropyOptions describe where a row tile sits in the batch and how
// its loss is shaped. A batch whose T×V logits do not fit one storage
// binding (T·V·4 bytes over 128 MiB on lavapipe: T > 128 at V = 262144) is
// processed in row tiles: the caller computes a tile's logits into one
// buffer, calls CrossEntropyBackward on it with the tile's offsets, feeds the
// gradient it leaves there to MatMulBackwardInput of the head, and moves on.
type CrossEntropyOptions struct {
	// Scale multiplies the gradient: 1/(unmasked tokens in the whole batch),
	// so that the tiles together give the gradient of the mean loss. 0 means 1.
	Scale float32
	// Softcap, when positive, is the final logit soft-cap c of Gemma 2: the
	// softmax sees c·tanh(logit/c), and the gradient is taken with respect to
	// the uncapped logits.
	Softcap float32
	// TargetOffset is the index in targets of the tile's first row, and
	// LossOffset the index in loss: one targets and one loss buffer serve
	// the whole batch.
	TargetOffset, LossOffset int
}

// CrossEntropy appends the per-row loss of rows rows of vocab logits:
// loss[o.LossOffset+r] = logsumexp(z_r) − z_r[t] for the target
// t = targets[o.TargetOffset+r] (int32), 0 for a masked row (t < 0, a prompt
// token), NaN for t ≥ vocab. Stable at any magnitude: the row max is
// subtracted before exp. The logits are left as they are.
func CrossEntropy(c *gpu.Chain, logits, targets, loss *gpu.Buffer, rows, vocab int, o CrossEntropyOptions) error {
	return crossEntropy(c, "forward", logits, targets, loss, rows, vocab, o)
}

// CrossEntropyBackward appends CrossEntropy's loss and overwrites each row of
// logits with its gradient, (softmax(z) − onehot(t))·o.Scale (times the
// soft-cap's derivative 1 − tanh²(logit/c) when o.Softcap > 0), all zeros
// for a masked row: the gradient of the batch's mean loss when o.Scale is
// 1/(unmasked tokens). Working in place keeps one T×V buffer per tile
// instead of two.
func CrossEntropyBackward(c *gpu.Chain, logits, targets, loss *gpu.Buffer, rows, vocab int, o CrossEntropyOptions) error {
	return crossEntropy(c, "backward", logits, targets, loss, rows, vocab, o)
}

func crossEntropy(c *gpu.Chain, entry string, logits, targets, loss *gpu.Buffer, rows, vocab int, o CrossEntropyOptions) error {
	kernel := "cross_entropy " + entry
	if rows <= 0 || vocab <= 0 {
		return fmt.Errorf("ops: %s: shape %dx%d must be positive", kernel, rows, vocab)
	}
	if o.TargetOffset < 0 || o.LossOffset < 0 {
		return fmt.Errorf("ops: %s: target offset %d and loss offset %d must not be negative", kernel, o.TargetOffset, o.LossOffset)
	}
	if o.Softcap < 0 || math.IsNaN(float64(o.Softcap)) || math.IsInf(float64(o.Softcap), 0) {
		return fmt.Errorf("ops: %s: soft-cap %v must be positive, or 0 for none", kernel, o.Softcap)
	}
	if int64(rows)*int64(vocab) > math.MaxUint32 || int64(o.TargetOffset)+int64(rows) > math.MaxUint32 || int64(o.LossOffset)+int64(rows) > math.MaxUint32 {
		return fmt.Errorf("ops: %s: %dx%d at offsets %d, %d overflow the kernel's 32-bit index", kernel, rows, vocab, o.TargetOffset, o.LossOffset)
	}
	if err := needF32(kernel, "logits", logits, rows*vocab); err != nil {
		return err
	}
	if err := needF32(kernel, "targets", targets, o.TargetOffset+rows); err != nil {
		return err
	}
	if err := needF32(kernel, "loss", loss, o.LossOffset+rows); err != nil {
		return err
	}
	if logits == targets || logits == loss || targets == loss {
		return fmt.Errorf("ops: %s: logits, targets and loss must be three different buffers", kernel)
	}
	scale := o.Scale
	if scale == 0 {
		scale = 1
	}
	return dispatch(c, gpu.Spec("cross_entropy", entry, "WG", crossEntropyWG),
		crossEntropyParams{
			Rows: uint32(rows), N: uint32(vocab),
			TargetOffset: uint32(o.TargetOffset), LossOffset: uint32(o.LossOffset),
			Scale: scale, Cap: o.Softcap,
		}, gpu.Grid(rows, 1), logits, targets, loss)
}
