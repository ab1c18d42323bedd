package hfimport

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/safetensors"
)

// TestImportErrors breaks a valid folder one way at a time; each import
// must fail with an error that names what is wrong (the parts in want), and
// write no output.
func TestImportErrors(t *testing.T) {
	st := func(dir string) string { return filepath.Join(dir, "model.safetensors") }
	cases := []struct {
		name  string
		class string
		extra map[string]any
		edit  func(t *testing.T, m *hfModel, dir string) // after writing; m is the written model
		pre   func(m *hfModel)                           // before writing
		want  []string
	}{
		{
			name: "truncated data",
			edit: func(t *testing.T, m *hfModel, dir string) {
				b, _ := os.ReadFile(st(dir))
				os.WriteFile(st(dir), b[:len(b)-10], 0o644)
			},
			// The header checks are safetensors' (its TestOpenRejects);
			// this is that their errors reach the importer's caller.
			want: []string{"model.safetensors", "run past the end", "truncated"},
		},
		{
			name: "dtype that cannot be imported",
			pre: func(m *hfModel) {
				// Written as safetensors.F32, then relabelled I32 below: same size.
				m.tensor("model.layers.0.mlp.up_proj.weight").dtype = safetensors.F32
			},
			edit: func(t *testing.T, m *hfModel, dir string) {
				b, _ := os.ReadFile(st(dir))
				s := strings.Replace(string(b), `"dtype":"F32"`, `"dtype":"I32"`, 1)
				os.WriteFile(st(dir), []byte(s), 0o644)
			},
			want: []string{"model.safetensors", `"model.layers.0.mlp.up_proj.weight"`, "dtype I32 cannot be imported"},
		},
		{
			name: "unknown architecture",
			pre:  func(m *hfModel) { m.config["architectures"] = []string{"MambaForCausalLM"} },
			want: []string{"config.json", `architecture "MambaForCausalLM" is not supported`, "LlamaForCausalLM"},
		},
		{
			name: "no architectures",
			pre:  func(m *hfModel) { delete(m.config, "architectures"); m.config["model_type"] = "llama" },
			want: []string{"config.json", `no "architectures"`},
		},
		{
			name: "missing tensor",
			pre:  func(m *hfModel) { m.remove("model.layers.1.self_attn.k_proj.weight") },
			want: []string{`"model.layers.1.self_attn.k_proj.weight" (blk.1.attn_k.weight) is missing`},
		},
		{
			name: "missing embedding",
			pre:  func(m *hfModel) { m.remove("model.embed_tokens.weight") },
			want: []string{`"model.embed_tokens.weight"`, "missing"},
		},
		{
			name: "wrong shape",
			pre: func(m *hfModel) {
				x := m.tensor("model.layers.0.self_attn.q_proj.weight")
				x.shape = []int64{x.shape[1], x.shape[0]}
			},
			want: []string{`"model.layers.0.self_attn.q_proj.weight" has shape [8 12]`, "[12 8]"},
		},
		{
			name: "unexpected tensor",
			pre: func(m *hfModel) {
				m.tensors = append(m.tensors, stTensor{name: "model.layers.0.mlp.experts.0.weight", dtype: safetensors.F16, shape: []int64{2}, values: []float32{0, 0}})
			},
			want: []string{`"model.layers.0.mlp.experts.0.weight"`, "not part of a LlamaForCausalLM"},
		},
		{
			name: "missing config key",
			pre:  func(m *hfModel) { delete(m.config, "hidden_size") },
			want: []string{"config.json", "hidden_size: is missing"},
		},
		{
			name: "config key of the wrong type",
			pre:  func(m *hfModel) { m.config["num_hidden_layers"] = "two" },
			want: []string{"config.json", "num_hidden_layers", "want an integer"},
		},
		{
			name: "heads not a multiple of kv heads",
			pre:  func(m *hfModel) { m.config["num_attention_heads"] = 3; m.config["num_key_value_heads"] = 2 },
			want: []string{"num_attention_heads (3) must be a multiple of num_key_value_heads (2)"},
		},
		{
			name: "unsupported rope",
			pre:  func(m *hfModel) { m.config["rope_scaling"] = map[string]any{"rope_type": "dynamic", "factor": 4.0} },
			want: []string{"config.json", "rope_scaling.rope_type", `"dynamic" is not supported`},
		},
		{
			name: "longrope without its factors",
			pre: func(m *hfModel) {
				m.config["rope_scaling"] = map[string]any{"rope_type": "longrope", "short_factor": []any{1.0}}
			},
			want: []string{"config.json", "rope_scaling", "longrope needs short_factor and long_factor"},
		},
		{
			name: "llama3 rope without its fields",
			pre: func(m *hfModel) {
				m.config["rope_parameters"] = map[string]any{"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0}
			},
			want: []string{"rope_parameters", "llama3 scaling needs", "original_max_position_embeddings"},
		},
		{
			name:  "qwen sliding window",
			class: "Qwen2ForCausalLM",
			pre:   func(m *hfModel) { m.config["use_sliding_window"] = true },
			want:  []string{"use_sliding_window", "not supported"},
		},
		{
			name:  "gemma2 layer types that GGUF cannot say",
			class: "Gemma2ForCausalLM",
			pre: func(m *hfModel) {
				m.config["layer_types"] = []string{"full_attention", "sliding_attention"}
			},
			want: []string{"layer_types", "alternation"},
		},
		{
			name:  "gemma3 layer types without a period",
			class: "Gemma3ForCausalLM",
			pre: func(m *hfModel) {
				m.config["layer_types"] = []string{"full_attention", "sliding_attention"}
			},
			want: []string{"layer_types", "one global layer in every 1"},
		},
		{
			name: "no tokenizer",
			edit: func(t *testing.T, m *hfModel, dir string) { os.Remove(filepath.Join(dir, "tokenizer.json")) },
			want: []string{"neither tokenizer.json nor tokenizer.model"},
		},
		{
			name: "tokenizer larger than the embedding",
			pre: func(m *hfModel) {
				m.config["vocab_size"] = 4
				m.tensor("model.embed_tokens.weight").shape[0] = 4
				m.tensor("model.embed_tokens.weight").values = make([]float32, 32)
				m.tensor("lm_head.weight").shape[0] = 4
				m.tensor("lm_head.weight").values = make([]float32, 32)
			},
			want: []string{"8 tokens, more than vocab_size 4"},
		},
		{
			name: "no weights",
			edit: func(t *testing.T, m *hfModel, dir string) { os.Remove(st(dir)) },
			want: []string{"neither model.safetensors nor model.safetensors.index.json"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			class := c.class
			if class == "" {
				class = "LlamaForCausalLM"
			}
			m := newModel(class, small, safetensors.F16, c.extra)
			if c.pre != nil {
				c.pre(m)
			}
			dir := m.write(t)
			if c.edit != nil {
				c.edit(t, m, dir)
			}
			out := filepath.Join(t.TempDir(), "out.gguf")
			err := Import(dir, out, Options{})
			if err == nil {
				t.Fatal("Import succeeded")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			for _, p := range []string{out, out + ".tmp"} {
				if _, err := os.Stat(p); !os.IsNotExist(err) {
					t.Errorf("%s exists after a failed import", p)
				}
			}
		})
	}
}

// A write that fails half way (here: the output folder does not exist)
// leaves nothing behind either.
func TestImportUnwritableOutput(t *testing.T) {
	dir := newModel("LlamaForCausalLM", small, safetensors.F16, nil).write(t)
	out := filepath.Join(t.TempDir(), "no", "such", "dir", "out.gguf")
	if err := Import(dir, out, Options{}); err == nil {
		t.Fatal("Import into a missing folder succeeded")
	}
}
