package arch

import (
	"fmt"
	"sort"

	"github.com/hearthstudio/hearth/gguf"
)

// Arch is everything Hearth knows about one general.architecture: how to
// read its hyper-parameters, which tensors a layer holds under GGUF's and
// transformers' names, how a Hugging Face checkpoint of it converts,
// whether LoRA training covers it, and which built-in chat template
// renders for a file without one. engine/model, engine/hfimport,
// engine/adapter, engine/chat, engine/synth and training read it; none of
// them keeps a table of architectures of its own.
type Arch struct {
	// Name is general.architecture: "llama", "gemma2".
	Name string
	// Layout is the graph's shape where architectures differ; ReadConfig
	// copies it into the Config before Configure runs.
	Layout Layout
	// Configure reads the keys the architecture adds to the common ones
	// (soft-caps, sliding patterns); nil when it adds none.
	Configure func(f *gguf.File, c *Config) error
	// Block lists the tensors of one layer in the order llama.cpp's
	// converter writes them. Register fills it with StandardBlock(Layout)
	// when left nil; a graph that differs (MoE, per-layer embeddings)
	// lists its own.
	Block []Tensor

	// Globals are the model-level tensors the architecture adds to
	// token_embd, output_norm and output (Gemma 4's per-layer embeddings),
	// under their whole GGUF names and their transformers names after
	// "model.".
	Globals []Tensor

	// HF are the transformers classes (config.json's "architectures")
	// that import as this architecture.
	HF []HFClass
	// PermuteQK: llama.cpp's converter permutes the rows of q and k (and
	// of their biases and LoRA B) into Llama's interleaved RoPE pairs; the
	// Block tensors' Permute says with which head count.
	PermuteQK bool
	// NormPlusOne: transformers stores the norm gains as w where the
	// graph multiplies by 1 + w (Gemma); GGUF stores 1 + w.
	NormPlusOne bool
	// Softcap: config.json's attn_logit_softcapping and
	// final_logit_softcapping apply, with the class defaults (Gemma 2).
	Softcap bool
	// AttnScale: q·k is scaled by 1/sqrt(query_pre_attn_scalar), written
	// as attention.scale (Gemma 2 and 3).
	AttnScale bool
	// LayerShapes: the layers differ in widths or share caches (Gemma 4):
	// ReadConfig reads the per-layer arrays as their widest values and
	// Configure fills Config.Shapes.
	LayerShapes bool
	// LongRoPE: config.json's longrope scaling (per-pair factor tensors)
	// and original_max_position_embeddings apply (Phi-3).
	LongRoPE bool

	// Trainable: training's LoRA step covers this graph. The targets a
	// layer offers are the LoRA names of its Block tensors.
	Trainable bool

	// ChatTemplate is the built-in template of engine/chat that renders
	// this architecture's conversations whatever its vocabulary; "" lets
	// the vocabulary's turn markers decide, and ChatFallback is the
	// template when they do not.
	ChatTemplate, ChatFallback string
}

// Layout is what a layer holds beyond the base graph (Llama's), as flags
// the one forward pass of each backend consults.
type Layout struct {
	NeoX      bool // RoPE pairs (i, i+d/2); else Llama's (2i, 2i+1)
	GELU      bool // GeGLU feed-forward instead of SwiGLU
	QKVBias   bool // biases on q, k and v (Qwen 2)
	QKNorm    bool // RMSNorm of each q and k head (Qwen 3, Gemma 3)
	PostNorms bool // norms after attention and the feed-forward too (Gemma 2, 3)
	Fused     bool // q, k, v in one attn_qkv and gate, up in one ffn_up (Phi-3)
}

func (l Layout) apply(c *Config) {
	c.NeoX, c.GELU, c.QKVBias, c.QKNorm, c.PostNorms = l.NeoX, l.GELU, l.QKVBias, l.QKNorm, l.PostNorms
}

// Window is how a Hugging Face class's layers use its sliding window.
type Window int

const (
	WindowNone       Window = iota // full attention everywhere (Llama, Gemma)
	WindowAll                      // every layer, when the config sets one (Mistral, Phi-3)
	WindowAlternate                // even layers sliding, odd layers global (Gemma 2)
	WindowPattern                  // one global layer in every sliding_window_pattern (Gemma 3)
	WindowLayerTypes               // layer_types lists each layer's kind (Gemma 4)
	WindowRefused                  // Qwen's max_window_layers scheme, which Hearth does not run
)

// HFClass is one transformers model class that converts to an
// architecture, with the transformers class defaults of the config.json
// keys that a config may omit.
type HFClass struct {
	Name   string // "LlamaForCausalLM"
	Window Window
	// Tied is the class default of tie_word_embeddings.
	Tied     bool
	Defaults map[string]float64
	// Multimodal are vision-language classes whose text model is this
	// class: their config.json nests it as text_config and their tensors
	// carry a prefix; only the text part imports.
	Multimodal []string
	// Bare: a base model class, whose tensors lack the "model." prefix
	// (Gemma3TextModel: layers.0..., embed_tokens, norm).
	Bare bool
}

// registry is filled by the architectures' init functions and only read
// after.
var registry = map[string]*Arch{}

// Register makes an architecture known; each architecture's file calls it
// from init. A second record of a name, or a record without one, is a
// build defect.
func Register(a *Arch) {
	if a.Name == "" {
		panic("arch: Register of a record without a name")
	}
	if _, dup := registry[a.Name]; dup {
		panic(fmt.Sprintf("arch: %q registered twice", a.Name))
	}
	if a.Block == nil {
		a.Block = StandardBlock(a.Layout)
	}
	registry[a.Name] = a
}

// Lookup is the record of general.architecture name.
func Lookup(name string) (*Arch, bool) {
	a, ok := registry[name]
	return a, ok
}

// Names lists the registered architectures, sorted.
func Names() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// All lists the registered records in Names' order.
func All() []*Arch {
	var out []*Arch
	for _, n := range Names() {
		out = append(out, registry[n])
	}
	return out
}

// HFClassByName finds the Hugging Face class name, as a text-only class or as
// the text part of a multimodal one (then text is the text class and
// prefixed is true).
func HFClassByName(name string) (a *Arch, c *HFClass, prefixed bool, ok bool) {
	for _, a := range All() {
		for i := range a.HF {
			c := &a.HF[i]
			if c.Name == name {
				return a, c, false, true
			}
			for _, m := range c.Multimodal {
				if m == name {
					return a, c, true, true
				}
			}
		}
	}
	return nil, nil, false, false
}

// HFClassNames lists every importable class name, a multimodal one marked
// " (text only)", sorted.
func HFClassNames() []string {
	var names []string
	for _, a := range All() {
		for _, c := range a.HF {
			names = append(names, c.Name)
			for _, m := range c.Multimodal {
				names = append(names, m+" (text only)")
			}
		}
	}
	sort.Strings(names)
	return names
}

// Tensor is the Block tensor whose GGUF name is gguf ("attn_q.weight").
func (a *Arch) Tensor(gguf string) (*Tensor, bool) {
	for i := range a.Block {
		if a.Block[i].GGUF == gguf {
			return &a.Block[i], true
		}
	}
	return nil, false
}

// Interleaved reports whether the architecture's layers mix
// sliding-window and global attention (Gemma 2 and 3), so that every model
// of it has a window.
func (a *Arch) Interleaved() bool {
	for _, c := range a.HF {
		if c.Window == WindowAlternate || c.Window == WindowPattern || c.Window == WindowLayerTypes {
			return true
		}
	}
	return false
}
