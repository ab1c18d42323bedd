package ref

import (
	"fmt"

	"github.com/hearthstudio/hearth/gguf"
)

// Embed returns the rows ids of a rows×cols table of type t (GGUF bytes),
// dequantized and multiplied by scale, one row of cols values per id. An id
// past the table is clamped to its last row, as the GPU kernel does so a bad
// token can never read out of bounds.
func Embed(t gguf.Type, rows, cols int, table []byte, ids []uint32, scale float32) ([]float32, error) {
	rowBytes, ok := t.RowSize(int64(cols))
	if !ok || rows <= 0 {
		return nil, fmt.Errorf("ref: embed: %v table of %dx%d is not a valid shape", t, rows, cols)
	}
	if int64(len(table)) != rowBytes*int64(rows) {
		return nil, fmt.Errorf("ref: embed: %v table is %d bytes, want %d for %dx%d", t, len(table), rowBytes*int64(rows), rows, cols)
	}
	out := make([]float32, len(ids)*cols)
	for i, id := range ids {
		r := int64(rows - 1)
		if int64(id) < r {
			r = int64(id)
		}
		dst := out[i*cols : (i+1)*cols]
		if err := gguf.Dequantize(t, table[r*rowBytes:(r+1)*rowBytes], dst); err != nil {
			return nil, fmt.Errorf("ref: embed: row %d: %w", r, err)
		}
		for j := range dst {
			dst[j] *= scale
		}
	}
	return out, nil
}
