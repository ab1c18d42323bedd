package training

import (
	"math"
	"slices"
	"testing"
)

// TestScheduleCosineMatchesTransformers: after the warmup the rates are
// those of get_cosine_schedule_with_warmup(num_warmup_steps=10,
// num_training_steps=110) times the peak, worked from its lambda; the
// warmup's are Peak·(s+1)/11, where transformers has Peak·s/10.
func TestScheduleCosineMatchesTransformers(t *testing.T) {
	s := Schedule{Peak: 2e-4, Warmup: 10, Total: 110}
	for _, c := range []struct {
		step int
		want float64
	}{
		{0, 2e-4 / 11},
		{4, 2e-4 * 5 / 11},
		{9, 2e-4 * 10 / 11},
		{10, 2e-4},
		{35, 2e-4 * 0.5 * (1 + math.Cos(math.Pi/4))},
		{60, 1e-4},
		{110, 0},
	} {
		if got := s.LR(c.step); math.Abs(got-c.want) > 1e-12*2e-4 {
			t.Errorf("LR(%d) = %v, want %v", c.step, got, c.want)
		}
	}
	// No warmup: the first step runs at the peak.
	if got := (Schedule{Peak: 1, Total: 4}).LR(0); got != 1 {
		t.Errorf("LR(0) without warmup = %v, want 1", got)
	}
}

// TestScheduleHasNoIdleStep: in runs of 1, 2, 3, 10 and 1000 steps with
// warmups of none, the default and more than the run, every step's rate is
// above 0 (transformers' schedule gives the first step 0, half of a 2-step
// run); the rate climbs through the warmup to the peak and then never
// rises; and the warmup is the documented one: 3% by default, at most a
// tenth of the run, so that a run of under 10 steps has none.
func TestScheduleHasNoIdleStep(t *testing.T) {
	const peak = 3e-4
	for _, total := range []int{1, 2, 3, 10, 1000} {
		for _, warmup := range []int{-1, 0, 1, 2, 5, 30, 100, 5000} {
			s := Schedule{Peak: peak, Warmup: warmup, Total: total}
			lrs := make([]float64, total)
			for i := range lrs {
				lrs[i] = s.LR(i)
			}
			top := slices.Index(lrs, peak)
			if top < 0 {
				t.Errorf("%d steps, warmup %d: the peak is never reached: %v…", total, warmup, lrs[:min(total, 4)])
				continue
			}
			if top > total/10 {
				t.Errorf("%d steps, warmup %d: %d steps of warmup, more than a tenth of the run", total, warmup, top)
			}
			if warmup >= 0 && top != min(warmup, total/10) {
				t.Errorf("%d steps, warmup %d: %d steps of warmup, want %d", total, warmup, top, min(warmup, total/10))
			}
			if warmup < 0 && top != min(int(math.Round(0.03*float64(total))), total/10) {
				t.Errorf("%d steps, default warmup: %d steps of it, want 3%%", total, top)
			}
			for i, lr := range lrs {
				switch {
				case !(lr > 0):
					t.Errorf("%d steps, warmup %d: step %d has rate %v", total, warmup, i, lr)
				case i < top && lr != peak*float64(i+1)/float64(top+1):
					t.Errorf("%d steps, warmup %d: warmup step %d has rate %v, want %v", total, warmup, i, lr, peak*float64(i+1)/float64(top+1))
				case i > top && lr > lrs[i-1]:
					t.Errorf("%d steps, warmup %d: the rate rises at step %d after the peak: %v → %v", total, warmup, i, lrs[i-1], lr)
				}
			}
		}
	}
}

// TestMaskedPromptGradient: with most of each example's targets masked,
// only the unmasked positions count, and the gradient still matches finite
// differences.
func TestMaskedPromptGradient(t *testing.T) {
	m := loadSynth(t, "tiny-qwen3", "F32")
	ex := randomExamples(m, 2, 12, 8, 11)
	if n := Trained(ex); n != 8 {
		t.Fatalf("%d trained positions, want 2×4", n)
	}
	step, err := NewCPU(m)
	if err != nil {
		t.Fatal(err)
	}
	lora := newTestLoRA(t, m, 0.05, 4)
	// A masked target's value is never read: the tokens after the prompt
	// are the same, so the loss is too.
	sum, count, err := step.Loss(lora, ex)
	if err != nil {
		t.Fatal(err)
	}
	sumAll, _, err := step.Loss(lora, randomExamples(m, 2, 12, 0, 11))
	if err != nil {
		t.Fatal(err)
	}
	if count != 8 || !(sumAll > sum) {
		t.Fatalf("masked: %v over %d; unmasked: %v", sum, count, sumAll)
	}
	checkFiniteDifference(t, m, ex)
}

// TestTrainingLowersLoss: AdamW steps from PEFT's initialization (B = 0,
// so the first step moves B only) on one fixed batch lower its loss.
func TestTrainingLowersLoss(t *testing.T) {
	m := loadSynth(t, "tiny-llama", "F32")
	step, err := NewCPU(m)
	if err != nil {
		t.Fatal(err)
	}
	lora, err := NewLoRA(m, LoRAConfig{Rank: 4, Alpha: 8, Targets: []string{"q", "v", "down"}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	ex := randomExamples(m, 2, 12, 3, 21)
	tr := &Trainer{Step: step, LoRA: lora, Opt: NewOptimizer(lora, DefaultAdamW), Schedule: Schedule{Peak: 1e-2, Total: 100}}
	var losses []float64
	for range 6 {
		res, err := tr.Train(ex)
		if err != nil {
			t.Fatal(err)
		}
		losses = append(losses, res.Loss)
	}
	sum, count, err := step.Loss(lora, ex)
	if err != nil {
		t.Fatal(err)
	}
	losses = append(losses, sum/float64(count))
	t.Logf("losses %.4f", losses)
	for i := 1; i < len(losses); i++ {
		if !(losses[i] < losses[i-1]) {
			t.Fatalf("the loss did not fall at step %d: %.5f", i, losses)
		}
	}
}

// TestAccumulationEqualsOneBatch: a step over two micro-batches leaves the
// same adapter as one step over their union, bit for bit (the summed
// gradients add in the same order).
func TestAccumulationEqualsOneBatch(t *testing.T) {
	m := loadSynth(t, "tiny-qwen2", "F32")
	step, err := NewCPU(m)
	if err != nil {
		t.Fatal(err)
	}
	ex := randomExamples(m, 3, 10, 2, 31)
	run := func(micro ...[]Example) (*LoRA, StepResult) {
		lora := newTestLoRA(t, m, 0.05, 5)
		tr := &Trainer{Step: step, LoRA: lora, Opt: NewOptimizer(lora, DefaultAdamW), Schedule: Schedule{Peak: 1e-3, Total: 10}}
		var res StepResult
		for range 2 {
			if res, err = tr.Train(micro...); err != nil {
				t.Fatal(err)
			}
		}
		return lora, res
	}
	one, r1 := run(ex)
	two, r2 := run(ex[:2], ex[2:])
	if r1 != r2 {
		t.Fatalf("one batch %+v, two micro-batches %+v", r1, r2)
	}
	for k, p := range one.Pairs {
		if !slices.Equal(p.A, two.Pairs[k].A) || !slices.Equal(p.B, two.Pairs[k].B) {
			t.Fatalf("%s differs after accumulation", p.Name)
		}
	}
}

// TestClipping: the reported norm is that of the mean gradient, and a
// clipped first step's moment is (1 − β1) times the clipped gradient.
func TestClipping(t *testing.T) {
	m := loadSynth(t, "tiny-gemma", "F32")
	step, err := NewCPU(m)
	if err != nil {
		t.Fatal(err)
	}
	lora := newTestLoRA(t, m, 0.05, 6)
	ex := randomExamples(m, 1, 10, 2, 41)
	g := NewGrads(lora)
	_, count, err := step.Backward(lora, ex, g)
	if err != nil {
		t.Fatal(err)
	}
	ss := 0.0
	for _, v := range g.tensors() {
		for _, x := range v {
			ss += float64(x) * float64(x)
		}
	}
	want := math.Sqrt(ss) / float64(count)
	c := DefaultAdamW
	c.MaxGradNorm = float32(want / 4)
	o := NewOptimizer(lora, c)
	norm, err := o.Step(lora, g, count, 1e-3)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(norm-want) > 1e-6*want {
		t.Fatalf("norm %v, want %v", norm, want)
	}
	clip := float64(c.MaxGradNorm) / (want + 1e-6)
	for j, v := range g.B[0][:8] {
		m1 := (1 - c.Beta1) * float64(v) / float64(count) * clip
		if math.Abs(float64(o.M[1][j])-m1) > 1e-6*math.Abs(m1)+1e-12 {
			t.Fatalf("m[%d] = %v, want %v", j, o.M[1][j], m1)
		}
	}
}
