package hfimport

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/arch"
	"github.com/hearthstudio/hearth/gguf"
	"github.com/hearthstudio/hearth/safetensors"
)

// The Gemma 4 mixture's test sizes: 4 layers, sliding and global in turn;
// heads of 4 on the sliding layers (2 KV heads) and of 8 on the global
// ones (1 KV head, num_global_key_value_heads, its values its keys); 4
// experts of 6, 2 chosen, beside a dense feed-forward of 12 (so that
// 2·6 = 12 is the gate_up stack's height and no other width).
const (
	g4mLayers, g4mHidden, g4mHeads, g4mKV, g4mGlobalKV = 4, 8, 2, 2, 1
	g4mHD, g4mGlobalHD, g4mFF                          = 4, 8, 12
	g4mExperts, g4mUsed, g4mExpertFF                   = 4, 2, 6
)

// gemma4moeModel is a Gemma4ForCausalLM checkpoint of the 26B-A4B's kind
// as transformers saves one: no per-layer embeddings, no KV sharing,
// attention_k_eq_v (the global layers without v_proj, their k_proj
// num_global_key_value_heads wide), and in every layer the router
// (router.proj, router.scale, router.per_expert_scale), the three extra
// norms and the experts stacked, experts.gate_up_proj [experts, 2·ff,
// hidden] (gate rows first) and experts.down_proj [experts, hidden, ff],
// without ".weight" as transformers names the parameters.
func gemma4moeModel(extra map[string]any) *hfModel {
	types := []string{"sliding_attention", "full_attention", "sliding_attention", "full_attention"}
	cfg := map[string]any{
		"architectures": []string{"Gemma4ForCausalLM"}, "model_type": "gemma4_text",
		"vocab_size": small.vocab, "hidden_size": g4mHidden, "intermediate_size": g4mFF, "num_hidden_layers": g4mLayers,
		"num_attention_heads": g4mHeads, "num_key_value_heads": g4mKV, "num_global_key_value_heads": g4mGlobalKV,
		"head_dim": g4mHD, "global_head_dim": g4mGlobalHD,
		"max_position_embeddings": 128, "rms_norm_eps": 1e-6, "tie_word_embeddings": true,
		"bos_token_id": 1, "eos_token_id": 2, "sliding_window": 8, "layer_types": types,
		"final_logit_softcapping": 30.0, "num_kv_shared_layers": 0, "hidden_size_per_layer_input": 0,
		"attention_k_eq_v": true, "enable_moe_block": true,
		"num_experts": g4mExperts, "top_k_experts": g4mUsed, "moe_intermediate_size": g4mExpertFF,
		"rope_parameters": map[string]any{
			"sliding_attention": map[string]any{"rope_type": "default", "rope_theta": 10000.0},
			"full_attention":    map[string]any{"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1e6},
		},
	}
	for k, v := range extra {
		if v == nil {
			delete(cfg, k)
			continue
		}
		cfg[k] = v
	}
	rng := rand.New(rand.NewPCG(6, 6))
	var ts []stTensor
	add := func(name string, shape ...int64) { ts = append(ts, randomTensor(rng, name, safetensors.F16, shape...)) }
	H, E, F := int64(g4mHidden), int64(g4mExperts), int64(g4mExpertFF)
	add("model.embed_tokens.weight", int64(small.vocab), H)
	add("model.norm.weight", H)
	for i := range g4mLayers {
		p := fmt.Sprintf("model.layers.%d.", i)
		d, kv := int64(g4mHD), int64(g4mKV)
		global := types[i] == "full_attention"
		if global {
			d, kv = g4mGlobalHD, g4mGlobalKV
		}
		add(p+"input_layernorm.weight", H)
		add(p+"self_attn.q_proj.weight", g4mHeads*d, H)
		add(p+"self_attn.q_norm.weight", d)
		add(p+"self_attn.k_proj.weight", kv*d, H)
		if !global {
			add(p+"self_attn.v_proj.weight", kv*d, H)
		}
		add(p+"self_attn.k_norm.weight", d)
		add(p+"self_attn.o_proj.weight", H, g4mHeads*d)
		add(p+"post_attention_layernorm.weight", H)
		add(p+"pre_feedforward_layernorm.weight", H)
		add(p+"mlp.gate_proj.weight", g4mFF, H)
		add(p+"mlp.up_proj.weight", g4mFF, H)
		add(p+"mlp.down_proj.weight", H, g4mFF)
		add(p+"post_feedforward_layernorm.weight", H)
		add(p+"router.proj.weight", E, H)
		add(p+"router.scale", H)
		add(p+"router.per_expert_scale", E)
		add(p+"experts.gate_up_proj", E, 2*F, H)
		add(p+"experts.down_proj", E, H, F)
		add(p+"pre_feedforward_layernorm_2.weight", H)
		add(p+"post_feedforward_layernorm_1.weight", H)
		add(p+"post_feedforward_layernorm_2.weight", H)
		add(p+"layer_scalar", 1)
	}
	return &hfModel{config: cfg, tensors: ts}
}

// TestImportGemma4MoE imports a checkpoint of the 26B-A4B's kind into what
// llama.cpp's Gemma4Model converter writes: the expert keys beside the
// dense feed_forward_length, head_count_kv one count a layer; each
// layer's router F32 whatever the output type, its gain and per-expert
// scale as vectors, the three extra norms, the stacked experts copied as
// they are ([hidden, 2·ff, experts] and [ff, hidden, experts] in ggml's
// order), and no attn_v on the global layers; no per-layer-embedding
// tensor. The file reads back into the mixture and the per-layer shapes
// engine/arch runs. The global layers' sizes come the same from
// global_head_dim and num_global_key_value_heads as from later
// transformers' per_layer_config, the experts the same with or without
// ".weight", and the multimodal class imports its text model the same.
func TestImportGemma4MoE(t *testing.T) {
	m := gemma4moeModel(nil)
	for _, typ := range []OutType{TypeAuto, TypeF32, TypeBF16} {
		f := importModel(t, m.write(t), Options{Type: typ})
		checkKeys(t, f, "gemma4", map[string]any{
			"expert_count": uint32(g4mExperts), "expert_used_count": uint32(g4mUsed),
			"expert_feed_forward_length": uint32(g4mExpertFF), "feed_forward_length": uint32(g4mFF),
			"attention.key_length": uint32(g4mGlobalHD), "attention.key_length_swa": uint32(g4mHD),
			"embedding_length_per_layer_input": uint32(0), "attention.shared_kv_layers": uint32(0),
			"expert_weights_norm": nil, "expert_gating_func": nil,
		})
		kvs, err := arch.PerLayerInts(f, "gemma4.attention.head_count_kv", g4mLayers, -1)
		if err != nil || !slices.Equal(kvs, []int{2, 1, 2, 1}) {
			t.Errorf("%v: head_count_kv %v (%v), want [2 1 2 1]", typ, kvs, err)
		}
		H := uint64(g4mHidden)
		for _, c := range []struct {
			name  string
			shape []uint64 // nil: absent
		}{
			{"blk.1.ffn_gate_inp.weight", []uint64{H, g4mExperts}},
			{"blk.1.ffn_gate_inp.scale", []uint64{H}},
			{"blk.1.ffn_down_exps.scale", []uint64{g4mExperts}},
			{"blk.1.ffn_gate_up_exps.weight", []uint64{H, 2 * g4mExpertFF, g4mExperts}},
			{"blk.1.ffn_down_exps.weight", []uint64{g4mExpertFF, H, g4mExperts}},
			{"blk.1.pre_ffw_norm_2.weight", []uint64{H}},
			{"blk.1.post_ffw_norm_1.weight", []uint64{H}},
			{"blk.1.post_ffw_norm_2.weight", []uint64{H}},
			{"blk.1.ffn_gate.weight", []uint64{H, g4mFF}},
			{"blk.1.attn_k.weight", []uint64{H, g4mGlobalKV * g4mGlobalHD}},
			{"blk.1.attn_v.weight", nil},
			{"blk.0.attn_v.weight", []uint64{H, g4mKV * g4mHD}},
			{"blk.0.post_norm.weight", nil},
			{"blk.0.inp_gate.weight", nil},
			{"per_layer_token_embd.weight", nil},
		} {
			info, ok := f.Tensor(c.name)
			switch {
			case c.shape == nil && ok:
				t.Errorf("%v: %s imported", typ, c.name)
			case c.shape != nil && (!ok || !slices.Equal(info.Shape, c.shape)):
				t.Errorf("%v: %s: %v, want %v", typ, c.name, info.Shape, c.shape)
			}
		}
		if info, _ := f.Tensor("blk.3.ffn_gate_inp.weight"); info.Type != gguf.TypeF32 {
			t.Errorf("%v: the router is %v, want F32 (llama.cpp keeps routers F32)", typ, info.Type)
		}
		if info, _ := f.Tensor("blk.3.ffn_gate_up_exps.weight"); typ == TypeBF16 && info.Type != gguf.TypeBF16 {
			t.Errorf("the experts are %v, want the BF16 asked for", info.Type)
		}
	}

	f := importModel(t, m.write(t), Options{})
	for _, p := range []struct{ gg, hf string }{
		{"blk.2.ffn_gate_up_exps.weight", "model.layers.2.experts.gate_up_proj"},
		{"blk.2.ffn_down_exps.weight", "model.layers.2.experts.down_proj"},
		{"blk.2.ffn_gate_inp.weight", "model.layers.2.router.proj.weight"},
		{"blk.2.ffn_gate_inp.scale", "model.layers.2.router.scale"},
		{"blk.2.ffn_down_exps.scale", "model.layers.2.router.per_expert_scale"},
		{"blk.2.post_ffw_norm_1.weight", "model.layers.2.post_feedforward_layernorm_1.weight"},
		{"blk.3.attn_k.weight", "model.layers.3.self_attn.k_proj.weight"},
	} {
		if !slices.Equal(floats(t, f, p.gg), m.tensor(p.hf).values) {
			t.Errorf("%s is not %s as stored", p.gg, p.hf)
		}
	}
	c, err := arch.ReadConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	c.Vocab = small.vocab
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if e := c.MoE; e == nil || e.Experts != g4mExperts || e.Used != g4mUsed || e.FF != g4mExpertFF || !e.Dense || !e.RouterNorm || !e.Renorm || e.Sigmoid {
		t.Errorf("MoE %+v, want %d experts of %d, %d used, beside the dense feed-forward, on the router's own norm, renormalised", e, g4mExperts, g4mExpertFF, g4mUsed)
	}
	if !c.ValueFromKey || c.PerLayerInput != 0 {
		t.Errorf("ValueFromKey %v, PerLayerInput %d: want values from the keys' projection and no per-layer embeddings", c.ValueFromKey, c.PerLayerInput)
	}
	for i, want := range []arch.LayerShape{
		{HeadDim: 4, KVHeads: 2, FF: 12, RopeDims: 4, KVLayer: 0},
		{HeadDim: 8, KVHeads: 1, FF: 12, RopeDims: 8, KVLayer: 1, RopeFactors: true},
		{HeadDim: 4, KVHeads: 2, FF: 12, RopeDims: 4, KVLayer: 2},
		{HeadDim: 8, KVHeads: 1, FF: 12, RopeDims: 8, KVLayer: 3, RopeFactors: true},
	} {
		if got := c.Shape(i); got != want {
			t.Errorf("layer %d: %+v, want %+v", i, got, want)
		}
	}

	for _, form := range []struct {
		name string
		m    *hfModel
	}{
		{"per_layer_config", gemma4moeModel(map[string]any{"global_head_dim": nil, "num_global_key_value_heads": nil,
			"per_layer_config": map[string]any{
				"1": map[string]any{"head_dim": g4mGlobalHD, "num_key_value_heads": g4mGlobalKV},
				"3": map[string]any{"head_dim": g4mGlobalHD, "num_key_value_heads": g4mGlobalKV}}})},
		{"experts with .weight", func() *hfModel {
			w := gemma4moeModel(nil)
			for i := range w.tensors {
				if strings.Contains(w.tensors[i].name, ".experts.") {
					w.tensors[i].name += ".weight"
				}
			}
			return w
		}()},
		{"Gemma4ForConditionalGeneration", multimodal(m, "Gemma4ForConditionalGeneration", "gemma4", "model.language_model.")},
	} {
		t.Run(form.name, func(t *testing.T) {
			sameImport(t, importModel(t, form.m.write(t), Options{}), f)
		})
	}
}

// TestImportGemma4MoERefuses: a mixture Hearth's router cannot run, or
// whose sizes config.json does not give (transformers leaves them None),
// is refused naming the key; a checkpoint that disagrees with
// enable_moe_block or attention_k_eq_v naming the tensor.
func TestImportGemma4MoERefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra map[string]any
		edit  func(m *hfModel)
		want  []string
	}{
		{name: "no expert count", extra: map[string]any{"num_experts": nil}, want: []string{"config.json", "num_experts: is missing"}},
		{name: "no top-k", extra: map[string]any{"top_k_experts": nil}, want: []string{"top_k_experts: is missing"}},
		{name: "no expert width", extra: map[string]any{"moe_intermediate_size": nil}, want: []string{"moe_intermediate_size: is missing"}},
		{name: "more chosen than there are", extra: map[string]any{"top_k_experts": g4mExperts + 1}, want: []string{"top_k_experts: is 5, want 1 to num_experts (4)"}},
		{name: "too many experts", extra: map[string]any{"num_experts": 1025}, want: []string{"num_experts: is 1025, want 1 to 1024"}},
		{name: "too many chosen", extra: map[string]any{"num_experts": 128, "top_k_experts": 65}, want: []string{"top_k_experts: is 65", "64"}},
		{name: "zero expert width", extra: map[string]any{"moe_intermediate_size": 0}, want: []string{"moe_intermediate_size: is 0"}},
		{name: "global KV heads that do not divide the heads", extra: map[string]any{"num_global_key_value_heads": 3}, want: []string{"num_global_key_value_heads: is 3"}},
		{
			// transformers gives the global layers
			// num_global_key_value_heads only with attention_k_eq_v:
			// without it they have 2 KV heads and a v_proj.
			name: "keys not equal to values", extra: map[string]any{"attention_k_eq_v": false},
			want: []string{`"model.layers.1.self_attn.k_proj.weight" has shape [8 8]`, "[16 8]"},
		},
		{
			name: "experts in a dense model", extra: map[string]any{"enable_moe_block": false},
			want: []string{`"model.layers.0.experts.down_proj"`, "not part of a Gemma4ForCausalLM"},
		},
		{
			name: "values where the keys are the values",
			edit: func(m *hfModel) {
				m.tensors = append(m.tensors, randomTensor(rand.New(rand.NewPCG(1, 1)), "model.layers.3.self_attn.v_proj.weight", safetensors.F16, g4mGlobalHD, g4mHidden))
			},
			want: []string{`"model.layers.3.self_attn.v_proj.weight"`, "not part of"},
		},
		{
			name: "missing router gain",
			edit: func(m *hfModel) { m.remove("model.layers.2.router.scale") },
			want: []string{`"model.layers.2.router.scale" (blk.2.ffn_gate_inp.scale) is missing`},
		},
		{
			name: "missing experts",
			edit: func(m *hfModel) { m.remove("model.layers.1.experts.down_proj") },
			want: []string{`"model.layers.1.experts.down_proj" (blk.1.ffn_down_exps.weight) is missing`},
		},
		{
			name: "experts stacked the other way",
			edit: func(m *hfModel) {
				m.tensor("model.layers.0.experts.gate_up_proj").shape = []int64{2 * g4mExpertFF, g4mExperts, g4mHidden}
			},
			want: []string{`"model.layers.0.experts.gate_up_proj" has shape [12 4 8]`, "[4 12 8]"},
		},
		{
			name: "experts with and without .weight",
			edit: func(m *hfModel) {
				x := *m.tensor("model.layers.2.experts.down_proj")
				x.name += ".weight"
				m.tensors = append(m.tensors, x)
			},
			want: []string{`"model.layers.2.experts.down_proj.weight"`, "not part of"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := gemma4moeModel(tc.extra)
			if tc.edit != nil {
				tc.edit(m)
			}
			importRefused(t, m, tc.want...)
		})
	}
}
