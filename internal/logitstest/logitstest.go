// Package logitstest holds what the tests of engine/model and
// engine/adapter share to compare logits with their references: the
// difference relative to the logit range, and the reading of the float32
// fixtures the reference scripts write.
package logitstest

import (
	"encoding/binary"
	"math"
	"os"
	"testing"
)

// MaxRelDiff is max|a-b| over the range of b (max - min of the reference),
// and the index where it is largest (-1 when a is empty): logits are
// compared relative to their spread, since the softmax only sees
// differences. A NaN in a counts as the largest difference.
func MaxRelDiff(a, b []float32) (float64, int) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range b {
		lo, hi = math.Min(lo, float64(v)), math.Max(hi, float64(v))
	}
	worst, at := 0.0, -1
	for i := range a {
		d := math.Abs(float64(a[i]) - float64(b[i]))
		if !(d <= worst) {
			worst, at = d, i
		}
	}
	return worst / (hi - lo), at
}

// ReadF32 reads n little-endian float32s from path, failing the test when
// the file is missing or of another size.
func ReadF32(tb testing.TB, path string, n int) []float32 {
	tb.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	if len(raw) != 4*n {
		tb.Fatalf("%s: %d bytes, want %d floats", path, len(raw), n)
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out
}
