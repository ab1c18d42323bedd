package training

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/internal/gputest"
)

// device is opened by the first GPU test and released by TestMain.
var device gputest.Shared

func TestMain(m *testing.M) { device.Main(m) }

func openDevice(t testing.TB) *gpu.Device {
	t.Helper()
	return device.Device(t, "the GPU step's tests")
}

// maxRel is max|got − want| over max|want|: the error of a tensor relative
// to its own scale.
func maxRel(got, want []float32) float64 {
	e, s := 0.0, 0.0
	for i := range want {
		e = math.Max(e, math.Abs(float64(got[i])-float64(want[i])))
		s = math.Max(s, math.Abs(float64(want[i])))
	}
	if s == 0 {
		return e
	}
	return e / s
}

// TestGPUStepMatchesCPU: the GPU step's loss and every pair's dA and dB
// against the CPU reference step on the same weights (the quantized
// blocks dequantized on the CPU side), then the adapter after two AdamW
// steps. One case walks the LM head in tiles of 5 rows (a big
// vocabulary's path), one accumulates two micro-batches.
//
// Cases with dropout draw the same masks on both sides (one counter, one
// seed; ops' TestDropoutMatchesReference shows the WGSL and Go hashes
// agree bit for bit), so the masked inputs are equal and only the sums'
// rounding differs, as without dropout; the kept values are multiplied by
// 1/(1−p) on both, which scales the terms and the error alike. So do the
// cases with the embeddings' and the head's pairs (the head's in tiles of
// 5, an untied head and tied ones, Gemma's embedding scale): their sums
// are of at most Vocab ≤ 704 terms (dH of the head), the (k+4)·2⁻²⁴
// bound below still under 5e-5.
func TestGPUStepMatchesCPU(t *testing.T) {
	dev := openDevice(t)
	for _, c := range []struct {
		preset, quant string
		tokens        int
		edit          func(*model.Config)
		tile          int  // head tile rows, 0 for NewGPU's choice
		split         bool // two micro-batches
		dropout       float32
		targets       []string
	}{
		{"tiny-qwen3", "Q8_0", 12, nil, 5, false, 0, nil},
		{"tiny-llama", "Q4_K", 12, nil, 0, true, 0, nil},
		{"tiny-gemma2", "F16", 20, func(c *model.Config) { c.AttnSoftcap, c.FinalSoftcap = 0.5, 1 }, 0, false, 0, nil},
		{"tiny-gemma3", "Q4_0", 20, nil, 0, false, 0, allTargets}, // tied head, embeddings scaled
		{"tiny-qwen2", "Q4_0", 12, nil, 0, false, 0, nil},
		{"tiny-phi3", "Q8_0", 20, nil, 0, false, 0.5, allTargets},  // an untied head; one mask per fused pair
		{"tiny-qwen2", "Q8_0", 12, nil, 5, false, 0.1, allTargets}, // the tied head's pair in tiles of 5
		// Gemma 4: 512-dim global heads, two layers reading earlier
		// caches, per-layer embeddings, layer scales; with dropout.
		{"tiny-gemma4", "Q8_0", 20, nil, 0, false, 0.2, nil},
		// Gemma 3n: AltUp's streams, LAuReL, the sparse gates; two
		// micro-batches.
		{"tiny-gemma3n", "Q8_0", 20, nil, 0, true, 0, nil},
		// Qwen 3 MoE: the attention's gradients back through the
		// experts (Q5_0 and Q8_0 stacks at Q4_K_M) and the router; two
		// micro-batches, the attention pairs named.
		{"tiny-qwen3moe", "Q4_K_M", 12, nil, 0, true, 0, []string{"q", "k", "v", "o"}},
		// gpt-oss: MXFP4 experts, sinks, biases, alternating windows;
		// with dropout.
		{"tiny-gpt-oss", "MXFP4_MOE", 20, nil, 0, false, 0.1, nil},
		// Gemma 4's experts beside the dense feed-forward (fused gate and
		// up experts at Q4_K_M's Q5_0/Q8_0 fallbacks); two micro-batches.
		{"tiny-gemma4moe", "Q4_K_M", 20, nil, 0, true, 0, nil},
	} {
		name := c.preset + "-" + c.quant
		if c.dropout > 0 {
			name += fmt.Sprintf("-dropout%v", c.dropout)
		}
		switch {
		case slices.Equal(c.targets, allTargets):
			name += "-embed-output"
		case c.targets != nil:
			name += "-" + strings.Join(c.targets, "")
		}
		t.Run(name, func(t *testing.T) {
			m := loadSynth(t, c.preset, c.quant)
			if c.edit != nil {
				c.edit(&m.Config)
			}
			ex := randomExamples(m, 2, c.tokens, 3, 51)
			cfg := LoRAConfig{Rank: 4, Alpha: 8, Dropout: c.dropout, DropoutSeed: 77, Targets: c.targets}
			cpuLoRA, gpuLoRA := newTestLoRAWith(t, m, cfg, 0.05, 9), newTestLoRAWith(t, m, cfg, 0.05, 9)
			cpu, err := NewCPU(m)
			if err != nil {
				t.Fatal(err)
			}
			want := NewGrads(cpuLoRA)
			cpu.SetDropoutStep(5)
			wantSum, wantCount, err := cpu.Backward(cpuLoRA, ex, want)
			if err != nil {
				t.Fatal(err)
			}
			g, err := NewGPU(dev, m, gpuLoRA, c.tokens, 2*c.tokens)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			if c.tile > 0 {
				g.tile = c.tile // smaller than the buffers sized for NewGPU's
			}
			// Both steps' counters run in step: 5, then 6 for the second
			// step (the split case has no dropout).
			g.SetDropoutStep(5)
			backward := func() (float64, int, error) {
				if err := g.ZeroGrads(); err != nil {
					return 0, 0, err
				}
				if !c.split {
					return g.Backward(ex)
				}
				s1, n1, err := g.Backward(ex[:1])
				if err != nil {
					return 0, 0, err
				}
				s2, n2, err := g.Backward(ex[1:])
				return s1 + s2, n1 + n2, err
			}
			sum, count, err := backward()
			if err != nil {
				t.Fatal(err)
			}
			got, err := g.Grads()
			if err != nil {
				t.Fatal(err)
			}
			// The losses come from logits that agree to ~1e-6 of their
			// size (one f32 sum of Hidden terms on top of the layers'),
			// through a logsumexp that does not amplify relative error.
			lossErr := math.Abs(sum-wantSum) / wantSum
			t.Logf("loss %.6f, CPU %.6f (rel %.2e)", sum/float64(count), wantSum/float64(wantCount), lossErr)
			if count != wantCount || lossErr > 1e-5 {
				t.Fatalf("loss %v over %d, CPU %v over %d", sum, count, wantSum, wantCount)
			}
			// Tolerance: the GPU sums in f32 what the CPU sums in float64.
			// One f32 sum of k ≤ 512 terms is off by at most
			// (k+4)·2⁻²⁴ ≈ 3e-5 of Σ|terms|, typically √k·2⁻²⁴ ≈ 1.3e-6;
			// a gradient passes a few dozen such sums (forward, head,
			// and each layer's backward), whose typical errors add as a
			// random walk to the ~1.3e-6 seen. 1e-4 is three worst-case
			// sums, and 75× what is seen.
			// mTol and pTol bound the moments' and the parameters'
			// differences after two AdamW steps (below).
			tol, mTol, pTol := 1e-4, 1e-4, 1e-2
			if m.Config.AttnScale == 1 && m.Config.HeadDim > 256 {
				// Gemma 4's unscaled q·k over 512 dims: scores of tens,
				// whose f32 rounding the softmax turns into relative
				// error of its weights (model's tolF32Unscaled, 10× its
				// tolF32, for the same reason). Measured 1.2e-4 on the
				// gradients and 1.5e-4 on their norm (1e-3 keeps 6×),
				// against 2.9e-6 with the same model's q·k scaled by
				// 1/sqrt(512);
				// after two steps, whose second gradients come from
				// parameters the first already moved apart, 1.1e-3 on
				// m and 2.1e-2·lr on the parameters (2e-3 and 5e-2·lr
				// keep 2×).
				tol, mTol, pTol = 1e-3, 2e-3, 5e-2
			}
			if m.Config.AttnScale == 1 && m.Config.MoE != nil {
				// tiny-gemma4moe: the same unscaled q·k over 64-wide
				// global heads, and routers reading its output: 2.1e-4
				// on the gradients and 1.7e-4 on the moments, against
				// 1.6e-6 with q·k scaled by 1/8. Gemma 4's bounds.
				tol, mTol, pTol = 1e-3, 2e-3, 5e-2
			}
			worst := 0.0
			for k, p := range cpuLoRA.Pairs {
				ea, eb := maxRel(got.A[k], want.A[k]), maxRel(got.B[k], want.B[k])
				worst = math.Max(worst, math.Max(ea, eb))
				if ea > tol || eb > tol {
					t.Errorf("%s: dA off by %.2e, dB by %.2e of their largest entry", p.Name, ea, eb)
				}
			}
			t.Logf("gradients: worst error %.2e of the tensor's largest entry", worst)

			// Two AdamW steps on each side. Adam's first update is
			// lr·sign(g) as eps → 0, a jump at g = 0 that rounding noise
			// in a near-zero gradient would flip; an eps of the order of
			// the gradients makes the update a smooth function of g, so
			// the comparison measures the kernels: a gradient error of
			// 1e-4 of the largest entry moves a parameter by at most
			// ~lr·1e-4·max|g|/eps ≲ 1e-3·lr here; 1e-2·lr is allowed.
			const lr = 1e-3
			opt := DefaultAdamW
			opt.Eps = 1e-4
			cpuOpt := NewOptimizer(cpuLoRA, opt)
			for step := 1; step <= 2; step++ {
				if step == 2 {
					want = NewGrads(cpuLoRA)
					if wantSum, wantCount, err = cpu.Backward(cpuLoRA, ex, want); err != nil {
						t.Fatal(err)
					}
					if sum, count, err = backward(); err != nil {
						t.Fatal(err)
					}
				}
				wantNorm, err := cpuOpt.Step(cpuLoRA, want, wantCount, lr)
				if err != nil {
					t.Fatal(err)
				}
				norm, err := g.Step(opt, step, count, lr)
				if err != nil {
					t.Fatal(err)
				}
				if math.Abs(norm-wantNorm) > tol*wantNorm {
					t.Fatalf("step %d: gradient norm %v, CPU %v", step, norm, wantNorm)
				}
			}
			// The moments a checkpoint saves: m is a sum of gradients and
			// v of their squares, so their error is the gradients' (tol)
			// and twice it.
			gotOpt := NewOptimizer(gpuLoRA, opt)
			if err := g.Moments(gotOpt); err != nil {
				t.Fatal(err)
			}
			for k := range cpuOpt.M {
				if em, ev := maxRel(gotOpt.M[k], cpuOpt.M[k]), maxRel(gotOpt.V[k], cpuOpt.V[k]); em > mTol || ev > 2*mTol {
					t.Errorf("moments of tensor %d: m off by %.2e, v by %.2e", k, em, ev)
				}
			}
			// A resumed run writes them back: they must read back as written.
			if err := g.SetMoments(cpuOpt); err != nil {
				t.Fatal(err)
			}
			if err := g.Moments(gotOpt); err != nil {
				t.Fatal(err)
			}
			for k := range cpuOpt.M {
				if !slices.Equal(gotOpt.M[k], cpuOpt.M[k]) || !slices.Equal(gotOpt.V[k], cpuOpt.V[k]) {
					t.Fatalf("tensor %d: the moments written do not read back", k)
				}
			}

			if err := g.Download(); err != nil {
				t.Fatal(err)
			}
			// The forward-only loss (validation) of the stepped adapter,
			// with the loss tolerance above.
			wantSum, wantCount, err = cpu.Loss(cpuLoRA, ex)
			if err != nil {
				t.Fatal(err)
			}
			if sum, count, err = g.Loss(ex); err != nil {
				t.Fatal(err)
			}
			if count != wantCount || math.Abs(sum-wantSum) > 1e-5*wantSum {
				t.Fatalf("forward-only loss %v over %d, CPU %v over %d", sum, count, wantSum, wantCount)
			}
			worst = 0
			for k, p := range cpuLoRA.Pairs {
				for _, pr := range [][2][]float32{{gpuLoRA.Pairs[k].A, p.A}, {gpuLoRA.Pairs[k].B, p.B}} {
					for j := range pr[1] {
						worst = math.Max(worst, math.Abs(float64(pr[0][j])-float64(pr[1][j])))
					}
				}
			}
			t.Logf("after two AdamW steps: parameters within %.2e (%.2e of lr)", worst, worst/lr)
			if worst > pTol*lr {
				t.Fatalf("parameters differ by %v after two steps", worst)
			}
		})
	}
}

// TestGPUStepRefusesWhatItWasNotSizedFor: examples longer, or micro-batches
// bigger, than NewGPU sized the buffers for, and bad ids, are errors
// before anything is recorded.
func TestGPUStepRefusesWhatItWasNotSizedFor(t *testing.T) {
	dev := openDevice(t)
	m := loadSynth(t, "tiny-qwen2", "Q8_0")
	lora := newTestLoRA(t, m, 0.05, 1)
	if _, err := NewGPU(dev, m, lora, 16, 8); err == nil {
		t.Error("a batch smaller than one example: no error")
	}
	g, err := NewGPU(dev, m, lora, 8, 12)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for _, ex := range [][]Example{
		randomExamples(m, 1, 9, 0, 1),
		randomExamples(m, 2, 8, 0, 1),
		{{Tokens: []int32{1, int32(m.Config.Vocab)}, Targets: []int32{1, 2}}},
		{{Tokens: []int32{1, 2}, Targets: []int32{1}}},
	} {
		if _, _, err := g.Backward(ex); err == nil {
			t.Errorf("%d examples of %d tokens: no error", len(ex), len(ex[0].Tokens))
		}
	}
	if _, _, err := g.Backward(randomExamples(m, 1, 8, 2, 1)); err != nil {
		t.Errorf("after the refusals: %v", err)
	}
}

// TestGPUPassCutComputesTheSame: a micro-batch cut into a submit per pass
// (the first step of a run, a long step on a CPU adapter) reports each
// pass in order and leaves the same loss and gradients, bit for bit, as
// the one-submit micro-batch: the same dispatches run in the same order.
// The validation loss's forward-only passes are cut as well.
func TestGPUPassCutComputesTheSame(t *testing.T) {
	// Gemma 3n's streams are merged after the last pass and sent back
	// before the layers'.
	for _, c := range []struct {
		preset  string
		targets []string
	}{{"tiny-qwen2", allTargets}, {"tiny-gemma3n", nil}} {
		t.Run(c.preset, func(t *testing.T) { checkPassCut(t, c.preset, c.targets) })
	}
}

func checkPassCut(t *testing.T, preset string, targets []string) {
	dev := openDevice(t)
	m := loadSynth(t, preset, "Q8_0")
	lora := newTestLoRAWith(t, m, LoRAConfig{Rank: 4, Alpha: 8, Targets: targets}, 0.05, 3)
	ex := randomExamples(m, 2, 12, 3, 41)
	g, err := NewGPU(dev, m, lora, 12, 24)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	backward := func() (float64, *Grads) {
		if err := g.ZeroGrads(); err != nil {
			t.Fatal(err)
		}
		sum, _, err := g.Backward(ex)
		if err != nil {
			t.Fatal(err)
		}
		gr, err := g.Grads()
		if err != nil {
			t.Fatal(err)
		}
		return sum, gr
	}
	whole, wholeGrads := backward()
	var passes []int
	g.SetPassCut(1, func(done, total int) {
		if total != 2*(2*len(m.Layers)+1) {
			t.Errorf("%d passes in all, want 2 examples × (2 × %d layers + the head)", total, len(m.Layers))
		}
		passes = append(passes, done)
	})
	cut, cutGrads := backward()
	if want := 2 * (2*len(m.Layers) + 1); len(passes) != want || !slices.IsSorted(passes) || passes[0] != 1 || passes[want-1] != want {
		t.Errorf("passes reported %v, want 1…%d", passes, want)
	}
	if cut != whole {
		t.Errorf("loss %v cut into passes, %v in one submit", cut, whole)
	}
	for k := range wholeGrads.A {
		if !slices.Equal(cutGrads.A[k], wholeGrads.A[k]) || !slices.Equal(cutGrads.B[k], wholeGrads.B[k]) {
			t.Errorf("%s: the gradients differ when cut into passes", lora.Pairs[k].Name)
		}
	}

	passes = passes[:0]
	g.SetPassCut(2, func(done, total int) { passes = append(passes, done) })
	lossCut, _, err := g.Loss(ex)
	if err != nil {
		t.Fatal(err)
	}
	g.SetPassCut(0, nil)
	lossWhole, _, err := g.Loss(ex)
	if err != nil {
		t.Fatal(err)
	}
	// Every second pass but the last, which ends the micro-batch.
	n := 2 * (len(m.Layers) + 1)
	var want []int
	for d := 2; d < n; d += 2 {
		want = append(want, d)
	}
	if want = append(want, n); !slices.Equal(passes, want) {
		t.Errorf("validation passes reported %v, want %v", passes, want)
	}
	if lossCut != lossWhole {
		t.Errorf("validation loss %v cut, %v whole", lossCut, lossWhole)
	}
}
