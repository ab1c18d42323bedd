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
// equal values in increasing index order (NaN below every number). A small
// k, a sampler's, is one pass that keeps the best k in order, so a decode
// step does not sort the whole vocabulary; a large one sorts.
func TopK(x []float32, k int) ([]uint32, []float32) {
	if k <= 0 || k > topKSelect || k > len(x) {
		return topKSorted(x, k)
	}
	ids, vals := make([]uint32, 0, k), make([]float32, 0, k)
	for i, v := range x {
		if len(vals) == k && cmp.Compare(v, vals[k-1]) <= 0 {
			continue // not above the k-th best; an equal one came first
		}
		// Its place is after every kept value it does not beat.
		r := len(vals)
		for r > 0 && cmp.Compare(v, vals[r-1]) > 0 {
			r--
		}
		if len(vals) < k {
			ids, vals = append(ids, 0), append(vals, 0)
		}
		copy(ids[r+1:], ids[r:])
		copy(vals[r+1:], vals[r:])
		ids[r], vals[r] = uint32(i), v
	}
	return ids, vals
}

// topKSelect is the largest k TopK selects in one pass: its cost grows
// with k times the values that enter the kept list, which sorting bounds.
const topKSelect = 64

// topKSorted is TopK by a stable sort of every index.
func topKSorted(x []float32, k int) ([]uint32, []float32) {
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
