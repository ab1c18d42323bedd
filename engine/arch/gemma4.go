package arch

import (
	"fmt"
	"slices"

	"github.com/hearthstudio/hearth/gguf"
)

// Gemma 4's dense text models (E2B, E4B): Gemma 3's layer (GeGLU, NeoX
// RoPE, q/k head norms, norms after attention and the feed-forward,
// sliding and global layers) with
//
//   - global layers of their own head width (512 against 256) that rotate
//     only a quarter of their pairs ("proportional" RoPE: rope_freqs holds
//     1 for the rotated pairs and 1e30 for the others, as llama.cpp's
//     converter writes it, and applies to the global layers only);
//   - v heads RMS-normalised without a gain, q·k unscaled (the norms
//     already bound it);
//   - KV sharing: the last attention.shared_kv_layers layers project only
//     queries and attend over the cache of the last layer of their kind
//     before them; E2B's shared layers also have a feed-forward twice as
//     wide (feed_forward_length is then an array);
//   - per-layer embeddings (PLE): a second embedding table of
//     block_count × P values a token, mixed with a projection of the
//     token's embedding, gates a small projection added to the residual
//     after each layer's feed-forward (engine/model's PLE);
//   - a learned scalar multiplying the residual at the end of each layer;
//   - in the 26B-A4B, a mixture of 128 experts beside each layer's dense
//     feed-forward (Config.MoE with Dense), and global layers whose values
//     are their keys' projection (no attn_v: Config.ValueFromKey).
//
// llama.cpp's converter writes the norm gains as they are (the graph
// multiplies by w, not 1 + w) and a final logit soft-cap of 30.
func init() {
	Register(&Arch{
		Name:        "gemma4",
		Layout:      Layout{NeoX: true, GELU: true, PostNorms: true, QKNorm: true},
		LayerShapes: true,
		Configure:   configureGemma4,
		Block:       gemma4Block(),
		Globals: []Tensor{
			{GGUF: "per_layer_token_embd.weight", HF: "embed_tokens_per_layer.weight", Rows: DimVocab, Cols: DimPerLayers},
			{GGUF: "per_layer_model_proj.weight", HF: "per_layer_model_projection.weight", Rows: DimPerLayers, Cols: DimHidden},
			{GGUF: "per_layer_proj_norm.weight", HF: "per_layer_projection_norm.weight", Rows: DimPerLayer, Kind: Norm},
		},
		HF: []HFClass{{Name: "Gemma4ForCausalLM", Window: WindowLayerTypes, Tied: true,
			Defaults: map[string]float64{
				"vocab_size": 262144, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 30,
				"num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "global_head_dim": 512,
				"rms_norm_eps": 1e-6, "rope_theta": 1e6, "max_position_embeddings": 131072, "sliding_window": 512,
				"hidden_size_per_layer_input": 256, "vocab_size_per_layer_input": 262144, "num_kv_shared_layers": 0,
			},
			Multimodal: []string{"Gemma4ForConditionalGeneration"}}},
		// Gemma 4's own vocabulary has <|turn> and <turn|>; a file on
		// Gemma 1-3's (hearth synth's) gets their format.
		ChatFallback: "gemma4",
		Trainable:    true,
	})
}

// gemma4Block is Gemma 3's layer in llama.cpp's order, k, v and k's norm
// only in the layers with their own cache, then the PLE gate, its
// projection and norm, and the layer's output scale.
func gemma4Block() []Tensor {
	b := gemmaPLEBlock()
	for i := range b {
		switch b[i].GGUF {
		case "attn_k.weight", "attn_v.weight", "attn_k_norm.weight":
			b[i].OwnKV = true
		}
		b[i].Value = b[i].GGUF == "attn_v.weight"
	}
	b = append(b, Tensor{GGUF: "layer_output_scale.weight", HF: "layer_scalar", Rows: DimNone, Kind: Scalar})
	// The 26B-A4B's experts beside the dense feed-forward, in llama.cpp's
	// names and transformers' (router.*, experts.*: stacked as the
	// checkpoints store them).
	norm := func(gguf, hf string, d Dim) Tensor {
		return Tensor{GGUF: gguf, HF: hf, Rows: d, Kind: Norm, Experts: true}
	}
	return append(b,
		Tensor{GGUF: "ffn_gate_inp.weight", HF: "router.proj.weight", Rows: DimExperts, Cols: DimHidden, Experts: true},
		norm("ffn_gate_inp.scale", "router.scale", DimHidden),
		norm("ffn_down_exps.scale", "router.per_expert_scale", DimExperts),
		norm("pre_ffw_norm_2.weight", "pre_feedforward_layernorm_2.weight", DimHidden),
		norm("post_ffw_norm_1.weight", "post_feedforward_layernorm_1.weight", DimHidden),
		norm("post_ffw_norm_2.weight", "post_feedforward_layernorm_2.weight", DimHidden),
		Tensor{GGUF: "ffn_gate_up_exps.weight", HF: "experts.gate_up_proj", Stack: DimExperts, Rows: DimExpertFF2, Cols: DimHidden, Experts: true},
		Tensor{GGUF: "ffn_down_exps.weight", HF: "experts.down_proj", Stack: DimExperts, Rows: DimHidden, Cols: DimExpertFF, Experts: true},
	)
}

// gemmaPLEBlock is the layer Gemma 3n and 4 start from: Gemma 3's without
// biases, then the per-layer embedding's gate, projection and norm.
func gemmaPLEBlock() []Tensor {
	b := StandardBlock(Layout{NeoX: true, GELU: true, PostNorms: true, QKNorm: true})
	b = slices.DeleteFunc(b, func(t Tensor) bool { return t.Kind == Bias })
	return append(b,
		Tensor{GGUF: "inp_gate.weight", HF: "per_layer_input_gate.weight", Rows: DimPerLayer, Cols: DimHidden},
		Tensor{GGUF: "proj.weight", HF: "per_layer_projection.weight", Rows: DimHidden, Cols: DimPerLayer},
		Tensor{GGUF: "post_norm.weight", HF: "post_per_layer_input_norm.weight", Rows: DimHidden, Kind: Norm, PLE: true},
	)
}

func configureGemma4(f *gguf.File, c *Config) error {
	key := func(k string) string { return "gemma4." + k }
	// The pattern decides each layer's head width, so a file without it
	// cannot be run (transformers' default is no guide: E2B has one
	// global layer in five, E4B one in six).
	if _, ok := f.Value(key("attention.sliding_window_pattern")); !ok {
		return fmt.Errorf("gemma4: key %q is missing (which layers are sliding)", key("attention.sliding_window_pattern"))
	}
	if err := configureGemmaPLE(f, c, 0, 0, 0); err != nil {
		return err
	}

	// The scalars ReadConfig read are the global layers'; the sliding
	// layers' have keys of their own.
	globalHD, globalRope := c.HeadDim, c.RopeDims
	slidingHD, err := f.IntOr(key("attention.key_length_swa"), globalHD)
	if err != nil {
		return err
	}
	if vd, err := f.IntOr(key("attention.value_length_swa"), slidingHD); err != nil {
		return err
	} else if vd != slidingHD {
		return fmt.Errorf("gemma4: attention.value_length_swa %d differs from key_length_swa %d: not supported", vd, slidingHD)
	}
	slidingRope, err := f.IntOr(key("rope.dimension_count_swa"), slidingHD)
	if err != nil {
		return err
	}
	ffs, err := PerLayerInts(f, key("feed_forward_length"), c.Layers, -1)
	if err != nil {
		return err
	}
	kvs, err := PerLayerInts(f, key("attention.head_count_kv"), c.Layers, c.Heads)
	if err != nil {
		return err
	}
	shared, err := f.IntOr(key("attention.shared_kv_layers"), 0)
	if err != nil {
		return err
	}
	c.Shapes = make([]LayerShape, c.Layers)
	for i := range c.Shapes {
		s := LayerShape{HeadDim: globalHD, RopeDims: globalRope, KVHeads: kvs[i], FF: ffs[i], KVLayer: i, RopeFactors: true}
		if c.Sliding(i) {
			s.HeadDim, s.RopeDims, s.RopeFactors = slidingHD, slidingRope, false
		}
		c.Shapes[i] = s
	}
	c.HeadDim = max(globalHD, slidingHD)
	c.RopeDims = max(globalRope, slidingRope)
	// A layer without attn_v takes its values from k's projection
	// (attention_k_eq_v: the 26B-A4B's and 31B's global layers), as
	// llama.cpp's graph does.
	c.ValueFromKey = true
	if m := c.MoE; m != nil {
		// The 26B-A4B: each layer's dense feed-forward and its experts
		// side by side (the experts GeGLU, gate and up fused), the
		// router on its own norm of the stream, renormalised, scaled per
		// expert (ffn_down_exps.scale).
		m.Dense, m.RouterNorm, m.Renorm = true, true, true
		// llama.cpp's graph: softmax gating, no weights scale.
		m.Sigmoid, m.Scale = false, 0
	}
	return shareKV(c, shared)
}

// configureGemmaPLE reads what Gemma 3n and 4 share beyond Gemma 1-3: q·k
// unscaled and the v norm; the sliding pattern (period, when the file has
// no key), a window of 512 when it says none (every model of both; the
// converters write it), the sliding layers' RoPE base in any of the
// converters' key forms, the final soft-cap (softcap without the key) and
// the per-layer embeddings' width (perLayer without the key).
func configureGemmaPLE(f *gguf.File, c *Config, period int, softcap float32, perLayer int) error {
	gemmaCommon(c)
	c.AttnScale = 1
	c.VNorm = true
	key := func(k string) string { return c.Arch + "." + k }
	if err := readSlidingPattern(f, c, period); err != nil {
		return err
	}
	if c.SlidingWindow == 0 {
		c.SlidingWindow = 512
	}
	// llama.cpp's converters name the sliding layers' base
	// rope.freq_base_swa; Ollama's rope.local.freq_base (Gemma 3, 4) or
	// rope.freq_base_local (Gemma 3n).
	c.RopeBaseLocal = 10000
	for _, k := range []string{"rope.local.freq_base", "rope.freq_base_local", "rope.freq_base_swa"} {
		v, err := f.Float32Or(key(k), c.RopeBaseLocal)
		if err != nil {
			return err
		}
		c.RopeBaseLocal = v
	}
	c.RopeScaleLocal = 1
	if c.YaRN != nil {
		return fmt.Errorf("%s: rope.scaling.type yarn is not supported", c.Arch)
	}
	var err error
	if c.FinalSoftcap, err = f.Float32Or(key("final_logit_softcapping"), softcap); err != nil {
		return err
	}
	if c.PerLayerInput, err = f.IntOr(key("embedding_length_per_layer_input"), perLayer); err != nil {
		return err
	}
	if c.PerLayerInput < 0 {
		return fmt.Errorf("%s: embedding_length_per_layer_input %d must not be negative", c.Arch, c.PerLayerInput)
	}
	// As upstream llama.cpp tells the 26B and 31B from E2B and E4B.
	c.ImagesSliding = c.PerLayerInput == 0
	return nil
}

// shareKV points each of the last shared layers of c.Shapes at the cache
// of the last layer of its kind (sliding or global) before them, as
// transformers' Gemma 3n and 4 do (llama.cpp: the layers from
// n_layer_kv_from_start on).
func shareKV(c *Config, shared int) error {
	if shared < 0 || shared >= c.Layers {
		return fmt.Errorf("%s: attention.shared_kv_layers %d: want 0 up to block_count %d - 1 (a shared layer reads an earlier layer's cache)", c.Arch, shared, c.Layers)
	}
	first := c.Layers - shared
	for i := first; i < c.Layers; i++ {
		s := &c.Shapes[i]
		s.KVLayer = -1
		for j := first - 1; j >= 0; j-- {
			if c.Sliding(j) == c.Sliding(i) {
				s.KVLayer = j
				break
			}
		}
		if s.KVLayer < 0 {
			return fmt.Errorf("%s: layer %d shares the cache of an earlier %s layer, and the %d layers before attention.shared_kv_layers' %d have none", c.Arch, i, kind(c.Sliding(i)), first, shared)
		}
	}
	return nil
}

func kind(sliding bool) string {
	if sliding {
		return "sliding"
	}
	return "global"
}
