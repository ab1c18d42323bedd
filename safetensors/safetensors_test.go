package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/x448/float16"
)

// writeRaw writes a file of the header hdr, marshalled as given, and data:
// the way to make files the writer refuses to.
func writeRaw(t *testing.T, path string, hdr string, data []byte) {
	t.Helper()
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	out = append(append(out, hdr...), data...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

func f16Bytes(v ...float32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint16(b, float16.Fromfloat32(x).Bits())
	}
	return b
}

// bf16Bytes keeps the high half of each float32: exact for the values the
// tests use, which have at most 8 significant bits.
func bf16Bytes(v ...float32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint16(b, uint16(math.Float32bits(x)>>16))
	}
	return b
}

// TestWriteOpenRoundTrip writes tensors of the three float dtypes and a
// scalar, and reads back their names, shapes, metadata and values; every
// value is exact in every dtype, so the comparison is exact.
func TestWriteOpenRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.safetensors")
	in := []Data{
		F32Data("z.weight", []int64{2, 3}, []float32{1, -2, 0.5, 3.25, -0.125, 1e-3}),
		{Name: "a.half", DType: F16, Shape: []int64{3}, Bytes: f16Bytes(0.5, -1.5, 2048)},
		{Name: "m.brain", DType: BF16, Shape: []int64{1, 2}, Bytes: bf16Bytes(-3, 0.015625)},
		F32Data("s.scalar", nil, []float32{7}),
	}
	if err := WriteFile(path, in, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Path() != path || f.Metadata["format"] != "pt" || len(f.Metadata) != 1 {
		t.Errorf("path %q, metadata %v", f.Path(), f.Metadata)
	}
	want := map[string][]float32{
		"z.weight": {1, -2, 0.5, 3.25, -0.125, 1e-3},
		"a.half":   {0.5, -1.5, 2048},
		"m.brain":  {-3, 0.015625},
		"s.scalar": {7},
	}
	var names []string
	for _, tn := range f.Tensors {
		names = append(names, tn.Name)
		got, err := tn.Float32()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want[tn.Name]) {
			t.Errorf("%s = %v, want %v", tn.Name, got, want[tn.Name])
		}
		if tn.File() != path {
			t.Errorf("%s: File() = %q", tn.Name, tn.File())
		}
	}
	// The data lies in name order, whatever the order given to WriteFile.
	if !slices.Equal(names, []string{"a.half", "m.brain", "s.scalar", "z.weight"}) {
		t.Errorf("tensors in data order: %v", names)
	}
	for _, d := range in {
		for _, tn := range f.Tensors {
			if tn.Name == d.Name && (tn.DType != d.DType || !slices.Equal(tn.Shape, d.Shape) && len(d.Shape) > 0 || tn.Size() != int64(len(d.Bytes))) {
				t.Errorf("%s: %s %v %d bytes, wrote %s %v %d", d.Name, tn.DType, tn.Shape, tn.Size(), d.DType, d.Shape, len(d.Bytes))
			}
		}
	}
}

// TestWriteLayout: the header length is a multiple of 8 (the data is
// aligned for readers that map it), the metadata is left out when there
// is none, and the offsets run back to back from 0 to the end of the file.
func TestWriteLayout(t *testing.T) {
	var buf bytes.Buffer
	err := Write(&buf, []Data{F32Data("b", []int64{1}, []float32{2}), F32Data("a", []int64{3}, []float32{1, 2, 3})}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	n := binary.LittleEndian.Uint64(b)
	if n%8 != 0 {
		t.Errorf("header length %d is not a multiple of 8", n)
	}
	var hdr map[string]struct {
		DataOffsets [2]int64 `json:"data_offsets"`
	}
	if err := json.Unmarshal(b[8:8+n], &hdr); err != nil {
		t.Fatal(err)
	}
	if _, ok := hdr[metadataKey]; ok || len(hdr) != 2 {
		t.Errorf("header %s", b[8:8+n])
	}
	if hdr["a"].DataOffsets != [2]int64{0, 12} || hdr["b"].DataOffsets != [2]int64{12, 16} || int64(len(b))-8-int64(n) != 16 {
		t.Errorf("offsets %v, %d data bytes", hdr, int64(len(b))-8-int64(n))
	}
}

// TestOpenRejects breaks a file one way at a time; Open must fail with an
// error that names the file and what is wrong (the parts in want).
func TestOpenRejects(t *testing.T) {
	valid := func(t *testing.T, path string) []byte {
		if err := WriteFile(path, []Data{F32Data("w", []int64{2, 2}, []float32{1, 2, 3, 4})}, nil); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	zeros := make([]byte, 64)
	cases := []struct {
		name string
		make func(t *testing.T, path string)
		want []string
	}{
		{"shorter than the length", func(t *testing.T, p string) { os.WriteFile(p, []byte{1, 2, 3}, 0o644) },
			[]string{"truncated", "8-byte header length"}},
		{"truncated header", func(t *testing.T, p string) { b := valid(t, p); os.WriteFile(p, b[:20], 0o644) },
			[]string{"truncated: the header is"}},
		{"truncated data", func(t *testing.T, p string) { b := valid(t, p); os.WriteFile(p, b[:len(b)-3], 0o644) },
			[]string{`"w"`, "run past the end", "truncated"}},
		{"huge header length", func(t *testing.T, p string) {
			b := valid(t, p)
			binary.LittleEndian.PutUint64(b, 1<<40)
			os.WriteFile(p, b, 0o644)
		}, []string{"header length 1099511627776"}},
		{"offsets outside the file", func(t *testing.T, p string) {
			writeRaw(t, p, `{"w":{"dtype":"F16","shape":[8],"data_offsets":[1000,1016]}}`, zeros)
		}, []string{`"w"`, "[1000, 1016]", "past the end"}},
		{"offsets not a range", func(t *testing.T, p string) {
			writeRaw(t, p, `{"w":{"dtype":"F16","shape":[0],"data_offsets":[16,0]}}`, zeros)
		}, []string{`"w"`, "[16, 0] are not a range"}},
		{"three offsets", func(t *testing.T, p string) {
			writeRaw(t, p, `{"w":{"dtype":"F16","shape":[8],"data_offsets":[0,8,16]}}`, zeros)
		}, []string{`"w"`, "3 entries, want 2"}},
		{"size does not match shape", func(t *testing.T, p string) {
			writeRaw(t, p, `{"w":{"dtype":"F16","shape":[8],"data_offsets":[0,12]}}`, zeros)
		}, []string{`"w"`, "12 bytes for F16 [8], want 16"}},
		{"negative dimension", func(t *testing.T, p string) {
			writeRaw(t, p, `{"w":{"dtype":"F16","shape":[-2,-4],"data_offsets":[0,16]}}`, zeros)
		}, []string{`"w"`, "negative dimension"}},
		{"shape that overflows", func(t *testing.T, p string) {
			writeRaw(t, p, `{"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16]}}`, zeros)
		}, []string{`"w"`, "overflows"}},
		{"overlapping tensors", func(t *testing.T, p string) {
			writeRaw(t, p, `{"a":{"dtype":"F16","shape":[8],"data_offsets":[0,16]},"b":{"dtype":"F16","shape":[8],"data_offsets":[8,24]}}`, zeros)
		}, []string{`"a" and "b" overlap`}},
		{"a name twice", func(t *testing.T, p string) {
			writeRaw(t, p, `{"w":{"dtype":"F16","shape":[8],"data_offsets":[0,16]},"w":{"dtype":"F16","shape":[8],"data_offsets":[16,32]}}`, zeros)
		}, []string{`"w" appears twice`}},
		{"unknown dtype", func(t *testing.T, p string) {
			writeRaw(t, p, `{"w":{"dtype":"F7","shape":[8],"data_offsets":[0,16]}}`, zeros)
		}, []string{`"w"`, `unknown dtype "F7"`}},
		{"a field missing", func(t *testing.T, p string) {
			writeRaw(t, p, `{"w":{"dtype":"F16","data_offsets":[0,16]}}`, zeros)
		}, []string{`"w"`, "dtype, shape and data_offsets are all required"}},
		{"bad JSON", func(t *testing.T, p string) { writeRaw(t, p, `{nope`, nil) },
			[]string{"header"}},
		{"not an object", func(t *testing.T, p string) { writeRaw(t, p, `null    `, nil) },
			[]string{"header", "not a JSON object"}},
		{"data after the object", func(t *testing.T, p string) { writeRaw(t, p, `{} {}`, nil) },
			[]string{"header", "data after the JSON object"}},
		{"metadata not strings", func(t *testing.T, p string) { writeRaw(t, p, `{"__metadata__":{"n":1}}`, nil) },
			[]string{"__metadata__"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.safetensors")
			c.make(t, path)
			f, err := Open(path)
			if err == nil {
				f.Close()
				t.Fatal("Open succeeded")
			}
			for _, w := range append([]string{path}, c.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestWriteRejects: a tensor the format cannot hold is an error naming it,
// and WriteFile leaves the file that was there untouched.
func TestWriteRejects(t *testing.T) {
	one := F32Data("w", []int64{1}, []float32{1})
	cases := []struct {
		name    string
		tensors []Data
		want    string
	}{
		{"a name twice", []Data{one, one}, `"w" appears twice`},
		{"bytes that do not fit the shape", []Data{{Name: "w", DType: F32, Shape: []int64{2}, Bytes: make([]byte, 4)}}, `"w": 4 bytes for F32 [2], want 8`},
		{"unknown dtype", []Data{{Name: "w", DType: "F7", Shape: []int64{1}, Bytes: make([]byte, 4)}}, `"w": unknown dtype "F7"`},
		{"negative dimension", []Data{{Name: "w", DType: F32, Shape: []int64{-1}}}, `"w": shape [-1]`},
		{"the metadata's name", []Data{F32Data(metadataKey, []int64{1}, []float32{1})}, `"__metadata__" is not a tensor name`},
		{"no name", []Data{F32Data("", []int64{1}, []float32{1})}, `"" is not a tensor name`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.safetensors")
			if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			err := WriteFile(path, c.tensors, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
			if b, _ := os.ReadFile(path); string(b) != "old" {
				t.Errorf("the file holds %q after a failed write", b)
			}
			if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
				t.Errorf("%d files in the folder after a failed write", len(ents))
			}
		})
	}
}

// TestTensorReads: ReadAt stops at the tensor's end rather than reading
// its neighbour, and Float32 names a dtype it cannot convert.
func TestTensorReads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.safetensors")
	ints := Data{Name: "b.ids", DType: "I32", Shape: []int64{2}, Bytes: []byte{1, 0, 0, 0, 2, 0, 0, 0}}
	if err := WriteFile(path, []Data{F32Data("a", []int64{2}, []float32{1, 2}), ints}, nil); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a, b := f.Tensors[0], f.Tensors[1]
	p := make([]byte, 16)
	n, err := a.ReadAt(p, 4)
	if n != 4 || err == nil {
		t.Errorf("ReadAt past the end of %q: %d bytes, error %v; want 4 and io.EOF", a.Name, n, err)
	}
	if _, err := a.ReadAt(p, 9); err == nil || !strings.Contains(err.Error(), `"a": read at 9 outside its 8 bytes`) {
		t.Errorf("ReadAt outside: %v", err)
	}
	if _, err := b.Float32(); err == nil || !strings.Contains(err.Error(), `"b.ids": dtype I32 cannot be read as float32`) {
		t.Errorf("Float32 of I32: %v", err)
	}
}
