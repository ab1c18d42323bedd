package gpu

import (
	"fmt"

	"github.com/hearthstudio/hearth/gguf"
)

// Tensor is a matrix on the device in a GGUF storage type: Rows rows of Cols
// elements, each row stored as ggml stores it (quantized blocks stay blocks).
// A tensor bigger than the device's maxStorageBufferBindingSize (128 MiB on
// lavapipe, 2 GiB or more on discrete GPUs) is split into chunks of whole rows,
// each its own buffer; kernels that read weights walk the chunks.
type Tensor struct {
	Name string
	Type gguf.Type
	Rows int
	Cols int
	// Stack, when > 0, says the tensor is that many matrices of
	// Rows/Stack rows each, one after another (a 3-D GGUF tensor: a
	// mixture of experts' stacked experts); every chunk then holds whole
	// matrices, so a kernel finds a matrix in one buffer.
	Stack  int
	Chunks []Chunk
}

// Chunk is a run of whole rows of a tensor in one buffer.
type Chunk struct {
	Buf      *Buffer
	FirstRow int
	Rows     int
}

// RowBytes is the stored size of one row.
func (t *Tensor) RowBytes() int {
	n, _ := t.Type.RowSize(int64(t.Cols))
	return int(n)
}

// Bytes is the stored size of the whole tensor.
func (t *Tensor) Bytes() int64 { return int64(t.RowBytes()) * int64(t.Rows) }

// NewTensor uploads data, the raw GGUF bytes of a rows×cols tensor of type
// typ, without converting it. maxChunk, when nonzero, lowers the chunk size
// below the device limit (tests use it to exercise chunking on small shapes).
func (d *Device) NewTensor(name string, typ gguf.Type, rows, cols int, data []byte, maxChunk uint64) (*Tensor, error) {
	return d.NewStack(name, typ, 0, rows, cols, data, maxChunk)
}

// NewStack is NewTensor of stack matrices of rows/stack rows each (stack 0:
// a plain matrix), chunked at matrix boundaries.
func (d *Device) NewStack(name string, typ gguf.Type, stack, rows, cols int, data []byte, maxChunk uint64) (*Tensor, error) {
	if stack < 0 || (stack > 0 && rows%stack != 0) {
		return nil, fmt.Errorf("gpu: tensor %q: %d rows are not %d whole matrices", name, rows, stack)
	}
	if !typ.Known() {
		return nil, fmt.Errorf("gpu: tensor %q: unknown type %v", name, typ)
	}
	if rows <= 0 || cols <= 0 {
		return nil, fmt.Errorf("gpu: tensor %q: shape %dx%d must be positive", name, rows, cols)
	}
	rowBytes, ok := typ.RowSize(int64(cols))
	if !ok {
		return nil, fmt.Errorf("gpu: tensor %q: %d columns is not a multiple of %v's block size %d", name, cols, typ, typ.BlockSize())
	}
	if want := rowBytes * int64(rows); int64(len(data)) != want {
		return nil, fmt.Errorf("gpu: tensor %q: %d bytes of data, want %d for %dx%d %v", name, len(data), want, rows, cols, typ)
	}
	limit := d.Limits.MaxStorageBufferBindingSize
	if maxChunk != 0 && maxChunk < limit {
		limit = maxChunk
	}
	rowsPer := int(limit / uint64(rowBytes))
	if rowsPer < 1 {
		return nil, fmt.Errorf("gpu: tensor %q: one row is %d bytes, over the %d-byte binding limit", name, rowBytes, limit)
	}
	if stack > 0 {
		per := rows / stack
		if rowsPer < per {
			return nil, fmt.Errorf("gpu: tensor %q: one of its %d matrices is %d bytes, over the %d-byte binding limit", name, stack, int64(per)*rowBytes, limit)
		}
		rowsPer -= rowsPer % per
	}
	t := &Tensor{Name: name, Type: typ, Rows: rows, Cols: cols, Stack: stack}
	for r := 0; r < rows; r += rowsPer {
		n := min(rowsPer, rows-r)
		lo, hi := int64(r)*rowBytes, int64(r+n)*rowBytes
		b, err := d.NewBufferFrom(fmt.Sprintf("%s[%d:%d]", name, r, r+n), data[lo:hi])
		if err != nil {
			t.Release()
			return nil, fmt.Errorf("gpu: tensor %q: %w", name, err)
		}
		t.Chunks = append(t.Chunks, Chunk{Buf: b, FirstRow: r, Rows: n})
	}
	return t, nil
}

// Release frees the tensor's buffers.
func (t *Tensor) Release() {
	for _, c := range t.Chunks {
		c.Buf.Release()
	}
	t.Chunks = nil
}
