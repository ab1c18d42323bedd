package hfimport

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
)

// maxHeaderSize bounds a safetensors header: the format's own limit is
// 100 MB, and a larger length is a corrupt or hostile file, not a model.
const maxHeaderSize = 100 << 20

// DType is a safetensors element type ("F16", "BF16", …).
type DType string

// The element types a weight can be converted from.
const (
	F32  DType = "F32"
	F16  DType = "F16"
	BF16 DType = "BF16"
)

// dtypeSizes are the bytes per element of every dtype the safetensors format
// defines; only F32, F16 and BF16 can be imported, the others are named in
// the error.
var dtypeSizes = map[DType]int64{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1,
	"I16": 2, "U16": 2, F16: 2, BF16: 2,
	"I32": 4, "U32": 4, F32: 4,
	"I64": 8, "U64": 8, "F64": 8,
}

// convertible reports whether weights of dtype d can be imported.
func (d DType) convertible() bool { return d == F32 || d == F16 || d == BF16 }

// A Tensor is one tensor of a safetensors file: its name, element type,
// shape (outermost first, as PyTorch and safetensors write it) and where its
// bytes lie.
type Tensor struct {
	Name  string
	DType DType
	Shape []int64

	file   *SafetensorsFile
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

// File is the path of the file t is in.
func (t *Tensor) File() string { return t.file.path }

// ReadAt reads len(p) bytes of t's data starting at byte off of it.
func (t *Tensor) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off > t.size {
		return 0, fmt.Errorf("hfimport: %s: tensor %q: read at %d outside its %d bytes", t.file.path, t.Name, off, t.size)
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
		err = fmt.Errorf("hfimport: %s: tensor %q: %w", t.file.path, t.Name, err)
	}
	return n, err
}

// SafetensorsFile is an open safetensors file: the tensor table of its
// header, with the data read on demand through ReadAt, so that a model is
// never held in memory.
type SafetensorsFile struct {
	path     string
	f        *os.File
	Tensors  []*Tensor // in order of their data
	Metadata map[string]string
}

// OpenSafetensors reads the header of the safetensors file at path and
// checks it against the file: an 8-byte little-endian header length, a JSON
// object {name: {dtype, shape, data_offsets: [begin, end]}} with an optional
// "__metadata__" of strings, then the data, the offsets counting from the
// end of the header. Every tensor's bytes must match its dtype and shape and
// lie inside the file.
func OpenSafetensors(path string) (*SafetensorsFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("hfimport: %w", err)
	}
	st, err := readSafetensors(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	return st, nil
}

func readSafetensors(f *os.File, path string) (*SafetensorsFile, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("hfimport: %s: %s", path, fmt.Sprintf(format, args...))
	}
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("hfimport: %w", err)
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
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &raw); err != nil {
		return nil, fail("header: %v", err)
	}
	dataStart := 8 + int64(n)
	dataSize := size - dataStart
	st := &SafetensorsFile{path: path, f: f}
	for name, msg := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &st.Metadata); err != nil {
				return nil, fail("__metadata__: %v", err)
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
		elemSize, ok := dtypeSizes[*e.DType]
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
	// Overlapping tensors would alias each other's bytes; safetensors
	// forbids them and a writer that made them is broken.
	for i := 1; i < len(st.Tensors); i++ {
		prev, t := st.Tensors[i-1], st.Tensors[i]
		if t.offset < prev.offset+prev.size {
			return nil, fail("tensors %q and %q overlap", prev.Name, t.Name)
		}
	}
	return st, nil
}

// Close closes the file.
func (s *SafetensorsFile) Close() error { return s.f.Close() }

// weights is every tensor of a model's safetensors files by name.
type weights struct {
	files   []*SafetensorsFile
	tensors map[string]*Tensor
}

func (w *weights) Close() error {
	var first error
	for _, f := range w.files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// openWeights opens dir/model.safetensors, or the shards that
// dir/model.safetensors.index.json lists, and checks that every tensor the
// index names is in the shard it names and that no name is in two files.
func openWeights(dir string) (*weights, error) {
	w := &weights{tensors: map[string]*Tensor{}}
	add := func(path string) (*SafetensorsFile, error) {
		st, err := OpenSafetensors(path)
		if err != nil {
			return nil, err
		}
		w.files = append(w.files, st)
		for _, t := range st.Tensors {
			if prev, dup := w.tensors[t.Name]; dup {
				return nil, fmt.Errorf("hfimport: tensor %q is in both %s and %s", t.Name, prev.file.path, path)
			}
			w.tensors[t.Name] = t
		}
		return st, nil
	}
	indexPath := filepath.Join(dir, "model.safetensors.index.json")
	single := filepath.Join(dir, "model.safetensors")
	data, err := os.ReadFile(indexPath)
	switch {
	case err == nil:
		var index struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(data, &index); err != nil {
			return nil, fmt.Errorf("hfimport: %s: %w", indexPath, err)
		}
		if len(index.WeightMap) == 0 {
			return nil, fmt.Errorf("hfimport: %s: weight_map is empty", indexPath)
		}
		var shards []string
		for _, file := range index.WeightMap {
			if filepath.Base(file) != file {
				return nil, fmt.Errorf("hfimport: %s: shard %q is not a file name in the folder", indexPath, file)
			}
			shards = append(shards, file)
		}
		slices.Sort(shards)
		opened := map[string]*SafetensorsFile{}
		for _, file := range slices.Compact(shards) {
			st, err := add(filepath.Join(dir, file))
			if err != nil {
				w.Close()
				return nil, err
			}
			opened[file] = st
		}
		for name, file := range index.WeightMap {
			t, ok := w.tensors[name]
			if !ok || t.file != opened[file] {
				w.Close()
				return nil, fmt.Errorf("hfimport: %s: tensor %q is not in %s", indexPath, name, file)
			}
		}
	case errors.Is(err, os.ErrNotExist):
		if _, err := add(single); err != nil {
			w.Close()
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("hfimport: %s has neither model.safetensors nor model.safetensors.index.json", dir)
			}
			return nil, err
		}
	default:
		return nil, fmt.Errorf("hfimport: %w", err)
	}
	return w, nil
}
