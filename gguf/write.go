package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Writer builds a GGUF v3 file: metadata and tensor infos first, then each
// tensor's data in the order the tensors were added, streamed so that a model
// is never held in memory. The layout is ggml's: the data section starts at the
// end of the infos rounded up to the alignment, and every tensor, the last one
// included, is zero-padded to a multiple of it.
//
//	w := gguf.NewWriter(out)
//	w.SetString("general.architecture", "llama")
//	w.AddTensor("token_embd.weight", gguf.TypeQ4_K, []uint64{4096, 32000})
//	w.WriteTensor("token_embd.weight", data)
//	err := w.Close()
//
// Every method returns an error; after a write to the underlying writer fails,
// every later call returns that error.
type Writer struct {
	bw        *bufio.Writer
	n         int64 // bytes written so far
	alignment uint64

	kvs      []KV
	keyIndex map[string]int

	tensors     []TensorInfo // Offset is set when the header is written
	tensorIndex map[string]int

	headerWritten bool
	next          int // the tensor whose data comes next
	closed        bool
	err           error // the first write error
	zeros         []byte
}

// NewWriter starts a GGUF file on w. Close finishes it; it does not close w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{
		bw:          bufio.NewWriterSize(w, 1<<20),
		alignment:   DefaultAlignment,
		keyIndex:    map[string]int{},
		tensorIndex: map[string]int{},
	}
}

func writerErrorf(format string, args ...any) error {
	return fmt.Errorf("gguf: writer: %w", fmt.Errorf(format, args...))
}

// building checks that the header is still open for keys and tensors.
func (w *Writer) building(what string) error {
	if w.err != nil {
		return w.err
	}
	if w.headerWritten || w.closed {
		return writerErrorf("%s after tensor data was written: the header is already out", what)
	}
	return nil
}

// Set sets key to v. A new key goes after the existing ones; setting a key
// again replaces its value in place. Setting general.alignment (any integer
// type, a power of two) also changes the alignment the file is laid out with,
// so the key and the layout always agree.
func (w *Writer) Set(key string, v Value) error {
	if err := w.building(fmt.Sprintf("key %q set", key)); err != nil {
		return err
	}
	if err := v.check(0); err != nil {
		return writerErrorf("key %q: %w", key, err)
	}
	if key == "general.alignment" {
		a, err := asInteger[uint32](v)
		if err != nil {
			return writerErrorf("key %q: %w", key, err)
		}
		if a == 0 || a&(a-1) != 0 {
			return writerErrorf("key %q: %d is not a power of two", key, a)
		}
		w.alignment = uint64(a)
	}
	if i, ok := w.keyIndex[key]; ok {
		w.kvs[i].Value = v
		return nil
	}
	w.keyIndex[key] = len(w.kvs)
	w.kvs = append(w.kvs, KV{Key: key, Value: v})
	return nil
}

// SetAlignment sets the data alignment and the general.alignment key (UINT32)
// with it. Without a call the alignment is DefaultAlignment and the file has no
// general.alignment key, as ggml writes it.
func (w *Writer) SetAlignment(n uint32) error { return w.Set("general.alignment", ValueOf(n)) }

// SetUint8 sets key to a UINT8 value.
func (w *Writer) SetUint8(key string, v uint8) error { return w.Set(key, ValueOf(v)) }

// SetInt8 sets key to an INT8 value.
func (w *Writer) SetInt8(key string, v int8) error { return w.Set(key, ValueOf(v)) }

// SetUint16 sets key to a UINT16 value.
func (w *Writer) SetUint16(key string, v uint16) error { return w.Set(key, ValueOf(v)) }

// SetInt16 sets key to an INT16 value.
func (w *Writer) SetInt16(key string, v int16) error { return w.Set(key, ValueOf(v)) }

// SetUint32 sets key to a UINT32 value.
func (w *Writer) SetUint32(key string, v uint32) error { return w.Set(key, ValueOf(v)) }

// SetInt32 sets key to an INT32 value.
func (w *Writer) SetInt32(key string, v int32) error { return w.Set(key, ValueOf(v)) }

// SetUint64 sets key to a UINT64 value.
func (w *Writer) SetUint64(key string, v uint64) error { return w.Set(key, ValueOf(v)) }

// SetInt64 sets key to an INT64 value.
func (w *Writer) SetInt64(key string, v int64) error { return w.Set(key, ValueOf(v)) }

// SetFloat32 sets key to a FLOAT32 value.
func (w *Writer) SetFloat32(key string, v float32) error { return w.Set(key, ValueOf(v)) }

// SetFloat64 sets key to a FLOAT64 value.
func (w *Writer) SetFloat64(key string, v float64) error { return w.Set(key, ValueOf(v)) }

// SetBool sets key to a BOOL value.
func (w *Writer) SetBool(key string, v bool) error { return w.Set(key, ValueOf(v)) }

// SetString sets key to a STRING value.
func (w *Writer) SetString(key string, v string) error { return w.Set(key, ValueOf(v)) }

// SetStrings sets key to an array of STRING.
func (w *Writer) SetStrings(key string, v []string) error { return w.Set(key, ArrayOf(v)) }

// SetInt32s sets key to an array of INT32.
func (w *Writer) SetInt32s(key string, v []int32) error { return w.Set(key, ArrayOf(v)) }

// SetFloat32s sets key to an array of FLOAT32.
func (w *Writer) SetFloat32s(key string, v []float32) error { return w.Set(key, ArrayOf(v)) }

// AddTensor declares the next tensor: its name (at most MaxTensorName bytes,
// unique), type and shape (ggml's ne, innermost first, at most MaxDims
// entries, written as given). Its data follows later through WriteTensor.
func (w *Writer) AddTensor(name string, typ Type, shape []uint64) error {
	if err := w.building(fmt.Sprintf("tensor %q added", name)); err != nil {
		return err
	}
	if len(name) > MaxTensorName {
		return writerErrorf("tensor %q: name is %d bytes, more than ggml's %d", name, len(name), MaxTensorName)
	}
	if _, dup := w.tensorIndex[name]; dup {
		return writerErrorf("tensor %q added twice", name)
	}
	if len(shape) > MaxDims {
		return writerErrorf("tensor %q: %d dimensions, more than ggml's %d", name, len(shape), MaxDims)
	}
	size, err := tensorSize(typ, shape)
	if err != nil {
		return writerErrorf("tensor %q: %w", name, err)
	}
	w.tensorIndex[name] = len(w.tensors)
	w.tensors = append(w.tensors, TensorInfo{
		Name:  name,
		Type:  typ,
		Shape: append([]uint64{}, shape...),
		Size:  size,
	})
	return nil
}

// WriteHeader writes the header, metadata and tensor infos, after which no key
// or tensor can be added. WriteTensor and Close call it if needed.
func (w *Writer) WriteHeader() error {
	if err := w.building("header written"); err != nil {
		return err
	}
	w.headerWritten = true

	// Lay the tensors out back to back, each padded to the alignment.
	var off uint64
	for i := range w.tensors {
		t := &w.tensors[i]
		t.Offset = off
		if t.Size > math.MaxInt64-w.alignment || off > math.MaxInt64-w.alignment-t.Size {
			return w.fail(writerErrorf("tensor %q: the data section overflows int64", t.Name))
		}
		off = alignUp(off+t.Size, w.alignment)
	}

	w.write([]byte("GGUF"))
	w.u32(3)
	w.u64(uint64(len(w.tensors)))
	w.u64(uint64(len(w.kvs)))
	for _, kv := range w.kvs {
		w.str(kv.Key)
		w.u32(uint32(kv.Value.typ))
		w.value(kv.Value)
	}
	for _, t := range w.tensors {
		w.str(t.Name)
		w.u32(uint32(len(t.Shape)))
		for _, ne := range t.Shape {
			w.u64(ne)
		}
		w.u32(uint32(t.Type))
		w.u64(t.Offset)
	}
	w.pad()
	return w.err
}

// WriteTensor writes the data of the next tensor, which must be called name:
// exactly its size in bytes read from r, which may hold more.
func (w *Writer) WriteTensor(name string, r io.Reader) error {
	t, err := w.nextTensor(name)
	if err != nil {
		return err
	}
	k, err := io.CopyN(w.bw, r, int64(t.Size))
	w.n += k
	if err != nil {
		if k < int64(t.Size) && errors.Is(err, io.EOF) {
			return w.fail(writerErrorf("tensor %q: the reader gave %d bytes, want %d", name, k, t.Size))
		}
		return w.fail(writerErrorf("tensor %q: %w", name, err))
	}
	return w.finishTensor()
}

// WriteTensorBytes writes the data of the next tensor, which must be called
// name, from b, which must be exactly its size.
func (w *Writer) WriteTensorBytes(name string, b []byte) error {
	t, err := w.nextTensor(name)
	if err != nil {
		return err
	}
	if uint64(len(b)) != t.Size {
		return writerErrorf("tensor %q: %d bytes of data, want %d", name, len(b), t.Size)
	}
	w.write(b)
	return w.finishTensor()
}

func (w *Writer) nextTensor(name string) (TensorInfo, error) {
	if w.err != nil {
		return TensorInfo{}, w.err
	}
	if w.closed {
		return TensorInfo{}, writerErrorf("tensor %q written after Close", name)
	}
	if !w.headerWritten {
		if err := w.WriteHeader(); err != nil {
			return TensorInfo{}, err
		}
	}
	if _, ok := w.tensorIndex[name]; !ok {
		return TensorInfo{}, writerErrorf("tensor %q was never added", name)
	}
	if w.next >= len(w.tensors) {
		return TensorInfo{}, writerErrorf("tensor %q: all %d added tensors are already written", name, len(w.tensors))
	}
	t := w.tensors[w.next]
	if t.Name != name {
		return TensorInfo{}, writerErrorf("tensor %q written out of order: the next one is %q", name, t.Name)
	}
	return t, nil
}

func (w *Writer) finishTensor() error {
	w.pad()
	w.next++
	return w.err
}

// Close writes the header if no tensor did, checks that every tensor's data
// was written, and flushes. It does not close the underlying writer.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return nil
	}
	if !w.headerWritten {
		if err := w.WriteHeader(); err != nil {
			return err
		}
	}
	if w.next < len(w.tensors) {
		return writerErrorf("closed before the data of tensor %q (%d of %d written)", w.tensors[w.next].Name, w.next, len(w.tensors))
	}
	w.closed = true
	if err := w.bw.Flush(); err != nil {
		return w.fail(writerErrorf("%w", err))
	}
	return nil
}

// fail records the first write error; every later call returns it.
func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	return w.err
}

func (w *Writer) write(b []byte) {
	if w.err != nil {
		return
	}
	k, err := w.bw.Write(b)
	w.n += int64(k)
	if err != nil {
		w.fail(writerErrorf("%w", err))
	}
}

// pad writes zeros up to the next multiple of the alignment.
func (w *Writer) pad() {
	n := alignUp(uint64(w.n), w.alignment) - uint64(w.n)
	if n > 0 && w.zeros == nil {
		w.zeros = make([]byte, min(w.alignment, 4096))
	}
	for n > 0 {
		k := min(n, uint64(len(w.zeros)))
		w.write(w.zeros[:k])
		n -= k
	}
}

func (w *Writer) u32(x uint32) {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], x)
	w.write(b[:])
}

func (w *Writer) u64(x uint64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], x)
	w.write(b[:])
}

func (w *Writer) str(s string) {
	w.u64(uint64(len(s)))
	if w.err == nil {
		k, err := w.bw.WriteString(s)
		w.n += int64(k)
		if err != nil {
			w.fail(writerErrorf("%w", err))
		}
	}
}

// value writes v's payload; its type id is the caller's to write. An array is
// its element type, count and elements; an element that is itself an array
// is, in turn, its element type, count and elements.
func (w *Writer) value(v Value) {
	switch x := v.x.(type) {
	case uint8:
		w.write([]byte{x})
	case int8:
		w.write([]byte{byte(x)})
	case uint16:
		w.write(binary.LittleEndian.AppendUint16(nil, x))
	case int16:
		w.write(binary.LittleEndian.AppendUint16(nil, uint16(x)))
	case uint32:
		w.u32(x)
	case int32:
		w.u32(uint32(x))
	case uint64:
		w.u64(x)
	case int64:
		w.u64(uint64(x))
	case float32:
		w.u32(math.Float32bits(x))
	case float64:
		w.u64(math.Float64bits(x))
	case bool:
		w.write([]byte{boolByte(x)})
	case string:
		w.str(x)
	default:
		w.u32(uint32(v.elem))
		w.u64(uint64(v.Len()))
		w.array(v)
	}
}

func (w *Writer) array(v Value) {
	le := binary.LittleEndian
	switch xs := v.x.(type) {
	case []uint8:
		w.write(xs)
	case []int8:
		writeEach(w, xs, 1, func(b []byte, x int8) []byte { return append(b, byte(x)) })
	case []uint16:
		writeEach(w, xs, 2, le.AppendUint16)
	case []int16:
		writeEach(w, xs, 2, func(b []byte, x int16) []byte { return le.AppendUint16(b, uint16(x)) })
	case []uint32:
		writeEach(w, xs, 4, le.AppendUint32)
	case []int32:
		writeEach(w, xs, 4, func(b []byte, x int32) []byte { return le.AppendUint32(b, uint32(x)) })
	case []uint64:
		writeEach(w, xs, 8, le.AppendUint64)
	case []int64:
		writeEach(w, xs, 8, func(b []byte, x int64) []byte { return le.AppendUint64(b, uint64(x)) })
	case []float32:
		writeEach(w, xs, 4, func(b []byte, x float32) []byte { return le.AppendUint32(b, math.Float32bits(x)) })
	case []float64:
		writeEach(w, xs, 8, func(b []byte, x float64) []byte { return le.AppendUint64(b, math.Float64bits(x)) })
	case []bool:
		writeEach(w, xs, 1, func(b []byte, x bool) []byte { return append(b, boolByte(x)) })
	case []string:
		for _, s := range xs {
			w.str(s)
		}
	case []Value:
		for _, e := range xs {
			w.value(e)
		}
	}
}

// writeEach encodes xs in chunks of a few KiB, so a large array needs neither
// one write per element nor a copy of itself.
func writeEach[T any](w *Writer, xs []T, size int, put func([]byte, T) []byte) {
	const chunk = 4096
	buf := make([]byte, 0, min(len(xs)*size, chunk))
	for _, x := range xs {
		buf = put(buf, x)
		if len(buf)+size > chunk {
			w.write(buf)
			buf = buf[:0]
		}
	}
	w.write(buf)
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}
