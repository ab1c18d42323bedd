package gguf

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"strings"
)

// The fewest bytes a key/value and a tensor info can occupy: a key is an
// 8-byte length, the type 4 bytes, the smallest value 1 byte; an info is an
// 8-byte name length, 4-byte n_dims, 4-byte type and 8-byte offset. The
// header's counts are checked against these before anything is allocated.
const (
	minKVSize         = 8 + 4 + 1
	minTensorInfoSize = 8 + 4 + 4 + 8
)

// readChunk is how much a decoder over an io.ReaderAt reads at a time: large
// enough that a 150k-token vocabulary takes a few dozen reads, small enough
// that a tiny file costs nothing.
const readChunk = 64 << 10

// decoder reads the header, metadata and tensor infos of one file. Every read
// is checked against the bytes left in the file first.
type decoder struct {
	name string
	r    io.ReaderAt
	size int64
	pos  int64

	// win holds the file's bytes from winPos: the whole mapping for a mapped
	// file, else the last chunk read into buf.
	win    []byte
	winPos int64
	buf    []byte

	// What is being read, for error messages: "header", or item itemIndex
	// ("key/value 3"), named itemName once its name is known.
	item      string
	itemIndex uint64
	itemName  string
}

func (d *decoder) at(item string, i uint64) {
	d.item, d.itemIndex, d.itemName = item, i, ""
}

// errorf is an error naming the file and the item being read.
func (d *decoder) errorf(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	switch {
	case d.item == "header":
		return fileErrorf(d.name, "header: %w", err)
	case d.itemName == "":
		return fileErrorf(d.name, "%s %d: %w", d.item, d.itemIndex, err)
	}
	return fileErrorf(d.name, "%s %d (%q): %w", d.item, d.itemIndex, d.itemName, err)
}

// take returns the next n bytes, valid until the next call.
func (d *decoder) take(n int64, what string) ([]byte, error) {
	left := d.size - d.pos
	if n > left {
		return nil, d.errorf("truncated file: %s needs %d bytes at offset %d, only %d left", what, n, d.pos, left)
	}
	if off := d.pos - d.winPos; off >= 0 && n <= int64(len(d.win))-off {
		d.pos += n
		return d.win[off : off+n], nil
	}
	m := min(max(n, readChunk), left)
	if int64(cap(d.buf)) < m {
		d.buf = make([]byte, m)
	}
	b := d.buf[:m]
	k, err := d.r.ReadAt(b, d.pos)
	if int64(k) < n {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, d.errorf("read %s at offset %d: %w", what, d.pos, err)
	}
	d.win, d.winPos = b[:k], d.pos
	d.pos += n
	return b[:n], nil
}

func (d *decoder) u32(what string) (uint32, error) {
	b, err := d.take(4, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (d *decoder) u64(what string) (uint64, error) {
	b, err := d.take(8, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// count reads a length or element count and checks that that many items of at
// least minSize bytes each fit in the rest of the file.
func (d *decoder) count(what string, minSize int64) (int64, error) {
	n, err := d.u64(what)
	if err != nil {
		return 0, err
	}
	left := d.size - d.pos
	if n > uint64(left/minSize) {
		return 0, d.errorf("%s %d is more than the %d bytes left in the file can hold", what, n, left)
	}
	if n > math.MaxInt {
		// Only a 32-bit platform reading a file over 2 GB can get here.
		return 0, d.errorf("%s %d is more than this platform can index", what, n)
	}
	return int64(n), nil
}

func (d *decoder) str(what string) (string, error) {
	n, err := d.count(what+" length", 1)
	if err != nil {
		return "", err
	}
	b, err := d.take(n, what)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// value reads one value of type t; depth counts the arrays around it.
func (d *decoder) value(t ValueType, depth int) (Value, error) {
	switch t {
	case ValueString:
		s, err := d.str("the string")
		if err != nil {
			return Value{}, err
		}
		return ValueOf(s), nil
	case ValueArray:
		return d.array(depth)
	}
	if !t.Known() {
		return Value{}, d.errorf("unknown value type %d", uint32(t))
	}
	b, err := d.take(t.size(), "the value")
	if err != nil {
		return Value{}, err
	}
	le := binary.LittleEndian
	switch t {
	case ValueUint8:
		return ValueOf(b[0]), nil
	case ValueInt8:
		return ValueOf(int8(b[0])), nil
	case ValueUint16:
		return ValueOf(le.Uint16(b)), nil
	case ValueInt16:
		return ValueOf(int16(le.Uint16(b))), nil
	case ValueUint32:
		return ValueOf(le.Uint32(b)), nil
	case ValueInt32:
		return ValueOf(int32(le.Uint32(b))), nil
	case ValueUint64:
		return ValueOf(le.Uint64(b)), nil
	case ValueInt64:
		return ValueOf(int64(le.Uint64(b))), nil
	case ValueFloat32:
		return ValueOf(math.Float32frombits(le.Uint32(b))), nil
	case ValueFloat64:
		return ValueOf(math.Float64frombits(le.Uint64(b))), nil
	default: // ValueBool
		if b[0] > 1 {
			return Value{}, d.errorf("BOOL byte is %d, neither 0 nor 1", b[0])
		}
		return ValueOf(b[0] == 1), nil
	}
}

func (d *decoder) array(depth int) (Value, error) {
	if depth >= maxArrayDepth {
		return Value{}, d.errorf("arrays nested more than %d deep", maxArrayDepth)
	}
	et, err := d.u32("the array element type")
	if err != nil {
		return Value{}, err
	}
	elem := ValueType(et)
	if !elem.Known() {
		return Value{}, d.errorf("array of unknown value type %d", et)
	}
	n, err := d.count("the array count", elem.minSize())
	if err != nil {
		return Value{}, err
	}
	arr := Value{typ: ValueArray, elem: elem}
	switch elem {
	case ValueString:
		arr.x, err = d.strings(n)
	case ValueArray:
		xs := make([]Value, n)
		for i := range xs {
			if xs[i], err = d.array(depth + 1); err != nil {
				break
			}
		}
		arr.x = xs
	default:
		var b []byte
		if b, err = d.take(n*elem.size(), "the array"); err == nil {
			arr.x, err = decodeArray(elem, b)
			if err != nil {
				err = d.errorf("%w", err)
			}
		}
	}
	if err != nil {
		return Value{}, err
	}
	return arr, nil
}

// strings reads n strings. A vocabulary is 100k–300k short strings, and one
// allocation each would be most of the cost of opening a model, so a first
// pass sums their lengths and the second copies them all into one buffer that
// they then share.
func (d *decoder) strings(n int64) ([]string, error) {
	start := d.pos
	var total int64
	for range n {
		l, err := d.count("the string length", 1)
		if err != nil {
			return nil, err
		}
		d.pos += l // count checked that l bytes are left
		total += l
	}
	d.pos = start
	if total > math.MaxInt {
		return nil, d.errorf("%d bytes of strings do not fit in memory", total)
	}
	var all strings.Builder
	// Grow guarantees that total bytes need no further allocation, so the
	// strings sliced from all.String() below are never moved.
	all.Grow(int(total))
	xs := make([]string, n)
	for i := range xs {
		l, err := d.count("the string length", 1)
		if err != nil {
			return nil, err
		}
		b, err := d.take(l, "the string")
		if err != nil {
			return nil, err
		}
		at := all.Len()
		all.Write(b)
		xs[i] = all.String()[at:]
	}
	return xs, nil
}

// decodeArray decodes the little-endian elements of a numeric or bool array.
func decodeArray(elem ValueType, b []byte) (any, error) {
	le := binary.LittleEndian
	switch elem {
	case ValueUint8:
		return slices.Clone(b), nil
	case ValueInt8:
		return decodeEach(b, 1, func(p []byte) int8 { return int8(p[0]) }), nil
	case ValueUint16:
		return decodeEach(b, 2, le.Uint16), nil
	case ValueInt16:
		return decodeEach(b, 2, func(p []byte) int16 { return int16(le.Uint16(p)) }), nil
	case ValueUint32:
		return decodeEach(b, 4, le.Uint32), nil
	case ValueInt32:
		return decodeEach(b, 4, func(p []byte) int32 { return int32(le.Uint32(p)) }), nil
	case ValueUint64:
		return decodeEach(b, 8, le.Uint64), nil
	case ValueInt64:
		return decodeEach(b, 8, func(p []byte) int64 { return int64(le.Uint64(p)) }), nil
	case ValueFloat32:
		return decodeEach(b, 4, func(p []byte) float32 { return math.Float32frombits(le.Uint32(p)) }), nil
	case ValueFloat64:
		return decodeEach(b, 8, func(p []byte) float64 { return math.Float64frombits(le.Uint64(p)) }), nil
	case ValueBool:
		xs := make([]bool, len(b))
		for i, c := range b {
			if c > 1 {
				return nil, fmt.Errorf("BOOL array element %d is %d, neither 0 nor 1", i, c)
			}
			xs[i] = c == 1
		}
		return xs, nil
	}
	return nil, fmt.Errorf("%s is not a numeric type", elem) // unreachable: array handles the rest
}

func decodeEach[T any](b []byte, size int, get func([]byte) T) []T {
	xs := make([]T, len(b)/size)
	for i := range xs {
		xs[i] = get(b[i*size : i*size+size])
	}
	return xs
}

// parse reads a whole file's structure: header, metadata, tensor infos, and
// checks every tensor's place in the data section. mapped is the file's
// bytes when it is memory-mapped.
func parse(name string, r io.ReaderAt, size int64, mapped []byte) (*File, error) {
	if size < 0 {
		return nil, fileErrorf(name, "negative file size %d", size)
	}
	d := &decoder{name: name, r: r, size: size, win: mapped, item: "header"}
	f := &File{name: name, size: size, ra: r, data: mapped}

	// Header: magic, version, tensor count, key/value count.
	if size < 4 {
		return nil, fileErrorf(name, "%w: the file is only %d bytes", ErrNotGGUF, size)
	}
	magic, err := d.take(4, "the magic")
	if err != nil {
		return nil, err
	}
	if string(magic) != "GGUF" {
		return nil, fileErrorf(name, "%w: it starts with %q, not \"GGUF\"", ErrNotGGUF, magic)
	}
	if f.version, err = d.u32("the version"); err != nil {
		return nil, err
	}
	switch v := f.version; {
	case v == 2 || v == 3:
		// v2 and v3 share one layout; v3 only allowed big-endian files.
	case v == 1:
		return nil, d.errorf("GGUF version 1 is not supported (it predates 64-bit counts); convert the model again with a current llama.cpp")
	case v&0xffff == 0 && v != 0:
		// A version of 0x03000000 is 3 written big-endian.
		return nil, d.errorf("the file is big-endian (its version field reads %d byte-swapped); only little-endian GGUF files are supported", bits.ReverseBytes32(v))
	default:
		return nil, d.errorf("GGUF version %d is not supported (only 2 and 3)", v)
	}
	nTensors, err := d.u64("the tensor count")
	if err != nil {
		return nil, err
	}
	nKV, err := d.u64("the key/value count")
	if err != nil {
		return nil, err
	}
	left := uint64(size - d.pos)
	if nKV > left/minKVSize || nTensors > left/minTensorInfoSize || nKV*minKVSize+nTensors*minTensorInfoSize > left {
		return nil, d.errorf("%d key/values and %d tensor infos cannot fit in the %d bytes left in the file", nKV, nTensors, left)
	}
	if nKV > math.MaxInt || nTensors > math.MaxInt/MaxDims {
		return nil, d.errorf("%d key/values and %d tensor infos are more than this platform can index", nKV, nTensors)
	}

	// Metadata.
	f.kvs = make([]KV, 0, nKV)
	f.keyIndex = make(map[string]int, nKV)
	for i := range nKV {
		d.at("key/value", i)
		key, err := d.str("the key")
		if err != nil {
			return nil, err
		}
		d.itemName = key
		if j, dup := f.keyIndex[key]; dup {
			return nil, d.errorf("duplicate key, first at key/value %d", j)
		}
		t, err := d.u32("the value type")
		if err != nil {
			return nil, err
		}
		v, err := d.value(ValueType(t), 0)
		if err != nil {
			return nil, err
		}
		f.keyIndex[key] = len(f.kvs)
		f.kvs = append(f.kvs, KV{Key: key, Value: v})
	}
	if f.alignment, err = alignmentOf(f); err != nil {
		return nil, err
	}

	// Tensor infos. All shapes share one backing array.
	f.tensors = make([]TensorInfo, 0, nTensors)
	f.tensorIndex = make(map[string]int, nTensors)
	shapes := make([]uint64, 0, nTensors*MaxDims)
	for i := range nTensors {
		d.at("tensor info", i)
		t, err := d.tensorInfo(&shapes)
		if err != nil {
			return nil, err
		}
		if j, dup := f.tensorIndex[t.Name]; dup {
			return nil, d.errorf("duplicate tensor name, first at tensor info %d", j)
		}
		f.tensorIndex[t.Name] = len(f.tensors)
		f.tensors = append(f.tensors, t)
	}

	// The data section starts at the next multiple of the alignment.
	f.dataOffset = alignUp(uint64(d.pos), f.alignment)
	if err := f.checkLayout(); err != nil {
		return nil, err
	}
	return f, nil
}

// alignmentOf is general.alignment, which must be a power of two (ggml rounds
// offsets with a mask), or DefaultAlignment.
func alignmentOf(f *File) (uint64, error) {
	const key = "general.alignment"
	v, ok := f.Value(key)
	if !ok {
		return DefaultAlignment, nil
	}
	a, err := asInteger[uint32](v)
	if err != nil {
		return 0, f.keyError(key, err)
	}
	if a == 0 || a&(a-1) != 0 {
		return 0, f.keyError(key, fmt.Errorf("%d is not a power of two", a))
	}
	return uint64(a), nil
}

// tensorInfo reads one tensor info and computes its size; shape is appended
// to *shapes.
func (d *decoder) tensorInfo(shapes *[]uint64) (TensorInfo, error) {
	var t TensorInfo
	name, err := d.str("the tensor name")
	if err != nil {
		return t, err
	}
	d.itemName = name
	if len(name) > MaxTensorName {
		return t, d.errorf("name is %d bytes, more than ggml's %d", len(name), MaxTensorName)
	}
	nDims, err := d.u32("the dimension count")
	if err != nil {
		return t, err
	}
	if nDims > MaxDims {
		return t, d.errorf("%d dimensions, more than ggml's %d", nDims, MaxDims)
	}
	start := len(*shapes)
	for j := range nDims {
		ne, err := d.u64("the shape")
		if err != nil {
			return t, err
		}
		if ne > math.MaxInt64 {
			// ggml's ne is int64_t.
			return t, d.errorf("dimension %d is %d, more than int64 holds", j, ne)
		}
		*shapes = append(*shapes, ne)
	}
	typ, err := d.u32("the type")
	if err != nil {
		return t, err
	}
	off, err := d.u64("the offset")
	if err != nil {
		return t, err
	}
	t = TensorInfo{Name: name, Type: Type(typ), Shape: (*shapes)[start:len(*shapes):len(*shapes)], Offset: off}
	if t.Size, err = tensorSize(t.Type, t.Shape); err != nil {
		return t, d.errorf("%w", err)
	}
	return t, nil
}

// tensorSize is the byte size of a tensor of type t and shape ne, checking
// what ggml checks: a known type, rows that are whole blocks, and an element
// count and size that fit in int64.
func tensorSize(t Type, shape []uint64) (uint64, error) {
	if !t.Known() {
		return 0, fmt.Errorf("unknown type id %d", uint32(t))
	}
	n := uint64(1)
	for _, ne := range shape {
		if ne > math.MaxInt64 {
			return 0, fmt.Errorf("shape %v: a dimension is more than int64 holds", shape)
		}
		if ne != 0 && n > math.MaxInt64/ne {
			return 0, fmt.Errorf("shape %v: element count overflows int64", shape)
		}
		n *= ne
	}
	ne0 := uint64(1)
	if len(shape) > 0 {
		ne0 = shape[0]
	}
	if ne0 == 0 || n == 0 {
		return 0, nil
	}
	bs, ts := uint64(t.BlockSize()), uint64(t.TypeSize())
	if ne0%bs != 0 {
		return 0, fmt.Errorf("%s rows of %d elements are not a multiple of its block size %d", t, ne0, bs)
	}
	// The element count fits in int64; the byte count, up to TypeSize/BlockSize
	// times larger, may not.
	blocks := n / bs
	if blocks > math.MaxInt64/ts {
		return 0, fmt.Errorf("shape %v: %s size overflows int64", shape, t)
	}
	return blocks * ts, nil
}

func alignUp(x, align uint64) uint64 {
	return (x + align - 1) &^ (align - 1)
}

// checkLayout checks that every tensor's data is aligned, inside the file, and
// overlaps no other tensor's. ggml's reader demands more, that the tensors are
// packed in file order with no gaps; a gap or another order is harmless, so
// Hearth reads such files.
func (f *File) checkLayout() error {
	size := uint64(f.size)
	for _, t := range f.tensors {
		if t.Offset%f.alignment != 0 {
			// ggml's words, so that a search for its message finds this one.
			return f.errorf("tensor %q has offset %d, expected %d: not a multiple of the alignment %d",
				t.Name, t.Offset, alignUp(t.Offset, f.alignment), f.alignment)
		}
		if f.dataOffset > size || t.Offset > size-f.dataOffset || t.Size > size-f.dataOffset-t.Offset {
			return f.errorf("tensor %q: data [%d, +%d) at absolute offset %d runs past the end of the file (%d bytes): truncated file",
				t.Name, t.Offset, t.Size, f.dataOffset+t.Offset, size)
		}
	}
	order := make([]int, 0, len(f.tensors))
	for i, t := range f.tensors {
		if t.Size > 0 {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(f.tensors[a].Offset, f.tensors[b].Offset) })
	for k := 1; k < len(order); k++ {
		a, b := f.tensors[order[k-1]], f.tensors[order[k]]
		if a.Offset+a.Size > b.Offset {
			return f.errorf("tensors %q [%d, %d) and %q [%d, %d) overlap",
				a.Name, a.Offset, a.Offset+a.Size, b.Name, b.Offset, b.Offset+b.Size)
		}
	}
	return nil
}
