package arch

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/gguf"
)

// Gemma 3n's text models (E2B: 30 layers, E4B: 35): Gemma 3's layer with
// Gemma 4's plain norm gains, unscaled q·k, v norm, per-layer embeddings
// and KV sharing, and three things of its own (transformers'
// Gemma3nTextModel; llama.cpp's src/models/gemma3n-iswa.cpp):
//
//   - AltUp: the residual is altup.num_inputs (4) streams. Before layer 0
//     the embedding is stream 0 and altup_proj's three matrices make the
//     others (each rescaled to the embedding's RMS). Each layer predicts
//     every stream as a mix of all of them (coefficients from a small
//     router over the active stream), runs attention and the feed-forward
//     on the active prediction, and corrects every stream by what that
//     changed; the per-layer embedding's gate reads the corrected active
//     stream and adds to the others. After the last layer altup_unembd_proj
//     maps the others back and the four are averaged.
//   - LAuReL: a rank-64 side path x + norm(R·L·x) of the attention input,
//     added to attention's residual, the sum scaled by 1/sqrt(2).
//   - Activation sparsity: on the first layers the gate keeps only values
//     above mean + 1.645 std of its row (activation_sparsity_scale).
//
// Every layer file holds k and v, also the layers past the KV-sharing
// boundary that do not use them (llama.cpp requires them).
func init() {
	Register(&Arch{
		Name:        "gemma3n",
		Layout:      Layout{NeoX: true, GELU: true, PostNorms: true, QKNorm: true},
		LayerShapes: true,
		Configure:   configureGemma3n,
		Block:       gemma3nBlock(),
		Globals: []Tensor{
			{GGUF: "per_layer_token_embd.weight", HF: "embed_tokens_per_layer.weight", Rows: DimVocab, Cols: DimPerLayers},
			{GGUF: "per_layer_model_proj.weight", HF: "per_layer_model_projection.weight", Rows: DimPerLayers, Cols: DimHidden},
			{GGUF: "per_layer_proj_norm.weight", HF: "per_layer_projection_norm.weight", Rows: DimPerLayer, Kind: Norm},
			{GGUF: "altup_proj.weight", HF: "altup_projections.%d.weight", Stack: DimAltUpLess, Rows: DimHidden, Cols: DimHidden},
			{GGUF: "altup_unembd_proj.weight", HF: "altup_unembed_projections.%d.weight", Stack: DimAltUpLess, Rows: DimHidden, Cols: DimHidden},
		},
		HF: []HFClass{{Name: "Gemma3nForCausalLM", Window: WindowLayerTypes, Tied: true,
			Defaults: map[string]float64{
				"vocab_size": 262400, "hidden_size": 2048, "intermediate_size": 16384, "num_hidden_layers": 35,
				"num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
				"rms_norm_eps": 1e-6, "rope_theta": 1e6, "rope_local_base_freq": 10000,
				"max_position_embeddings": 32768, "sliding_window": 512, "final_logit_softcapping": 30,
				"hidden_size_per_layer_input": 256, "vocab_size_per_layer_input": 262144,
				"altup_num_inputs": 4, "altup_active_idx": 0, "laurel_rank": 64, "num_kv_shared_layers": 15,
			},
			Multimodal: []string{"Gemma3nForConditionalGeneration"}}},
		ChatTemplate: "gemma",
		Trainable:    true,
	})
}

// gemma3nBlock is Gemma 3's layer without biases, then the per-layer
// embedding's gate, projection and norm, AltUp's coefficients, router and
// output scale, and LAuReL's two matrices and norm, in llama.cpp's names
// and transformers'.
func gemma3nBlock() []Tensor {
	norm := func(gguf, hf string) Tensor {
		return Tensor{GGUF: gguf, HF: hf, Rows: DimHidden, Kind: Norm}
	}
	return append(gemmaPLEBlock(),
		Tensor{GGUF: "altup_correct_coef.weight", HF: "altup.correction_coefs.weight", Rows: DimAltUp, Cols: DimAltUp},
		// A gain of the corrected active stream, not a norm's, but drawn
		// and converted as one.
		norm("altup_correct_scale.weight", "altup.correct_output_scale"),
		Tensor{GGUF: "altup_predict_coef.weight", HF: "altup.prediction_coefs.weight", Rows: DimAltUp2, Cols: DimAltUp},
		Tensor{GGUF: "altup_router.weight", HF: "altup.modality_router.weight", Rows: DimAltUp, Cols: DimHidden},
		norm("altup_router_norm.weight", "altup.router_norm.weight"),
		Tensor{GGUF: "laurel_l.weight", HF: "laurel.linear_left.weight", Rows: DimLaurel, Cols: DimHidden},
		Tensor{GGUF: "laurel_r.weight", HF: "laurel.linear_right.weight", Rows: DimHidden, Cols: DimLaurel},
		norm("laurel_post_norm.weight", "laurel.post_laurel_norm.weight"),
	)
}

// MaxAltUp is the most AltUp streams the kernels take (shaders/altup.wgsl).
const MaxAltUp = 8

// gemma3nSparsity is llama.cpp's activation sparsity, which it applies to
// the first 10 layers whatever the file says: normal_dist.icdf(0.95).
const gemma3nSparsity = 1.6448533535003662

func configureGemma3n(f *gguf.File, c *Config) error {
	key := func(k string) string { return "gemma3n." + k }
	// llama.cpp's defaults for a file without the keys: one global layer
	// in five, a soft-cap of 30, per-layer inputs of 256 (it hard-codes
	// that width, the streams (4) and the active one (0); its converter
	// writes them all).
	if err := configureGemmaPLE(f, c, 5, 30, 256); err != nil {
		return err
	}
	var err error
	if c.AltUp, err = f.IntOr(key("altup.num_inputs"), 4); err != nil {
		return err
	}
	if c.AltUpActive, err = f.IntOr(key("altup.active_idx"), 0); err != nil {
		return err
	}
	switch {
	case c.PerLayerInput <= 0:
		return fmt.Errorf("gemma3n: embedding_length_per_layer_input %d must be positive", c.PerLayerInput)
	case c.AltUp < 2 || c.AltUp > MaxAltUp:
		return fmt.Errorf("gemma3n: altup.num_inputs %d: want 2 to %d streams", c.AltUp, MaxAltUp)
	case c.AltUpActive < 0 || c.AltUpActive >= c.AltUp:
		return fmt.Errorf("gemma3n: altup.active_idx %d is not one of the %d streams", c.AltUpActive, c.AltUp)
	}
	sparsity, err := gemma3nSparsityScales(f, key("activation_sparsity_scale"), c.Layers)
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
	// llama.cpp keeps caches for the first 20 layers, which is what both
	// real models' shared_kv_layers say (E2B 30 - 10, E4B 35 - 15).
	shared, err := f.IntOr(key("attention.shared_kv_layers"), max(c.Layers-20, 0))
	if err != nil {
		return err
	}
	c.Shapes = make([]LayerShape, c.Layers)
	for i := range c.Shapes {
		s := LayerShape{HeadDim: c.HeadDim, RopeDims: c.RopeDims, KVHeads: kvs[i], FF: ffs[i], KVLayer: i, RopeFactors: true}
		if x := sparsity[i]; !math.IsInf(float64(x), -1) {
			s.Sparse, s.Sparsity = true, x
		}
		c.Shapes[i] = s
	}
	return shareKV(c, shared)
}

// gemma3nSparsityScales reads activation_sparsity_scale, one std multiplier
// a layer: the converters write icdf(p) of each layer's
// activation_sparsity_pattern, so a dense layer (p = 0) has -Inf: no
// cutoff. Without the key, llama.cpp's rule: the first 10 layers at
// icdf(0.95), the others dense.
func gemma3nSparsityScales(f *gguf.File, key string, layers int) ([]float32, error) {
	out := make([]float32, layers)
	if _, ok := f.Value(key); !ok {
		for i := range out {
			out[i] = float32(math.Inf(-1))
			if i < 10 {
				out[i] = gemma3nSparsity
			}
		}
		return out, nil
	}
	xs, err := f.Float32s(key)
	if err != nil {
		return nil, err
	}
	if len(xs) != layers {
		return nil, fmt.Errorf("key %q: %d values for %d layers; want one per layer", key, len(xs), layers)
	}
	for i, x := range xs {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 1) {
			return nil, fmt.Errorf("key %q: layer %d has %v, want a finite std multiplier (or -inf for none)", key, i, x)
		}
		out[i] = x
	}
	return out, nil
}
