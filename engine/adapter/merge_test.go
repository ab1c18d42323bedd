package adapter

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/gguf"
	"github.com/hearthstudio/hearth/internal/logitstest"
)

// maxRelDiff is max|a-b| over the range of b: logits compared relative to
// their spread, as engine/model's tests compare them.
func maxRelDiff(a, b []float32) float64 {
	d, _ := logitstest.MaxRelDiff(a, b)
	return d
}

var prompt = []int32{1, 17, 42, 5, 99, 23, 64, 7, 150, 3, 88, 11}

// logits are r's logits of every prompt position, with loras set.
func logits(t *testing.T, r model.Runner, loras []model.LoRA) []float32 {
	t.Helper()
	if err := r.SetAdapters(loras); err != nil {
		t.Fatal(err)
	}
	res, err := r.Forward(prompt, 0, model.Output{All: true})
	if err != nil {
		t.Fatal(err)
	}
	return res.Logits
}

func cpuLogits(t *testing.T, m *model.Model, loras []model.LoRA) []float32 {
	t.Helper()
	r, err := model.NewCPU(m, 32)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	return logits(t, r, loras)
}

// tolMergeF32 bounds adapter-vs-merged logits when the merged weights are
// stored in f32: the merge rounds each W + ΔW once to f32 (2⁻²⁴ relative),
// the runner rounds W·x, A·x and B·(A·x) separately and sums in another
// order, so the two differ by f32 rounding through the layers, the size of
// the GPU-vs-CPU differences engine/model bounds by 1e-5 of the logit range
// (measured: at most 6.5e-7 on the CPU, 8.1e-7 on lavapipe).
const tolMergeF32 = 1e-5

// TestAdapterMatchesMerged is the check: two adapters on every
// target, one through a GGUF file and one through a PEFT folder, change the
// logits exactly as the model merged with them does. F32 bases merge
// without requantization; an F16 base is merged into F32 (--type F32), so
// no rounding to F16 comes in either; on the GPU the adapters run as f32
// matmuls and must agree with the CPU's merged model as well.
func TestAdapterMatchesMerged(t *testing.T) {
	dev, err := gpu.Open(gpu.OptionsFromEnv())
	if err != nil {
		t.Fatalf("the GPU half needs a WebGPU adapter (make test installs lavapipe): %v", err)
	}
	defer dev.Release()
	for _, c := range []struct{ preset, quant, outType string }{
		{"tiny-llama", "F32", SameType},
		{"tiny-gemma2", "F32", SameType}, // tied head: token_embd's pair acts twice
		{"tiny-phi3", "F32", SameType},   // fused qkv and gate_up
		{"tiny-qwen2", "F16", "F32"},
	} {
		t.Run(c.preset+"-"+c.quant, func(t *testing.T) {
			base := synthFile(t, c.preset, c.quant)
			m := loadModel(t, base)
			a1, a2 := fileRoutes(t, m, 4, 2)
			loras := toLoRA(t, []Weighted{{a1, 0.6}, {a2, -0.3}})
			out := filepath.Join(t.TempDir(), "merged.gguf")
			if err := Merge(base, []Weighted{{a1, 0.6}, {a2, -0.3}}, out, c.outType); err != nil {
				t.Fatal(err)
			}
			merged := loadModel(t, out)

			baseLogits := cpuLogits(t, m, nil)
			adapted := cpuLogits(t, m, loras)
			want := cpuLogits(t, merged, nil)
			moved, d := maxRelDiff(adapted, baseLogits), maxRelDiff(adapted, want)
			t.Logf("the adapters move the logits by %.3g of their range; adapter vs merged: %.3g", moved, d)
			if moved < 0.05 {
				t.Fatalf("the adapters moved the logits by only %.3g", moved)
			}
			if d > tolMergeF32 {
				t.Errorf("CPU with adapters vs merged model: %.3g of the logit range", d)
			}

			g, err := model.NewGPU(dev, m, model.GPUOptions{Context: 32})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			gd := maxRelDiff(logits(t, g, loras), want)
			t.Logf("GPU with adapters vs merged on the CPU: %.3g", gd)
			if gd > tolMergeF32 {
				t.Errorf("GPU with adapters vs merged model: %.3g of the logit range", gd)
			}
		})
	}
}

// TestMergeQ8_0 merges into a Q8_0 base, requantizing each merged weight
// to Q8_0. That rounding is the one error the adapter path does not have:
// it is of the same kind and size as quantizing an F32 model to Q8_0 (each
// weight rounded once to 1/254 of its block's largest), a little larger
// because W + ΔW has about √2 the spread of W. So the difference must stay
// under twice what Q8_0 quantization costs the same model's logits
// (measured: 0.013 against 2·0.0158).
func TestMergeQ8_0(t *testing.T) {
	f32 := loadModel(t, synthFile(t, "tiny-llama", "F32"))
	base := synthFile(t, "tiny-llama", "Q8_0")
	m := loadModel(t, base)
	quantErr := maxRelDiff(cpuLogits(t, m, nil), cpuLogits(t, f32, nil))
	a1, a2 := fileRoutes(t, m, 4, 2)
	ws := []Weighted{{a1, 1}, {a2, 0.5}}
	out := filepath.Join(t.TempDir(), "merged.gguf")
	if err := Merge(base, ws, out, SameType); err != nil {
		t.Fatal(err)
	}
	merged := loadModel(t, out)
	for _, ti := range merged.File.Tensors() {
		bt, _ := m.File.Tensor(ti.Name)
		if bt.Type != ti.Type {
			t.Errorf("%s: merged as %v, the base has %v", ti.Name, ti.Type, bt.Type)
		}
	}
	d := maxRelDiff(cpuLogits(t, m, toLoRA(t, ws)), cpuLogits(t, merged, nil))
	t.Logf("Q8_0 merge vs adapter: %.3g of the logit range; Q8_0 vs F32 base: %.3g", d, quantErr)
	if d > 2*quantErr {
		t.Errorf("Q8_0 merge differs from the adapter by %.3g, over twice Q8_0's own error %.3g", d, quantErr)
	}
}

// fileRoutes makes two random adapters for m and returns them as read
// back: the first from a GGUF LoRA file, the second from a PEFT folder.
func fileRoutes(t *testing.T, m *model.Model, r1, r2 int) (*Adapter, *Adapter) {
	t.Helper()
	dir := t.TempDir()
	g := filepath.Join(dir, "a1.gguf")
	if err := WriteGGUF(g, randomAdapter(m, r1, 11)); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "a2")
	if err := WritePEFT(p, randomAdapter(m, r2, 12), &m.Config); err != nil {
		t.Fatal(err)
	}
	a1, err := Load(g, m)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := Load(p, m)
	if err != nil {
		t.Fatal(err)
	}
	return a1, a2
}

func toLoRA(t *testing.T, ws []Weighted) []model.LoRA {
	t.Helper()
	var out []model.LoRA
	for _, w := range ws {
		l, err := w.Adapter.LoRA(w.Scale)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}

// TestMergeConvertsType merges into an F32 base with --type F16: the whole
// merged model converted as hearth quantize converts it, each merged weight
// rounded once to F16. F16 rounds each weight relative to its own size, so
// the merge's error is F16's error on the base scaled by how much larger
// the merged weights and activations are: W + 0.8·ΔW₁ + 0.4·ΔW₂ has about
// √(1 + 0.64 + 0.16) ≈ 1.34 the spread of W (measured ratio 1.6: 2.97e-4
// against 1.84e-4). Three times F16's own error leaves room and still
// catches a merge that skips a tensor or misapplies a scale, which moves
// the logits by tenths of their range.
func TestMergeConvertsType(t *testing.T) {
	base := synthFile(t, "tiny-gemma", "F32")
	m := loadModel(t, base)
	quantErr := maxRelDiff(cpuLogits(t, loadModel(t, synthFile(t, "tiny-gemma", "F16")), nil), cpuLogits(t, m, nil))
	a1, a2 := fileRoutes(t, m, 3, 5)
	ws := []Weighted{{a1, 0.8}, {a2, 0.4}}
	out := filepath.Join(t.TempDir(), "merged-f16.gguf")
	if err := Merge(base, ws, out, "f16"); err != nil {
		t.Fatal(err)
	}
	merged := loadModel(t, out)
	for _, ti := range merged.File.Tensors() {
		if want := gguf.TypeF16; len(ti.Shape) == 2 && ti.Type != want {
			t.Errorf("%s: %v, want %v", ti.Name, ti.Type, want)
		}
	}
	if ft, _ := merged.File.FileType(); ft != 1 {
		t.Errorf("general.file_type %v, want MOSTLY_F16", ft)
	}
	d := maxRelDiff(cpuLogits(t, m, toLoRA(t, ws)), cpuLogits(t, merged, nil))
	t.Logf("F16 merge vs adapter: %.3g of the logit range; F16 vs F32 base: %.3g", d, quantErr)
	if d > 3*quantErr {
		t.Errorf("F16 merge differs from the adapter by %.3g, over three times F16's own error %.3g", d, quantErr)
	}
	if _, err := os.Stat(out + ".merge.tmp"); !os.IsNotExist(err) {
		t.Errorf("the F32 intermediate was left behind: %v", err)
	}
}
