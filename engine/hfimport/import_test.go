package hfimport

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/tokenizer"
	"github.com/hearthstudio/hearth/gguf"
	"github.com/hearthstudio/hearth/safetensors"
)

// numpyPermute is convert_hf_to_gguf.py's permute as numpy evaluates it,
// written out index by index: w.reshape(heads, 2, half, cols) puts source
// row (h*2+a)*half+b at [h, a, b]; swapaxes(1, 2) moves it to [h, b, a];
// the final reshape makes that row (h*half+b)*2+a. It returns src[out].
func numpyPermute(rows, heads int) []int {
	half := rows / heads / 2
	src := make([]int, rows)
	for h := range heads {
		for a := range 2 {
			for b := range half {
				src[(h*half+b)*2+a] = (h*2+a)*half + b
			}
		}
	}
	return src
}

func TestPermutedRowMatchesConverter(t *testing.T) {
	for _, c := range []struct{ rows, heads int }{{32, 2}, {16, 1}, {12, 3}, {4096, 32}, {1024, 8}} {
		want := numpyPermute(c.rows, c.heads)
		for r := range c.rows {
			if got := permutedRow(int64(r), int64(c.rows), c.heads); got != int64(want[r]) {
				t.Fatalf("rows %d heads %d: row %d comes from %d, want %d", c.rows, c.heads, r, got, want[r])
			}
		}
	}
}

func TestLlama3RopeFactors(t *testing.T) {
	// Worked by hand from llama.cpp's formula: theta 10000 and 16 dims give
	// frequencies 10^(-i/2), wavelengths 2π·10^(i/2) = 6.28, 19.87, 62.83,
	// 198.7, …; with an original context of 64 the bands are < 16 (kept),
	// 16-64 (smoothed: smooth = (64/λ - 1)/3, factor 1/((1-smooth)/8 +
	// smooth)), > 64 (the factor, 8).
	p := ropeParams{typ: "llama3", theta: 10000, factor: 8, lowFreqFactor: 1, highFreqFac: 4, origCtx: 64}
	got := llama3RopeFactors(p, 16)
	want := []float32{1, 1.29396, 7.6674, 8, 8, 8, 8, 8}
	for i := range want {
		// 1e-4 relative: the hand computation kept five or six digits.
		if math.Abs(float64(got[i]-want[i])) > 1e-4*float64(want[i]) {
			t.Errorf("factor %d = %g, want %g", i, got[i], want[i])
		}
	}
}

// archCase is one architecture's import and what the GGUF must hold.
type archCase struct {
	name  string
	class string
	d     dims
	extra map[string]any // config.json keys beyond newModel's
	arch  string
	// layerTensors are the blk.N.* suffixes of every layer, global the rest.
	layerTensors []string
	global       []string
	keys         map[string]any // ARCH-relative keys and their values; nil value: must be absent
	permute      bool
	gemma        bool
}

var baseLayer = []string{"attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight", "ffn_norm.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"}

func with(base []string, more ...string) []string { return append(slices.Clone(base), more...) }

var archCases = []archCase{
	{
		name: "llama3", class: "LlamaForCausalLM", arch: "llama",
		d: dims{vocab: 10, hidden: 8, layers: 2, ff: 12, heads: 2, kvHeads: 1, headDim: 16},
		extra: map[string]any{"rope_parameters": map[string]any{
			"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
			"high_freq_factor": 4.0, "original_max_position_embeddings": 64,
		}},
		layerTensors: baseLayer,
		global:       []string{"token_embd.weight", "output_norm.weight", "output.weight", "rope_freqs.weight"},
		keys: map[string]any{
			"context_length": uint32(128), "embedding_length": uint32(8), "block_count": uint32(2),
			"feed_forward_length": uint32(12), "attention.head_count": uint32(2), "attention.head_count_kv": uint32(1),
			"attention.key_length": uint32(16), "attention.value_length": uint32(16),
			"attention.layer_norm_rms_epsilon": float32(1e-5), "rope.freq_base": float32(10000),
			"rope.dimension_count": uint32(16), "attention.sliding_window": nil, "rope.scaling.type": nil,
		},
		permute: true,
	},
	{
		name: "llama-v4-linear", class: "LlamaForCausalLM", arch: "llama", d: small,
		extra:        map[string]any{"rope_theta": 500000.0, "rope_scaling": map[string]any{"type": "linear", "factor": 2.0}, "head_dim": nil},
		layerTensors: baseLayer,
		global:       []string{"token_embd.weight", "output_norm.weight", "output.weight"},
		// head_dim absent: hidden/heads = 4.
		keys: map[string]any{
			"rope.freq_base": float32(500000), "rope.scaling.type": "linear", "rope.scaling.factor": float32(2),
			"attention.key_length": uint32(4), "rope.dimension_count": uint32(4),
		},
		permute: true,
	},
	{
		name: "mistral", class: "MistralForCausalLM", arch: "llama", d: small,
		extra:        map[string]any{"sliding_window": 8, "rope_theta": 1e6},
		layerTensors: baseLayer,
		global:       []string{"token_embd.weight", "output_norm.weight", "output.weight"},
		keys:         map[string]any{"attention.sliding_window": uint32(8), "rope.freq_base": float32(1e6)},
		permute:      true,
	},
	{
		name: "gemma", class: "GemmaForCausalLM", arch: "gemma", d: small,
		extra:        map[string]any{"rope_theta": 10000.0, "hidden_act": "gelu_pytorch_tanh"},
		layerTensors: baseLayer,
		global:       []string{"token_embd.weight", "output_norm.weight"},
		keys:         map[string]any{"attention.key_length": uint32(6), "attention.scale": nil},
		gemma:        true,
	},
	{
		name: "gemma2", class: "Gemma2ForCausalLM", arch: "gemma2", d: dims{vocab: 10, hidden: 8, layers: 4, ff: 12, heads: 2, kvHeads: 1, headDim: 6},
		extra: map[string]any{
			"query_pre_attn_scalar": 24, "sliding_window": 8, "attn_logit_softcapping": 5.0, "final_logit_softcapping": 3.0,
			"layer_types":     []string{"sliding_attention", "full_attention", "sliding_attention", "full_attention"},
			"rope_parameters": map[string]any{"rope_type": "default", "rope_theta": 10000.0},
		},
		layerTensors: with(baseLayer, "post_attention_norm.weight", "post_ffw_norm.weight"),
		global:       []string{"token_embd.weight", "output_norm.weight"},
		keys: map[string]any{
			"attention.sliding_window": uint32(8), "attention.scale": float32(1 / math.Sqrt(24)),
			"attn_logit_softcapping": float32(5), "final_logit_softcapping": float32(3),
		},
		gemma: true,
	},
	{
		name: "gemma3-v5", class: "Gemma3ForCausalLM", arch: "gemma3", d: dims{vocab: 10, hidden: 8, layers: 6, ff: 12, heads: 2, kvHeads: 1, headDim: 6},
		extra: map[string]any{
			"model_type": "gemma3_text", "query_pre_attn_scalar": 24, "sliding_window": 8,
			"final_logit_softcapping": nil, "attn_logit_softcapping": nil,
			"layer_types": []string{"sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention", "full_attention"},
			"rope_parameters": map[string]any{
				"full_attention":    map[string]any{"rope_type": "linear", "factor": 4.0, "rope_theta": 100000.0},
				"sliding_attention": map[string]any{"rope_type": "default", "rope_theta": 10000.0},
			},
		},
		layerTensors: with(baseLayer, "post_attention_norm.weight", "post_ffw_norm.weight", "attn_q_norm.weight", "attn_k_norm.weight"),
		global:       []string{"token_embd.weight", "output_norm.weight"},
		keys: map[string]any{
			"rope.freq_base": float32(100000), "rope.freq_base_swa": float32(10000),
			"rope.scaling.type": "linear", "rope.scaling.factor": float32(4),
			"attention.sliding_window": uint32(8), "attention.scale": float32(1 / math.Sqrt(24)),
			"attention.sliding_window_pattern": nil, "final_logit_softcapping": nil, "attn_logit_softcapping": nil,
		},
		gemma: true,
	},
	{
		name: "gemma3-v4-pattern3", class: "Gemma3ForCausalLM", arch: "gemma3", d: dims{vocab: 10, hidden: 8, layers: 6, ff: 12, heads: 2, kvHeads: 1, headDim: 6},
		extra: map[string]any{
			"rope_theta": 1e6, "rope_local_base_freq": 20000.0, "rope_scaling": map[string]any{"rope_type": "linear", "factor": 8.0},
			"sliding_window": 16, "sliding_window_pattern": 3, "query_pre_attn_scalar": 6,
		},
		layerTensors: with(baseLayer, "post_attention_norm.weight", "post_ffw_norm.weight", "attn_q_norm.weight", "attn_k_norm.weight"),
		global:       []string{"token_embd.weight", "output_norm.weight"},
		keys: map[string]any{
			"rope.freq_base": float32(1e6), "rope.freq_base_swa": float32(20000), "rope.scaling.factor": float32(8),
			"attention.sliding_window_pattern": uint32(3), "attention.scale": float32(1 / math.Sqrt(6)),
		},
		gemma: true,
	},
	{
		name: "qwen2", class: "Qwen2ForCausalLM", arch: "qwen2", d: small,
		extra:        map[string]any{"rope_theta": 1e6, "use_sliding_window": false, "sliding_window": 32768},
		layerTensors: with(baseLayer, "attn_q.bias", "attn_k.bias", "attn_v.bias"),
		global:       []string{"token_embd.weight", "output_norm.weight"},
		keys:         map[string]any{"attention.sliding_window": nil, "rope.freq_base": float32(1e6)},
	},
	{
		name: "qwen3", class: "Qwen3ForCausalLM", arch: "qwen3", d: small,
		extra:        map[string]any{"rope_parameters": map[string]any{"rope_type": "default", "rope_theta": 1e6}},
		layerTensors: with(baseLayer, "attn_q_norm.weight", "attn_k_norm.weight"),
		global:       []string{"token_embd.weight", "output_norm.weight", "output.weight"},
		keys:         map[string]any{"rope.freq_base": float32(1e6), "attention.key_length": uint32(6)},
	},
	{
		name: "phi3", class: "Phi3ForCausalLM", arch: "phi3", d: small,
		extra:        map[string]any{"sliding_window": 8, "original_max_position_embeddings": 64, "rope_theta": 10000.0, "head_dim": nil},
		layerTensors: []string{"attn_norm.weight", "attn_qkv.weight", "attn_output.weight", "ffn_norm.weight", "ffn_up.weight", "ffn_down.weight"},
		global:       []string{"token_embd.weight", "output_norm.weight", "output.weight"},
		keys: map[string]any{
			"attention.sliding_window": uint32(8), "rope.scaling.original_context_length": uint32(64),
			"attention.key_length": uint32(4), "rope.dimension_count": uint32(4),
		},
	},
}

func TestImportArchitectures(t *testing.T) {
	for _, c := range archCases {
		t.Run(c.name, func(t *testing.T) {
			d := c.d
			if c.extra["head_dim"] == nil && slices.Contains(maps(c.extra), "head_dim") {
				d.headDim = d.hidden / d.heads
			}
			m := newModel(c.class, d, safetensors.F16, c.extra)
			f := importModel(t, m.write(t), Options{})

			if got := f.Architecture(); got != c.arch {
				t.Fatalf("general.architecture = %q, want %q", got, c.arch)
			}
			if ft, _ := f.FileType(); ft != 1 {
				t.Errorf("general.file_type = %v, want MOSTLY_F16", ft)
			}
			if name, _ := f.String("general.name"); name != "tiny-model" {
				t.Errorf("general.name = %q, want the folder's name", name)
			}
			want := slices.Clone(c.global)
			for i := range d.layers {
				for _, s := range c.layerTensors {
					want = append(want, fmt.Sprintf("blk.%d.%s", i, s))
				}
			}
			slices.Sort(want)
			if got := tensorNames(f); !slices.Equal(got, want) {
				t.Fatalf("tensors:\n got %v\nwant %v", got, want)
			}
			for _, info := range f.Tensors() {
				wantType := gguf.TypeF16
				if len(info.Shape) == 1 {
					wantType = gguf.TypeF32
				}
				if info.Type != wantType {
					t.Errorf("%s is %v, want %v", info.Name, info.Type, wantType)
				}
			}
			checkKeys(t, f, c.arch, c.keys)
			checkData(t, f, m, d, c)
		})
	}
}

func maps(m map[string]any) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

func checkKeys(t *testing.T, f *gguf.File, arch string, keys map[string]any) {
	t.Helper()
	for k, want := range keys {
		key := arch + "." + k
		v, ok := f.Value(key)
		if want == nil {
			if ok {
				t.Errorf("%s = %v, want it absent", key, v.Any())
			}
			continue
		}
		if !ok {
			t.Errorf("%s is missing, want %v", key, want)
			continue
		}
		if got := v.Any(); got != want {
			t.Errorf("%s = %v (%T), want %v (%T)", key, got, got, want, want)
		}
	}
}

// checkData compares every imported tensor with its source: the same values,
// permuted for llama's q and k, plus 1 for Gemma's norms.
func checkData(t *testing.T, f *gguf.File, m *hfModel, d dims, c archCase) {
	t.Helper()
	pairs := map[string]string{
		"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
	}
	if slices.Contains(c.global, "output.weight") {
		pairs["output.weight"] = "lm_head.weight"
	}
	for i := range d.layers {
		for gg, hf := range map[string]string{
			"attn_norm.weight": "input_layernorm.weight", "attn_output.weight": "self_attn.o_proj.weight",
			"ffn_down.weight": "mlp.down_proj.weight", "attn_v.weight": "self_attn.v_proj.weight",
			"attn_q.weight": "self_attn.q_proj.weight", "attn_k.weight": "self_attn.k_proj.weight",
			"attn_q.bias": "self_attn.q_proj.bias", "attn_qkv.weight": "self_attn.qkv_proj.weight",
			"attn_q_norm.weight": "self_attn.q_norm.weight", "post_ffw_norm.weight": "post_feedforward_layernorm.weight",
			"ffn_up.weight": "mlp.up_proj.weight",
		} {
			if !slices.Contains(c.layerTensors, gg) {
				continue
			}
			if gg == "ffn_up.weight" && c.class == "Phi3ForCausalLM" {
				hf = "mlp.gate_up_proj.weight"
			}
			pairs[fmt.Sprintf("blk.%d.%s", i, gg)] = fmt.Sprintf("model.layers.%d.%s", i, hf)
		}
	}
	for gg, hf := range pairs {
		src := m.tensor(hf)
		want := src.values
		rows := int(src.shape[0])
		cols := len(want) / rows
		if c.permute && (strings.HasSuffix(gg, "attn_q.weight") || strings.HasSuffix(gg, "attn_k.weight")) {
			heads := d.heads
			if strings.HasSuffix(gg, "attn_k.weight") {
				heads = d.kvHeads
			}
			perm := numpyPermute(rows, heads)
			p := make([]float32, len(want))
			for r := range rows {
				copy(p[r*cols:(r+1)*cols], want[perm[r]*cols:(perm[r]+1)*cols])
			}
			want = p
		}
		if c.gemma && strings.HasSuffix(hf, "norm.weight") {
			want = slices.Clone(want)
			for i := range want {
				want[i]++
			}
		}
		got := floats(t, f, gg)
		if len(got) != len(want) {
			t.Errorf("%s (from %s) has %d values, want %d", gg, hf, len(got), len(want))
			continue
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%s (from %s) [%d] = %g, want %g", gg, hf, i, got[i], want[i])
				break
			}
		}
	}
	if slices.Contains(c.global, "rope_freqs.weight") {
		got := floats(t, f, "rope_freqs.weight")
		if len(got) != d.headDim/2 || got[0] != 1 || got[len(got)-1] != 8 {
			t.Errorf("rope_freqs.weight = %v, want %d factors from 1 to 8", got, d.headDim/2)
		}
	}
}

// A permutation that is its own identity for one head would hide a wrong
// head count: the llama case must really move rows.
func TestLlamaPermutationMovesRows(t *testing.T) {
	perm := numpyPermute(32, 2)
	moved := 0
	for r, s := range perm {
		if r != s {
			moved++
		}
	}
	if moved < 16 {
		t.Fatalf("the permutation moves only %d of 32 rows", moved)
	}
}

func TestImportOutputTypes(t *testing.T) {
	for _, c := range []struct {
		src      safetensors.DType
		opt      OutType
		want     gguf.Type
		fileType gguf.FileType
	}{
		{safetensors.BF16, TypeAuto, gguf.TypeBF16, 32},
		{safetensors.F32, TypeAuto, gguf.TypeF32, 0},
		{safetensors.F16, TypeAuto, gguf.TypeF16, 1},
		{safetensors.BF16, TypeF16, gguf.TypeF16, 1},
		{safetensors.F16, TypeF32, gguf.TypeF32, 0},
		{safetensors.F32, TypeBF16, gguf.TypeBF16, 32},
	} {
		t.Run(fmt.Sprintf("%s-to-%v", c.src, c.opt), func(t *testing.T) {
			m := newModel("GemmaForCausalLM", small, c.src, nil)
			f := importModel(t, m.write(t), Options{Type: c.opt})
			if ft, _ := f.FileType(); ft != c.fileType {
				t.Errorf("general.file_type = %v, want %v", ft, c.fileType)
			}
			for _, info := range f.Tensors() {
				want := c.want
				if len(info.Shape) == 1 {
					want = gguf.TypeF32
				}
				if info.Type != want {
					t.Errorf("%s is %v, want %v", info.Name, info.Type, want)
				}
			}
			// The test values are exact in every type, so only a wrong
			// conversion changes them.
			if got, want := floats(t, f, "blk.1.ffn_up.weight"), m.tensor("model.layers.1.mlp.up_proj.weight").values; !slices.Equal(got, want) {
				t.Errorf("blk.1.ffn_up.weight differs after %s → %v", c.src, c.want)
			}
			norm := m.tensor("model.layers.0.input_layernorm.weight").values
			got := floats(t, f, "blk.0.attn_norm.weight")
			for i := range norm {
				if got[i] != norm[i]+1 {
					t.Fatalf("blk.0.attn_norm.weight[%d] = %g, want %g+1", i, got[i], norm[i])
				}
			}
		})
	}
}

func TestParseOutType(t *testing.T) {
	for s, want := range map[string]OutType{"auto": TypeAuto, "F16": TypeF16, "bf16": TypeBF16, "f32": TypeF32} {
		if got, err := ParseOutType(s); err != nil || got != want {
			t.Errorf("ParseOutType(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	if _, err := ParseOutType("q8_0"); err == nil {
		t.Error("ParseOutType(q8_0) succeeded")
	}
}

func TestImportTiedAndUntied(t *testing.T) {
	// An untied class whose checkpoint has no lm_head is tied in effect:
	// llama.cpp reads the output from token_embd, so no output.weight.
	m := newModel("LlamaForCausalLM", small, safetensors.F16, nil)
	m.remove("lm_head.weight")
	f := importModel(t, m.write(t), Options{})
	if _, ok := f.Tensor("output.weight"); ok {
		t.Error("output.weight written for a checkpoint without lm_head")
	}
	// A tied config with an lm_head in the file (some exports keep it)
	// still writes none.
	m = newModel("Qwen2ForCausalLM", small, safetensors.F16, nil)
	m.tensors = append(m.tensors, stTensor{name: "lm_head.weight", dtype: safetensors.F16, shape: []int64{10, 8}, values: make([]float32, 80)})
	f = importModel(t, m.write(t), Options{})
	if _, ok := f.Tensor("output.weight"); ok {
		t.Error("output.weight written for tie_word_embeddings")
	}
	// rotary_emb.inv_freq of old checkpoints is skipped.
	m = newModel("LlamaForCausalLM", small, safetensors.F16, nil)
	m.tensors = append(m.tensors, stTensor{name: "model.layers.0.self_attn.rotary_emb.inv_freq", dtype: safetensors.F32, shape: []int64{2}, values: []float32{1, 0.01}})
	importModel(t, m.write(t), Options{})
}

func TestImportGemma3Multimodal(t *testing.T) {
	d := dims{vocab: 10, hidden: 8, layers: 6, ff: 12, heads: 2, kvHeads: 1, headDim: 6}
	text := newModel("Gemma3ForCausalLM", d, safetensors.BF16, map[string]any{"sliding_window": 8, "query_pre_attn_scalar": 24})
	want := importModel(t, text.write(t), Options{Name: "g"})

	for _, prefix := range []string{"language_model.model.", "model.language_model."} {
		t.Run(prefix, func(t *testing.T) {
			vision := strings.TrimSuffix(prefix, "language_model.") + "vision_tower.vision_model.embeddings.patch_embedding.weight"
			if prefix == "language_model.model." {
				vision = "vision_tower.vision_model.embeddings.patch_embedding.weight"
			}
			mm := multimodal(text, "Gemma3ForConditionalGeneration", "gemma3", prefix,
				stTensor{name: vision, dtype: safetensors.BF16, shape: []int64{2, 3}, values: make([]float32, 6)},
				stTensor{name: "multi_modal_projector.mm_input_projection_weight", dtype: safetensors.BF16, shape: []int64{2}, values: make([]float32, 2)})
			sameImport(t, importModel(t, mm.write(t), Options{Name: "g"}), want)
		})
	}
}

func TestImportSharded(t *testing.T) {
	m := newModel("Qwen3ForCausalLM", small, safetensors.BF16, nil)
	dir := m.write(t)
	half := len(m.tensors) / 2
	writeSafetensors(t, dir+"/model-00001-of-00002.safetensors", m.tensors[:half])
	writeSafetensors(t, dir+"/model-00002-of-00002.safetensors", m.tensors[half:])
	weightMap := map[string]string{}
	for i, x := range m.tensors {
		weightMap[x.name] = fmt.Sprintf("model-0000%d-of-00002.safetensors", 1+min(1, i/half))
	}
	writeJSON(t, dir+"/model.safetensors.index.json", map[string]any{"metadata": map[string]any{"total_size": 0}, "weight_map": weightMap})
	// The single file is still there with other values: the index wins.
	for i := range m.tensors {
		for j := range m.tensors[i].values {
			m.tensors[i].values[j] = 0
		}
	}
	writeSafetensors(t, dir+"/model.safetensors", m.tensors)
	f := importModel(t, dir, Options{})
	if v := floats(t, f, "blk.1.ffn_down.weight"); slices.Max(v) == 0 {
		t.Error("blk.1.ffn_down.weight came from model.safetensors, not the shards")
	}

	// An index that sends a tensor to the wrong shard is an error naming it.
	weightMap["model.norm.weight"] = "model-00001-of-00002.safetensors"
	writeJSON(t, dir+"/model.safetensors.index.json", map[string]any{"weight_map": weightMap})
	err := Import(dir, t.TempDir()+"/x.gguf", Options{})
	if err == nil || !strings.Contains(err.Error(), `"model.norm.weight" is not in model-00001-of-00002.safetensors`) {
		t.Errorf("wrong shard: err = %v", err)
	}
}

// The imported tokenizer is one engine/tokenizer loads and runs: the tiny
// BPE's merges apply ("ab" is one token, " a" another) and BOS is added as
// tokenizer_config.json asks.
func TestImportedTokenizerLoads(t *testing.T) {
	f := importModel(t, newModel("LlamaForCausalLM", small, safetensors.F16, nil).write(t), Options{})
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	got := tok.Encode("ab a", tokenizer.EncodeOptions{AddSpecial: true})
	if want := []int32{1, 6, 7}; !slices.Equal(got, want) {
		t.Errorf("Encode(%q) = %v, want %v", "ab a", got, want)
	}
	if tmpl, _ := f.String(tokenizer.KeyChatTemplate); tmpl != "{{ messages }}" {
		t.Errorf("chat template %q", tmpl)
	}
}

// Gemma 2 with a cap turned off (null) says so with 0 rather than leaving
// the key out, whose reader default is llama.cpp's 50 or 30; an absent key
// takes the transformers default.
func TestGemma2SoftcapNullAndAbsent(t *testing.T) {
	m := newModel("Gemma2ForCausalLM", small, safetensors.F16, map[string]any{"sliding_window": 8})
	m.config["final_logit_softcapping"] = nil // JSON null
	f := importModel(t, m.write(t), Options{})
	checkKeys(t, f, "gemma2", map[string]any{
		"final_logit_softcapping": float32(0), "attn_logit_softcapping": float32(50),
		"attention.scale": float32(1 / math.Sqrt(256)),
	})
}

// Conversions run a chunk of rows at a time; with chunks of one or a few
// rows (and a permutation across them) the output must not change.
func TestImportChunking(t *testing.T) {
	d := dims{vocab: 10, hidden: 8, layers: 1, ff: 12, heads: 2, kvHeads: 1, headDim: 16}
	m := newModel("LlamaForCausalLM", d, safetensors.BF16, nil)
	dir := m.write(t)
	var want []byte
	for _, chunk := range []int64{0, 1, 20, 33} {
		mod, err := Open(dir, Options{Type: TypeF32})
		if err != nil {
			t.Fatal(err)
		}
		mod.chunk = chunk
		var buf bytes.Buffer
		if _, err := mod.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		mod.Close()
		if want == nil {
			want = buf.Bytes()
		} else if !bytes.Equal(buf.Bytes(), want) {
			t.Errorf("chunk of %d bytes changes the output", chunk)
		}
	}
}
