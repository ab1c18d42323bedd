package synth

import "fmt"

// tensorKind says how a tensor's values are made.
type tensorKind int

const (
	kindMatrix    tensorKind = iota // N(0, 1/cols), in the file type
	kindNorm                        // RMSNorm gains around 1, F32
	kindBias                        // small, F32
	kindRopeFreqs                   // Llama 3's RoPE factors, F32
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
	q, kv := uint64(p.Heads*p.HeadDim), uint64(p.KVHeads*p.HeadDim)
	ff, hd := uint64(p.FF), uint64(p.HeadDim)

	var ts []tensorSpec
	add := func(kind tensorKind, name string, shape ...uint64) {
		ts = append(ts, tensorSpec{name: name, shape: shape, kind: kind})
	}
	add(kindMatrix, "token_embd.weight", h, v)
	if p.Llama3Rope != nil {
		add(kindRopeFreqs, "rope_freqs.weight", uint64(p.ropeDims()/2))
	}
	for l := range p.Layers {
		b := fmt.Sprintf("blk.%d.", l)
		add(kindNorm, b+"attn_norm.weight", h)
		if p.Fused() {
			add(kindMatrix, b+"attn_qkv.weight", h, q+2*kv)
		} else {
			for _, proj := range []struct {
				name string
				rows uint64
			}{{"q", q}, {"k", kv}, {"v", kv}} {
				add(kindMatrix, b+"attn_"+proj.name+".weight", h, proj.rows)
				if p.HasQKVBias() {
					add(kindBias, b+"attn_"+proj.name+".bias", proj.rows)
				}
				if p.HasQKNorm() && proj.name != "v" {
					add(kindNorm, b+"attn_"+proj.name+"_norm.weight", hd)
				}
			}
		}
		add(kindMatrix, b+"attn_output.weight", q, h)
		if p.HasPostNorms() {
			add(kindNorm, b+"post_attention_norm.weight", h)
		}
		add(kindNorm, b+"ffn_norm.weight", h)
		if p.Fused() {
			// Gate rows first, then up, as the converter keeps Phi-3's
			// gate_up_proj.
			add(kindMatrix, b+"ffn_up.weight", h, 2*ff)
		} else {
			add(kindMatrix, b+"ffn_gate.weight", h, ff)
			add(kindMatrix, b+"ffn_up.weight", h, ff)
		}
		add(kindMatrix, b+"ffn_down.weight", ff, h)
		if p.HasPostNorms() {
			add(kindNorm, b+"post_ffw_norm.weight", h)
		}
	}
	add(kindNorm, "output_norm.weight", h)
	if !p.TiedEmbeddings {
		add(kindMatrix, "output.weight", h, v)
	}
	return ts
}
