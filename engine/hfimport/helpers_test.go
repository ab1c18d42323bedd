package hfimport

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/x448/float16"

	"github.com/hearthstudio/hearth/gguf"
	"github.com/hearthstudio/hearth/safetensors"
)

// stTensor is a tensor for writeSafetensors: values are stored in dtype,
// or raw is its bytes as they are (gpt-oss's U8 MXFP4 blocks and scales).
type stTensor struct {
	name   string
	dtype  safetensors.DType
	shape  []int64
	values []float32 // len = product of shape
	raw    []byte
}

// encode stores values in dtype, little-endian.
func encode(dtype safetensors.DType, values []float32) []byte {
	switch dtype {
	case safetensors.F32:
		b := make([]byte, 4*len(values))
		for i, v := range values {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		return b
	case safetensors.F16:
		b := make([]byte, 2*len(values))
		for i, v := range values {
			binary.LittleEndian.PutUint16(b[2*i:], float16.Fromfloat32(v).Bits())
		}
		return b
	case safetensors.BF16:
		b := make([]byte, 2*len(values))
		for i, v := range values {
			binary.LittleEndian.PutUint16(b[2*i:], uint16(math.Float32bits(v)>>16))
		}
		return b
	}
	panic("encode: dtype " + string(dtype))
}

// writeSafetensors writes tensors as a model's safetensors file, with the
// metadata torch's save_file writes.
func writeSafetensors(t *testing.T, path string, tensors []stTensor) {
	t.Helper()
	var ds []safetensors.Data
	for _, x := range tensors {
		b := x.raw
		if b == nil {
			b = encode(x.dtype, x.values)
		}
		ds = append(ds, safetensors.Data{Name: x.name, DType: x.dtype, Shape: x.shape, Bytes: b})
	}
	if err := safetensors.WriteFile(path, ds, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// tinyTokenizer is a byte-level BPE tokenizer.json of 8 tokens: three
// specials and five pieces, with GPT-2's ByteLevel pre-tokenizer.
func tinyTokenizer() map[string]any {
	return map[string]any{
		"version": "1.0",
		"added_tokens": []map[string]any{
			{"id": 0, "content": "<pad>", "special": true},
			{"id": 1, "content": "<s>", "special": true},
			{"id": 2, "content": "</s>", "special": true},
		},
		"pre_tokenizer": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
		"decoder":       map[string]any{"type": "ByteLevel"},
		"model": map[string]any{
			"type":   "BPE",
			"vocab":  map[string]int{"<pad>": 0, "<s>": 1, "</s>": 2, "a": 3, "b": 4, "Ġ": 5, "ab": 6, "Ġa": 7},
			"merges": [][2]string{{"a", "b"}, {"Ġ", "a"}},
		},
	}
}

// dims are a test model's shapes: small, with head_dim*heads != hidden
// and GQA, so that a mixed-up dimension shows.
type dims struct {
	vocab, hidden, layers, ff, heads, kvHeads, headDim int
}

var small = dims{vocab: 10, hidden: 8, layers: 2, ff: 12, heads: 2, kvHeads: 1, headDim: 6}

// hfModel is a test folder's content.
type hfModel struct {
	config   map[string]any
	tensors  []stTensor
	tokenCfg map[string]any // tokenizer_config.json; nil for none
	genCfg   map[string]any // generation_config.json; nil for none
}

// familyFeatures say which Hugging Face tensors a class has.
type familyFeatures struct {
	postNorms, qkNorm, qkvBias, fused, tied bool
}

var features = map[string]familyFeatures{
	"LlamaForCausalLM":   {},
	"MistralForCausalLM": {},
	"GemmaForCausalLM":   {tied: true},
	"Gemma2ForCausalLM":  {postNorms: true, tied: true},
	"Gemma3ForCausalLM":  {postNorms: true, qkNorm: true, tied: true},
	"Gemma3TextModel":    {postNorms: true, qkNorm: true, tied: true},
	"Qwen2ForCausalLM":   {qkvBias: true, tied: true},
	"Qwen3ForCausalLM":   {qkNorm: true},
	"Phi3ForCausalLM":    {fused: true},
}

// newModel builds a model of class with d's shapes: the config keys every
// class has plus extra, and random weights in dtype under Hugging Face's
// names (a fixed seed per call so that reruns are identical).
// randomTensor is a tensor of the given shape drawn from rng: multiples of
// 1/64 in [-2, 2), exact in f16 and bf16, so that a comparison after any
// conversion can be exact.
func randomTensor(rng *rand.Rand, name string, dtype safetensors.DType, shape ...int64) stTensor {
	n := int64(1)
	for _, s := range shape {
		n *= s
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.IntN(256)-128) / 64
	}
	return stTensor{name: name, dtype: dtype, shape: shape, values: v}
}

// multimodal is text's checkpoint as the vision-language class saves it:
// config.json's text part nested as text_config under class (model_type
// modelType), the text tensors' "model." renamed to prefix, and extra
// tensors of the other towers.
func multimodal(text *hfModel, class, modelType, prefix string, extra ...stTensor) *hfModel {
	tc := map[string]any{}
	for k, v := range text.config {
		if k != "architectures" {
			tc[k] = v
		}
	}
	mm := &hfModel{config: map[string]any{"architectures": []string{class}, "model_type": modelType, "text_config": tc}, tokenCfg: text.tokenCfg}
	for _, x := range text.tensors {
		x.name = prefix + strings.TrimPrefix(x.name, "model.")
		mm.tensors = append(mm.tensors, x)
	}
	mm.tensors = append(mm.tensors, extra...)
	return mm
}

// sameImport fails unless got holds want's tensors, value for value.
func sameImport(t *testing.T, got, want *gguf.File) {
	t.Helper()
	if !slices.Equal(tensorNames(got), tensorNames(want)) {
		t.Fatalf("tensors %v, want the text model's %v", tensorNames(got), tensorNames(want))
	}
	for _, name := range tensorNames(want) {
		if !slices.Equal(floats(t, got, name), floats(t, want, name)) {
			t.Errorf("%s differs from the text-only import", name)
		}
	}
}

func newModel(class string, d dims, dtype safetensors.DType, extra map[string]any) *hfModel {
	f := features[class]
	cfg := map[string]any{
		"architectures":           []string{class},
		"vocab_size":              d.vocab,
		"hidden_size":             d.hidden,
		"intermediate_size":       d.ff,
		"num_hidden_layers":       d.layers,
		"num_attention_heads":     d.heads,
		"num_key_value_heads":     d.kvHeads,
		"head_dim":                d.headDim,
		"max_position_embeddings": 128,
		"rms_norm_eps":            1e-5,
		"tie_word_embeddings":     f.tied,
		"bos_token_id":            1,
		"eos_token_id":            2,
	}
	for k, v := range extra {
		if v == nil {
			delete(cfg, k)
			continue
		}
		cfg[k] = v
	}
	rng := rand.New(rand.NewPCG(1, uint64(len(class))))
	var ts []stTensor
	add := func(name string, shape ...int64) { ts = append(ts, randomTensor(rng, name, dtype, shape...)) }
	H, V, F := int64(d.hidden), int64(d.vocab), int64(d.ff)
	q, kv, hd := int64(d.heads*d.headDim), int64(d.kvHeads*d.headDim), int64(d.headDim)
	add("model.embed_tokens.weight", V, H)
	for i := range d.layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		add(p+"input_layernorm.weight", H)
		if f.fused {
			add(p+"self_attn.qkv_proj.weight", q+2*kv, H)
		} else {
			add(p+"self_attn.q_proj.weight", q, H)
			add(p+"self_attn.k_proj.weight", kv, H)
			add(p+"self_attn.v_proj.weight", kv, H)
		}
		if f.qkvBias {
			add(p+"self_attn.q_proj.bias", q)
			add(p+"self_attn.k_proj.bias", kv)
			add(p+"self_attn.v_proj.bias", kv)
		}
		add(p+"self_attn.o_proj.weight", H, q)
		if f.qkNorm {
			add(p+"self_attn.q_norm.weight", hd)
			add(p+"self_attn.k_norm.weight", hd)
		}
		add(p+"post_attention_layernorm.weight", H)
		if f.postNorms {
			add(p+"pre_feedforward_layernorm.weight", H)
			add(p+"post_feedforward_layernorm.weight", H)
		}
		if f.fused {
			add(p+"mlp.gate_up_proj.weight", 2*F, H)
		} else {
			add(p+"mlp.gate_proj.weight", F, H)
			add(p+"mlp.up_proj.weight", F, H)
		}
		add(p+"mlp.down_proj.weight", H, F)
	}
	add("model.norm.weight", H)
	if !f.tied {
		add("lm_head.weight", V, H)
	}
	return &hfModel{
		config:   cfg,
		tensors:  ts,
		tokenCfg: map[string]any{"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "add_bos_token": true, "chat_template": "{{ messages }}"},
	}
}

func (m *hfModel) tensor(name string) *stTensor {
	for i := range m.tensors {
		if m.tensors[i].name == name {
			return &m.tensors[i]
		}
	}
	panic("no tensor " + name)
}

func (m *hfModel) remove(name string) {
	for i := range m.tensors {
		if m.tensors[i].name == name {
			m.tensors = append(m.tensors[:i], m.tensors[i+1:]...)
			return
		}
	}
	panic("no tensor " + name)
}

// write lays the model out in a new folder: config.json, model.safetensors,
// tokenizer.json, tokenizer_config.json, generation_config.json.
func (m *hfModel) write(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tiny-model")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeJSON(t, filepath.Join(dir, "config.json"), m.config)
	writeSafetensors(t, filepath.Join(dir, "model.safetensors"), m.tensors)
	writeJSON(t, filepath.Join(dir, "tokenizer.json"), tinyTokenizer())
	if m.tokenCfg != nil {
		writeJSON(t, filepath.Join(dir, "tokenizer_config.json"), m.tokenCfg)
	}
	if m.genCfg != nil {
		writeJSON(t, filepath.Join(dir, "generation_config.json"), m.genCfg)
	}
	return dir
}

// importModel imports dir with o and opens the result.
// importRefused imports m and wants an error naming each of want.
func importRefused(t *testing.T, m *hfModel, want ...string) {
	t.Helper()
	err := Import(m.write(t), t.TempDir()+"/out.gguf", Options{})
	if err == nil {
		t.Fatalf("Import succeeded, want an error naming %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
}

func importModel(t *testing.T, dir string, o Options) *gguf.File {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out.gguf")
	if err := Import(dir, out, o); err != nil {
		t.Fatalf("Import: %v", err)
	}
	if _, err := os.Stat(out + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("%s.tmp is left behind", out)
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// floats decodes a GGUF tensor to float32.
func floats(t *testing.T, f *gguf.File, name string) []float32 {
	t.Helper()
	info, ok := f.Tensor(name)
	if !ok {
		t.Fatalf("no tensor %q", name)
	}
	b, err := f.Data(info)
	if err != nil {
		t.Fatal(err)
	}
	n := 1
	for _, d := range info.Shape {
		n *= int(d)
	}
	out := make([]float32, n)
	if err := gguf.Dequantize(info.Type, b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func tensorNames(f *gguf.File) []string {
	var names []string
	for _, t := range f.Tensors() {
		names = append(names, t.Name)
	}
	sort.Strings(names)
	return names
}
