package hfimport

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/tokenizer"
	"github.com/hearthstudio/hearth/internal/sharedtest"
)

// tokDir writes a folder with the given tokenizer files (name → content:
// a []byte as it is, anything else as JSON).
func tokDir(t *testing.T, files map[string]any) string {
	t.Helper()
	dir := t.TempDir()
	for name, v := range files {
		if b, ok := v.([]byte); ok {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		writeJSON(t, filepath.Join(dir, name), v)
	}
	return dir
}

func TestTokenizerByteLevelBPE(t *testing.T) {
	dir := tokDir(t, map[string]any{
		"tokenizer.json": tinyTokenizer(),
		"tokenizer_config.json": map[string]any{
			"bos_token": map[string]any{"content": "<s>", "special": true}, // the AddedToken form
			"eos_token": "</s>", "pad_token": "<pad>", "add_bos_token": true, "add_eos_token": false,
			"chat_template": []any{
				map[string]any{"name": "tool_use", "template": "tools"},
				map[string]any{"name": "default", "template": "chat"},
			},
		},
	})
	vi, err := loadVocab(dir, &hparams{vocab: 10}, "")
	if err != nil {
		t.Fatal(err)
	}
	v := vi.vocab
	if v.Model != tokenizer.ModelBPE || v.Pre != "gpt-2" {
		t.Errorf("model %q pre %q, want gpt2 / gpt-2", v.Model, v.Pre)
	}
	// Padded to the embedding's 10 rows, as the converter does.
	if len(v.Tokens) != 10 || v.Tokens[8] != "[PAD8]" || v.Types[9] != tokenizer.Unused {
		t.Errorf("tokens %q types %v: want 8 tokens and [PAD8], [PAD9] unused", v.Tokens, v.Types)
	}
	if v.Types[1] != tokenizer.Control || v.Types[3] != tokenizer.Normal {
		t.Errorf("types %v: specials must be control, pieces normal", v.Types)
	}
	if v.BOS != 1 || v.EOS != 2 || v.PAD != 0 || !v.AddBOS || v.AddEOS {
		t.Errorf("bos %d eos %d pad %d add_bos %v add_eos %v", v.BOS, v.EOS, v.PAD, v.AddBOS, v.AddEOS)
	}
	if vi.chatTemplate != "chat" {
		t.Errorf("chat template %q, want the default one of the list", vi.chatTemplate)
	}
}

func TestTokenizerPreDetection(t *testing.T) {
	split := func(pattern string) map[string]any {
		return map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": pattern}, "behavior": "Isolated"},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": false},
		}}
	}
	for _, c := range []struct {
		name string
		pre  any
		opt  string
		want string // "" means an error that asks for --pre
	}{
		{"gpt2", map[string]any{"type": "ByteLevel", "use_regex": true}, "", "gpt-2"},
		{"llama3", split(patLlama3), "", "llama-bpe"},
		{"qwen2", split(patQwen2), "", "qwen2"},
		{"tekken", split(patTekken), "", "tekken"},
		{"gpt-4o", split(patGPT4o), "", "gpt-4o"},
		{"smollm", map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Digits", "individual_digits": true},
			map[string]any{"type": "ByteLevel", "use_regex": true},
		}}, "", "smollm"},
		{"unknown split", split(`\p{L}+|\s+`), "", ""},
		{"unknown split named", split(`\p{L}+|\s+`), "llama-bpe", "llama-bpe"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tj := tinyTokenizer()
			tj["pre_tokenizer"] = c.pre
			dir := tokDir(t, map[string]any{"tokenizer.json": tj})
			vi, err := loadVocab(dir, &hparams{vocab: 8}, c.opt)
			if c.want == "" {
				if err == nil || !strings.Contains(err.Error(), "--pre") {
					t.Fatalf("err = %v, want one asking for --pre", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if vi.vocab.Pre != c.want {
				t.Errorf("pre = %q, want %q", vi.vocab.Pre, c.want)
			}
		})
	}
}

// The shared Qwen2-style vocabulary: its pre-tokenizer is recognized, the
// end-of-turn token of generation_config.json's eos list becomes EOT, and
// BOS comes from config.json when tokenizer_config.json's is null.
func TestTokenizerQwen2Specials(t *testing.T) {
	dir := tokDir(t, map[string]any{
		"tokenizer.json":         sharedtest.File(t, "tokenizer", "qwen2-bpe.tokenizer.json"),
		"tokenizer_config.json":  map[string]any{"bos_token": nil, "eos_token": "<|endoftext|>", "chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}"},
		"generation_config.json": map[string]any{"eos_token_id": []int{0, 2}},
	})
	vi, err := loadVocab(dir, &hparams{vocab: 1216, bos: []int{0}}, "")
	if err != nil {
		t.Fatal(err)
	}
	v := vi.vocab
	if v.Pre != "qwen2" {
		t.Errorf("pre = %q, want qwen2", v.Pre)
	}
	if v.BOS != 0 || v.EOS != 0 || v.EOT != 2 {
		t.Errorf("bos %d eos %d eot %d, want 0, 0, 2 (<|im_end|>)", v.BOS, v.EOS, v.EOT)
	}
	if len(v.Tokens) != 1216 || len(v.Merges) == 0 {
		t.Errorf("%d tokens, %d merges", len(v.Tokens), len(v.Merges))
	}
	if !strings.Contains(vi.chatTemplate, "m.content") {
		t.Errorf("chat template %q", vi.chatTemplate)
	}
}

// SentencePiece: tokenizer.model is used when tokenizer.json is not
// byte-level, with tokenizer_config.json's added tokens applied (one
// replacing a piece, two appended past the model's pieces) and the rest of
// vocab_size padded.
func TestTokenizerSentencePiece(t *testing.T) {
	spm := sharedtest.File(t, "tokenizer", "gemma-spm.model")
	base, err := tokenizer.FromSentencePiece(spm)
	if err != nil {
		t.Fatal(err)
	}
	n := len(base.Tokens)
	metaspace := map[string]any{
		"model":         map[string]any{"type": "BPE", "vocab": map[string]int{}, "merges": []string{}},
		"pre_tokenizer": map[string]any{"type": "Metaspace"},
		"decoder":       map[string]any{"type": "Sequence", "decoders": []any{map[string]any{"type": "Replace"}}},
	}
	dir := tokDir(t, map[string]any{
		"tokenizer.model": spm,
		"tokenizer.json":  metaspace,
		"tokenizer_config.json": map[string]any{
			"add_bos_token": true, "add_eos_token": false,
			"added_tokens_decoder": map[string]any{
				"5":                         map[string]any{"content": "<tool>", "special": true},
				strconv.Itoa(n):             map[string]any{"content": "<image>", "special": false},
				strconv.Itoa(n + 1):         map[string]any{"content": "<end_of_turn>", "special": true},
				strconv.Itoa(int(base.EOS)): map[string]any{"content": base.Tokens[base.EOS], "special": true},
			},
		},
		"generation_config.json": map[string]any{"eos_token_id": []int{int(base.EOS), n + 1}},
		"chat_template.jinja":    []byte("{{ bos_token }}"),
	})
	vi, err := loadVocab(dir, &hparams{vocab: n + 4}, "")
	if err != nil {
		t.Fatal(err)
	}
	v := vi.vocab
	if vi.source != "tokenizer.model" || v.Model != tokenizer.ModelSPM {
		t.Fatalf("source %q model %q, want the SentencePiece model", vi.source, v.Model)
	}
	if len(v.Tokens) != n+4 || len(v.Scores) != n+4 || len(v.Types) != n+4 {
		t.Fatalf("%d tokens %d scores %d types, want %d", len(v.Tokens), len(v.Scores), len(v.Types), n+4)
	}
	if v.Tokens[5] != "<tool>" || v.Types[5] != tokenizer.Control {
		t.Errorf("token 5 = %q %v, want <tool> control", v.Tokens[5], v.Types[5])
	}
	if v.Tokens[n] != "<image>" || v.Types[n] != tokenizer.UserDefined || v.Tokens[n+1] != "<end_of_turn>" {
		t.Errorf("appended tokens %q %v", v.Tokens[n:], v.Types[n:])
	}
	if v.Tokens[n+2] != "[PAD"+strconv.Itoa(n+2)+"]" || v.Scores[n+3] != -1000 {
		t.Errorf("padding %q scores %v", v.Tokens[n+2:], v.Scores[n+2:])
	}
	// generation_config.json's second eos id is an end-of-turn token: EOT.
	if v.BOS != base.BOS || v.EOS != base.EOS || v.EOT != int32(n+1) || !v.AddBOS {
		t.Errorf("bos %d eos %d eot %d add_bos %v, want %d %d %d true", v.BOS, v.EOS, v.EOT, v.AddBOS, base.BOS, base.EOS, n+1)
	}
	if !slices.Contains(v.Tokens, "<start_of_turn>") {
		t.Error("the model's own user-defined pieces are gone")
	}
	if vi.chatTemplate != "{{ bos_token }}" {
		t.Errorf("chat template %q, want chat_template.jinja's", vi.chatTemplate)
	}
}

// The post-processor's TemplateProcessing decides add_bos when
// tokenizer_config.json does not (Llama 3 does it this way).
func TestTokenizerTemplateProcessing(t *testing.T) {
	tj := tinyTokenizer()
	tj["post_processor"] = map[string]any{"type": "TemplateProcessing", "single": []any{
		map[string]any{"SpecialToken": map[string]any{"id": "<s>", "type_id": 0}},
		map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}},
	}}
	dir := tokDir(t, map[string]any{"tokenizer.json": tj, "tokenizer_config.json": map[string]any{"bos_token": "<s>"}})
	vi, err := loadVocab(dir, &hparams{vocab: 8}, "")
	if err != nil {
		t.Fatal(err)
	}
	if !vi.vocab.AddBOS || vi.vocab.AddEOS {
		t.Errorf("add_bos %v add_eos %v, want true, false", vi.vocab.AddBOS, vi.vocab.AddEOS)
	}
}
