package arch

import (
	"fmt"

	"github.com/hearthstudio/hearth/gguf"
)

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
	// Qwen 3 MoE (Qwen3-30B-A3B, 235B-A22B): Qwen 3's attention and a
	// mixture of experts in every layer, softmax over all experts, the
	// chosen weights renormalised (llama.cpp hard-codes
	// norm_topk_prob), SwiGLU experts, no shared expert.
	Register(&Arch{
		Name:   "qwen3moe",
		Layout: Layout{NeoX: true, QKNorm: true},
		Block:  MoEBlock(Layout{NeoX: true, QKNorm: true}),
		Configure: func(f *gguf.File, c *Config) error {
			c.SlidingWindow = 0
			if c.MoE == nil {
				return fmt.Errorf("qwen3moe: no expert_count: not a mixture-of-experts file")
			}
			// llama.cpp's graph: softmax gating, always renormalised.
			c.MoE.Sigmoid, c.MoE.Renorm = false, true
			// No dense feed-forward: buffers and estimates take the
			// experts' width.
			c.FF = c.MoE.FF
			return nil
		},
		HF: []HFClass{{Name: "Qwen3MoeForCausalLM", Window: WindowRefused,
			Defaults: map[string]float64{"rms_norm_eps": 1e-6, "rope_theta": 10000, "max_position_embeddings": 32768, "head_dim": 128,
				"num_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 768, "norm_topk_prob": 0}}},
		Trainable:    true,
		ChatTemplate: "chatml",
	})
}
