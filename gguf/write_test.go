package gguf_test

import (
	"bytes"
	"errors"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/gguf"
)

// must fails the test on a writer error.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestWriterRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := gguf.NewWriter(&buf)
	must(t, w.SetString("general.architecture", "llama"))
	must(t, w.SetUint8("u8", 200))
	must(t, w.SetInt8("i8", -100))
	must(t, w.SetUint16("u16", 60000))
	must(t, w.SetInt16("i16", -30000))
	must(t, w.SetUint32("u32", 4000000000))
	must(t, w.SetInt32("i32", -2000000000))
	must(t, w.SetUint64("u64", math.MaxUint64))
	must(t, w.SetInt64("i64", math.MinInt64))
	must(t, w.SetFloat32("f32", float32(math.Copysign(0, -1))))
	must(t, w.SetFloat64("f64", math.NaN()))
	must(t, w.SetBool("bool", true))
	must(t, w.SetStrings("tokens", []string{"<s>", "", "ünï"}))
	must(t, w.SetInt32s("types", []int32{1, -1}))
	must(t, w.SetFloat32s("scores", []float32{0.5, -1e30}))
	must(t, w.Set("bools", gguf.ArrayOf([]bool{true, false})))
	must(t, w.Set("empty", gguf.ArrayOf([]uint64(nil))))
	must(t, w.Set("nested", gguf.ArrayOf([]gguf.Value{
		gguf.ArrayOf([]string{"a", "b"}),
		gguf.ArrayOf([]gguf.Value{gguf.ArrayOf([]int16{7})}),
	})))
	must(t, w.AddTensor("a", gguf.TypeF32, []uint64{3}))
	must(t, w.AddTensor("q", gguf.TypeQ8_0, []uint64{32, 2}))
	must(t, w.AddTensor("e", gguf.TypeF16, []uint64{0, 5}))
	a := []byte("twelve bytes")
	q := bytes.Repeat([]byte{0xab}, 68)
	must(t, w.WriteTensorBytes("a", a))
	// The reader may hold more than the tensor: WriteTensor takes its size.
	rest := bytes.NewReader(append(append([]byte{}, q...), "next tensor"...))
	must(t, w.WriteTensor("q", rest))
	if rest.Len() != len("next tensor") {
		t.Errorf("WriteTensor left %d bytes of the reader, want %d", rest.Len(), len("next tensor"))
	}
	must(t, w.WriteTensorBytes("e", nil))
	must(t, w.Close())

	f, err := readBytes(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	wantKeys := "general.architecture u8 i8 u16 i16 u32 i32 u64 i64 f32 f64 bool tokens types scores bools empty nested"
	if got := strings.Join(f.Keys(), " "); got != wantKeys {
		t.Errorf("keys %s\nwant %s", got, wantKeys)
	}
	if len(buf.Bytes())%32 != 0 || f.DataOffset()%32 != 0 {
		t.Errorf("file %d bytes, data at %d: not 32-aligned", buf.Len(), f.DataOffset())
	}
	if v, _ := f.Value("f64"); !math.IsNaN(v.Any().(float64)) {
		t.Errorf("f64 = %v, want NaN", v.Any())
	}
	if v, _ := f.Value("f32"); math.Float32bits(v.Any().(float32)) != 0x80000000 {
		t.Errorf("f32 = %v, want -0", v.Any())
	}
	if v, _ := f.Value("empty"); v.ElemType() != gguf.ValueUint64 || v.Len() != 0 {
		t.Errorf("empty = [%v × %d]", v.ElemType(), v.Len())
	}
	if v, _ := f.Value("nested"); v.Index(1).Index(0).Index(0).Any() != int16(7) || v.Index(0).Index(1).Any() != "b" {
		t.Errorf("nested = %v", v.Any())
	}
	for name, want := range map[string][]byte{"a": a, "q": q, "e": {}} {
		if got, err := f.TensorData(name); err != nil || !bytes.Equal(got, want) {
			t.Errorf("TensorData(%q) = %q, %v", name, got, err)
		}
	}
	if ti, _ := f.Tensor("q"); ti.Offset != 32 {
		t.Errorf("q at offset %d, want 32 (after a, padded)", ti.Offset)
	}
}

// TestWriterKeepsAlignmentInStep is ggml's naive-alignment lesson: whatever
// order alignment and tensors are set in, the file is laid out with the
// alignment its general.alignment key claims.
func TestWriterKeepsAlignmentInStep(t *testing.T) {
	tests := []struct {
		name  string
		build func(w *gguf.Writer) error
		align uint64
	}{
		{"SetAlignment before tensors", func(w *gguf.Writer) error {
			if err := w.SetAlignment(64); err != nil {
				return err
			}
			return addTensors(w)
		}, 64},
		{"SetAlignment after tensors", func(w *gguf.Writer) error {
			if err := addTensors(w); err != nil {
				return err
			}
			return w.SetAlignment(64)
		}, 64},
		{"key set directly as UINT64", func(w *gguf.Writer) error {
			if err := addTensors(w); err != nil {
				return err
			}
			return w.SetUint64("general.alignment", 128)
		}, 128},
		{"no key", addTensors, gguf.DefaultAlignment},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			w := gguf.NewWriter(&buf)
			must(t, tt.build(w))
			for _, name := range []string{"x", "y", "z"} {
				must(t, w.WriteTensorBytes(name, make([]byte, 32)))
			}
			must(t, w.Close())
			f, err := readBytes(buf.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			if f.Alignment() != tt.align {
				t.Errorf("alignment %d, want %d", f.Alignment(), tt.align)
			}
			_, hasKey := f.Value("general.alignment")
			if hasKey != (tt.align != gguf.DefaultAlignment) {
				t.Errorf("general.alignment present: %v", hasKey)
			}
			for i, ti := range f.Tensors() {
				if want := uint64(i) * max(tt.align, 32); ti.Offset != want {
					t.Errorf("%s at %d, want %d", ti.Name, ti.Offset, want)
				}
			}
		})
	}
}

func addTensors(w *gguf.Writer) error {
	for _, name := range []string{"x", "y", "z"} {
		if err := w.AddTensor(name, gguf.TypeF32, []uint64{8}); err != nil {
			return err
		}
	}
	return nil
}

func TestWriterReplacesKeyInPlace(t *testing.T) {
	var buf bytes.Buffer
	w := gguf.NewWriter(&buf)
	must(t, w.SetUint32("a", 1))
	must(t, w.SetUint32("b", 2))
	must(t, w.SetString("a", "one"))
	must(t, w.Close())
	f, err := readBytes(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := f.String("a"); strings.Join(f.Keys(), ",") != "a,b" || s != "one" {
		t.Errorf("keys %v, a = %q", f.Keys(), s)
	}
}

func TestWriterErrors(t *testing.T) {
	tests := []struct {
		name string
		do   func(w *gguf.Writer) error
		want string
	}{
		{"alignment 48", func(w *gguf.Writer) error { return w.SetAlignment(48) }, `key "general.alignment": 48 is not a power of two`},
		{"alignment string", func(w *gguf.Writer) error { return w.SetString("general.alignment", "64") }, "is STRING, want an integer"},
		{"zero Value", func(w *gguf.Writer) error { return w.Set("k", gguf.Value{}) }, `key "k": zero Value`},
		{"array of non-arrays", func(w *gguf.Writer) error {
			return w.Set("k", gguf.ArrayOf([]gguf.Value{gguf.ValueOf(int32(1))}))
		}, "element 0 of an array of arrays is INT32"},
		{"nested too deep", func(w *gguf.Writer) error {
			v := gguf.ArrayOf([]int32{})
			for range 16 {
				v = gguf.ArrayOf([]gguf.Value{v})
			}
			return w.Set("k", v)
		}, "nested more than 16 deep"},
		{"name too long", func(w *gguf.Writer) error {
			return w.AddTensor(strings.Repeat("n", 64), gguf.TypeF32, []uint64{1})
		}, "name is 64 bytes, more than ggml's 63"},
		{"duplicate tensor", func(w *gguf.Writer) error {
			w.AddTensor("t", gguf.TypeF32, []uint64{1})
			return w.AddTensor("t", gguf.TypeF32, []uint64{1})
		}, `tensor "t" added twice`},
		{"5 dimensions", func(w *gguf.Writer) error { return w.AddTensor("t", gguf.TypeF32, []uint64{1, 1, 1, 1, 1}) }, "5 dimensions"},
		{"unknown type", func(w *gguf.Writer) error { return w.AddTensor("t", gguf.Type(99), []uint64{1}) }, "unknown type id 99"},
		{"partial block", func(w *gguf.Writer) error { return w.AddTensor("t", gguf.TypeQ4_K, []uint64{255}) }, "not a multiple of its block size 256"},
		{"overflow", func(w *gguf.Writer) error { return w.AddTensor("t", gguf.TypeF32, []uint64{1 << 40, 1 << 40}) }, "overflows int64"},
		{"key after data", func(w *gguf.Writer) error {
			w.AddTensor("t", gguf.TypeF32, []uint64{1})
			w.WriteTensorBytes("t", make([]byte, 4))
			return w.SetUint32("late", 1)
		}, `key "late" set after tensor data was written`},
		{"tensor after data", func(w *gguf.Writer) error {
			w.WriteHeader()
			return w.AddTensor("late", gguf.TypeF32, []uint64{1})
		}, `tensor "late" added after tensor data was written`},
		{"out of order", func(w *gguf.Writer) error {
			addTensors(w)
			return w.WriteTensorBytes("y", make([]byte, 32))
		}, `tensor "y" written out of order: the next one is "x"`},
		{"never added", func(w *gguf.Writer) error { return w.WriteTensorBytes("ghost", nil) }, `tensor "ghost" was never added`},
		{"too many", func(w *gguf.Writer) error {
			w.AddTensor("t", gguf.TypeF32, []uint64{1})
			w.WriteTensorBytes("t", make([]byte, 4))
			return w.WriteTensorBytes("t", make([]byte, 4))
		}, "all 1 added tensors are already written"},
		{"wrong length", func(w *gguf.Writer) error {
			w.AddTensor("t", gguf.TypeF32, []uint64{2})
			return w.WriteTensorBytes("t", make([]byte, 4))
		}, `tensor "t": 4 bytes of data, want 8`},
		{"short reader", func(w *gguf.Writer) error {
			w.AddTensor("t", gguf.TypeF32, []uint64{2})
			return w.WriteTensor("t", strings.NewReader("abc"))
		}, `tensor "t": the reader gave 3 bytes, want 8`},
		{"close early", func(w *gguf.Writer) error {
			addTensors(w)
			w.WriteTensorBytes("x", make([]byte, 32))
			return w.Close()
		}, `closed before the data of tensor "y" (1 of 3 written)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.do(gguf.NewWriter(io.Discard))
			if err == nil || !strings.HasPrefix(err.Error(), "gguf: writer: ") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// failAfter is a writer that fails once n bytes have been written.
type failAfter struct{ n int }

var errDiskFull = errors.New("disk full")

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		k := f.n
		f.n = 0
		return k, errDiskFull
	}
	f.n -= len(p)
	return len(p), nil
}

func TestWriterWriteErrorIsSticky(t *testing.T) {
	// The writer buffers 1 MiB, so a 2 MiB tensor reaches the failing writer.
	w := gguf.NewWriter(&failAfter{n: 100})
	must(t, w.AddTensor("big", gguf.TypeI8, []uint64{2 << 20}))
	must(t, w.AddTensor("next", gguf.TypeI8, []uint64{1}))
	err := w.WriteTensorBytes("big", make([]byte, 2<<20))
	if !errors.Is(err, errDiskFull) {
		t.Fatalf("WriteTensorBytes: %v, want the disk-full error", err)
	}
	if err2 := w.WriteTensorBytes("next", []byte{1}); !errors.Is(err2, errDiskFull) {
		t.Errorf("the next write: %v, want the same error", err2)
	}
	if err3 := w.Close(); !errors.Is(err3, errDiskFull) {
		t.Errorf("Close: %v, want the same error", err3)
	}
}
