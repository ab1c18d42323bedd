package arch

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/gguf"
)

// The Gemma family: embeddings scaled by sqrt(d_model), GeGLU (GELU with the
// tanh approximation), NeoX RoPE. llama.cpp's converter stores every norm
// weight as 1 + w, so the norms here are plain RMSNorm.
//
// Gemma 2 adds norms after attention and after the feed-forward, caps
// attention scores and final logits with c*tanh(x/c), scales q·k by
// 1/sqrt(query_pre_attn_scalar) and alternates sliding-window (even) and
// global (odd) layers. Gemma 3 drops the soft-caps, adds RMSNorm of each q
// and k head, has five local layers per global one, and rotates local layers
// with their own base (10000) and no scaling.
func init() {
	Register(&Arch{
		Name:   "gemma",
		Layout: Layout{NeoX: true, GELU: true},
		Configure: func(f *gguf.File, c *Config) error {
			gemmaCommon(c)
			return nil
		},
		HF: []HFClass{{Name: "GemmaForCausalLM", Tied: true,
			Defaults: map[string]float64{"rms_norm_eps": 1e-6, "rope_theta": 10000, "max_position_embeddings": 8192, "head_dim": 256}}},
		NormPlusOne:  true,
		Trainable:    true,
		ChatTemplate: "gemma",
	})
	Register(&Arch{
		Name:      "gemma2",
		Layout:    Layout{NeoX: true, GELU: true, PostNorms: true},
		Configure: configureGemma2,
		HF: []HFClass{{Name: "Gemma2ForCausalLM", Window: WindowAlternate, Tied: true,
			Defaults: map[string]float64{
				"rms_norm_eps": 1e-6, "rope_theta": 10000, "max_position_embeddings": 8192, "head_dim": 256,
				"query_pre_attn_scalar": 256, "sliding_window": 4096,
				"attn_logit_softcapping": 50, "final_logit_softcapping": 30,
			}}},
		NormPlusOne:  true,
		Softcap:      true,
		AttnScale:    true,
		Trainable:    true,
		ChatTemplate: "gemma",
	})
	Register(&Arch{
		Name:      "gemma3",
		Layout:    Layout{NeoX: true, GELU: true, PostNorms: true, QKNorm: true},
		Configure: configureGemma3,
		HF: []HFClass{{Name: "Gemma3ForCausalLM", Window: WindowPattern, Tied: true,
			Defaults: map[string]float64{
				"vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
				"num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
				"rms_norm_eps": 1e-6, "rope_theta": 1e6, "rope_local_base_freq": 10000,
				"max_position_embeddings": 131072, "query_pre_attn_scalar": 256, "sliding_window": 4096,
			},
			Multimodal: []string{"Gemma3ForConditionalGeneration"}}},
		NormPlusOne:  true,
		AttnScale:    true,
		Trainable:    true,
		ChatTemplate: "gemma",
	})
	// EmbeddingGemma: Gemma 3's text model as a bidirectional encoder,
	// its tokens' mean pooled and projected by two dense layers (the
	// sentence-transformers modules 2_Dense and 3_Dense, dense_2 and
	// dense_3 here as in llama.cpp's and Ollama's files). hearth import
	// reads the sentence-transformers folder: Gemma3TextModel with
	// use_bidirectional_attention, modules.json's pooling and dense layers.
	Register(&Arch{
		Name:      "gemma-embedding",
		Layout:    Layout{NeoX: true, GELU: true, PostNorms: true, QKNorm: true},
		Configure: configureGemmaEmbedding,
		HF: []HFClass{{Name: "Gemma3TextModel", Window: WindowPattern, Tied: true, Bare: true,
			Defaults: map[string]float64{
				"vocab_size": 262144, "hidden_size": 768, "intermediate_size": 1152, "num_hidden_layers": 24,
				"num_attention_heads": 3, "num_key_value_heads": 1, "head_dim": 256,
				"rms_norm_eps": 1e-6, "rope_theta": 1e6, "rope_local_base_freq": 10000,
				"max_position_embeddings": 2048, "query_pre_attn_scalar": 256, "sliding_window": 512,
			}}},
		NormPlusOne: true,
		AttnScale:   true,
	})
}

// configureGemmaEmbedding is Gemma 3's configuration read under
// gemma-embedding's keys, bidirectional, and the dense layers' widths
// checked against the embedding's: dense_2 reads it, dense_3 writes it.
func configureGemmaEmbedding(f *gguf.File, c *Config) error {
	if err := configureGemma3(f, c); err != nil {
		return err
	}
	c.Bidirectional = true
	for _, key := range []string{"dense_2_feat_in", "dense_3_feat_out"} {
		v, err := f.IntOr(c.Arch+"."+key, 0)
		if err != nil {
			return err
		}
		if v != 0 && v != c.Hidden {
			return fmt.Errorf("%s: %s.%s is %d, want the embedding width %d", c.Arch, c.Arch, key, v, c.Hidden)
		}
	}
	return nil
}

func configureGemma2(f *gguf.File, c *Config) error {
	gemmaCommon(c)
	if err := readSlidingPattern(f, c, 2); err != nil {
		return err
	}
	// Every Gemma 2 slides over 4096 positions; llama.cpp assumes so
	// when a file does not say.
	if _, ok := f.Value("gemma2.attention.sliding_window"); !ok {
		c.SlidingWindow = 4096
	}
	var err error
	if c.AttnSoftcap, err = f.Float32Or("gemma2.attn_logit_softcapping", 50); err != nil {
		return err
	}
	if c.FinalSoftcap, err = f.Float32Or("gemma2.final_logit_softcapping", 30); err != nil {
		return err
	}
	return gemmaAttnScale(f, c, 46)
}

func configureGemma3(f *gguf.File, c *Config) error {
	gemmaCommon(c)
	if err := readSlidingPattern(f, c, 6); err != nil {
		return err
	}
	// llama.cpp's converter names the local layers' base
	// rope.freq_base_swa, Ollama's rope.local.freq_base.
	local, err := f.Float32Or(c.Arch+".rope.local.freq_base", 10000)
	if err != nil {
		return err
	}
	if c.RopeBaseLocal, err = f.Float32Or(c.Arch+".rope.freq_base_swa", local); err != nil {
		return err
	}
	c.RopeScaleLocal = 1
	if c.YaRN != nil {
		// One factor table serves every layer, and the local layers
		// rotate unscaled with their own base.
		return fmt.Errorf("%s: rope.scaling.type yarn is not supported (only the global layers would scale)", c.Arch)
	}
	if c.FinalSoftcap, err = f.Float32Or(c.Arch+".final_logit_softcapping", 0); err != nil {
		return err
	}
	if c.AttnSoftcap, err = f.Float32Or(c.Arch+".attn_logit_softcapping", 0); err != nil {
		return err
	}
	return gemmaAttnScale(f, c, 62)
}

// gemmaCommon sets the embedding scale, sqrt(d_model).
func gemmaCommon(c *Config) {
	c.EmbedScale = float32(math.Sqrt(float64(c.Hidden)))
}

// gemmaAttnScale reads the q·k scale. Hearth's importer writes
// ARCH.attention.scale = 1/sqrt(query_pre_attn_scalar); llama.cpp's files
// lack it, and llama.cpp infers query_pre_attn_scalar as the head dim except
// for the 27B models (layers27B blocks), where it is d_model / heads.
func gemmaAttnScale(f *gguf.File, c *Config, layers27B int) error {
	s, err := f.Float32Or(c.Arch+".attention.scale", 0)
	if err != nil {
		return err
	}
	if s < 0 {
		return fmt.Errorf("%s: attention.scale %v must be positive", c.Arch, s)
	}
	if s == 0 {
		d := c.HeadDim
		if c.Layers == layers27B && c.Heads > 0 {
			d = c.Hidden / c.Heads
		}
		if d > 0 {
			s = float32(1 / math.Sqrt(float64(d)))
		}
	}
	c.AttnScale = s
	return nil
}
