package gguf_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/gguf"
	"github.com/hearthstudio/hearth/internal/sharedtest"
)

// ggmlTestdataDir finds shared/testdata/ggml by walking up from the package
// directory: shared/ is next to the checkout (../../shared from gguf/ here, a
// sibling of the clone in CI). A missing directory fails the test: these files
// are the external oracle and a silent skip would hide that.
func ggmlTestdataDir(tb testing.TB) string {
	return sharedtest.Dir(tb, "ggml")
}

// The ggml-written files with a JSON sidecar of what ggml's reader returned.
var ggmlFiles = []string{"all_kv_types_align64", "default_align", "no_tensors"}

// sidecar is the schema of testdata/ggml/*.json (see its README.md).
type sidecar struct {
	File       string `json:"file"`
	FileSize   int64  `json:"file_size"`
	Version    uint32 `json:"version"`
	Alignment  uint64 `json:"alignment"`
	NKV        int    `json:"n_kv"`
	NTensors   int    `json:"n_tensors"`
	DataOffset uint64 `json:"data_offset"`
	Metadata   []struct {
		Key       string `json:"key"`
		Type      string `json:"type"`
		ArrayType string `json:"array_type"`
		Count     int    `json:"count"`
		Value     any    `json:"value"`
		Bits      any    `json:"bits"`
	} `json:"metadata"`
	Tensors []struct {
		Name      string   `json:"name"`
		Type      string   `json:"type"`
		GGMLType  uint32   `json:"ggml_type"`
		NDims     int      `json:"n_dims"`
		NE        []uint64 `json:"ne"`
		NElements uint64   `json:"n_elements"`
		Offset    uint64   `json:"offset"`
		AbsOffset uint64   `json:"abs_offset"`
		NBytes    uint64   `json:"nbytes"`
		DataHex   string   `json:"data_hex"`
	} `json:"tensors"`
}

func readSidecar(t *testing.T, dir, name string) sidecar {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // u64 values above 2^53
	var sc sidecar
	if err := dec.Decode(&sc); err != nil {
		t.Fatalf("%s.json: %v", name, err)
	}
	return sc
}

// openers are the two ways to read a file: memory-mapped, and through an
// io.ReaderAt.
var openers = []struct {
	name string
	open func(path string) (*gguf.File, error)
}{
	{"Open", gguf.Open},
	{"Read", func(path string) (*gguf.File, error) {
		fh, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		st, err := fh.Stat()
		if err != nil {
			return nil, err
		}
		// fh stays open for the test's life; the process exit closes it.
		return gguf.Read(fh, st.Size())
	}},
}

// scalarText is an integer, bool or string value as the sidecar prints it
// (exact decimal for integers), and a float's bits as "0x…".
func scalarText(v gguf.Value) string {
	switch x := v.Any().(type) {
	case float32:
		return fmt.Sprintf("0x%08x", math.Float32bits(x))
	case float64:
		return fmt.Sprintf("0x%016x", math.Float64bits(x))
	case string:
		return x
	}
	return fmt.Sprint(v.Any())
}

// sidecarText is the same for a sidecar value; floats use their "bits".
func sidecarText(value, bits any) string {
	if bits != nil {
		return bits.(string)
	}
	switch x := value.(type) {
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	case string:
		return x
	}
	return fmt.Sprintf("unexpected %T", value)
}

func TestReadMatchesGGML(t *testing.T) {
	dir := ggmlTestdataDir(t)
	for _, name := range ggmlFiles {
		sc := readSidecar(t, dir, name)
		for _, op := range openers {
			t.Run(name+"/"+op.name, func(t *testing.T) {
				f, err := op.open(filepath.Join(dir, name+".gguf"))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if op.name == "Open" && !f.Mapped() {
					t.Error("Open did not memory-map the file")
				}
				checkFile(t, f, sc)
			})
		}
	}
}

func checkFile(t *testing.T, f *gguf.File, sc sidecar) {
	t.Helper()
	if f.Size() != sc.FileSize || f.Version() != sc.Version || f.Alignment() != sc.Alignment || f.DataOffset() != sc.DataOffset {
		t.Errorf("size %d version %d alignment %d data offset %d, ggml: %d %d %d %d",
			f.Size(), f.Version(), f.Alignment(), f.DataOffset(), sc.FileSize, sc.Version, sc.Alignment, sc.DataOffset)
	}

	keys := f.Keys()
	if len(keys) != sc.NKV || len(sc.Metadata) != sc.NKV {
		t.Fatalf("%d keys, ggml %d", len(keys), sc.NKV)
	}
	for i, want := range sc.Metadata {
		if keys[i] != want.Key {
			t.Errorf("key %d is %q, ggml %q", i, keys[i], want.Key)
			continue
		}
		v, ok := f.Value(want.Key)
		if !ok {
			t.Errorf("Value(%q) missing", want.Key)
			continue
		}
		if v.Type().String() != want.Type {
			t.Errorf("%s: type %s, ggml %s", want.Key, v.Type(), want.Type)
			continue
		}
		if v.Type() != gguf.ValueArray {
			if got, w := scalarText(v), sidecarText(want.Value, want.Bits); got != w {
				t.Errorf("%s = %q, ggml %q", want.Key, got, w)
			}
			continue
		}
		if v.ElemType().String() != want.ArrayType || v.Len() != want.Count {
			t.Errorf("%s: [%s × %d], ggml [%s × %d]", want.Key, v.ElemType(), v.Len(), want.ArrayType, want.Count)
			continue
		}
		values := want.Value.([]any)
		bits, _ := want.Bits.([]any)
		for j := range v.Len() {
			var b any
			if bits != nil {
				b = bits[j]
			}
			if got, w := scalarText(v.Index(j)), sidecarText(values[j], b); got != w {
				t.Errorf("%s[%d] = %q, ggml %q", want.Key, j, got, w)
			}
		}
	}

	tensors := f.Tensors()
	if len(tensors) != sc.NTensors || len(sc.Tensors) != sc.NTensors {
		t.Fatalf("%d tensors, ggml %d", len(tensors), sc.NTensors)
	}
	var params uint64
	for i, want := range sc.Tensors {
		got := tensors[i]
		if got.Name != want.Name || got.Type.String() != want.Type || uint32(got.Type) != want.GGMLType ||
			len(got.Shape) != want.NDims || fmt.Sprint(got.Shape) != fmt.Sprint(want.NE) ||
			got.Elements() != want.NElements || got.Offset != want.Offset ||
			f.DataOffset()+got.Offset != want.AbsOffset || got.Size != want.NBytes {
			t.Errorf("tensor %d: %s %s %v elements %d offset %d size %d; ggml %s %s %v elements %d offset %d size %d",
				i, got.Name, got.Type, got.Shape, got.Elements(), got.Offset, got.Size,
				want.Name, want.Type, want.NE, want.NElements, want.Offset, want.NBytes)
		}
		if byName, ok := f.Tensor(want.Name); !ok || byName.Offset != want.Offset {
			t.Errorf("Tensor(%q) = %+v, %v", want.Name, byName, ok)
		}
		data, err := f.TensorData(want.Name)
		if err != nil {
			t.Errorf("TensorData(%q): %v", want.Name, err)
		} else if hex.EncodeToString(data) != want.DataHex {
			t.Errorf("TensorData(%q) = %x, ggml %s", want.Name, data, want.DataHex)
		}
		params += want.NElements
	}
	if f.ParameterCount() != params {
		t.Errorf("ParameterCount() = %d, want %d", f.ParameterCount(), params)
	}
}

// TestRoundTripIsByteIdentical reads each ggml file and writes it back: the
// writer lays files out as ggml does, so the bytes must not change.
func TestRoundTripIsByteIdentical(t *testing.T) {
	dir := ggmlTestdataDir(t)
	for _, name := range ggmlFiles {
		for _, op := range openers {
			t.Run(name+"/"+op.name, func(t *testing.T) {
				path := filepath.Join(dir, name+".gguf")
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				f, err := op.open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				var buf bytes.Buffer
				n, err := f.WriteTo(&buf)
				if err != nil {
					t.Fatal(err)
				}
				if n != int64(buf.Len()) {
					t.Errorf("WriteTo returned %d, wrote %d bytes", n, buf.Len())
				}
				if got := buf.Bytes(); !bytes.Equal(got, want) {
					t.Errorf("round trip differs: %d bytes, want %d; first difference at byte %d",
						len(got), len(want), firstDiff(got, want))
				}
			})
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestRejectsNaiveAlignment is the README's negative vector: a file that
// claims general.alignment 64 but was laid out with 32.
func TestRejectsNaiveAlignment(t *testing.T) {
	dir := ggmlTestdataDir(t)
	path := filepath.Join(dir, "bad_naive_align64.gguf")
	for _, op := range openers {
		t.Run(op.name, func(t *testing.T) {
			f, err := op.open(path)
			if err == nil {
				f.Close()
				t.Fatal("bad_naive_align64.gguf was accepted")
			}
			const want = `tensor "blk.0.ffn_down.weight" has offset 96, expected 128`
			if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file and say %q", err, want)
			}
		})
	}
}

func TestDataAfterClose(t *testing.T) {
	dir := ggmlTestdataDir(t)
	f, err := gguf.Open(filepath.Join(dir, "default_align.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := f.TensorData("a.f32"); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("TensorData after Close: %v", err)
	}
}

func TestOpenUnusualFiles(t *testing.T) {
	dir := t.TempDir()
	if _, err := gguf.Open(filepath.Join(dir, "absent.gguf")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v, want os.ErrNotExist", err)
	}
	// An empty file cannot be mapped, so Open falls back to reading it.
	empty := filepath.Join(dir, "empty.gguf")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := gguf.Open(empty); !errors.Is(err, gguf.ErrNotGGUF) || !strings.Contains(err.Error(), empty) {
		t.Errorf("an empty file: %v, want ErrNotGGUF naming the file", err)
	}
	if _, err := gguf.Open(dir); err == nil {
		t.Error("a directory: no error")
	}
}

// BenchmarkOpen4GB opens and indexes a model the size and shape of
// Llama-3.1-8B in Q4_K (4.6 GB): 291 tensors and a 128256-token vocabulary
// with 280147 merges, which are most of the work. The file is written once,
// sparse: the writer streams every byte, but runs of zeros become holes, so it
// costs little disk and the benchmark measures parsing, not the page cache.
func BenchmarkOpen4GB(b *testing.B) {
	path := filepath.Join(b.TempDir(), "llama-8b-q4_k.gguf")
	size, err := writeBenchModel(path)
	if err != nil {
		b.Skipf("cannot write the 4 GB benchmark file in %s: %v", filepath.Dir(path), err)
	}
	b.Logf("%s: %.2f GB", filepath.Base(path), float64(size)/1e9)
	b.Run("mmap", func(b *testing.B) {
		for b.Loop() {
			f, err := gguf.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	})
	b.Run("ReaderAt", func(b *testing.B) {
		fh, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		defer fh.Close()
		for b.Loop() {
			if _, err := gguf.Read(fh, size); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func writeBenchModel(path string) (int64, error) {
	fh, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer fh.Close()
	out := &sparseWriter{f: fh}
	w := gguf.NewWriter(out)

	const (
		vocab  = 128256
		merges = 280147
		layers = 32
		embd   = 4096
		kvDim  = 1024
		ffn    = 14336
	)
	tokens := make([]string, vocab)
	types := make([]int32, vocab)
	for i := range tokens {
		tokens[i] = fmt.Sprintf("Ġtok%x", i*7919%1000003)
		types[i] = 1
	}
	pairs := make([]string, merges)
	for i := range pairs {
		pairs[i] = fmt.Sprintf("Ġa%d b%d", i%977, i%331)
	}
	for _, err := range []error{
		w.SetString("general.architecture", "llama"),
		w.SetString("general.name", "benchmark 8B"),
		w.SetUint32("general.file_type", 15),
		w.SetUint32("llama.block_count", layers),
		w.SetUint32("llama.context_length", 131072),
		w.SetUint32("llama.embedding_length", embd),
		w.SetUint32("llama.feed_forward_length", ffn),
		w.SetUint32("llama.attention.head_count", 32),
		w.SetUint32("llama.attention.head_count_kv", 8),
		w.SetFloat32("llama.rope.freq_base", 500000),
		w.SetFloat32("llama.attention.layer_norm_rms_epsilon", 1e-5),
		w.SetString("tokenizer.ggml.model", "gpt2"),
		w.SetString("tokenizer.ggml.pre", "llama-bpe"),
		w.SetStrings("tokenizer.ggml.tokens", tokens),
		w.SetInt32s("tokenizer.ggml.token_type", types),
		w.SetStrings("tokenizer.ggml.merges", pairs),
		w.SetUint32("tokenizer.ggml.bos_token_id", 128000),
		w.SetString("tokenizer.chat_template", strings.Repeat("{% for m in messages %}{{ m.content }}{% endfor %}", 20)),
	} {
		if err != nil {
			return 0, err
		}
	}
	type tensor struct {
		name  string
		typ   gguf.Type
		shape []uint64
	}
	ts := []tensor{{"token_embd.weight", gguf.TypeQ4_K, []uint64{embd, vocab}}}
	for l := range layers {
		p := fmt.Sprintf("blk.%d.", l)
		ts = append(ts,
			tensor{p + "attn_norm.weight", gguf.TypeF32, []uint64{embd}},
			tensor{p + "attn_q.weight", gguf.TypeQ4_K, []uint64{embd, embd}},
			tensor{p + "attn_k.weight", gguf.TypeQ4_K, []uint64{embd, kvDim}},
			tensor{p + "attn_v.weight", gguf.TypeQ4_K, []uint64{embd, kvDim}},
			tensor{p + "attn_output.weight", gguf.TypeQ4_K, []uint64{embd, embd}},
			tensor{p + "ffn_norm.weight", gguf.TypeF32, []uint64{embd}},
			tensor{p + "ffn_gate.weight", gguf.TypeQ4_K, []uint64{embd, ffn}},
			tensor{p + "ffn_up.weight", gguf.TypeQ4_K, []uint64{embd, ffn}},
			tensor{p + "ffn_down.weight", gguf.TypeQ4_K, []uint64{ffn, embd}},
		)
	}
	ts = append(ts,
		tensor{"output_norm.weight", gguf.TypeF32, []uint64{embd}},
		tensor{"output.weight", gguf.TypeQ6_K, []uint64{embd, vocab}},
	)
	for _, t := range ts {
		if err := w.AddTensor(t.name, t.typ, t.shape); err != nil {
			return 0, err
		}
	}
	for _, t := range ts {
		if err := w.WriteTensor(t.name, zeroReader{}); err != nil {
			return 0, err
		}
	}
	if err := w.Close(); err != nil {
		return 0, err
	}
	// Trailing holes were skipped, not written: give the file its length.
	if err := fh.Truncate(out.n); err != nil {
		return 0, err
	}
	return out.n, fh.Close()
}

// zeroReader reads zeros forever.
type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// sparseWriter writes to f, seeking over all-zero writes to leave holes.
type sparseWriter struct {
	f    *os.File
	n    int64
	zero [64 << 10]byte
}

func (s *sparseWriter) allZero(p []byte) bool {
	for len(p) > 0 {
		k := min(len(p), len(s.zero))
		if !bytes.Equal(p[:k], s.zero[:k]) {
			return false
		}
		p = p[k:]
	}
	return true
}

func (s *sparseWriter) Write(p []byte) (int, error) {
	if s.allZero(p) {
		if _, err := s.f.Seek(int64(len(p)), io.SeekCurrent); err != nil {
			return 0, err
		}
		s.n += int64(len(p))
		return len(p), nil
	}
	k, err := s.f.Write(p)
	s.n += int64(k)
	return k, err
}
