package training

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/hearthstudio/hearth/engine/adapter"
	"github.com/hearthstudio/hearth/engine/hfimport"
	"github.com/hearthstudio/hearth/engine/model"
)

// peftExpected is testdata/peft/FAMILY/expected.json (make_fixtures.py).
type peftExpected struct {
	Family      string    `json:"family"`
	RawTokens   [][]int32 `json:"tokens"`
	RawTargets  [][]int32 `json:"targets"`
	Count       int       `json:"count"`
	LR          float64   `json:"lr"`
	Betas       []float64 `json:"betas"`
	Eps         float64   `json:"eps"`
	WeightDecay float64   `json:"weight_decay"`
	MaxGradNorm float32   `json:"max_grad_norm"`
	RawLosses   []float64 `json:"losses"`     // before each step, then after both
	RawNorms    []float64 `json:"grad_norms"` // clip_grad_norm_'s, each step
	Oracle      string    `json:"oracle"`
}

// TestMatchesPEFT: on each tiny transformers base (engine/model/testdata/hf),
// the CPU step's loss, the gradient of every LoRA A and B, the gradient
// norm and the adapter after two AdamW steps with clipping match what
// PyTorch and peft computed (testdata/peft/make_fixtures.py) for the same
// adapter and batch; so do the GPU step's loss and gradients.
//
// Tolerances: PyTorch runs in f32 with its own summation orders (BLAS
// blocks) where the CPU step sums in float64, so they differ as the GPU
// step and the CPU step do (see TestGPUStepMatchesCPU): one f32 sum of
// k ≤ 128 terms is off by at most (k+4)·2⁻²⁴ ≈ 8e-6 of Σ|terms|; 1e-4 of a
// tensor's largest entry allows a dozen such worst cases. The loss, a mean
// of logsumexps, is held to 1e-5 of itself. After two steps each parameter
// has moved by about 2·lr; the gradients' 1e-4 changes the update by at
// most lr·1e-4·max|g|/eps, ≲ 1e-2·lr with eps = 1e-6 (see the script), so
// 2e-2·lr is allowed.
//
// The fixtures are made at lora_dropout 0: PyTorch's dropout draws from
// its own generator (Philox on CUDA, mt19937 on the CPU, consumed in an
// order that depends on the kernels run), which the step cannot replay;
// our masks are a hash of their indices instead (ref.DropoutMask). Dropout
// is checked against finite differences at a fixed mask and GPU against
// CPU (TestGradientMatchesFiniteDifferenceWithDropoutAndTargets,
// TestGPUStepMatchesCPU).
func TestMatchesPEFT(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join("testdata", "peft", "*", "expected.json"))
	if len(dirs) == 0 {
		t.Fatal("no fixtures in testdata/peft: they are part of the test; make_fixtures.py (torch, transformers, peft) makes them")
	}
	for _, exp := range dirs {
		dir := filepath.Dir(exp)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			raw, err := os.ReadFile(exp)
			if err != nil {
				t.Fatal(err)
			}
			var e peftExpected
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatal(err)
			}
			base := filepath.Join("..", "engine", "model", "testdata", "hf", e.Family)
			path := filepath.Join(t.TempDir(), e.Family+".gguf")
			if err := hfimport.Import(base, path, hfimport.Options{}); err != nil {
				t.Fatal(err)
			}
			m, err := model.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			matchPEFT(t, dir, m, &e)
		})
	}
}

// matchPEFT checks the CPU and GPU steps on m against the fixture in dir
// (expected.json read into e): the loss, every dA and dB, the gradient
// norms and the adapter after two AdamW steps, with TestMatchesPEFT's
// tolerances.
func matchPEFT(t *testing.T, dir string, m *model.Model, e *peftExpected) {
	t.Helper()
	read := func(name string) *adapter.Adapter {
		a, err := adapter.ReadPEFT(filepath.Join(dir, name), &m.Config)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	lora, err := FromAdapter(m, read("adapter"))
	if err != nil {
		t.Fatal(err)
	}
	var ex []Example
	for i := range e.RawTokens {
		ex = append(ex, Example{Tokens: e.RawTokens[i], Targets: e.RawTargets[i]})
	}
	step, err := NewCPU(m)
	if err != nil {
		t.Fatal(err)
	}
	g := NewGrads(lora)
	sum, count, err := step.Backward(lora, ex, g)
	if err != nil {
		t.Fatal(err)
	}
	loss := sum / float64(count)
	t.Logf("%s: loss %.6f, PyTorch %.6f", e.Oracle, loss, e.RawLosses[0])
	if count != e.Count || math.Abs(loss-e.RawLosses[0]) > 1e-5*e.RawLosses[0] {
		t.Fatalf("loss %v over %d targets, PyTorch %v over %d", loss, count, e.RawLosses[0], e.Count)
	}
	want := read("grads")
	mean := func(v []float32) []float32 {
		out := make([]float32, len(v))
		for j, x := range v {
			out[j] = x / float32(count)
		}
		return out
	}
	// checkGrads compares the summed gradients g of l's pairs, as means,
	// with PyTorch's.
	checkGrads := func(who string, l *LoRA, g *Grads) {
		worst := 0.0
		for k, p := range l.Pairs {
			w := want.Pairs[p.Name]
			ea, eb := maxRel(mean(g.A[k]), w.A), maxRel(mean(g.B[k]), w.B)
			worst = math.Max(worst, math.Max(ea, eb))
			if ea > 1e-4 || eb > 1e-4 {
				t.Errorf("%s%s: dA off by %.2e, dB by %.2e of the largest entry", who, p.Name, ea, eb)
			}
		}
		t.Logf("%sgradients within %.2e of each tensor's largest entry", who, worst)
	}
	checkGrads("", lora, g)

	// The GPU step on the same adapter and batch, against PyTorch
	// directly, with the same tolerances.
	gl, err := FromAdapter(m, read("adapter"))
	if err != nil {
		t.Fatal(err)
	}
	gs, err := NewGPU(openDevice(t), m, gl, len(ex[0].Tokens), 2*len(ex[0].Tokens))
	if err != nil {
		t.Fatal(err)
	}
	defer gs.Close()
	if err := gs.ZeroGrads(); err != nil {
		t.Fatal(err)
	}
	gsum, gcount, err := gs.Backward(ex)
	if err != nil {
		t.Fatal(err)
	}
	if gl := gsum / float64(gcount); math.Abs(gl-e.RawLosses[0]) > 1e-5*e.RawLosses[0] {
		t.Fatalf("GPU loss %v, PyTorch %v", gl, e.RawLosses[0])
	}
	gg, err := gs.Grads()
	if err != nil {
		t.Fatal(err)
	}
	checkGrads("GPU ", gl, gg)

	opt := NewOptimizer(lora, AdamWConfig{Beta1: e.Betas[0], Beta2: e.Betas[1], Eps: e.Eps, WeightDecay: e.WeightDecay, MaxGradNorm: e.MaxGradNorm})
	for s := range 2 {
		if s > 0 {
			g.Zero()
			if _, count, err = step.Backward(lora, ex, g); err != nil {
				t.Fatal(err)
			}
		}
		norm, err := opt.Step(lora, g, count, e.LR)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(norm-e.RawNorms[s]) > 1e-4*e.RawNorms[s] {
			t.Fatalf("step %d: gradient norm %v, PyTorch %v", s+1, norm, e.RawNorms[s])
		}
	}
	stepped := read("stepped")
	worst := 0.0
	for _, p := range lora.Pairs {
		w := stepped.Pairs[p.Name]
		for _, pr := range [][2][]float32{{p.A, w.A}, {p.B, w.B}} {
			for j := range pr[1] {
				worst = math.Max(worst, math.Abs(float64(pr[0][j])-float64(pr[1][j])))
			}
		}
	}
	t.Logf("after two AdamW steps: within %.2e (%.2e of lr)", worst, worst/e.LR)
	if worst > 2e-2*e.LR {
		t.Fatalf("parameters differ from PyTorch's by %v after two steps", worst)
	}
	sum, count, err = step.Loss(lora, ex)
	if err != nil {
		t.Fatal(err)
	}
	if l := sum / float64(count); math.Abs(l-e.RawLosses[2]) > 1e-5*e.RawLosses[2] {
		t.Fatalf("loss after two steps %v, PyTorch %v", l, e.RawLosses[2])
	}
}
