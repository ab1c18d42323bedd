package model

import (
	"fmt"

	"github.com/hearthstudio/hearth/gguf"
)

// Phi-3: the Llama graph with NeoX RoPE, q, k and v fused in one attn_qkv
// tensor and gate and up fused in ffn_up (weights.go splits both by rows,
// so the forward passes see separate projections), and a sliding window on
// every layer when the config has one (Phi-3-mini-4k: 2047).
func init() {
	register("phi3", func(f *gguf.File, c *Config) error {
		c.NeoX = true
		c.SlidingPeriod = 0
		if _, ok := f.Tensor("rope_factors_long.weight"); ok {
			return fmt.Errorf("phi3: LongRoPE (rope_factors_long / rope_factors_short, the 128k-context models) is not supported yet")
		}
		return nil
	})
}
