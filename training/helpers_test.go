package training

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/engine/synth"
)

// loadSynth loads the synth preset at quant (seed 7).
func loadSynth(t testing.TB, preset, quant string) *model.Model {
	t.Helper()
	p, ok := synth.PresetByName(preset)
	if !ok {
		t.Fatalf("no preset %q", preset)
	}
	path := filepath.Join(t.TempDir(), preset+"-"+quant+".gguf")
	if err := synth.WriteFile(path, p, synth.Options{Quant: quant, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// newTestLoRA is a rank-4 adapter on every target with B drawn from
// N(0, sigma²), so that the gradient of A is not zero (with PEFT's zero B
// it is) and the adapter changes the output.
func newTestLoRA(t testing.TB, m *model.Model, sigma float64, seed uint64) *LoRA {
	t.Helper()
	return newTestLoRAWith(t, m, LoRAConfig{Rank: 4, Alpha: 8}, sigma, seed)
}

// allTargets names every target, the embeddings and the head included.
var allTargets = append(append([]string(nil), Targets...), ModelTargets...)

// newTestLoRAWith is newTestLoRA with the configuration c (its targets,
// dropout).
func newTestLoRAWith(t testing.TB, m *model.Model, c LoRAConfig, sigma float64, seed uint64) *LoRA {
	t.Helper()
	l, err := NewLoRA(m, c, seed)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 99))
	for _, p := range l.Pairs {
		if p.Layer < 0 && strings.HasPrefix(p.Target, "embed") {
			// PEFT's N(0, 1) A for an embedding, shrunk to the layers'
			// U(±1/√Cols): with B ~ N(0, σ²) too, A at 1 moves the
			// embedding rows by far more than their own size.
			for j := range p.A {
				p.A[j] /= float32(math.Sqrt(float64(p.Cols)))
			}
		}
		for j := range p.B {
			p.B[j] = float32(rng.NormFloat64() * sigma)
		}
	}
	return l
}

// randomExamples are batch examples of n random tokens predicting the
// next random token; the first prompt targets of each are masked (-1).
func randomExamples(m *model.Model, batch, n, prompt int, seed uint64) []Example {
	rng := rand.New(rand.NewPCG(seed, 5))
	var out []Example
	for range batch {
		ids := make([]int32, n+1)
		for i := range ids {
			ids[i] = int32(rng.IntN(m.Config.Vocab))
		}
		e := Example{Tokens: ids[:n], Targets: append([]int32(nil), ids[1:]...)}
		for i := range min(prompt, n) {
			e.Targets[i] = -1
		}
		out = append(out, e)
	}
	return out
}
