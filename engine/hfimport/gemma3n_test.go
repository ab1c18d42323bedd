package hfimport

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hearthstudio/hearth/engine/arch"
	"github.com/hearthstudio/hearth/safetensors"
)

// gemma3nModel is a Gemma3nForCausalLM checkpoint as transformers saves
// one: 6 layers (global 3 and 6), the last 2 sharing the caches of layers 4
// and 3 (their k and v still saved, unused), 3 AltUp streams, LAuReL of
// rank 2, the first 2 layers sparse, and a per-layer table 2 rows short of
// the vocabulary (as the real one leaves out the vision and audio tokens).
func gemma3nModel(extra map[string]any) *hfModel {
	const vocab, pleVocab, hidden, layers, heads, kvHeads, hd, ff, ple, streams, rank = 12, 10, 8, 6, 2, 1, 4, 12, 4, 3, 2
	types := []string{"sliding_attention", "sliding_attention", "full_attention", "sliding_attention", "sliding_attention", "full_attention"}
	cfg := map[string]any{
		"architectures": []string{"Gemma3nForCausalLM"}, "model_type": "gemma3n_text",
		"vocab_size": vocab, "hidden_size": hidden, "intermediate_size": []int{ff, ff, ff, ff, ff, ff}, "num_hidden_layers": layers,
		"num_attention_heads": heads, "num_key_value_heads": kvHeads, "head_dim": hd,
		"max_position_embeddings": 128, "rms_norm_eps": 1e-6, "tie_word_embeddings": true,
		"bos_token_id": 1, "eos_token_id": 2, "sliding_window": 8, "layer_types": types,
		"final_logit_softcapping": 30.0, "num_kv_shared_layers": 2,
		"hidden_size_per_layer_input": ple, "vocab_size_per_layer_input": pleVocab,
		"altup_num_inputs": streams, "altup_active_idx": 0, "altup_correct_scale": true, "laurel_rank": rank,
		"activation_sparsity_pattern": []float64{0.95, 0.95, 0, 0, 0, 0},
		"rope_parameters": map[string]any{
			"sliding_attention": map[string]any{"rope_type": "default", "rope_theta": 10000.0},
			"full_attention":    map[string]any{"rope_type": "default", "rope_theta": 1e6},
		},
	}
	for k, v := range extra {
		if v == nil {
			delete(cfg, k)
			continue
		}
		cfg[k] = v
	}
	rng := rand.New(rand.NewPCG(3, 3))
	var ts []stTensor
	add := func(name string, shape ...int64) { ts = append(ts, randomTensor(rng, name, safetensors.F16, shape...)) }
	add("model.embed_tokens.weight", vocab, hidden)
	add("model.embed_tokens_per_layer.weight", pleVocab, layers*ple)
	add("model.per_layer_model_projection.weight", layers*ple, hidden)
	add("model.per_layer_projection_norm.weight", ple)
	for k := range streams - 1 {
		add(fmt.Sprintf("model.altup_projections.%d.weight", k), hidden, hidden)
		add(fmt.Sprintf("model.altup_unembed_projections.%d.weight", k), hidden, hidden)
	}
	add("model.norm.weight", hidden)
	for i := range layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		add(p+"input_layernorm.weight", hidden)
		add(p+"self_attn.q_proj.weight", heads*hd, hidden)
		add(p+"self_attn.q_norm.weight", hd)
		add(p+"self_attn.k_proj.weight", kvHeads*hd, hidden)
		add(p+"self_attn.v_proj.weight", kvHeads*hd, hidden)
		add(p+"self_attn.k_norm.weight", hd)
		add(p+"self_attn.o_proj.weight", hidden, heads*hd)
		add(p+"post_attention_layernorm.weight", hidden)
		add(p+"pre_feedforward_layernorm.weight", hidden)
		add(p+"mlp.gate_proj.weight", ff, hidden)
		add(p+"mlp.up_proj.weight", ff, hidden)
		add(p+"mlp.down_proj.weight", hidden, ff)
		add(p+"post_feedforward_layernorm.weight", hidden)
		add(p+"per_layer_input_gate.weight", ple, hidden)
		add(p+"per_layer_projection.weight", hidden, ple)
		add(p+"post_per_layer_input_norm.weight", hidden)
		add(p+"altup.correct_output_scale", hidden)
		add(p+"altup.correction_coefs.weight", streams, streams)
		add(p+"altup.prediction_coefs.weight", streams*streams, streams)
		add(p+"altup.modality_router.weight", streams, hidden)
		add(p+"altup.router_norm.weight", hidden)
		add(p+"laurel.linear_left.weight", rank, hidden)
		add(p+"laurel.linear_right.weight", hidden, rank)
		add(p+"laurel.post_laurel_norm.weight", hidden)
	}
	return &hfModel{config: cfg, tensors: ts}
}

// TestImportGemma3n imports a Gemma 3n checkpoint into the keys and tensors
// llama.cpp's converter writes: AltUp's streams and active one, the
// sparsity as normal quantiles (-inf for the dense layers), the pattern as
// bools, the KV sharing, the AltUp projections stacked into one tensor
// each, the per-layer table padded with zero rows to the vocabulary, the
// norms as stored. The file reads back into the config engine/arch derives.
func TestImportGemma3n(t *testing.T) {
	m := gemma3nModel(nil)
	f := importModel(t, m.write(t), Options{})
	checkKeys(t, f, "gemma3n", map[string]any{
		"altup.num_inputs": uint32(3), "altup.active_idx": uint32(0),
		"rope.freq_base": float32(1e6), "rope.freq_base_swa": float32(10000),
		"attention.shared_kv_layers": uint32(2), "embedding_length_per_layer_input": uint32(4),
		"attention.sliding_window": uint32(8), "final_logit_softcapping": float32(30),
		"feed_forward_length": uint32(12), "attention.key_length": uint32(4),
		"attention.scale": nil, "attn_logit_softcapping": nil,
	})
	if v, _ := f.Value("gemma3n.attention.sliding_window_pattern"); fmt.Sprint(v.Any()) != "[true true false true true false]" {
		t.Errorf("sliding_window_pattern %v", v.Any())
	}
	scales, err := f.Float32s("gemma3n.activation_sparsity_scale")
	// icdf(0.95) = 1.6448536 (scipy.stats.norm.ppf); icdf(0) = -inf.
	if err != nil || len(scales) != 6 || math.Abs(float64(scales[0])-1.6448536) > 1e-6 || scales[1] != scales[0] || !math.IsInf(float64(scales[2]), -1) {
		t.Errorf("activation_sparsity_scale %v (%v)", scales, err)
	}
	// The stacks: [cols, rows, streams - 1], the checkpoint's matrices in
	// order.
	for _, s := range []struct{ gg, hf string }{{"altup_proj.weight", "model.altup_projections.%d.weight"}, {"altup_unembd_proj.weight", "model.altup_unembed_projections.%d.weight"}} {
		info, ok := f.Tensor(s.gg)
		if !ok || fmt.Sprint(info.Shape) != "[8 8 2]" {
			t.Fatalf("%s: %v %v", s.gg, ok, info.Shape)
		}
		got := floats(t, f, s.gg)
		want := append(slices.Clone(m.tensor(fmt.Sprintf(s.hf, 0)).values), m.tensor(fmt.Sprintf(s.hf, 1)).values...)
		if !slices.Equal(got, want) {
			t.Errorf("%s differs from the checkpoint's matrices", s.gg)
		}
	}
	// The per-layer table: the checkpoint's 10 rows, then 2 of zeros.
	info, _ := f.Tensor("per_layer_token_embd.weight")
	if fmt.Sprint(info.Shape) != "[24 12]" {
		t.Errorf("per_layer_token_embd shape %v, want [24 12]", info.Shape)
	}
	table := floats(t, f, "per_layer_token_embd.weight")
	want := append(slices.Clone(m.tensor("model.embed_tokens_per_layer.weight").values), make([]float32, 2*24)...)
	if !slices.Equal(table, want) {
		t.Error("per_layer_token_embd is not the checkpoint's table padded with zero rows")
	}
	names := tensorNames(f)
	for _, want := range []string{"blk.5.attn_k.weight", "blk.4.altup_correct_scale.weight", "blk.4.altup_predict_coef.weight",
		"blk.0.laurel_l.weight", "blk.0.laurel_post_norm.weight", "blk.3.altup_router_norm.weight"} {
		if !slices.Contains(names, want) {
			t.Errorf("no %s", want)
		}
	}
	// Norm gains and the correction scale as stored.
	for _, p := range []struct{ gg, hf string }{
		{"blk.2.altup_correct_scale.weight", "model.layers.2.altup.correct_output_scale"},
		{"blk.2.laurel_post_norm.weight", "model.layers.2.laurel.post_laurel_norm.weight"},
		{"blk.2.altup_router_norm.weight", "model.layers.2.altup.router_norm.weight"},
	} {
		if got, src := floats(t, f, p.gg), m.tensor(p.hf).values; !slices.Equal(got, src) {
			t.Errorf("%s = %v, checkpoint %v", p.gg, got, src)
		}
	}
	c, err := arch.ReadConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	c.Vocab = 12
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.AltUp != 3 || c.AltUpActive != 0 || c.AttnScale != 1 || !c.VNorm {
		t.Errorf("config %+v", c)
	}
	for i, kv := range []int{0, 1, 2, 3, 3, 2} {
		if sh := c.Shape(i); sh.KVLayer != kv || sh.Sparse != (i < 2) {
			t.Errorf("layer %d: %+v, want KV layer %d, sparse %v", i, sh, kv, i < 2)
		}
	}
}

// TestImportGemma3nMultimodal: Gemma3nForConditionalGeneration imports its
// text model as the text-only class does, leaving the towers.
func TestImportGemma3nMultimodal(t *testing.T) {
	text := gemma3nModel(nil)
	want := importModel(t, text.write(t), Options{Name: "g"})
	var extra []stTensor
	for _, part := range []string{"vision_tower.timm_model.conv_stem.conv.weight", "audio_tower.conformer.0.ffw_layer_start.ffw_layer_1.weight",
		"embed_vision.embedding_projection.weight", "embed_audio.embedding_projection.weight"} {
		extra = append(extra, stTensor{name: "model." + part, dtype: safetensors.F16, shape: []int64{2, 3}, values: make([]float32, 6)})
	}
	mm := multimodal(text, "Gemma3nForConditionalGeneration", "gemma3n", "model.language_model.", extra...)
	sameImport(t, importModel(t, mm.write(t), Options{Name: "g"}), want)
}

// TestImportGemma3nRefuses: configurations Hearth does not run are refused
// by key, a checkpoint missing an AltUp matrix by tensor.
func TestImportGemma3nRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra map[string]any
		drop  string
		want  string
	}{
		{"one stream", map[string]any{"altup_num_inputs": 1}, "", "altup_num_inputs"},
		{"active stream outside", map[string]any{"altup_active_idx": 3}, "", "altup_active_idx"},
		{"unscaled correction", map[string]any{"altup_correct_scale": false}, "", "altup_correct_scale"},
		{"short sparsity", map[string]any{"activation_sparsity_pattern": []float64{0.95}}, "", "activation_sparsity_pattern"},
		{"sparsity of 1", map[string]any{"activation_sparsity_pattern": []float64{1, 0, 0, 0, 0, 0}}, "", "activation_sparsity_pattern"},
		{"per-layer widths of another count", map[string]any{"intermediate_size": []int{12, 12}}, "", "intermediate_size"},
		{"PLE table taller than the vocabulary", map[string]any{"vocab_size_per_layer_input": 14}, "", "vocab_size_per_layer_input"},
		{"scaled RoPE", map[string]any{"rope_parameters": map[string]any{
			"sliding_attention": map[string]any{"rope_type": "default", "rope_theta": 10000.0},
			"full_attention":    map[string]any{"rope_type": "linear", "factor": 2.0, "rope_theta": 1e6}}}, "", "rope_parameters"},
		{"a shared global layer with no global layer before it", map[string]any{"num_kv_shared_layers": 1,
			"layer_types": []string{"sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention", "full_attention"}},
			"", "num_kv_shared_layers"},
		{"missing AltUp projection", nil, "model.altup_projections.1.weight", `"model.altup_projections.1.weight"`},
		{"missing LAuReL", nil, "model.layers.4.laurel.linear_right.weight", `"model.layers.4.laurel.linear_right.weight"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := gemma3nModel(tc.extra)
			if tc.drop != "" {
				m.tensors = slices.DeleteFunc(m.tensors, func(x stTensor) bool { return x.name == tc.drop })
			}
			importRefused(t, m, tc.want)
		})
	}
}
