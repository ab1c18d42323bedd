package adapter

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/hfimport"
	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/internal/logitstest"
	"github.com/hearthstudio/hearth/safetensors"
)

// TestMatchesPEFT is the external oracle: for each adapter that
// testdata/peft/make_fixtures.py saved with peft's own save_pretrained on a
// base of engine/model/testdata/hf, the base imported by hearth with the
// adapter read by ReadPEFT gives transformers+peft's float32 logits on both
// backends, and so does the model merged with it; WritePEFT writes peft's
// tensors back bit for bit. The bases hold f16-exact weights, the adapters
// f32, and every side computes in f32, so the tolerance is engine/model's
// hfTol for transformers' logits, 1e-5 of the range (the merge adds one
// f32 rounding of W + ΔW).
func TestMatchesPEFT(t *testing.T) {
	exps, _ := filepath.Glob(filepath.Join("testdata", "peft", "*", "expected.json"))
	if len(exps) == 0 {
		t.Fatal("no fixtures in testdata/peft: they are part of the test; make_fixtures.py (torch, transformers, peft) makes them")
	}
	dev, err := gpu.Open(gpu.OptionsFromEnv())
	if err != nil {
		t.Fatalf("the GPU half needs a WebGPU adapter: %v", err)
	}
	defer dev.Release()
	for _, exp := range exps {
		dir := filepath.Dir(exp)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			var e struct {
				Family      string  `json:"family"`
				PromptIDs   []int32 `json:"prompt_ids"`
				LogitsShape [2]int  `json:"logits_shape"`
			}
			raw, err := os.ReadFile(exp)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatal(err)
			}
			want := readF32(t, filepath.Join(dir, "logits.bin"), e.LogitsShape[0]*e.LogitsShape[1])
			base := filepath.Join(t.TempDir(), e.Family+".gguf")
			if err := hfimport.Import(filepath.Join("..", "..", "engine", "model", "testdata", "hf", e.Family), base, hfimport.Options{}); err != nil {
				t.Fatal(err)
			}
			m := loadModel(t, base)
			a, err := Load(dir, m)
			if err != nil {
				t.Fatal(err)
			}
			l, err := a.LoRA(1)
			if err != nil {
				t.Fatal(err)
			}
			cpu, err := model.NewCPU(m, len(e.PromptIDs))
			if err != nil {
				t.Fatal(err)
			}
			g, err := model.NewGPU(dev, m, model.GPUOptions{Context: len(e.PromptIDs)})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			for _, r := range []model.Runner{cpu, g} {
				if err := r.SetAdapters([]model.LoRA{l}); err != nil {
					t.Fatal(err)
				}
				res, err := r.Forward(e.PromptIDs, 0, model.Output{All: true})
				if err != nil {
					t.Fatal(err)
				}
				d := maxRelDiff(res.Logits, want)
				t.Logf("%T with the adapter vs transformers+peft: %.3g of the logit range", r, d)
				if d > 1e-5 {
					t.Errorf("%T: logits differ from transformers+peft by %.3g of the range", r, d)
				}
			}

			out := filepath.Join(t.TempDir(), "merged.gguf")
			if err := Merge(base, []Weighted{{a, 1}}, out, "F32"); err != nil {
				t.Fatal(err)
			}
			mc, err := model.NewCPU(loadModel(t, out), len(e.PromptIDs))
			if err != nil {
				t.Fatal(err)
			}
			res, err := mc.Forward(e.PromptIDs, 0, model.Output{All: true})
			if err != nil {
				t.Fatal(err)
			}
			if d := maxRelDiff(res.Logits, want); d > 1e-5 {
				t.Errorf("merged model: logits differ from transformers+peft by %.3g of the range", d)
			}

			// Written back, every tensor is peft's, bit for bit.
			back := filepath.Join(t.TempDir(), "peft")
			if err := WritePEFT(back, a, &m.Config); err != nil {
				t.Fatal(err)
			}
			theirs, ours := safetensorsF32(t, filepath.Join(dir, peftWeights)), safetensorsF32(t, filepath.Join(back, peftWeights))
			if len(theirs) != len(ours) {
				t.Errorf("%d tensors written, peft saved %d", len(ours), len(theirs))
			}
			for n, v := range theirs {
				if !slices.Equal(ours[n], v) {
					t.Errorf("tensor %q differs from peft's", n)
				}
			}
		})
	}
}

var readF32 = logitstest.ReadF32

func safetensorsF32(t *testing.T, path string) map[string][]float32 {
	t.Helper()
	st, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	out := map[string][]float32{}
	for _, ts := range st.Tensors {
		if out[ts.Name], err = ts.Float32(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}
