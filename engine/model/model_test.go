package model

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops"
	"github.com/hearthstudio/hearth/engine/ops/ref"
	"github.com/hearthstudio/hearth/engine/synth"
	"github.com/hearthstudio/hearth/gguf"
	"github.com/hearthstudio/hearth/internal/logitstest"
)

var dev *gpu.Device

func TestMain(m *testing.M) {
	d, err := gpu.Open(gpu.OptionsFromEnv())
	if err != nil {
		fmt.Fprintln(os.Stderr, "model tests need a WebGPU adapter (make test installs lavapipe):", err)
		os.Exit(1)
	}
	dev = d
	code := m.Run()
	d.Release()
	os.Exit(code)
}

// synthModel writes preset at quant into a temporary file and loads it.
func synthModel(t testing.TB, preset, quant string) *Model {
	t.Helper()
	p, ok := synth.PresetByName(preset)
	if !ok {
		t.Fatalf("no preset %q", preset)
	}
	path := filepath.Join(t.TempDir(), preset+"-"+quant+".gguf")
	if err := synth.WriteFile(path, p, synth.Options{Quant: quant, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	m, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// maxRelDiff is max|a-b| over the range of b, and where it is largest.
var maxRelDiff = logitstest.MaxRelDiff

// tolF32 bounds GPU-vs-CPU logit differences relative to the logit range.
// Both run f32 math on the same weights; the GPU sums in another order (tree
// reductions, split-K attention) and its exp, tanh and rsqrt differ by a few
// ulps. Measured on lavapipe: at most 7.6e-7 over the tiny presets; 1e-5
// leaves a 13x margin and still catches a wrong mask, norm or rotation
// (those show up at 1e-2).
const tolF32 = 1e-5

// tolF32Unscaled is tolF32 for Gemma 4, which scores q·k unscaled (its q
// and k are RMS-normalised) over heads of 512: tiny-gemma4's scores reach
// tens where the others' stay near 1, and softmax turns the score's f32
// rounding (relative) into the weights' error. Measured on lavapipe:
// 2.6e-5 over the prompt, 1.1e-5 decoding; 1e-4 keeps a 4x margin and
// still catches a wrong rotation, norm or shared cache (1e-2 and up).
const tolF32Unscaled = 1e-4

// tolFor is the GPU-vs-CPU logit tolerance of m.
func tolFor(m *Model) float64 {
	if m.Config.AttnScale == 1 && m.Config.HeadDim > 256 {
		return tolF32Unscaled
	}
	return tolF32
}

func tinyPresets() []string {
	return []string{"tiny-llama", "tiny-gemma", "tiny-gemma2", "tiny-gemma3", "tiny-gemma3n", "tiny-gemma4", "tiny-qwen2", "tiny-qwen3", "tiny-qwen3moe", "tiny-gemma4moe", "tiny-gpt-oss", "tiny-phi3"}
}

// backends makes a CPU reference and a GPU runner of m with a ctx-token
// cache (the GPU prefilling batch tokens per chain, and decoding on f32
// activations: the reference's arithmetic), and a prompt of n tokens
// spread over the vocabulary by step.
func backends(t *testing.T, m *Model, ctx, batch, n, step int) (*CPU, *GPU, []int32) {
	t.Helper()
	cpu, err := NewCPU(m, ctx)
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGPU(dev, m, GPUOptions{Context: ctx, Batch: batch, F32Activations: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	prompt := make([]int32, n)
	for i := range prompt {
		prompt[i] = int32((i*step + 13) % m.Config.Vocab)
	}
	return cpu, g, prompt
}

// allLogits is r's logits of every prompt position.
func allLogits(t *testing.T, r Runner, prompt []int32) []float32 {
	t.Helper()
	res, err := r.Forward(prompt, 0, Output{All: true})
	if err != nil {
		t.Fatal(err)
	}
	return res.Logits
}

// TestGPUMatchesCPU runs every tiny architecture on both backends: a prompt
// prefilled in two batches (the second crossing the sliding windows), then
// single-token decode steps, comparing every position's logits. Gemma 4
// and 3n run quantized too: the mix puts the 512-dim global heads'
// projections, the double-wide feed-forwards, the per-layer embeddings'
// gates and AltUp's and LAuReL's matrices in several types, which both
// backends decode to the same f32 values. So do Qwen 3 MoE, Gemma 4's
// mixture (experts beside the dense feed-forward, values from k's
// projection on the global layers) and gpt-oss (MXFP4 experts with
// biases and their own gated unit, attention sinks, alternating windows),
// whose quantized experts decode through the per-slot products (F32 ones
// through the grouped product even for one token).
func TestGPUMatchesCPU(t *testing.T) {
	type model struct{ preset, quant string }
	var cases []model
	for _, name := range tinyPresets() {
		cases = append(cases, model{name, "F32"})
	}
	cases = append(cases, model{"tiny-gemma4", "Q4_K_M"}, model{"tiny-gemma3n", "Q4_K_M"}, model{"tiny-qwen3moe", "Q4_K_M"}, model{"tiny-qwen3moe", "Q8_0"}, model{"tiny-gemma4moe", "Q4_K_M"}, model{"tiny-gpt-oss", "MXFP4_MOE"})
	for _, c := range cases {
		t.Run(c.preset+"-"+c.quant, func(t *testing.T) {
			m := synthModel(t, c.preset, c.quant)
			cpu, g, prompt := backends(t, m, 64, 20, 37, 7919)
			tol := tolFor(m)
			got, want := allLogits(t, g, prompt), allLogits(t, cpu, prompt)
			if d, at := maxRelDiff(got, want); d > tol {
				t.Errorf("prefill logits differ by %.3g of the range at position %d token %d", d, at/m.Config.Vocab, at%m.Config.Vocab)
			}
			decodeMatches(t, cpu, g, len(prompt), tol)
		})
	}
}

// decodeMatches decodes three tokens at the positions after a prompt of n
// on the CPU reference and on r, comparing each step's logits within tol.
func decodeMatches(t *testing.T, cpu *CPU, r Runner, n int, tol float64) {
	t.Helper()
	vocab := int32(cpu.Model().Config.Vocab)
	for step := range 3 {
		tok := []int32{int32(step*31+5) % vocab}
		pos := n + step
		w, err := cpu.Forward(tok, pos, Output{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.Forward(tok, pos, Output{})
		if err != nil {
			t.Fatal(err)
		}
		if d, at := maxRelDiff(got.Logits, w.Logits); d > tol {
			t.Errorf("decode step %d: logits differ by %.3g of the range at token %d", step, d, at)
		}
	}
}

// TestQuantizedModelsGPUMatchCPU runs a whole model at each quantization
// mix, together covering every weight type with a GPU kernel: the GPU
// dequantizes inside its matmul kernels, the CPU reference with gguf's
// dequantizers, the same bits either way.
func TestQuantizedModelsGPUMatchCPU(t *testing.T) {
	seen := map[gguf.Type]bool{}
	for _, quant := range []string{"F16", "BF16", "Q8_0", "Q6_K", "Q5_K_M", "Q5_1", "Q5_0", "Q4_K_M", "Q4_1", "Q4_0", "MXFP4", "Q3_K_M", "Q2_K"} {
		t.Run(quant, func(t *testing.T) {
			m := synthModel(t, "tiny-llama", quant)
			for _, ti := range m.File.Tensors() {
				seen[ti.Type] = true
			}
			cpu, g, prompt := backends(t, m, 32, 32, 19, 104729)
			got, want := allLogits(t, g, prompt), allLogits(t, cpu, prompt)
			if d, at := maxRelDiff(got, want); d > tolF32 {
				t.Errorf("logits differ by %.3g of the range at position %d", d, at/m.Config.Vocab)
			}
			v := m.Config.Vocab
			for p := range prompt {
				gi, ci := ref.Argmax(got[p*v:(p+1)*v]), ref.Argmax(want[p*v:(p+1)*v])
				if gi != ci {
					t.Errorf("position %d: GPU top token %d, CPU %d", p, gi, ci)
				}
			}
		})
	}
	for _, typ := range ops.MatmulTypes() {
		if typ != gguf.TypeF32 && !seen[typ] {
			t.Errorf("no model exercised %v", typ)
		}
	}
}

// TestDecodeOutOfOrder: the GPU records the next decode step ahead; calls
// that do not follow that guess (the same position again, another top-k, a
// penalty, a jump back) must still give the CPU reference's answers.
func TestDecodeOutOfOrder(t *testing.T) {
	m := synthModel(t, "tiny-qwen2", "F32")
	cpu, err := NewCPU(m, 32)
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGPU(dev, m, GPUOptions{Context: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	prompt := []int32{3, 1, 4, 1, 5, 9, 2, 6}
	for _, r := range []Runner{cpu, g} {
		if _, err := r.Forward(prompt, 0, Output{TopK: 1}); err != nil {
			t.Fatal(err)
		}
	}
	pen := &Penalty{IDs: []uint32{3, 7, 11}, Counts: []uint32{1, 2, 3}, Repeat: 1.3, Frequency: 0.5, Presence: 0.25}
	calls := []struct {
		tok int32
		pos int
		out Output
	}{
		{5, 8, Output{TopK: 1}}, {6, 9, Output{TopK: 1}}, {6, 9, Output{TopK: 1}}, // again at 9
		{7, 10, Output{TopK: 5}}, {8, 11, Output{TopK: 5, Penalty: pen}}, {9, 12, Output{TopK: 5, Penalty: pen}},
		{9, 12, Output{}}, {2, 9, Output{TopK: 1}}, {4, 10, Output{TopK: 1}}, // back to 9
	}
	for i, c := range calls {
		want, err := cpu.Forward([]int32{c.tok}, c.pos, c.out)
		if err != nil {
			t.Fatal(err)
		}
		got, err := g.Forward([]int32{c.tok}, c.pos, c.out)
		if err != nil {
			t.Fatal(err)
		}
		if c.out.TopK == 0 {
			if d, _ := maxRelDiff(got.Logits, want.Logits); d > tolF32 {
				t.Errorf("call %d: logits differ by %.3g", i, d)
			}
			continue
		}
		if !slices.Equal(got.IDs, want.IDs) {
			t.Errorf("call %d (token %d at %d, %+v): GPU top %v, CPU %v", i, c.tok, c.pos, c.out.TopK, got.IDs, want.IDs)
		}
	}
}

// TestDecodeWeightBytes: a dense model's decoded token reads every
// weight; a mixture's only its chosen share of each expert stack: on
// tiny-qwen3moe (3 of 8 experts) the stacks' bytes times 5/8 less, the
// rest the same.
func TestDecodeWeightBytes(t *testing.T) {
	dense := synthModel(t, "tiny-qwen3", "Q8_0")
	if got, want := dense.DecodeWeightBytes(), dense.Memory(1, 1).Weights; got != want {
		t.Errorf("tiny-qwen3: %d bytes a token, want all %d", got, want)
	}
	m := synthModel(t, "tiny-qwen3moe", "Q8_0")
	var stacks int64
	for _, l := range m.Layers {
		stacks += l.MoE.Gate.Bytes() + l.MoE.Up.Bytes() + l.MoE.Down.Bytes()
	}
	e := m.Config.MoE
	want := m.Memory(1, 1).Weights - stacks + stacks*int64(e.Used)/int64(e.Experts)
	if got := m.DecodeWeightBytes(); got < want-int64(3*len(m.Layers)) || got > want+int64(3*len(m.Layers)) {
		t.Errorf("tiny-qwen3moe: %d bytes a token, want %d (rounding aside)", got, want)
	}
}
