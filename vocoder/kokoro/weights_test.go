package kokoro

import (
	"archive/zip"
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// seq returns n values start, start+step, … (multiples of 1/4 stay exact in
// f16 and bf16, so every dtype can be compared exactly).
func seq(n int, start, step float32) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = start + float32(i)*step
	}
	return out
}

// fixturePTH is a checkpoint with every case the reader handles: a
// DataParallel "module." prefix, a storage shared by two tensors (one a
// transposed view, one at an offset), f16 and bf16 storages, an int64
// buffer, an nn.Parameter, and weight norm in both of torch's layouts.
func fixturePTH() *ptFile {
	return &ptFile{
		archive: "kokoro-v1_0",
		storages: map[string]ptStorage{
			"0": {"F32", seq(15, -3, 0.5)},
			"1": {"I64", seq(5, 0, 1)},
			"2": {"F16", seq(6, -1, 0.25)},
			"3": {"BF16", seq(8, 2, -0.75)},
			"4": {"F32", []float32{2, -0.5}},
			"5": {"F32", seq(12, -1.5, 0.25)},
			"6": {"F32", []float32{1, 3, 0.5}},
			"7": {"F32", seq(12, 0.25, 0.5)},
		},
		modules: []ptModule{
			{"bert", []ptTensor{
				{name: "module.embeddings.word_embeddings.weight", storage: "0", size: []int{4, 3}},
				{name: "module.embeddings.position_ids", storage: "1", size: []int{1, 5}},
			}},
			{"bert_encoder", []ptTensor{
				// The transpose of the first 12 values: element (i, j) is
				// storage[i + 3j].
				{name: "weight", storage: "0", size: []int{3, 4}, stride: []int{1, 3}},
				{name: "bias", storage: "0", offset: 12, size: []int{3}},
			}},
			{"predictor", []ptTensor{
				{name: "lstm.weight_ih_l0", storage: "2", size: []int{2, 3}, param: true},
			}},
			{"text_encoder", []ptTensor{
				{name: "embedding.weight", storage: "3", offset: 2, size: []int{3, 2}},
			}},
			{"decoder", []ptTensor{
				{name: "generator.conv_post.weight_g", storage: "4", size: []int{2, 1, 1}},
				{name: "generator.conv_post.weight_v", storage: "5", size: []int{2, 2, 3}},
				{name: "generator.ups.0.parametrizations.weight.original0", storage: "6", size: []int{3, 1, 1}},
				{name: "generator.ups.0.parametrizations.weight.original1", storage: "7", size: []int{3, 2, 2}},
			}},
		},
	}
}

func writeTemp(tb testing.TB, name string, data []byte) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		tb.Fatal(err)
	}
	return p
}

// foldedRef is w = g·v/‖v‖ per row of dim 0, written out directly.
func foldedRef(g, v []float32, rows int) []float32 {
	per := len(v) / rows
	out := make([]float32, len(v))
	for r := 0; r < rows; r++ {
		var ss float64
		for _, x := range v[r*per : (r+1)*per] {
			ss += float64(x) * float64(x)
		}
		for k := 0; k < per; k++ {
			out[r*per+k] = float32(float64(g[r]) * float64(v[r*per+k]) / math.Sqrt(ss))
		}
	}
	return out
}

// wantFixture is what OpenWeights must return for fixturePTH.
func wantFixture() map[string]*Tensor {
	s0 := seq(15, -3, 0.5)
	tr := make([]float32, 12)
	for i := 0; i < 3; i++ {
		for j := 0; j < 4; j++ {
			tr[i*4+j] = s0[i+3*j]
		}
	}
	return map[string]*Tensor{
		"bert.embeddings.word_embeddings.weight": {Shape: []int{4, 3}, Data: s0[:12]},
		"bert.embeddings.position_ids":           {Shape: []int{1, 5}, Data: seq(5, 0, 1)},
		"bert_encoder.weight":                    {Shape: []int{3, 4}, Data: tr},
		"bert_encoder.bias":                      {Shape: []int{3}, Data: s0[12:15]},
		"predictor.lstm.weight_ih_l0":            {Shape: []int{2, 3}, Data: seq(6, -1, 0.25)},
		"text_encoder.embedding.weight":          {Shape: []int{3, 2}, Data: seq(8, 2, -0.75)[2:8]},
		"decoder.generator.conv_post.weight":     {Shape: []int{2, 2, 3}, Data: foldedRef([]float32{2, -0.5}, seq(12, -1.5, 0.25), 2)},
		"decoder.generator.ups.0.weight":         {Shape: []int{3, 2, 2}, Data: foldedRef([]float32{1, 3, 0.5}, seq(12, 0.25, 0.5), 3)},
	}
}

func checkWeights(t *testing.T, w *Weights, want map[string]*Tensor, tol float64) {
	t.Helper()
	if got := len(w.Names()); got != len(want) {
		t.Errorf("%d tensors %v, want %d", got, w.Names(), len(want))
	}
	for name, wt := range want {
		got, err := w.Tensor(name, wt.Shape...)
		if err != nil {
			t.Error(err)
			continue
		}
		for i := range wt.Data {
			if d := math.Abs(float64(got.Data[i] - wt.Data[i])); d > tol {
				t.Errorf("%s[%d] = %g, want %g", name, i, got.Data[i], wt.Data[i])
				break
			}
		}
	}
}

func TestOpenWeightsPTH(t *testing.T) {
	path := writeTemp(t, "kokoro-v1_0.pth", fixturePTH().bytes(t))
	w, err := OpenWeights(path)
	if err != nil {
		t.Fatal(err)
	}
	// Folding is a few f64 operations rounded once to f32.
	checkWeights(t, w, wantFixture(), 1e-6)
	for _, gone := range []string{"decoder.generator.conv_post.weight_g", "decoder.generator.ups.0.parametrizations.weight.original1"} {
		if w.Has(gone) {
			t.Errorf("%s is still there after folding", gone)
		}
	}
	if got := w.Module("decoder"); len(got) != 2 {
		t.Errorf("Module(decoder) = %v", got)
	}
	// Each folded row's norm is |g|.
	cp, _ := w.Tensor("decoder.generator.conv_post.weight")
	for r, g := range []float64{2, 0.5} {
		var ss float64
		for _, x := range cp.Data[r*6 : (r+1)*6] {
			ss += float64(x) * float64(x)
		}
		if math.Abs(math.Sqrt(ss)-g) > 1e-6 {
			t.Errorf("row %d norm %g, want %g", r, math.Sqrt(ss), g)
		}
	}
}

// The same weights converted to safetensors (names "module.param", weight
// norm still split, as a plain conversion of the state dicts leaves it) load
// to the same tensors, in f32, f16 and bf16.
func TestOpenWeightsSafetensors(t *testing.T) {
	raw := map[string]*Tensor{}
	f := fixturePTH()
	for _, m := range f.modules {
		for _, pt := range m.tensors {
			st := f.storages[pt.storage]
			v := (&pthTensor{
				storage: &pthStorage{class: storageClass{"F32", 4}, numel: int64(len(st.data)), data: encodeStorage(ptStorage{"F32", st.data})},
				offset:  int64(pt.offset), size: i64s(pt.size), stride: i64s(strideOr(pt)),
			})
			tt, err := v.materialize(pt.name)
			if err != nil {
				t.Fatal(err)
			}
			name := m.name + "." + pt.name
			if m.name == "bert" {
				name = "bert." + strings.TrimPrefix(pt.name, "module.")
			}
			raw[name] = tt
		}
	}
	// A DataParallel prefix after the module name is dropped too.
	raw["bert.module.embeddings.position_ids"] = raw["bert.embeddings.position_ids"]
	delete(raw, "bert.embeddings.position_ids")
	for _, dtype := range []string{"F32", "F16", "BF16"} {
		t.Run(dtype, func(t *testing.T) {
			w, err := OpenWeights(writeTemp(t, "kokoro.safetensors", safetensorsBytes(t, raw, dtype)))
			if err != nil {
				t.Fatal(err)
			}
			// The fixture's values are multiples of 1/4 below 8: exact in
			// every dtype, so only the folding rounds.
			checkWeights(t, w, wantFixture(), 1e-6)
		})
	}
}

func i64s(xs []int) []int64 {
	out := make([]int64, len(xs))
	for i, x := range xs {
		out[i] = int64(x)
	}
	return out
}

func strideOr(t ptTensor) []int {
	if t.stride != nil {
		return t.stride
	}
	return contiguousStride(t.size)
}

func TestWeightsTensorErrors(t *testing.T) {
	path := writeTemp(t, "kokoro-v1_0.pth", fixturePTH().bytes(t))
	w, err := OpenWeights(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.Tensor("decoder.generator.conv_post.weight", 2, 2, 4)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `"decoder.generator.conv_post.weight" has shape [2 2 3], want [2 2 4]`) {
		t.Errorf("wrong shape: %v", err)
	}
	if _, err := w.Tensor("decoder.generator.conv_post.weight", 2, -1, 3); err != nil {
		t.Errorf("wildcard dimension: %v", err)
	}
	_, err = w.Tensor("decoder.generator.conv_pre.weight")
	if !errors.Is(err, ErrNoTensor) || !strings.Contains(err.Error(), "decoder.generator.conv_post.weight") {
		t.Errorf("missing tensor: %v (want the neighbours named)", err)
	}
}

func zipOf(tb testing.TB, files map[string][]byte) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for n, d := range files {
		w, err := zw.Create(n)
		if err != nil {
			tb.Fatal(err)
		}
		w.Write(d)
	}
	zw.Close()
	return buf.Bytes()
}

func TestOpenWeightsBadFiles(t *testing.T) {
	good := fixturePTH()
	without := func(module string) *ptFile {
		f := fixturePTH()
		var ms []ptModule
		for _, m := range f.modules {
			if m.name != module {
				ms = append(ms, m)
			}
		}
		f.modules = ms
		return f
	}
	extra := fixturePTH()
	extra.modules = append(extra.modules, ptModule{"vocoder2", []ptTensor{{name: "w", storage: "4", size: []int{2}}}})
	pastEnd := fixturePTH()
	pastEnd.modules[3].tensors[0].offset = 5 // 5 + 6 elements > 8
	bigStride := fixturePTH()
	bigStride.modules[3].tensors[0].stride = []int{1 << 30, 1 << 30}
	expanded := fixturePTH()
	expanded.modules[3].tensors[0] = ptTensor{name: "embedding.weight", storage: "3", size: []int{100, 2}, stride: []int{0, 1}}
	loneG := fixturePTH()
	loneG.modules[4].tensors = loneG.modules[4].tensors[:1]
	badG := fixturePTH()
	badG.modules[4].tensors[0].size = []int{1, 1, 2}
	shortStorage := fixturePTH().bytes(t)
	// A pickle that asks for a class no weights file has.
	evilZip := zipOf(t, map[string][]byte{"a/data.pkl": []byte("\x80\x02cos\nsystem\n)R.")})

	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "neither a PyTorch zip nor a safetensors file"},
		{"text", []byte("hello, this is not a model\n"), "neither a PyTorch zip nor a safetensors file"},
		{"zip without torch", zipOf(t, map[string][]byte{"README.md": []byte("hi")}), "not a torch.save checkpoint"},
		{"torchscript", zipOf(t, map[string][]byte{"m/data.pkl": nil, "m/constants.pkl": nil}), "TorchScript"},
		{"unknown class", evilZip, "class os.system is not part of a weights file"},
		{"missing module", without("predictor").bytes(t), "module(s) predictor missing"},
		{"missing decoder", without("decoder").bytes(t), "module(s) decoder missing"},
		{"extra module", extra.bytes(t), `"vocoder2.w" belongs to no Kokoro module`},
		{"view past storage", pastEnd.bytes(t), `"text_encoder.embedding.weight": view (offset 5, size [3 2], stride [2 1]) reads past its BF16 storage of 8 elements`},
		{"huge strides", bigStride.bytes(t), "reads past its BF16 storage of 8 elements"},
		{"expanded view", expanded.bytes(t), "view of shape [100 2] has more elements than its storage (8)"},
		{"weight_g alone", loneG.bytes(t), `"decoder.generator.conv_post.weight_g" has no "decoder.generator.conv_post.weight_v"`},
		{"g shape", badG.bytes(t), "g shape [1 1 2] does not match v shape [2 2 3]"},
		{"storage too short", shortenStorage(t, shortStorage), "storage 5: 40 bytes in the archive, want 48"},
		{"no storage record", dropRecord(t, good.bytes(t), "kokoro-v1_0/data/7"), "no record kokoro-v1_0/data/7"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeTemp(t, "bad.pth", c.data)
			_, err := OpenWeights(path)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want the path and %q", err, c.want)
			}
		})
	}
}

// rezip copies a zip, letting edit change or drop (nil) each record.
func rezip(tb testing.TB, data []byte, edit func(name string, b []byte) []byte) []byte {
	tb.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		tb.Fatal(err)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range zr.File {
		rc, _ := f.Open()
		var b bytes.Buffer
		b.ReadFrom(rc)
		rc.Close()
		nb := edit(f.Name, b.Bytes())
		if nb == nil {
			continue
		}
		w, _ := zw.CreateHeader(&zip.FileHeader{Name: f.Name, Method: zip.Store})
		w.Write(nb)
	}
	zw.Close()
	return buf.Bytes()
}

func shortenStorage(tb testing.TB, data []byte) []byte {
	return rezip(tb, data, func(name string, b []byte) []byte {
		if name == "kokoro-v1_0/data/5" {
			return b[:40]
		}
		return b
	})
}

func dropRecord(tb testing.TB, data []byte, drop string) []byte {
	return rezip(tb, data, func(name string, b []byte) []byte {
		if name == drop {
			return nil
		}
		return b
	})
}

// Every truncation of a good checkpoint is an error naming the file, never
// a panic; so is every prefix of its pickle, and a byte flipped anywhere
// may load or fail but must not panic.
func TestOpenWeightsTruncatedAndCorrupt(t *testing.T) {
	good := fixturePTH().bytes(t)
	for n := 0; n < len(good); n++ {
		if _, err := readPTH(bytes.NewReader(good[:n]), int64(n)); err == nil {
			t.Fatalf("truncated to %d of %d bytes: no error", n, len(good))
		}
	}
	for _, n := range []int{0, 3, len(good) / 2, len(good) - 1} {
		path := writeTemp(t, "cut.pth", good[:n])
		if _, err := OpenWeights(path); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("truncated to %d of %d bytes: error %v, want one naming the file", n, len(good), err)
		}
	}
	pkl := fixturePTH().pickle()
	for n := 0; n < len(pkl); n++ {
		cut := rezip(t, good, func(name string, b []byte) []byte {
			if strings.HasSuffix(name, "data.pkl") {
				return pkl[:n]
			}
			return b
		})
		if _, err := readPTH(bytes.NewReader(cut), int64(len(cut))); err == nil {
			t.Fatalf("pickle cut to %d of %d bytes: no error", n, len(pkl))
		}
	}
	for i := 0; i < len(pkl); i++ {
		for _, x := range []byte{0x01, 0xff} {
			bad := bytes.Clone(pkl)
			bad[i] ^= x
			cut := rezip(t, good, func(name string, b []byte) []byte {
				if strings.HasSuffix(name, "data.pkl") {
					return bad
				}
				return b
			})
			readPTH(bytes.NewReader(cut), int64(len(cut))) // must return
		}
	}
}

// FuzzReadPTH feeds arbitrary data.pkl contents and archives to the reader:
// go test ./vocoder -run '^$' -fuzz FuzzReadPTH -fuzzminimizetime 1s (the
// default minimisation, 60 s per new input on these 3 KB archives, looks
// like a stall).
func FuzzReadPTH(f *testing.F) {
	f.Add(fixturePTH().bytes(f))
	f.Add(fixturePTH().pickle())
	f.Fuzz(func(t *testing.T, data []byte) {
		readPTH(bytes.NewReader(data), int64(len(data)))
		z := zipOf(t, map[string][]byte{"a/data.pkl": data, "a/data/0": make([]byte, 64)})
		readPTH(bytes.NewReader(z), int64(len(z)))
	})
}
