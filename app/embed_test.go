package app

import (
	"math"
	"testing"
)

func TestPooled(t *testing.T) {
	// Two tokens of width 2: (3, 0) and (1, 4).
	h := []float32{3, 0, 1, 4}
	for _, tc := range []struct {
		p         Pooling
		normalize bool
		want      []float32
	}{
		{PoolMean, false, []float32{2, 2}},
		{PoolMean, true, []float32{float32(1 / math.Sqrt2), float32(1 / math.Sqrt2)}},
		{PoolCLS, true, []float32{1, 0}},
		{PoolLast, false, []float32{1, 4}},
		{PoolLast, true, []float32{float32(1 / math.Sqrt(17)), float32(4 / math.Sqrt(17))}},
	} {
		got := pooled(h, 2, 2, tc.p)
		if tc.normalize {
			unit(got)
		}
		for i := range got {
			if math.Abs(float64(got[i]-tc.want[i])) > 1e-7 {
				t.Errorf("pooling %d (normalize %v): %v, want %v", tc.p, tc.normalize, got, tc.want)
				break
			}
		}
	}
}
