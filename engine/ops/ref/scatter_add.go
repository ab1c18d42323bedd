package ref

import "slices"

// ScatterAddRows adds scale·Σ src[t] over the t with ids[t] = v to row v
// of dst, for rows of cols floats: the gradient of a gather (an embedding
// lookup's table, LoRA's B rows of the looked-up tokens), where a token
// that occurs several times sums its rows. Each row's terms are summed in
// f32 in token order, scaled, then added once, as the GPU kernel does.
func ScatterAddRows(dst, src []float32, ids []int32, cols int, scale float32) {
	order := make([]int, len(ids))
	for t := range order {
		order[t] = t
	}
	slices.SortStableFunc(order, func(a, b int) int { return int(ids[a]) - int(ids[b]) })
	sum := make([]float32, cols)
	for i := 0; i < len(order); {
		v := ids[order[i]]
		clear(sum)
		for ; i < len(order) && ids[order[i]] == v; i++ {
			for j, x := range src[order[i]*cols : (order[i]+1)*cols] {
				sum[j] += x
			}
		}
		row := dst[int(v)*cols : (int(v)+1)*cols]
		for j, s := range sum {
			row[j] += s * scale
		}
	}
}
