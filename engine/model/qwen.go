package model

import "github.com/hearthstudio/hearth/gguf"

// Qwen 2 (and 2.5): the Llama graph with NeoX RoPE and biases on the q, k
// and v projections. Its configs carry a sliding window that
// use_sliding_window turns off; llama.cpp writes none, so none applies.
// Qwen 3: no biases, RMSNorm of each q and k head before RoPE.
func init() {
	register("qwen2", func(f *gguf.File, c *Config) error {
		c.NeoX = true
		c.QKVBias = true
		c.SlidingWindow = 0
		return nil
	})
	register("qwen3", func(f *gguf.File, c *Config) error {
		c.NeoX = true
		c.QKNorm = true
		c.SlidingWindow = 0
		return nil
	})
}
