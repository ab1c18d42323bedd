package model

import (
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// randomLoRA is an adapter on every target of m: A drawn from N(0, 1/cols)
// and B from N(0, 1/rank), so that x·Aᵀ·Bᵀ has the size of W·x and the
// correction moves the logits by about as much as the base does.
func randomLoRA(m *Model, rank int, scale float32, seed uint64) LoRA {
	rng := rand.New(rand.NewPCG(seed, 1))
	l := LoRA{Scale: scale, Weights: map[string]LoRAWeight{}}
	targets := m.LoRATargets()
	// In name order: a map's order would hand the seed's draws to other
	// tensors on every call.
	for _, name := range slices.Sorted(maps.Keys(targets)) {
		s := targets[name]
		a := make([]float32, rank*s[1])
		b := make([]float32, s[0]*rank)
		for i := range a {
			a[i] = float32(rng.NormFloat64() / math.Sqrt(float64(s[1])))
		}
		for i := range b {
			b[i] = float32(rng.NormFloat64() / math.Sqrt(float64(rank)))
		}
		l.Weights[name] = LoRAWeight{Rank: rank, A: a, B: b}
	}
	return l
}

// TestLoRAGPUMatchesCPU runs two adapters on every target through both
// backends: a prefill in two batches, then decode steps (the matvec kernels
// and v's LoRA written into the cache at its position). The corrections are
// f32 matmuls like the projections, so the tolerance is tolF32's: the GPU
// also folds each adapter's scale into B (one more rounding, 6e-8 relative)
// and sums the two adapters in one product, where the CPU adds them one
// after the other (measured on lavapipe: at most 7.9e-7 of the range;
// tiny-gemma4's unscaled attention takes tolFor's wider bound, 2.8e-5
// measured).
func TestLoRAGPUMatchesCPU(t *testing.T) {
	for _, c := range []struct{ preset, quant string }{
		{"tiny-llama", "F32"}, {"tiny-gemma2", "F32"}, {"tiny-qwen2", "F32"}, {"tiny-phi3", "F32"},
		{"tiny-llama", "Q4_K_M"}, // quantized projections, f32 pairs
		// Per-layer widths, shared caches (the adapters of a layer that
		// reads another's cache have no k or v to adapt).
		{"tiny-gemma4", "F32"},
	} {
		t.Run(c.preset+"-"+c.quant, func(t *testing.T) {
			m := synthModel(t, c.preset, c.quant)
			cpu, g, prompt := backends(t, m, 48, 16, 23, 7919)
			base, gpuBase := allLogits(t, cpu, prompt), allLogits(t, g, prompt)
			loras := []LoRA{randomLoRA(m, 4, 0.7, 1), randomLoRA(m, 3, -0.4, 2)}
			for _, r := range []Runner{cpu, g} {
				if err := r.SetAdapters(loras); err != nil {
					t.Fatal(err)
				}
			}
			got, want := allLogits(t, g, prompt), allLogits(t, cpu, prompt)
			if d, _ := maxRelDiff(want, base); d < 0.05 {
				t.Fatalf("the adapters moved the logits by only %.3g of their range", d)
			}
			moved, _ := maxRelDiff(want, base)
			diff, _ := maxRelDiff(got, want)
			t.Logf("the adapters move the logits by %.3g of their range; GPU vs CPU %.3g", moved, diff)
			if d, at := maxRelDiff(got, want); d > tolFor(m) {
				t.Errorf("prefill logits differ by %.3g of the range at position %d", d, at/m.Config.Vocab)
			}
			decodeMatches(t, cpu, g, len(prompt), tolFor(m))

			// Removing the adapters gives the base model back bit for bit on
			// both: the same chain as before, no dispatch added. Setting
			// adapters released the cache to whichever session comes next.
			s := NewSession(cpu)
			cpu.setOwner(0, s)
			for _, r := range []Runner{cpu, g} {
				if err := r.SetAdapters(nil); err != nil {
					t.Fatal(err)
				}
			}
			if cpu.owner(0) != nil {
				t.Error("SetAdapters left the cache to the session that filled it")
			}
			if again := allLogits(t, cpu, prompt); !slices.Equal(again, base) {
				t.Error("CPU logits without adapters differ from the base model's")
			}
			if again := allLogits(t, g, prompt); !slices.Equal(again, gpuBase) {
				t.Error("GPU logits without adapters differ from the base model's")
			}
		})
	}
}

// TestLoRAScaleIsLinear: two adapters that are the same pair at scales s
// and t act as one at s+t, on both backends (hot-swapping between them on
// a loaded runner).
func TestLoRAScaleIsLinear(t *testing.T) {
	m := synthModel(t, "tiny-qwen3", "F32")
	cpu, g, prompt := backends(t, m, 32, 32, 11, 104729)
	l := randomLoRA(m, 2, 0.25, 3)
	l2 := l
	l2.Scale = 0.5
	l3 := l
	l3.Scale = 0.75
	for _, r := range []Runner{cpu, g} {
		if err := r.SetAdapters([]LoRA{l, l2}); err != nil {
			t.Fatal(err)
		}
		two := allLogits(t, r, prompt)
		if err := r.SetAdapters([]LoRA{l3}); err != nil {
			t.Fatal(err)
		}
		one := allLogits(t, r, prompt)
		if d, _ := maxRelDiff(two, one); d > tolF32 {
			t.Errorf("%T: scales 0.25+0.5 differ from 0.75 by %.3g of the range", r, d)
		}
	}
}

// TestSetAdaptersRejects: adapters that do not fit the model are refused,
// naming the tensor, and leave the runner as it was.
func TestSetAdaptersRejects(t *testing.T) {
	m := synthModel(t, "tiny-llama", "F32")
	cpu, g, prompt := backends(t, m, 16, 16, 5, 7)
	base := allLogits(t, cpu, prompt)
	good := randomLoRA(m, 2, 1, 4)
	const q = "blk.0.attn_q.weight"
	with := func(f func(*LoRA)) []LoRA {
		l := LoRA{Scale: good.Scale, Weights: map[string]LoRAWeight{}}
		for k, v := range good.Weights {
			l.Weights[k] = v
		}
		f(&l)
		return []LoRA{l}
	}
	cases := []struct {
		name  string
		loras []LoRA
		want  string
	}{
		{"NaN scale", with(func(l *LoRA) { l.Scale = float32(math.NaN()) }), "scale NaN"},
		{"infinite scale", with(func(l *LoRA) { l.Scale = float32(math.Inf(1)) }), "scale +Inf"},
		{"unknown tensor", with(func(l *LoRA) { l.Weights["blk.99.attn_q.weight"] = l.Weights[q] }), `"blk.99.attn_q.weight" is not a projection`},
		{"a norm", with(func(l *LoRA) { l.Weights["blk.0.attn_norm.weight"] = l.Weights[q] }), `"blk.0.attn_norm.weight"`},
		{"short A", with(func(l *LoRA) { w := l.Weights[q]; w.A = w.A[1:]; l.Weights[q] = w }), q + `": A has`},
		{"rank mismatch", with(func(l *LoRA) { w := l.Weights[q]; w.Rank = 3; l.Weights[q] = w }), q + `": A has`},
		{"zero rank", with(func(l *LoRA) { w := l.Weights[q]; w.Rank = 0; l.Weights[q] = w }), "rank 0"},
		{"NaN in B", with(func(l *LoRA) {
			w := l.Weights[q]
			w.B = slices.Clone(w.B)
			w.B[3] = float32(math.NaN())
			l.Weights[q] = w
		}), q + `" holds NaN`},
	}
	for _, c := range cases {
		for _, r := range []Runner{cpu, g} {
			err := r.SetAdapters(c.loras)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s on %T: error %v, want one containing %q", c.name, r, err, c.want)
			}
		}
	}
	if again := allLogits(t, cpu, prompt); !slices.Equal(again, base) {
		t.Error("a refused adapter changed the CPU runner")
	}
	if d, _ := maxRelDiff(allLogits(t, g, prompt), base); d > tolF32 {
		t.Errorf("a refused adapter changed the GPU runner: %.3g", d)
	}
}
