package training

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// AdamWConfig is torch.optim.AdamW's hyper-parameters (amsgrad off) and
// the clipping of torch.nn.utils.clip_grad_norm_.
type AdamWConfig struct {
	Beta1, Beta2, Eps, WeightDecay float64
	// MaxGradNorm clips the global L2 norm of the mean gradient (every A
	// and B as one vector) to this; 0 does not clip.
	MaxGradNorm float32
}

// DefaultAdamW is transformers' TrainingArguments default: betas (0.9,
// 0.999), eps 1e-8, weight decay 0, max_grad_norm 1.
var DefaultAdamW = AdamWConfig{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, MaxGradNorm: 1}

// Optimizer is AdamW over a LoRA's pairs: a first and second moment per
// parameter, f32 as PyTorch keeps them for f32 parameters, and the step
// count for the bias correction.
type Optimizer struct {
	Config AdamWConfig
	Steps  int         // optimizer steps taken
	M, V   [][]float32 // moments in Grads.tensors' order: A then B of each pair
}

// NewOptimizer returns zero moments for l.
func NewOptimizer(l *LoRA, c AdamWConfig) *Optimizer {
	o := &Optimizer{Config: c}
	for _, p := range l.Pairs {
		for _, n := range []int{len(p.A), len(p.B)} {
			o.M = append(o.M, make([]float32, n))
			o.V = append(o.V, make([]float32, n))
		}
	}
	return o
}

// Step applies one AdamW step at learning rate lr to l from g, the
// gradient of the loss summed over count trained positions (what Backward
// accumulates): the mean's gradient is g/count, clipped to the global norm
// MaxGradNorm, and each tensor steps by ref.AdamW, PyTorch's single-tensor
// update. It returns the mean gradient's norm before clipping, what
// transformers logs as grad_norm.
func (o *Optimizer) Step(l *LoRA, g *Grads, count int, lr float64) (norm float64, err error) {
	if count <= 0 {
		return 0, fmt.Errorf("training: optimizer step over %d trained positions", count)
	}
	grads := g.tensors()
	if len(grads) != len(o.M) {
		return 0, fmt.Errorf("training: %d gradient tensors for an optimizer of %d", len(grads), len(o.M))
	}
	scale := 1 / float32(count)
	norm, clip := ref.GradNorm(grads, scale, o.Config.MaxGradNorm)
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		return norm, fmt.Errorf("training: the gradient norm is %v; the step is skipped", norm)
	}
	o.Steps++
	args := ref.AdamWArgs{
		LR: lr, Beta1: o.Config.Beta1, Beta2: o.Config.Beta2, Eps: o.Config.Eps, WeightDecay: o.Config.WeightDecay,
		Step: o.Steps, GradScale: float64(scale),
	}
	for k, p := range l.Pairs {
		ref.AdamW(p.A, grads[2*k], o.M[2*k], o.V[2*k], float32(clip), args)
		ref.AdamW(p.B, grads[2*k+1], o.M[2*k+1], o.V[2*k+1], float32(clip), args)
	}
	return norm, nil
}

// Schedule is a linear warmup then a cosine decay, the shape of
// transformers' get_cosine_schedule_with_warmup (num_cycles 0.5) with one
// difference: no step runs at rate 0. There the warmup's first step has
// rate Peak·0/Warmup and changes nothing, which in a 2-step run is half
// the run; here optimizer step s (from 0) has the rate
//
//	Peak · (s+1) / (W+1)                                for s < W
//	Peak · ½(1 + cos(π · (s−W) / max(1, Total−W)))      for W ≤ s < Total
//
// so the W warmup steps climb from Peak/(W+1) to Peak·W/(W+1), the first
// step after them runs at the peak, and the cosine's last step, s =
// Total−1, is still above 0 (it reaches 0 only at s = Total, which a run
// never takes).
//
// W is Warmup, negative meaning 3% of the steps rounded (transformers'
// common warmup_ratio 0.03), and at most a tenth of Total rounded down: a
// warmup's steps are ones the run spends below its peak, and 0.1 is the top
// of the 0.03–0.1 warmup_ratio range of the usual LoRA recipes, so a run
// of fewer than 10 steps has none and starts at the peak.
type Schedule struct {
	Peak          float64
	Warmup, Total int
}

// WarmupSteps is the warmup's steps after the default and the cap.
func (s Schedule) WarmupSteps() int {
	w := s.Warmup
	if w < 0 {
		w = int(math.Round(0.03 * float64(s.Total)))
	}
	return max(0, min(w, s.Total/10))
}

// LR is the learning rate of optimizer step s, from 0.
func (s Schedule) LR(step int) float64 {
	w := s.WarmupSteps()
	if step < w {
		return s.Peak * float64(step+1) / float64(w+1)
	}
	progress := float64(step-w) / float64(max(1, s.Total-w))
	return s.Peak * math.Max(0, 0.5*(1+math.Cos(math.Pi*progress)))
}

// Trainer runs optimizer steps of the CPU reference: each step's batch is
// one or more micro-batches whose summed-loss gradients accumulate before
// the one update, so the step equals one over their union.
type Trainer struct {
	Step     *CPU
	LoRA     *LoRA
	Opt      *Optimizer
	Schedule Schedule
	grads    *Grads
}

// StepResult is what one optimizer step reports.
type StepResult struct {
	Loss     float64 // the mean loss over the step's trained positions, before the update
	Count    int     // trained positions
	GradNorm float64 // the mean gradient's norm before clipping
	LR       float64
}

// Train runs one optimizer step over micro-batches: the gradient of the
// loss summed over all of them, divided by their trained positions, is
// clipped and applied. A batch with nothing to train, or a NaN loss, is an
// error and leaves the adapter as it was.
func (t *Trainer) Train(micro ...[]Example) (StepResult, error) {
	if t.grads == nil {
		t.grads = NewGrads(t.LoRA)
	}
	t.grads.Zero()
	sum, count := 0.0, 0
	for _, ex := range micro {
		s, n, err := t.Step.Backward(t.LoRA, ex, t.grads)
		if err != nil {
			return StepResult{}, err
		}
		sum, count = sum+s, count+n
	}
	res := StepResult{Loss: meanLoss(sum, count), Count: count, LR: t.Schedule.LR(t.Opt.Steps)}
	if count == 0 {
		return res, fmt.Errorf("training: the batch has no trained positions")
	}
	if math.IsNaN(res.Loss) || math.IsInf(res.Loss, 0) {
		return res, fmt.Errorf("training: the loss is %v; the step is skipped", res.Loss)
	}
	var err error
	res.GradNorm, err = t.Opt.Step(t.LoRA, t.grads, count, res.LR)
	return res, err
}
