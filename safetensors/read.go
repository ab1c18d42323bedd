package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"

	"github.com/hearthstudio/hearth/gguf"
)

// maxHeaderSize bounds a header: the format's own limit is 100 MB, and a
// larger length is a corrupt or hostile file, not a model.
const maxHeaderSize = 100 << 20

// metadataKey is the header entry that holds the file's metadata, not a
// tensor.
const metadataKey = "__metadata__"

// DType is an element type ("F32", "F16", "BF16", …).
type DType string

// The element types that can be converted to float32.
const (
	F32  DType = "F32"
	F16  DType = "F16"
	BF16 DType = "BF16"
)

// dtypeSizes are the bytes per element of every dtype the format defines.
var dtypeSizes = map[DType]int64{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1,
	"I16": 2, "U16": 2, F16: 2, BF16: 2,
	"I32": 4, "U32": 4, F32: 4,
	"I64": 8, "U64": 8, "F64": 8,
}

// Size is the bytes per element of d, and false for a dtype the format
// does not define.
func (d DType) Size() (int64, bool) {
	n, ok := dtypeSizes[d]
	return n, ok
}

// Float reports whether Tensor.Float32 can convert elements of d: F32, F16
// and BF16.
func (d DType) Float() bool { return d == F32 || d == F16 || d == BF16 }

// gguf converts the float dtypes; the layouts are the same IEEE and bfloat16
// little-endian encodings.
var ggufTypes = map[DType]gguf.Type{F32: gguf.TypeF32, F16: gguf.TypeF16, BF16: gguf.TypeBF16}

// A Tensor is one tensor of a file: its name, element type, shape
// (outermost first, as PyTorch writes it) and where its bytes lie.
type Tensor struct {
	Name  string
	DType DType
	Shape []int64

	file   *File
	offset int64 // from the start of the file
	size   int64
}

// Elements is the number of elements of t.
func (t *Tensor) Elements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Size is the number of bytes of t's data.
func (t *Tensor) Size() int64 { return t.size }

// File is the path of the file t is in.
func (t *Tensor) File() string { return t.file.path }

// ReadAt reads len(p) bytes of t's data starting at byte off of it; it
// never reads past t's data into the next tensor's.
func (t *Tensor) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off > t.size {
		return 0, fmt.Errorf("safetensors: %s: tensor %q: read at %d outside its %d bytes", t.file.path, t.Name, off, t.size)
	}
	want := len(p)
	if int64(want) > t.size-off {
		p = p[:t.size-off]
	}
	n, err := t.file.f.ReadAt(p, t.offset+off)
	if err == nil && n < want {
		err = io.EOF
	}
	if err != nil && !errors.Is(err, io.EOF) {
		err = fmt.Errorf("safetensors: %s: tensor %q: %w", t.file.path, t.Name, err)
	}
	return n, err
}

// Float32 reads an F32, F16 or BF16 tensor as float32 values, row-major.
func (t *Tensor) Float32() ([]float32, error) {
	typ, ok := ggufTypes[t.DType]
	if !ok {
		return nil, fmt.Errorf("safetensors: %s: tensor %q: dtype %s cannot be read as float32 (F32, F16 and BF16 can)", t.File(), t.Name, t.DType)
	}
	raw := make([]byte, t.size)
	if _, err := t.ReadAt(raw, 0); err != nil {
		return nil, fmt.Errorf("safetensors: %s: tensor %q: %w", t.File(), t.Name, err)
	}
	v := make([]float32, t.Elements())
	if err := gguf.Dequantize(typ, raw, v); err != nil {
		return nil, fmt.Errorf("safetensors: %s: tensor %q: %w", t.File(), t.Name, err)
	}
	return v, nil
}

// File is an open safetensors file: the tensor table of its header, with
// the data read on demand.
type File struct {
	path     string
	f        *os.File
	Tensors  []*Tensor // in order of their data
	Metadata map[string]string
}

// Open reads the header of the safetensors file at path and checks it
// against the file: every tensor's dtype known, its bytes matching its
// dtype and shape, inside the file and apart from every other tensor's,
// and no name twice.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	st, err := read(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	return st, nil
}

// Path is the path the file was opened at.
func (s *File) Path() string { return s.path }

// Close closes the file.
func (s *File) Close() error { return s.f.Close() }

func read(f *os.File, path string) (*File, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("safetensors: %s: %s", path, fmt.Sprintf(format, args...))
	}
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	size := info.Size()
	var lenBuf [8]byte
	if _, err := f.ReadAt(lenBuf[:], 0); err != nil {
		return nil, fail("truncated: %d bytes, too short for the 8-byte header length", size)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > maxHeaderSize {
		return nil, fail("header length %d is over the format's limit of %d bytes", n, maxHeaderSize)
	}
	if int64(n) > size-8 {
		return nil, fail("truncated: the header is %d bytes but the file has %d after the length", n, size-8)
	}
	hdr := make([]byte, n)
	if _, err := f.ReadAt(hdr, 8); err != nil {
		return nil, fail("reading the header: %v", err)
	}
	entries, err := headerEntries(hdr)
	if err != nil {
		return nil, fail("header: %v", err)
	}
	dataStart := 8 + int64(n)
	dataSize := size - dataStart
	st := &File{path: path, f: f}
	for _, kv := range entries {
		name, msg := kv.name, kv.value
		if name == metadataKey {
			if err := json.Unmarshal(msg, &st.Metadata); err != nil {
				return nil, fail("%s: %v", metadataKey, err)
			}
			continue
		}
		var e struct {
			DType       *DType   `json:"dtype"`
			Shape       *[]int64 `json:"shape"`
			DataOffsets *[]int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(msg, &e); err != nil {
			return nil, fail("tensor %q: %v", name, err)
		}
		if e.DType == nil || e.Shape == nil || e.DataOffsets == nil {
			return nil, fail("tensor %q: dtype, shape and data_offsets are all required", name)
		}
		elemSize, ok := e.DType.Size()
		if !ok {
			return nil, fail("tensor %q: unknown dtype %q", name, *e.DType)
		}
		offs := *e.DataOffsets
		if len(offs) != 2 {
			return nil, fail("tensor %q: data_offsets has %d entries, want 2", name, len(offs))
		}
		elems := int64(1)
		for _, d := range *e.Shape {
			if d < 0 {
				return nil, fail("tensor %q: negative dimension in shape %v", name, *e.Shape)
			}
			if d != 0 && elems > math.MaxInt64/elemSize/d {
				return nil, fail("tensor %q: shape %v overflows", name, *e.Shape)
			}
			elems *= d
		}
		begin, end := offs[0], offs[1]
		if begin < 0 || end < begin {
			return nil, fail("tensor %q: data_offsets [%d, %d] are not a range", name, begin, end)
		}
		if end > dataSize {
			return nil, fail("tensor %q: data_offsets [%d, %d] run past the end of the data (%d bytes): truncated or corrupt", name, begin, end, dataSize)
		}
		if end-begin != elems*elemSize {
			return nil, fail("tensor %q: %d bytes for %s %v, want %d", name, end-begin, *e.DType, *e.Shape, elems*elemSize)
		}
		st.Tensors = append(st.Tensors, &Tensor{
			Name: name, DType: *e.DType, Shape: *e.Shape,
			file: st, offset: dataStart + begin, size: end - begin,
		})
	}
	sort.Slice(st.Tensors, func(i, j int) bool {
		a, b := st.Tensors[i], st.Tensors[j]
		if a.offset != b.offset {
			return a.offset < b.offset
		}
		return a.Name < b.Name
	})
	// Overlapping tensors would alias each other's bytes; the format
	// forbids them and a writer that made them is broken.
	for i := 1; i < len(st.Tensors); i++ {
		prev, t := st.Tensors[i-1], st.Tensors[i]
		if t.offset < prev.offset+prev.size {
			return nil, fail("tensors %q and %q overlap", prev.Name, t.Name)
		}
	}
	return st, nil
}

type headerEntry struct {
	name  string
	value json.RawMessage
}

// headerEntries splits the header object into its entries in file order.
// encoding/json would keep the last of two entries of one name and drop
// the other without a word; a name twice is an error here.
func headerEntries(hdr []byte) ([]headerEntry, error) {
	dec := json.NewDecoder(bytes.NewReader(hdr))
	if tok, err := dec.Token(); err != nil {
		return nil, err
	} else if tok != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object")
	}
	var out []headerEntry
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("key %v is not a string", tok)
		}
		if seen[name] {
			return nil, fmt.Errorf("%q appears twice", name)
		}
		seen[name] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%q: %w", name, err)
		}
		out = append(out, headerEntry{name, v})
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("data after the JSON object")
	}
	return out, nil
}
