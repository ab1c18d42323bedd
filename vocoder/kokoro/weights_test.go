package kokoro

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/pth"
	"github.com/hearthstudio/hearth/pth/pthtest"
)

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

// wantFixture is what OpenWeights must return for pthtest.Fixture.
func wantFixture() map[string]*Tensor {
	s0 := pthtest.Seq(15, -3, 0.5)
	tr := make([]float32, 12)
	for i := 0; i < 3; i++ {
		for j := 0; j < 4; j++ {
			tr[i*4+j] = s0[i+3*j]
		}
	}
	return map[string]*Tensor{
		"bert.embeddings.word_embeddings.weight": {Shape: []int{4, 3}, Data: s0[:12]},
		"bert.embeddings.position_ids":           {Shape: []int{1, 5}, Data: pthtest.Seq(5, 0, 1)},
		"bert_encoder.weight":                    {Shape: []int{3, 4}, Data: tr},
		"bert_encoder.bias":                      {Shape: []int{3}, Data: s0[12:15]},
		"predictor.lstm.weight_ih_l0":            {Shape: []int{2, 3}, Data: pthtest.Seq(6, -1, 0.25)},
		"text_encoder.embedding.weight":          {Shape: []int{3, 2}, Data: pthtest.Seq(8, 2, -0.75)[2:8]},
		"decoder.generator.conv_post.weight":     {Shape: []int{2, 2, 3}, Data: foldedRef([]float32{2, -0.5}, pthtest.Seq(12, -1.5, 0.25), 2)},
		"decoder.generator.ups.0.weight":         {Shape: []int{3, 2, 2}, Data: foldedRef([]float32{1, 3, 0.5}, pthtest.Seq(12, 0.25, 0.5), 3)},
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
	path := writeTemp(t, "kokoro-v1_0.pth", pthtest.Fixture().Bytes(t))
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
	// The fixture's tensors as the .pth reader gives them: views gathered,
	// the DataParallel prefix dropped, weight norm not yet folded.
	data := pthtest.Fixture().Bytes(t)
	raw, err := pth.ReadStateDicts(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
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

func TestWeightsTensorErrors(t *testing.T) {
	path := writeTemp(t, "kokoro-v1_0.pth", pthtest.Fixture().Bytes(t))
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

func TestOpenWeightsBadFiles(t *testing.T) {
	good := pthtest.Fixture()
	without := func(module string) *pthtest.File {
		f := pthtest.Fixture()
		var ms []pthtest.Module
		for _, m := range f.Modules {
			if m.Name != module {
				ms = append(ms, m)
			}
		}
		f.Modules = ms
		return f
	}
	extra := pthtest.Fixture()
	extra.Modules = append(extra.Modules, pthtest.Module{Name: "vocoder2", Tensors: []pthtest.Tensor{{Name: "w", Storage: "4", Size: []int{2}}}})
	pastEnd := pthtest.Fixture()
	pastEnd.Modules[3].Tensors[0].Offset = 5 // 5 + 6 elements > 8
	bigStride := pthtest.Fixture()
	bigStride.Modules[3].Tensors[0].Stride = []int{1 << 30, 1 << 30}
	expanded := pthtest.Fixture()
	expanded.Modules[3].Tensors[0] = pthtest.Tensor{Name: "embedding.weight", Storage: "3", Size: []int{100, 2}, Stride: []int{0, 1}}
	loneG := pthtest.Fixture()
	loneG.Modules[4].Tensors = loneG.Modules[4].Tensors[:1]
	badG := pthtest.Fixture()
	badG.Modules[4].Tensors[0].Size = []int{1, 1, 2}
	shortStorage := pthtest.Fixture().Bytes(t)
	// A pickle that asks for a class no weights file has.
	evilZip := pthtest.ZipOf(t, map[string][]byte{"a/data.pkl": []byte("\x80\x02cos\nsystem\n)R.")})

	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "neither a PyTorch zip nor a safetensors file"},
		{"text", []byte("hello, this is not a model\n"), "neither a PyTorch zip nor a safetensors file"},
		{"zip without torch", pthtest.ZipOf(t, map[string][]byte{"README.md": []byte("hi")}), "not a torch.save checkpoint"},
		{"torchscript", pthtest.ZipOf(t, map[string][]byte{"m/data.pkl": nil, "m/constants.pkl": nil}), "TorchScript"},
		{"unknown class", evilZip, "class os.system is not part of a weights file"},
		{"missing module", without("predictor").Bytes(t), "module(s) predictor missing"},
		{"missing decoder", without("decoder").Bytes(t), "module(s) decoder missing"},
		{"extra module", extra.Bytes(t), `"vocoder2.w" belongs to no Kokoro module`},
		{"view past storage", pastEnd.Bytes(t), `"text_encoder.embedding.weight": view (offset 5, size [3 2], stride [2 1]) reads past its BF16 storage of 8 elements`},
		{"huge strides", bigStride.Bytes(t), "reads past its BF16 storage of 8 elements"},
		{"expanded view", expanded.Bytes(t), "view of shape [100 2] has more elements than its storage (8)"},
		{"weight_g alone", loneG.Bytes(t), `"decoder.generator.conv_post.weight_g" has no "decoder.generator.conv_post.weight_v"`},
		{"g shape", badG.Bytes(t), "g shape [1 1 2] does not match v shape [2 2 3]"},
		{"storage too short", shortenStorage(t, shortStorage), "storage 5: 40 bytes in the archive, want 48"},
		{"no storage record", dropRecord(t, good.Bytes(t), "kokoro-v1_0/data/7"), "no record kokoro-v1_0/data/7"},
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

func shortenStorage(tb testing.TB, data []byte) []byte {
	return pthtest.Rezip(tb, data, func(name string, b []byte) []byte {
		if name == "kokoro-v1_0/data/5" {
			return b[:40]
		}
		return b
	})
}

func dropRecord(tb testing.TB, data []byte, drop string) []byte {
	return pthtest.Rezip(tb, data, func(name string, b []byte) []byte {
		if name == drop {
			return nil
		}
		return b
	})
}

// Every truncation of a good checkpoint is an error naming the file (the
// reader's own truncation and corruption tests are package pth's).
func TestOpenWeightsTruncated(t *testing.T) {
	good := pthtest.Fixture().Bytes(t)
	for _, n := range []int{0, 3, len(good) / 2, len(good) - 1} {
		path := writeTemp(t, "cut.pth", good[:n])
		if _, err := OpenWeights(path); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("truncated to %d of %d bytes: error %v, want one naming the file", n, len(good), err)
		}
	}
}
