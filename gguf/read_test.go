package gguf_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/hearthstudio/hearth/gguf"
)

// raw assembles GGUF bytes by hand, so tests can write what no writer would.
type raw struct{ b []byte }

func (r *raw) u8(x uint8) *raw   { r.b = append(r.b, x); return r }
func (r *raw) u32(x uint32) *raw { r.b = binary.LittleEndian.AppendUint32(r.b, x); return r }
func (r *raw) u64(x uint64) *raw { r.b = binary.LittleEndian.AppendUint64(r.b, x); return r }
func (r *raw) str(s string) *raw { r.u64(uint64(len(s))); r.b = append(r.b, s...); return r }

// header starts a v3 file with the given counts.
func header(nTensors, nKV uint64) *raw {
	r := &raw{b: []byte("GGUF")}
	return r.u32(3).u64(nTensors).u64(nKV)
}

// kvU32 appends a UINT32 key/value.
func (r *raw) kvU32(key string, v uint32) *raw { return r.str(key).u32(4).u32(v) }

// tensor appends one tensor info.
func (r *raw) tensor(name string, typ uint32, off uint64, shape ...uint64) *raw {
	r.str(name).u32(uint32(len(shape)))
	for _, ne := range shape {
		r.u64(ne)
	}
	return r.u32(typ).u64(off)
}

// data pads to the 32-byte default alignment and appends n zero bytes.
func (r *raw) data(n int) []byte {
	for len(r.b)%32 != 0 {
		r.b = append(r.b, 0)
	}
	return append(r.b, make([]byte, n)...)
}

// named gives a reader a Name, as an *os.File has, so errors name the file.
type named struct {
	*bytes.Reader
	name string
}

func (n named) Name() string { return n.name }

func readBytes(b []byte) (*gguf.File, error) {
	return gguf.Read(named{bytes.NewReader(b), "model.gguf"}, int64(len(b)))
}

func TestReadRejectsMalformedFiles(t *testing.T) {
	long := strings.Repeat("x", 64)
	tests := []struct {
		name string
		file []byte
		want string // a substring of the error; every error also names the file
	}{
		{"empty file", nil, "not a GGUF file: the file is only 0 bytes"},
		{"not GGUF", []byte("PK\x03\x04 a zip file, not a model"), `not a GGUF file: it starts with "PK\x03\x04"`},
		{"truncated header", []byte("GGUF\x03\x00\x00\x00\x01\x00"), "header: truncated file: the tensor count needs 8 bytes at offset 8, only 2 left"},
		{"version 1", (&raw{b: []byte("GGUF")}).u32(1).u64(0).u64(0).b, "GGUF version 1 is not supported"},
		{"big-endian", []byte("GGUF\x00\x00\x00\x03" + strings.Repeat("\x00", 16)), "big-endian (its version field reads 3 byte-swapped)"},
		{"version 4", (&raw{b: []byte("GGUF")}).u32(4).u64(0).u64(0).b, "GGUF version 4 is not supported"},
		{"kv count 2^60", header(0, 1<<60).b, "1152921504606846976 key/values and 0 tensor infos cannot fit in the 0 bytes left"},
		{"tensor count 2^60", header(1<<60, 0).data(64), "cannot fit"},
		{"truncated key", append(header(0, 1).u64(100).b, "general.name......."...), "key/value 0: the key length 100 is more than the 19 bytes left"},
		{"key length 2^60", header(0, 1).u64(1 << 60).u32(0).u8(0).b, "the key length 1152921504606846976 is more than"},
		{"string length 2^60", header(0, 1).str("s").u32(8).u64(1 << 60).b, `key/value 0 ("s"): the string length 1152921504606846976 is more than the 0 bytes left`},
		{"array count 2^60", header(0, 1).str("a").u32(9).u32(4).u64(1 << 60).b, `key/value 0 ("a"): the array count 1152921504606846976 is more than`},
		{"string array count 2^60", header(0, 1).str("a").u32(9).u32(8).u64(1 << 60).str("x").b, "the array count 1152921504606846976"},
		{"truncated value", header(0, 1).str("u").u32(10).u32(1).b, `key/value 0 ("u"): truncated file: the value needs 8 bytes at offset 37, only 4 left`},
		{"unknown value type", header(0, 1).str("k").u32(13).u32(0).b, `key/value 0 ("k"): unknown value type 13`},
		{"unknown array type", header(0, 1).str("k").u32(9).u32(99).u64(0).b, `key/value 0 ("k"): array of unknown value type 99`},
		{"bool byte 2", header(0, 1).str("b").u32(7).u8(2).b, `key/value 0 ("b"): BOOL byte is 2, neither 0 nor 1`},
		{"bool array byte 7", header(0, 1).str("b").u32(9).u32(7).u64(2).u8(1).u8(7).b, "BOOL array element 1 is 7"},
		{"duplicate key", header(0, 2).kvU32("k", 1).kvU32("k", 2).b, `key/value 1 ("k"): duplicate key, first at key/value 0`},
		{"nested too deep", nested(17), "arrays nested more than 16 deep"},
		{"alignment 48", header(0, 1).kvU32("general.alignment", 48).b, `key "general.alignment": 48 is not a power of two`},
		{"alignment 0", header(0, 1).kvU32("general.alignment", 0).b, `key "general.alignment": 0 is not a power of two`},
		{"alignment string", header(0, 1).str("general.alignment").u32(8).str("64").b, `key "general.alignment": is STRING, want an integer`},
		{"alignment negative", header(0, 1).str("general.alignment").u32(5).u32(math.MaxUint32).b, `value -1 (INT32) does not fit in uint32`},
		{"truncated tensor infos", append(header(2, 0).tensor(strings.Repeat("a", 20), 0, 0, 8).u64(5).b, "ab"...), `tensor info 1: the tensor name length 5 is more than the 2 bytes left`},
		{"truncated tensor offset", header(1, 0).tensor(strings.Repeat("a", 20), 0, 0, 8).b[:70], `tensor info 0 ("aaaaaaaaaaaaaaaaaaaa"): truncated file: the offset needs 8 bytes at offset 68, only 2 left`},
		{"truncated shape", header(1, 0).tensor("a", 0, 0, 8, 8).b[:50], `tensor info 0 ("a"): truncated file: the shape needs 8 bytes`},
		{"name 64 bytes", header(1, 0).tensor(long, 0, 0, 1).data(32), `tensor info 0 ("` + long + `"): name is 64 bytes, more than ggml's 63`},
		{"5 dimensions", header(1, 0).tensor("a", 0, 0, 1, 1, 1, 1, 1).data(32), `tensor info 0 ("a"): 5 dimensions, more than ggml's 4`},
		{"unknown tensor type", header(1, 0).tensor("a", 99, 0, 4).data(32), `tensor info 0 ("a"): unknown type id 99`},
		{"retired tensor type", header(1, 0).tensor("a", 4, 0, 32).data(32), "unknown type id 4"},
		{"dimension over int64", header(1, 0).tensor("a", 0, 0, 1<<63).data(32), "dimension 0 is 9223372036854775808, more than int64 holds"},
		{"element count overflow", header(1, 0).tensor("a", 0, 0, 1<<32, 1<<32).data(32), "element count overflows int64"},
		{"byte size overflow", header(1, 0).tensor("a", 0, 0, 1<<61, 2).data(32), "shape [2305843009213693952 2]: F32 size overflows int64"},
		{"row size overflow", header(1, 0).tensor("a", 1, 0, 1<<62+4).data(32), "F16 size overflows int64"},
		{"partial block", header(1, 0).tensor("a", 2, 0, 31).data(32), "Q4_0 rows of 31 elements are not a multiple of its block size 32"},
		{"misaligned offset", header(2, 0).tensor("a", 0, 0, 4).tensor("b", 0, 16, 4).data(64), `tensor "b" has offset 16, expected 32: not a multiple of the alignment 32`},
		{"overlapping tensors", header(2, 0).tensor("a", 0, 0, 16).tensor("b", 0, 32, 4).data(64), `tensors "a" [0, 64) and "b" [32, 48) overlap`},
		{"overlap out of order", header(2, 0).tensor("a", 0, 32, 4).tensor("b", 0, 0, 16).data(64), `tensors "b" [0, 64) and "a" [32, 48) overlap`},
		{"duplicate tensor", header(2, 0).tensor("a", 0, 0, 4).tensor("a", 0, 32, 4).data(64), `tensor info 1 ("a"): duplicate tensor name, first at tensor info 0`},
		{"data past end", header(1, 0).tensor("a", 0, 0, 16).data(63), `tensor "a": data [0, +64) at absolute offset 64 runs past the end of the file (127 bytes): truncated file`},
		{"offset past end", header(1, 0).tensor("a", 0, 1<<62, 1).data(32), "runs past the end of the file"},
		{"offset wraps", header(1, 0).tensor("a", 0, math.MaxUint64-31, 16).data(32), "runs past the end of the file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := readBytes(tt.file)
			if err == nil {
				t.Fatalf("accepted: %d keys, %d tensors", len(f.Keys()), len(f.Tensors()))
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "gguf: model.gguf: ") {
				t.Errorf("error %q does not start by naming the file", msg)
			}
			if !strings.Contains(msg, tt.want) {
				t.Errorf("error %q\n  does not contain %q", msg, tt.want)
			}
		})
	}
}

// nested is a file whose one value is depth arrays, each holding the next.
func nested(depth int) []byte {
	r := header(0, 1).str("n").u32(9)
	for range depth - 1 {
		r.u32(9).u64(1)
	}
	return r.u32(4).u64(0).b
}

func TestNotGGUFIsDistinguishable(t *testing.T) {
	for _, b := range [][]byte{nil, []byte("GG"), []byte("{\"json\": true}")} {
		if _, err := readBytes(b); !errors.Is(err, gguf.ErrNotGGUF) {
			t.Errorf("%q: error %v is not ErrNotGGUF", b, err)
		}
	}
	if _, err := readBytes(header(0, 1).b); err == nil || errors.Is(err, gguf.ErrNotGGUF) {
		t.Errorf("a truncated GGUF file: %v, want an error other than ErrNotGGUF", err)
	}
}

func TestReadAcceptsEdgeCases(t *testing.T) {
	tests := []struct {
		name  string
		file  []byte
		check func(t *testing.T, f *gguf.File)
	}{
		{"version 2", (&raw{b: []byte("GGUF")}).u32(2).u64(0).u64(1).kvU32("k", 7).b, func(t *testing.T, f *gguf.File) {
			if v, err := f.Uint32("k"); f.Version() != 2 || v != 7 || err != nil {
				t.Errorf("version %d, k = %d, %v", f.Version(), v, err)
			}
		}},
		{"IQ and TQ types are known", header(3, 0).tensor("iq2", 16, 0, 256).tensor("tq1", 34, 96, 256).tensor("mx", 39, 160, 32).data(192), func(t *testing.T, f *gguf.File) {
			for name, want := range map[string]gguf.Type{"iq2": gguf.TypeIQ2_XXS, "tq1": gguf.TypeTQ1_0, "mx": gguf.TypeMXFP4} {
				if ti, _ := f.Tensor(name); ti.Type != want || ti.Size != uint64(want.TypeSize()) {
					t.Errorf("%s: %+v", name, ti)
				}
			}
		}},
		{"63-byte name", header(1, 0).tensor(strings.Repeat("n", 63), 0, 0, 1).data(4), nil},
		{"zero dimensions is a scalar", header(1, 0).tensor("s", 0, 0).data(4), func(t *testing.T, f *gguf.File) {
			if ti, _ := f.Tensor("s"); len(ti.Shape) != 0 || ti.Elements() != 1 || ti.Size != 4 {
				t.Errorf("%+v", ti)
			}
		}},
		{"empty tensor", header(2, 0).tensor("e", 0, 0, 0, 8).tensor("a", 0, 0, 4).data(16), func(t *testing.T, f *gguf.File) {
			if d, err := f.TensorData("e"); len(d) != 0 || err != nil {
				t.Errorf("empty tensor data %v, %v", d, err)
			}
		}},
		{"gap between tensors", header(2, 0).tensor("a", 0, 0, 4).tensor("b", 0, 64, 4).data(80), nil},
		{"tensors out of offset order", header(2, 0).tensor("a", 0, 32, 4).tensor("b", 0, 0, 4).data(48), nil},
		{"last tensor without padding", header(1, 0).tensor("a", 0, 0, 3).data(12), nil},
		{"alignment as UINT64", header(0, 1).str("general.alignment").u32(10).u64(64).b, func(t *testing.T, f *gguf.File) {
			if f.Alignment() != 64 || f.DataOffset() != 64 {
				t.Errorf("alignment %d, data offset %d", f.Alignment(), f.DataOffset())
			}
		}},
		{"nested arrays", nested(16), func(t *testing.T, f *gguf.File) {
			v, _ := f.Value("n")
			for range 15 {
				if v.Type() != gguf.ValueArray || v.ElemType() != gguf.ValueArray || v.Len() != 1 {
					t.Fatalf("level: %v [%v × %d]", v.Type(), v.ElemType(), v.Len())
				}
				v = v.Index(0)
			}
			if v.ElemType() != gguf.ValueUint32 || v.Len() != 0 {
				t.Errorf("innermost: [%v × %d]", v.ElemType(), v.Len())
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := readBytes(tt.file)
			if err != nil {
				t.Fatal(err)
			}
			for _, ti := range f.Tensors() {
				if _, err := f.Data(ti); err != nil {
					t.Errorf("Data(%s): %v", ti.Name, err)
				}
			}
			if tt.check != nil {
				tt.check(t, f)
			}
		})
	}
}

// TestReadTruncatedAtEveryByte cuts a ggml file at every length: each prefix
// is an error naming the file, except those that still hold all tensor data
// (only the last tensor's padding is missing).
func TestReadTruncatedAtEveryByte(t *testing.T) {
	full, err := os.ReadFile(filepath.Join(ggmlTestdataDir(t), "all_kv_types_align64.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := readBytes(full)
	if err != nil {
		t.Fatal(err)
	}
	var end uint64
	for _, ti := range f.Tensors() {
		end = max(end, f.DataOffset()+ti.Offset+ti.Size)
	}
	for n := range len(full) {
		_, err := readBytes(full[:n])
		switch {
		case uint64(n) >= end && err != nil:
			t.Errorf("%d bytes (all data present): %v", n, err)
		case uint64(n) < end && err == nil:
			t.Errorf("%d bytes: accepted a truncated file", n)
		case err != nil && !strings.HasPrefix(err.Error(), "gguf: model.gguf: "):
			t.Errorf("%d bytes: error %q does not name the file", n, err)
		}
	}
}

// TestHostileLengthsAllocateLittle checks that lengths claimed by a tiny
// file are refused before anything of their size is allocated.
func TestHostileLengthsAllocateLittle(t *testing.T) {
	files := [][]byte{
		header(0, 1<<60).b,
		header(1<<40, 0).data(1 << 10),
		header(0, 1).str("s").u32(8).u64(1 << 60).b,
		header(0, 1).str("a").u32(9).u32(12).u64(1 << 60).b,
		header(0, 1).str("a").u32(9).u32(9).u64(1 << 60).b,
		header(0, 1).u64(1 << 60).b,
	}
	for i, b := range files {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := readBytes(b); err == nil {
			t.Errorf("file %d accepted", i)
		}
		runtime.ReadMemStats(&after)
		if got := after.TotalAlloc - before.TotalAlloc; got > 64<<10 {
			t.Errorf("file %d (%d bytes): allocated %d bytes", i, len(b), got)
		}
	}
}

// FuzzRead feeds arbitrary bytes to Read. It must never panic or hang, must
// allocate no more than a small multiple of the input, and whatever it accepts
// must survive a write and a second read unchanged.
//
//	go test ./gguf -run='^$' -fuzz=FuzzRead -fuzztime=20s
func FuzzRead(f *testing.F) {
	dir := ggmlTestdataDir(f)
	for _, name := range []string{"all_kv_types_align64", "default_align", "no_tensors", "bad_naive_align64"} {
		b, err := os.ReadFile(filepath.Join(dir, name+".gguf"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(nested(3))
	f.Add(header(2, 1).kvU32("general.alignment", 64).tensor("a", 2, 0, 32).tensor("b", 0, 64, 2, 2).data(80))

	f.Fuzz(func(t *testing.T, b []byte) {
		// Every loop is bounded by the input's length, so even a hostile
		// input reads in milliseconds; 10 s means something loops that
		// should not (1 s failed for load alone while go test ran other
		// packages beside).
		start := time.Now()
		defer func() {
			if d := time.Since(start); d > 10*time.Second {
				t.Fatalf("%d-byte input took %v", len(b), d)
			}
		}()
		before := allocated()
		file, err := readBytes(b)
		// Worst cases measured by hand: an array of empty arrays costs about
		// 4x its bytes, a key/value table about 8x; 64x leaves room.
		if got, limit := allocated()-before, 64*uint64(len(b))+1<<20; got > limit {
			t.Fatalf("%d-byte input allocated %d bytes", len(b), got)
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), "gguf: model.gguf: ") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		exercise(t, file)

		// A file without tensors may end before the padding that would start
		// its data section (ggml writes such meta-only files), and a rewrite
		// adds that padding: up to general.alignment bytes, 2 GiB at most.
		// That is correct but too slow to do here.
		if file.DataOffset() > uint64(len(b))+1<<16 {
			return
		}
		var out bytes.Buffer
		if _, err := file.WriteTo(&out); err != nil {
			t.Fatalf("WriteTo of an accepted file: %v", err)
		}
		again, err := readBytes(out.Bytes())
		if err != nil {
			t.Fatalf("rereading the written file: %v", err)
		}
		sameContent(t, file, again)
		var out2 bytes.Buffer
		if _, err := again.WriteTo(&out2); err != nil || !bytes.Equal(out.Bytes(), out2.Bytes()) {
			t.Fatalf("second write differs from the first (%v)", err)
		}
	})
}

// allocated is the bytes allocated by the process so far. runtime/metrics
// reads it without stopping the world (runtime.ReadMemStats would, and cost
// the fuzzer most of its speed); small allocations are counted a span at a
// time, close enough for a bound with a megabyte of slack.
func allocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// exercise calls every accessor on every key and tensor; none may panic.
func exercise(t *testing.T, f *gguf.File) {
	for _, key := range f.Keys() {
		f.Uint32(key)
		f.Int64(key)
		f.Uint64Or(key, 1)
		f.Float32(key)
		f.Float64(key)
		f.Bool(key)
		f.String(key)
		f.Strings(key)
		f.Float32s(key)
		f.Int32s(key)
		f.Uint32s(key)
		v, _ := f.Value(key)
		for i := range v.Len() {
			v.Index(i)
		}
	}
	f.Architecture()
	f.FileType()
	f.ParameterCount()
	for _, ti := range f.Tensors() {
		d, err := f.Data(ti)
		if err != nil || uint64(len(d)) != ti.Size {
			t.Fatalf("Data(%q) = %d bytes, %v; want %d", ti.Name, len(d), err, ti.Size)
		}
	}
}

func sameContent(t *testing.T, a, b *gguf.File) {
	t.Helper()
	ka, kb := a.Metadata(), b.Metadata()
	if len(ka) != len(kb) {
		t.Fatalf("%d keys became %d", len(ka), len(kb))
	}
	for i := range ka {
		if ka[i].Key != kb[i].Key || !sameValue(ka[i].Value, kb[i].Value) {
			t.Fatalf("key %d: %q = %v became %q = %v", i, ka[i].Key, ka[i].Value.Any(), kb[i].Key, kb[i].Value.Any())
		}
	}
	ta, tb := a.Tensors(), b.Tensors()
	if len(ta) != len(tb) {
		t.Fatalf("%d tensors became %d", len(ta), len(tb))
	}
	for i := range ta {
		x, y := ta[i], tb[i]
		if x.Name != y.Name || x.Type != y.Type || x.Size != y.Size || !equalShape(x.Shape, y.Shape) {
			t.Fatalf("tensor %d: %+v became %+v", i, x, y)
		}
		dx, _ := a.Data(x)
		dy, _ := b.Data(y)
		if !bytes.Equal(dx, dy) {
			t.Fatalf("tensor %q: data changed", x.Name)
		}
	}
}

func equalShape(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// sameValue compares values by type and, for floats, by bits, so that NaN
// equals itself.
func sameValue(a, b gguf.Value) bool {
	if a.Type() != b.Type() || a.ElemType() != b.ElemType() || a.Len() != b.Len() {
		return false
	}
	if a.Type() == gguf.ValueArray {
		for i := range a.Len() {
			if !sameValue(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	}
	switch x := a.Any().(type) {
	case float32:
		return math.Float32bits(x) == math.Float32bits(b.Any().(float32))
	case float64:
		return math.Float64bits(x) == math.Float64bits(b.Any().(float64))
	}
	return a.Any() == b.Any()
}
