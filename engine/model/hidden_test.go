package model

import (
	"path/filepath"
	"testing"

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
			e, m, want, runners := hfFixture(t, filepath.Join("testdata", "hf", family))
			for _, r := range runners {
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
				if d, at := maxRelDiff(logits, want); d > hfTolFor(m) {
					t.Errorf("%T: the head over the hidden states differs from transformers' logits by %.3g of the range at position %d", r, d, at/m.Config.Vocab)
				}
			}
		})
	}
}
