package hfimport

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hearthstudio/hearth/engine/arch"
)

// A family is what the conversion consults of the class being converted:
// its architecture's record and the class's own defaults.
type family struct {
	arch  *arch.Arch
	class *arch.HFClass
}

// ropeParams is one RoPE of a config, as transformers' rope_parameters (v5)
// or rope_theta and rope_scaling (v4) give it.
type ropeParams struct {
	typ                        string // "default", "linear", "llama3", "yarn" or "longrope"
	theta                      float64
	factor                     float64 // linear, llama3 and yarn
	lowFreqFactor, highFreqFac float64 // llama3
	origCtx                    int     // llama3's and yarn's original_max_position_embeddings
	partial                    float64 // partial_rotary_factor: the share of head_dim rotated

	// YaRN's optional fields, 0 where config.json has none (the reader's
	// defaults then apply).
	betaFast, betaSlow, extFactor, attnFactor float64
	// LongRoPE's per-pair factors (Phi-3).
	shortFactor, longFactor []float64
}

// hparams is what the conversion needs of config.json.
type hparams struct {
	class  string // the Hugging Face class, e.g. "Gemma3ForCausalLM"
	fam    *family
	prefix bool // tensors are the text part of a multimodal checkpoint

	vocab, hidden, layers, ff, heads, kvHeads, headDim, ctx int
	eps                                                     float64
	tied                                                    bool

	window       int // sliding window in tokens, 0 for none
	swaPattern   int // gemma3, gpt-oss: layer i is global when (i+1)%swaPattern == 0
	qpas         float64
	ffs          []int   // intermediate_size when config.json gives one a layer (Gemma 3n)
	attnSoftcap  float64 // 0 for none
	finalSoftcap float64 // 0 for none
	rope         ropeParams
	ropeLocal    ropeParams       // gemma3's sliding layers
	origCtx      int              // phi3's original_max_position_embeddings, 0 if absent
	layered      *layered         // Gemma 4's per-layer configuration; nil for the others
	moe          *moe             // the mixture of experts (Qwen 3 MoE, gpt-oss); nil for a dense model
	st           *sentenceModules // an embedding model's pooling and dense layers (EmbeddingGemma); nil for the others

	bos, eos, pad []int // config.json's ids, used when tokenizer_config.json names none
}

// parseConfig reads the hyper-parameters of config.json.
func parseConfig(dir string) (*hparams, error) {
	path := filepath.Join(dir, "config.json")
	top, err := readObject(path)
	if err != nil {
		return nil, err
	}
	archs, err := top.strs("architectures")
	if err != nil {
		return nil, err
	}
	if len(archs) == 0 {
		mt, _ := top.str("model_type", "")
		return nil, fmt.Errorf("hfimport: %s: no \"architectures\" (model_type %q): cannot tell the model class", path, mt)
	}
	hp := &hparams{class: archs[0]}
	c := top
	a, class, prefixed, ok := arch.HFClassByName(hp.class)
	if !ok {
		return nil, fmt.Errorf("hfimport: %s: architecture %q is not supported (supported: %s)", path, archs[0], strings.Join(arch.HFClassNames(), ", "))
	}
	if prefixed {
		if c, err = top.obj("text_config"); err != nil {
			return nil, err
		}
		if c.m == nil {
			c.m = map[string]any{}
		}
		hp.class, hp.prefix = class.Name, true
	}
	fam := &family{arch: a, class: class}
	hp.fam = fam
	// Only EmbeddingGemma's class is bidirectional, and it must say so
	// (the layered families refuse the key in parseLayered).
	if !a.LayerShapes {
		bidi, err := c.bool("use_bidirectional_attention", false)
		if err != nil {
			return nil, err
		}
		switch embedding := a.Name == "gemma-embedding"; {
		case embedding && !bidi:
			return nil, c.errorf("use_bidirectional_attention", "is not true: %s imports as EmbeddingGemma, a bidirectional encoder", hp.class)
		case !embedding && bidi:
			return nil, c.errorf("use_bidirectional_attention", "is true: only EmbeddingGemma (Gemma3TextModel) runs bidirectional attention")
		}
	}

	num := func(key string) (float64, error) {
		def, ok := fam.class.Defaults[key]
		if !c.has(key) && !ok {
			return 0, c.errorf(key, "is missing")
		}
		return c.float(key, def)
	}
	integer := func(key string) (int, error) {
		if !c.has(key) {
			def, ok := fam.class.Defaults[key]
			if !ok {
				return 0, c.errorf(key, "is missing")
			}
			return int(def), nil
		}
		return c.int(key, 0)
	}
	for _, f := range []struct {
		key string
		dst *int
	}{
		{"vocab_size", &hp.vocab}, {"hidden_size", &hp.hidden}, {"num_hidden_layers", &hp.layers},
		{"intermediate_size", &hp.ff}, {"num_attention_heads", &hp.heads}, {"max_position_embeddings", &hp.ctx},
	} {
		// Gemma 3n's intermediate_size may be one width a layer: the
		// widest here, each layer's in parseLayered.
		if _, list := c.m[f.key].([]any); list && f.key == "intermediate_size" && fam.arch.LayerShapes {
			ffs, err := c.ints(f.key)
			if err != nil {
				return nil, err
			}
			if len(ffs) == 0 {
				return nil, c.errorf(f.key, "is an empty list")
			}
			hp.ffs, *f.dst = ffs, slices.Max(ffs)
		} else if *f.dst, err = integer(f.key); err != nil {
			return nil, err
		}
		if *f.dst <= 0 {
			return nil, c.errorf(f.key, "is %d, want a positive number", *f.dst)
		}
	}
	// Without num_key_value_heads every head has its own K and V (MHA).
	hp.kvHeads = hp.heads
	if c.has("num_key_value_heads") || fam.class.Defaults["num_key_value_heads"] != 0 {
		if hp.kvHeads, err = integer("num_key_value_heads"); err != nil {
			return nil, err
		}
	}
	// head_dim is null or absent in most Llama-style configs: hidden/heads.
	if c.has("head_dim") || fam.class.Defaults["head_dim"] != 0 {
		if hp.headDim, err = integer("head_dim"); err != nil {
			return nil, err
		}
	} else {
		if hp.hidden%hp.heads != 0 {
			return nil, fmt.Errorf("hfimport: %s: hidden_size (%d) must be divisible by num_attention_heads (%d) when head_dim is not given", path, hp.hidden, hp.heads)
		}
		hp.headDim = hp.hidden / hp.heads
	}
	if hp.kvHeads <= 0 || hp.heads%hp.kvHeads != 0 {
		return nil, fmt.Errorf("hfimport: %s: num_attention_heads (%d) must be a multiple of num_key_value_heads (%d)", path, hp.heads, hp.kvHeads)
	}
	if hp.headDim <= 0 || hp.headDim%2 != 0 {
		return nil, fmt.Errorf("hfimport: %s: head_dim %d must be positive and even for RoPE", path, hp.headDim)
	}
	if hp.eps, err = num("rms_norm_eps"); err != nil {
		return nil, err
	}
	if hp.tied, err = c.bool("tie_word_embeddings", fam.class.Tied); err != nil {
		return nil, err
	}
	// A multimodal config keeps tie_word_embeddings at its top.
	if hp.prefix && !c.has("tie_word_embeddings") {
		if hp.tied, err = top.bool("tie_word_embeddings", fam.class.Tied); err != nil {
			return nil, err
		}
	}
	if hp.bos, err = c.ints("bos_token_id"); err != nil {
		return nil, err
	}
	if hp.eos, err = c.ints("eos_token_id"); err != nil {
		return nil, err
	}
	if hp.pad, err = c.ints("pad_token_id"); err != nil {
		return nil, err
	}
	if hp.prefix && hp.bos == nil && hp.eos == nil {
		if hp.bos, err = top.ints("bos_token_id"); err != nil {
			return nil, err
		}
		if hp.eos, err = top.ints("eos_token_id"); err != nil {
			return nil, err
		}
	}
	if err := hp.parseRope(c); err != nil {
		return nil, err
	}
	if err := hp.parseWindow(c); err != nil {
		return nil, err
	}
	if err := hp.parseLayered(c); err != nil {
		return nil, err
	}
	if err := hp.parseMoE(c); err != nil {
		return nil, err
	}
	if fam.arch.AttnScale {
		if hp.qpas, err = num("query_pre_attn_scalar"); err != nil {
			return nil, err
		}
		if hp.qpas <= 0 {
			return nil, c.errorf("query_pre_attn_scalar", "is %g, want a positive number", hp.qpas)
		}
	}
	if fam.arch.Softcap {
		// null turns a cap off; absent takes the class default.
		for _, f := range []struct {
			key string
			dst *float64
		}{{"attn_logit_softcapping", &hp.attnSoftcap}, {"final_logit_softcapping", &hp.finalSoftcap}} {
			if c.isNull(f.key) {
				continue
			}
			if *f.dst, err = num(f.key); err != nil {
				return nil, err
			}
		}
	} else if c.has("final_logit_softcapping") {
		// Gemma 3 has the key, null in every released model; honour it if set.
		if hp.finalSoftcap, err = c.float("final_logit_softcapping", 0); err != nil {
			return nil, err
		}
	}
	if fam.arch.LongRoPE {
		if hp.origCtx, err = c.int("original_max_position_embeddings", 0); err != nil {
			return nil, err
		}
	}
	if a.Name == "gemma-embedding" {
		if hp.st, err = parseSentenceModules(dir, hp.hidden); err != nil {
			return nil, err
		}
	}
	return hp, nil
}

// parseRope reads the RoPE of c: transformers 5's rope_parameters (one
// object, or for Gemma 3 one per layer type: full_attention and
// sliding_attention), or 4's rope_theta, rope_scaling and Gemma 3's
// rope_local_base_freq.
func (hp *hparams) parseRope(c object) error {
	fam := hp.fam
	theta, err := c.float("rope_theta", fam.class.Defaults["rope_theta"])
	if err != nil {
		return err
	}
	partial, err := c.float("partial_rotary_factor", 1)
	if err != nil {
		return err
	}
	localTheta, err := c.float("rope_local_base_freq", 10000)
	if err != nil {
		return err
	}
	localDefault := ropeParams{typ: "default", theta: localTheta, factor: 1, partial: partial}

	rp, err := c.obj("rope_parameters")
	if err != nil {
		return err
	}
	switch {
	case rp.m != nil && (rp.has("full_attention") || rp.has("sliding_attention")):
		full, err := rp.obj("full_attention")
		if err != nil {
			return err
		}
		if hp.rope, err = readRope(full, theta, partial); err != nil {
			return err
		}
		hp.ropeLocal = hp.rope
		if rp.has("sliding_attention") {
			slide, err := rp.obj("sliding_attention")
			if err != nil {
				return err
			}
			if hp.ropeLocal, err = readRope(slide, localTheta, partial); err != nil {
				return err
			}
		}
	case rp.m != nil:
		if hp.rope, err = readRope(rp, theta, partial); err != nil {
			return err
		}
		hp.ropeLocal = hp.rope
		if fam.class.Window == arch.WindowPattern {
			hp.ropeLocal = localDefault
		}
	default:
		scaling, err := c.obj("rope_scaling")
		if err != nil {
			return err
		}
		if scaling.m == nil {
			scaling.m = map[string]any{}
		}
		if hp.rope, err = readRope(scaling, theta, partial); err != nil {
			return err
		}
		hp.ropeLocal = hp.rope
		if fam.class.Window == arch.WindowPattern {
			// Gemma 3's rope_scaling is for the global layers only.
			hp.ropeLocal = localDefault
		}
	}
	if hp.ropeLocal.typ != "default" && fam.class.Window == arch.WindowPattern {
		return fmt.Errorf("hfimport: %s: the sliding layers' RoPE is %q: GGUF has no scaling for them", c.file, hp.ropeLocal.typ)
	}
	if hp.rope.typ == "proportional" && !fam.arch.LayerShapes {
		return fmt.Errorf("hfimport: %s: proportional RoPE on %s is not supported (Gemma 4's only)", c.file, hp.class)
	}
	if hp.rope.typ == "longrope" && !fam.arch.LongRoPE {
		return fmt.Errorf("hfimport: %s: longrope RoPE scaling on %s is not supported (Phi-3's only)", c.file, hp.class)
	}
	if hp.rope.typ == "llama3" && !fam.arch.PermuteQK {
		return fmt.Errorf("hfimport: %s: llama3 RoPE scaling on %s is not supported", c.file, hp.class)
	}
	if hp.rope.partial <= 0 || hp.rope.partial > 1 {
		return fmt.Errorf("hfimport: %s: partial_rotary_factor %g must be in (0, 1]", c.file, hp.rope.partial)
	}
	return nil
}

// readRope reads one RoPE object: rope_type (or v4's type), rope_theta and
// the scaling's own fields.
func readRope(o object, theta, partial float64) (ropeParams, error) {
	p := ropeParams{}
	var err error
	typ, err := o.str("type", "default")
	if err != nil {
		return p, err
	}
	if p.typ, err = o.str("rope_type", typ); err != nil {
		return p, err
	}
	if p.theta, err = o.float("rope_theta", theta); err != nil {
		return p, err
	}
	if p.factor, err = o.float("factor", 1); err != nil {
		return p, err
	}
	if p.lowFreqFactor, err = o.float("low_freq_factor", 1); err != nil {
		return p, err
	}
	if p.highFreqFac, err = o.float("high_freq_factor", 4); err != nil {
		return p, err
	}
	if p.origCtx, err = o.int("original_max_position_embeddings", 0); err != nil {
		return p, err
	}
	if p.partial, err = o.float("partial_rotary_factor", partial); err != nil {
		return p, err
	}
	for _, f := range []struct {
		dst *float64
		key string
	}{{&p.betaFast, "beta_fast"}, {&p.betaSlow, "beta_slow"}, {&p.extFactor, "extrapolation_factor"}, {&p.attnFactor, "attention_factor"}} {
		if *f.dst, err = o.float(f.key, 0); err != nil {
			return p, err
		}
	}
	if p.shortFactor, err = o.floats("short_factor"); err != nil {
		return p, err
	}
	if p.longFactor, err = o.floats("long_factor"); err != nil {
		return p, err
	}
	if p.theta <= 0 {
		return p, o.errorf("rope_theta", "is %g, want a positive number", p.theta)
	}
	switch p.typ {
	case "default", "":
		p.typ = "default"
	case "linear":
		if p.factor <= 0 {
			return p, o.errorf("factor", "is %g, want a positive number", p.factor)
		}
	case "llama3":
		if p.factor <= 0 || p.origCtx <= 0 || p.highFreqFac <= p.lowFreqFactor || p.lowFreqFactor <= 0 {
			return p, fmt.Errorf("hfimport: %s: %s: llama3 scaling needs factor > 0, original_max_position_embeddings > 0 and high_freq_factor > low_freq_factor > 0 (have %g, %d, %g, %g)",
				o.file, o.path, p.factor, p.origCtx, p.highFreqFac, p.lowFreqFactor)
		}
	case "yarn":
		if p.factor <= 0 {
			return p, o.errorf("factor", "is %g, want a positive number", p.factor)
		}
	case "proportional":
		// Gemma 4's global layers: partial_rotary_factor of the pairs turn
		// at the whole head's frequencies (rope_freqs says which).
	case "longrope", "su":
		p.typ = "longrope"
		if len(p.shortFactor) == 0 || len(p.shortFactor) != len(p.longFactor) {
			return p, fmt.Errorf("hfimport: %s: %s: longrope needs short_factor and long_factor of one length (have %d and %d)",
				o.file, o.path, len(p.shortFactor), len(p.longFactor))
		}
	default:
		return p, o.errorf("rope_type", "%q is not supported (Hearth runs default, linear, llama3, yarn, longrope and Gemma 4's proportional)", p.typ)
	}
	return p, nil
}

// parseWindow reads the sliding window and which layers use it, and checks
// that the layers follow the one pattern GGUF can say for the family.
func (hp *hparams) parseWindow(c object) error {
	layerTypes, err := c.strs("layer_types")
	if err != nil {
		return err
	}
	if layerTypes != nil && len(layerTypes) != hp.layers {
		return c.errorf("layer_types", "has %d entries for %d layers", len(layerTypes), hp.layers)
	}
	sliding := func(i int) bool { return layerTypes[i] == "sliding_attention" }
	window := func() error {
		if c.isNull("sliding_window") {
			return nil
		}
		def, ok := hp.fam.class.Defaults["sliding_window"]
		if !c.has("sliding_window") && !ok {
			return nil
		}
		w, err := c.int("sliding_window", int(def))
		if err != nil {
			return err
		}
		if w < 0 {
			return c.errorf("sliding_window", "is %d", w)
		}
		hp.window = w
		return nil
	}
	switch hp.fam.class.Window {
	case arch.WindowNone:
		return nil
	case arch.WindowAll:
		return window()
	case arch.WindowLayerTypes:
		if err := window(); err != nil || hp.fam.arch.LayerShapes {
			// Gemma 4's layer_types are read with the rest of its
			// layers (parseLayered).
			return err
		}
		return hp.parsePeriod(c, layerTypes)
	case arch.WindowRefused:
		on, err := c.bool("use_sliding_window", false)
		if err != nil {
			return err
		}
		if on || (layerTypes != nil && slices.Contains(layerTypes, "sliding_attention")) {
			return fmt.Errorf("hfimport: %s: use_sliding_window (Qwen's sliding window on the layers from max_window_layers) is not supported", c.file)
		}
		return nil
	case arch.WindowAlternate:
		if err := window(); err != nil {
			return err
		}
		for i := range layerTypes {
			if sliding(i) != (i%2 == 0) {
				return c.errorf("layer_types", "%v is not Gemma 2's alternation (even layers sliding, odd layers global), which GGUF assumes", layerTypes)
			}
		}
		return nil
	case arch.WindowPattern:
		if err := window(); err != nil {
			return err
		}
		if hp.swaPattern, err = c.int("sliding_window_pattern", 6); err != nil {
			return err
		}
		if layerTypes != nil {
			if first := slices.Index(layerTypes, "full_attention"); first >= 0 {
				hp.swaPattern = first + 1
			}
			for i := range layerTypes {
				if sliding(i) != ((i+1)%hp.swaPattern != 0) {
					return c.errorf("layer_types", "%v is not one global layer in every %d, which GGUF can say", layerTypes, hp.swaPattern)
				}
			}
		}
		if hp.swaPattern <= 0 {
			return c.errorf("sliding_window_pattern", "is %d, want a positive number", hp.swaPattern)
		}
		return nil
	}
	return nil
}

// typesPeriod is the period of sliding and global layers that a
// layer_types class (gpt-oss) has without layer_types (transformers'
// GptOssConfig default: the even layers slide) and that llama.cpp's
// loader assumes without attention.sliding_window_pattern.
const typesPeriod = 2

// parsePeriod reads the layer_types of a class whose GGUF says them as a
// period, attention.sliding_window_pattern (gpt-oss: layer i is global
// when (i+1) % period == 0, every layer sliding with period 0), into
// hp.swaPattern, and refuses by key a pattern no period says.
func (hp *hparams) parsePeriod(c object, layerTypes []string) error {
	hp.swaPattern = typesPeriod
	if layerTypes == nil {
		return nil
	}
	for _, t := range layerTypes {
		if t != "sliding_attention" && t != "full_attention" {
			return c.errorf("layer_types", "has %q; want sliding_attention or full_attention", t)
		}
	}
	// The first global layer ends the period: none makes every layer
	// sliding (0), the first layer every layer global (1).
	period := slices.Index(layerTypes, "full_attention") + 1
	for i, t := range layerTypes {
		if sliding := period == 0 || (i+1)%period != 0; sliding != (t == "sliding_attention") {
			return c.errorf("layer_types", "%v is not one global layer in every %d, which %s.attention.sliding_window_pattern can say (llama.cpp reads a period)", layerTypes, period, hp.fam.arch.Name)
		}
	}
	hp.swaPattern = period
	return nil
}

// ropeDims is rope.dimension_count: the rotated share of a head.
func (hp *hparams) ropeDims() int {
	return int(math.Round(float64(hp.headDim) * hp.rope.partial))
}

// llama3RopeFactors are rope_freqs.weight as llama.cpp's converter computes
// them for Llama 3's rope_scaling: for each frequency pair, 1 above the
// high-frequency band, factor below the low one, and between them the
// reciprocal of the same smooth mix transformers applies to inv_freq (ggml
// divides a frequency by its factor).
func llama3RopeFactors(p ropeParams, dims int) []float32 {
	lowWavelen := float64(p.origCtx) / p.lowFreqFactor
	highWavelen := float64(p.origCtx) / p.highFreqFac
	out := make([]float32, dims/2)
	for i := range out {
		// In float32 as both references compute inv_freq.
		freq := float64(float32(1 / math.Pow(p.theta, float64(2*i)/float64(dims))))
		wavelen := 2 * math.Pi / freq
		switch {
		case wavelen < highWavelen:
			out[i] = 1
		case wavelen > lowWavelen:
			out[i] = float32(p.factor)
		default:
			smooth := (float64(p.origCtx)/wavelen - p.lowFreqFactor) / (p.highFreqFac - p.lowFreqFactor)
			out[i] = float32(1 / ((1-smooth)/p.factor + smooth))
		}
	}
	return out
}
