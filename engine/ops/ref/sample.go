package ref

import (
	"cmp"
	"slices"
)

// Argmax returns the index of the largest value, the first one on ties.
func Argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// TopK returns the indices and values of the k largest values, best first,
// equal values in increasing index order.
func TopK(x []float32, k int) ([]uint32, []float32) {
	order := make([]int, len(x))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(x[b], x[a]) })
	ids, vals := make([]uint32, k), make([]float32, k)
	for r := range k {
		ids[r], vals[r] = uint32(order[r]), x[order[r]]
	}
	return ids, vals
}
