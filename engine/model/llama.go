package model

import "github.com/hearthstudio/hearth/gguf"

// Llama 2/3, Mistral, TinyLlama, SmolLM: the base graph. llama.cpp's
// converter permutes q and k so that Llama's interleaved RoPE pairs
// (2i, 2i+1) apply; Llama 3's frequency factors come as the rope_freqs
// tensor (see weights.go). A sliding window, when the file has one
// (Mistral v0.1), applies to every layer.
func init() {
	register("llama", func(f *gguf.File, c *Config) error {
		c.NeoX = false
		c.SlidingPeriod = 0
		return nil
	})
}
