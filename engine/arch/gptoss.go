package arch

import (
	"fmt"

	"github.com/hearthstudio/hearth/gguf"
)

// gpt-oss (OpenAI's gpt-oss-20b, 24 layers, and -120b, 36; llama.cpp's
// LLM_ARCH_OPENAI_MOE, src/models/openai-moe-iswa.cpp; transformers'
// GptOssForCausalLM): the Llama graph with
//
//   - biases on q, k, v and o, NeoX RoPE with YaRN (rope.scaling.*), q·k
//     scaled by 1/sqrt(head_dim) with 64-wide heads in a wider space than
//     the 2880-wide stream;
//   - attention sinks: one learned logit per query head in each softmax's
//     denominator (attn_sinks);
//   - sliding and global layers alternating (the even ones slide, window
//     128; attention.sliding_window_pattern, 2 without the key);
//   - a mixture of experts in every layer behind post_attention_norm
//     (the feed-forward's pre-norm, under that name): a router with a
//     bias, top-k of its logits softmaxed among the chosen (the same
//     weights as the softmax over all, renormalised), experts with biases
//     on gate, up and down and their own gated unit (gate clamped above
//     at 7, up to ±7, gate·sigmoid(1.702·gate)·(up + 1)), stored in
//     MXFP4.
func init() {
	Register(&Arch{
		Name:      "gpt-oss",
		Layout:    Layout{NeoX: true, QKVBias: true},
		Block:     gptOSSBlock(),
		Configure: configureGPTOSS,
		HF: []HFClass{{Name: "GptOssForCausalLM", Window: WindowLayerTypes,
			Defaults: map[string]float64{"rms_norm_eps": 1e-5, "rope_theta": 150000, "max_position_embeddings": 131072,
				"head_dim": 64, "sliding_window": 128, "num_local_experts": 32, "num_experts_per_tok": 4}}},
		ChatFallback: "chatml",
		Trainable:    true,
	})
}

// gptOSSBlock is the layer in llama.cpp's names and transformers'. The
// experts' transformers names are of the matrices llama.cpp's converter
// makes: transformers stores gate and up interleaved in one gate_up_proj
// of [experts, hidden, 2·ff] and down_proj as [experts, ff, hidden], each
// with a bias of [experts, rows], which engine/hfimport splits and
// transposes as the converter does.
func gptOSSBlock() []Tensor {
	norm := func(gguf, hf string) Tensor {
		return Tensor{GGUF: gguf, HF: hf, Rows: DimHidden, Kind: Norm}
	}
	b := []Tensor{norm("attn_norm.weight", "input_layernorm.weight")}
	for _, p := range []struct {
		name string
		rows Dim
	}{{"q", DimQ}, {"k", DimKV}, {"v", DimKV}} {
		proj := "self_attn." + p.name + "_proj"
		b = append(b,
			Tensor{GGUF: "attn_" + p.name + ".weight", HF: proj + ".weight", Rows: p.rows, Cols: DimHidden, LoRA: []string{p.name}},
			Tensor{GGUF: "attn_" + p.name + ".bias", HF: proj + ".bias", Rows: p.rows, Kind: Bias})
	}
	return append(b,
		Tensor{GGUF: "attn_output.weight", HF: "self_attn.o_proj.weight", Rows: DimHidden, Cols: DimQ, LoRA: []string{"o"}},
		Tensor{GGUF: "attn_output.bias", HF: "self_attn.o_proj.bias", Rows: DimHidden, Kind: Bias},
		Tensor{GGUF: "attn_sinks.weight", HF: "self_attn.sinks", Rows: DimHeads, Kind: Sink},
		norm("post_attention_norm.weight", "post_attention_layernorm.weight"),
		Tensor{GGUF: "ffn_gate_inp.weight", HF: "mlp.router.weight", Rows: DimExperts, Cols: DimHidden},
		Tensor{GGUF: "ffn_gate_inp.bias", HF: "mlp.router.bias", Rows: DimExperts, Kind: Bias},
		// transformers' gate_up_proj interleaves gate and up (even and
		// odd columns): these are its two halves, as the importer splits
		// them.
		Tensor{GGUF: "ffn_gate_exps.weight", HF: "mlp.experts.gate_proj", Stack: DimExperts, Rows: DimExpertFF, Cols: DimHidden},
		Tensor{GGUF: "ffn_gate_exps.bias", HF: "mlp.experts.gate_proj.bias", Stack: DimExperts, Rows: DimExpertFF, Kind: Bias},
		Tensor{GGUF: "ffn_up_exps.weight", HF: "mlp.experts.up_proj", Stack: DimExperts, Rows: DimExpertFF, Cols: DimHidden},
		Tensor{GGUF: "ffn_up_exps.bias", HF: "mlp.experts.up_proj.bias", Stack: DimExperts, Rows: DimExpertFF, Kind: Bias},
		Tensor{GGUF: "ffn_down_exps.weight", HF: "mlp.experts.down_proj", Stack: DimExperts, Rows: DimHidden, Cols: DimExpertFF},
		Tensor{GGUF: "ffn_down_exps.bias", HF: "mlp.experts.down_proj.bias", Stack: DimExperts, Rows: DimHidden, Kind: Bias},
	)
}

func configureGPTOSS(f *gguf.File, c *Config) error {
	if c.MoE == nil {
		return fmt.Errorf("gpt-oss: no expert_count: not a mixture-of-experts file")
	}
	// llama.cpp's graph fixes the gating (softmax among the chosen, the
	// renormalised softmax's weights) and the experts' unit.
	c.MoE.Sigmoid, c.MoE.Renorm, c.MoE.OAI = false, true, true
	// No dense feed-forward: buffers and estimates take the experts'
	// width.
	c.FF = c.MoE.FF
	return readSlidingPattern(f, c, 2)
}
