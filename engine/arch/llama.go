package arch

import "github.com/hearthstudio/hearth/gguf"

// Llama 2/3, Mistral, TinyLlama, SmolLM: the base graph. llama.cpp's
// converter permutes q and k so that Llama's interleaved RoPE pairs
// (2i, 2i+1) apply; Llama 3's frequency factors come as the rope_freqs
// tensor (see engine/model's weights.go). A sliding window, when the file
// has one (Mistral v0.1), applies to every layer.
func init() {
	Register(&Arch{
		Name: "llama",
		Configure: func(f *gguf.File, c *Config) error {
			c.SlidingPeriod = 0
			return nil
		},
		HF: []HFClass{
			{Name: "LlamaForCausalLM",
				Defaults: map[string]float64{"rms_norm_eps": 1e-6, "rope_theta": 10000, "max_position_embeddings": 2048}},
			{Name: "MistralForCausalLM", Window: WindowAll,
				Defaults: map[string]float64{"rms_norm_eps": 1e-6, "rope_theta": 10000, "max_position_embeddings": 4096 * 32}},
		},
		PermuteQK: true,
		Trainable: true,
		// "llama" is both Llama 2 and Llama 3 (and Mistral): the
		// vocabulary's turn markers tell them apart.
		ChatFallback: "llama2",
	})
}
