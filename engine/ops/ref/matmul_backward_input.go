package ref

import (
	"fmt"

	"github.com/hearthstudio/hearth/gguf"
)

// MatMulBackwardInput returns dX[m×cols] = dY[m×rows]·W for a rows×cols
// weight W of type t (w its GGUF bytes): the gradient with respect to x of
// y = W·x (MatMul), for a frozen W. Each row of W is dequantized once with
// gguf.Dequantize and the products are summed in float64, so the only
// rounding is the final conversion.
func MatMulBackwardInput(t gguf.Type, rows, cols int, w []byte, dy []float32, m int) ([]float32, error) {
	rowBytes, ok := t.RowSize(int64(cols))
	if !ok || rows < 0 || m < 0 {
		return nil, fmt.Errorf("ref: matmul backward: %v weight of %dx%d (m=%d) is not a valid shape", t, rows, cols, m)
	}
	if int64(len(w)) != rowBytes*int64(rows) {
		return nil, fmt.Errorf("ref: matmul backward: %v weight is %d bytes, want %d for %dx%d", t, len(w), rowBytes*int64(rows), rows, cols)
	}
	if len(dy) != m*rows {
		return nil, fmt.Errorf("ref: matmul backward: dy has %d values, want m*rows = %d", len(dy), m*rows)
	}
	acc := make([]float64, m*cols)
	row := make([]float32, cols)
	for r := range rows {
		if err := gguf.Dequantize(t, w[int64(r)*rowBytes:int64(r+1)*rowBytes], row); err != nil {
			return nil, fmt.Errorf("ref: matmul backward: row %d: %w", r, err)
		}
		for j := range m {
			g := float64(dy[j*rows+r])
			if g == 0 {
				continue
			}
			out := acc[j*cols : (j+1)*cols]
			for i, v := range row {
				out[i] += g * float64(v)
			}
		}
	}
	dx := make([]float32, m*cols)
	for i, v := range acc {
		dx[i] = float32(v)
	}
	return dx, nil
}
