package ops

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// durationFramesParams mirrors Params in shaders/duration_frames.wgsl.
type durationFramesParams struct {
	Rows, N uint32
	Speed   float32
	_       uint32
}

// DurationFramesMax caps one token's frame count: 2^30, exact in f32 and
// far past any audio a model can render (Kokoro's frame is 600 samples).
const DurationFramesMax = 1 << 30

// DurationFramesNaN is the frame count of a row with a NaN logit: 0, which
// no finite row gets. The host checks the frames it reads back for it.
const DurationFramesNaN = 0

// DurationFrames appends Kokoro's duration rounding: for each of rows rows
// of n logits (duration_proj's max_dur outputs), out[r] = the sum of their
// sigmoids divided by speed, rounded half to even (torch.round), at least 1
// and at most DurationFramesMax, as a u32; DurationFramesNaN for a row with
// a NaN logit. out holds rows u32 values and is read back to size the
// frames.
func DurationFrames(c *gpu.Chain, logits, out *gpu.Buffer, rows, n int, speed float32) error {
	const kernel = "duration_frames"
	if rows <= 0 || n <= 0 {
		return fmt.Errorf("ops: %s: shape %dx%d must be positive", kernel, rows, n)
	}
	if !(speed > 0) || math.IsInf(float64(speed), 0) {
		return fmt.Errorf("ops: %s: speed %v must be positive and finite", kernel, speed)
	}
	if err := checkSizes(kernel, operand{"logits", logits, rows * n}, operand{"out", out, rows}); err != nil {
		return err
	}
	if out == logits {
		return fmt.Errorf("ops: %s: out %q must be another buffer than the logits", kernel, out.Label())
	}
	p := durationFramesParams{Rows: uint32(rows), N: uint32(n), Speed: speed}
	return dispatch(c, gpu.Spec("duration_frames", "duration_frames", "WG", wg), p, gpu.Grid(rows, wg), logits, out)
}
