package training

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// families are the tiny synth models the CPU step is checked on, with a
// length that crosses the sliding windows (16) of Gemma 2 and 3.
// Gemma 2's caps (50 on scores, 30 on logits) barely bend the small
// values of a random tiny model, so a variant lowers them until tanh is far
// from linear and their backward matters.
var families = []struct {
	name, preset string
	tokens       int
	edit         func(*model.Config)
}{
	{"tiny-llama", "tiny-llama", 12, nil},
	{"tiny-qwen2", "tiny-qwen2", 12, nil},
	{"tiny-qwen3", "tiny-qwen3", 12, nil},
	{"tiny-gemma", "tiny-gemma", 12, nil},
	{"tiny-gemma2", "tiny-gemma2", 20, nil},
	{"tiny-gemma2-low-caps", "tiny-gemma2", 20, func(c *model.Config) { c.AttnSoftcap, c.FinalSoftcap = 0.5, 1 }},
	{"tiny-gemma3", "tiny-gemma3", 20, nil},
	// 512-dim unscaled global heads, the last two layers reading earlier
	// caches, per-layer embeddings and layer scales.
	{"tiny-gemma4", "tiny-gemma4", 20, nil},
	// AltUp's streams around each layer, LAuReL, the sparse gates of
	// layers 0 and 1, the last two layers reading earlier caches.
	{"tiny-gemma3n", "tiny-gemma3n", 20, nil},
	{"tiny-phi3", "tiny-phi3", 20, nil},
	// A mixture of 8 experts choosing 3 in every layer: the attention's
	// gradients come back through the experts and the router.
	{"tiny-qwen3moe", "tiny-qwen3moe", 12, nil},
	// gpt-oss: attention sinks, q/k/v/o biases, a window of 16 on the
	// even layers, the experts' own gated unit and biases.
	{"tiny-gpt-oss", "tiny-gpt-oss", 20, nil},
	// Gemma 4's experts beside the dense feed-forward (three norms, the
	// router on its own norm, per-expert scales), values from k's
	// projection on the global layers.
	{"tiny-gemma4moe", "tiny-gemma4moe", 20, nil},
	// YaRN's and LongRoPE's attention factor scales q and k after RoPE.
	{"tiny-phi3-rope-attn-factor", "tiny-phi3", 20, func(c *model.Config) { c.RopeAttnFactor = 1.3 }},
}

// loadFamily loads a family's model with its edit applied.
func loadFamily(t *testing.T, preset string, edit func(*model.Config)) *model.Model {
	m := loadSynth(t, preset, "F32")
	if edit != nil {
		edit(&m.Config)
	}
	return m
}

// TestLossMatchesRunner: the step's forward gives the loss that model.CPU's
// forward (the inference oracle, adapters applied through SetAdapters)
// gives, computed from its logits.
func TestLossMatchesRunner(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			m := loadFamily(t, f.preset, f.edit)
			lora := newTestLoRA(t, m, 0.05, 1)
			step, err := NewCPU(m)
			if err != nil {
				t.Fatal(err)
			}
			ex := randomExamples(m, 2, f.tokens, 3, 2)
			sum, count, err := step.Loss(lora, ex)
			if err != nil {
				t.Fatal(err)
			}
			run, err := model.NewCPU(m, f.tokens)
			if err != nil {
				t.Fatal(err)
			}
			if err := run.SetAdapters([]model.LoRA{lora.Runtime()}); err != nil {
				t.Fatal(err)
			}
			want, wantCount := 0.0, 0
			for _, e := range ex {
				res, err := run.Forward(e.Tokens, 0, model.Output{All: true})
				if err != nil {
					t.Fatal(err)
				}
				// The runner's logits are already soft-capped.
				for _, l := range ref.CrossEntropy(res.Logits, e.Targets, len(e.Tokens), m.Config.Vocab, 0) {
					want += float64(l)
				}
				wantCount += Trained([]Example{e})
			}
			// Both are f32 forwards of a few layers; they differ in the
			// order of their sums (the runner's f32 dots, the step's f64),
			// which moves a loss of ~6.5 by ~1e-6.
			got, wantMean := sum/float64(count), want/float64(wantCount)
			if count != wantCount || math.Abs(got-wantMean) > 1e-5*math.Abs(wantMean) {
				t.Fatalf("loss %v over %d targets, runner %v over %d", got, count, wantMean, wantCount)
			}
			t.Logf("loss %.6f (runner %.6f)", got, wantMean)
		})
	}
}

// TestGradientMatchesFiniteDifference checks the whole backward: for
// entries of A and B across the layers and targets, the analytic gradient
// of the mean loss against the central difference (L(θ+h) − L(θ−h))/2h.
func TestGradientMatchesFiniteDifference(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			m := loadFamily(t, f.preset, f.edit)
			checkFiniteDifference(t, m, randomExamples(m, 2, f.tokens, 3, 3))
		})
	}
}

// TestGradientMatchesFiniteDifferenceWithDropoutAndTargets: the same
// check with dropout 0.3 at a fixed mask (one dropout counter for every
// evaluation: the loss is then a smooth function of A and B, and Backward
// must be its gradient) and with the embeddings' and the head's pairs, on
// an untied head (Phi-3, its fused pairs one mask each) and a tied one
// with Gemma's embedding scale.
func TestGradientMatchesFiniteDifferenceWithDropoutAndTargets(t *testing.T) {
	for _, f := range []string{"tiny-phi3", "tiny-gemma"} {
		t.Run(f, func(t *testing.T) {
			m := loadFamily(t, f, nil)
			c := LoRAConfig{Rank: 4, Alpha: 8, Dropout: 0.3, DropoutSeed: 3, Targets: allTargets}
			checkFiniteDifferenceWith(t, m, randomExamples(m, 2, 8, 2, 3), c)
		})
	}
}

// checkFiniteDifference compares the gradient of examples' mean loss at
// a few entries of every target's pairs.
func checkFiniteDifference(t *testing.T, m *model.Model, ex []Example) {
	t.Helper()
	checkFiniteDifferenceWith(t, m, ex, LoRAConfig{Rank: 4, Alpha: 8})
}

// checkFiniteDifferenceWith is checkFiniteDifference for an adapter of
// configuration c. With dropout, every loss is Backward's at one dropout
// counter: the same mask.
func checkFiniteDifferenceWith(t *testing.T, m *model.Model, ex []Example, c LoRAConfig) {
	t.Helper()
	lora := newTestLoRAWith(t, m, c, 0.05, 4)
	step, err := NewCPU(m)
	if err != nil {
		t.Fatal(err)
	}
	g := NewGrads(lora)
	step.SetDropoutStep(9)
	sum, count, err := step.Backward(lora, ex, g)
	if err != nil {
		t.Fatal(err)
	}
	loss := func() float64 {
		var s float64
		var n int
		var err error
		if c.Dropout > 0 {
			step.SetDropoutStep(9)
			s, n, err = step.Backward(lora, ex, NewGrads(lora))
		} else {
			s, n, err = step.Loss(lora, ex)
		}
		if err != nil {
			t.Fatal(err)
		}
		return s / float64(n)
	}
	if l0 := loss(); l0 != sum/float64(count) {
		t.Fatalf("Loss %v and Backward %v differ", l0, sum/float64(count))
	}
	// h: the loss is an f32 forward pass, so L(θ±h) carry rounding noise
	// of a fraction of an f32 ulp of L (~6.5 here, ulp 4.8e-7); divided
	// by 2h that noise dominates below h ≈ 1e-2 (at 1e-3 it was ~4e-5 on
	// gradients of ~3e-3), while the central difference's truncation
	// error, h²/6·L''', stays near 1e-4 of the gradient at 1e-2 (the
	// entries of A and B are ~0.05).
	h := 1e-2
	l0 := sum / float64(count)
	ulp := float64(math.Nextafter32(float32(l0), float32(math.Inf(1))) - float32(l0))
	// atol: one ulp of the loss (6× the noise seen) over 2h, doubled;
	// rtol: 10× the truncation error seen on the largest entries.
	atol, rtol := ulp/h, 1e-3
	if m.Config.AttnScale == 1 {
		// Gemma 3n's and 4's unscaled q·k (over 512-dim heads in
		// tiny-gemma4) makes scores of tens, and the loss curves so
		// much that the central difference's h² error on the largest
		// entries was 19% (Gemma 4) and 2.5% (3n) at h = 1e-2 and 0.8%
		// (Gemma 4) at 2e-3, shrinking as h², so none of it the
		// gradient's: h/10 brings it near 2e-3, and rtol allows 3e-3;
		// atol, the noise over 2h, grows tenfold with it.
		h, atol, rtol = h/10, 10*atol, 3e-3
	}
	if m.Config.MoE != nil {
		// The experts' choice (and gpt-oss's clamps at ±7) make the loss
		// piecewise smooth: on tiny-gpt-oss a step of 1e-2 in one adapter
		// entry moved a token to another expert for 8 of the 16 entries
		// checked (central differences off by 30-170%), a step of 1e-3
		// for none (all within 3.5e-3). The noise over 2h grows tenfold
		// with it, as for Gemma above.
		h = 1e-3
		atol, rtol = ulp/h, 4e-3
	}
	rng := rand.New(rand.NewPCG(8, 8))
	worst := 0.0
	// One pair per target, each in a random layer, and the embeddings' and
	// the head's; the largest-gradient entry of A and of B and one random
	// entry of each.
	var ks []int
	for tgt := range numTargets {
		// A random layer that has the projection (Gemma 4's layers
		// reading another's cache have no k or v; a mixture of experts
		// has no gate, up or down to adapt).
		has := false
		for i := range lora.index {
			_, s := lora.pair(i, tgt)
			has = has || s.k >= 0
		}
		for has {
			if _, s := lora.pair(rng.IntN(len(lora.index)), tgt); s.k >= 0 {
				ks = append(ks, s.k)
				break
			}
		}
	}
	for _, k := range []int{lora.embed, lora.head} {
		if k >= 0 && k != ks[len(ks)-1] {
			ks = append(ks, k)
		}
	}
	for _, k := range ks {
		p := lora.Pairs[k]
		for _, which := range []struct {
			name  string
			param []float32
			grad  []float32
		}{{"A", p.A, g.A[k]}, {"B", p.B, g.B[k]}} {
			big := 0
			for j, v := range which.grad {
				if math.Abs(float64(v)) > math.Abs(float64(which.grad[big])) {
					big = j
				}
			}
			// A row of the embedding pair's B moves a whole embedding
			// row of every occurrence of its token: the loss curves
			// more there, and at h the truncation error reached 1.3e-3
			// (4× less at h/2, the h² of a central difference). h/2
			// brings it to 3e-4, the noise term (atol) doubling.
			h, atol := h, atol
			if k == lora.embed && which.name == "B" {
				h, atol = h/2, 2*atol
			}
			for _, j := range []int{big, rng.IntN(len(which.param))} {
				orig := which.param[j]
				at := func(x float64) float64 {
					which.param[j] = orig + float32(x)
					return loss()
				}
				fd := (at(h) - at(-h)) / (2 * h)
				an := float64(which.grad[j]) / float64(count)
				if m.Config.MoE != nil && math.Abs(fd-an) > rtol*math.Abs(an)+atol {
					// A change of expert between -h and h puts a jump
					// into the difference (its size over 2h, not the
					// gradient's): on tiny-gemma4moe one entry's came to
					// -7.4 against 0.073. A step a quarter as long clears
					// most such points; the noise grows 4× with it.
					h4 := h / 4
					fd4 := (at(h4) - at(-h4)) / (2 * h4)
					t.Logf("%s %s[%d]: difference %.6e at h, %.6e at h/4 (a change of expert within h?)", p.Name, which.name, j, fd, fd4)
					if math.Abs(fd4-an) <= rtol*math.Abs(an)+4*atol {
						fd = fd4
					}
				}
				which.param[j] = orig
				rel := math.Abs(fd-an) / math.Max(math.Max(math.Abs(fd), math.Abs(an)), 1e-12)
				t.Logf("%s %s[%d]: analytic %.6e, difference %.6e, rel %.2e", p.Name, which.name, j, an, fd, rel)
				if math.Abs(fd-an) > rtol*math.Abs(an)+atol {
					t.Errorf("%s %s[%d]: analytic gradient %.6e, finite difference %.6e", p.Name, which.name, j, an, fd)
				}
				if j == big {
					worst = math.Max(worst, rel)
				}
			}
		}
	}
	t.Logf("max relative error over the largest entries: %.2e", worst)
}
