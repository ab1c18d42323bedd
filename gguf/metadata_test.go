package gguf_test

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hearthstudio/hearth/gguf"
)

// accessorFile is a file with one key of each shape the accessors meet.
func accessorFile(t *testing.T) *gguf.File {
	t.Helper()
	var buf bytes.Buffer
	w := gguf.NewWriter(&buf)
	must(t, w.SetString("general.architecture", "llama"))
	must(t, w.SetUint32("general.file_type", 15))
	must(t, w.SetUint32("u32", 4000000000))
	must(t, w.SetInt32("i32", 32))
	must(t, w.SetInt32("neg", -1))
	must(t, w.SetUint8("u8", 7))
	must(t, w.SetUint64("big", math.MaxUint64))
	must(t, w.SetInt64("i64", math.MinInt64))
	must(t, w.SetFloat32("f32", 1e-5))
	must(t, w.SetFloat64("f64", 0.1))
	must(t, w.SetFloat64("huge", 1e300))
	must(t, w.SetBool("yes", true))
	must(t, w.SetString("s", "text"))
	must(t, w.SetStrings("ss", []string{"a", "b"}))
	must(t, w.SetFloat32s("fs", []float32{1, 2}))
	must(t, w.Set("ds", gguf.ArrayOf([]float64{0.5, 1e300})))
	must(t, w.Set("u32s", gguf.ArrayOf([]uint32{1, 4000000000})))
	must(t, w.Set("u8s", gguf.ArrayOf([]uint8{1, 255})))
	must(t, w.Set("i64s", gguf.ArrayOf([]int64{-1, 5})))
	must(t, w.Close())
	f, err := readBytes(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestAccessors(t *testing.T) {
	f := accessorFile(t)
	tests := []struct {
		name    string
		get     func() (any, error)
		want    any
		wantErr string // the exact error, or "" for none
	}{
		{"Uint32 of UINT32", func() (any, error) { return f.Uint32("u32") }, uint32(4000000000), ""},
		{"Uint32 of INT32", func() (any, error) { return f.Uint32("i32") }, uint32(32), ""},
		{"Uint32 of UINT8", func() (any, error) { return f.Uint32("u8") }, uint32(7), ""},
		{"Int32 of UINT8", func() (any, error) { return f.Int32("u8") }, int32(7), ""},
		{"Int64 of UINT32", func() (any, error) { return f.Int64("u32") }, int64(4000000000), ""},
		{"Uint64 of UINT64", func() (any, error) { return f.Uint64("big") }, uint64(math.MaxUint64), ""},
		{"Int64 of INT64", func() (any, error) { return f.Int64("i64") }, int64(math.MinInt64), ""},
		{"Int of INT32", func() (any, error) { return f.Int("neg") }, -1, ""},
		{"Int32 of UINT32 too big", func() (any, error) { return f.Int32("u32") }, int32(0),
			`gguf: model.gguf: key "u32": value 4000000000 (UINT32) does not fit in int32`},
		{"Uint32 of negative", func() (any, error) { return f.Uint32("neg") }, uint32(0),
			`gguf: model.gguf: key "neg": value -1 (INT32) does not fit in uint32`},
		{"Int64 of UINT64 max", func() (any, error) { return f.Int64("big") }, int64(0),
			`gguf: model.gguf: key "big": value 18446744073709551615 (UINT64) does not fit in int64`},
		{"Uint32 missing", func() (any, error) { return f.Uint32("llama.block_count") }, uint32(0),
			`gguf: model.gguf: key "llama.block_count": missing`},
		{"Uint32 of STRING", func() (any, error) { return f.Uint32("s") }, uint32(0),
			`gguf: model.gguf: key "s": is STRING, want an integer`},
		{"Uint32 of FLOAT32", func() (any, error) { return f.Uint32("f32") }, uint32(0),
			`gguf: model.gguf: key "f32": is FLOAT32, want an integer`},
		{"Uint32 of an array", func() (any, error) { return f.Uint32("u32s") }, uint32(0),
			`gguf: model.gguf: key "u32s": is ARRAY of UINT32, want an integer`},
		{"Uint32Or missing", func() (any, error) { return f.Uint32Or("absent", 9) }, uint32(9), ""},
		{"Uint32Or present", func() (any, error) { return f.Uint32Or("i32", 9) }, uint32(32), ""},
		{"Uint32Or wrong type", func() (any, error) { return f.Uint32Or("s", 9) }, uint32(0),
			`gguf: model.gguf: key "s": is STRING, want an integer`},
		{"IntOr missing", func() (any, error) { return f.IntOr("absent", 3) }, 3, ""},
		{"Int32Or", func() (any, error) { return f.Int32Or("absent", -3) }, int32(-3), ""},
		{"Int64Or", func() (any, error) { return f.Int64Or("absent", 5) }, int64(5), ""},
		{"Uint64Or", func() (any, error) { return f.Uint64Or("big", 5) }, uint64(math.MaxUint64), ""},
		{"Float32", func() (any, error) { return f.Float32("f32") }, float32(1e-5), ""},
		{"Float32 of FLOAT64", func() (any, error) { return f.Float32("f64") }, float32(0.1), ""},
		{"Float32 of FLOAT64 too big", func() (any, error) { return f.Float32("huge") }, float32(0),
			`gguf: model.gguf: key "huge": value 1e+300 (FLOAT64) does not fit in float32`},
		{"Float32 of UINT32", func() (any, error) { return f.Float32("u32") }, float32(0),
			`gguf: model.gguf: key "u32": is UINT32, want a float`},
		{"Float64 of FLOAT32", func() (any, error) { return f.Float64("f32") }, float64(float32(1e-5)), ""},
		{"Float32Or", func() (any, error) { return f.Float32Or("absent", 0.5) }, float32(0.5), ""},
		{"Float64Or", func() (any, error) { return f.Float64Or("f64", 0.5) }, 0.1, ""},
		{"Bool", func() (any, error) { return f.Bool("yes") }, true, ""},
		{"Bool of UINT8", func() (any, error) { return f.Bool("u8") }, false,
			`gguf: model.gguf: key "u8": is UINT8, want BOOL`},
		{"BoolOr", func() (any, error) { return f.BoolOr("absent", true) }, true, ""},
		{"String", func() (any, error) { return f.String("s") }, "text", ""},
		{"String of array", func() (any, error) { return f.String("ss") }, "",
			`gguf: model.gguf: key "ss": is ARRAY of STRING, want STRING`},
		{"StringOr", func() (any, error) { return f.StringOr("absent", "def") }, "def", ""},
		{"Strings", func() (any, error) { return f.Strings("ss") }, []string{"a", "b"}, ""},
		{"Strings of STRING", func() (any, error) { return f.Strings("s") }, []string(nil),
			`gguf: model.gguf: key "s": is STRING, want ARRAY of STRING`},
		{"Float32s", func() (any, error) { return f.Float32s("fs") }, []float32{1, 2}, ""},
		{"Float32s of FLOAT64 too big", func() (any, error) { return f.Float32s("ds") }, []float32(nil),
			`gguf: model.gguf: key "ds": element 1: value 1e+300 (FLOAT64) does not fit in float32`},
		{"Int32s of UINT8", func() (any, error) { return f.Int32s("u8s") }, []int32{1, 255}, ""},
		{"Int32s of UINT32 too big", func() (any, error) { return f.Int32s("u32s") }, []int32(nil),
			`gguf: model.gguf: key "u32s": element 1: value 4000000000 (UINT32) does not fit in int32`},
		{"Uint32s of UINT32", func() (any, error) { return f.Uint32s("u32s") }, []uint32{1, 4000000000}, ""},
		{"Uint32s of negative", func() (any, error) { return f.Uint32s("i64s") }, []uint32(nil),
			`gguf: model.gguf: key "i64s": element 0: value -1 (INT64) does not fit in uint32`},
		{"Int64s", func() (any, error) { return f.Int64s("i64s") }, []int64{-1, 5}, ""},
		{"Int32s of strings", func() (any, error) { return f.Int32s("ss") }, []int32(nil),
			`gguf: model.gguf: key "ss": is ARRAY of STRING, want an array of integers`},
		{"Int32s missing", func() (any, error) { return f.Int32s("absent") }, []int32(nil),
			`gguf: model.gguf: key "absent": missing`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.get()
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tt.wantErr {
				t.Errorf("error %q\n          want %q", gotErr, tt.wantErr)
			}
			if !equalAny(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

func equalAny(a, b any) bool {
	switch x := a.(type) {
	case []string:
		return slices.Equal(x, b.([]string))
	case []float32:
		return slices.Equal(x, b.([]float32))
	case []int32:
		return slices.Equal(x, b.([]int32))
	case []uint32:
		return slices.Equal(x, b.([]uint32))
	case []int64:
		return slices.Equal(x, b.([]int64))
	}
	return a == b
}

func TestKeyErrorIsInspectable(t *testing.T) {
	f := accessorFile(t)
	_, err := f.Uint32("absent")
	var ke *gguf.KeyError
	if !errors.As(err, &ke) || ke.Key != "absent" || ke.File != "model.gguf" || !errors.Is(err, gguf.ErrKeyNotFound) {
		t.Errorf("missing key: %#v", err)
	}
	if _, err := f.Uint32("s"); errors.Is(err, gguf.ErrKeyNotFound) {
		t.Errorf("a wrong type is reported as missing: %v", err)
	}
}

func TestAccessorsCopy(t *testing.T) {
	f := accessorFile(t)
	ss, _ := f.Strings("ss")
	ss[0] = "changed"
	if again, _ := f.Strings("ss"); again[0] != "a" {
		t.Error("Strings returned the file's own slice")
	}
}

func TestModelFacts(t *testing.T) {
	f := accessorFile(t)
	if got := f.Architecture(); got != "llama" {
		t.Errorf("Architecture() = %q", got)
	}
	if ft, ok := f.FileType(); !ok || ft.String() != "MOSTLY_Q4_K_M" {
		t.Errorf("FileType() = %v, %v", ft, ok)
	}
	dir := ggmlTestdataDir(t)
	g, err := gguf.Open(filepath.Join(dir, "no_tensors.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, ok := g.FileType(); ok || g.Architecture() != "none" || g.ParameterCount() != 0 {
		t.Errorf("no_tensors.gguf: file type present %v, architecture %q, %d parameters", ok, g.Architecture(), g.ParameterCount())
	}
}

func TestFileTypeNames(t *testing.T) {
	for _, tt := range []struct {
		t    gguf.FileType
		want string
	}{
		{0, "ALL_F32"}, {1, "MOSTLY_F16"}, {7, "MOSTLY_Q8_0"}, {15, "MOSTLY_Q4_K_M"},
		{18, "MOSTLY_Q6_K"}, {32, "MOSTLY_BF16"}, {38, "MOSTLY_MXFP4_MOE"},
		{1024 + 15, "MOSTLY_Q4_K_M (guessed)"}, {99, "FILE_TYPE(99)"},
	} {
		if got := tt.t.String(); got != tt.want {
			t.Errorf("FileType(%d) = %q, want %q", uint32(tt.t), got, tt.want)
		}
	}
}

func TestValueTypeNames(t *testing.T) {
	want := []string{"UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "FLOAT32",
		"BOOL", "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64", "type(13)"}
	for i, w := range want {
		if got := gguf.ValueType(i).String(); got != w {
			t.Errorf("ValueType(%d) = %q, want %q", i, got, w)
		}
	}
}

// TestErrorsNameOpenedPath checks the name in errors from Open is the path.
func TestErrorsNameOpenedPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.gguf")
	if err := os.WriteFile(path, header(0, 0).b, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = f.Uint32("llama.block_count")
	if want := "gguf: " + path + `: key "llama.block_count": missing`; err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}

// TestPutKV: a key already in the list takes the new value where it
// stands; a new key goes at the end.
func TestPutKV(t *testing.T) {
	kvs := []gguf.KV{{Key: "a", Value: gguf.ValueOf(uint32(1))}, {Key: "b", Value: gguf.ValueOf(uint32(2))}}
	kvs = gguf.PutKV(kvs, "a", gguf.ArrayOf([]uint32{3, 4}))
	kvs = gguf.PutKV(kvs, "c", gguf.ValueOf(float32(5)))
	if len(kvs) != 3 || kvs[0].Key != "a" || kvs[0].Value.Type() != gguf.ValueArray || kvs[1].Key != "b" || kvs[2].Key != "c" {
		t.Errorf("PutKV: %+v", kvs)
	}
}
