// Package synth writes random-weight GGUF models with the exact tensor shapes
// and metadata of real ones: Llama 3, Gemma 1–3, 3n and 4, Qwen 2.5 and 3,
// Qwen 3 MoE, gpt-oss, Phi-3, and tiny variants of each for tests. A
// synthetic model loads through the same code a downloaded one does (the
// GGUF keys and tensor names are those of llama.cpp's convert_hf_to_gguf.py),
// takes the same memory and runs at the same speed, so benchmarks and
// memory tests need no download; its answers are noise.
//
// A Preset holds a model's hyper-parameters; Presets lists the built-in ones.
// Plan lays a model out for a quantization without writing it: every
// tensor's name, shape, type and size, and the exact file size. Write and
// WriteFile produce the file.
//
// # Tensor types
//
// Options.Quant names a llama.cpp file type (as gguf.ParseQuantTarget reads
// it) and the types are chosen by the gguf package's llama-quantize rules,
// so a synthetic Q4_K_M model has the same mix (Q6_K output and the
// use_more_bits layers, fallbacks for rows no block divides) as a real one.
// Norms, biases and rope_freqs are F32, as the converter writes them, and
// so are the mixtures' routers (ffn_gate_inp: Qwen 3 MoE's, Gemma 4
// 26B-A4B's, gpt-oss's), which llama-quantize never converts. A layer's
// experts are one 3-D tensor each of gate, up and down (ggml's [cols,
// rows, experts]; Gemma 4's gate and up in one, ffn_gate_up_exps),
// quantized row by row as a matrix is: the rows of all experts one after
// another; "MXFP4_MOE" makes them MXFP4 and every other matrix Q8_0, the
// mix of the gpt-oss GGUFs ggml-org publishes. Gemma 4's router gain and
// per-expert scale are drawn as norm gains are, around 1; gpt-oss's
// experts' biases, a row an expert ([rows, experts]), as biases are, and
// its attention sinks, a logit a head, from N(0, 1).
//
// # Weights
//
// The weights are deterministic in Options.Seed. Every matrix is drawn from
// N(0, 1/cols), cols being its row length (the fan-in), so each
// projection keeps unit variance: attention scores, FFN activations and
// logits stay of order one through any depth, finite and far from equal,
// whatever the width (at the 8B preset's width this is σ ≈ 0.016, close to
// the 0.02 Hugging Face initializes with). Norm gains are drawn around 1
// (σ 0.1) so that an engine that ignores them is caught; biases are small
// (σ 0.02); Llama 3's rope_freqs are computed from the preset's scaling
// parameters as the converter computes them. The converter permutes
// Llama's q and k rows for llama.cpp's RoPE layout; a permuted random matrix
// is another random matrix, so nothing here is permuted.
//
// Quantizing billions of random values would take minutes (Q4_K's scale
// search runs at about 7M values a second per core), so large tensors are
// assembled from a pool: per (type, row length) 2M random values are
// quantized once, and every block of a large tensor is a block drawn at
// random from that pool. ggml blocks are self-contained (each carries its
// own scales), so the result is a valid tensor whose blocks are independent
// draws from the quantized distribution; a 4096-wide Q4_K row of 16 blocks
// drawn from 8192 has 8192^16 possible values, so rows do not repeat.
// Tensors of at most 256K values, and those whose rows are fewer than 4
// blocks (which would repeat), are quantized directly from their own random
// values; that covers every tensor of the test presets.
//
// # Tokenizer and chat template
//
// Each preset has a tokenizer of its family with exactly its vocabulary
// size: byte-level BPE ("gpt2", pre-tokenizer "llama-bpe", "qwen2" or
// "gpt-4o") for Llama 3, Qwen and gpt-oss, SentencePiece BPE with byte
// fallback ("llama") for Gemma and Phi-3. Its merges are learned when the
// file is written from a few KB of English embedded in the package
// (corpus.txt), so ordinary text encodes to a plausible number of tokens;
// the family's special tokens are control tokens with the BOS, EOS and EOT
// ids set, and the rest of the vocabulary is filled with "<|reserved_N|>"
// tokens of type unused, as the converter fills ids a tokenizer.json does
// not name (unused rather than control: the 127K reserved tokens of a
// Llama 3 vocabulary would all be tried as special tokens wherever a
// prompt has a "<"). The chat template is the family's built-in template
// from engine/chat, and for gpt-oss, which engine/chat has none of, a plain
// form of its harmony format written here (harmony.jinja).
package synth
