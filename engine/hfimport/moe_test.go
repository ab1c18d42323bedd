package hfimport

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/arch"
	"github.com/hearthstudio/hearth/gguf"
	"github.com/hearthstudio/hearth/safetensors"
)

// The test mixture: 4 experts, 2 chosen, each 6 wide (small's dense FF is
// 12, so that the two widths cannot be mixed up).
const moeExperts, moeUsed, moeFF = 4, 2, 6

// qwen3moeModel is a Qwen3MoeForCausalLM checkpoint with small's attention:
// every layer a mixture of moeExperts experts, the router
// mlp.gate.weight, and the experts one matrix an expert, as the Hub's
// checkpoints hold them and transformers 5's save_pretrained writes them
// by default.
func qwen3moeModel(extra map[string]any) *hfModel {
	m := newModel("Qwen3ForCausalLM", small, safetensors.F16, nil)
	m.config["architectures"] = []string{"Qwen3MoeForCausalLM"}
	m.config["model_type"] = "qwen3_moe"
	for k, v := range map[string]any{
		"num_experts": moeExperts, "num_experts_per_tok": moeUsed, "moe_intermediate_size": moeFF,
		"norm_topk_prob": true, "decoder_sparse_step": 1, "mlp_only_layers": []int{},
		"use_sliding_window": false, "rope_theta": 1e6,
	} {
		m.config[k] = v
	}
	for k, v := range extra {
		if v == nil {
			delete(m.config, k)
			continue
		}
		m.config[k] = v
	}
	rng := rand.New(rand.NewPCG(5, 5))
	H := int64(small.hidden)
	for i := range small.layers {
		p := fmt.Sprintf("model.layers.%d.mlp.", i)
		for _, proj := range []string{"gate_proj", "up_proj", "down_proj"} {
			m.remove(p + proj + ".weight")
		}
		m.tensors = append(m.tensors, randomTensor(rng, p+"gate.weight", safetensors.F16, moeExperts, H))
		for k := range moeExperts {
			e := fmt.Sprintf("%sexperts.%d.", p, k)
			m.tensors = append(m.tensors,
				randomTensor(rng, e+"gate_proj.weight", safetensors.F16, moeFF, H),
				randomTensor(rng, e+"up_proj.weight", safetensors.F16, moeFF, H),
				randomTensor(rng, e+"down_proj.weight", safetensors.F16, H, moeFF))
		}
	}
	return m
}

// fused is m with its experts as transformers 5 holds them (and saves them
// with save_original_format=False): each layer's gate and up in one
// mlp.experts.gate_up_proj [experts, 2·ff, hidden], an expert's gate rows
// before its up rows, and its downs in one mlp.experts.down_proj
// [experts, hidden, ff]; suffix is appended to both names.
func (m *hfModel) fused(suffix string) *hfModel {
	out := &hfModel{config: m.config, tokenCfg: m.tokenCfg, genCfg: m.genCfg}
	for _, x := range m.tensors {
		if !strings.Contains(x.name, ".mlp.experts.") {
			out.tensors = append(out.tensors, x)
		}
	}
	H := int64(small.hidden)
	for i := range small.layers {
		p := fmt.Sprintf("model.layers.%d.mlp.experts.", i)
		var gateUp, down []float32
		for k := range moeExperts {
			e := fmt.Sprintf("%s%d.", p, k)
			gateUp = append(gateUp, m.tensor(e+"gate_proj.weight").values...)
			gateUp = append(gateUp, m.tensor(e+"up_proj.weight").values...)
			down = append(down, m.tensor(e+"down_proj.weight").values...)
		}
		out.tensors = append(out.tensors,
			stTensor{name: p + "gate_up_proj" + suffix, dtype: safetensors.F16, shape: []int64{moeExperts, 2 * moeFF, H}, values: gateUp},
			stTensor{name: p + "down_proj" + suffix, dtype: safetensors.F16, shape: []int64{moeExperts, H, moeFF}, values: down})
	}
	return out
}

// TestImportQwen3MoE imports a Qwen 3 MoE checkpoint into what llama.cpp's
// converter writes: the expert keys beside feed_forward_length (the dense
// intermediate_size), the router in F32 whatever the output type, each
// layer's experts stacked into ffn_{gate,up,down}_exps of ggml shape
// [cols, rows, experts], expert after expert, and no dense feed-forward.
// The file reads back into the mixture engine/arch runs.
func TestImportQwen3MoE(t *testing.T) {
	m := qwen3moeModel(nil)
	for _, typ := range []OutType{TypeAuto, TypeF32, TypeBF16} {
		f := importModel(t, m.write(t), Options{Type: typ})
		checkKeys(t, f, "qwen3moe", map[string]any{
			"expert_count": uint32(moeExperts), "expert_used_count": uint32(moeUsed),
			"expert_feed_forward_length": uint32(moeFF), "feed_forward_length": uint32(small.ff),
			"expert_weights_norm": nil, "expert_gating_func": nil,
		})
		H := uint64(small.hidden)
		for _, c := range []struct {
			name  string
			shape []uint64
		}{
			{"blk.1.ffn_gate_inp.weight", []uint64{H, moeExperts}},
			{"blk.1.ffn_gate_exps.weight", []uint64{H, moeFF, moeExperts}},
			{"blk.1.ffn_up_exps.weight", []uint64{H, moeFF, moeExperts}},
			{"blk.1.ffn_down_exps.weight", []uint64{moeFF, H, moeExperts}},
		} {
			info, ok := f.Tensor(c.name)
			if !ok || !slices.Equal(info.Shape, c.shape) {
				t.Errorf("%v: %s: %v, want %v", typ, c.name, info.Shape, c.shape)
			}
		}
		if info, _ := f.Tensor("blk.0.ffn_gate_inp.weight"); info.Type != gguf.TypeF32 {
			t.Errorf("%v: the router is %v, want F32 (llama.cpp keeps routers F32)", typ, info.Type)
		}
		if info, _ := f.Tensor("blk.0.ffn_up_exps.weight"); typ == TypeBF16 && info.Type != gguf.TypeBF16 {
			t.Errorf("the experts are %v, want the BF16 asked for", info.Type)
		}
		for _, n := range []string{"blk.0.ffn_gate.weight", "blk.0.ffn_up.weight", "blk.0.ffn_down.weight"} {
			if _, ok := f.Tensor(n); ok {
				t.Errorf("%v: %s exists in a mixture-of-experts model", typ, n)
			}
		}
	}

	// transformers 5's save_pretrained names the count num_local_experts.
	local := importModel(t, qwen3moeModel(map[string]any{"num_experts": nil, "num_local_experts": moeExperts}).write(t), Options{})
	checkKeys(t, local, "qwen3moe", map[string]any{"expert_count": uint32(moeExperts)})

	f := importModel(t, m.write(t), Options{})
	for _, proj := range []struct{ gg, hf string }{{"ffn_gate_exps", "gate_proj"}, {"ffn_up_exps", "up_proj"}, {"ffn_down_exps", "down_proj"}} {
		var want []float32
		for k := range moeExperts {
			want = append(want, m.tensor(fmt.Sprintf("model.layers.1.mlp.experts.%d.%s.weight", k, proj.hf)).values...)
		}
		if !slices.Equal(floats(t, f, "blk.1."+proj.gg+".weight"), want) {
			t.Errorf("blk.1.%s.weight is not the experts' %s one after another", proj.gg, proj.hf)
		}
	}
	if !slices.Equal(floats(t, f, "blk.0.ffn_gate_inp.weight"), m.tensor("model.layers.0.mlp.gate.weight").values) {
		t.Error("blk.0.ffn_gate_inp.weight is not the router's weights")
	}

	c, err := arch.ReadConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	c.Vocab = small.vocab
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if e := c.MoE; e == nil || e.Experts != moeExperts || e.Used != moeUsed || e.FF != moeFF || !e.Renorm || e.Sigmoid || e.Scale != 0 {
		t.Errorf("MoE %+v, want %d experts, %d used, %d wide, renormalised softmax", e, moeExperts, moeUsed, moeFF)
	}
}

// TestImportQwen3MoEFused: transformers 5's fused experts (gate_up_proj
// and down_proj, with or without ".weight", as llama.cpp's converter
// accepts them) import to the very file the per-expert checkpoint does,
// at every output type and chunk size (the fused gate and up are row
// slices of one source tensor).
func TestImportQwen3MoEFused(t *testing.T) {
	m := qwen3moeModel(nil)
	for _, typ := range []OutType{TypeAuto, TypeF32} {
		want := importModel(t, m.write(t), Options{Name: "moe", Type: typ})
		for _, suffix := range []string{"", ".weight"} {
			got := importModel(t, m.fused(suffix).write(t), Options{Name: "moe", Type: typ})
			sameImport(t, got, want)
		}
	}

	dir := m.fused("").write(t)
	var first []byte
	for _, chunk := range []int64{0, 1, 20, 33} {
		mod, err := Open(dir, Options{Type: TypeF32})
		if err != nil {
			t.Fatal(err)
		}
		if chunk == 0 {
			for _, ti := range mod.Tensors {
				if ti.Name == "blk.0.ffn_up_exps.weight" && ti.Source != "model.layers.0.mlp.experts.gate_up_proj" {
					t.Errorf("blk.0.ffn_up_exps.weight comes from %q", ti.Source)
				}
			}
		}
		mod.chunk = chunk
		var buf bytes.Buffer
		if _, err := mod.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		mod.Close()
		if first == nil {
			first = buf.Bytes()
		} else if !bytes.Equal(buf.Bytes(), first) {
			t.Errorf("chunk of %d bytes changes the output", chunk)
		}
	}
}

// TestImportQwen3MoERefuses: configurations llama.cpp's qwen3moe graph
// would run otherwise than transformers, or Hearth's router cannot, are
// refused naming the key; a missing expert or a fused tensor of the wrong
// shape naming the tensor.
func TestImportQwen3MoERefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra map[string]any
		edit  func(m *hfModel) *hfModel
		want  []string
	}{
		{name: "unnormalised top-k", extra: map[string]any{"norm_topk_prob": false}, want: []string{"config.json", "norm_topk_prob: is false", "always divides"}},
		{name: "top-k norm left to the default", extra: map[string]any{"norm_topk_prob": nil}, want: []string{"norm_topk_prob: is absent (transformers' default, false)"}},
		{name: "dense layers between", extra: map[string]any{"decoder_sparse_step": 2}, want: []string{"decoder_sparse_step: is 2", "dense layers"}},
		{name: "dense layers listed", extra: map[string]any{"mlp_only_layers": []int{1}}, want: []string{"mlp_only_layers: is [1]"}},
		{name: "shared expert", extra: map[string]any{"shared_expert_intermediate_size": 16}, want: []string{"shared_expert_intermediate_size: is 16", "shared expert"}},
		{name: "more chosen than there are", extra: map[string]any{"num_experts_per_tok": moeExperts + 1}, want: []string{"num_experts_per_tok: is 5, want 1 to num_experts (4)"}},
		{name: "no expert chosen", extra: map[string]any{"num_experts_per_tok": 0}, want: []string{"num_experts_per_tok: is 0"}},
		{name: "too many experts", extra: map[string]any{"num_experts": 1025, "num_experts_per_tok": 8}, want: []string{"num_experts: is 1025, want 1 to 1024"}},
		{name: "too many chosen", extra: map[string]any{"num_experts": 128, "num_experts_per_tok": 65}, want: []string{"num_experts_per_tok: is 65", "64"}},
		{name: "two expert counts", extra: map[string]any{"num_local_experts": moeExperts * 2}, want: []string{"num_local_experts: is 8 but num_experts is 4"}},
		{name: "no expert width", extra: map[string]any{"moe_intermediate_size": 0}, want: []string{"moe_intermediate_size: is 0"}},
		{name: "sliding window", extra: map[string]any{"use_sliding_window": true}, want: []string{"use_sliding_window"}},
		{
			name: "missing expert",
			edit: func(m *hfModel) *hfModel { m.remove("model.layers.1.mlp.experts.3.down_proj.weight"); return m },
			want: []string{`"model.layers.1.mlp.experts.3.down_proj.weight" (blk.1.ffn_down_exps.weight[3]) is missing`},
		},
		{
			name: "missing router",
			edit: func(m *hfModel) *hfModel { m.remove("model.layers.0.mlp.gate.weight"); return m },
			want: []string{`"model.layers.0.mlp.gate.weight" (blk.0.ffn_gate_inp.weight) is missing`},
		},
		{
			name: "a dense feed-forward beside the experts",
			edit: func(m *hfModel) *hfModel {
				m.tensors = append(m.tensors, randomTensor(rand.New(rand.NewPCG(1, 1)), "model.layers.0.mlp.gate_proj.weight", safetensors.F16, int64(small.ff), int64(small.hidden)))
				return m
			},
			want: []string{`"model.layers.0.mlp.gate_proj.weight"`, "not part of a Qwen3MoeForCausalLM"},
		},
		{
			name: "fused experts of another width",
			edit: func(m *hfModel) *hfModel {
				f := m.fused("")
				x := f.tensor("model.layers.0.mlp.experts.gate_up_proj")
				x.shape = []int64{moeExperts, moeFF, 2 * int64(small.hidden)}
				return f
			},
			want: []string{`"model.layers.0.mlp.experts.gate_up_proj" has shape [4 6 16]`, "[4 12 8]"},
		},
		{
			name: "fused and per-expert both",
			edit: func(m *hfModel) *hfModel {
				f := m.fused("")
				f.tensors = append(f.tensors, *m.tensor("model.layers.1.mlp.experts.0.up_proj.weight"))
				return f
			},
			want: []string{`"model.layers.1.mlp.experts.0.up_proj.weight"`, "not part of"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := qwen3moeModel(tc.extra)
			if tc.edit != nil {
				m = tc.edit(m)
			}
			importRefused(t, m, tc.want...)
		})
	}
}
