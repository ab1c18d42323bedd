package structured_test

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hearthstudio/hearth/engine/structured"
	"github.com/hearthstudio/hearth/engine/synth"
	"github.com/hearthstudio/hearth/engine/tokenizer"
)

// BenchmarkConstraintStep times what a constrained decode step adds on the
// host: Limit over Llama 3's 128256-token vocabulary (llama-3.2-1b's synth
// vocabulary, the real size) and Accept, for a reply that runs through an
// object's keys, strings, numbers and an enum. Random logits make the
// best-ranked tokens as often refused as a random model's; a trained
// model's best token nearly always fits. It reports the steps of one
// document and the time per step, to set beside a decoded token's time
// (docs/performance.md).
func BenchmarkConstraintStep(b *testing.B) {
	p, ok := synth.PresetByName("llama-3.2-1b")
	if !ok {
		b.Fatal("no preset")
	}
	l, err := synth.Plan(p, synth.Options{})
	if err != nil {
		b.Fatal(err)
	}
	tok, err := tokenizer.New(l.Vocab())
	if err != nil {
		b.Fatal(err)
	}
	s, err := structured.Compile(json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","maxLength":24},"unit":{"enum":["celsius","fahrenheit"]},"days":{"type":"array","items":{"type":"integer"},"maxItems":4}},"required":["city","unit","days"],"additionalProperties":false}`))
	if err != nil {
		b.Fatal(err)
	}
	stop := tok.EOT()
	rng := rand.New(rand.NewPCG(5, 6))
	// A few sets of logits drawn beforehand, so that the drawing is not
	// timed; each step copies one in (a memmove of 0.5 MB).
	draws := make([][]float32, 7)
	for i := range draws {
		draws[i] = make([]float32, tok.Size())
		for j := range draws[i] {
			draws[i][j] = float32(rng.NormFloat64())
		}
	}
	logits := make([]float32, tok.Size())
	// The vocabulary's trie is built on the first step that needs it, once
	// per tokenizer: before the timing.
	warm := structured.NewConstraint(s, tok, []int32{stop})
	if err := warm.Limit(slices.Clone(draws[0]), 0); err != nil {
		b.Fatal(err)
	}
	steps := 0
	for b.Loop() {
		c := structured.NewConstraint(s, tok, []int32{stop})
		for {
			copy(logits, draws[steps%len(draws)])
			if err := c.Limit(logits, 40); err != nil {
				b.Fatal(err)
			}
			best := int32(-1)
			for i, v := range logits {
				if v > -1e30 && (best < 0 || v > logits[best]) {
					best = int32(i)
				}
			}
			if err := c.Accept(best); err != nil {
				b.Fatal(err)
			}
			steps++
			if best == stop {
				break
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(steps), "µs/step")
	b.ReportMetric(float64(steps)/float64(b.N), "steps/doc")
}
