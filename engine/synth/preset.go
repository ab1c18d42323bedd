package synth

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/hearthstudio/hearth/engine/arch"
)

// Preset is the shape of one model: what its config.json says, in the terms
// of the GGUF keys it becomes. Which tensors a layer has (Qwen 2's q/k/v
// biases, QK-norms, Gemma 2/3's post-norms, Phi-3's fused projections)
// follows from Arch, as it does in llama.cpp: the layer is its engine/arch
// record's tensor map, and the Has* and Fused methods report its layout.
type Preset struct {
	// Name is what --preset takes: "llama-3.2-1b".
	Name string
	// Model names the real model whose shapes this is (its Hugging Face
	// repository), or says what a test preset is for.
	Model string
	// Arch is general.architecture, the name of an engine/arch record,
	// which says which tensors a layer holds.
	Arch string

	Vocab   int // tokens; rows of token_embd and output
	Hidden  int // embedding_length
	Layers  int // block_count
	Heads   int // attention.head_count
	KVHeads int // attention.head_count_kv
	HeadDim int // attention.key_length and value_length
	FF      int // feed_forward_length
	Context int // context_length
	// Eps is attention.layer_norm_rms_epsilon.
	Eps float64

	// RopeBase is rope.freq_base; RopeDims is rope.dimension_count (0
	// means HeadDim).
	RopeBase float64
	RopeDims int
	// RopeScaling and RopeScalingFactor are rope.scaling.type and factor
	// ("linear" for Gemma 3 4B and up); "" writes neither.
	RopeScaling       string
	RopeScalingFactor float64
	// Llama3Rope, for Llama 3.1 and later, adds rope_freqs.weight, the
	// per-frequency factors of Llama 3's RoPE scaling.
	Llama3Rope *Llama3Rope
	// YaRN, for gpt-oss, writes YaRN's rope.scaling.* keys.
	YaRN *YaRNRope
	// RopeBaseSWA is Gemma 3's rope.freq_base_swa, the base of its
	// sliding-window layers.
	RopeBaseSWA float64

	// SlidingWindow is attention.sliding_window; 0 writes none.
	SlidingWindow int
	// SlidingWindowPattern is Gemma 3's period of global layers (layer i is
	// global when (i+1)%period == 0); 0 means llama.cpp's 6 and writes no
	// key.
	SlidingWindowPattern int
	// AttnSoftcap and FinalSoftcap are Gemma 2's attn_logit_softcapping and
	// final_logit_softcapping.
	AttnSoftcap, FinalSoftcap float64
	// QueryPreAttnScalar is Gemma 2/3's query_pre_attn_scalar; the file's
	// attention.scale is 1/sqrt of it.
	QueryPreAttnScalar int

	// Gemma 4. HeadDimSWA is the sliding layers' head width
	// (attention.key_length_swa; HeadDim is the global layers'), and they
	// rotate all of it; the global layers rotate ProportionalRope of their
	// pairs (partial_rotary_factor), through rope_freqs. The last
	// SharedKVLayers layers read earlier layers' caches, with a
	// feed-forward of FFShared (0: FF). PerLayerInput is the width of the
	// per-layer embeddings.
	HeadDimSWA       int
	ProportionalRope float64
	SharedKVLayers   int
	FFShared         int
	PerLayerInput    int
	// KEqV is Gemma 4's attention_k_eq_v (the 26B-A4B's): the global
	// layers have no attn_v, their values being their keys' projection,
	// and KVHeadsGlobal KV heads (num_global_key_value_heads, which
	// transformers applies only then; 0 means KVHeads), written with
	// KVHeads as one attention.head_count_kv a layer.
	KEqV          bool
	KVHeadsGlobal int

	// Gemma 3n (with SharedKVLayers and PerLayerInput above): AltUp
	// residual streams, the LAuReL rank, and how many of the first
	// layers sparsify their gate (at icdf(0.95)).
	AltUp, LaurelRank, SparseLayers int

	// A mixture of experts in every layer, for an architecture whose
	// record has one (Qwen 3 MoE's in place of the dense feed-forward,
	// Gemma 4's optional one beside it): Experts experts
	// (expert_count), ExpertsUsed of them chosen for each token
	// (expert_used_count), each a feed-forward ExpertFF wide
	// (expert_feed_forward_length). FF is then the config's dense
	// intermediate_size: Gemma 4's dense feed-forward, and for Qwen 3
	// MoE a width the converter writes as feed_forward_length though no
	// layer has it.
	Experts, ExpertsUsed, ExpertFF int

	// TiedEmbeddings leaves out output.weight: token_embd is the output
	// projection too.
	TiedEmbeddings bool
	// Tokenizer is the tokenizer family: "llama3", "qwen", "gemma",
	// "phi3" or "gpt-oss" (see the package doc).
	Tokenizer string
}

// Llama3Rope are the rope_scaling parameters of rope_type "llama3".
type Llama3Rope struct {
	Factor          float64
	LowFreqFactor   float64
	HighFreqFactor  float64
	OriginalContext int // original_max_position_embeddings
}

// YaRNRope are the rope_scaling parameters of rope_type "yarn": the
// context grows Factor times the OriginalContext the model was trained
// for, with the ramp between extrapolated and interpolated pairs from
// BetaFast to BetaSlow rotations.
type YaRNRope struct {
	Factor             float64
	BetaFast, BetaSlow float64
	OriginalContext    int // original_max_position_embeddings
}

// Presets are the built-in presets: real models, then the tiny test models.
// The real ones' numbers are those of their config.json; their parameter
// counts (less rope_freqs) are the published totals.
func Presets() []Preset {
	return []Preset{
		{
			Name: "llama-3.2-1b", Model: "meta-llama/Llama-3.2-1B", Arch: "llama",
			Vocab: 128256, Hidden: 2048, Layers: 16, Heads: 32, KVHeads: 8, HeadDim: 64, FF: 8192,
			Context: 131072, Eps: 1e-5, RopeBase: 500000,
			Llama3Rope:     &Llama3Rope{Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192},
			TiedEmbeddings: true, Tokenizer: "llama3",
		},
		{
			Name: "llama-3.1-8b", Model: "meta-llama/Llama-3.1-8B", Arch: "llama",
			Vocab: 128256, Hidden: 4096, Layers: 32, Heads: 32, KVHeads: 8, HeadDim: 128, FF: 14336,
			Context: 131072, Eps: 1e-5, RopeBase: 500000,
			Llama3Rope: &Llama3Rope{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192},
			Tokenizer:  "llama3",
		},
		{
			Name: "gemma-2b", Model: "google/gemma-2b", Arch: "gemma",
			Vocab: 256000, Hidden: 2048, Layers: 18, Heads: 8, KVHeads: 1, HeadDim: 256, FF: 16384,
			Context: 8192, Eps: 1e-6, RopeBase: 10000,
			TiedEmbeddings: true, Tokenizer: "gemma",
		},
		{
			Name: "gemma-2-2b", Model: "google/gemma-2-2b", Arch: "gemma2",
			Vocab: 256000, Hidden: 2304, Layers: 26, Heads: 8, KVHeads: 4, HeadDim: 256, FF: 9216,
			Context: 8192, Eps: 1e-6, RopeBase: 10000,
			SlidingWindow: 4096, AttnSoftcap: 50, FinalSoftcap: 30, QueryPreAttnScalar: 256,
			TiedEmbeddings: true, Tokenizer: "gemma",
		},
		{
			Name: "gemma-3-1b", Model: "google/gemma-3-1b-it", Arch: "gemma3",
			Vocab: 262144, Hidden: 1152, Layers: 26, Heads: 4, KVHeads: 1, HeadDim: 256, FF: 6912,
			Context: 32768, Eps: 1e-6, RopeBase: 1000000, RopeBaseSWA: 10000,
			SlidingWindow: 512, QueryPreAttnScalar: 256,
			TiedEmbeddings: true, Tokenizer: "gemma3",
		},
		{
			// google/gemma-3-4b-it's text_config; its projector is
			// synth's gemma-3-4b-vision.
			Name: "gemma-3-4b", Model: "google/gemma-3-4b-it", Arch: "gemma3",
			Vocab: 262208, Hidden: 2560, Layers: 34, Heads: 8, KVHeads: 4, HeadDim: 256, FF: 10240,
			Context: 131072, Eps: 1e-6, RopeBase: 1000000, RopeBaseSWA: 10000,
			RopeScaling: "linear", RopeScalingFactor: 8,
			SlidingWindow: 1024, QueryPreAttnScalar: 256,
			TiedEmbeddings: true, Tokenizer: "gemma3",
		},
		{
			// google/gemma-4-E2B's config.json (text_config): one global
			// layer in five, the last 20 layers sharing the caches of
			// layers 13 and 14 with double-wide feed-forwards.
			Name: "gemma-4-e2b", Model: "google/gemma-4-E2B", Arch: "gemma4",
			Vocab: 262144, Hidden: 1536, Layers: 35, Heads: 8, KVHeads: 1, HeadDim: 512, HeadDimSWA: 256, FF: 6144, FFShared: 12288,
			Context: 131072, Eps: 1e-6, RopeBase: 1000000, RopeBaseSWA: 10000, ProportionalRope: 0.25,
			SlidingWindow: 512, SlidingWindowPattern: 5, SharedKVLayers: 20, PerLayerInput: 256, FinalSoftcap: 30,
			TiedEmbeddings: true, Tokenizer: "gemma4",
		},
		{
			// google/gemma-4-E4B's: one global layer in six, 18 shared.
			Name: "gemma-4-e4b", Model: "google/gemma-4-E4B", Arch: "gemma4",
			Vocab: 262144, Hidden: 2560, Layers: 42, Heads: 8, KVHeads: 2, HeadDim: 512, HeadDimSWA: 256, FF: 10240,
			Context: 131072, Eps: 1e-6, RopeBase: 1000000, RopeBaseSWA: 10000, ProportionalRope: 0.25,
			SlidingWindow: 512, SlidingWindowPattern: 6, SharedKVLayers: 18, PerLayerInput: 256, FinalSoftcap: 30,
			TiedEmbeddings: true, Tokenizer: "gemma4",
		},
		{
			// google/gemma-4-26B-A4B's text_config: one global layer in
			// six (5 sliding, then 1 full; the 30th full), 8 KV heads of
			// 256 on the sliding layers and 2 of 512 on the global ones,
			// whose values are their keys (attention_k_eq_v); in every
			// layer a dense GeGLU of 2112 beside 128 experts of 704, 8
			// chosen; no per-layer embeddings (hidden_size_per_layer_input
			// 0), no KV sharing, a 262144-token context. The Hub's
			// config.json itself was not at hand when this was written:
			// these are the numbers that the copies of it quoted in other
			// projects' tests (MLX and Rust loaders) agree on, and
			// transformers' Gemma4TextConfig names the 2 global KV heads.
			Name: "gemma-4-26b-a4b", Model: "google/gemma-4-26B-A4B", Arch: "gemma4",
			Vocab: 262144, Hidden: 2816, Layers: 30, Heads: 16, KVHeads: 8, KVHeadsGlobal: 2, HeadDim: 512, HeadDimSWA: 256, FF: 2112,
			Context: 262144, Eps: 1e-6, RopeBase: 1000000, RopeBaseSWA: 10000, ProportionalRope: 0.25,
			SlidingWindow: 1024, SlidingWindowPattern: 6, FinalSoftcap: 30, KEqV: true,
			Experts: 128, ExpertsUsed: 8, ExpertFF: 704,
			TiedEmbeddings: true, Tokenizer: "gemma4",
		},
		{
			// google/gemma-3n-E2B's config.json (text_config): one global
			// layer in five, the last 10 sharing the caches of layers 18
			// and 19, the first 10 sparse.
			Name: "gemma-3n-e2b", Model: "google/gemma-3n-E2B", Arch: "gemma3n",
			Vocab: 262400, Hidden: 2048, Layers: 30, Heads: 8, KVHeads: 2, HeadDim: 256, FF: 8192,
			Context: 32768, Eps: 1e-6, RopeBase: 1000000, RopeBaseSWA: 10000,
			SlidingWindow: 512, SlidingWindowPattern: 5, SharedKVLayers: 10, PerLayerInput: 256, FinalSoftcap: 30,
			AltUp: 4, LaurelRank: 64, SparseLayers: 10,
			TiedEmbeddings: true, Tokenizer: "gemma",
		},
		{
			// google/gemma-3n-E4B's: 35 layers, 15 shared, twice the
			// feed-forward.
			Name: "gemma-3n-e4b", Model: "google/gemma-3n-E4B", Arch: "gemma3n",
			Vocab: 262400, Hidden: 2048, Layers: 35, Heads: 8, KVHeads: 2, HeadDim: 256, FF: 16384,
			Context: 32768, Eps: 1e-6, RopeBase: 1000000, RopeBaseSWA: 10000,
			SlidingWindow: 512, SlidingWindowPattern: 5, SharedKVLayers: 15, PerLayerInput: 256, FinalSoftcap: 30,
			AltUp: 4, LaurelRank: 64, SparseLayers: 10,
			TiedEmbeddings: true, Tokenizer: "gemma",
		},
		{
			Name: "qwen2.5-0.5b", Model: "Qwen/Qwen2.5-0.5B", Arch: "qwen2",
			Vocab: 151936, Hidden: 896, Layers: 24, Heads: 14, KVHeads: 2, HeadDim: 64, FF: 4864,
			Context: 32768, Eps: 1e-6, RopeBase: 1000000,
			TiedEmbeddings: true, Tokenizer: "qwen",
		},
		{
			Name: "qwen3-4b", Model: "Qwen/Qwen3-4B", Arch: "qwen3",
			Vocab: 151936, Hidden: 2560, Layers: 36, Heads: 32, KVHeads: 8, HeadDim: 128, FF: 9728,
			Context: 40960, Eps: 1e-6, RopeBase: 1000000,
			TiedEmbeddings: true, Tokenizer: "qwen",
		},
		{
			// Qwen/Qwen3-30B-A3B's config.json: 128 experts of 768, 8
			// chosen, in each of 48 layers; 30.5B weights, 3.3B used a
			// token.
			Name: "qwen3-30b-a3b", Model: "Qwen/Qwen3-30B-A3B", Arch: "qwen3moe",
			Vocab: 151936, Hidden: 2048, Layers: 48, Heads: 32, KVHeads: 4, HeadDim: 128, FF: 6144,
			Context: 40960, Eps: 1e-6, RopeBase: 1000000,
			Experts: 128, ExpertsUsed: 8, ExpertFF: 768,
			Tokenizer: "qwen",
		},
		{
			// openai/gpt-oss-20b's config.json: 24 layers, sliding (128)
			// and global in turn, 64 heads of 64 on 8 KV heads (4096 wide
			// against a width of 2880), in every layer 32 experts of
			// 2880 of which 4 are chosen, YaRN 32 over 4096 tokens; the
			// model card's 20.91B weights, 3.61B used a token. The GGUF
			// ggml-org publishes (gpt-oss-20b-mxfp4.gguf, 12.1 GB) is
			// Quant "MXFP4_MOE"'s mix: the experts MXFP4, as OpenAI
			// trained and released them, every other matrix Q8_0.
			Name: "gpt-oss-20b", Model: "openai/gpt-oss-20b", Arch: "gpt-oss",
			Vocab: 201088, Hidden: 2880, Layers: 24, Heads: 64, KVHeads: 8, HeadDim: 64, FF: 2880,
			Context: 131072, Eps: 1e-5, RopeBase: 150000,
			YaRN:          &YaRNRope{Factor: 32, BetaFast: 32, BetaSlow: 1, OriginalContext: 4096},
			SlidingWindow: 128, Experts: 32, ExpertsUsed: 4, ExpertFF: 2880,
			Tokenizer: "gpt-oss",
		},
		{
			Name: "phi-3-mini", Model: "microsoft/Phi-3-mini-4k-instruct", Arch: "phi3",
			Vocab: 32064, Hidden: 3072, Layers: 32, Heads: 32, KVHeads: 32, HeadDim: 96, FF: 8192,
			Context: 4096, Eps: 1e-5, RopeBase: 10000, SlidingWindow: 2047,
			Tokenizer: "phi3",
		},

		// Test models: a forward pass is a few MFLOP. Widths differ per
		// architecture so that a kernel is seen at several shapes:
		// tiny-llama's 256 fits every K-quant block, tiny-qwen2's 96 and
		// 3 heads fit only the 32-blocks; heads×head_dim differs from the
		// width in tiny-qwen3 as in Qwen 3; vocabularies are not powers
		// of two. Sliding windows are short enough for a test prompt to
		// cross them.
		{
			Name: "tiny-llama", Model: "test model: Llama 3 with llama3 RoPE scaling, untied output", Arch: "llama",
			Vocab: 512, Hidden: 256, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 64, FF: 512,
			Context: 2048, Eps: 1e-5, RopeBase: 500000,
			Llama3Rope: &Llama3Rope{Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192},
			Tokenizer:  "llama3",
		},
		{
			Name: "tiny-gemma", Model: "test model: Gemma 1, multi-query attention", Arch: "gemma",
			Vocab: 576, Hidden: 128, Layers: 2, Heads: 2, KVHeads: 1, HeadDim: 64, FF: 384,
			Context: 2048, Eps: 1e-6, RopeBase: 10000,
			TiedEmbeddings: true, Tokenizer: "gemma",
		},
		{
			Name: "tiny-gemma2", Model: "test model: Gemma 2, window 16, soft-capping, query_pre_attn_scalar ≠ head_dim", Arch: "gemma2",
			Vocab: 640, Hidden: 128, Layers: 4, Heads: 4, KVHeads: 2, HeadDim: 32, FF: 256,
			Context: 2048, Eps: 1e-6, RopeBase: 10000,
			SlidingWindow: 16, AttnSoftcap: 50, FinalSoftcap: 30, QueryPreAttnScalar: 48,
			TiedEmbeddings: true, Tokenizer: "gemma",
		},
		{
			Name: "tiny-gemma3", Model: "test model: Gemma 3, 6 layers (one global), window 16, linear RoPE scaling", Arch: "gemma3",
			Vocab: 704, Hidden: 128, Layers: 6, Heads: 2, KVHeads: 1, HeadDim: 64, FF: 256,
			Context: 2048, Eps: 1e-6, RopeBase: 1000000, RopeBaseSWA: 10000,
			RopeScaling: "linear", RopeScalingFactor: 8,
			SlidingWindow: 16, QueryPreAttnScalar: 96,
			TiedEmbeddings: true, Tokenizer: "gemma3",
		},
		{
			Name: "tiny-gemma4", Model: "test model: Gemma 4, 6 layers (global 3 and 6 with the real 512-dim heads, 64-dim sliding ones), window 16, the last 2 sharing caches, per-layer embeddings", Arch: "gemma4",
			Vocab: 736, Hidden: 128, Layers: 6, Heads: 4, KVHeads: 2, HeadDim: 512, HeadDimSWA: 64, FF: 192, FFShared: 384,
			Context: 2048, Eps: 1e-6, RopeBase: 1000000, RopeBaseSWA: 10000, ProportionalRope: 0.25,
			SlidingWindow: 16, SlidingWindowPattern: 3, SharedKVLayers: 2, PerLayerInput: 16, FinalSoftcap: 30,
			TiedEmbeddings: true, Tokenizer: "gemma4",
		},
		{
			// The 26B-A4B's layer at a test model's size: the expert
			// width 64, the dense 96 and the width 128 fit the
			// 32-blocks only, so at the K-quants every matrix falls back
			// as llama-quantize's does.
			Name: "tiny-gemma4moe", Model: "test model: Gemma 4 26B-A4B's layer, 6 layers (3 and 6 global, their values their keys, 1 KV head of 64 against 2 of 32), window 16, 8 experts of 64 of which 3 are chosen beside a dense feed-forward of 96, no per-layer embeddings", Arch: "gemma4",
			Vocab: 672, Hidden: 128, Layers: 6, Heads: 4, KVHeads: 2, KVHeadsGlobal: 1, HeadDim: 64, HeadDimSWA: 32, FF: 96,
			Context: 2048, Eps: 1e-6, RopeBase: 1000000, RopeBaseSWA: 10000, ProportionalRope: 0.25,
			SlidingWindow: 16, SlidingWindowPattern: 3, FinalSoftcap: 30, KEqV: true,
			Experts: 8, ExpertsUsed: 3, ExpertFF: 64,
			TiedEmbeddings: true, Tokenizer: "gemma4",
		},
		{
			Name: "tiny-gemma3n", Model: "test model: Gemma 3n, 6 layers (3 and 6 global), window 16, 4 AltUp streams, LAuReL of rank 16, the first 2 sparse, the last 2 sharing caches, per-layer embeddings", Arch: "gemma3n",
			Vocab: 736, Hidden: 128, Layers: 6, Heads: 4, KVHeads: 2, HeadDim: 32, FF: 192,
			Context: 2048, Eps: 1e-6, RopeBase: 1000000, RopeBaseSWA: 10000,
			SlidingWindow: 16, SlidingWindowPattern: 3, SharedKVLayers: 2, PerLayerInput: 16, FinalSoftcap: 30,
			AltUp: 4, LaurelRank: 16, SparseLayers: 2,
			TiedEmbeddings: true, Tokenizer: "gemma",
		},
		{
			Name: "tiny-qwen2", Model: "test model: Qwen 2 with q/k/v biases, odd widths", Arch: "qwen2",
			Vocab: 600, Hidden: 96, Layers: 2, Heads: 3, KVHeads: 1, HeadDim: 32, FF: 160,
			Context: 2048, Eps: 1e-6, RopeBase: 1000000,
			TiedEmbeddings: true, Tokenizer: "qwen",
		},
		{
			Name: "tiny-qwen3", Model: "test model: Qwen 3 with QK-norm, heads×head_dim ≠ width", Arch: "qwen3",
			Vocab: 768, Hidden: 128, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 64, FF: 384,
			Context: 2048, Eps: 1e-6, RopeBase: 1000000,
			TiedEmbeddings: true, Tokenizer: "qwen",
		},
		{
			// The experts' 64-wide rows fit the 32-blocks only: at a
			// K-quant ffn_down_exps falls back as llama-quantize's does
			// (Q4_K to Q5_0, Q6_K to Q8_0), and so do the 128-wide
			// gate and up.
			Name: "tiny-qwen3moe", Model: "test model: Qwen 3 MoE, 8 experts of 64 of which 3 are chosen, untied output", Arch: "qwen3moe",
			Vocab: 640, Hidden: 128, Layers: 3, Heads: 4, KVHeads: 2, HeadDim: 32, FF: 384,
			Context: 2048, Eps: 1e-6, RopeBase: 1000000,
			Experts: 8, ExpertsUsed: 3, ExpertFF: 64,
			Tokenizer: "qwen",
		},
		{
			// gpt-oss-20b's layer at a test model's size: the width and
			// the experts' width are whole 32-blocks (MXFP4, Q8_0) and
			// no 256-block, so the K-quants fall back as llama-quantize's
			// do.
			Name: "tiny-gpt-oss", Model: "test model: gpt-oss, 4 layers (the even ones sliding, window 16), 4 heads of 32 on 2 KV heads, attention sinks, 8 experts of 64 of which 3 are chosen, biases everywhere, YaRN 4 over 512, untied output", Arch: "gpt-oss",
			Vocab: 640, Hidden: 128, Layers: 4, Heads: 4, KVHeads: 2, HeadDim: 32, FF: 64,
			Context: 2048, Eps: 1e-5, RopeBase: 150000,
			YaRN:          &YaRNRope{Factor: 4, BetaFast: 32, BetaSlow: 1, OriginalContext: 512},
			SlidingWindow: 16, Experts: 8, ExpertsUsed: 3, ExpertFF: 64,
			Tokenizer: "gpt-oss",
		},
		{
			Name: "tiny-phi3", Model: "test model: Phi-3, fused qkv and gate_up, window 16", Arch: "phi3",
			Vocab: 544, Hidden: 128, Layers: 2, Heads: 4, KVHeads: 4, HeadDim: 32, FF: 256,
			Context: 2048, Eps: 1e-5, RopeBase: 10000, SlidingWindow: 16,
			Tokenizer: "phi3",
		},
	}
}

// PresetByName finds a built-in preset, case-insensitively.
func PresetByName(name string) (Preset, bool) {
	for _, p := range Presets() {
		if strings.EqualFold(p.Name, name) {
			return p, true
		}
	}
	return Preset{}, false
}

// PresetNames lists the built-in presets' names, comma separated.
func PresetNames() string {
	ps := Presets()
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}

// layout is the graph of p's architecture as its engine/arch record gives
// it; an architecture without a record has the base graph (Validate
// refuses it).
func (p Preset) layout() arch.Layout {
	if a, ok := arch.Lookup(p.Arch); ok {
		return a.Layout
	}
	return arch.Layout{}
}

// HasExperts reports whether the layers are mixtures of experts: a router
// (ffn_gate_inp) and the stacked experts (ffn_gate_exps, ffn_up_exps,
// ffn_down_exps) in place of the dense feed-forward, or Gemma 4's beside
// it where the preset has Experts.
func (p Preset) HasExperts() bool {
	a, ok := arch.Lookup(p.Arch)
	if !ok {
		return false
	}
	for _, t := range a.Block {
		if t.Rows == arch.DimExperts || t.Stack == arch.DimExperts {
			// An optional mixture (Gemma 4's) is the preset's choice.
			return !t.Experts || p.Experts > 0
		}
	}
	return false
}

// HasQKVBias reports whether the layers have attn_q/k/v.bias (Qwen 2).
func (p Preset) HasQKVBias() bool { return p.layout().QKVBias }

// HasQKNorm reports whether the layers have attn_q_norm and attn_k_norm
// (Qwen 3, Gemma 3).
func (p Preset) HasQKNorm() bool { return p.layout().QKNorm }

// HasPostNorms reports whether the layers have post_attention_norm and
// post_ffw_norm (Gemma 2, Gemma 3).
func (p Preset) HasPostNorms() bool { return p.layout().PostNorms }

// Fused reports whether the layers have attn_qkv instead of attn_q/k/v and
// a double-height ffn_up instead of ffn_gate and ffn_up (Phi-3).
func (p Preset) Fused() bool { return p.layout().Fused }

// ropeDims is rope.dimension_count.
func (p Preset) ropeDims() int {
	if p.RopeDims > 0 {
		return p.RopeDims
	}
	return p.HeadDim
}

// Validate checks that p describes a model the contract can express,
// naming the first field that does not.
func (p Preset) Validate() error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("synth: preset %q: %s", p.Name, fmt.Sprintf(format, args...))
	}
	if p.Name == "" {
		return errors.New("synth: preset has no name")
	}
	rec, ok := arch.Lookup(p.Arch)
	if !ok {
		return fail("architecture %q is not one of %s", p.Arch, strings.Join(arch.Names(), ", "))
	}
	for _, d := range []struct {
		name string
		v    int
	}{
		{"vocab", p.Vocab}, {"hidden", p.Hidden}, {"layers", p.Layers}, {"heads", p.Heads},
		{"kv_heads", p.KVHeads}, {"head_dim", p.HeadDim}, {"ff", p.FF}, {"context", p.Context},
	} {
		if d.v <= 0 {
			return fail("%s (%d) must be positive", d.name, d.v)
		}
	}
	switch {
	case p.Heads%p.KVHeads != 0:
		return fail("heads (%d) must be a multiple of kv_heads (%d)", p.Heads, p.KVHeads)
	case p.HeadDim%2 != 0:
		return fail("head_dim (%d) must be even: RoPE rotates pairs", p.HeadDim)
	case p.RopeDims < 0 || p.RopeDims > p.HeadDim || p.RopeDims%2 != 0:
		return fail("rope_dims (%d) must be even and at most head_dim (%d)", p.RopeDims, p.HeadDim)
	case !(p.Eps > 0) || math.IsInf(p.Eps, 0):
		return fail("eps (%v) must be positive", p.Eps)
	case !(p.RopeBase > 1) || math.IsInf(p.RopeBase, 0):
		return fail("rope_base (%v) must be more than 1", p.RopeBase)
	case p.SlidingWindow < 0:
		return fail("sliding_window (%d) must not be negative", p.SlidingWindow)
	case p.RopeScaling != "" && !(p.RopeScalingFactor > 0):
		return fail("rope scaling %q needs a positive factor, not %v", p.RopeScaling, p.RopeScalingFactor)
	}
	if r := p.YaRN; r != nil {
		switch {
		case p.RopeScaling != "" || p.Llama3Rope != nil:
			return fail("YaRN and another RoPE scaling (%q, llama3 %v) at once", p.RopeScaling, p.Llama3Rope != nil)
		case !(r.Factor > 0) || r.OriginalContext <= 0 || !(r.BetaFast > 0) || !(r.BetaSlow > 0):
			return fail("YaRN needs a positive factor, original context and betas, not %+v", *r)
		}
	}
	if r := p.Llama3Rope; r != nil {
		switch {
		case !rec.PermuteQK:
			return fail("llama3 RoPE scaling is Llama's; %s has none", p.Arch)
		case !(r.Factor > 0) || !(r.LowFreqFactor > 0) || !(r.HighFreqFactor > r.LowFreqFactor) || r.OriginalContext <= 0:
			return fail("llama3 RoPE scaling needs factor > 0, 0 < low_freq_factor < high_freq_factor and original_context > 0, not %+v", *r)
		}
	}
	switch {
	case rec.AttnScale && p.QueryPreAttnScalar <= 0:
		return fail("%s needs query_pre_attn_scalar", p.Arch)
	case rec.Interleaved() && p.SlidingWindow == 0:
		return fail("%s needs a sliding window", p.Arch)
	case !rec.AttnScale && p.QueryPreAttnScalar != 0:
		return fail("query_pre_attn_scalar is Gemma 2/3's; %s has none", p.Arch)
	case !rec.Softcap && p.AttnSoftcap != 0:
		return fail("attention soft-capping is Gemma 2's; %s has none", p.Arch)
	case !rec.Softcap && !p.gemmaNew() && p.FinalSoftcap != 0:
		return fail("final soft-capping is Gemma 2's, 3n's and 4's; %s has none", p.Arch)
	case (p.Arch == "gemma3" || p.gemmaNew()) && !(p.RopeBaseSWA > 1):
		return fail("%s needs rope_base_swa, the base of its sliding-window layers", p.Arch)
	case p.Arch != "gemma3" && !p.gemmaNew() && (p.RopeBaseSWA != 0 || p.SlidingWindowPattern != 0):
		return fail("rope_base_swa and sliding_window_pattern are Gemma 3's, 3n's and 4's; %s has neither", p.Arch)
	case p.SlidingWindowPattern < 0:
		return fail("sliding_window_pattern (%d) must not be negative", p.SlidingWindowPattern)
	}
	if err := p.validateGemma4(); err != nil {
		return fail("%v", err)
	}
	if err := p.validateExperts(); err != nil {
		return fail("%v", err)
	}
	fam, ok := familyOf(p.Tokenizer)
	if !ok {
		return fail("tokenizer %q is not one of %s", p.Tokenizer, familyNames)
	}
	if need := fam.fixedTokens(); p.Vocab < need {
		return fail("vocab (%d) is smaller than the %d tokens the %s tokenizer cannot do without", p.Vocab, need, p.Tokenizer)
	}
	return nil
}

// validateGemma4 checks the fields only Gemma 4 has: present exactly for
// it, and making a model engine/arch accepts.
func (p Preset) validateGemma4() error {
	if p.Arch != "gemma4" && (p.KEqV || p.KVHeadsGlobal != 0) {
		return fmt.Errorf("k_eq_v and kv_heads_global are Gemma 4's; %s has neither", p.Arch)
	}
	if p.Arch != "gemma3n" && (p.AltUp != 0 || p.LaurelRank != 0 || p.SparseLayers != 0) {
		return fmt.Errorf("AltUp, LAuReL and sparse layers are Gemma 3n's; %s has none", p.Arch)
	}
	if p.Arch == "gemma3n" {
		switch {
		case p.HeadDimSWA != 0 || p.ProportionalRope != 0 || p.FFShared != 0:
			return fmt.Errorf("head_dim_swa, proportional RoPE and ff_shared are Gemma 4's; gemma3n has none")
		case p.AltUp < 2 || p.AltUp > arch.MaxAltUp || p.LaurelRank <= 0 || p.PerLayerInput <= 0:
			return fmt.Errorf("gemma3n needs 2 to %d AltUp streams (%d), a LAuReL rank (%d) and per-layer inputs (%d)", arch.MaxAltUp, p.AltUp, p.LaurelRank, p.PerLayerInput)
		case p.SparseLayers < 0 || p.SparseLayers > p.Layers:
			return fmt.Errorf("sparse layers (%d) must be within the %d layers", p.SparseLayers, p.Layers)
		case p.SlidingWindowPattern < 2 || p.SharedKVLayers < 0 || p.SharedKVLayers > p.Layers-p.SlidingWindowPattern:
			return fmt.Errorf("gemma3n needs a sliding_window_pattern of at least 2 and shared KV layers (%d) that leave a sliding and a global layer before them in %d layers", p.SharedKVLayers, p.Layers)
		}
		return nil
	}
	if p.Arch != "gemma4" {
		if p.HeadDimSWA != 0 || p.ProportionalRope != 0 || p.SharedKVLayers != 0 || p.FFShared != 0 || p.PerLayerInput != 0 {
			return fmt.Errorf("head_dim_swa, proportional RoPE, shared KV layers, ff_shared and per-layer inputs are Gemma 4's; %s has none", p.Arch)
		}
		return nil
	}
	switch {
	case p.HeadDimSWA <= 0 || p.HeadDimSWA%2 != 0 || p.HeadDimSWA > p.HeadDim:
		return fmt.Errorf("head_dim_swa (%d) must be even and at most head_dim (%d)", p.HeadDimSWA, p.HeadDim)
	case !(p.ProportionalRope > 0 && p.ProportionalRope <= 1):
		return fmt.Errorf("proportional RoPE %v must be a fraction in (0, 1]", p.ProportionalRope)
	case p.SlidingWindowPattern < 2:
		return fmt.Errorf("gemma4 needs sliding_window_pattern, a period of at least 2")
	case p.SharedKVLayers < 0 || p.SharedKVLayers > p.Layers-p.SlidingWindowPattern:
		return fmt.Errorf("shared KV layers (%d) must leave a sliding and a global layer before them in %d layers", p.SharedKVLayers, p.Layers)
	case p.FFShared < 0 || p.PerLayerInput < 0:
		return fmt.Errorf("ff_shared (%d) and per-layer input (%d) must not be negative", p.FFShared, p.PerLayerInput)
	case p.KVHeadsGlobal < 0 || p.KVHeadsGlobal > 0 && p.Heads%p.KVHeadsGlobal != 0:
		return fmt.Errorf("heads (%d) must be a multiple of kv_heads_global (%d)", p.Heads, p.KVHeadsGlobal)
	case p.KVHeadsGlobal != 0 && p.KVHeadsGlobal != p.KVHeads && !p.KEqV:
		// As transformers' Gemma4TextAttention reads the config.
		return fmt.Errorf("kv_heads_global (%d) is num_global_key_value_heads, which the global layers have only with k_eq_v", p.KVHeadsGlobal)
	}
	return nil
}

// validateExperts checks the mixture-of-experts fields: present exactly
// for an architecture with experts, and making a mixture engine/arch
// accepts.
func (p Preset) validateExperts() error {
	if !p.HasExperts() {
		if p.Experts != 0 || p.ExpertsUsed != 0 || p.ExpertFF != 0 {
			return fmt.Errorf("experts, experts used and expert ff are a mixture of experts'; %s has none", p.Arch)
		}
		return nil
	}
	switch {
	case p.Experts < 1 || p.Experts > arch.MaxExperts:
		return fmt.Errorf("experts (%d) must be 1 to %d", p.Experts, arch.MaxExperts)
	case p.ExpertsUsed < 1 || p.ExpertsUsed > min(p.Experts, arch.MaxExpertsUsed):
		return fmt.Errorf("experts used (%d) must be 1 to the %d experts, at most %d", p.ExpertsUsed, p.Experts, arch.MaxExpertsUsed)
	case p.ExpertFF <= 0:
		return fmt.Errorf("expert ff (%d) must be positive", p.ExpertFF)
	}
	return nil
}

// gemmaNew reports whether p is Gemma 3n or 4, whose keys and tensors
// llama.cpp's converters write in their own forms.
func (p Preset) gemmaNew() bool { return p.Arch == "gemma3n" || p.Arch == "gemma4" }

// sliding reports whether layer l of p slides (Gemma 3 and 4's period).
func (p Preset) sliding(l int) bool {
	period := p.SlidingWindowPattern
	if period == 0 {
		period = 6
	}
	return (l+1)%period != 0
}

// layerSizes are layer l's sizes, per layer for Gemma 4.
func (p Preset) layerSizes(l int) arch.Sizes {
	s := arch.Sizes{Hidden: p.Hidden, FF: p.FF, Heads: p.Heads, KVHeads: p.KVHeads, HeadDim: p.HeadDim,
		Layers: p.Layers, PerLayer: p.PerLayerInput, Vocab: p.Vocab, OwnKV: l < p.Layers-p.SharedKVLayers,
		AltUp: p.AltUp, Laurel: p.LaurelRank, Experts: p.Experts, ExpertFF: p.ExpertFF}
	if p.Arch == "gemma4" {
		if p.sliding(l) {
			s.HeadDim = p.HeadDimSWA
		} else {
			s.KEqV = p.KEqV
			if p.KVHeadsGlobal > 0 {
				s.KVHeads = p.KVHeadsGlobal
			}
		}
		if !s.OwnKV && p.FFShared > 0 {
			s.FF = p.FFShared
		}
	}
	return s
}

// ParamCount is the number of weights in the file: every tensor's
// elements, rope_freqs included.
func (p Preset) ParamCount() uint64 {
	var n uint64
	for _, t := range p.tensors() {
		n += elements(t.shape)
	}
	return n
}

func elements(shape []uint64) uint64 {
	n := uint64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}
