package hfimport

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/hearthstudio/hearth/engine/arch"
	"github.com/hearthstudio/hearth/engine/tokenizer"
	"github.com/hearthstudio/hearth/gguf"
)

// OutType is the type the 2-D weights are written in; 1-D tensors (norms,
// biases, rope_freqs) are always F32, as llama.cpp's converter writes them.
type OutType int

// The output types.
const (
	TypeAuto OutType = iota // the weights' own dtype (F32, F16 or BF16), llama.cpp's default
	TypeF32
	TypeF16
	TypeBF16
)

var outTypeNames = map[OutType]string{TypeAuto: "auto", TypeF32: "f32", TypeF16: "f16", TypeBF16: "bf16"}

// String is the type's flag spelling: "auto", "f32", "f16" or "bf16".
func (t OutType) String() string {
	if s, ok := outTypeNames[t]; ok {
		return s
	}
	return fmt.Sprintf("OutType(%d)", int(t))
}

// ParseOutType reads "auto", "f32", "f16" or "bf16", in any case.
func ParseOutType(s string) (OutType, error) {
	for t, name := range outTypeNames {
		if strings.EqualFold(s, name) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("hfimport: output type %q: want auto, f32, f16 or bf16", s)
}

// Options are the choices of an import.
type Options struct {
	Type OutType
	// Pre names tokenizer.ggml.pre for a byte-level BPE tokenizer whose
	// pre-tokenizer is not recognized (or to override the guess).
	Pre string
	// Name is general.name; the folder's name when empty.
	Name string
	// Progress, when set, is called before each tensor is written.
	Progress func(done, total int, tensor string)
}

// TensorInfo is one tensor of the output and where it comes from.
type TensorInfo struct {
	Name   string    // GGUF name, e.g. "blk.0.attn_q.weight"
	Type   gguf.Type // F32, F16 or BF16; MXFP4 for gpt-oss's released experts
	Shape  []uint64  // ggml's ne: innermost first
	Source string    // the safetensors tensor, "" for one computed here (rope_freqs)
}

// Model is a Hugging Face folder read and checked, ready to be written as
// GGUF: every key, tensor and transformation is decided by Open, so a
// conversion that would fail does so before any output is written.
type Model struct {
	Dir          string
	Class        string // the Hugging Face class, e.g. "LlamaForCausalLM"
	Architecture string // general.architecture
	FileType     gguf.FileType
	// Metadata is every key but the tokenizer's, in file order.
	Metadata        []gguf.KV
	Vocab           *tokenizer.Vocab
	ChatTemplate    string
	TokenizerSource string // "tokenizer.json" or "tokenizer.model"
	Tensors         []TensorInfo

	plans    []*tensorPlan
	weights  *weights
	progress func(done, total int, tensor string)
	chunk    int64 // bytes converted at a time; tests make it small
}

// Open reads the Hugging Face model in dir (config.json, the safetensors
// weights, the tokenizer files) and plans its conversion. Close releases
// the weight files.
func Open(dir string, o Options) (*Model, error) {
	if _, ok := outTypeNames[o.Type]; !ok {
		return nil, fmt.Errorf("hfimport: unknown output type %d", int(o.Type))
	}
	hp, err := parseConfig(dir)
	if err != nil {
		return nil, err
	}
	w, err := openWeights(dir)
	if err != nil {
		return nil, err
	}
	if hp.st != nil {
		if err := w.addDense(dir, hp.st); err != nil {
			w.Close()
			return nil, err
		}
	}
	m := &Model{Dir: dir, Class: hp.class, Architecture: hp.fam.arch.Name, weights: w}
	if err := m.plan(hp, o); err != nil {
		w.Close()
		return nil, err
	}
	vi, err := loadVocab(dir, hp, o.Pre)
	if err != nil {
		w.Close()
		return nil, err
	}
	m.Vocab, m.ChatTemplate, m.TokenizerSource = vi.vocab, vi.chatTemplate, vi.source
	name := o.Name
	if name == "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			abs = dir
		}
		name = filepath.Base(abs)
	}
	m.Metadata = append([]gguf.KV{
		{Key: "general.architecture", Value: gguf.ValueOf(hp.fam.arch.Name)},
		{Key: "general.name", Value: gguf.ValueOf(name)},
		{Key: "general.file_type", Value: gguf.ValueOf(uint32(m.FileType))},
		{Key: "general.quantization_version", Value: gguf.ValueOf(uint32(gguf.QuantizationVersion))},
	}, archMetadata(hp)...)
	return m, nil
}

// Close closes the weight files.
func (m *Model) Close() error { return m.weights.Close() }

// archMetadata is the ARCH.* keys of the contract, with the types llama.cpp
// writes (counts UINT32, the rest FLOAT32).
func archMetadata(hp *hparams) []gguf.KV {
	a := hp.fam.arch.Name + "."
	var kv []gguf.KV
	u32 := func(k string, v int) { kv = append(kv, gguf.KV{Key: a + k, Value: gguf.ValueOf(uint32(v))}) }
	f32 := func(k string, v float64) { kv = append(kv, gguf.KV{Key: a + k, Value: gguf.ValueOf(float32(v))}) }
	str := func(k, v string) { kv = append(kv, gguf.KV{Key: a + k, Value: gguf.ValueOf(v)}) }

	u32("context_length", hp.ctx)
	u32("embedding_length", hp.hidden)
	u32("block_count", hp.layers)
	u32("feed_forward_length", hp.ff)
	u32("attention.head_count", hp.heads)
	u32("attention.head_count_kv", hp.kvHeads)
	u32("attention.key_length", hp.headDim)
	u32("attention.value_length", hp.headDim)
	f32("attention.layer_norm_rms_epsilon", hp.eps)
	f32("rope.freq_base", hp.rope.theta)
	u32("rope.dimension_count", hp.ropeDims())
	origCtx := hp.origCtx
	switch hp.rope.typ {
	case "linear":
		str("rope.scaling.type", "linear")
		f32("rope.scaling.factor", hp.rope.factor)
	case "yarn":
		// llama.cpp's converter: the type, factor and original context,
		// and each optional field config.json has.
		str("rope.scaling.type", "yarn")
		f32("rope.scaling.factor", hp.rope.factor)
		if hp.rope.origCtx > 0 {
			origCtx = hp.rope.origCtx
		}
		for _, o := range []struct {
			key string
			v   float64
		}{{"yarn_beta_fast", hp.rope.betaFast}, {"yarn_beta_slow", hp.rope.betaSlow}, {"yarn_ext_factor", hp.rope.extFactor}, {"yarn_attn_factor", hp.rope.attnFactor}} {
			if o.v != 0 {
				f32("rope.scaling."+o.key, o.v)
			}
		}
	case "longrope":
		// llama.cpp's Phi-3 converter: the factors go in the
		// rope_factors_long/short tensors, and the attention scaling
		// sqrt(1 + ln(s) / ln(original context)), s the context growth.
		str("rope.scaling.type", "longrope")
		if hp.origCtx > 0 && hp.ctx > hp.origCtx {
			s := float64(hp.ctx) / float64(hp.origCtx)
			f32("rope.scaling.attn_factor", math.Sqrt(1+math.Log(s)/math.Log(float64(hp.origCtx))))
		}
	}
	if origCtx > 0 {
		u32("rope.scaling.original_context_length", origCtx)
	}
	if hp.window > 0 {
		u32("attention.sliding_window", hp.window)
	}
	if hp.fam.class.Window == arch.WindowPattern {
		f32("rope.freq_base_swa", hp.ropeLocal.theta)
		if hp.swaPattern != 6 {
			u32("attention.sliding_window_pattern", hp.swaPattern)
		}
	}
	if hp.fam.class.Window == arch.WindowLayerTypes && hp.layered == nil && hp.swaPattern != typesPeriod {
		// gpt-oss's converter writes no pattern: llama.cpp's loader
		// assumes the alternation, and a config.json that differs says
		// its period.
		u32("attention.sliding_window_pattern", hp.swaPattern)
	}
	if hp.fam.arch.AttnScale {
		f32("attention.scale", 1/math.Sqrt(hp.qpas))
	}
	// Gemma 2's caps are always written: a reader's default for an absent
	// key is 50 and 30 (llama.cpp's), so a cap that config.json turns off
	// (null) must be said, as 0.
	if hp.fam.arch.Softcap || hp.attnSoftcap > 0 {
		f32("attn_logit_softcapping", hp.attnSoftcap)
	}
	if hp.fam.arch.Softcap || hp.finalSoftcap > 0 {
		f32("final_logit_softcapping", hp.finalSoftcap)
	}
	if hp.layered != nil {
		kv = hp.layeredMetadata(a, kv)
	}
	if st := hp.st; st != nil {
		// llama.cpp's converter's keys for EmbeddingGemma.
		u32("pooling_type", st.pooling)
		for _, d := range st.dense {
			u32(d.name+"_feat_in", d.in)
			u32(d.name+"_feat_out", d.out)
		}
	}
	if e := hp.moe; e != nil {
		// The converter's keys (TextModel's, for Qwen 3 MoE, Gemma 4 and
		// gpt-oss): no gating function or weights norm, which the
		// qwen3moe, gemma4 and gpt-oss graphs fix.
		u32("expert_count", e.experts)
		u32("expert_used_count", e.used)
		u32("expert_feed_forward_length", e.ff)
	}
	return kv
}

// WriteTo writes the GGUF file to w.
func (m *Model) WriteTo(w io.Writer) (int64, error) {
	cw := &countingWriter{w: w}
	gw := gguf.NewWriter(cw)
	for _, kv := range m.Metadata {
		if err := gw.Set(kv.Key, kv.Value); err != nil {
			return cw.n, err
		}
	}
	if err := m.Vocab.WriteGGUF(gw); err != nil {
		return cw.n, fmt.Errorf("hfimport: %w", err)
	}
	if m.ChatTemplate != "" {
		if err := gw.SetString(tokenizer.KeyChatTemplate, m.ChatTemplate); err != nil {
			return cw.n, err
		}
	}
	for _, p := range m.plans {
		if err := gw.AddTensor(p.name, p.typ, p.shape); err != nil {
			return cw.n, err
		}
	}
	for i, p := range m.plans {
		if m.progress != nil {
			m.progress(i, len(m.plans), p.name)
		}
		chunk := m.chunk
		if chunk <= 0 {
			chunk = defaultChunk
		}
		r, err := p.reader(chunk)
		if err != nil {
			return cw.n, err
		}
		if err := gw.WriteTensor(p.name, r); err != nil {
			return cw.n, err
		}
	}
	err := gw.Close()
	return cw.n, err
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// WriteFile writes the GGUF file to path, through path+".tmp" renamed when
// complete, so that a failed import leaves no partial file under path.
func (m *Model) WriteFile(path string) error {
	tmp := path + ".tmp"
	fh, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("hfimport: %w", err)
	}
	fail := func(err error) error {
		fh.Close()
		os.Remove(tmp)
		return err
	}
	if _, err := m.WriteTo(fh); err != nil {
		return fail(err)
	}
	if err := fh.Sync(); err != nil {
		return fail(fmt.Errorf("hfimport: %s: %w", tmp, err))
	}
	if err := fh.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("hfimport: %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("hfimport: %w", err)
	}
	return nil
}

// Import converts the Hugging Face model in dir to the GGUF file out.
func Import(dir, out string, o Options) error {
	m, err := Open(dir, o)
	if err != nil {
		return err
	}
	defer m.Close()
	return m.WriteFile(out)
}

// ImportTo converts the Hugging Face model in dir to GGUF written to w.
func ImportTo(dir string, w io.Writer, o Options) error {
	m, err := Open(dir, o)
	if err != nil {
		return err
	}
	defer m.Close()
	_, err = m.WriteTo(w)
	return err
}

// Classes lists the transformers classes Open converts (engine/arch's
// records), a multimodal one marked " (text only)".
func Classes() []string { return arch.HFClassNames() }
