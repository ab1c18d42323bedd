package hfimport

import (
	"math"
	"slices"
	"strconv"

	"github.com/hearthstudio/hearth/engine/arch"
	"github.com/hearthstudio/hearth/gguf"
)

// layered is what config.json says of an architecture whose layers differ
// (the record's LayerShapes: Gemma 4), in the terms of the keys llama.cpp's
// converter writes for it.
type layered struct {
	globalHeadDim int    // the global layers' head width (global_head_dim)
	globalKVHeads int    // the global layers' KV heads (num_key_value_heads unless k_eq_v)
	kEqV          bool   // attention_k_eq_v: the global layers' values are their keys' projection
	sliding       []bool // per layer: sliding-window attention
	ffs           []int  // per layer: feed-forward width
	sharedKV      int    // the last layers that read earlier layers' caches
	perLayer      int    // per-layer embeddings' width; 0 for none
	// perLayerVocab is the per-layer table's height in the checkpoint
	// (Gemma 3n's 262144 against a vocabulary of 262400: the converter
	// pads it with zero rows to the vocabulary).
	perLayerVocab int

	// Gemma 3n: AltUp's streams and active one, LAuReL's rank, and each
	// layer's activation_sparsity_pattern (0 for a dense layer).
	altUp, altUpActive, laurel int
	sparsity                   []float64
}

// gemma3n reports whether the layers are Gemma 3n's.
func (l *layered) gemma3n() bool { return l.altUp > 0 }

// parseLayered reads Gemma 4's per-layer configuration: the layer types
// (transformers' default when absent: one global in six, the last layer
// global), the global layers' head width and KV heads (global_head_dim
// and num_global_key_value_heads, or the per_layer_config overrides of
// later transformers), keys equal to values on the global layers
// (attention_k_eq_v), KV sharing with its double-wide feed-forwards, the
// per-layer embeddings and the 26B-A4B's experts (enable_moe_block).
// Bidirectional attention, which Hearth does not run, is refused by name.
func (hp *hparams) parseLayered(c object) error {
	if !hp.fam.arch.LayerShapes {
		return nil
	}
	l := &layered{}
	hp.layered = l
	if c.has("use_bidirectional_attention") && !c.isNull("use_bidirectional_attention") {
		return c.errorf("use_bidirectional_attention", "is set: only causal attention is supported")
	}
	g3n := hp.fam.arch.Name == "gemma3n"
	types, err := c.strs("layer_types")
	if err != nil {
		return err
	}
	if types == nil {
		// transformers' defaults: Gemma 3n one global layer in five,
		// Gemma 4 one in six and the last.
		period := map[bool]int{true: 5, false: 6}[g3n]
		for i := range hp.layers {
			types = append(types, map[bool]string{true: "sliding_attention", false: "full_attention"}[(i+1)%period != 0])
		}
		if !g3n {
			types[hp.layers-1] = "full_attention"
		}
	}
	if len(types) != hp.layers {
		return c.errorf("layer_types", "has %d entries for %d layers", len(types), hp.layers)
	}
	for _, t := range types {
		if t != "sliding_attention" && t != "full_attention" {
			return c.errorf("layer_types", "has %q; want sliding_attention or full_attention", t)
		}
		l.sliding = append(l.sliding, t == "sliding_attention")
	}
	integer := func(key string) (int, error) { return hp.classInt(c, key) }
	if g3n {
		// One head width for every layer.
		l.globalHeadDim = hp.headDim
	} else if l.globalHeadDim, err = integer("global_head_dim"); err != nil {
		return err
	}
	// transformers gives the global layers num_global_key_value_heads
	// only with attention_k_eq_v (Gemma4TextAttention; later versions'
	// per_layer_config likewise), though llama.cpp's converter writes it
	// whenever the key is there.
	if !g3n {
		if l.kEqV, err = c.bool("attention_k_eq_v", false); err != nil {
			return err
		}
	}
	l.globalKVHeads = hp.kvHeads
	if l.kEqV && c.has("num_global_key_value_heads") {
		if l.globalKVHeads, err = c.int("num_global_key_value_heads", 0); err != nil {
			return err
		}
	}
	// Later transformers keep the global layers' head width and KV heads
	// as per_layer_config overrides.
	if plc, err := c.obj("per_layer_config"); err != nil {
		return err
	} else if plc.m != nil {
		for i, s := range l.sliding {
			o, err := plc.obj(strconv.Itoa(i))
			if err != nil {
				return err
			}
			if s || o.m == nil {
				continue
			}
			if l.globalHeadDim, err = o.int("head_dim", l.globalHeadDim); err != nil {
				return err
			}
			if l.globalKVHeads, err = o.int("num_key_value_heads", l.globalKVHeads); err != nil {
				return err
			}
		}
	}
	if l.globalHeadDim <= 0 || l.globalHeadDim%2 != 0 {
		return c.errorf("global_head_dim", "is %d, want a positive even number", l.globalHeadDim)
	}
	if l.globalKVHeads <= 0 || hp.heads%l.globalKVHeads != 0 {
		return c.errorf("num_global_key_value_heads", "is %d: num_attention_heads (%d) must be a multiple of it", l.globalKVHeads, hp.heads)
	}
	if l.sharedKV, err = integer("num_kv_shared_layers"); err != nil {
		return err
	}
	if l.sharedKV < 0 || l.sharedKV >= hp.layers {
		return c.errorf("num_kv_shared_layers", "is %d, want 0 up to num_hidden_layers (%d) - 1", l.sharedKV, hp.layers)
	}
	// A shared layer reads the last layer of its kind before the
	// boundary, which must exist (engine/arch refuses the file otherwise).
	first := hp.layers - l.sharedKV
	for i := first; i < hp.layers; i++ {
		if !slices.Contains(l.sliding[:first], l.sliding[i]) {
			return c.errorf("num_kv_shared_layers", "is %d: layer %d shares the cache of an earlier layer of its kind, and the %d layers before it have none", l.sharedKV, i, first)
		}
	}
	double, err := c.bool("use_double_wide_mlp", false)
	if err != nil {
		return err
	}
	if hp.ffs != nil && len(hp.ffs) != hp.layers {
		return c.errorf("intermediate_size", "has %d widths for %d layers", len(hp.ffs), hp.layers)
	}
	for i := range hp.layers {
		ff := hp.ff
		if hp.ffs != nil {
			ff = hp.ffs[i]
		}
		if double && l.sharedKV > 0 && i >= hp.layers-l.sharedKV {
			ff *= 2
		}
		l.ffs = append(l.ffs, ff)
	}
	if l.perLayer, err = integer("hidden_size_per_layer_input"); err != nil {
		return err
	}
	if c.isNull("hidden_size_per_layer_input") {
		l.perLayer = 0
	}
	if l.perLayer < 0 {
		return c.errorf("hidden_size_per_layer_input", "is %d", l.perLayer)
	}
	if l.perLayer > 0 {
		v, err := integer("vocab_size_per_layer_input")
		if err != nil {
			return err
		}
		// Gemma 3n's table leaves out the vision and audio tokens at the
		// end of the vocabulary; llama.cpp's converter pads it with zero
		// rows (transformers reads row 0, the padding token's, for them:
		// only those soft tokens differ).
		if v != hp.vocab && !(g3n && v > 0 && v < hp.vocab) {
			return c.errorf("vocab_size_per_layer_input", "is %d, vocab_size %d: a per-layer table of another height is not supported", v, hp.vocab)
		}
		l.perLayerVocab = v
	}
	if g3n {
		return hp.parseGemma3n(c, l)
	}
	if err := hp.parseGemma4Experts(c); err != nil {
		return err
	}
	if !c.has("rope_parameters") {
		// transformers' Gemma4TextConfig default when a config has none.
		hp.rope = ropeParams{typ: "proportional", theta: 1e6, factor: 1, partial: 0.25}
		hp.ropeLocal = ropeParams{typ: "default", theta: 1e4, factor: 1, partial: 1}
	}
	if hp.rope.typ != "proportional" || hp.ropeLocal.typ != "default" {
		return c.errorf("rope_parameters", "has %q global and %q sliding RoPE; %s runs proportional and default", hp.rope.typ, hp.ropeLocal.typ, hp.class)
	}
	return nil
}

// classInt reads the integer key of c, the class default when absent.
func (hp *hparams) classInt(c object, key string) (int, error) {
	return c.int(key, int(hp.fam.class.Defaults[key]))
}

// parseGemma3n reads what Gemma 3n adds: AltUp, LAuReL, the activation
// sparsity, its final soft-cap (transformers' default 30 when absent) and
// its RoPE (default on both kinds of layer, the sliding ones at
// rope_local_base_freq).
func (hp *hparams) parseGemma3n(c object, l *layered) error {
	integer := func(key string) (int, error) { return hp.classInt(c, key) }
	var err error
	if l.altUp, err = integer("altup_num_inputs"); err != nil {
		return err
	}
	if l.altUp < 2 || l.altUp > arch.MaxAltUp {
		return c.errorf("altup_num_inputs", "is %d, want 2 to %d", l.altUp, arch.MaxAltUp)
	}
	if l.altUpActive, err = integer("altup_active_idx"); err != nil {
		return err
	}
	if l.altUpActive < 0 || l.altUpActive >= l.altUp {
		return c.errorf("altup_active_idx", "is %d, not one of the %d streams", l.altUpActive, l.altUp)
	}
	if l.laurel, err = integer("laurel_rank"); err != nil {
		return err
	}
	if l.laurel <= 0 {
		return c.errorf("laurel_rank", "is %d, want a positive rank", l.laurel)
	}
	if l.perLayer <= 0 {
		return c.errorf("hidden_size_per_layer_input", "is %d: Gemma 3n has per-layer embeddings", l.perLayer)
	}
	// The corrected active stream is always scaled here, as in every
	// released model.
	if scaled, err := c.bool("altup_correct_scale", true); err != nil {
		return err
	} else if !scaled {
		return c.errorf("altup_correct_scale", "is false: only the scaled AltUp correction is supported")
	}
	switch c.m["activation_sparsity_pattern"].(type) {
	case nil:
		// transformers' default: the first 10 layers at 0.95 when there
		// are more than 10.
		l.sparsity = make([]float64, hp.layers)
		for i := range min(10, hp.layers) {
			if hp.layers > 10 {
				l.sparsity[i] = 0.95
			}
		}
	case []any:
		if l.sparsity, err = c.floats("activation_sparsity_pattern"); err != nil {
			return err
		}
		if len(l.sparsity) != hp.layers {
			return c.errorf("activation_sparsity_pattern", "has %d values for %d layers", len(l.sparsity), hp.layers)
		}
	default:
		return c.errorf("activation_sparsity_pattern", "is not a list of one sparsity a layer")
	}
	for _, p := range l.sparsity {
		if !(p >= 0 && p < 1) {
			return c.errorf("activation_sparsity_pattern", "has %v, want values in [0, 1)", p)
		}
	}
	switch {
	case c.isNull("final_logit_softcapping"):
		hp.finalSoftcap = 0
	case !c.has("final_logit_softcapping"):
		hp.finalSoftcap = hp.fam.class.Defaults["final_logit_softcapping"]
	}
	if !c.has("rope_parameters") {
		local, err := c.float("rope_local_base_freq", hp.fam.class.Defaults["rope_local_base_freq"])
		if err != nil {
			return err
		}
		hp.ropeLocal = ropeParams{typ: "default", theta: local, factor: 1, partial: 1}
	}
	if hp.rope.typ != "default" || hp.ropeLocal.typ != "default" {
		return c.errorf("rope_parameters", "has %q global and %q sliding RoPE; %s runs default RoPE on both", hp.rope.typ, hp.ropeLocal.typ, hp.class)
	}
	return nil
}

// sizes are layer i's sizes for the tensor map (the scalars for an
// architecture whose layers are alike).
func (hp *hparams) sizes(i int) arch.Sizes {
	s := arch.Sizes{Hidden: hp.hidden, FF: hp.ff, Heads: hp.heads, KVHeads: hp.kvHeads, HeadDim: hp.headDim,
		Layers: hp.layers, Vocab: hp.vocab, OwnKV: true}
	if e := hp.moe; e != nil {
		s.Experts, s.ExpertFF = e.experts, e.ff
	}
	if l := hp.layered; l != nil {
		s.FF, s.PerLayer, s.AltUp, s.Laurel = l.ffs[i], l.perLayer, l.altUp, l.laurel
		s.OwnKV = i < hp.layers-l.sharedKV
		if !l.sliding[i] {
			s.HeadDim, s.KVHeads, s.KEqV = l.globalHeadDim, l.globalKVHeads, l.kEqV
		}
	}
	return s
}

// layeredMetadata are the keys llama.cpp's Gemma4Model converter adds: the
// global layers' head width as key_length (its rotation all of it, through
// rope_freqs) and the sliding layers' as key_length_swa, the pattern one
// bool a layer, the feed-forward per layer when the layers differ, the KV
// sharing and the per-layer embeddings.
func (hp *hparams) layeredMetadata(a string, kv []gguf.KV) []gguf.KV {
	l := hp.layered
	set := func(k string, v gguf.Value) { kv = gguf.PutKV(kv, a+k, v) }
	u32 := func(x int) gguf.Value { return gguf.ValueOf(uint32(x)) }
	if l.gemma3n() {
		return hp.gemma3nMetadata(a, kv)
	}
	set("attention.key_length", u32(l.globalHeadDim))
	set("attention.value_length", u32(l.globalHeadDim))
	set("attention.key_length_swa", u32(hp.headDim))
	set("attention.value_length_swa", u32(hp.headDim))
	set("rope.dimension_count", u32(l.globalHeadDim))
	set("rope.dimension_count_swa", u32(hp.headDim))
	set("rope.freq_base_swa", gguf.ValueOf(float32(hp.ropeLocal.theta)))
	set("attention.sliding_window_pattern", gguf.ArrayOf(l.sliding))
	set("attention.shared_kv_layers", u32(l.sharedKV))
	set("embedding_length_per_layer_input", u32(l.perLayer))
	if slices.Max(l.ffs) != slices.Min(l.ffs) {
		ffs := make([]uint32, len(l.ffs))
		for i, f := range l.ffs {
			ffs[i] = uint32(f)
		}
		set("feed_forward_length", gguf.ArrayOf(ffs))
	}
	if l.globalKVHeads != hp.kvHeads {
		// One count a layer, as the converter writes
		// num_global_key_value_heads (the 26B-A4B's 8 sliding, 2 global).
		kvs := make([]uint32, hp.layers)
		for i := range kvs {
			kvs[i] = uint32(hp.sizes(i).KVHeads)
		}
		set("attention.head_count_kv", gguf.ArrayOf(kvs))
	}
	return kv
}

// gemma3nMetadata are the keys llama.cpp's Gemma3NModel converter adds
// (engine/arch's configureGemma3n reads them): AltUp's streams and active
// one, the per-layer embeddings' width, the KV sharing, each layer's
// sparsity as the normal quantile icdf(p) (-inf for p = 0, as torch's icdf
// gives it), the pattern one bool a layer, the sliding layers' RoPE base,
// the feed-forward per layer when the layers differ, and the final
// soft-cap, always (a reader's default for an absent key is 30).
func (hp *hparams) gemma3nMetadata(a string, kv []gguf.KV) []gguf.KV {
	l := hp.layered
	set := func(k string, v gguf.Value) { kv = gguf.PutKV(kv, a+k, v) }
	u32 := func(x int) gguf.Value { return gguf.ValueOf(uint32(x)) }
	set("altup.active_idx", u32(l.altUpActive))
	set("altup.num_inputs", u32(l.altUp))
	set("embedding_length_per_layer_input", u32(l.perLayer))
	set("attention.shared_kv_layers", u32(l.sharedKV))
	scales := make([]float32, len(l.sparsity))
	for i, p := range l.sparsity {
		scales[i] = float32(math.Sqrt2 * math.Erfinv(2*p-1))
	}
	set("activation_sparsity_scale", gguf.ArrayOf(scales))
	set("attention.sliding_window_pattern", gguf.ArrayOf(l.sliding))
	set("rope.freq_base_swa", gguf.ValueOf(float32(hp.ropeLocal.theta)))
	set("final_logit_softcapping", gguf.ValueOf(float32(hp.finalSoftcap)))
	if slices.Max(l.ffs) != slices.Min(l.ffs) {
		ffs := make([]uint32, len(l.ffs))
		for i, f := range l.ffs {
			ffs[i] = uint32(f)
		}
		set("feed_forward_length", gguf.ArrayOf(ffs))
	}
	return kv
}

// proportionalRopeFactors are rope_freqs.weight for Gemma 4's global
// layers as llama.cpp's converter writes them: transformers' proportional
// RoPE turns the first partial·dims/2 pairs of a dims-wide head at the
// frequencies of the whole head and leaves the rest unturned, which a
// factor of 1e30 (the pair's angle divided by it) says to ggml.
func proportionalRopeFactors(partial float64, dims int) []float32 {
	out := make([]float32, dims/2)
	rotated := int(partial * float64(dims) / 2)
	for i := range out {
		out[i] = 1e30
		if i < rotated {
			out[i] = 1
		}
	}
	return out
}
