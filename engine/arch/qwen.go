package arch

import "github.com/hearthstudio/hearth/gguf"

// Qwen 2 (and 2.5): the Llama graph with NeoX RoPE and biases on the q, k
// and v projections. Its configs carry a sliding window that
// use_sliding_window turns off; llama.cpp writes none, so none applies.
// Qwen 3: no biases, RMSNorm of each q and k head before RoPE.
func init() {
	noWindow := func(f *gguf.File, c *Config) error {
		c.SlidingWindow = 0
		return nil
	}
	Register(&Arch{
		Name:      "qwen2",
		Layout:    Layout{NeoX: true, QKVBias: true},
		Configure: noWindow,
		HF: []HFClass{{Name: "Qwen2ForCausalLM", Window: WindowRefused,
			Defaults: map[string]float64{"rms_norm_eps": 1e-6, "rope_theta": 10000, "max_position_embeddings": 32768}}},
		Trainable:    true,
		ChatTemplate: "chatml",
	})
	Register(&Arch{
		Name:      "qwen3",
		Layout:    Layout{NeoX: true, QKNorm: true},
		Configure: noWindow,
		HF: []HFClass{{Name: "Qwen3ForCausalLM", Window: WindowRefused,
			Defaults: map[string]float64{"rms_norm_eps": 1e-6, "rope_theta": 10000, "max_position_embeddings": 32768, "head_dim": 128}}},
		Trainable:    true,
		ChatTemplate: "chatml",
	})
}
