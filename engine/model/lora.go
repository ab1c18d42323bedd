package model

import (
	"fmt"
	"math"
	"sort"
)

// LoRA is one low-rank adapter as a runner applies it: for each targeted
// weight W (rows × cols, named as the GGUF file names it), a pair A
// (rank × cols) and B (rows × rank), and the output of every product with W
// gains Scale·B·(A·x): y = W·x + Scale·B·A·x. The file formats and the
// alpha/rank convention live in engine/adapter; here Scale is the whole
// factor (llama.cpp's adapter scale times alpha/rank).
//
// A fused tensor (Phi-3's blk.N.attn_qkv.weight and its gate-and-up
// blk.N.ffn_up.weight) is targeted whole, as llama.cpp and PEFT target it:
// B has the fused tensor's rows. A tied LM head is token_embd.weight, so a
// pair for it changes both the embedding lookup and the head, as merging
// the pair into the file would.
type LoRA struct {
	Scale   float32
	Weights map[string]LoRAWeight
}

// LoRAWeight is the pair of one targeted weight, row-major float32.
type LoRAWeight struct {
	Rank int
	A    []float32 // Rank rows of the weight's columns (its input)
	B    []float32 // the weight's rows (its output) of Rank
}

// loraPart is what one projection of the forward pass adds: the pair of
// one adapter, with B cut to the projection's rows when the projection is a
// slice of a fused tensor.
type loraPart struct {
	scale float32
	rank  int
	a, b  []float32
}

// LoRATargets lists the weights of m an adapter may target, with their
// shape [rows, cols]: each layer's attention and feed-forward projections
// (fused ones whole; k and v not where the values are k's projection), the
// LM head when it is its own tensor, and token_embd.weight.
func (m *Model) LoRATargets() map[string][2]int {
	t := map[string][2]int{}
	add := func(w *Weight) {
		if w == nil {
			return
		}
		if w.fused != "" {
			// The fused tensor's shape: the slices together.
			s := t[w.fused]
			t[w.fused] = [2]int{max(s[0], w.row0+w.Rows), w.Cols}
			return
		}
		t[w.Name] = [2]int{w.Rows, w.Cols}
	}
	for i := range m.Layers {
		l := &m.Layers[i]
		ws := []*Weight{l.Q, l.K, l.V, l.O, l.Gate, l.Up, l.Down}
		if l.V != nil && l.V == l.K {
			// Values that are k's projection (Gemma 4's attention_k_eq_v)
			// would need k's adapter twice; neither is a target.
			ws = []*Weight{l.Q, l.O, l.Gate, l.Up, l.Down}
		}
		for _, w := range ws {
			add(w)
		}
	}
	add(m.Output)
	add(m.Embed)
	return t
}

// CheckLoRA validates adapters against m: every target a weight of m, every
// pair of its shape, the scale and the values finite. Errors name the
// tensor.
func (m *Model) CheckLoRA(loras []LoRA) error {
	targets := m.LoRATargets()
	for i, l := range loras {
		if math.IsNaN(float64(l.Scale)) || math.IsInf(float64(l.Scale), 0) {
			return fmt.Errorf("model: adapter %d: scale %v is not a finite number", i, l.Scale)
		}
		names := make([]string, 0, len(l.Weights))
		for name := range l.Weights {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			p := l.Weights[name]
			shape, ok := targets[name]
			if !ok {
				return fmt.Errorf("model: adapter %d: tensor %q is not a projection of this %s model that LoRA can target", i, name, m.Config.Arch)
			}
			rows, cols := shape[0], shape[1]
			if p.Rank <= 0 {
				return fmt.Errorf("model: adapter %d: tensor %q: rank %d must be positive", i, name, p.Rank)
			}
			if len(p.A) != p.Rank*cols {
				return fmt.Errorf("model: adapter %d: tensor %q: A has %d values, want rank %d × %d columns", i, name, len(p.A), p.Rank, cols)
			}
			if len(p.B) != rows*p.Rank {
				return fmt.Errorf("model: adapter %d: tensor %q: B has %d values, want %d rows × rank %d", i, name, len(p.B), rows, p.Rank)
			}
			for _, v := range [][]float32{p.A, p.B} {
				for _, x := range v {
					if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
						return fmt.Errorf("model: adapter %d: tensor %q holds %v", i, name, x)
					}
				}
			}
		}
	}
	return nil
}

// loraParts are the pairs of loras that apply to w, B cut to w's rows.
func loraParts(loras []LoRA, w *Weight) []loraPart {
	if w == nil {
		return nil
	}
	name, row0 := w.Name, 0
	if w.fused != "" {
		name, row0 = w.fused, w.row0
	}
	var parts []loraPart
	for _, l := range loras {
		p, ok := l.Weights[name]
		if !ok || l.Scale == 0 {
			continue
		}
		parts = append(parts, loraPart{scale: l.Scale, rank: p.Rank, a: p.A, b: p.B[row0*p.Rank : (row0+w.Rows)*p.Rank]})
	}
	return parts
}

// applyLoRA adds scale·(x·Aᵀ)·Bᵀ of each part to y, m rows: the CPU
// reference's correction after a projection. The rank-sized intermediate
// is rounded to float32 as the GPU's two matmuls round it.
func applyLoRA(parts []loraPart, x, y []float32, m int) {
	for _, p := range parts {
		cols := len(p.a) / p.rank
		rows := len(p.b) / p.rank
		t := make([]float32, p.rank)
		for i := range m {
			xi := x[i*cols : (i+1)*cols]
			for k := range p.rank {
				t[k] = dot(p.a[k*cols:(k+1)*cols], xi)
			}
			yi := y[i*rows : (i+1)*rows]
			for r := range rows {
				yi[r] += p.scale * dot(p.b[r*p.rank:(r+1)*p.rank], t)
			}
		}
	}
}

// loraEmbed adds the embedding row id's correction, scale·B[id]·A, to row.
func loraEmbed(parts []loraPart, id int, row []float32) {
	for _, p := range parts {
		cols := len(p.a) / p.rank
		bi := p.b[id*p.rank : (id+1)*p.rank]
		for j := range cols {
			var s float32
			for k := range p.rank {
				s += bi[k] * p.a[k*cols+j]
			}
			row[j] += p.scale * s
		}
	}
}
