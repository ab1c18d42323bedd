package arch

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/hearthstudio/hearth/gguf"
)

// Config is an architecture's hyper-parameters, from the GGUF keys.
type Config struct {
	Arch    string // general.architecture
	Name    string // general.name, may be empty
	Vocab   int    // rows of token_embd (set when the weights load)
	Hidden  int    // embedding_length
	Layers  int    // block_count
	Heads   int    // attention.head_count
	KVHeads int    // attention.head_count_kv
	HeadDim int    // attention.key_length (= value_length)
	FF      int    // feed_forward_length
	Context int    // context_length: the longest context the model was trained for
	Eps     float32

	// RoPE. Layers with a sliding window rotate with RopeBaseLocal and
	// RopeScaleLocal when those are set (Gemma 3's local layers), the others
	// with RopeBase and RopeScale (the frequency scale: 1/factor of a linear
	// scaling).
	RopeBase, RopeScale           float32
	RopeBaseLocal, RopeScaleLocal float32
	RopeDims                      int  // rotated dims of each head
	NeoX                          bool // NeoX pairs (i, i+d/2); else Llama's (2i, 2i+1)

	// Long-context RoPE. RopeAttnFactor multiplies every rotated q and k
	// value (0 means 1): YaRN's attention scaling, LongRoPE's
	// rope.scaling.attn_factor. RopeOrigContext is the context the model
	// was pre-trained for (rope.scaling.original_context_length, else
	// Context): a runner with a longer context uses LongRoPE's long
	// factors. YaRN, when not nil, blends each pair's frequency; Model's
	// RopeFactors hold the blend.
	RopeAttnFactor  float32
	RopeOrigContext int
	YaRN            *YaRN

	// SlidingWindow, when > 0, limits attention to that many positions
	// (the query's own included) in the layers Sliding reports.
	SlidingWindow int
	// SlidingPeriod: with a window, layer i is global when
	// (i+1)%SlidingPeriod == 0 (Gemma 2: 2, Gemma 3: 6); 0 makes every layer
	// sliding (Mistral, Phi-3).
	SlidingPeriod int
	// SlidingLayers, when not nil, says layer by layer which ones slide
	// (the per-layer form of the pattern) and SlidingPeriod is unused.
	SlidingLayers []bool

	// Shapes, when not nil, give each layer its own widths and KV source
	// (Gemma 4: 256-dim sliding heads and 512-dim global ones, wider
	// feed-forwards in the layers that share their keys and values). The
	// scalars HeadDim, KVHeads, FF and RopeDims are then the widest of the
	// layers', which buffers are sized by; a layer's own are Shape(i).
	Shapes []LayerShape
	// PerLayerInput is the width of each layer's slice of the per-layer
	// embeddings (Gemma 4's PLE: embedding_length_per_layer_input); 0 means
	// the model has none.
	PerLayerInput int
	// VNorm: each v head is RMS-normalised without a gain before the cache
	// (Gemma 4).
	VNorm bool
	// ImagesSliding: an image's rows see each other on sliding layers only
	// (ImageBatch). Gemma 4 sets it for the models without per-layer inputs
	// (26B, 31B: transformers' use_bidirectional_attention "vision"); no
	// GGUF key says so.
	ImagesSliding bool
	// ValueFromKey: a layer with its own cache but no attn_v takes its
	// values from k's projection (before k's norm), as llama.cpp does for
	// Gemma 4's attention_k_eq_v.
	ValueFromKey bool
	// AltUp is the number of residual streams (Gemma 3n's AltUp: 4); 0
	// means the one stream of every other family. AltUpActive is the
	// stream the layers' attention and feed-forward compute on; each layer
	// predicts all streams from all before it and corrects them by what it
	// computed.
	AltUp, AltUpActive int
	// MoE, when not nil, makes each layer's feed-forward a mixture of
	// experts (Qwen 3 MoE, gpt-oss, Gemma 4 26B-A4B).
	MoE *MoE

	// Bidirectional: an encoder (EmbeddingGemma). Attention sees the whole
	// input, a sliding layer the SlidingWindow/2 positions on either side
	// of the query (llama.cpp's LLAMA_SWA_TYPE_SYMMETRIC, transformers'
	// sliding_window/2 + 1 exclusive bound); the model embeds one input
	// at a time and writes no text.
	Bidirectional bool

	AttnScale    float32 // q·k scale; 0 means 1/sqrt(HeadDim)
	AttnSoftcap  float32 // Gemma 2's attention score cap; 0 means none
	FinalSoftcap float32 // Gemma 2's logit cap; 0 means none
	EmbedScale   float32 // embeddings are multiplied by this (Gemma: sqrt(Hidden)); 0 means 1
	GELU         bool    // GeGLU feed-forward (Gemma) instead of SwiGLU
	PostNorms    bool    // Gemma 2/3: norms after attention and feed-forward too
	QKNorm       bool    // Qwen 3, Gemma 3: RMSNorm of each q and k head
	QKVBias      bool    // Qwen 2: biases on the q, k and v projections
}

// MoE is a mixture-of-experts feed-forward as llama.cpp's build_moe_ffn
// runs it: a router (ffn_gate_inp) scores Experts experts for each token,
// the Used best each run a GLU feed-forward FF wide (the stacked
// ffn_gate_exps, ffn_up_exps and ffn_down_exps, or a fused
// ffn_gate_up_exps), and their outputs are summed with the router's
// weights.
type MoE struct {
	Experts, Used, FF int
	// Sigmoid gates each expert by sigmoid(score) (expert_gating_func 2);
	// else a softmax over all experts' scores (1, and llama.cpp's default).
	Sigmoid bool
	// Renorm divides the chosen weights by their sum (expert_weights_norm;
	// Qwen 3 MoE's norm_topk_prob, which llama.cpp hard-codes on).
	Renorm bool
	// Scale multiplies the weights (expert_weights_scale); 0 means 1.
	Scale float32
	// Dense: the layer keeps its dense feed-forward and adds the experts'
	// sum beside it, each through a norm of its own (post_ffw_norm_1 and
	// _2) before the feed-forward's post-norm (Gemma 4 26B-A4B); the
	// experts read their own pre-norm (pre_ffw_norm_2).
	Dense bool
	// RouterNorm: the router reads the stream RMS-normalised without a
	// gain, times its own gain (ffn_gate_inp.scale) and 1/sqrt(Hidden)
	// (Gemma 4), instead of the feed-forward norm's output.
	RouterNorm bool
	// OAI: the experts' gated unit is gpt-oss's (gate clamped above at 7,
	// up to ±7, gate·sigmoid(1.702·gate)·(up + 1)) instead of the model's
	// GLU.
	OAI bool
}

// MaxExperts and MaxExpertsUsed are the most experts a router scores and
// chooses (engine/ops' MoERoute).
const (
	MaxExperts     = 1024
	MaxExpertsUsed = 64
)

// YaRN is the RoPE scaling of that name (Peng et al. 2023) as llama.cpp
// reads it: the frequencies of a context Factor times the original one,
// with the ramp between extrapolated and interpolated pairs from BetaFast
// to BetaSlow rotations, ExtFactor scaling the extrapolated share.
type YaRN struct {
	Factor, BetaFast, BetaSlow, ExtFactor float32
}

// LayerShape is what one layer's attention and feed-forward are sized by.
type LayerShape struct {
	HeadDim, KVHeads, FF, RopeDims int
	// KVLayer is the layer whose keys and values this one attends over:
	// itself, or, for a layer past Gemma 4's KV-sharing boundary, the last
	// layer of its kind (sliding or global) before it, whose cache it reads
	// as that layer left it in the same pass; such a layer projects only
	// queries.
	KVLayer int
	// RopeFactors says whether the model's RoPE factors (rope_freqs) apply
	// to this layer: every layer but Gemma 4's sliding ones, which rotate
	// plainly while its global layers keep a quarter of their pairs.
	RopeFactors bool
	// Sparse: the gate keeps only its values above mean + Sparsity·std of
	// each token's gate row, less that cutoff, before the activation
	// (Gemma 3n's gaussian top-k: Sparsity icdf(0.95) = 1.645 on its
	// first 10 layers).
	Sparse   bool
	Sparsity float32
}

// Shape is layer i's widths: Shapes[i], or the scalars when the layers
// are all alike.
func (c *Config) Shape(i int) LayerShape {
	if c.Shapes != nil {
		return c.Shapes[i]
	}
	return LayerShape{HeadDim: c.HeadDim, KVHeads: c.KVHeads, FF: c.FF, RopeDims: c.RopeDims, KVLayer: i, RopeFactors: true}
}

// OwnKV reports whether layer i projects and caches its own keys and
// values.
func (c *Config) OwnKV(i int) bool { return c.Shape(i).KVLayer == i }

// LayerQDim is layer i's q width, LayerKVDim its k (and v) width, 0 when
// it reads another layer's cache.
func (c *Config) LayerQDim(i int) int { return c.Heads * c.Shape(i).HeadDim }

// LayerKVDim is the width of layer i's keys and values (those of the
// cache it reads).
func (c *Config) LayerKVDim(i int) int {
	s := c.Shape(i)
	return s.KVHeads * s.HeadDim
}

// Sliding reports whether layer i uses the sliding window.
func (c *Config) Sliding(i int) bool {
	if c.SlidingWindow <= 0 {
		return false
	}
	if c.SlidingLayers != nil {
		return i < len(c.SlidingLayers) && c.SlidingLayers[i]
	}
	return c.SlidingPeriod == 0 || (i+1)%c.SlidingPeriod != 0
}

// Window is layer i's attention window in positions; 0 means none.
func (c *Config) Window(i int) int {
	switch {
	case !c.Sliding(i):
		return 0
	case c.Bidirectional:
		return c.SlidingWindow/2 + 1 // |i - j| <= SlidingWindow/2
	}
	return c.SlidingWindow
}

// ImageBatch says whether, at layer i, an image's rows (one batch of
// embeddings) see each other past the causal mask. Gemma 3's do at every
// layer. Gemma 4's follow transformers' use_bidirectional_attention: the
// models with per-layer inputs (E2B, E4B; None there) keep them causal,
// the others ("vision", ImagesSliding) lift the mask on sliding layers
// only, their window still applying.
func (c *Config) ImageBatch(i int) bool {
	if c.Arch == "gemma4" {
		return c.ImagesSliding && c.Sliding(i)
	}
	return true
}

// Rope is layer i's frequency base and scale.
func (c *Config) Rope(i int) (base, scale float32) {
	if c.Sliding(i) && c.RopeBaseLocal != 0 {
		return c.RopeBaseLocal, c.RopeScaleLocal
	}
	return c.RopeBase, c.RopeScale
}

// QDim and KVDim are the widths of the q and of the k (or v) projections,
// the widest layer's where layers differ (LayerQDim, LayerKVDim).
func (c *Config) QDim() int  { return c.Heads * c.HeadDim }
func (c *Config) KVDim() int { return c.KVHeads * c.HeadDim }

// Validate checks that the hyper-parameters describe a model the forward
// passes can run.
func (c *Config) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"vocab size", c.Vocab}, {"embedding_length", c.Hidden}, {"block_count", c.Layers},
		{"attention.head_count", c.Heads}, {"attention.head_count_kv", c.KVHeads},
		{"attention.key_length", c.HeadDim}, {"feed_forward_length", c.FF}, {"context_length", c.Context}} {
		if f.v <= 0 {
			return fmt.Errorf("%s: %s is %d, must be positive", c.Arch, f.name, f.v)
		}
	}
	if c.Heads%c.KVHeads != 0 {
		return fmt.Errorf("%s: attention.head_count (%d) must be a multiple of attention.head_count_kv (%d)", c.Arch, c.Heads, c.KVHeads)
	}
	if c.HeadDim > MaxHeadDim {
		return fmt.Errorf("%s: attention.key_length %d: heads wider than %d are not supported", c.Arch, c.HeadDim, MaxHeadDim)
	}
	if c.RopeDims <= 0 || c.RopeDims > c.HeadDim || c.RopeDims%2 != 0 {
		return fmt.Errorf("%s: rope.dimension_count %d must be even and within the head's %d dims", c.Arch, c.RopeDims, c.HeadDim)
	}
	if err := c.validateShapes(); err != nil {
		return err
	}
	if !(c.RopeBase > 0) || math.IsInf(float64(c.RopeBase), 0) {
		return fmt.Errorf("%s: rope.freq_base %v must be positive", c.Arch, c.RopeBase)
	}
	if !(c.Eps > 0) {
		return fmt.Errorf("%s: attention.layer_norm_rms_epsilon %v must be positive", c.Arch, c.Eps)
	}
	if c.SlidingWindow < 0 || c.SlidingPeriod < 0 {
		return fmt.Errorf("%s: sliding window %d / period %d must not be negative", c.Arch, c.SlidingWindow, c.SlidingPeriod)
	}
	return nil
}

// MaxHeadDim is the widest attention head the kernels take (Gemma 4's
// global layers).
const MaxHeadDim = 512

// validateShapes checks the per-layer widths: each within the scalars
// (which size the buffers), each layer's heads dividing the query heads,
// and each KV source an earlier layer of the same kind and shape that
// keeps its own cache.
func (c *Config) validateShapes() error {
	if c.Shapes == nil {
		return nil
	}
	if len(c.Shapes) != c.Layers {
		return fmt.Errorf("%s: %d layer shapes for %d layers", c.Arch, len(c.Shapes), c.Layers)
	}
	for i, s := range c.Shapes {
		switch {
		case s.HeadDim <= 0 || s.HeadDim > c.HeadDim:
			return fmt.Errorf("%s: layer %d: head dim %d outside 1..%d", c.Arch, i, s.HeadDim, c.HeadDim)
		case s.KVHeads <= 0 || s.KVHeads > c.KVHeads || c.Heads%s.KVHeads != 0:
			return fmt.Errorf("%s: layer %d: %d KV heads must divide the %d query heads (at most %d)", c.Arch, i, s.KVHeads, c.Heads, c.KVHeads)
		case s.FF <= 0 || s.FF > c.FF:
			return fmt.Errorf("%s: layer %d: feed_forward_length %d outside 1..%d", c.Arch, i, s.FF, c.FF)
		case s.RopeDims <= 0 || s.RopeDims > s.HeadDim || s.RopeDims%2 != 0 || s.RopeDims > c.RopeDims:
			return fmt.Errorf("%s: layer %d: rope dims %d must be even and within the head's %d dims", c.Arch, i, s.RopeDims, s.HeadDim)
		case s.KVLayer < 0 || s.KVLayer > i:
			return fmt.Errorf("%s: layer %d reads the keys and values of layer %d, which does not come before it", c.Arch, i, s.KVLayer)
		}
		if s.KVLayer == i {
			continue
		}
		p := c.Shapes[s.KVLayer]
		switch {
		case p.KVLayer != s.KVLayer:
			return fmt.Errorf("%s: layer %d reads the cache of layer %d, which has none of its own", c.Arch, i, s.KVLayer)
		case c.Sliding(i) != c.Sliding(s.KVLayer):
			return fmt.Errorf("%s: layer %d reads the cache of layer %d, a layer of the other kind (sliding/global)", c.Arch, i, s.KVLayer)
		case p.HeadDim != s.HeadDim || p.KVHeads != s.KVHeads:
			return fmt.Errorf("%s: layer %d (%d KV heads of %d) reads the cache of layer %d (%d of %d)", c.Arch, i, s.KVHeads, s.HeadDim, s.KVLayer, p.KVHeads, p.HeadDim)
		}
	}
	return nil
}

// ReadConfig reads a model's hyper-parameters. An architecture Hearth does
// not implement is refused by name.
func ReadConfig(f *gguf.File) (Config, error) {
	arch := f.Architecture()
	if arch == "" {
		return Config{}, fmt.Errorf("no general.architecture key: not a model file?")
	}
	a, ok := Lookup(arch)
	if !ok {
		return Config{}, fmt.Errorf("architecture %q is not supported (supported: %s)", arch, strings.Join(Names(), ", "))
	}
	c := Config{Arch: arch}
	var err error
	c.Name, _ = f.StringOr("general.name", "")
	key := func(k string) string { return arch + "." + k }
	ints := []struct {
		dst *int
		key string
		def int // -1: required
	}{
		{&c.Hidden, "embedding_length", -1},
		{&c.Layers, "block_count", -1},
		{&c.Context, "context_length", -1},
		{&c.SlidingWindow, "attention.sliding_window", 0},
	}
	for _, k := range ints {
		if k.def < 0 {
			*k.dst, err = f.Int(key(k.key))
		} else {
			*k.dst, err = f.IntOr(key(k.key), k.def)
		}
		if err != nil {
			return Config{}, err
		}
	}
	// llama.cpp reads these three as a scalar or as one value per layer
	// (its get_key_or_arr); converters of models whose layers differ write
	// arrays, and some write arrays of equal values.
	if c.Heads, err = perLayerInt(f, key("attention.head_count"), c.Layers, -1); err != nil {
		return Config{}, err
	}
	// An architecture whose layers differ (Gemma 4) reads the arrays into
	// Shapes itself; the scalars are then the widest.
	uniform := perLayerInt
	if a.LayerShapes {
		uniform = widestPerLayer
	}
	moe, err := readMoE(f, arch)
	if err != nil {
		return Config{}, err
	}
	if moe != nil && !slices.ContainsFunc(a.Block, func(t Tensor) bool { return t.Stack == DimExperts }) {
		// A mixture the forward passes would run with another family's
		// graph (a Mixtral-style llama file: its gating and tensors are
		// not this record's).
		return Config{}, fmt.Errorf("%s: expert_count %d: a mixture of experts is not supported for this architecture (qwen3moe, gpt-oss and gemma4 are)", arch, moe.Experts)
	}
	c.MoE = moe
	// A mixture of experts may have no dense feed-forward, and then no
	// feed_forward_length: the experts' width stands in.
	ffDefault := -1
	if moe != nil {
		ffDefault = moe.FF
	}
	if c.FF, err = uniform(f, key("feed_forward_length"), c.Layers, ffDefault); err != nil {
		return Config{}, err
	}
	if c.KVHeads, err = uniform(f, key("attention.head_count_kv"), c.Layers, c.Heads); err != nil {
		return Config{}, err
	}
	if c.Heads <= 0 {
		return Config{}, fmt.Errorf("%s: attention.head_count is %d, must be positive", arch, c.Heads)
	}
	if c.HeadDim, err = f.IntOr(key("attention.key_length"), c.Hidden/c.Heads); err != nil {
		return Config{}, err
	}
	if vd, err := f.IntOr(key("attention.value_length"), c.HeadDim); err != nil {
		return Config{}, err
	} else if vd != c.HeadDim {
		return Config{}, fmt.Errorf("%s: attention.value_length %d differs from key_length %d: not supported", arch, vd, c.HeadDim)
	}
	if c.RopeDims, err = f.IntOr(key("rope.dimension_count"), c.HeadDim); err != nil {
		return Config{}, err
	}
	if c.Eps, err = f.Float32Or(key("attention.layer_norm_rms_epsilon"), 1e-5); err != nil {
		return Config{}, err
	}
	if c.RopeBase, err = f.Float32Or(key("rope.freq_base"), 10000); err != nil {
		return Config{}, err
	}
	if err := readRopeScaling(f, &c); err != nil {
		return Config{}, err
	}
	a.Layout.apply(&c)
	if a.Configure != nil {
		if err := a.Configure(f, &c); err != nil {
			return Config{}, err
		}
	}
	return c, nil
}

// readMoE reads the mixture-of-experts keys, nil when expert_count is
// absent or 0 (a dense model).
func readMoE(f *gguf.File, arch string) (*MoE, error) {
	key := func(k string) string { return arch + "." + k }
	experts, err := f.IntOr(key("expert_count"), 0)
	if err != nil || experts == 0 {
		return nil, err
	}
	m := &MoE{Experts: experts}
	if m.Used, err = f.Int(key("expert_used_count")); err != nil {
		return nil, err
	}
	if m.FF, err = f.Int(key("expert_feed_forward_length")); err != nil {
		return nil, err
	}
	if m.Scale, err = f.Float32Or(key("expert_weights_scale"), 0); err != nil {
		return nil, err
	}
	if m.Renorm, err = f.BoolOr(key("expert_weights_norm"), false); err != nil {
		return nil, err
	}
	gating, err := f.IntOr(key("expert_gating_func"), 1)
	if err != nil {
		return nil, err
	}
	switch gating {
	case 1:
	case 2:
		m.Sigmoid = true
	default:
		return nil, fmt.Errorf("%s: expert_gating_func %d is not supported (1 softmax and 2 sigmoid are)", arch, gating)
	}
	switch {
	case m.Experts < 1 || m.Experts > MaxExperts:
		return nil, fmt.Errorf("%s: expert_count %d: want 1 to %d", arch, m.Experts, MaxExperts)
	case m.Used < 1 || m.Used > min(m.Experts, MaxExpertsUsed):
		return nil, fmt.Errorf("%s: expert_used_count %d: want 1 to the %d experts, at most %d", arch, m.Used, m.Experts, MaxExpertsUsed)
	case m.FF < 1:
		return nil, fmt.Errorf("%s: expert_feed_forward_length %d must be positive", arch, m.FF)
	case !(m.Scale >= 0) || math.IsInf(float64(m.Scale), 0):
		return nil, fmt.Errorf("%s: expert_weights_scale %v must be finite and not negative", arch, m.Scale)
	}
	return m, nil
}

// perLayerInt reads a key llama.cpp accepts as one integer for every layer
// or as an array of one integer per layer, for an architecture whose layers
// all have the same shape: an array must hold one value repeated; def < 0
// makes the key required.
func perLayerInt(f *gguf.File, key string, layers, def int) (int, error) {
	xs, err := PerLayerInts(f, key, layers, def)
	if err != nil {
		return 0, err
	}
	for i, x := range xs {
		if x != xs[0] {
			return 0, fmt.Errorf("key %q: layer %d has %d, layer 0 %d: layers of different widths are not supported for %s", key, i, x, xs[0], f.Architecture())
		}
	}
	return xs[0], nil
}

// widestPerLayer is perLayerInt for an architecture whose layers differ:
// the largest of the layers' values.
func widestPerLayer(f *gguf.File, key string, layers, def int) (int, error) {
	xs, err := PerLayerInts(f, key, layers, def)
	if err != nil {
		return 0, err
	}
	return slices.Max(xs), nil
}

// PerLayerInts reads a key llama.cpp accepts as one integer for every layer
// or as an array of one integer per layer (its get_key_or_arr), as one value
// per layer; def < 0 makes the key required.
func PerLayerInts(f *gguf.File, key string, layers, def int) ([]int, error) {
	out := make([]int, max(layers, 1))
	v, ok := f.Value(key)
	if !ok || v.Type() != gguf.ValueArray {
		x := def
		if ok || def < 0 {
			var err error
			if x, err = f.Int(key); err != nil {
				return nil, err
			}
		}
		for i := range out {
			out[i] = x
		}
		return out, nil
	}
	xs, err := f.Int64s(key)
	if err != nil {
		return nil, fmt.Errorf("%w (an integer, or an array of one integer per layer)", err)
	}
	if len(xs) != layers || layers == 0 {
		return nil, fmt.Errorf("key %q: an array of %d values for %d layers; want one per layer", key, len(xs), layers)
	}
	for i, x := range xs {
		if x < 0 || x > math.MaxInt32 {
			return nil, fmt.Errorf("key %q: layer %d has %d", key, i, x)
		}
		out[i] = int(x)
	}
	return out, nil
}

// readSlidingPattern reads ARCH.attention.sliding_window_pattern in either
// of its forms: an integer period (llama.cpp's converter; layer i is
// global when (i+1) % period == 0) into c.SlidingPeriod, or an array of one
// bool per layer, true for a sliding layer (Ollama's converter, from
// layer_types) into c.SlidingLayers. A missing key leaves def as the
// period.
func readSlidingPattern(f *gguf.File, c *Config, def int) error {
	key := c.Arch + ".attention.sliding_window_pattern"
	v, ok := f.Value(key)
	switch {
	case !ok:
		c.SlidingPeriod = def
		return nil
	case v.Type() != gguf.ValueArray:
		p, err := f.Int(key)
		if err != nil {
			return fmt.Errorf("%w (an integer period, or an array of one bool per layer)", err)
		}
		if p < 0 {
			return fmt.Errorf("key %q: period %d must not be negative", key, p)
		}
		c.SlidingPeriod = p
		return nil
	}
	layers, isBools := v.Any().([]bool)
	if !isBools {
		return fmt.Errorf("key %q: is ARRAY of %s, want an integer period or an array of one bool per layer", key, v.ElemType())
	}
	if len(layers) != c.Layers {
		return fmt.Errorf("key %q: %d bools for %d layers; want one per layer", key, len(layers), c.Layers)
	}
	c.SlidingLayers = slices.Clone(layers)
	return nil
}

// readRopeScaling reads ARCH.rope.scaling.*: the type (llama.cpp's default
// when absent is linear with no factor, that is none), a linear factor,
// YaRN's fields under llama.cpp's names (yarn_beta_fast, ...) or Ollama's
// (beta_fast, ..., extrapolation_factor), and the attention factor that
// llama.cpp applies under every type. LongRoPE is said by its factor
// tensors (weights.go), so its type, which newer converters write, needs
// nothing here.
func readRopeScaling(f *gguf.File, c *Config) error {
	key := func(k string) string { return c.Arch + ".rope.scaling." + k }
	c.RopeScale = 1
	var err error
	if c.RopeOrigContext, err = f.IntOr(key("original_context_length"), c.Context); err != nil {
		return err
	}
	attn, err := f.Float32Or(key("attn_factor"), 1)
	if err != nil {
		return err
	}
	if !(attn > 0) || math.IsInf(float64(attn), 0) {
		return fmt.Errorf("%s: rope.scaling.attn_factor %v must be positive", c.Arch, attn)
	}
	c.RopeAttnFactor = attn
	scaling, err := f.StringOr(key("type"), "none")
	if err != nil {
		return err
	}
	factor, err := f.Float32Or(key("factor"), 1)
	if err != nil {
		return err
	}
	if !(factor > 0) || math.IsInf(float64(factor), 0) {
		return fmt.Errorf("%s: rope.scaling.factor %v must be positive", c.Arch, factor)
	}
	// either reads a float under llama.cpp's key or else Ollama's.
	either := func(llama, ollama string, def float32) (float32, error) {
		d, err := f.Float32Or(key(ollama), def)
		if err != nil {
			return 0, err
		}
		return f.Float32Or(key(llama), d)
	}
	switch scaling {
	case "none", "", "longrope":
	case "linear":
		c.RopeScale = 1 / factor
	case "yarn":
		y := YaRN{Factor: factor}
		if y.BetaFast, err = either("yarn_beta_fast", "beta_fast", 32); err != nil {
			return err
		}
		if y.BetaSlow, err = either("yarn_beta_slow", "beta_slow", 1); err != nil {
			return err
		}
		if y.ExtFactor, err = either("yarn_ext_factor", "extrapolation_factor", 1); err != nil {
			return err
		}
		if lm, err := f.Float32Or(key("yarn_log_multiplier"), 0); err != nil {
			return err
		} else if lm != 0 {
			return fmt.Errorf("%s: rope.scaling.yarn_log_multiplier %v (DeepSeek's mscale_all_dim) is not supported", c.Arch, lm)
		}
		if c.RopeOrigContext <= 0 {
			return fmt.Errorf("%s: rope.scaling.original_context_length %d must be positive for yarn", c.Arch, c.RopeOrigContext)
		}
		// transformers' attention_factor, which llama.cpp's converter
		// writes as yarn_attn_factor, replaces the default 1 + 0.1 ln s.
		m := float32(1)
		if factor > 1 {
			m = float32(1 + 0.1*math.Log(float64(factor)))
		}
		if m, err = f.Float32Or(key("yarn_attn_factor"), m); err != nil {
			return err
		}
		c.RopeAttnFactor *= m
		c.YaRN = &y
	default:
		return fmt.Errorf("%s: rope.scaling.type %q is not supported (none, linear, yarn and longrope are)", c.Arch, scaling)
	}
	return nil
}
