package ref

import (
	"fmt"

	"github.com/hearthstudio/hearth/gguf"
)

// MatVec returns y = W·x for a rows×cols weight W of type t, w being its GGUF
// bytes (row-major, each row a run of blocks).
func MatVec(t gguf.Type, rows, cols int, w []byte, x []float32) ([]float32, error) {
	return MatMul(t, rows, cols, w, x, 1)
}

// MatMul returns Y[m×rows] = X[m×cols]·Wᵀ with X and Y row-major. Each row
// of W is dequantized once with gguf.Dequantize (bit-exact to ggml) and the
// products are summed in float64, so the only rounding is the final
// conversion: the oracle is as exact as the dequantized weights.
func MatMul(t gguf.Type, rows, cols int, w []byte, x []float32, m int) ([]float32, error) {
	rowBytes, ok := t.RowSize(int64(cols))
	if !ok || rows < 0 || m < 0 {
		return nil, fmt.Errorf("ref: matmul: %v weight of %dx%d (m=%d) is not a valid shape", t, rows, cols, m)
	}
	if int64(len(w)) != rowBytes*int64(rows) {
		return nil, fmt.Errorf("ref: matmul: %v weight is %d bytes, want %d for %dx%d", t, len(w), rowBytes*int64(rows), rows, cols)
	}
	if len(x) != m*cols {
		return nil, fmt.Errorf("ref: matmul: x has %d values, want m*cols = %d", len(x), m*cols)
	}
	y := make([]float32, m*rows)
	row := make([]float32, cols)
	for r := range rows {
		if err := gguf.Dequantize(t, w[int64(r)*rowBytes:int64(r+1)*rowBytes], row); err != nil {
			return nil, fmt.Errorf("ref: matmul: row %d: %w", r, err)
		}
		for j := range m {
			xj := x[j*cols : (j+1)*cols]
			var s float64
			for i, v := range row {
				s += float64(v) * float64(xj[i])
			}
			y[j*rows+r] = float32(s)
		}
	}
	return y, nil
}
