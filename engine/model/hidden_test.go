package model

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/hearthstudio/hearth/engine/hfimport"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// TestHiddenStatesMatchTransformers checks Output.Hidden, what embeddings
// pool, against transformers through its logits: the LM head applied on
// the host to each token's hidden state (and Gemma 2's soft-cap) must give
// the fixture's logits at every position, on both backends. The head has
// more rows than columns, so the logits pin the hidden state down.
func TestHiddenStatesMatchTransformers(t *testing.T) {
	for _, family := range []string{"llama", "gemma2", "qwen2"} {
		t.Run(family, func(t *testing.T) {
			dir := filepath.Join("testdata", "hf", family)
			var e hfExpected
			raw, err := os.ReadFile(filepath.Join(dir, "expected.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatal(err)
			}
			want := readF32File(t, filepath.Join(dir, "logits.bin"), e.LogitsShape[0]*e.LogitsShape[1])
			path := filepath.Join(t.TempDir(), family+".gguf")
			if err := hfimport.Import(dir, path, hfimport.Options{}); err != nil {
				t.Fatal(err)
			}
			m, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			cpu, err := NewCPU(m, 64)
			if err != nil {
				t.Fatal(err)
			}
			g, err := NewGPU(dev, m, GPUOptions{Context: 64, Batch: 16})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			for _, r := range []Runner{cpu, g} {
				hidden, err := NewSession(r).Hidden(e.PromptIDs)
				if err != nil {
					t.Fatal(err)
				}
				if len(hidden) != len(e.PromptIDs)*m.Config.Hidden {
					t.Fatalf("%T: %d hidden floats for %d tokens", r, len(hidden), len(e.PromptIDs))
				}
				logits, err := matmul(m.Output, hidden, len(e.PromptIDs))
				if err != nil {
					t.Fatal(err)
				}
				if c := m.Config.FinalSoftcap; c > 0 {
					logits = ref.Softcap(logits, c)
				}
				// The tolerance of TestMatchesTransformers: the same
				// arithmetic, the head's product moved to the host.
				if d, at := maxRelDiff(logits, want); d > hfTol {
					t.Errorf("%T: the head over the hidden states differs from transformers' logits by %.3g of the range at position %d", r, d, at/m.Config.Vocab)
				}
			}
		})
	}
}
