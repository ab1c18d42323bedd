package hfimport

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hearthstudio/hearth/engine/tokenizer"
)

// TestImportFixtures imports every Hugging Face folder that
// engine/model/testdata/hf/make_fixtures.py made (transformers' own
// save_pretrained output, so the config layout of the real library) and
// checks what its expected.json says of the model. engine/model's tests
// compare the forward pass; this one only that the import succeeds and
// agrees on the shapes and the prompt's token ids.
func TestImportFixtures(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join("..", "model", "testdata", "hf", "*", "expected.json"))
	if len(dirs) == 0 {
		t.Skip("no fixtures in engine/model/testdata/hf (make_fixtures.py has not been run)")
	}
	arch := map[string]string{
		"llama": "llama", "mistral": "llama", "gemma": "gemma", "gemma2": "gemma2", "gemma3": "gemma3",
		"qwen2": "qwen2", "qwen3": "qwen3", "phi3": "phi3",
	}
	for _, exp := range dirs {
		dir := filepath.Dir(exp)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			b, err := os.ReadFile(exp)
			if err != nil {
				t.Fatal(err)
			}
			var e struct {
				Family      string  `json:"family"`
				LogitsShape []int   `json:"logits_shape"`
				PromptText  string  `json:"prompt_text"`
				PromptIDs   []int32 `json:"prompt_ids"`
			}
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatal(err)
			}
			f := importModel(t, dir, Options{})
			if got := f.Architecture(); got != arch[e.Family] {
				t.Errorf("architecture %q, want %q", got, arch[e.Family])
			}
			emb, ok := f.Tensor("token_embd.weight")
			if !ok || len(e.LogitsShape) != 2 || emb.Shape[1] != uint64(e.LogitsShape[1]) {
				t.Errorf("token_embd.weight %v, logits shape %v", emb.Shape, e.LogitsShape)
			}
			toks, err := f.Strings("tokenizer.ggml.tokens")
			if err != nil || len(toks) != e.LogitsShape[1] {
				t.Errorf("%d tokens (%v), want %d", len(toks), err, e.LogitsShape[1])
			}
			if pre, _ := f.String("tokenizer.ggml.pre"); pre != "gpt-2" {
				t.Errorf("tokenizer.ggml.pre = %q, want gpt-2", pre)
			}
			// The imported tokenizer gives the ids Hugging Face tokenizers
			// gave for the prompt.
			tok, err := tokenizer.FromGGUF(f)
			if err != nil {
				t.Fatal(err)
			}
			if got := tok.Encode(e.PromptText, tokenizer.EncodeOptions{AddSpecial: true}); !slices.Equal(got, e.PromptIDs) {
				t.Errorf("Encode(%q) = %v, want %v", e.PromptText, got, e.PromptIDs)
			}
		})
	}
}
