// Package gguf reads and writes GGUF, the file format of ggml and llama.cpp
// models, and converts its tensor types to and from float32 on the CPU.
//
// A GGUF file is a header (magic "GGUF", version, counts), typed metadata
// key/values, one info per tensor (name, shape, type, offset), and a data
// section that starts at the end of the infos rounded up to the alignment
// (general.alignment, 32 by default). Open memory-maps a file so that tensor
// data is handed out without a copy; Read parses any io.ReaderAt. Both check
// every length and offset against the file size before using it, so a corrupt
// or hostile file is an error, never a panic or an allocation larger than the
// file. NewWriter builds a file in the same layout ggml writes, streaming the
// tensor data.
package gguf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
)

// DefaultAlignment is the data alignment of a file without general.alignment.
const DefaultAlignment = 32

// MaxTensorName is the longest tensor name ggml accepts, in bytes: its
// GGML_MAX_NAME is 64 including the terminating NUL.
const MaxTensorName = 63

// MaxDims is the most dimensions a tensor has (GGML_MAX_DIMS).
const MaxDims = 4

// ErrNotGGUF is wrapped by the error for a file that does not start with the
// GGUF magic, so that a scan of a folder can tell other files from corrupt ones.
var ErrNotGGUF = errors.New("not a GGUF file")

// TensorInfo describes one tensor of a file.
type TensorInfo struct {
	Name string
	Type Type
	// Shape is ggml's ne, innermost (contiguous) dimension first, with as many
	// entries as the file stores (ggml drops trailing dimensions of size 1).
	Shape []uint64
	// Offset is where the data starts, relative to the data section.
	Offset uint64
	// Size is the data's length in bytes.
	Size uint64
}

// Elements is the number of elements: the product of the shape.
func (t TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// File is a parsed GGUF file. Its methods may be called concurrently, except
// Close.
type File struct {
	name       string
	version    uint32
	size       int64
	alignment  uint64
	dataOffset uint64

	kvs      []KV
	keyIndex map[string]int

	tensors     []TensorInfo
	tensorIndex map[string]int

	data   []byte      // the whole file when memory-mapped, else nil
	ra     io.ReaderAt // the file's bytes
	close  func() error
	closed bool
}

// Open opens and parses the GGUF file at path. Where the OS allows it the file
// is memory-mapped and TensorData returns slices of the mapping; elsewhere it
// is read through an *os.File. Close releases it.
func Open(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	st, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, fmt.Errorf("gguf: %w", err)
	}
	size := st.Size()
	if data, err := mapFile(fh, size); err == nil {
		// The mapping outlives the descriptor.
		fh.Close()
		f, err := parse(path, bytes.NewReader(data), size, data)
		if err != nil {
			unmapFile(data)
			return nil, err
		}
		f.close = func() error { return unmapFile(data) }
		return f, nil
	}
	// Not mappable (an OS without mmap, a FUSE file system, a pipe): read it.
	f, err := parse(path, fh, size, nil)
	if err != nil {
		fh.Close()
		return nil, err
	}
	f.close = fh.Close
	return f, nil
}

// Read parses a GGUF file of size bytes from r. Tensor data is read from r on
// demand, so r must stay readable while the File is used. If r has a Name
// method (an *os.File does), errors name the file.
func Read(r io.ReaderAt, size int64) (*File, error) {
	name := ""
	if n, ok := r.(interface{ Name() string }); ok {
		name = n.Name()
	}
	return parse(name, r, size, nil)
}

// Close releases the mapping or file Open used. Slices TensorData returned
// from a mapped file must not be used after Close. Close of a File from Read
// does nothing.
func (f *File) Close() error {
	if f.closed {
		return nil
	}
	f.closed = true
	if f.close == nil {
		return nil
	}
	if err := f.close(); err != nil {
		return f.errorf("close: %w", err)
	}
	return nil
}

// Name is the file's path as given to Open, or the name of Read's reader.
func (f *File) Name() string { return f.name }

// Version is the GGUF version, 2 or 3.
func (f *File) Version() uint32 { return f.version }

// Size is the file's length in bytes.
func (f *File) Size() int64 { return f.size }

// Alignment is the data alignment: general.alignment, or DefaultAlignment.
func (f *File) Alignment() uint64 { return f.alignment }

// DataOffset is the absolute offset of the data section.
func (f *File) DataOffset() uint64 { return f.dataOffset }

// Mapped reports whether the file is memory-mapped, so that TensorData does
// not copy.
func (f *File) Mapped() bool { return f.data != nil }

// Tensors are the tensor infos in file order. The Shape slices are shared with
// f: do not modify them.
func (f *File) Tensors() []TensorInfo { return slices.Clone(f.tensors) }

// Tensor is the info of the tensor called name, and whether there is one.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	i, ok := f.tensorIndex[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.tensors[i], true
}

// ParameterCount is the total number of elements of all tensors.
func (f *File) ParameterCount() uint64 {
	var n uint64
	for _, t := range f.tensors {
		n += t.Elements()
	}
	return n
}

// TensorData is the data of the tensor called name. For a memory-mapped file
// it is a read-only slice of the mapping (writing to it faults), valid until
// Close; otherwise it is read into a new slice.
func (f *File) TensorData(name string) ([]byte, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return nil, f.errorf("no tensor %q", name)
	}
	return f.Data(t)
}

// Data is TensorData for an info from f.Tensors.
func (f *File) Data(t TensorInfo) ([]byte, error) {
	start, end, err := f.span(t)
	if err != nil {
		return nil, err
	}
	if f.data != nil {
		return f.data[start:end:end], nil
	}
	if end-start > math.MaxInt {
		return nil, f.errorf("tensor %q: %d bytes do not fit in memory", t.Name, end-start)
	}
	buf := make([]byte, end-start)
	// A ReaderAt may report io.EOF along with a full read at the end of the
	// file; only a short read is an error.
	if k, err := f.ra.ReadAt(buf, int64(start)); k < len(buf) {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, f.errorf("tensor %q: read %d bytes at offset %d: %w", t.Name, len(buf), start, err)
	}
	return buf, nil
}

// TensorReader reads the data of t, an info from f.Tensors, without holding
// it in memory.
func (f *File) TensorReader(t TensorInfo) (*io.SectionReader, error) {
	start, end, err := f.span(t)
	if err != nil {
		return nil, err
	}
	return io.NewSectionReader(f.ra, int64(start), int64(end-start)), nil
}

// span is the absolute byte range of t's data, checked against the file.
func (f *File) span(t TensorInfo) (start, end uint64, err error) {
	if f.closed {
		return 0, 0, f.errorf("tensor %q: file is closed", t.Name)
	}
	size := uint64(f.size)
	if f.dataOffset > size || t.Offset > size-f.dataOffset || t.Size > size-f.dataOffset-t.Offset {
		return 0, 0, f.errorf("tensor %q: data [%d, +%d) is past the end of the file", t.Name, t.Offset, t.Size)
	}
	start = f.dataOffset + t.Offset
	return start, start + t.Size, nil
}

// WriteTo writes f as a new GGUF file to w: the same metadata in the same
// order, the same tensors in the same order, laid out as NewWriter lays out
// any file. A file ggml wrote comes out byte for byte the same.
func (f *File) WriteTo(w io.Writer) (int64, error) {
	gw := NewWriter(w)
	for _, kv := range f.kvs {
		if err := gw.Set(kv.Key, kv.Value); err != nil {
			return gw.n, err
		}
	}
	for _, t := range f.tensors {
		if err := gw.AddTensor(t.Name, t.Type, t.Shape); err != nil {
			return gw.n, err
		}
	}
	for _, t := range f.tensors {
		var err error
		if f.data != nil {
			var b []byte
			if b, err = f.Data(t); err == nil {
				err = gw.WriteTensorBytes(t.Name, b)
			}
		} else {
			var r *io.SectionReader
			if r, err = f.TensorReader(t); err == nil {
				err = gw.WriteTensor(t.Name, r)
			}
		}
		if err != nil {
			return gw.n, err
		}
	}
	err := gw.Close()
	return gw.n, err
}

// errorf is an error that names the file: "gguf: model.gguf: ...".
func (f *File) errorf(format string, args ...any) error {
	return fileErrorf(f.name, format, args...)
}

func fileErrorf(name, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	if name == "" {
		return fmt.Errorf("gguf: %w", err)
	}
	return fmt.Errorf("gguf: %s: %w", name, err)
}
