// Package adapter holds LoRA adapters as files and turns them into what the
// engine runs: llama.cpp's GGUF LoRA (what convert_lora_to_gguf.py writes,
// and llama-cli --lora and Ollama's ADAPTER load), Hugging Face PEFT folders
// (adapter_model.safetensors and adapter_config.json), the model.LoRA a
// runner applies, and a merge of adapters into a new GGUF model.
//
// An Adapter is, per targeted weight W of the base (rows × cols, named as
// the GGUF file names it: blk.N.attn_q.weight, …, output.weight,
// token_embd.weight), a pair A (rank × cols) and B (rows × rank) in f32, and
// one alpha: W' = W + scale·alpha/rank·B·A, so y = W·x + scale·alpha/rank·
// B·(A·x), scale being the strength the user asks for (1 by default). With
// alpha 0 the factor is scale alone, as llama.cpp has it
// (llama_adapter_lora_weight::get_scale in src/llama-adapter.h).
package adapter

import (
	"fmt"
	"math"
	"slices"

	"github.com/hearthstudio/hearth/engine/model"
)

// Adapter is a LoRA adapter in memory.
type Adapter struct {
	// Arch is the base model's general.architecture ("llama", "gemma3").
	Arch string
	// Alpha is lora_alpha; the factor on each pair is Alpha/Rank.
	Alpha float32
	// Pairs maps base tensor names to their pairs.
	Pairs map[string]*Pair
	// Dropout is lora_dropout: training only, kept for the PEFT config.
	Dropout float32
	// BaseModel is PEFT's base_model_name_or_path, when known.
	BaseModel string
}

// Pair is the LoRA pair of one weight of Rows × Cols (output × input).
type Pair struct {
	Rank       int
	Rows, Cols int
	A          []float32 // Rank × Cols, row-major
	B          []float32 // Rows × Rank, row-major
}

// Names are the adapter's target names, sorted.
func (a *Adapter) Names() []string {
	names := make([]string, 0, len(a.Pairs))
	for n := range a.Pairs {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Rank is the rank every pair shares, or an error naming one that differs.
func (a *Adapter) Rank() (int, error) {
	r := 0
	for _, n := range a.Names() {
		p := a.Pairs[n]
		if r == 0 {
			r = p.Rank
		} else if p.Rank != r {
			return 0, fmt.Errorf("adapter: tensor %q has rank %d, the others %d", n, p.Rank, r)
		}
	}
	return r, nil
}

// factor is the multiplier of B·A for a pair of rank r at strength scale.
func (a *Adapter) factor(r int, scale float32) float32 {
	if a.Alpha == 0 {
		return scale
	}
	return scale * a.Alpha / float32(r)
}

// validate checks the adapter on its own: pairs whose lengths match their
// shapes, finite values, a finite alpha.
func (a *Adapter) validate() error {
	if math.IsNaN(float64(a.Alpha)) || math.IsInf(float64(a.Alpha), 0) {
		return fmt.Errorf("adapter: alpha %v is not a finite number", a.Alpha)
	}
	if len(a.Pairs) == 0 {
		return fmt.Errorf("adapter: no LoRA pairs")
	}
	for _, n := range a.Names() {
		p := a.Pairs[n]
		if p.Rank <= 0 || p.Rows <= 0 || p.Cols <= 0 {
			return fmt.Errorf("adapter: tensor %q: rank %d and shape %d×%d must be positive", n, p.Rank, p.Rows, p.Cols)
		}
		if len(p.A) != p.Rank*p.Cols || len(p.B) != p.Rows*p.Rank {
			return fmt.Errorf("adapter: tensor %q: A has %d values and B %d, want %d×%d and %d×%d", n, len(p.A), len(p.B), p.Rank, p.Cols, p.Rows, p.Rank)
		}
		for _, v := range [][]float32{p.A, p.B} {
			for _, x := range v {
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
					return fmt.Errorf("adapter: tensor %q holds %v", n, x)
				}
			}
		}
	}
	return nil
}

// Check validates the adapter against the base model m: the same
// architecture, every pair a LoRA target of m with m's shape. Errors name
// the tensor.
func (a *Adapter) Check(m *model.Model) error {
	if err := a.validate(); err != nil {
		return err
	}
	if a.Arch != m.Config.Arch {
		return fmt.Errorf("adapter: made for a %q model, the base is %q", a.Arch, m.Config.Arch)
	}
	targets := m.LoRATargets()
	for _, n := range a.Names() {
		p := a.Pairs[n]
		s, ok := targets[n]
		if !ok && n == "output.weight" && m.Output == m.Embed {
			return fmt.Errorf("adapter: tensor %q: the base ties its LM head to token_embd.weight (convert_lora_to_gguf.py refuses such an lm_head pair too)", n)
		}
		if !ok {
			return fmt.Errorf("adapter: tensor %q is not a weight of the base model that LoRA can target", n)
		}
		if s[0] != p.Rows || s[1] != p.Cols {
			return fmt.Errorf("adapter: tensor %q is %d×%d, the base model's is %d×%d", n, p.Rows, p.Cols, s[0], s[1])
		}
	}
	return nil
}

// LoRA is the adapter as a runner applies it at strength scale (1: as
// trained). Pairs of one rank share the adapter's memory; where ranks
// differ, B is copied with the per-rank factor folded in.
func (a *Adapter) LoRA(scale float32) (model.LoRA, error) {
	if math.IsNaN(float64(scale)) || math.IsInf(float64(scale), 0) {
		return model.LoRA{}, fmt.Errorf("adapter: scale %v is not a finite number", scale)
	}
	if err := a.validate(); err != nil {
		return model.LoRA{}, err
	}
	l := model.LoRA{Weights: map[string]model.LoRAWeight{}}
	r, err := a.Rank()
	if err == nil {
		l.Scale = a.factor(r, scale)
	} else {
		l.Scale = 1
	}
	for n, p := range a.Pairs {
		b := p.B
		if err != nil {
			f := a.factor(p.Rank, scale)
			b = make([]float32, len(p.B))
			for i, x := range p.B {
				b[i] = f * x
			}
		}
		l.Weights[n] = model.LoRAWeight{Rank: p.Rank, A: p.A, B: b}
	}
	return l, nil
}
