package adapter

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"slices"
)

// stTensor is one f32 tensor for writeSafetensors: its name, shape
// (outermost first, as PyTorch has it) and row-major values.
type stTensor struct {
	name  string
	shape []int64
	data  []float32
}

// writeSafetensors writes tensors as a safetensors file: an 8-byte
// little-endian header length, the JSON header {name: {dtype, shape,
// data_offsets}} with "__metadata__" ({"format": "pt"}, as
// safetensors.torch.save_file writes it), padded with spaces to a multiple
// of 8 so the data that follows is aligned, then the data in header order.
func writeSafetensors(w io.Writer, tensors []stTensor) error {
	type entry struct {
		DType       string   `json:"dtype"`
		Shape       []int64  `json:"shape"`
		DataOffsets [2]int64 `json:"data_offsets"`
	}
	ts := slices.Clone(tensors)
	slices.SortFunc(ts, func(a, b stTensor) int {
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	header := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var off int64
	for _, t := range ts {
		n := int64(1)
		for _, d := range t.shape {
			n *= d
		}
		if n != int64(len(t.data)) {
			return fmt.Errorf("adapter: safetensors: tensor %q has %d values for shape %v", t.name, len(t.data), t.shape)
		}
		header[t.name] = entry{"F32", t.shape, [2]int64{off, off + 4*n}}
		off += 4 * n
	}
	// encoding/json sorts map keys, so the header is deterministic.
	h, err := json.Marshal(header)
	if err != nil {
		return fmt.Errorf("adapter: safetensors: %w", err)
	}
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	if err := binary.Write(w, binary.LittleEndian, uint64(len(h))); err != nil {
		return err
	}
	if _, err := w.Write(h); err != nil {
		return err
	}
	for _, t := range ts {
		if _, err := w.Write(f32Bytes(t.data)); err != nil {
			return err
		}
	}
	return nil
}
