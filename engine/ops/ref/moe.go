package ref

import (
	"fmt"

	"github.com/hearthstudio/hearth/gguf"
)

// MoEGroup sorts the slots by expert (ids[s] is slot s's expert; those at
// or past experts are left out) and cuts each expert's slots into tiles of
// at most tile: order is the sorted slots (stable: by slot within an
// expert) and each tile is its expert, the position in order of its first
// slot, and its count. ops.MoEGroup's groups buffer holds the same tiles;
// its slots within an expert may come in another order.
func MoEGroup(ids []uint32, experts, tile int) (order []uint32, tiles [][3]uint32) {
	for e := range experts {
		start := len(order)
		for s, id := range ids {
			if int(id) == e {
				order = append(order, uint32(s))
			}
		}
		for i := start; i < len(order); i += tile {
			tiles = append(tiles, [3]uint32{uint32(e), uint32(i), uint32(min(tile, len(order)-i))})
		}
	}
	return order, tiles
}

// MoEMatMul is the product of stacked experts over slots: w holds the
// experts' rows×cols matrices of type t one after another, and slot s's
// row of the result is W_ids[s] · x[s / xdiv] (x's rows cols floats), each
// row summed as MatVec sums it.
func MoEMatMul(t gguf.Type, rows, cols int, w []byte, ids []uint32, x []float32, xdiv int) ([]float32, error) {
	rb, ok := t.RowSize(int64(cols))
	if !ok {
		return nil, fmt.Errorf("ref: moe matmul: %d columns do not fit %v's blocks", cols, t)
	}
	mb := int(rb) * rows
	experts := len(w) / mb
	out := make([]float32, 0, len(ids)*rows)
	for s, e := range ids {
		if int(e) >= experts {
			return nil, fmt.Errorf("ref: moe matmul: slot %d's expert %d is not one of the %d", s, e, experts)
		}
		xr := x[(s/xdiv)*cols : (s/xdiv+1)*cols]
		y, err := MatVec(t, rows, cols, w[int(e)*mb:(int(e)+1)*mb], xr)
		if err != nil {
			return nil, err
		}
		out = append(out, y...)
	}
	return out, nil
}

// MoECombine is each token's output from its used slots' rows of y (dim
// floats each): scale · Σ_k weights[t·used + k] · y[t·used + k], in float64
// (scale 0 means 1).
func MoECombine(y, weights []float32, tokens, used, dim int, scale float32) []float32 {
	if scale == 0 {
		scale = 1
	}
	out := make([]float32, tokens*dim)
	for t := range tokens {
		for i := range dim {
			s := 0.0
			for k := range used {
				slot := t*used + k
				s += float64(weights[slot]) * float64(y[slot*dim+i])
			}
			out[t*dim+i] = float32(s * float64(scale))
		}
	}
	return out
}

// MoEAddBias adds to each slot's row of y (width floats, stride apart from
// offset) its expert's row of the stacked biases.
func MoEAddBias(y, bias []float32, ids []uint32, width, stride, offset int) {
	for s, e := range ids {
		for i := range width {
			y[s*stride+offset+i] += bias[int(e)*width+i]
		}
	}
}
