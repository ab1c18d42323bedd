package ops

import (
	"fmt"
	"math"
	"slices"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// scatterParams mirrors Params in shaders/scatter_add.wgsl.
type scatterParams struct {
	Segments, Cols uint32
	Scale          float32
	_              uint32
}

// ScatterPlan is the plan ScatterAddRows reads for the destination rows
// ids (one per source row, repeats allowed): the source rows grouped by
// destination, as one u32 array of segment starts (segments + 1), then
// each segment's row, then the source rows in segment order. segments is
// the number of distinct ids. The host builds it where it knows the ids
// (the training step's token ids), so the kernel needs no atomics.
func ScatterPlan(ids []int32) (plan []uint32, segments int) {
	order := make([]int, len(ids))
	for t := range order {
		order[t] = t
	}
	slices.SortStableFunc(order, func(a, b int) int { return int(ids[a]) - int(ids[b]) })
	var starts, rows []uint32
	for i, t := range order {
		if i == 0 || ids[t] != ids[order[i-1]] {
			starts = append(starts, uint32(i))
			rows = append(rows, uint32(ids[t]))
		}
	}
	starts = append(starts, uint32(len(ids)))
	plan = append(starts, rows...)
	for _, t := range order {
		plan = append(plan, uint32(t))
	}
	return plan, len(rows)
}

// ScatterAddRows appends dst[row] += scale·Σ src[t] over the source rows t
// of each segment of plan (ScatterPlan's, uploaded), rows of cols floats:
// the gradient of a row gather, tokens that repeat summing their rows.
// dst has dstRows rows and src srcRows; plan's rows must be below dstRows
// and its source rows below srcRows (ScatterPlan's are, for ids that are).
func ScatterAddRows(c *gpu.Chain, src, plan, dst *gpu.Buffer, srcRows, dstRows, cols, segments int, scale float32) error {
	const kernel = "scatter_add_rows"
	if srcRows <= 0 || dstRows <= 0 || cols <= 0 || segments <= 0 || segments > srcRows {
		return fmt.Errorf("ops: %s: %d source rows, %d destination rows of %d, %d segments: all positive, segments at most the source rows", kernel, srcRows, dstRows, cols, segments)
	}
	if uint64(max(srcRows, dstRows))*uint64(cols) > math.MaxUint32 {
		return fmt.Errorf("ops: %s: %d rows of %d overflow 32-bit indexing", kernel, max(srcRows, dstRows), cols)
	}
	if math.IsNaN(float64(scale)) || math.IsInf(float64(scale), 0) {
		return fmt.Errorf("ops: %s: scale %v is not finite", kernel, scale)
	}
	if err := needF32(kernel, "src", src, srcRows*cols); err != nil {
		return err
	}
	if err := needF32(kernel, "dst", dst, dstRows*cols); err != nil {
		return err
	}
	if plan == nil || plan.Size() < uint64(2*segments+1+srcRows)*4 {
		return fmt.Errorf("ops: %s: the plan must hold %d u32s", kernel, 2*segments+1+srcRows)
	}
	if dst == src || dst == plan {
		return fmt.Errorf("ops: %s: dst %q is also an input", kernel, dst.Label())
	}
	p := scatterParams{Segments: uint32(segments), Cols: uint32(cols), Scale: scale}
	return dispatch(c, gpu.Spec("scatter_add", "scatter_add_rows", "WG", wg), p, gpu.Grid(segments*cols, wg), src, plan, dst)
}
