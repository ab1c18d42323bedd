package training

import (
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/adapter"
	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/engine/ops/ref"
	"github.com/hearthstudio/hearth/internal/logitstest"
)

// TestDropoutOnlyInBackward: dropout changes Backward only, at the mask of
// its counter: Loss (the validation loss) ignores it, one counter gives
// one result bit for bit, the next counter another, and a rate of 0 is
// the step without dropout whatever the counter.
func TestDropoutOnlyInBackward(t *testing.T) {
	m := loadSynth(t, "tiny-qwen2", "F32")
	ex := randomExamples(m, 2, 8, 2, 4)
	step, err := NewCPU(m)
	if err != nil {
		t.Fatal(err)
	}
	on := newTestLoRAWith(t, m, LoRAConfig{Rank: 4, Alpha: 8, Dropout: 0.5, DropoutSeed: 1}, 0.05, 2)
	off := newTestLoRAWith(t, m, LoRAConfig{Rank: 4, Alpha: 8}, 0.05, 2)
	backward := func(l *LoRA, counter uint64) (float64, *Grads) {
		t.Helper()
		g := NewGrads(l)
		step.SetDropoutStep(counter)
		s, _, err := step.Backward(l, ex, g)
		if err != nil {
			t.Fatal(err)
		}
		if step.DropoutStep() != counter+1 {
			t.Fatalf("the dropout counter is %d after a Backward at %d", step.DropoutStep(), counter)
		}
		return s, g
	}
	lossOn, _, err := step.Loss(on, ex)
	if err != nil {
		t.Fatal(err)
	}
	lossOff, _, err := step.Loss(off, ex)
	if err != nil {
		t.Fatal(err)
	}
	if lossOn != lossOff {
		t.Errorf("Loss with dropout %v, without %v: it must not drop", lossOn, lossOff)
	}
	s1, g1 := backward(on, 3)
	s2, g2 := backward(on, 3)
	s3, g3 := backward(on, 4)
	if s1 != s2 || !gradsEqual(g1, g2) {
		t.Error("two Backwards at one counter differ")
	}
	if s1 == s3 || gradsEqual(g1, g3) {
		t.Error("Backwards at two counters agree: the mask did not change")
	}
	if s1 == lossOn {
		t.Error("Backward's loss with dropout 0.5 is Loss's")
	}
	z1, h1 := backward(off, 3)
	z2, h2 := backward(off, 4)
	if z1 != lossOff || z1 != z2 || !gradsEqual(h1, h2) {
		t.Error("without dropout, Backward depends on the counter or differs from Loss")
	}
}

func gradsEqual(a, b *Grads) bool {
	for k := range a.A {
		if !slices.Equal(a.A[k], b.A[k]) || !slices.Equal(a.B[k], b.B[k]) {
			return false
		}
	}
	return true
}

// TestEmbedOutputTargetsRoundTrip: an adapter with the embeddings' and the
// head's pairs, on an untied head (Llama) and a tied one with Gemma's
// embedding scale, is the same function in training as at inference and
// after export:
//   - the CPU step's loss is model.CPU's with the adapter applied (the
//     inference oracle: token_embd's pair added to the looked-up rows
//     before the embedding scale, the head's after the final norm; a tied
//     token_embd pair in both places);
//   - written as a GGUF LoRA and as a PEFT folder and read back (Load checks
//     it against the base), FromAdapter gives the same pairs bit for bit;
//   - the model merged with the GGUF adapter gives the adapter's logits.
func TestEmbedOutputTargetsRoundTrip(t *testing.T) {
	for _, preset := range []string{"tiny-llama", "tiny-gemma"} {
		t.Run(preset, func(t *testing.T) {
			m := loadSynth(t, preset, "F32")
			lora := newTestLoRAWith(t, m, LoRAConfig{Rank: 4, Alpha: 8, Targets: []string{"q", "down", "embed", "output"}}, 0.05, 6)
			wantPairs := map[string]string{"token_embd.weight": "embed", "output.weight": "output"}
			if m.Output == m.Embed {
				wantPairs = map[string]string{"token_embd.weight": "embed+output"}
			}
			for _, p := range lora.Pairs {
				if p.Layer < 0 && wantPairs[p.Name] != p.Target {
					t.Errorf("pair %s targets %q, want %q", p.Name, p.Target, wantPairs[p.Name])
				}
				delete(wantPairs, p.Name)
			}
			if len(wantPairs) > 0 {
				t.Fatalf("no pairs for %v", wantPairs)
			}

			// Training's forward against the runner's.
			ex := randomExamples(m, 1, 12, 0, 8)
			step, err := NewCPU(m)
			if err != nil {
				t.Fatal(err)
			}
			sum, count, err := step.Loss(lora, ex)
			if err != nil {
				t.Fatal(err)
			}
			run, err := model.NewCPU(m, 16)
			if err != nil {
				t.Fatal(err)
			}
			defer run.Close()
			logits := func(l []model.LoRA) []float32 {
				t.Helper()
				if err := run.SetAdapters(l); err != nil {
					t.Fatal(err)
				}
				res, err := run.Forward(ex[0].Tokens, 0, model.Output{All: true})
				if err != nil {
					t.Fatal(err)
				}
				return res.Logits
			}
			adapted := logits([]model.LoRA{lora.Runtime()})
			want := 0.0
			for _, l := range ref.CrossEntropy(adapted, ex[0].Targets, 12, m.Config.Vocab, 0) {
				want += float64(l)
			}
			// f32 forwards summed in two orders, as TestLossMatchesRunner.
			if math.Abs(sum-want) > 1e-5*math.Abs(want) || count != 12 {
				t.Fatalf("training's loss %v over %d, the runner's %v", sum, count, want)
			}
			if moved, _ := logitstest.MaxRelDiff(adapted, logits(nil)); moved < 0.01 {
				t.Fatalf("the adapter moved the logits by %.3g of their range only", moved)
			}

			// Export and back.
			dir := t.TempDir()
			gg, pf := filepath.Join(dir, "a.gguf"), filepath.Join(dir, "peft")
			if err := adapter.WriteGGUF(gg, lora.Adapter(m.Config.Arch)); err != nil {
				t.Fatal(err)
			}
			if err := adapter.WritePEFT(pf, lora.Adapter(m.Config.Arch), &m.Config); err != nil {
				t.Fatal(err)
			}
			var fromGGUF *adapter.Adapter
			for _, path := range []string{gg, pf} {
				a, err := adapter.Load(path, m)
				if err != nil {
					t.Fatal(err)
				}
				if path == gg {
					fromGGUF = a
				}
				back, err := FromAdapter(m, a)
				if err != nil {
					t.Fatalf("%s: %v", filepath.Base(path), err)
				}
				if len(back.Pairs) != len(lora.Pairs) {
					t.Fatalf("%s: %d pairs back, %d written", filepath.Base(path), len(back.Pairs), len(lora.Pairs))
				}
				for k, p := range lora.Pairs {
					q := back.Pairs[k]
					if q.Name != p.Name || !slices.Equal(q.A, p.A) || !slices.Equal(q.B, p.B) {
						t.Errorf("%s: pair %s came back as %s, changed", filepath.Base(path), p.Name, q.Name)
					}
				}
			}

			// The merged model. Tolerance: engine/adapter's tolMergeF32
			// (W + ΔW rounded once against three f32 products).
			out := filepath.Join(dir, "merged.gguf")
			if err := adapter.Merge(m.Path, []adapter.Weighted{{Adapter: fromGGUF, Scale: 1}}, out, adapter.SameType); err != nil {
				t.Fatal(err)
			}
			merged, err := model.Load(out)
			if err != nil {
				t.Fatal(err)
			}
			defer merged.Close()
			mr, err := model.NewCPU(merged, 16)
			if err != nil {
				t.Fatal(err)
			}
			defer mr.Close()
			res, err := mr.Forward(ex[0].Tokens, 0, model.Output{All: true})
			if err != nil {
				t.Fatal(err)
			}
			d, _ := logitstest.MaxRelDiff(adapted, res.Logits)
			t.Logf("adapter vs merged: %.3g of the logit range", d)
			if d > 1e-5 {
				t.Errorf("the adapter's logits and the merged model's differ by %.3g of their range", d)
			}
		})
	}
}

// TestMoETargets: on a mixture of experts the default targets adapt the
// attention projections only, and a feed-forward target named outright is
// refused, naming the experts it would have to adapt.
func TestMoETargets(t *testing.T) {
	m := loadSynth(t, "tiny-qwen3moe", "Q8_0")
	l, err := NewLoRA(m, LoRAConfig{Rank: 4, Alpha: 8}, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range l.Pairs {
		if !slices.Contains([]string{"q", "k", "v", "o"}, p.Target) {
			t.Errorf("pair %s adapts %q", p.Name, p.Target)
		}
	}
	if want := 4 * m.Config.Layers; len(l.Pairs) != want {
		t.Errorf("%d pairs, want %d", len(l.Pairs), want)
	}
	for _, target := range []string{"gate", "up", "down"} {
		_, err := NewLoRA(m, LoRAConfig{Rank: 4, Alpha: 8, Targets: []string{"q", target}}, 1)
		if err == nil || !strings.Contains(err.Error(), "ffn_"+target+"_exps") || !strings.Contains(err.Error(), "mixture of 8 experts") {
			t.Errorf("target %q: error %v, want the experts named", target, err)
		}
	}
}
