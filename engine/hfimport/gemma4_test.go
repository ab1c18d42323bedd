package hfimport

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hearthstudio/hearth/engine/arch"
	"github.com/hearthstudio/hearth/safetensors"
)

// gemma4Model is a Gemma4ForCausalLM checkpoint as transformers saves one:
// 6 layers (global 3 and 6, 16- and 32-dim heads), the last 2 sharing the
// caches of layers 4 and 3 without k/v weights of their own and with
// double-wide feed-forwards, per-layer embeddings of 4 a layer, and a
// layer_scalar buffer per layer.
func gemma4Model(extra map[string]any) *hfModel {
	const vocab, hidden, layers, heads, kvHeads, hd, ghd, ff, ple = 10, 8, 6, 2, 1, 16, 32, 12, 4
	types := []string{"sliding_attention", "sliding_attention", "full_attention", "sliding_attention", "sliding_attention", "full_attention"}
	cfg := map[string]any{
		"architectures": []string{"Gemma4ForCausalLM"}, "model_type": "gemma4_text",
		"vocab_size": vocab, "hidden_size": hidden, "intermediate_size": ff, "num_hidden_layers": layers,
		"num_attention_heads": heads, "num_key_value_heads": kvHeads, "head_dim": hd, "global_head_dim": ghd,
		"max_position_embeddings": 128, "rms_norm_eps": 1e-6, "tie_word_embeddings": true,
		"bos_token_id": 1, "eos_token_id": 2, "sliding_window": 8, "layer_types": types,
		"final_logit_softcapping": 30.0, "num_kv_shared_layers": 2, "use_double_wide_mlp": true,
		"hidden_size_per_layer_input": ple, "vocab_size_per_layer_input": vocab,
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
	rng := rand.New(rand.NewPCG(4, 4))
	var ts []stTensor
	add := func(name string, shape ...int64) { ts = append(ts, randomTensor(rng, name, safetensors.F16, shape...)) }
	add("model.embed_tokens.weight", vocab, hidden)
	add("model.embed_tokens_per_layer.weight", vocab, layers*ple)
	add("model.per_layer_model_projection.weight", layers*ple, hidden)
	add("model.per_layer_projection_norm.weight", ple)
	add("model.norm.weight", hidden)
	for i := range layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		d := int64(hd)
		if types[i] == "full_attention" {
			d = ghd
		}
		f := int64(ff)
		own := i < 4
		if !own {
			f *= 2
		}
		add(p+"input_layernorm.weight", hidden)
		add(p+"self_attn.q_proj.weight", heads*d, hidden)
		add(p+"self_attn.q_norm.weight", d)
		if own {
			add(p+"self_attn.k_proj.weight", kvHeads*d, hidden)
			add(p+"self_attn.v_proj.weight", kvHeads*d, hidden)
			add(p+"self_attn.k_norm.weight", d)
		}
		add(p+"self_attn.o_proj.weight", hidden, heads*d)
		add(p+"post_attention_layernorm.weight", hidden)
		add(p+"pre_feedforward_layernorm.weight", hidden)
		add(p+"mlp.gate_proj.weight", f, hidden)
		add(p+"mlp.up_proj.weight", f, hidden)
		add(p+"mlp.down_proj.weight", hidden, f)
		add(p+"post_feedforward_layernorm.weight", hidden)
		add(p+"per_layer_input_gate.weight", ple, hidden)
		add(p+"per_layer_projection.weight", hidden, ple)
		add(p+"post_per_layer_input_norm.weight", hidden)
		add(p+"layer_scalar", 1)
	}
	return &hfModel{config: cfg, tensors: ts}
}

// TestImportGemma4 imports a Gemma 4 checkpoint into the keys and tensors
// llama.cpp's converter writes (docs/gemma3n-gemma4.md): per-layer head
// widths, rotation and feed-forward, the pattern as bools, the KV sharing,
// the per-layer embeddings, rope_freqs with a quarter of the global pairs
// turning, the layer scales; the norms as stored (no 1 + w). The file
// reads back into the per-layer shapes engine/arch derives.
func TestImportGemma4(t *testing.T) {
	for _, form := range []struct {
		name  string
		extra map[string]any
	}{
		{"global_head_dim", nil},
		// Later transformers write the global layers' width as overrides.
		{"per_layer_config", map[string]any{"global_head_dim": nil, "per_layer_config": map[string]any{
			"2": map[string]any{"head_dim": 32}, "5": map[string]any{"head_dim": 32}}}},
		// Without rope_parameters, transformers' defaults: the same RoPE.
		{"default rope", map[string]any{"rope_parameters": nil}},
	} {
		t.Run(form.name, func(t *testing.T) {
			m := gemma4Model(form.extra)
			f := importModel(t, m.write(t), Options{})
			checkKeys(t, f, "gemma4", map[string]any{
				"attention.key_length": uint32(32), "attention.key_length_swa": uint32(16),
				"rope.dimension_count": uint32(32), "rope.dimension_count_swa": uint32(16),
				"rope.freq_base": float32(1e6), "rope.freq_base_swa": float32(10000),
				"attention.shared_kv_layers": uint32(2), "embedding_length_per_layer_input": uint32(4),
				"attention.sliding_window": uint32(8), "final_logit_softcapping": float32(30),
				"attention.scale": nil, "attn_logit_softcapping": nil,
			})
			ffs, err := arch.PerLayerInts(f, "gemma4.feed_forward_length", 6, -1)
			if err != nil || !slices.Equal(ffs, []int{12, 12, 12, 12, 24, 24}) {
				t.Errorf("feed_forward_length %v (%v)", ffs, err)
			}
			if v, _ := f.Value("gemma4.attention.sliding_window_pattern"); fmt.Sprint(v.Any()) != "[true true false true true false]" {
				t.Errorf("sliding_window_pattern %v", v.Any())
			}
			names := tensorNames(f)
			for _, gone := range []string{"blk.4.attn_k.weight", "blk.5.attn_v.weight", "blk.4.attn_k_norm.weight"} {
				if slices.Contains(names, gone) {
					t.Errorf("%s imported for a layer that reads another's cache", gone)
				}
			}
			for _, want := range []string{"per_layer_token_embd.weight", "per_layer_model_proj.weight", "per_layer_proj_norm.weight",
				"blk.5.inp_gate.weight", "blk.5.proj.weight", "blk.5.post_norm.weight", "blk.5.layer_output_scale.weight", "blk.3.attn_k_norm.weight"} {
				if !slices.Contains(names, want) {
					t.Errorf("no %s", want)
				}
			}
			// The global layers' 16 pairs: 4 turn, 12 do not.
			freqs := floats(t, f, "rope_freqs.weight")
			want := slices.Repeat([]float32{1}, 4)
			want = append(want, slices.Repeat([]float32{1e30}, 12)...)
			if !slices.Equal(freqs, want) {
				t.Errorf("rope_freqs %v, want %v", freqs, want)
			}
			// Norm gains as stored, a layer scale as it is.
			for _, p := range []struct{ gg, hf string }{
				{"blk.2.post_norm.weight", "model.layers.2.post_per_layer_input_norm.weight"},
				{"blk.2.layer_output_scale.weight", "model.layers.2.layer_scalar"},
				{"per_layer_proj_norm.weight", "model.per_layer_projection_norm.weight"},
			} {
				if got, src := floats(t, f, p.gg), m.tensor(p.hf).values; !slices.Equal(got, src) {
					t.Errorf("%s = %v, checkpoint %v", p.gg, got, src)
				}
			}
			c, err := arch.ReadConfig(f)
			if err != nil {
				t.Fatal(err)
			}
			c.Vocab = 10
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			for i, want := range []arch.LayerShape{
				{HeadDim: 16, KVHeads: 1, FF: 12, RopeDims: 16, KVLayer: 0},
				{HeadDim: 16, KVHeads: 1, FF: 12, RopeDims: 16, KVLayer: 1},
				{HeadDim: 32, KVHeads: 1, FF: 12, RopeDims: 32, KVLayer: 2, RopeFactors: true},
				{HeadDim: 16, KVHeads: 1, FF: 12, RopeDims: 16, KVLayer: 3},
				{HeadDim: 16, KVHeads: 1, FF: 24, RopeDims: 16, KVLayer: 3},
				{HeadDim: 32, KVHeads: 1, FF: 24, RopeDims: 32, KVLayer: 2, RopeFactors: true},
			} {
				if got := c.Shape(i); got != want {
					t.Errorf("layer %d: %+v, want %+v", i, got, want)
				}
			}
		})
	}
}

// TestImportGemma4Multimodal: Gemma4ForConditionalGeneration, the class
// Google's checkpoints are saved as, imports its text model (text_config,
// model.language_model.*) as the text-only class does, leaving its vision
// and audio towers and their embedders.
func TestImportGemma4Multimodal(t *testing.T) {
	text := gemma4Model(nil)
	want := importModel(t, text.write(t), Options{Name: "g"})
	var extra []stTensor
	for _, part := range []string{"vision_tower.encoder.layers.0.mlp.down_proj.linear.weight", "audio_tower.layers.0.lconv1d.linear_start.weight",
		"embed_vision.embedding_projection.weight", "embed_audio.embedding_projection.weight"} {
		extra = append(extra, stTensor{name: "model." + part, dtype: safetensors.F16, shape: []int64{2, 3}, values: make([]float32, 6)})
	}
	mm := multimodal(text, "Gemma4ForConditionalGeneration", "gemma4", "model.language_model.", extra...)
	sameImport(t, importModel(t, mm.write(t), Options{Name: "g"}), want)
}

// TestImportGemma4Refuses: the Gemma 4 configurations Hearth does not run
// are refused by key, and a checkpoint missing its per-layer embeddings, or
// holding what its config.json rules out, by tensor.
func TestImportGemma4Refuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra map[string]any
		drop  string
		want  string
	}{
		// A mixture without its sizes, and values where the keys are
		// to be the values (gemma4moe_test.go has the model with both).
		{"mixture of experts without its sizes", map[string]any{"enable_moe_block": true}, "", "num_experts: is missing"},
		{"values beside keys equal to values", map[string]any{"attention_k_eq_v": true}, "", `"model.layers.2.self_attn.v_proj.weight": not part of`},
		{"bidirectional", map[string]any{"use_bidirectional_attention": "all"}, "", "use_bidirectional_attention"},
		{"PLE table of another height", map[string]any{"vocab_size_per_layer_input": 12}, "", "vocab_size_per_layer_input"},
		{"sharing every layer", map[string]any{"num_kv_shared_layers": 6}, "", "num_kv_shared_layers"},
		{"short layer_types", map[string]any{"layer_types": []string{"full_attention"}}, "", "layer_types"},
		{"missing PLE table", nil, "model.embed_tokens_per_layer.weight", `"model.embed_tokens_per_layer.weight" (per_layer_token_embd.weight) is missing`},
		{"missing layer scale", nil, "model.layers.3.layer_scalar", `"model.layers.3.layer_scalar"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := gemma4Model(tc.extra)
			if tc.drop != "" {
				m.tensors = slices.DeleteFunc(m.tensors, func(x stTensor) bool { return x.name == tc.drop })
			}
			importRefused(t, m, tc.want)
		})
	}
}
