package arch

import "github.com/hearthstudio/hearth/gguf"

// Phi-3: the Llama graph with NeoX RoPE, q, k and v fused in one attn_qkv
// tensor and gate and up fused in ffn_up (engine/model's weights.go splits
// both by rows, so the forward passes see separate projections), and a
// sliding window on every layer when the config has one (Phi-3-mini-4k:
// 2047). The 128k models, Phi-3.5-mini and Phi-4-mini use LongRoPE: factor
// tensors that weights.go reads, the long ones chosen by the runner's
// context.
func init() {
	Register(&Arch{
		Name:   "phi3",
		Layout: Layout{NeoX: true, Fused: true},
		Configure: func(f *gguf.File, c *Config) error {
			c.SlidingPeriod = 0
			return nil
		},
		HF: []HFClass{{Name: "Phi3ForCausalLM", Window: WindowAll,
			Defaults: map[string]float64{"rms_norm_eps": 1e-5, "rope_theta": 10000, "max_position_embeddings": 4096}}},
		LongRoPE:     true,
		Trainable:    true,
		ChatTemplate: "phi3",
	})
}
