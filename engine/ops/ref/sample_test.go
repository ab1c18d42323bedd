package ref

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestTopKSelectMatchesSort compares the one-pass selection with the stable
// sort it replaces for small k, on values with many ties and some NaNs:
// the same indices in the same order, and the same values bit for bit.
func TestTopKSelectMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 50 {
		n := 1 + rng.IntN(500)
		x := make([]float32, n)
		for i := range x {
			switch rng.IntN(10) {
			case 0:
				x[i] = float32(math.NaN())
			case 1, 2, 3:
				x[i] = float32(rng.IntN(5)) // ties
			default:
				x[i] = float32(rng.NormFloat64())
			}
		}
		if trial%7 == 0 {
			slices.Sort(x) // ascending: every value enters the kept list
		}
		for _, k := range []int{0, 1, 2, 5, 40, topKSelect} {
			k = min(k, n)
			gotIDs, gotVals := TopK(x, k)
			wantIDs, wantVals := topKSorted(x, k)
			if !slices.Equal(gotIDs, wantIDs) {
				t.Fatalf("trial %d n %d k %d: ids %v, sorted %v", trial, n, k, gotIDs, wantIDs)
			}
			for i := range wantVals {
				if math.Float32bits(gotVals[i]) != math.Float32bits(wantVals[i]) {
					t.Fatalf("trial %d k %d: value %d is %v, sorted %v", trial, k, i, gotVals[i], wantVals[i])
				}
			}
		}
	}
}
