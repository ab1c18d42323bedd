package arch

// Tensor is one tensor of a layer: its name in a GGUF file (after
// "blk.N.") and in a transformers checkpoint (after "model.layers.N."), its
// shape and what it holds.
type Tensor struct {
	GGUF string // "attn_q.weight"
	HF   string // "self_attn.q_proj.weight"
	// Rows and Cols are the shape, outermost first as transformers and
	// PEFT give it (ggml's ne is [Cols, Rows]); a vector has Cols
	// DimNone.
	Rows, Cols Dim
	// Stack, when set, makes the tensor that many Rows×Cols matrices
	// (ggml's ne [Cols, Rows, Stack]); HF then has a %d for the index of
	// each (Gemma 3n's altup_projections.%d.weight).
	Stack Dim
	Kind  Kind
	// Optional tensors may be in a checkpoint (an o_proj bias) and import
	// when they are, but a model of the architecture does without them.
	Optional bool
	// OwnKV tensors exist only in the layers that keep their own keys and
	// values (Config.OwnKV): k, v and k's norm; Gemma 4's layers past its
	// KV-sharing boundary have none.
	OwnKV bool
	// Value marks the v projection, which the layers with Sizes.KEqV lack
	// (Gemma 4's global layers with attention_k_eq_v: their values are
	// the keys' projection).
	Value bool
	// Experts marks the tensors of an optional mixture of experts
	// (Gemma 4's), which exist only where Sizes.Experts is set.
	Experts bool
	// PLE marks a tensor of the per-layer embeddings whose shape does not
	// say so (the hidden-wide norm after Gemma 4's PLE block), which
	// exists, as those of DimPerLayer do, only where Sizes.PerLayer is
	// set: the 26B-A4B has no per-layer embeddings, and neither
	// transformers nor llama.cpp gives it that norm.
	PLE bool
	// Permute is the head count whose rows llama.cpp's converter permutes
	// when the architecture has PermuteQK.
	Permute Heads
	// LoRA are the training targets ("q", …, "down") that adapt this
	// projection: one, or a fused tensor's several. Only a Matrix has
	// them, and every Matrix of a layer is a LoRA target in PEFT and
	// llama.cpp.
	LoRA []string
}

// Module is the transformers module of a Matrix: HF without ".weight".
func (t *Tensor) Module() string {
	return t.HF[:len(t.HF)-len(".weight")]
}

// Kind is what a tensor holds, which decides how it converts and how
// engine/synth draws it.
type Kind int

const (
	Matrix Kind = iota // a projection: rows outputs by cols inputs
	Norm               // RMSNorm gains
	Bias               // a projection's bias
	Scalar             // one number (Gemma 4's layer output scale)
	Sink               // attention sinks: a logit per query head (gpt-oss)
)

// Heads names a head count of the model.
type Heads int

const (
	NoHeads Heads = iota
	QHeads        // attention.head_count
	KVHeads       // attention.head_count_kv
)

// Dim names one extent of a tensor in terms of the hyper-parameters.
type Dim int

const (
	DimNone      Dim = iota
	DimHidden        // embedding_length
	DimFF            // feed_forward_length
	DimFF2           // 2 × feed_forward_length: gate and up fused
	DimQ             // head_count × key_length
	DimKV            // head_count_kv × key_length
	DimQKV           // q, k and v fused: DimQ + 2 DimKV
	DimHeadDim       // key_length
	DimPerLayer      // embedding_length_per_layer_input (Gemma 4's PLE)
	DimPerLayers     // block_count × embedding_length_per_layer_input
	DimVocab         // the vocabulary (token_embd's rows)
	DimAltUp         // altup.num_inputs: Gemma 3n's residual streams
	DimAltUp2        // altup.num_inputs squared
	DimAltUpLess     // altup.num_inputs - 1: the streams beside the first
	DimLaurel        // the rank of Gemma 3n's LAuReL
	DimExperts       // expert_count
	DimExpertFF      // expert_feed_forward_length
	DimExpertFF2     // 2 × expert_feed_forward_length: gate and up fused
	DimHeads         // attention.head_count
)

// Sizes are the hyper-parameters a Dim is resolved with: one layer's (the
// importer's from config.json, synth's from its preset), whose OwnKV says
// whether it has the OwnKV tensors.
type Sizes struct {
	Hidden, FF, Heads, KVHeads, HeadDim int
	Layers, PerLayer, Vocab             int
	AltUp, Laurel                       int
	Experts, ExpertFF                   int
	OwnKV, KEqV                         bool
}

// Of is d's extent in a model of sizes s; DimNone is 1.
func (d Dim) Of(s Sizes) int {
	q, kv := s.Heads*s.HeadDim, s.KVHeads*s.HeadDim
	switch d {
	case DimHidden:
		return s.Hidden
	case DimFF:
		return s.FF
	case DimFF2:
		return 2 * s.FF
	case DimQ:
		return q
	case DimKV:
		return kv
	case DimQKV:
		return q + 2*kv
	case DimHeadDim:
		return s.HeadDim
	case DimPerLayer:
		return s.PerLayer
	case DimPerLayers:
		return s.Layers * s.PerLayer
	case DimVocab:
		return s.Vocab
	case DimAltUp:
		return s.AltUp
	case DimAltUp2:
		return s.AltUp * s.AltUp
	case DimAltUpLess:
		return s.AltUp - 1
	case DimLaurel:
		return s.Laurel
	case DimExperts:
		return s.Experts
	case DimExpertFF:
		return s.ExpertFF
	case DimExpertFF2:
		return 2 * s.ExpertFF
	case DimHeads:
		return s.Heads
	}
	return 1
}

// In reports whether t exists in a layer (or model) of sizes s: an OwnKV
// tensor only where the layer keeps its own cache, v's only where the
// layer does not take its values from k's projection, an Experts tensor
// only in a mixture of experts, a per-layer-embedding tensor only where
// the model has them.
func (t *Tensor) In(s Sizes) bool {
	ple := func(d Dim) bool { return d == DimPerLayer || d == DimPerLayers }
	return (!t.OwnKV || s.OwnKV) && (!t.Value || !s.KEqV) && (!t.Experts || s.Experts > 0) &&
		(s.PerLayer > 0 || !t.PLE && !ple(t.Rows) && !ple(t.Cols))
}

// Shape is t's shape in a model of sizes s, outermost first: [rows, cols],
// [stack, rows, cols] for a stack, [rows] for a vector, or [stack, rows]
// for a stack of vectors.
func (t *Tensor) Shape(s Sizes) []int64 {
	if t.Cols == DimNone {
		if t.Stack != DimNone {
			// A vector per matrix of a stack (gpt-oss's experts' biases).
			return []int64{int64(t.Stack.Of(s)), int64(t.Rows.Of(s))}
		}
		return []int64{int64(t.Rows.Of(s))}
	}
	if t.Stack != DimNone {
		return []int64{int64(t.Stack.Of(s)), int64(t.Rows.Of(s)), int64(t.Cols.Of(s))}
	}
	return []int64{int64(t.Rows.Of(s)), int64(t.Cols.Of(s))}
}

// StandardBlock is the layer of the Llama graph with what l adds to it, in
// the order llama.cpp's converter writes a layer: the attention norm, q, k
// and v (each with its bias and head norm), the output projection, the
// norms around the feed-forward, gate, up and down.
func StandardBlock(l Layout) []Tensor {
	norm := func(gguf, hf string, d Dim) Tensor {
		return Tensor{GGUF: gguf + ".weight", HF: hf + ".weight", Rows: d, Kind: Norm}
	}
	b := []Tensor{norm("attn_norm", "input_layernorm", DimHidden)}
	if l.Fused {
		b = append(b,
			Tensor{GGUF: "attn_qkv.weight", HF: "self_attn.qkv_proj.weight", Rows: DimQKV, Cols: DimHidden, LoRA: []string{"q", "k", "v"}},
			Tensor{GGUF: "attn_qkv.bias", HF: "self_attn.qkv_proj.bias", Rows: DimQKV, Kind: Bias, Optional: true})
	} else {
		for _, p := range []struct {
			name  string
			rows  Dim
			heads Heads
		}{{"q", DimQ, QHeads}, {"k", DimKV, KVHeads}, {"v", DimKV, NoHeads}} {
			proj := "self_attn." + p.name + "_proj"
			b = append(b,
				Tensor{GGUF: "attn_" + p.name + ".weight", HF: proj + ".weight", Rows: p.rows, Cols: DimHidden, Permute: p.heads, LoRA: []string{p.name}},
				Tensor{GGUF: "attn_" + p.name + ".bias", HF: proj + ".bias", Rows: p.rows, Kind: Bias, Optional: !l.QKVBias, Permute: p.heads})
			if l.QKNorm && p.name != "v" {
				b = append(b, norm("attn_"+p.name+"_norm", "self_attn."+p.name+"_norm", DimHeadDim))
			}
		}
	}
	b = append(b,
		Tensor{GGUF: "attn_output.weight", HF: "self_attn.o_proj.weight", Rows: DimHidden, Cols: DimQ, LoRA: []string{"o"}},
		Tensor{GGUF: "attn_output.bias", HF: "self_attn.o_proj.bias", Rows: DimHidden, Kind: Bias, Optional: true})
	if l.PostNorms {
		b = append(b,
			norm("post_attention_norm", "post_attention_layernorm", DimHidden),
			norm("ffn_norm", "pre_feedforward_layernorm", DimHidden))
	} else {
		b = append(b, norm("ffn_norm", "post_attention_layernorm", DimHidden))
	}
	if l.Fused {
		// Gate rows first, then up, as transformers keeps Phi-3's
		// gate_up_proj and the converter copies it.
		b = append(b, Tensor{GGUF: "ffn_up.weight", HF: "mlp.gate_up_proj.weight", Rows: DimFF2, Cols: DimHidden, LoRA: []string{"gate", "up"}})
	} else {
		b = append(b,
			Tensor{GGUF: "ffn_gate.weight", HF: "mlp.gate_proj.weight", Rows: DimFF, Cols: DimHidden, LoRA: []string{"gate"}},
			Tensor{GGUF: "ffn_up.weight", HF: "mlp.up_proj.weight", Rows: DimFF, Cols: DimHidden, LoRA: []string{"up"}})
	}
	b = append(b, Tensor{GGUF: "ffn_down.weight", HF: "mlp.down_proj.weight", Rows: DimHidden, Cols: DimFF, LoRA: []string{"down"}})
	if l.PostNorms {
		b = append(b, norm("post_ffw_norm", "post_feedforward_layernorm", DimHidden))
	}
	return b
}

// MoEBlock is StandardBlock(l) with a mixture of experts in place of the
// dense feed-forward: the router and the stacked experts' gate, up and
// down, in llama.cpp's names and transformers' per-expert ones (as the
// checkpoints on the Hub store them; engine/hfimport also reads
// transformers 5's fused form). Neither is a LoRA target.
func MoEBlock(l Layout) []Tensor {
	b := StandardBlock(l)
	var out []Tensor
	for _, t := range b {
		switch t.GGUF {
		case "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight":
			continue
		}
		out = append(out, t)
	}
	return append(out,
		Tensor{GGUF: "ffn_gate_inp.weight", HF: "mlp.gate.weight", Rows: DimExperts, Cols: DimHidden},
		Tensor{GGUF: "ffn_gate_exps.weight", HF: "mlp.experts.%d.gate_proj.weight", Stack: DimExperts, Rows: DimExpertFF, Cols: DimHidden},
		Tensor{GGUF: "ffn_up_exps.weight", HF: "mlp.experts.%d.up_proj.weight", Stack: DimExperts, Rows: DimExpertFF, Cols: DimHidden},
		Tensor{GGUF: "ffn_down_exps.weight", HF: "mlp.experts.%d.down_proj.weight", Stack: DimExperts, Rows: DimHidden, Cols: DimExpertFF},
	)
}

// PermutedRow is the transformers row of GGUF row r of a q or k projection
// (or its bias, or its LoRA B) of rows rows under llama.cpp's permutation
// for heads heads: w.reshape(heads, 2, half, cols).swapaxes(1,
// 2).reshape(rows, cols), which interleaves the two rotate_half halves of
// each head into the (2i, 2i+1) pairs of Llama's RoPE. engine/hfimport
// applies it on import and engine/adapter to PEFT adapters, both as
// llama.cpp's converters do.
func PermutedRow(r, rows, heads int) int {
	per := rows / heads
	half := per / 2
	h, rem := r/per, r%per
	return h*per + (rem%2)*half + rem/2
}
