package chat

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hearthstudio/hearth/engine/arch"
	"github.com/hearthstudio/hearth/engine/tokenizer"
	"github.com/hearthstudio/hearth/gguf"
	"github.com/hearthstudio/hearth/internal/sharedtest"
)

// refVocabs converts the shared reference tokenizers once: the Llama 3
// vocabulary takes most of a second.
var refVocabs sync.Map // file → func() *tokenizer.Vocab

func refVocab(t *testing.T, file string) *tokenizer.Vocab {
	t.Helper()
	load, _ := refVocabs.LoadOrStore(file, sync.OnceValues(func() (*tokenizer.Vocab, error) {
		data, err := os.ReadFile(filepath.Join(sharedtest.Dir(t, "tokenizer"), file))
		if err != nil {
			return nil, err
		}
		switch {
		case strings.HasSuffix(file, ".model"):
			return tokenizer.FromSentencePiece(data)
		case strings.HasPrefix(file, "llama3"):
			v, err := tokenizer.FromHFTokenizerJSON(data, "llama-bpe")
			if err == nil {
				v.BOS, v.EOS, v.EOT = 128000, 128001, 128009
			}
			return v, err
		default:
			v, err := tokenizer.FromHFTokenizerJSON(data, "qwen2")
			if err == nil {
				v.EOS = 2 // <|im_end|>
			}
			return v, err
		}
	}))
	v, err := load.(func() (*tokenizer.Vocab, error))()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// modelFile writes a GGUF with a tokenizer and, if src is not "", a chat
// template, reads it back, and returns the Format a model load builds.
func modelFile(t *testing.T, arch, vocabFile, src string) *Format {
	t.Helper()
	var buf bytes.Buffer
	w := gguf.NewWriter(&buf)
	if err := w.SetString("general.architecture", arch); err != nil {
		t.Fatal(err)
	}
	if err := refVocab(t, vocabFile).WriteGGUF(w); err != nil {
		t.Fatal(err)
	}
	if src != "" {
		if err := w.SetString(tokenizer.KeyChatTemplate, src); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	format, err := FromGGUF(f, tok)
	if err != nil {
		t.Fatal(err)
	}
	return format
}

// jsonlTemplate is the first template of templates.jsonl named name.
func jsonlTemplate(t *testing.T, name string) string {
	t.Helper()
	r := loadRenders(t)
	all := jsonlTemplates(t)
	for _, c := range r.Cases {
		if c.Name == name+"#1" && c.JSONLLine > 0 {
			return all[c.JSONLLine-1]
		}
	}
	t.Fatalf("no template %s in templates.jsonl", name)
	return ""
}

var conversation = []Message{
	{Role: "system", Content: "Be brief."},
	{Role: "user", Content: "Hi!"},
}

func TestFormatUsesTheFilesTemplate(t *testing.T) {
	f := modelFile(t, "llama", "llama3-bpe.tokenizer.json", jsonlTemplate(t, "llama3-instruct"))
	if f.Template == nil || f.Notice != "" {
		t.Fatalf("template not used: %q", f.Notice)
	}
	p, err := f.Render(Request{Messages: conversation, AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	want := "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
	if p.Text != want || p.Notice != "" || p.Template != tokenizer.KeyChatTemplate {
		t.Errorf("Render = %+v\nwant text %q", p, want)
	}
	// The template wrote BOS: Tokenize must not add another.
	ids := f.Tokenize(p.Text)
	if ids[0] != 128000 || ids[1] == 128000 {
		t.Errorf("Tokenize starts %v, want one BOS", ids[:3])
	}
	if !f.IsStop(128009) || !f.IsStop(128001) || !slices.Contains(f.StopStrings, "<|eot_id|>") {
		t.Errorf("stops %v %q, want <|eot_id|> (128009) and <|end_of_text|> (128001)", f.StopIDs, f.StopStrings)
	}
}

func TestFormatFallsBack(t *testing.T) {
	tests := []struct {
		name, arch, vocab, src string
		builtin                string
		notice                 string // a part of the notice
		want                   string
	}{
		{"no template", "qwen2", "qwen2-bpe.tokenizer.json", "", "builtin:chatml", "has no tokenizer.chat_template",
			"<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"},
		{"does not compile", "llama", "llama3-bpe.tokenizer.json", "{% if messages %}unclosed", "builtin:llama3", "does not compile",
			"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
		{"refuses a system turn", "gemma", "gemma-spm.model", "", "builtin:gemma", "System role not supported",
			"<s><start_of_turn>user\nBe brief.\n\nHi!<end_of_turn>\n<start_of_turn>model\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.src
			if tc.name == "refuses a system turn" {
				src = jsonlTemplate(t, "gemma-instruct")
			}
			f := modelFile(t, tc.arch, tc.vocab, src)
			p, err := f.Render(Request{Messages: conversation, AddGenerationPrompt: true})
			if err != nil {
				t.Fatal(err)
			}
			if p.Template != tc.builtin || !strings.Contains(p.Notice, tc.notice) || p.Text != tc.want {
				t.Errorf("Render = %+v\nwant %s, notice with %q, text %q", p, tc.builtin, tc.notice, tc.want)
			}
		})
	}
}

func TestStopsFromTheTemplate(t *testing.T) {
	tests := []struct {
		arch, vocab, template string
		want                  []string
	}{
		{"qwen2", "qwen2-bpe.tokenizer.json", "chatml", []string{"<|im_end|>"}},
		{"gemma", "gemma-spm.model", "gemma-instruct", []string{"</s>", "<end_of_turn>"}},
	}
	for _, tc := range tests {
		f := modelFile(t, tc.arch, tc.vocab, jsonlTemplate(t, tc.template))
		for _, s := range tc.want {
			id, _ := f.tok.ID(s)
			if !slices.Contains(f.StopStrings, s) || !f.IsStop(id) {
				t.Errorf("%s: stops %v %q, want %q among them", tc.template, f.StopIDs, f.StopStrings, s)
			}
		}
	}
}

func TestBuiltinChoice(t *testing.T) {
	llama3 := modelFile(t, "llama", "llama3-bpe.tokenizer.json", "").tok
	gemma := modelFile(t, "gemma3", "gemma-spm.model", "").tok
	// llama-spm's user-defined tokens are Phi-3's turn markers.
	phi := modelFile(t, "llama", "llama-spm.model", "").tok
	tests := []struct {
		arch  string
		vocab vocabulary
		want  string
	}{
		{"llama", llama3, "llama3"},
		{"llama", phi, "phi3"},
		{"llama", nil, "llama2"},
		{"gemma3", gemma, "gemma"},
		{"gemma2", nil, "gemma"},
		// Gemma 4's own markers, or its fallback without them; on Gemma
		// 1-3's vocabulary (hearth synth's files), their format.
		{"gemma4", turnVocab{"<|turn>", "<turn|>"}, "gemma4"},
		{"gemma4", nil, "gemma4"},
		{"gemma4", gemma, "gemma"},
		{"qwen3", nil, "chatml"},
		{"phi3", nil, "phi3"},
		{"mistral", nil, "llama2"},
		{"unknown-arch", nil, "chatml"},
	}
	for _, tc := range tests {
		if got := builtinFor(tc.arch, tc.vocab); got != tc.want {
			t.Errorf("builtinFor(%q) = %q, want %q", tc.arch, got, tc.want)
		}
		if builtinSource(tc.want) == "" {
			t.Errorf("no built-in %q", tc.want)
		}
	}
}

// turnVocab is a vocabulary of just the given special tokens.
type turnVocab []string

func (v turnVocab) ID(text string) (int32, bool) {
	for i, s := range v {
		if s == text {
			return int32(i), true
		}
	}
	return 0, false
}

// TestArchitecturesNameBuiltins: every template an architecture's record
// names is one this package has, so a typo in a record fails here rather
// than as a panic in NewFormat.
func TestArchitecturesNameBuiltins(t *testing.T) {
	for _, a := range arch.All() {
		for _, name := range []string{a.ChatTemplate, a.ChatFallback} {
			if name != "" && builtinSource(name) == "" {
				t.Errorf("%s: no built-in template %q", a.Name, name)
			}
		}
	}
}
