package model

import (
	"fmt"
	"slices"

	"github.com/hearthstudio/hearth/engine/chat"
	"github.com/hearthstudio/hearth/engine/ops/ref"
	"github.com/hearthstudio/hearth/engine/tokenizer"
	"github.com/hearthstudio/hearth/gguf"
)

// Weight is one matrix or vector of the model as the file stores it: Rows
// rows of Cols elements of Type, Data pointing into the (memory-mapped) file.
// A vector is one row.
type Weight struct {
	Name       string
	Type       gguf.Type
	Rows, Cols int
	Data       []byte
	// Stack, when > 0, makes the weight that many matrices of Rows/Stack
	// rows (a 3-D tensor: a mixture of experts' stacked experts).
	Stack int

	// fused and row0 name the file tensor a slice was cut from (Phi-3's
	// attn_qkv, ffn_up) and its first row there, so that a LoRA pair for
	// the fused tensor finds its rows.
	fused string
	row0  int
}

// Bytes is the stored size.
func (w *Weight) Bytes() int64 { return int64(len(w.Data)) }

// RowBytes is the stored size of one row.
func (w *Weight) RowBytes() int { return len(w.Data) / w.Rows }

// slice returns rows [lo, hi) as a weight of its own: how a fused tensor
// (Phi-3's attn_qkv, its gate-and-up ffn_up) becomes separate projections
// without copying.
func (w *Weight) slice(name string, lo, hi int) *Weight {
	rb := w.RowBytes()
	return &Weight{Name: name, Type: w.Type, Rows: hi - lo, Cols: w.Cols, Data: w.Data[lo*rb : hi*rb], fused: w.Name, row0: lo}
}

// Matrix is matrix k of a stacked weight, a weight of its own.
func (w *Weight) Matrix(k int) *Weight {
	rows := w.Rows / w.Stack
	return w.slice(fmt.Sprintf("%s[%d]", w.Name, k), k*rows, (k+1)*rows)
}

// F32 dequantizes the whole weight (norm gains, biases, factors).
func (w *Weight) F32() ([]float32, error) {
	out := make([]float32, w.Rows*w.Cols)
	if err := gguf.Dequantize(w.Type, w.Data, out); err != nil {
		return nil, fmt.Errorf("tensor %q: %w", w.Name, err)
	}
	return out, nil
}

// Layer is one transformer block's weights. Optional ones are nil when the
// architecture has none.
type Layer struct {
	AttnNorm     *Weight // before attention
	PostAttnNorm *Weight // after attention, before the residual add (Gemma 2/3)
	FFNNorm      *Weight // before the feed-forward
	PostFFNNorm  *Weight // after the feed-forward (Gemma 2/3)

	Q, K, V, O          *Weight
	QBias, KBias, VBias *Weight // Qwen 2, gpt-oss
	// OBias is the output projection's bias and Sinks the attention
	// sinks, a logit per query head (gpt-oss); nil without.
	OBias, Sinks *Weight
	QNorm, KNorm *Weight // per-head RMSNorm gains (Qwen 3, Gemma 3)

	Gate, Up, Down *Weight

	// Gemma 4's per-layer embeddings: the gate of the residual (Hidden →
	// PerLayerInput), the projection of the gated slice back (→ Hidden) and
	// its norm; nil when the model has none.
	PLEGate, PLEProj, PLENorm *Weight
	// OutScale multiplies the layer's output (Gemma 4's layer_output_scale);
	// 0 means none.
	OutScale float32

	// Gemma 3n's AltUp (engine/model/altup.go), nil without.
	AltUp *AltUpLayer
	// Gemma 3n's LAuReL: the rank-r side path R·L of the attention input
	// and its norm gain; nil without.
	LaurelL, LaurelR, LaurelNorm *Weight

	// MoE is the layer's mixture of experts (engine/model/moe.go), nil in
	// a dense model.
	MoE *MoELayer
}

// MoELayer is one layer's mixture of experts: the router (Experts rows of
// Hidden) and the experts' stacked gate and up (Experts × FF rows of
// Hidden each; or GateUp, each expert's gate rows then its up rows, as a
// file stores them fused) and down (Experts × Hidden rows of FF), each
// expert's rows one after another as ggml's [cols, rows, experts] stores
// them.
type MoELayer struct {
	Router, Gate, Up, GateUp, Down *Weight
	// Gemma 4's (Config.MoE's Dense and RouterNorm; nil otherwise): the
	// router's gain (ffn_gate_inp.scale), each expert's output scale
	// (ffn_down_exps.scale), the experts' pre-norm and the norms of the
	// dense and the experts' outputs.
	RouterScale, DownScale        *Weight
	PreNorm, PostNorm1, PostNorm2 *Weight
	// gpt-oss's biases (nil otherwise): the router's (Experts) and the
	// experts' gate, up (Experts rows of FF) and down (Experts rows of
	// Hidden).
	RouterBias, GateBias, UpBias, DownBias *Weight
}

// AltUpLayer is one Gemma 3n block's AltUp: the router over the active
// stream (Streams rows of Hidden) and its input norm's gain, the
// prediction coefficients (Streams² rows of Streams) and the correction
// ones (Streams rows of Streams), and the gain of the corrected active
// stream that feeds the per-layer embedding's gate.
type AltUpLayer struct {
	Router, RouterNorm, Predict, Correct, CorrectScale *Weight
}

// Model is a loaded model: its configuration, weights (still in the file),
// tokenizer and chat format.
type Model struct {
	Config Config
	Path   string
	File   *gguf.File

	Embed   *Weight // token_embd: Vocab rows of Hidden
	OutNorm *Weight
	Output  *Weight // the LM head; token_embd itself when tied
	// RopeFactors divide each RoPE pair's frequency: Llama 3's rope_freqs,
	// YaRN's blend (computed from the config), LongRoPE's short factors;
	// nil when the model has none. RopeFactorsLong are LongRoPE's long
	// factors, for a context beyond Config.RopeOrigContext (RopeFactorsFor).
	RopeFactors, RopeFactorsLong []float32
	Layers                       []Layer

	// Gemma 4's per-layer embeddings (Config.PerLayerInput > 0): the table
	// (Vocab rows of Layers × PerLayerInput, looked up on the host like
	// Embed), the projection of the token's embedding into the same
	// widths, and the gain of that projection's per-layer norm.
	PLE, PLEModelProj, PLEProjNorm *Weight
	// Gemma 3n's AltUp projections (Config.AltUp - 1 of each, Hidden ×
	// Hidden): from the embedding into the other streams before layer 0,
	// and from those streams back after the last.
	AltUpProj, AltUpUnembd []*Weight
	// An embedding model's projections of its pooled vector (EmbeddingGemma's
	// dense_2, Hidden to a wider space, and dense_3, back to Hidden); nil
	// when the file has none.
	Dense2, Dense3 *Weight

	Tokenizer *tokenizer.Tokenizer
	Chat      *chat.Format
}

// Load opens a GGUF model file. The weights stay memory-mapped in the file;
// Close releases it.
func Load(path string) (*Model, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	m, err := FromGGUF(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m.Path = path
	return m, nil
}

// Close releases the file.
func (m *Model) Close() error {
	if m.File == nil {
		return nil
	}
	err := m.File.Close()
	m.File = nil
	return err
}

// FromGGUF reads the configuration, weights, tokenizer and chat format of an
// open file. Every tensor is checked against the shape the keys imply, so a
// file whose tensors and keys disagree is refused here, naming both.
func FromGGUF(f *gguf.File) (*Model, error) {
	cfg, err := ReadConfig(f)
	if err != nil {
		return nil, err
	}
	m := &Model{File: f}
	ld := loader{f: f}

	embd := ld.tensor("token_embd.weight", 0, cfg.Hidden)
	if embd != nil {
		cfg.Vocab = embd.Rows
	}
	m.Embed = embd
	m.OutNorm = ld.vector("output_norm.weight", cfg.Hidden)
	if _, ok := f.Tensor("output.weight"); ok {
		m.Output = ld.tensor("output.weight", cfg.Vocab, cfg.Hidden)
	} else {
		m.Output = embd
	}
	if _, ok := f.Tensor("rope_freqs.weight"); ok {
		if w := ld.vector("rope_freqs.weight", cfg.RopeDims/2); w != nil {
			m.RopeFactors, ld.err = w.F32()
		}
	}
	if ld.err != nil {
		return nil, ld.err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := m.ropeFactors(&ld, &cfg); err != nil {
		return nil, err
	}
	// Where only some layers take the factors (Gemma 4's global layers,
	// whose proportional RoPE rope_freqs alone says), they are not optional.
	for i := range cfg.Layers {
		if !cfg.Shape(i).RopeFactors && m.RopeFactors == nil {
			return nil, fmt.Errorf("tensor \"rope_freqs.weight\" is missing: %s's global layers rotate by its factors (1 for each rotated pair, 1e30 for the others)", cfg.Arch)
		}
	}

	if cfg.PerLayerInput > 0 {
		all := cfg.Layers * cfg.PerLayerInput
		// Ollama's converter keeps Gemma 3n's table at its 262144 rows,
		// short of the vocabulary (llama.cpp's pads it): any height up to
		// the vocabulary (pleTokRows).
		if m.PLE = ld.tensor("per_layer_token_embd.weight", 0, all); m.PLE != nil && m.PLE.Rows > cfg.Vocab {
			ld.err = fmt.Errorf("tensor \"per_layer_token_embd.weight\" has %d rows, more than the vocabulary's %d", m.PLE.Rows, cfg.Vocab)
		}
		m.PLEModelProj = ld.tensor("per_layer_model_proj.weight", all, cfg.Hidden)
		m.PLEProjNorm = ld.vector("per_layer_proj_norm.weight", cfg.PerLayerInput)
		if ld.err != nil {
			return nil, ld.err
		}
	}

	if cfg.Bidirectional {
		if err := m.denseLayers(&ld, cfg); err != nil {
			return nil, err
		}
	}

	if cfg.AltUp > 0 {
		m.AltUpProj = ld.stack("altup_proj.weight", cfg.AltUp-1, cfg.Hidden, cfg.Hidden)
		m.AltUpUnembd = ld.stack("altup_unembd_proj.weight", cfg.AltUp-1, cfg.Hidden, cfg.Hidden)
		if ld.err != nil {
			return nil, ld.err
		}
	}

	m.Layers = make([]Layer, cfg.Layers)
	for i := range m.Layers {
		l := &m.Layers[i]
		p := func(s string) string { return fmt.Sprintf("blk.%d.%s", i, s) }
		sh := cfg.Shape(i)
		qd, kvd := cfg.LayerQDim(i), cfg.LayerKVDim(i)
		l.AttnNorm = ld.vector(p("attn_norm.weight"), cfg.Hidden)
		ffnNorm := p("ffn_norm.weight")
		if _, ok := f.Tensor(ffnNorm); !ok && !cfg.PostNorms {
			// gpt-oss's converter names the feed-forward's pre-norm
			// post_attention_norm (llama.cpp's attn_post_norm there).
			if _, ok := f.Tensor(p("post_attention_norm.weight")); ok {
				ffnNorm = p("post_attention_norm.weight")
			}
		}
		l.FFNNorm = ld.vector(ffnNorm, cfg.Hidden)
		if cfg.PostNorms {
			l.PostAttnNorm = ld.vector(p("post_attention_norm.weight"), cfg.Hidden)
			l.PostFFNNorm = ld.vector(p("post_ffw_norm.weight"), cfg.Hidden)
		}
		if _, fused := f.Tensor(p("attn_qkv.weight")); fused {
			if qkv := ld.tensor(p("attn_qkv.weight"), qd+2*kvd, cfg.Hidden); qkv != nil {
				l.Q = qkv.slice(p("attn_qkv.weight[q]"), 0, qd)
				l.K = qkv.slice(p("attn_qkv.weight[k]"), qd, qd+kvd)
				l.V = qkv.slice(p("attn_qkv.weight[v]"), qd+kvd, qd+2*kvd)
			}
		} else {
			l.Q = ld.tensor(p("attn_q.weight"), qd, cfg.Hidden)
			// A layer that reads an earlier layer's cache projects only
			// queries; a converter may still write its k and v, unused.
			if cfg.OwnKV(i) {
				l.K = ld.tensor(p("attn_k.weight"), kvd, cfg.Hidden)
				if _, ok := f.Tensor(p("attn_v.weight")); !ok && cfg.ValueFromKey {
					// Gemma 4's attention_k_eq_v: the values are k's
					// projection (each then normed its own way).
					l.V = l.K
				} else {
					l.V = ld.tensor(p("attn_v.weight"), kvd, cfg.Hidden)
				}
			}
		}
		l.O = ld.tensor(p("attn_output.weight"), cfg.Hidden, qd)
		// Optional wherever the architecture has them: gpt-oss's.
		if _, ok := f.Tensor(p("attn_output.bias")); ok {
			l.OBias = ld.vector(p("attn_output.bias"), cfg.Hidden)
		}
		if _, ok := f.Tensor(p("attn_sinks.weight")); ok {
			l.Sinks = ld.vector(p("attn_sinks.weight"), cfg.Heads)
		}
		if cfg.QKVBias {
			l.QBias = ld.vector(p("attn_q.bias"), qd)
			l.KBias = ld.vector(p("attn_k.bias"), kvd)
			l.VBias = ld.vector(p("attn_v.bias"), kvd)
		}
		if cfg.QKNorm {
			l.QNorm = ld.vector(p("attn_q_norm.weight"), sh.HeadDim)
			if cfg.OwnKV(i) {
				l.KNorm = ld.vector(p("attn_k_norm.weight"), sh.HeadDim)
			}
		}
		ff := sh.FF
		if e := cfg.MoE; e != nil {
			l.MoE = ld.experts(p, &cfg)
		}
		// The dense feed-forward, unless the experts replace it (Qwen 3
		// MoE; Gemma 4's run beside it).
		if dense := cfg.MoE == nil || cfg.MoE.Dense; dense {
			if _, separate := f.Tensor(p("ffn_gate.weight")); separate {
				l.Gate = ld.tensor(p("ffn_gate.weight"), ff, cfg.Hidden)
				l.Up = ld.tensor(p("ffn_up.weight"), ff, cfg.Hidden)
			} else if up := ld.tensor(p("ffn_up.weight"), 2*ff, cfg.Hidden); up != nil {
				// Phi-3: gate rows, then up rows.
				l.Gate = up.slice(p("ffn_up.weight[gate]"), 0, ff)
				l.Up = up.slice(p("ffn_up.weight[up]"), ff, 2*ff)
			}
			l.Down = ld.tensor(p("ffn_down.weight"), cfg.Hidden, ff)
		}
		if cfg.PerLayerInput > 0 {
			l.PLEGate = ld.tensor(p("inp_gate.weight"), cfg.PerLayerInput, cfg.Hidden)
			l.PLEProj = ld.tensor(p("proj.weight"), cfg.Hidden, cfg.PerLayerInput)
			l.PLENorm = ld.vector(p("post_norm.weight"), cfg.Hidden)
		}
		if n := cfg.AltUp; n > 0 {
			l.AltUp = &AltUpLayer{
				Router:       ld.tensor(p("altup_router.weight"), n, cfg.Hidden),
				RouterNorm:   ld.vector(p("altup_router_norm.weight"), cfg.Hidden),
				Predict:      ld.tensor(p("altup_predict_coef.weight"), n*n, n),
				Correct:      ld.tensor(p("altup_correct_coef.weight"), n, n),
				CorrectScale: ld.vector(p("altup_correct_scale.weight"), cfg.Hidden),
			}
			// The rank is the file's (64 in E2B and E4B), one for every
			// layer (the runners size one scratch by it).
			rank := 0
			if i > 0 && m.Layers[0].LaurelL != nil {
				rank = m.Layers[0].LaurelL.Rows
			}
			if l.LaurelL = ld.tensor(p("laurel_l.weight"), rank, cfg.Hidden); l.LaurelL != nil {
				l.LaurelR = ld.tensor(p("laurel_r.weight"), cfg.Hidden, l.LaurelL.Rows)
			}
			l.LaurelNorm = ld.vector(p("laurel_post_norm.weight"), cfg.Hidden)
		}
		// Gemma 4's; llama.cpp's loader takes it as optional.
		if _, ok := f.Tensor(p("layer_output_scale.weight")); ok {
			if w := ld.vector(p("layer_output_scale.weight"), 1); w != nil {
				var s []float32
				if s, ld.err = w.F32(); ld.err == nil {
					l.OutScale = s[0]
				}
			}
		}
		if ld.err != nil {
			return nil, ld.err
		}
	}
	m.Config = cfg

	if m.Tokenizer, err = tokenizer.FromGGUF(f); err != nil {
		return nil, err
	}
	if n := m.Tokenizer.Size(); n > cfg.Vocab {
		return nil, fmt.Errorf("the tokenizer has %d tokens but token_embd.weight only %d rows", n, cfg.Vocab)
	}
	if m.Chat, err = chat.FromGGUF(f, m.Tokenizer); err != nil {
		return nil, err
	}
	return m, nil
}

// ropeFactors reads LongRoPE's factor tensors (Phi-3 128k, 3.5, 4-mini:
// rope_factors_long and rope_factors_short, one per rotated pair) and
// computes YaRN's, refusing a file that says two of the three (with
// rope_freqs) at once.
func (m *Model) ropeFactors(ld *loader, c *Config) error {
	_, long := ld.f.Tensor("rope_factors_long.weight")
	_, short := ld.f.Tensor("rope_factors_short.weight")
	switch {
	case long != short:
		return fmt.Errorf("LongRoPE needs both rope_factors_long.weight and rope_factors_short.weight; the file has only one")
	case long && m.RopeFactors != nil:
		return fmt.Errorf("the file has both rope_freqs.weight and LongRoPE's rope_factors_long/short.weight")
	case long && c.YaRN != nil:
		return fmt.Errorf("the file has LongRoPE's rope_factors_long/short.weight and %s.rope.scaling.type yarn", c.Arch)
	case long:
		var err error
		if w := ld.vector("rope_factors_short.weight", c.RopeDims/2); w != nil {
			m.RopeFactors, err = w.F32()
		}
		if w := ld.vector("rope_factors_long.weight", c.RopeDims/2); w != nil && err == nil {
			m.RopeFactorsLong, err = w.F32()
		}
		if ld.err != nil {
			return ld.err
		}
		return err
	case c.YaRN != nil && m.RopeFactors != nil:
		return fmt.Errorf("the file has both rope_freqs.weight and %s.rope.scaling.type yarn", c.Arch)
	case c.YaRN != nil:
		y := c.YaRN
		m.RopeFactors = ref.YaRNFactors(float64(c.RopeBase), c.RopeDims, float64(y.Factor), c.RopeOrigContext,
			float64(y.BetaFast), float64(y.BetaSlow), float64(y.ExtFactor))
	}
	return nil
}

// RopeFactorsFor are the RoPE factors a runner with a ctx-token context
// uses: LongRoPE's long ones beyond the original context, as llama.cpp
// chooses them, else RopeFactors.
func (m *Model) RopeFactorsFor(ctx int) []float32 {
	if m.RopeFactorsLong != nil && ctx > m.Config.RopeOrigContext {
		return m.RopeFactorsLong
	}
	return m.RopeFactors
}

// loader fetches tensors, keeping the first error so the layer loop reads
// straight.
type loader struct {
	f   *gguf.File
	err error
}

// tensor returns a rows×cols weight (rows 0: any number of rows).
func (ld *loader) tensor(name string, rows, cols int) *Weight {
	if ld.err != nil {
		return nil
	}
	t, ok := ld.f.Tensor(name)
	if !ok {
		ld.err = fmt.Errorf("tensor %q is missing", name)
		return nil
	}
	if len(t.Shape) < 1 || len(t.Shape) > 2 {
		ld.err = fmt.Errorf("tensor %q has shape %v; want 2 dimensions [%d, %d]", name, t.Shape, cols, rows)
		return nil
	}
	c, r := int(t.Shape[0]), 1
	if len(t.Shape) == 2 {
		r = int(t.Shape[1])
	}
	if c != cols || (rows > 0 && r != rows) || r <= 0 {
		ld.err = fmt.Errorf("tensor %q has shape %v, but the model's keys imply [%d, %d]", name, t.Shape, cols, rows)
		return nil
	}
	data := ld.data(name, t)
	if data == nil {
		return nil
	}
	return &Weight{Name: name, Type: t.Type, Rows: r, Cols: c, Data: data}
}

// data is t's bytes, nil (with ld.err set) when its type cannot be read.
func (ld *loader) data(name string, t gguf.TensorInfo) []byte {
	if !gguf.CanDequantize(t.Type) {
		ld.err = fmt.Errorf("tensor %q: type %v is not supported", name, t.Type)
		return nil
	}
	data, err := ld.f.Data(t)
	if err != nil {
		ld.err = err
		return nil
	}
	return data
}

// stack returns the count matrices (rows×cols each) of a 3-D tensor of
// ggml shape [cols, rows, count], each a weight of its own.
func (ld *loader) stack(name string, count, rows, cols int) []*Weight {
	all := ld.stacked(name, count, rows, cols)
	if all == nil {
		return nil
	}
	out := make([]*Weight, count)
	for k := range out {
		out[k] = all.Matrix(k)
	}
	return out
}

// stacked returns a 3-D tensor of ggml shape [cols, rows, count] as one
// weight of count·rows rows (Stack count).
func (ld *loader) stacked(name string, count, rows, cols int) *Weight {
	if ld.err != nil {
		return nil
	}
	t, ok := ld.f.Tensor(name)
	if !ok {
		ld.err = fmt.Errorf("tensor %q is missing", name)
		return nil
	}
	want := []uint64{uint64(cols), uint64(rows), uint64(count)}
	if !slices.Equal(t.Shape, want) {
		ld.err = fmt.Errorf("tensor %q has shape %v, but the model's keys imply %v", name, t.Shape, want)
		return nil
	}
	data := ld.data(name, t)
	if data == nil {
		return nil
	}
	return &Weight{Name: name, Type: t.Type, Rows: count * rows, Cols: cols, Data: data, Stack: count}
}

// experts loads the mixture of experts of the layer whose tensors p
// names: the router and the stacked experts (gate and up apart, or fused
// as ffn_gate_up_exps), and Gemma 4's gains and norms. A Gemma 4 layer
// without a router has none (nil), as llama.cpp takes it.
func (ld *loader) experts(p func(string) string, c *Config) *MoELayer {
	e, d := c.MoE, c.Hidden
	if _, ok := ld.f.Tensor(p("ffn_gate_inp.weight")); !ok && e.Dense {
		return nil
	}
	l := &MoELayer{
		Router: ld.tensor(p("ffn_gate_inp.weight"), e.Experts, d),
		Down:   ld.stacked(p("ffn_down_exps.weight"), e.Experts, d, e.FF),
	}
	if _, fused := ld.f.Tensor(p("ffn_gate_up_exps.weight")); fused {
		l.GateUp = ld.stacked(p("ffn_gate_up_exps.weight"), e.Experts, 2*e.FF, d)
	} else {
		l.Gate = ld.stacked(p("ffn_gate_exps.weight"), e.Experts, e.FF, d)
		l.Up = ld.stacked(p("ffn_up_exps.weight"), e.Experts, e.FF, d)
	}
	if e.RouterNorm {
		l.RouterScale = ld.vector(p("ffn_gate_inp.scale"), d)
	}
	if _, ok := ld.f.Tensor(p("ffn_down_exps.scale")); ok || e.Dense {
		l.DownScale = ld.vector(p("ffn_down_exps.scale"), e.Experts)
	}
	if _, ok := ld.f.Tensor(p("ffn_gate_inp.bias")); ok {
		// gpt-oss's: every bias or none.
		l.RouterBias = ld.vector(p("ffn_gate_inp.bias"), e.Experts)
		l.GateBias = ld.tensor(p("ffn_gate_exps.bias"), e.Experts, e.FF)
		l.UpBias = ld.tensor(p("ffn_up_exps.bias"), e.Experts, e.FF)
		l.DownBias = ld.tensor(p("ffn_down_exps.bias"), e.Experts, d)
	}
	if e.Dense {
		l.PreNorm = ld.vector(p("pre_ffw_norm_2.weight"), d)
		l.PostNorm1 = ld.vector(p("post_ffw_norm_1.weight"), d)
		l.PostNorm2 = ld.vector(p("post_ffw_norm_2.weight"), d)
	}
	return l
}

// vector returns an n-element 1-D weight.
func (ld *loader) vector(name string, n int) *Weight {
	if ld.err != nil {
		return nil
	}
	if t, ok := ld.f.Tensor(name); ok && len(t.Shape) != 1 {
		ld.err = fmt.Errorf("tensor %q has shape %v, want a vector of %d", name, t.Shape, n)
		return nil
	}
	return ld.tensor(name, 1, n)
}

// denseLayers loads an embedding model's dense_2 and dense_3, which come
// as a pair: dense_2 reads the pooled Hidden floats, dense_3 the floats
// dense_2 writes, and it writes Hidden.
func (m *Model) denseLayers(ld *loader, cfg Config) error {
	_, has2 := ld.f.Tensor("dense_2.weight")
	_, has3 := ld.f.Tensor("dense_3.weight")
	switch {
	case !has2 && !has3:
		return nil
	case has2 != has3:
		return fmt.Errorf("tensors \"dense_2.weight\" and \"dense_3.weight\" come as a pair; the file has only one")
	}
	m.Dense2 = ld.tensor("dense_2.weight", 0, cfg.Hidden)
	if m.Dense2 != nil {
		m.Dense3 = ld.tensor("dense_3.weight", cfg.Hidden, m.Dense2.Rows)
	}
	return ld.err
}
