package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/hearthstudio/hearth/internal/atomicfile"
)

// Data is a tensor to write: its name, element type, shape (outermost
// first) and its elements' little-endian bytes, row-major.
type Data struct {
	Name  string
	DType DType
	Shape []int64
	Bytes []byte
}

// F32Data is the Data of the float32 values v with shape.
func F32Data(name string, shape []int64, v []float32) Data {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return Data{Name: name, DType: F32, Shape: shape, Bytes: b}
}

// WriteFile writes tensors and metadata as a safetensors file at path,
// atomically: a crash or an error leaves the old file or none.
func WriteFile(path string, tensors []Data, metadata map[string]string) error {
	if err := atomicfile.WriteFrom(path, 0o644, func(w io.Writer) error {
		return Write(w, tensors, metadata)
	}); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	return nil
}

// Write writes tensors as a safetensors file: the header with metadata as
// "__metadata__" (left out when empty; safetensors.torch.save_file writes
// {"format": "pt"}), padded with spaces to a multiple of 8 so that the
// data that follows is aligned, then the data in name order. Every tensor
// is checked first (a known dtype, as many bytes as its shape takes, a
// name no other tensor has), so a bad one writes nothing.
func Write(w io.Writer, tensors []Data, metadata map[string]string) error {
	type entry struct {
		DType       DType    `json:"dtype"`
		Shape       []int64  `json:"shape"`
		DataOffsets [2]int64 `json:"data_offsets"`
	}
	ts := slices.Clone(tensors)
	slices.SortFunc(ts, func(a, b Data) int { return strings.Compare(a.Name, b.Name) })
	header := map[string]any{}
	if len(metadata) > 0 {
		header[metadataKey] = metadata
	}
	var off int64
	for i, t := range ts {
		if t.Name == "" || t.Name == metadataKey {
			return fmt.Errorf("safetensors: %q is not a tensor name", t.Name)
		}
		if i > 0 && ts[i-1].Name == t.Name {
			return fmt.Errorf("safetensors: tensor %q appears twice", t.Name)
		}
		size, ok := t.DType.Size()
		if !ok {
			return fmt.Errorf("safetensors: tensor %q: unknown dtype %q", t.Name, t.DType)
		}
		n := int64(1)
		for _, d := range t.Shape {
			if d < 0 || d != 0 && n > math.MaxInt64/size/d {
				return fmt.Errorf("safetensors: tensor %q: shape %v is not a size", t.Name, t.Shape)
			}
			n *= d
		}
		if int64(len(t.Bytes)) != n*size {
			return fmt.Errorf("safetensors: tensor %q: %d bytes for %s %v, want %d", t.Name, len(t.Bytes), t.DType, t.Shape, n*size)
		}
		shape := t.Shape
		if shape == nil {
			shape = []int64{} // a scalar: JSON [] rather than null
		}
		header[t.Name] = entry{t.DType, shape, [2]int64{off, off + n*size}}
		off += n * size
	}
	// encoding/json sorts map keys, so the header is deterministic.
	h, err := json.Marshal(header)
	if err != nil {
		return fmt.Errorf("safetensors: header: %w", err)
	}
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	if err := binary.Write(w, binary.LittleEndian, uint64(len(h))); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	if _, err := w.Write(h); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	for _, t := range ts {
		if _, err := w.Write(t.Bytes); err != nil {
			return fmt.Errorf("safetensors: tensor %q: %w", t.Name, err)
		}
	}
	return nil
}
