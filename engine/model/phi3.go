package model

import "github.com/hearthstudio/hearth/gguf"

// Phi-3: the Llama graph with NeoX RoPE, q, k and v fused in one attn_qkv
// tensor and gate and up fused in ffn_up (weights.go splits both by rows,
// so the forward passes see separate projections), and a sliding window on
// every layer when the config has one (Phi-3-mini-4k: 2047). The 128k
// models, Phi-3.5-mini and Phi-4-mini use LongRoPE: factor tensors that
// weights.go reads, the long ones chosen by the runner's context.
func init() {
	register("phi3", func(f *gguf.File, c *Config) error {
		c.NeoX = true
		c.SlidingPeriod = 0
		return nil
	})
}
