package library

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/gguf"
)

// MemoryBatch is the prompt batch the memory estimate assumes: the CLI's
// default --batch.
const MemoryBatch = 512

// Info is what a model's GGUF header says.
type Info struct {
	Arch      string // general.architecture: llama, gemma3, qwen2, …
	ModelName string // general.name; may be empty
	// Params is the number of weights: the element count of every tensor
	// (of every part of a split model).
	Params int64
	// Quant is the file type as llama.cpp names it (Q4_K_M, Q8_0, F16), or,
	// in a file without general.file_type, the tensor type that holds the
	// most weights.
	Quant   string
	Context int // ARCH.context_length: the context the model was trained for
	Layers  int // ARCH.block_count
	// Embedding is the width of the model's hidden states
	// (ARCH.embedding_length): what a vision projector paired with it
	// must project to.
	Embedding int
	// Memory is the GPU memory estimate of running the model with a cache of
	// MemoryContext positions and batches of MemoryBatch tokens; zero when
	// Hearth cannot load the model.
	Memory        model.Memory
	MemoryContext int // min(Context, model.DefaultContext)

	// matrices are the ggml shapes of the model's matrices: what an
	// adapter's pairs must fit. A pointer keeps Info comparable.
	matrices *matrixShapes
}

// matrixShapes are tensors' ggml shapes (ne[0], ne[1]), by tensor name.
type matrixShapes map[string][2]uint64

// Describe reads a GGUF file's header and tensor table (the file is
// memory-mapped; no tensor data is read) and the model's configuration as a
// run would. It checks what decides whether Hearth can run the model (the
// architecture, its hyper-parameters) but not every tensor's shape or the
// tokenizer, which loading checks: building a 150K-token tokenizer takes
// about 100 ms, twenty times the header, and Describe runs for every model
// of a scan.
//
// A file that is not GGUF or is truncated returns a nil Info and an error.
// A file whose header reads but which Hearth cannot run (an architecture it
// lacks, keys that do not describe a model, a split model, a LoRA adapter,
// whose error wraps ErrAdapter) returns the Info and an error saying why,
// both non-nil.
func Describe(path string) (*Info, error) {
	info, a, err := describeAny(path, false)
	if a != nil {
		info = &Info{Arch: a.Arch, Params: a.Params}
		return info, fmt.Errorf("%s is %w (for %s): apply it to a model with --lora, or choose it as the chat's adapter", path, ErrAdapter, a.For())
	}
	return info, err
}

// describeModel is Describe of an open file that is not an adapter.
func describeModel(f *gguf.File, path string) (*Info, error) {
	info := headerInfo(f)

	if parts := splitParts(path); len(parts) > 1 {
		return info, describeSplit(info, path, parts)
	}
	if n, _ := f.IntOr("split.count", 0); n > 1 {
		return info, fmt.Errorf("%s: split GGUF (%d parts) is not supported yet", path, n)
	}

	cfg, err := model.ReadConfig(f)
	if err != nil {
		return info, withPath(path, err)
	}
	embd, ok := f.Tensor("token_embd.weight")
	if !ok || len(embd.Shape) != 2 {
		return info, fmt.Errorf("%s: tensor \"token_embd.weight\" is missing or not a matrix", path)
	}
	cfg.Vocab = int(embd.Shape[1])
	if err := cfg.Validate(); err != nil {
		return info, withPath(path, err)
	}
	info.MemoryContext = min(cfg.Context, model.DefaultContext)
	info.Memory = memoryEstimate(f, cfg, info.MemoryContext)
	m := matrixShapes{}
	for _, t := range f.Tensors() {
		if len(t.Shape) == 2 {
			m[t.Name] = [2]uint64{t.Shape[0], t.Shape[1]}
		}
	}
	info.matrices = &m
	return info, nil
}

// withPath is err naming the file at path, once: gguf's key errors name
// the file already.
func withPath(path string, err error) error {
	if strings.Contains(err.Error(), path) {
		return err
	}
	return fmt.Errorf("%s: %w", path, err)
}

// memoryEstimate is model.Model.Memory without loading the model: the KV
// cache and activations come from Memory itself, which for a model without
// weights counts only what the configuration implies; the weights are
// counted here from the tensor table, by the rule Memory applies to the
// weights the loader maps (TestMemoryEstimateMatchesModel holds the two
// together).
func memoryEstimate(f *gguf.File, cfg model.Config, ctx int) model.Memory {
	m := (&model.Model{Config: cfg}).Memory(ctx, MemoryBatch)
	for _, t := range f.Tensors() {
		if !uploaded(f, t.Name, &cfg) {
			continue
		}
		if _, tensor, _ := strings.Cut(strings.TrimPrefix(t.Name, "blk."), "."); altUpF32[tensor] {
			m.Weights += int64(t.Elements()) * 4
			continue
		}
		m.Weights += uploadBytes(t)
		// A layer whose values are k's projection (Gemma 4's
		// attention_k_eq_v) uploads k twice: as k and as v.
		if layer, ok := strings.CutSuffix(t.Name, "attn_k.weight"); ok && cfg.ValueFromKey {
			if _, v := f.Tensor(layer + "attn_v.weight"); !v {
				m.Weights += uploadBytes(t)
			}
		}
	}
	return m
}

// uploadedInLayer are the names, after "blk.N.", of the layer tensors the
// loader reads (engine/model/weights.go), under llama.cpp's names.
var uploadedInLayer = map[string]bool{
	"attn_norm.weight":           true,
	"post_attention_norm.weight": true,
	"ffn_norm.weight":            true,
	"post_ffw_norm.weight":       true,
	"attn_q.weight":              true,
	"attn_k.weight":              true,
	"attn_v.weight":              true,
	"attn_qkv.weight":            true,
	"attn_output.weight":         true,
	"attn_q.bias":                true,
	"attn_k.bias":                true,
	"attn_v.bias":                true,
	"attn_q_norm.weight":         true,
	"attn_k_norm.weight":         true,
	"ffn_gate.weight":            true,
	"ffn_up.weight":              true,
	"ffn_down.weight":            true,
	"inp_gate.weight":            true, // Gemma 3n's and 4's per-layer embeddings
	"proj.weight":                true,
	"post_norm.weight":           true,
	"laurel_l.weight":            true, // Gemma 3n's LAuReL
	"laurel_r.weight":            true,
	"laurel_post_norm.weight":    true,
	// Gemma 3n's AltUp, uploaded as f32 whatever the file stores
	// (altUpF32).
	"altup_router.weight":        true,
	"altup_router_norm.weight":   true,
	"altup_predict_coef.weight":  true,
	"altup_correct_coef.weight":  true,
	"altup_correct_scale.weight": true,
	// A mixture of experts: the router and the stacked experts, and Gemma
	// 4's gains and norms around them.
	"ffn_gate_inp.weight":     true,
	"ffn_gate_exps.weight":    true,
	"ffn_up_exps.weight":      true,
	"ffn_gate_up_exps.weight": true,
	"ffn_down_exps.weight":    true,
	"ffn_gate_inp.scale":      true,
	"ffn_down_exps.scale":     true,
	"pre_ffw_norm_2.weight":   true,
	"post_ffw_norm_1.weight":  true,
	"post_ffw_norm_2.weight":  true,
	// gpt-oss's: the output projection's bias, the attention sinks, the
	// router's bias and the experts' (a row an expert).
	"attn_output.bias":   true,
	"attn_sinks.weight":  true,
	"ffn_gate_inp.bias":  true,
	"ffn_gate_exps.bias": true,
	"ffn_up_exps.bias":   true,
	"ffn_down_exps.bias": true,
}

// altUpF32 are the layer tensors the GPU runner dequantizes to f32 (Gemma
// 3n's AltUp router and coefficients: a few thousand values a layer).
var altUpF32 = map[string]bool{
	"altup_router.weight": true, "altup_router_norm.weight": true, "altup_predict_coef.weight": true,
	"altup_correct_coef.weight": true, "altup_correct_scale.weight": true,
}

// uploaded reports whether the GPU runner uploads the tensor called name:
// every layer weight, the output norm and head, Gemma 3n's and 4's
// projection into their per-layer embeddings and that projection's norm,
// Gemma 3n's AltUp projections, and the token
// embedding only when it is the head as well (tied); otherwise the GPU
// forward looks its rows up on the host, as it does the per-layer table.
func uploaded(f *gguf.File, name string, cfg *model.Config) bool {
	switch name {
	case "output.weight", "output_norm.weight", "per_layer_model_proj.weight", "per_layer_proj_norm.weight",
		"altup_proj.weight", "altup_unembd_proj.weight":
		return true
	case "token_embd.weight":
		_, untied := f.Tensor("output.weight")
		return !untied
	}
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return false
	}
	n, tensor, ok := strings.Cut(rest, ".")
	i, err := strconv.Atoi(n)
	if !ok || err != nil || i < 0 || i >= cfg.Layers || !uploadedInLayer[tensor] {
		return false
	}
	// A Gemma 4 layer that reads an earlier layer's cache loads no k and
	// v of its own, whatever the file holds.
	switch tensor {
	case "attn_k.weight", "attn_v.weight", "attn_k_norm.weight":
		return cfg.OwnKV(i)
	}
	return true
}

// uploadBytes is a tensor's size on the GPU: as stored, except vectors in a
// float type, which go up as f32.
func uploadBytes(t gguf.TensorInfo) int64 {
	rows := uint64(1)
	for _, d := range t.Shape[min(1, len(t.Shape)):] {
		rows *= d
	}
	if t.Type.BlockSize() == 1 && rows == 1 && len(t.Shape) > 0 {
		return int64(t.Shape[0]) * 4
	}
	return int64(t.Size)
}

// headerInfo is what the header says, read leniently: a model Hearth cannot
// run is still worth describing.
func headerInfo(f *gguf.File) *Info {
	arch := f.Architecture()
	info := &Info{Arch: arch, Params: int64(f.ParameterCount()), Quant: quantName(f)}
	info.ModelName, _ = f.StringOr("general.name", "")
	if arch != "" {
		info.Context, _ = f.IntOr(arch+".context_length", 0)
		info.Layers, _ = f.IntOr(arch+".block_count", 0)
		info.Embedding, _ = f.IntOr(arch+".embedding_length", 0)
	}
	return info
}

// describeSplit adds the other parts' weights to info and says why the
// model cannot run.
func describeSplit(info *Info, path string, parts []string) error {
	var missing []string
	for _, p := range parts[1:] {
		f, err := gguf.Open(p)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				missing = append(missing, p)
			}
			continue
		}
		info.Params += int64(f.ParameterCount())
		f.Close()
	}
	err := fmt.Sprintf("%s: split GGUF (%d parts) is not supported yet", path, len(parts))
	if len(missing) > 0 {
		err += fmt.Sprintf("; missing: %s", strings.Join(missing, ", "))
	}
	return errors.New(err)
}

// fileTypeGuessed is llama.cpp's LLAMA_FTYPE_GUESSED flag on a file type.
const fileTypeGuessed = 1024

// quantName is the file's quantization as llama.cpp's tools and model
// repositories name it: gguf.FileType's llama_ftype name less its
// MOSTLY_/ALL_ prefix (MOSTLY_Q4_K_M is Q4_K_M).
func quantName(f *gguf.File) string {
	if ft, ok := f.FileType(); ok {
		name := (ft &^ fileTypeGuessed).String()
		if s, ok := strings.CutPrefix(name, "MOSTLY_"); ok {
			return s
		}
		if s, ok := strings.CutPrefix(name, "ALL_"); ok {
			return s
		}
	}
	// No general.file_type (older converters), or one this build does not
	// know: the type of the most weights names the file as well.
	weights := map[gguf.Type]uint64{}
	var best gguf.Type
	for _, t := range f.Tensors() {
		if len(t.Shape) < 2 {
			continue // norms and biases are F32 in every quantization
		}
		weights[t.Type] += t.Elements()
		if weights[t.Type] > weights[best] || weights[t.Type] == weights[best] && t.Type < best {
			best = t.Type
		}
	}
	if len(weights) == 0 {
		return ""
	}
	return best.String()
}
