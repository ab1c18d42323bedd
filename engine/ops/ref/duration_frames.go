package ref

import "math"

// DurationFramesMax is ops.DurationFramesMax.
const DurationFramesMax = 1 << 30

// DurationFramesNaN is ops.DurationFramesNaN: a row with a NaN logit.
const DurationFramesNaN = 0

// DurationFrames is Kokoro's duration rounding for rows rows of n logits:
// the sum of the sigmoids (in float64) divided by speed, rounded half to
// even, clamped to [1, DurationFramesMax]. raw holds the unrounded values,
// so a test can tell a rounding boundary from a bug. A row with a NaN
// logit (its raw value NaN) gets DurationFramesNaN frames.
func DurationFrames(logits []float32, rows, n int, speed float32) (frames []uint32, raw []float64) {
	frames, raw = make([]uint32, rows), make([]float64, rows)
	for r := range rows {
		sum := 0.0
		for _, v := range logits[r*n : (r+1)*n] {
			sum += 1 / (1 + math.Exp(-float64(v)))
		}
		raw[r] = sum / float64(speed)
		if math.IsNaN(raw[r]) {
			frames[r] = DurationFramesNaN
			continue
		}
		frames[r] = uint32(min(max(math.RoundToEven(raw[r]), 1), DurationFramesMax))
	}
	return frames, raw
}
