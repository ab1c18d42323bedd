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

// Schedule is a linear warmup then a cosine decay to zero, transformers'
// get_cosine_schedule_with_warmup (num_cycles 0.5), whose LambdaLR gives
// optimizer step s (from 0: the first step's rate is LR(0)) the rate
//
//	Peak · s / max(1, Warmup)                                 for s < Warmup
//	Peak · max(0, ½(1 + cos(π · (s−Warmup) / max(1, Total−Warmup))))  after
//
// so with a warmup the first step runs at rate 0, as it does there. Past
// Total the cosine rises again, as there too: a run stops at Total.
type Schedule struct {
	Peak          float64
	Warmup, Total int
}

// LR is the learning rate of optimizer step s, from 0.
func (s Schedule) LR(step int) float64 {
	if step < s.Warmup {
		return s.Peak * float64(step) / float64(max(1, s.Warmup))
	}
	progress := float64(step-s.Warmup) / float64(max(1, s.Total-s.Warmup))
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
