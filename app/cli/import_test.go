package cli

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/gguf"
)

// writeHFQwen2 writes a tiny Qwen2 folder (hidden 8, 1 layer, F32 weights,
// tied embeddings, q/k/v biases) with a byte-level BPE tokenizer of 6
// tokens and a vocab_size of 8, and returns its path.
func writeHFQwen2(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "qwen2-tiny")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("config.json", map[string]any{
		"architectures": []string{"Qwen2ForCausalLM"}, "model_type": "qwen2",
		"vocab_size": 8, "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
		"num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 64,
		"rms_norm_eps": 1e-6, "rope_theta": 1e6, "tie_word_embeddings": true,
		"use_sliding_window": false, "bos_token_id": 0, "eos_token_id": 1,
	})
	write("tokenizer.json", map[string]any{
		"added_tokens":  []map[string]any{{"id": 0, "content": "<|endoftext|>", "special": true}, {"id": 1, "content": "<|im_end|>", "special": true}},
		"pre_tokenizer": map[string]any{"type": "ByteLevel", "use_regex": true},
		"model": map[string]any{"type": "BPE", "merges": []string{"a b"},
			"vocab": map[string]int{"<|endoftext|>": 0, "<|im_end|>": 1, "a": 2, "b": 3, "ab": 4, "Ġ": 5}},
	})
	write("tokenizer_config.json", map[string]any{"eos_token": "<|im_end|>", "chat_template": "{{ x }}"})

	shapes := []struct {
		name  string
		shape []int
	}{{"model.embed_tokens.weight", []int{8, 8}}, {"model.norm.weight", []int{8}}}
	for _, s := range []struct {
		name  string
		shape []int
	}{
		{"input_layernorm.weight", []int{8}}, {"post_attention_layernorm.weight", []int{8}},
		{"self_attn.q_proj.weight", []int{8, 8}}, {"self_attn.q_proj.bias", []int{8}},
		{"self_attn.k_proj.weight", []int{4, 8}}, {"self_attn.k_proj.bias", []int{4}},
		{"self_attn.v_proj.weight", []int{4, 8}}, {"self_attn.v_proj.bias", []int{4}},
		{"self_attn.o_proj.weight", []int{8, 8}},
		{"mlp.gate_proj.weight", []int{16, 8}}, {"mlp.up_proj.weight", []int{16, 8}}, {"mlp.down_proj.weight", []int{8, 16}},
	} {
		shapes = append(shapes, struct {
			name  string
			shape []int
		}{"model.layers.0." + s.name, s.shape})
	}
	hdr := map[string]any{}
	var data []byte
	for i, s := range shapes {
		n := 1
		for _, d := range s.shape {
			n *= d
		}
		start := len(data)
		for j := range n {
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(float32(i)+float32(j)/64))
		}
		hdr[s.name] = map[string]any{"dtype": "F32", "shape": s.shape, "data_offsets": []int{start, len(data)}}
	}
	h, _ := json.Marshal(hdr)
	st := append(binary.LittleEndian.AppendUint64(nil, uint64(len(h))), h...)
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), append(st, data...), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestImportCommand(t *testing.T) {
	dir := writeHFQwen2(t)
	out := filepath.Join(t.TempDir(), "qwen2.gguf")

	stdout, _, err := execute(newImportCmd(), dir, out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"wrote " + out, "qwen2 from Qwen2ForCausalLM", "file type ALL_F32", "tensors: 14 (14 F32)", "8 tokens from tokenizer.json", "pre-tokenizer gpt-2", "chat template"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}

	stdout, _, err = execute(newImportCmd(), dir, out, "--type", "f16", "--json", "--name", "Tiny Qwen")
	if err != nil {
		t.Fatal(err)
	}
	var rep importReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, stdout)
	}
	if rep.Architecture != "qwen2" || rep.FileTypeID != 1 || rep.Type != "f16" || rep.TensorCount != 14 ||
		rep.Types["F16"] != 8 || rep.Types["F32"] != 6 || rep.VocabSize != 8 || rep.OutputSize == 0 {
		t.Errorf("report %+v", rep)
	}
	if v, ok := rep.Metadata["qwen2.rope.freq_base"].(float64); !ok || v != 1e6 {
		t.Errorf("metadata qwen2.rope.freq_base = %v", rep.Metadata["qwen2.rope.freq_base"])
	}
	if rep.Tensors[0].Name != "token_embd.weight" || rep.Tensors[0].Source != "model.embed_tokens.weight" {
		t.Errorf("first tensor %+v", rep.Tensors[0])
	}

	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if name, _ := f.String("general.name"); name != "Tiny Qwen" {
		t.Errorf("general.name = %q", name)
	}
	if eos, _ := f.Uint32("tokenizer.ggml.eos_token_id"); eos != 1 {
		t.Errorf("eos = %d, want 1 (<|im_end|>)", eos)
	}
	if _, ok := f.Tensor("output.weight"); ok {
		t.Error("output.weight written for tied embeddings")
	}
}

func TestImportCommandErrors(t *testing.T) {
	dir := writeHFQwen2(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{dir, "x.gguf", "--type", "q4_0"}, `output type "q4_0"`},
		{[]string{filepath.Join(dir, "nope"), "x.gguf"}, "config.json"},
		{[]string{dir}, "accepts 2 arg(s)"},
	} {
		_, _, err := execute(newImportCmd(), c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want %q", c.args, err, c.want)
		}
	}
	// A folder the importer refuses leaves no output behind.
	os.Remove(filepath.Join(dir, "tokenizer.json"))
	out := filepath.Join(t.TempDir(), "x.gguf")
	if _, _, err := execute(newImportCmd(), dir, out); err == nil {
		t.Fatal("import without a tokenizer succeeded")
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("%s exists after a failed import", out)
	}
}
