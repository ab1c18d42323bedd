package gguf

// This file converts a whole model to another quantization, as llama.cpp's
// llama-quantize does: PlanRequantize chooses each tensor's type by
// llama.cpp's mixing rules (llama_tensor_get_type in src/llama-quant.cpp),
// Requantize streams the converted file to a writer, RequantizeFile writes it
// to a path through a temporary file.
//
// The rules implemented, for the file types ParseQuantTarget accepts:
//
//   - Only tensors of two or more dimensions whose name ends in "weight" are
//     converted; norms ("_norm.weight"), MoE routers ("ffn_gate_inp"),
//     position and token-type embeddings, and the small tensors llama.cpp
//     names (altup, laurel, ssm_conv1d, RWKV time_mix_*, T5 attn_rel_b, the
//     vision towers' patch and position embeddings, …) keep their type, as
//     do integer tensors and those a --keep pattern matches.
//   - F32, F16 and BF16 targets convert every such tensor to that type, with
//     no mix.
//   - Quantized targets start from the file type's default tensor type, then:
//     the output tensor (output.weight, or token_embd.weight when the model
//     has no output.weight) becomes Q6_K unless the default is Q8_0; it is
//     Q8_0 for falcon, for MXFP4_MOE and when its rows are not a multiple of
//     the default's block.
//   - attn_v (and attn_qkv, attn_kv_b, which llama.cpp counts as attn_v):
//     Q4_K_M and Q5_K_M give Q6_K to the layers use_more_bits picks (the
//     first and last eighth, and every third layer between); Q4_K_S gives
//     Q5_K to the first 4; Q3_K_M Q5_K to the first 2 and Q4_K to the rest;
//     Q3_K_L Q5_K; Q2_K Q4_K with grouped-query attention of 4 or more heads
//     per KV head, else Q3_K; IQ4_NL/IQ4_XS Q5_K with that GQA. A 70B llama
//     (80 layers, GQA) bumps Q3_K/Q4_K here to Q5_K; 8 experts give Q8_0.
//   - attn_k: Q8_0 with 8 experts.
//   - ffn_down, by layer: Q4_K_M Q6_K where use_more_bits (falcon: Q6_K in
//     the first 16th, Q5_K where use_more_bits); Q5_K_M Q6_K where
//     use_more_bits; Q4_K_S Q5_K in the first eighth (not falcon);
//     IQ4_NL/IQ4_XS Q5_K in the first eighth; Q3_K_M Q5_K in the first 16th
//     and Q4_K after (falcon: Q3_K outside use_more_bits); Q3_K_L Q5_K
//     (falcon Q4_K); Q2_K Q3_K.
//   - attn_output: Q2_K → Q3_K, Q3_K_M → Q4_K, Q3_K_L → Q5_K (falcon: only
//     Q3_K_L, to Q4_K); with 8 experts Q5_K for Q2_K, Q3_K_S/M, Q4_K_S/M and
//     IQ4_NL/XS.
//   - token_embd: Q4_K for TQ1_0/TQ2_0 (when not tied to the output).
//   - MXFP4_MOE: MXFP4 for 3-D expert tensors, Q8_0 for the rest.
//   - Pure targets (the tensor type names Q4_K, Q5_K, Q3_K, MXFP4, or any
//     target with Pure set) skip every rule above but the fallback below.
//   - A row length the chosen type's block does not divide falls back as
//     llama.cpp does: IQ4_XS → IQ4_NL; Q2_K, Q3_K, TQ1_0, TQ2_0 → Q4_0;
//     Q4_K → Q5_0; Q5_K → Q5_1; Q6_K → Q8_0; and to F16 when that still does
//     not divide it. Where llama.cpp has no fallback and aborts (Q4_0, Q8_0,
//     IQ4_NL, MXFP4 and the other 32-blocks), F16 is used.
//
// A tensor whose chosen type is its type in the input is copied byte for
// byte. Layers are counted as llama.cpp counts them: tensors are visited sorted by
// layer ("blk.N.") then name, n_layer is {arch}.block_count, and the i-th
// attn_v (or, in a dense model, the i-th ffn_down) is layer i; MoE models
// read the layer from the name. Rules that need an importance matrix or the
// IQ1/IQ2/IQ3 grids are out, because those file types are refused.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// QuantizationVersion is ggml's GGML_QNT_VERSION, the version of the quant
// block layouts, written as general.quantization_version.
const QuantizationVersion = 2

// llama.cpp's llama_ftype values this file's rules refer to.
const (
	fileTypeF32      FileType = 0
	fileTypeF16      FileType = 1
	fileTypeQ4_0     FileType = 2
	fileTypeQ4_1     FileType = 3
	fileTypeQ8_0     FileType = 7
	fileTypeQ5_0     FileType = 8
	fileTypeQ5_1     FileType = 9
	fileTypeQ2_K     FileType = 10
	fileTypeQ3_K_S   FileType = 11
	fileTypeQ3_K_M   FileType = 12
	fileTypeQ3_K_L   FileType = 13
	fileTypeQ4_K_S   FileType = 14
	fileTypeQ4_K_M   FileType = 15
	fileTypeQ5_K_S   FileType = 16
	fileTypeQ5_K_M   FileType = 17
	fileTypeQ6_K     FileType = 18
	fileTypeIQ4_NL   FileType = 25
	fileTypeIQ4_XS   FileType = 30
	fileTypeBF16     FileType = 32
	fileTypeTQ1_0    FileType = 36
	fileTypeTQ2_0    FileType = 37
	fileTypeMXFP4MoE FileType = 38
)

// QuantTarget is what a model is converted to: a llama.cpp file type, which
// names a mix of tensor types, and the type most weights get.
type QuantTarget struct {
	// Name is the canonical name: "Q4_K_M", "Q8_0", "F16".
	Name string
	// FileType is written as general.file_type.
	FileType FileType
	// Default is the type of every converted tensor that no rule moves.
	Default Type
	// Pure turns the mix rules off: every converted tensor gets Default,
	// less the fallbacks for row lengths (llama-quantize --pure).
	Pure bool
}

// quantTargets are the names ParseQuantTarget accepts: llama-quantize's file
// type names, then the tensor type names that are not also file types, which
// mean that type for every converted tensor.
var quantTargets = []QuantTarget{
	{"F32", fileTypeF32, TypeF32, false},
	{"F16", fileTypeF16, TypeF16, false},
	{"BF16", fileTypeBF16, TypeBF16, false},
	{"Q8_0", fileTypeQ8_0, TypeQ8_0, false},
	{"Q6_K", fileTypeQ6_K, TypeQ6_K, false},
	{"Q5_K_M", fileTypeQ5_K_M, TypeQ5_K, false},
	{"Q5_K_S", fileTypeQ5_K_S, TypeQ5_K, false},
	{"Q5_1", fileTypeQ5_1, TypeQ5_1, false},
	{"Q5_0", fileTypeQ5_0, TypeQ5_0, false},
	{"Q4_K_M", fileTypeQ4_K_M, TypeQ4_K, false},
	{"Q4_K_S", fileTypeQ4_K_S, TypeQ4_K, false},
	{"Q4_1", fileTypeQ4_1, TypeQ4_1, false},
	{"Q4_0", fileTypeQ4_0, TypeQ4_0, false},
	{"IQ4_XS", fileTypeIQ4_XS, TypeIQ4_XS, false},
	{"IQ4_NL", fileTypeIQ4_NL, TypeIQ4_NL, false},
	{"Q3_K_L", fileTypeQ3_K_L, TypeQ3_K, false},
	{"Q3_K_M", fileTypeQ3_K_M, TypeQ3_K, false},
	{"Q3_K_S", fileTypeQ3_K_S, TypeQ3_K, false},
	{"Q2_K", fileTypeQ2_K, TypeQ2_K, false},
	{"TQ2_0", fileTypeTQ2_0, TypeTQ2_0, false},
	{"TQ1_0", fileTypeTQ1_0, TypeTQ1_0, false},
	{"MXFP4_MOE", fileTypeMXFP4MoE, TypeMXFP4, false},
	// Q4_K, Q5_K and Q3_K are aliases of the _M mixes, as in llama-quantize,
	// so users get what they are used to; --pure gives one type throughout.
	{"Q5_K", fileTypeQ5_K_M, TypeQ5_K, false},
	{"Q4_K", fileTypeQ4_K_M, TypeQ4_K, false},
	{"Q3_K", fileTypeQ3_K_M, TypeQ3_K, false},
	{"MXFP4", fileTypeMXFP4MoE, TypeMXFP4, true},
}

// imatrixTargets are the types ggml only quantizes well with an importance
// matrix: llama.cpp's tensor_requires_imatrix, and Q2_K_S, whose Q2_K
// tensors it requires one for.
var imatrixTargets = []string{"IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ3_XXS", "Q2_K_S"}

// refusedTargets explain the other names ParseQuantTarget knows and refuses.
var refusedTargets = map[string]string{
	"IQ3_XS": "needs ggml's IQ3 lattice grids, which Hearth's quantizer does not have",
	"IQ3_S":  "needs ggml's IQ3 lattice grids, which Hearth's quantizer does not have",
	"IQ3_M":  "needs ggml's IQ3 lattice grids, which Hearth's quantizer does not have",
	"Q8_1":   "is the activation encoding of ggml's dot products, not a type for stored weights",
	"Q8_K":   "is the activation encoding of ggml's dot products, not a type for stored weights",
	"I8":     "is an integer type, not a quantization",
	"I16":    "is an integer type, not a quantization",
	"I32":    "is an integer type, not a quantization",
	"I64":    "is an integer type, not a quantization",
	"F64":    "is not a type ggml computes with",
}

// ErrNeedsImatrix is wrapped by ParseQuantTarget's error for a type that
// ggml only quantizes with an importance matrix.
var ErrNeedsImatrix = errors.New("needs an importance matrix")

// ParseQuantTarget finds a target by name, case-insensitively: a
// llama-quantize file type ("Q4_K_M", "Q8_0", "IQ4_XS", "F16"), or a tensor
// type that is not one ("Q4_K", "MXFP4"), meaning that type for every
// converted tensor. Types that need an importance matrix (IQ1_*, IQ2_*,
// IQ3_XXS, Q2_K_S; the error wraps ErrNeedsImatrix) or the IQ3 grids are
// refused with an error that says so.
func ParseQuantTarget(name string) (QuantTarget, error) {
	upper := strings.ToUpper(strings.TrimSpace(name))
	for _, t := range quantTargets {
		if t.Name == upper {
			return t, nil
		}
	}
	if slices.Contains(imatrixTargets, upper) {
		return QuantTarget{}, fmt.Errorf("gguf: quantize type %s %w (llama-quantize --imatrix), which Hearth does not compute; without one ggml's 1–3 bit types give garbage (available: %s)",
			upper, ErrNeedsImatrix, QuantTargetNames())
	}
	if why, ok := refusedTargets[upper]; ok {
		return QuantTarget{}, fmt.Errorf("gguf: quantize type %s %s (available: %s)", upper, why, QuantTargetNames())
	}
	return QuantTarget{}, fmt.Errorf("gguf: unknown quantize type %q (available: %s)", name, QuantTargetNames())
}

// QuantTargetNames lists the names ParseQuantTarget accepts, comma separated.
func QuantTargetNames() string {
	names := make([]string, len(quantTargets))
	for i, t := range quantTargets {
		names[i] = t.Name
	}
	return strings.Join(names, ", ")
}

// RequantizeOptions configure PlanRequantize, Requantize and RequantizeFile.
type RequantizeOptions struct {
	// Target is the quantization to convert to.
	Target QuantTarget
	// Keep leaves the tensors whose name one of them matches (anywhere in the
	// name, as regexp.MatchString) as they are.
	Keep []*regexp.Regexp
	// Progress, if set, is called on the calling goroutine as the data is
	// converted: several times per large tensor, and once with Done set when
	// each tensor is written.
	Progress func(RequantizeProgress)
	// Context, if set, cancels the conversion between chunks of rows.
	Context context.Context

	// For tests: wrapOutput wraps the file RequantizeFile writes to, and
	// chunkValues replaces requantizeChunk.
	wrapOutput  func(io.Writer) io.Writer
	chunkValues int
}

// RequantizeProgress reports how far Requantize is.
type RequantizeProgress struct {
	// Tensor is the tensor being converted, Index its position in the file
	// (from 0) and Count the number of tensors.
	Tensor TensorPlan
	Index  int
	Count  int
	// Done reports that Tensor's data is written.
	Done bool
	// BytesDone of BytesTotal bytes of input tensor data are converted.
	BytesDone  int64
	BytesTotal int64
}

// TensorPlan is what becomes of one tensor.
type TensorPlan struct {
	Name  string
	Shape []uint64
	// From is the tensor's type in the input, To its type in the output; the
	// data is copied unchanged when they are equal.
	From, To Type
	// InSize and OutSize are the data's bytes in the input and output.
	InSize, OutSize uint64
	// Note says why To is not the target's default type ("1-D tensor",
	// "output tensor", "fallback: …"); empty when it is.
	Note string
	// Fallback reports that the row length ruled out the type the rules
	// chose, and Note names the one used instead.
	Fallback bool
}

// Copied reports whether the tensor's data is copied unchanged.
func (p TensorPlan) Copied() bool { return p.From == p.To }

// modelFacts are the hyper-parameters llama.cpp's rules consult.
type modelFacts struct {
	arch    string
	nLayer  int
	nGQA    int // query heads per KV head in the first layer; 0 if unknown
	nExpert int
	is70B   bool
	tied    bool // no output.weight: token_embd.weight is also the output
}

func readModelFacts(f *File) modelFacts {
	arch := f.Architecture()
	m := modelFacts{arch: arch, tied: true}
	if _, ok := f.Tensor("output.weight"); ok {
		m.tied = false
	}
	m.nLayer, _ = f.IntOr(arch+".block_count", -1)
	if m.nLayer < 0 {
		// No block_count: the layers the tensor names number.
		m.nLayer = 0
		for _, t := range f.tensors {
			if l, ok := tensorLayer(t.Name); ok {
				m.nLayer = max(m.nLayer, l+1)
			}
		}
	}
	m.nExpert, _ = f.IntOr(arch+".expert_count", 0)
	nHead := firstInteger(f, arch+".attention.head_count")
	nHeadKV := firstInteger(f, arch+".attention.head_count_kv")
	if nHeadKV < 0 {
		nHeadKV = nHead // llama.cpp's default: no GQA
	}
	if nHead > 0 && nHeadKV > 0 {
		m.nGQA = nHead / nHeadKV
	}
	// llama.cpp's LLM_TYPE_70B as llama-quantize infers it.
	m.is70B = arch == "llama" && m.nLayer == 80 && nHead != nHeadKV
	return m
}

// firstInteger is an integer key, or the first element of an integer array
// (some models give per-layer head counts); -1 if absent or not an integer.
func firstInteger(f *File, key string) int {
	v, ok := f.Value(key)
	if !ok {
		return -1
	}
	if v.Type() == ValueArray {
		if v.Len() == 0 {
			return -1
		}
		v = v.Index(0)
	}
	n, err := asInteger[int](v)
	if err != nil {
		return -1
	}
	return n
}

// tensorLayer is N of a "blk.N." name.
func tensorLayer(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return 0, false
	}
	digits, _, ok := strings.Cut(rest, ".")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// tensorCategory is the role of a tensor for the mix rules, from its name as
// llama.cpp's tensor_get_category reads it.
type tensorCategory int

const (
	catOther tensorCategory = iota
	catTokenEmbd
	catOutput
	catAttnV // attn_v, and attn_qkv and attn_kv_b, which hold V too
	catAttnK
	catAttnOutput
	catFFNUp
	catFFNGate
	catFFNDown
)

func categoryOf(name string) tensorCategory {
	switch {
	case name == "output.weight":
		return catOutput
	case name == "token_embd.weight" || name == "per_layer_token_embd.weight":
		return catTokenEmbd
	case strings.Contains(name, "attn_qkv.weight"),
		strings.Contains(name, "attn_kv_b.weight"),
		strings.Contains(name, "attn_v.weight"):
		return catAttnV
	case strings.Contains(name, "attn_k.weight"):
		return catAttnK
	case strings.Contains(name, "attn_output.weight"):
		return catAttnOutput
	case strings.Contains(name, "ffn_up"):
		return catFFNUp
	case strings.Contains(name, "ffn_gate"):
		return catFFNGate
	case strings.Contains(name, "ffn_down"):
		return catFFNDown
	}
	return catOther
}

// unquantizedNames are parts of tensor names llama.cpp never quantizes
// (tensor_allows_quantization): routers and lookup tables that must stay
// exact, and tensors too small to gain anything (altup and laurel are 4×4,
// the RWKV time_mix vectors and conv1d kernels a few KB).
var unquantizedNames = []string{
	"_norm.weight",
	"ffn_gate_inp.weight",
	"ffn_gate_tid2eid.weight",
	"altup",
	"laurel",
	"per_layer_model_proj",
	"ssm_conv1d",
	"shortconv.conv.weight",
	"indexer.k_proj.weight",
	"indexer.q_proj.weight",
	"time_mix_first.weight",
	"time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight",
	"time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight",
	"time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight",
	"time_mix_g1.weight", "time_mix_g2.weight",
	"time_mix_decay_w1.weight", "time_mix_decay_w2.weight",
	"time_mix_lerp_fused.weight",
	"attn_rel_b.weight",
	".position_embd", "sam.pos_embd", "sam.neck.", "sam.net_",
	".rel_pos", ".patch_embd", ".patch_merger",
	"a.rvq.codebook", "mm.a.code_embd",
}

// nDims is ggml_n_dims: the dimensions up to the last one larger than 1.
func nDims(shape []uint64) int {
	n := len(shape)
	for n > 1 && shape[n-1] == 1 {
		n--
	}
	return max(n, 1)
}

func dim(shape []uint64, i int) uint64 {
	if i < len(shape) {
		return shape[i]
	}
	return 1
}

// unquantizedReason says why llama.cpp keeps a tensor as it is; "" if it
// converts it.
func unquantizedReason(name string, shape []uint64) string {
	if nDims(shape) < 2 {
		return "1-D tensor"
	}
	if !strings.HasSuffix(name, "weight") {
		return "not a weight"
	}
	if name == "position_embd.weight" || name == "token_types.weight" {
		return "kept as llama.cpp keeps it"
	}
	for _, s := range unquantizedNames {
		if strings.Contains(name, s) {
			if s == "_norm.weight" {
				return "norm"
			}
			return "kept as llama.cpp keeps it"
		}
	}
	return ""
}

// useMoreBits is llama.cpp's choice of the layers that get a bigger type in
// the _M mixes: the first and last eighth, and every third layer between.
func useMoreBits(i, n int) bool {
	return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2
}

// mixer applies the mix rules to tensors visited in llama.cpp's order; it
// counts attn_v and ffn_down tensors as llama.cpp's quantize_state does.
type mixer struct {
	facts    modelFacts
	target   QuantTarget
	nAttnV   int
	iAttnV   int
	iFFNDown int
}

// typeFor is the type the file type's mix gives a tensor the rules cover,
// and a note when it is not the default (llama_tensor_get_type_impl).
func (m *mixer) typeFor(t TensorInfo, cat tensorCategory) (Type, string) {
	ft, def, f := m.target.FileType, m.target.Default, m.facts
	falcon := f.arch == "falcon"
	switch {
	case cat == catOutput || (cat == catTokenEmbd && f.tied):
		what := "output tensor"
		if cat == catTokenEmbd {
			what = "token embedding, tied to the output"
		}
		switch {
		case ft == fileTypeMXFP4MoE, falcon, t.Shape[0]%uint64(def.BlockSize()) != 0:
			return TypeQ8_0, what
		case def != TypeQ8_0:
			return TypeQ6_K, what
		}
		return def, ""

	case ft == fileTypeMXFP4MoE:
		expertFFN := cat == catFFNUp || cat == catFFNGate || cat == catFFNDown
		if dim(t.Shape, 2) > 1 && (f.arch != "bailingmoe3" || expertFFN) {
			return TypeMXFP4, ""
		}
		return TypeQ8_0, "not an expert tensor"

	case cat == catTokenEmbd:
		if ft == fileTypeTQ1_0 || ft == fileTypeTQ2_0 {
			return TypeQ4_K, "token embedding"
		}
		return def, ""

	case cat == catAttnV:
		i, n := m.iAttnV, m.nAttnV
		m.iAttnV++
		typ, note := def, ""
		switch {
		case ft == fileTypeQ2_K && f.nGQA >= 4:
			typ, note = TypeQ4_K, "attn_v with grouped-query attention"
		case ft == fileTypeQ2_K:
			typ, note = TypeQ3_K, "attn_v"
		case ft == fileTypeQ3_K_M && i < 2:
			typ, note = TypeQ5_K, "attn_v in the first 2 layers"
		case ft == fileTypeQ3_K_M:
			typ, note = TypeQ4_K, "attn_v"
		case ft == fileTypeQ3_K_L:
			typ, note = TypeQ5_K, "attn_v"
		case (ft == fileTypeIQ4_NL || ft == fileTypeIQ4_XS) && f.nGQA >= 4:
			typ, note = TypeQ5_K, "attn_v with grouped-query attention"
		case (ft == fileTypeQ4_K_M || ft == fileTypeQ5_K_M) && useMoreBits(i, n):
			typ, note = TypeQ6_K, "attn_v in a layer that gets more bits"
		case ft == fileTypeQ4_K_S && i < 4:
			typ, note = TypeQ5_K, "attn_v in the first 4 layers"
		}
		if f.is70B && (typ == TypeQ3_K || typ == TypeQ4_K) {
			// 70B llama shares attn_v among 8 heads, so it is 8× smaller than
			// attn_q and more bits there cost little.
			typ, note = TypeQ5_K, "attn_v of a 70B model"
		}
		if f.nExpert == 8 {
			typ, note = TypeQ8_0, "attn_v of an 8-expert model"
		}
		return typ, note

	case cat == catAttnK:
		if f.nExpert == 8 {
			return TypeQ8_0, "attn_k of an 8-expert model"
		}
		return def, ""

	case cat == catFFNDown:
		i, n := m.iFFNDown, f.nLayer
		m.iFFNDown++
		if f.nExpert > 1 {
			// Expert tensors are not one per layer in order (Mixtral), so
			// the layer comes from the name, as llama.cpp's layer_info does.
			if l, ok := tensorLayer(t.Name); ok {
				i = l
			}
		}
		more := useMoreBits(i, n)
		switch {
		case ft == fileTypeQ2_K:
			return TypeQ3_K, "ffn_down"
		case ft == fileTypeQ3_K_M && i < n/16:
			return TypeQ5_K, "ffn_down in the first 16th of the layers"
		case ft == fileTypeQ3_K_M && (!falcon || more):
			return TypeQ4_K, "ffn_down"
		case ft == fileTypeQ3_K_L && falcon:
			return TypeQ4_K, "ffn_down"
		case ft == fileTypeQ3_K_L:
			return TypeQ5_K, "ffn_down"
		case ft == fileTypeQ4_K_M && falcon && i < n/16:
			return TypeQ6_K, "ffn_down in the first 16th of the layers"
		case ft == fileTypeQ4_K_M && falcon && more:
			return TypeQ5_K, "ffn_down in a layer that gets more bits"
		case (ft == fileTypeQ4_K_M || ft == fileTypeQ5_K_M) && !falcon && more:
			return TypeQ6_K, "ffn_down in a layer that gets more bits"
		case (ft == fileTypeIQ4_NL || ft == fileTypeIQ4_XS) && i < n/8:
			return TypeQ5_K, "ffn_down in the first eighth of the layers"
		case ft == fileTypeQ4_K_S && !falcon && i < n/8:
			return TypeQ5_K, "ffn_down in the first eighth of the layers"
		}
		return def, ""

	case cat == catAttnOutput:
		switch {
		case falcon && ft == fileTypeQ3_K_L:
			return TypeQ4_K, "attn_output"
		case falcon:
		case f.nExpert == 8:
			switch ft {
			case fileTypeQ2_K, fileTypeQ3_K_S, fileTypeQ3_K_M, fileTypeIQ4_NL,
				fileTypeQ4_K_S, fileTypeQ4_K_M, fileTypeIQ4_XS:
				return TypeQ5_K, "attn_output of an 8-expert model"
			}
		case ft == fileTypeQ2_K:
			return TypeQ3_K, "attn_output"
		case ft == fileTypeQ3_K_M:
			return TypeQ4_K, "attn_output"
		case ft == fileTypeQ3_K_L:
			return TypeQ5_K, "attn_output"
		}
	}
	return def, ""
}

// fallbackType is the type used for rows of ncols values when typ's block
// does not divide them (llama.cpp's tensor_type_fallback), and whether it
// differs from typ.
func fallbackType(ncols uint64, typ Type) (Type, bool) {
	if ncols%uint64(typ.BlockSize()) == 0 {
		return typ, false
	}
	next := TypeF16
	switch typ {
	case TypeIQ4_XS:
		next = TypeIQ4_NL
	case TypeQ2_K, TypeQ3_K, TypeTQ1_0, TypeTQ2_0:
		next = TypeQ4_0
	case TypeQ4_K:
		next = TypeQ5_0
	case TypeQ5_K:
		next = TypeQ5_1
	case TypeQ6_K:
		next = TypeQ8_0
	}
	if ncols%uint64(next.BlockSize()) != 0 {
		next = TypeF16
	}
	return next, true
}

// isIntegerType reports whether t holds integers (ids, indices), which are
// never converted.
func isIntegerType(t Type) bool {
	switch t {
	case TypeI8, TypeI16, TypeI32, TypeI64:
		return true
	}
	return false
}

// checkTarget validates a target not made by ParseQuantTarget.
func checkTarget(t QuantTarget) error {
	if t.Name == "" {
		return errors.New("gguf: requantize: no target (build one with ParseQuantTarget)")
	}
	if !t.Default.Known() || !CanQuantize(t.Default) || t.Default == TypeQ8_1 || t.Default == TypeQ8_K {
		return fmt.Errorf("gguf: requantize: target %q: default type %v cannot be quantized to", t.Name, t.Default)
	}
	return nil
}

// PlanRequantize chooses the type of every tensor of in, in file order, by
// the rules in this file's comment. It reads no tensor data.
func PlanRequantize(in *File, opts RequantizeOptions) ([]TensorPlan, error) {
	if err := checkTarget(opts.Target); err != nil {
		return nil, err
	}
	if n, err := in.IntOr("split.count", 1); err == nil && n > 1 {
		return nil, in.errorf("is one of %d parts of a split model; merge it into one file first (llama-gguf-split --merge)", n)
	}
	facts := readModelFacts(in)
	m := &mixer{facts: facts, target: opts.Target}
	for _, t := range in.tensors {
		if categoryOf(t.Name) == catAttnV {
			m.nAttnV++
		}
	}

	// llama.cpp visits the tensors sorted by layer, then by name, and its
	// counters depend on that order; the output keeps the file's order.
	order := make([]int, len(in.tensors))
	for i := range order {
		order[i] = i
	}
	layerOf := func(name string) int {
		if l, ok := tensorLayer(name); ok {
			return l
		}
		return -1
	}
	slices.SortStableFunc(order, func(a, b int) int {
		na, nb := in.tensors[a].Name, in.tensors[b].Name
		if la, lb := layerOf(na), layerOf(nb); la != lb {
			return la - lb
		}
		return strings.Compare(na, nb)
	})

	plans := make([]TensorPlan, len(in.tensors))
	quantized := opts.Target.Default.BlockSize() > 1
	for _, i := range order {
		t := in.tensors[i]
		p := TensorPlan{Name: t.Name, Shape: t.Shape, From: t.Type, To: t.Type, InSize: t.Size}
		switch {
		case isIntegerType(t.Type):
			p.Note = "integer tensor"
		case slices.ContainsFunc(opts.Keep, func(re *regexp.Regexp) bool { return re.MatchString(t.Name) }):
			p.Note = "kept by --keep"
		case t.Elements() == 0:
			p.Note = "empty tensor"
		default:
			if why := unquantizedReason(t.Name, t.Shape); why != "" {
				p.Note = why
				break
			}
			typ, note := opts.Target.Default, ""
			if quantized && !opts.Target.Pure {
				typ, note = m.typeFor(t, categoryOf(t.Name))
			}
			if quantized {
				if fb, ok := fallbackType(t.Shape[0], typ); ok {
					note = fmt.Sprintf("fallback: rows of %d values are not a multiple of %v's block of %d, so %v",
						t.Shape[0], typ, typ.BlockSize(), fb)
					typ, p.Fallback = fb, true
				}
			}
			p.To, p.Note = typ, note
		}
		if p.To != p.From {
			if !CanDequantize(p.From) {
				return nil, in.errorf("tensor %q: its type %v cannot be converted (%w); leave it as it is with --keep", t.Name, p.From, ErrUnsupportedType)
			}
			if !CanQuantize(p.To) {
				return nil, in.errorf("tensor %q: type %v cannot be quantized to (%w)", t.Name, p.To, ErrUnsupportedType)
			}
		}
		size, err := tensorSize(p.To, t.Shape)
		if err != nil {
			return nil, in.errorf("tensor %q: %w", t.Name, err)
		}
		p.OutSize = size
		plans[i] = p
	}
	return plans, nil
}

// requantizeChunk is how many values are converted at a time: 4M float32s
// are 16 MiB of scratch, enough for every core to get a long run of blocks
// (QuantizeParallel gives a goroutine at least 8 blocks) while a 100 GB model
// still needs only tens of MiB besides its mapping.
const requantizeChunk = 1 << 22

// Requantize writes in converted to opts.Target to out as a GGUF file: the
// metadata in order with general.file_type and general.quantization_version
// set, the tensors in order with the types PlanRequantize chooses. Tensors
// whose type does not change are copied byte for byte; the others are
// dequantized a chunk of rows at a time, requantized across GOMAXPROCS
// goroutines and streamed out, so that memory use is a few chunks whatever
// the model's size. On an error out holds a partial file.
func Requantize(in *File, out io.Writer, opts RequantizeOptions) error {
	plans, err := PlanRequantize(in, opts)
	if err != nil {
		return err
	}
	return requantize(in, out, opts, plans)
}

func requantize(in *File, out io.Writer, opts RequantizeOptions, plans []TensorPlan) error {
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	w := NewWriter(out)
	for _, kv := range in.kvs {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			return err
		}
	}
	// Set replaces a key in place, so these keep their position if the input
	// has them, as llama.cpp's gguf_set_val_u32 does.
	if err := w.SetUint32("general.quantization_version", QuantizationVersion); err != nil {
		return err
	}
	if err := w.SetUint32("general.file_type", uint32(opts.Target.FileType)); err != nil {
		return err
	}
	var total int64
	for _, p := range plans {
		if err := w.AddTensor(p.Name, p.To, p.Shape); err != nil {
			return err
		}
		total += int64(p.InSize)
	}
	if err := w.WriteHeader(); err != nil {
		return err
	}

	var done int64
	report := func(i int, finished bool) {
		if opts.Progress != nil {
			opts.Progress(RequantizeProgress{Tensor: plans[i], Index: i, Count: len(plans),
				Done: finished, BytesDone: done, BytesTotal: total})
		}
	}
	conv := &converter{ctx: ctx, chunk: requantizeChunk}
	if opts.chunkValues > 0 {
		conv.chunk = opts.chunkValues
	}
	for i, p := range plans {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("gguf: requantize: %w", err)
		}
		t := in.tensors[i]
		src, err := in.TensorReader(t)
		if err != nil {
			return err
		}
		report(i, false)
		if p.Copied() {
			err = w.WriteTensor(p.Name, src)
		} else {
			conv.reset(src, p, func(n int64) { done += n; report(i, false) })
			err = w.WriteTensor(p.Name, conv)
			switch {
			case conv.err != nil && ctx.Err() != nil:
				err = fmt.Errorf("gguf: requantize: %w", ctx.Err())
			case conv.err != nil:
				// The input failed, not the output: say so.
				err = in.errorf("tensor %q: %w", p.Name, conv.err)
			}
		}
		if err != nil {
			return err
		}
		if p.Copied() {
			done += int64(p.InSize)
		}
		report(i, true)
	}
	return w.Close()
}

// converter is an io.Reader of one tensor's converted data: each Read that
// finds its buffer empty converts the next chunk of rows.
type converter struct {
	ctx     context.Context
	chunk   int // values converted at a time, at least one row
	src     io.Reader
	plan    TensorPlan
	onChunk func(srcBytes int64)

	ncols, rows, next int // row length, row count, next row to convert
	srcRow, dstRow    int // bytes per row in the input and output types

	srcBuf  []byte
	values  []float32
	dstBuf  []byte
	pending []byte // converted bytes not yet read
	err     error  // the first conversion error, kept for the caller
}

func (c *converter) reset(src io.Reader, p TensorPlan, onChunk func(int64)) {
	c.src, c.plan, c.onChunk, c.err, c.pending = src, p, onChunk, nil, nil
	c.ncols = int(p.Shape[0])
	c.rows = int(TensorInfo{Shape: p.Shape}.Elements()) / c.ncols
	c.next = 0
	sr, _ := p.From.RowSize(int64(c.ncols))
	dr, _ := p.To.RowSize(int64(c.ncols))
	c.srcRow, c.dstRow = int(sr), int(dr)
}

func (c *converter) Read(b []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if len(c.pending) == 0 {
		if c.next >= c.rows {
			return 0, io.EOF
		}
		if err := c.convert(); err != nil {
			c.err = err
			return 0, err
		}
	}
	n := copy(b, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

// convert dequantizes and requantizes the next chunk of rows into pending.
func (c *converter) convert() error {
	if err := c.ctx.Err(); err != nil {
		return err
	}
	n := min(c.rows-c.next, max(1, c.chunk/c.ncols))
	c.srcBuf = grow(c.srcBuf, n*c.srcRow)
	c.values = grow(c.values, n*c.ncols)
	c.dstBuf = grow(c.dstBuf, n*c.dstRow)
	if _, err := io.ReadFull(c.src, c.srcBuf); err != nil {
		return fmt.Errorf("read rows %d–%d: %w", c.next, c.next+n-1, err)
	}
	if err := DequantizeParallel(c.plan.From, c.srcBuf, c.values); err != nil {
		return err
	}
	// A NaN or infinity would poison a whole block's scale; ggml's
	// quantizers do not check, llama.cpp's ggml_validate_row_data refuses
	// the result afterwards. Refuse it here, naming the row.
	for i, v := range c.values {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("row %d, column %d holds %v", c.next+i/c.ncols, i%c.ncols, v)
		}
	}
	if err := QuantizeParallel(c.plan.To, c.values, c.dstBuf); err != nil {
		return err
	}
	c.pending = c.dstBuf
	c.next += n
	c.onChunk(int64(len(c.srcBuf)))
	return nil
}

// grow is s resliced to n elements, reallocated only when it is too short.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// RequantizeFile writes in converted to opts.Target to the file at path. It
// writes path+".tmp" and renames it to path only once the file is complete
// and synced, so a failed or interrupted run (opts.Context canceled, a full
// disk, a crash) never leaves a partial file under path; on an error the
// temporary file is removed. path must not be in's own file.
func RequantizeFile(in *File, path string, opts RequantizeOptions) error {
	plans, err := PlanRequantize(in, opts)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if in.name != "" {
		for _, p := range []string{path, tmp} {
			if same, err := samePath(in.name, p); err != nil {
				return fileErrorf(p, "%w", err)
			} else if same {
				return fileErrorf(path, "is the input file: write the output to another path")
			}
		}
	}
	fh, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	fail := func(err error) error {
		fh.Close()
		os.Remove(tmp)
		return err
	}
	var out io.Writer = fh
	if opts.wrapOutput != nil {
		out = opts.wrapOutput(fh)
	}
	if err := requantize(in, out, opts, plans); err != nil {
		return fail(err)
	}
	if err := fh.Sync(); err != nil {
		return fail(fileErrorf(tmp, "sync: %w", err))
	}
	if err := fh.Close(); err != nil {
		os.Remove(tmp)
		return fileErrorf(tmp, "close: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("gguf: %w", err)
	}
	return nil
}

// samePath reports whether a and b name the same file: the same absolute
// path, or (when b exists) the same file through another path or a link.
func samePath(a, b string) (bool, error) {
	absA, err := filepath.Abs(a)
	if err != nil {
		return false, err
	}
	absB, err := filepath.Abs(b)
	if err != nil {
		return false, err
	}
	if absA == absB {
		return true, nil
	}
	stB, err := os.Stat(b)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	stA, err := os.Stat(a)
	if err != nil {
		return false, nil // the input is open: it was there; nothing to compare
	}
	return os.SameFile(stA, stB), nil
}
