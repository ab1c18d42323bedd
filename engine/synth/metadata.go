package synth

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/chat"
	"github.com/hearthstudio/hearth/engine/tokenizer"
	"github.com/hearthstudio/hearth/gguf"
)

// setMetadata sets every key of a model of preset p quantized to target on
// w: general.*, the architecture's hyper-parameters, the tokenizer and the
// chat template. The keys and their types are those llama.cpp's converter
// writes (counts UINT32, reals FLOAT32).
func setMetadata(w *gguf.Writer, p Preset, target gguf.QuantTarget, seed uint64, v *tokenizer.Vocab) error {
	f, ok := familyOf(p.Tokenizer)
	if !ok {
		return fmt.Errorf("synth: preset %q: tokenizer %q is not one of %s", p.Name, p.Tokenizer, familyNames)
	}
	tmpl := f.templateSource
	if tmpl == "" {
		tmpl = chat.BuiltinTemplate(f.template)
	}
	if tmpl == "" {
		return fmt.Errorf("synth: preset %q: engine/chat has no built-in template %q", p.Name, f.template)
	}

	a := p.Arch + "."
	u32 := func(x int) gguf.Value { return gguf.ValueOf(uint32(x)) }
	f32 := func(x float64) gguf.Value { return gguf.ValueOf(float32(x)) }
	kvs := []gguf.KV{
		{Key: "general.architecture", Value: gguf.ValueOf(p.Arch)},
		{Key: "general.name", Value: gguf.ValueOf(p.Name)},
		{Key: "general.description", Value: gguf.ValueOf(fmt.Sprintf(
			"Random weights with the shapes of %s, written by hearth synth (seed %d): not a trained model.", p.Model, seed))},
		{Key: "general.file_type", Value: gguf.ValueOf(uint32(target.FileType))},
		{Key: "general.quantization_version", Value: gguf.ValueOf(uint32(gguf.QuantizationVersion))},
		{Key: a + "vocab_size", Value: u32(p.Vocab)},
		{Key: a + "context_length", Value: u32(p.Context)},
		{Key: a + "embedding_length", Value: u32(p.Hidden)},
		{Key: a + "block_count", Value: u32(p.Layers)},
		{Key: a + "feed_forward_length", Value: u32(p.FF)},
		{Key: a + "attention.head_count", Value: u32(p.Heads)},
		{Key: a + "attention.head_count_kv", Value: u32(p.KVHeads)},
		{Key: a + "attention.key_length", Value: u32(p.HeadDim)},
		{Key: a + "attention.value_length", Value: u32(p.HeadDim)},
		{Key: a + "attention.layer_norm_rms_epsilon", Value: f32(p.Eps)},
		{Key: a + "rope.freq_base", Value: f32(p.RopeBase)},
		{Key: a + "rope.dimension_count", Value: u32(p.ropeDims())},
	}
	if p.RopeScaling != "" {
		kvs = append(kvs,
			gguf.KV{Key: a + "rope.scaling.type", Value: gguf.ValueOf(p.RopeScaling)},
			gguf.KV{Key: a + "rope.scaling.factor", Value: f32(p.RopeScalingFactor)})
	}
	if r := p.YaRN; r != nil {
		// The converter's keys for a yarn rope_scaling (TextModel's):
		// the factor, the original context and the ramp's two ends.
		kvs = append(kvs,
			gguf.KV{Key: a + "rope.scaling.type", Value: gguf.ValueOf("yarn")},
			gguf.KV{Key: a + "rope.scaling.factor", Value: f32(r.Factor)},
			gguf.KV{Key: a + "rope.scaling.original_context_length", Value: u32(r.OriginalContext)},
			gguf.KV{Key: a + "rope.scaling.yarn_beta_fast", Value: f32(r.BetaFast)},
			gguf.KV{Key: a + "rope.scaling.yarn_beta_slow", Value: f32(r.BetaSlow)})
	}
	if p.RopeBaseSWA != 0 {
		kvs = append(kvs, gguf.KV{Key: a + "rope.freq_base_swa", Value: f32(p.RopeBaseSWA)})
	}
	if p.SlidingWindow > 0 {
		kvs = append(kvs, gguf.KV{Key: a + "attention.sliding_window", Value: u32(p.SlidingWindow)})
	}
	if p.gemmaNew() {
		keys := gemma4Keys
		if p.Arch == "gemma3n" {
			keys = gemma3nKeys
		}
		for _, kv := range keys(p) {
			kvs = gguf.PutKV(kvs, kv.Key, kv.Value)
		}
	} else if p.SlidingWindowPattern > 0 && p.SlidingWindowPattern != 6 {
		kvs = append(kvs, gguf.KV{Key: a + "attention.sliding_window_pattern", Value: u32(p.SlidingWindowPattern)})
	}
	if p.Experts > 0 {
		// The converter's keys (TextModel's, for Qwen 3 MoE, Gemma 4
		// and gpt-oss): no gating function or weights norm, which the
		// qwen3moe, gemma4 and gpt-oss graphs fix.
		kvs = append(kvs,
			gguf.KV{Key: a + "expert_count", Value: u32(p.Experts)},
			gguf.KV{Key: a + "expert_used_count", Value: u32(p.ExpertsUsed)},
			gguf.KV{Key: a + "expert_feed_forward_length", Value: u32(p.ExpertFF)})
	}
	if p.QueryPreAttnScalar > 0 {
		kvs = append(kvs, gguf.KV{Key: a + "attention.scale", Value: f32(1 / math.Sqrt(float64(p.QueryPreAttnScalar)))})
	}
	if p.AttnSoftcap != 0 {
		kvs = append(kvs, gguf.KV{Key: a + "attn_logit_softcapping", Value: f32(p.AttnSoftcap)})
	}
	if p.FinalSoftcap != 0 {
		kvs = append(kvs, gguf.KV{Key: a + "final_logit_softcapping", Value: f32(p.FinalSoftcap)})
	}
	for _, kv := range kvs {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			return err
		}
	}
	if err := v.WriteGGUF(w); err != nil {
		return err
	}
	return w.SetString(tokenizer.KeyChatTemplate, tmpl)
}

// gemma3nKeys are the keys llama.cpp's converter adds for Gemma 3n (its
// Gemma3NModel.set_gguf_parameters): AltUp's streams and active one, the
// per-layer embeddings' width, the KV sharing, each layer's sparsity as
// icdf(p) (-inf where p is 0, as torch's icdf gives it) and the pattern as
// one bool a layer.
func gemma3nKeys(p Preset) []gguf.KV {
	a := p.Arch + "."
	u32 := func(x int) gguf.Value { return gguf.ValueOf(uint32(x)) }
	pattern := make([]bool, p.Layers)
	sparsity := make([]float32, p.Layers)
	for l := range pattern {
		pattern[l] = p.sliding(l)
		sparsity[l] = float32(math.Inf(-1))
		if l < p.SparseLayers {
			sparsity[l] = float32(math.Sqrt2 * math.Erfinv(2*0.95-1))
		}
	}
	return []gguf.KV{
		{Key: a + "altup.active_idx", Value: u32(0)},
		{Key: a + "altup.num_inputs", Value: u32(p.AltUp)},
		{Key: a + "embedding_length_per_layer_input", Value: u32(p.PerLayerInput)},
		{Key: a + "attention.shared_kv_layers", Value: u32(p.SharedKVLayers)},
		{Key: a + "activation_sparsity_scale", Value: gguf.ArrayOf(sparsity)},
		{Key: a + "attention.sliding_window_pattern", Value: gguf.ArrayOf(pattern)},
	}
}

// gemma4Keys are the keys llama.cpp's converter adds for Gemma 4 (its
// Gemma4Model.set_gguf_parameters), replacing the scalar
// feed_forward_length when the shared layers' differs and the scalar
// head_count_kv when the global layers' does: the sliding layers' head
// width and rotation, the pattern as one bool a layer, the KV sharing and
// the per-layer embeddings' width.
func gemma4Keys(p Preset) []gguf.KV {
	a := p.Arch + "."
	u32 := func(x int) gguf.Value { return gguf.ValueOf(uint32(x)) }
	pattern := make([]bool, p.Layers)
	for l := range pattern {
		pattern[l] = p.sliding(l)
	}
	kvs := []gguf.KV{
		{Key: a + "attention.key_length_swa", Value: u32(p.HeadDimSWA)},
		{Key: a + "attention.value_length_swa", Value: u32(p.HeadDimSWA)},
		{Key: a + "rope.dimension_count_swa", Value: u32(p.HeadDimSWA)},
		{Key: a + "attention.sliding_window_pattern", Value: gguf.ArrayOf(pattern)},
		{Key: a + "attention.shared_kv_layers", Value: u32(p.SharedKVLayers)},
		{Key: a + "embedding_length_per_layer_input", Value: u32(p.PerLayerInput)},
	}
	if p.FFShared > 0 && p.FFShared != p.FF {
		ff := make([]uint32, p.Layers)
		for l := range ff {
			ff[l] = uint32(p.layerSizes(l).FF)
		}
		kvs = append(kvs, gguf.KV{Key: a + "feed_forward_length", Value: gguf.ArrayOf(ff)})
	}
	if p.KVHeadsGlobal > 0 && p.KVHeadsGlobal != p.KVHeads {
		kv := make([]uint32, p.Layers)
		for l := range kv {
			kv[l] = uint32(p.layerSizes(l).KVHeads)
		}
		kvs = append(kvs, gguf.KV{Key: a + "attention.head_count_kv", Value: gguf.ArrayOf(kv)})
	}
	return kvs
}

// proportionalRopeFreqs is Gemma 4's rope_freqs.weight as llama.cpp's
// converter writes it for the global layers' "proportional" RoPE: of the
// head's dims/2 pairs the first ProportionalRope·dims/2 rotate (factor 1)
// and the others get 1e30, which makes their angle 0.
func proportionalRopeFreqs(p Preset) []float32 {
	out := make([]float32, p.ropeDims()/2)
	rotated := int(p.ProportionalRope * float64(p.ropeDims()) / 2)
	for i := range out {
		out[i] = 1e30
		if i < rotated {
			out[i] = 1
		}
	}
	return out
}

// ropeFreqs are Llama 3's RoPE frequency factors for preset p, as the
// converter computes rope_freqs.weight: for each rotated pair i, with
// wavelength λ = 2π·base^(2i/dims), 1 where λ is shorter than
// original_context/high_freq_factor, factor where it is longer than
// original_context/low_freq_factor, and between them the reciprocal of a
// linear blend of 1/factor and 1 in original_context/λ.
func ropeFreqs(p Preset) []float32 {
	r := p.Llama3Rope
	dims := p.ropeDims()
	out := make([]float32, dims/2)
	// The converter computes in float32 torch tensors throughout (freqs is
	// a float32 tensor, and so is everything derived from it), so this does
	// too: the comparisons at the two boundaries then agree with it.
	old := float32(r.OriginalContext)
	low, high, factor := float32(r.LowFreqFactor), float32(r.HighFreqFactor), float32(r.Factor)
	lowWave, highWave := old/low, old/high
	for i := range out {
		exp := float32(2*i) / float32(dims)
		freq := 1 / float32(math.Pow(float64(float32(p.RopeBase)), float64(exp)))
		wave := float32(2*math.Pi) / freq
		switch {
		case wave < highWave:
			out[i] = 1
		case wave > lowWave:
			out[i] = factor
		default:
			smooth := (old/wave - low) / (high - low)
			out[i] = 1 / ((1-smooth)/factor + smooth)
		}
	}
	return out
}
