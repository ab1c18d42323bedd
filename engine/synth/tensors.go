package synth

import (
	"fmt"

	"github.com/hearthstudio/hearth/engine/arch"
)

// tensorKind says how a tensor's values are made.
type tensorKind int

const (
	kindMatrix    tensorKind = iota // N(0, 1/cols), in the file type
	kindNorm                        // RMSNorm gains around 1, F32
	kindBias                        // small, F32
	kindRopeFreqs                   // Llama 3's RoPE factors, F32
	kindSink                        // attention sinks: logits of order one, F32
)

// tensorSpec is one tensor of a preset: its GGUF name, ggml shape
// (innermost first: [cols, rows]) and what it holds.
type tensorSpec struct {
	name  string
	shape []uint64
	kind  tensorKind
}

// tensors lists p's tensors in the order llama.cpp's converter writes
// them: the embedding, rope_freqs, each layer's (norm, attention, norm,
// FFN), the final norm and the output.
func (p Preset) tensors() []tensorSpec {
	h, v := uint64(p.Hidden), uint64(p.Vocab)

	var ts []tensorSpec
	add := func(kind tensorKind, name string, shape ...uint64) {
		ts = append(ts, tensorSpec{name: name, shape: shape, kind: kind})
	}
	add(kindMatrix, "token_embd.weight", h, v)
	if p.Llama3Rope != nil || p.ProportionalRope > 0 {
		add(kindRopeFreqs, "rope_freqs.weight", uint64(p.ropeDims()/2))
	}
	a, ok := arch.Lookup(p.Arch)
	if !ok {
		// Validate refuses such a preset; without a record there is no layer.
		return ts
	}
	// A layer tensor is the scale of Gemma 4's layer output, drawn as a
	// norm gain is: around 1. A stack of biases (gpt-oss's experts') is
	// drawn as biases are, a row an expert.
	kinds := map[arch.Kind]tensorKind{arch.Matrix: kindMatrix, arch.Norm: kindNorm, arch.Bias: kindBias, arch.Scalar: kindNorm, arch.Sink: kindSink}
	// ggml's shape is innermost first: [cols, rows].
	ne := func(shape []int64) []uint64 {
		out := make([]uint64, len(shape))
		for i, d := range shape {
			out[len(shape)-1-i] = uint64(d)
		}
		return out
	}
	for _, t := range a.Globals {
		if sizes := p.layerSizes(0); t.In(sizes) {
			add(kinds[t.Kind], t.GGUF, ne(t.Shape(sizes))...)
		}
	}
	for l := range p.Layers {
		sizes := p.layerSizes(l)
		for _, t := range a.Block {
			if t.Optional || !t.In(sizes) {
				continue
			}
			add(kinds[t.Kind], fmt.Sprintf("blk.%d.%s", l, t.GGUF), ne(t.Shape(sizes))...)
		}
	}
	add(kindNorm, "output_norm.weight", h)
	if !p.TiedEmbeddings {
		add(kindMatrix, "output.weight", h, v)
	}
	return ts
}
