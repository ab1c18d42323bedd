// Package hfimport converts a Hugging Face model folder (config.json,
// safetensors weights, tokenizer files) into a GGUF file, writing what
// llama.cpp's convert_hf_to_gguf.py writes for the same model, so that
// engine/model loads an imported model exactly as it loads a downloaded GGUF.
//
// The architectures are Llama (and Mistral, written as "llama"), Gemma 1-3
// (Gemma 3 text, also the text part of Gemma3ForConditionalGeneration), Qwen
// 2 and 3, Qwen 3 MoE, gpt-oss, and Phi-3: the transformers classes that
// engine/arch's records list, each with its defaults, and each layer's
// tensors named by the record's tensor map. The conversion is the
// converter's:
//
//   - Llama's q and k rows are permuted from Hugging Face's rotate_half
//     layout to ggml's interleaved RoPE pairs; the NeoX-RoPE families are
//     left as they are.
//   - Gemma stores its RMSNorm gains as gain-1 and adds the 1 at run time;
//     GGUF holds the plain gain, so every Gemma norm weight gets 1 added
//     (in float32, exactly as transformers' forward computes it).
//   - Llama 3's rope_scaling becomes a rope_freqs.weight tensor of per-pair
//     frequency divisors, linear and YaRN scaling become rope.scaling.*
//     keys, Phi-3's LongRoPE the rope_factors_long/short.weight tensors and
//     rope.scaling.attn_factor.
//   - Phi-3's fused qkv_proj and gate_up_proj stay fused; Qwen 2's q/k/v
//     biases are kept; a model with tied embeddings has no output.weight.
//   - Qwen 3 MoE's experts are stacked into one 3-D tensor each of gate,
//     up and down a layer (ffn_gate_exps, ffn_up_exps, ffn_down_exps), from
//     one matrix an expert (mlp.experts.K.gate_proj.weight, as the Hub
//     and transformers' default save_pretrained have them) or from
//     transformers 5's fused mlp.experts.gate_up_proj and down_proj; what
//     llama.cpp's graph would run otherwise than transformers
//     (norm_topk_prob false, dense layers among the experts) is refused.
//   - Gemma 4's optional experts (enable_moe_block, the 26B-A4B) are
//     copied as transformers stacks them (experts.gate_up_proj, gate rows
//     first, and experts.down_proj become ffn_gate_up_exps and
//     ffn_down_exps), with the router's gain and per-expert scale as
//     vectors and three more norms a layer; its global layers with
//     attention_k_eq_v have no attn_v (their values are their keys'
//     projection) and num_global_key_value_heads KV heads, written as a
//     head_count_kv array.
//   - gpt-oss's experts are split and transposed as the converter does:
//     transformers' gate_up_proj [experts, hidden, 2·ff] interleaves gate
//     and up (the even and odd columns, and entries of gate_up_proj_bias),
//     and it and down_proj [experts, ff, hidden] hold in-features first;
//     each becomes ffn_{gate,up,down}_exps of GGUF's rows, with its bias a
//     row an expert. The released checkpoints' MXFP4 experts
//     (gate_up_proj_blocks and _scales, down_proj's) are repacked into
//     ggml's MXFP4 blocks as they are, whatever the output type, and the
//     file is then MOSTLY_MXFP4_MOE. Attention sinks are F32;
//     swiglu_limit other than 7 is refused, and layer_types that no
//     period of global layers describes.
//   - Weights are written in the requested type (by default their own
//     dtype); norms, biases, sinks, rope_freqs and MoE routers are always
//     F32.
//
// Both of transformers' config layouts are read: 5.x's rope_parameters (for
// Gemma 3 one per layer type) and layer_types, and 4.x's rope_theta,
// rope_scaling, rope_local_base_freq and sliding_window_pattern. Keys a
// config omits take the transformers class defaults.
//
// The tokenizer comes from tokenizer.json (byte-level BPE, via
// engine/tokenizer.FromHFTokenizerJSON, its pre-tokenizer recognized from
// the pre_tokenizer steps or named by the caller) or tokenizer.model
// (SentencePiece), with the special tokens of tokenizer_config.json,
// config.json and generation_config.json, and the chat template.
//
// Weights are read through io.ReaderAt a chunk of rows at a time, never a
// whole file, and Open checks every safetensors header against its file
// size and every tensor against config.json before anything is written.
package hfimport
