package tokenizer

import (
	"bytes"
	"slices"
	"testing"

	"github.com/hearthstudio/hearth/gguf"
)

// ollamaForm writes v the way Ollama's converter writes a SentencePiece
// vocabulary (convert/tokenizer_spm.go: tokenizer.ggml.pre "default", no
// add_space_prefix and no remove_extra_whitespaces key) into a model file of
// architecture arch, and reads the tokenizer back as a model load does.
func ollamaForm(tb testing.TB, v *Vocab, arch string) *Tokenizer {
	tb.Helper()
	f := ggufFile(tb, v, "")
	var buf bytes.Buffer
	w := gguf.NewWriter(&buf)
	set := func(k string, v gguf.Value) {
		if err := w.Set(k, v); err != nil {
			tb.Fatal(err)
		}
	}
	set("general.architecture", gguf.ValueOf(arch))
	set(KeyPre, gguf.ValueOf("default"))
	for _, kv := range f.Metadata() {
		switch kv.Key {
		case KeyAddSpacePrefix, KeyRemoveExtraWS, KeyPre:
			continue
		}
		set(kv.Key, kv.Value)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	g, err := gguf.Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		tb.Fatal(err)
	}
	if _, ok := g.Value(KeyAddSpacePrefix); ok {
		tb.Fatal("the Ollama form still has add_space_prefix")
	}
	tok, err := FromGGUF(g)
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// gemmaRefs is testdata/refs-gemma-ollama.json, written on the device by
// make_gemma_refs.py: Gemma's own tokenizers (sentencepiece and
// transformers' GemmaTokenizer) on hard strings.
type gemmaRefs struct {
	Cases []struct {
		Text string  `json:"text"`
		Hex  string  `json:"hex"`
		SP   []int32 `json:"sp"`
		HF   []int32 `json:"hf"`
	} `json:"cases"`
}

// TestSPMSpacePrefixFollowsArchitecture loads SentencePiece vocabularies
// written as Ollama's converter writes them, without add_space_prefix, and
// checks every id against the model family's own tokenizer: Gemma's puts
// no "▁" before the first word (whitespace, digits, CJK, emoji and invalid
// UTF-8 cases), Llama 2's does.
func TestSPMSpacePrefixFollowsArchitecture(t *testing.T) {
	var refs gemmaRefs
	readTestJSON(t, "refs-gemma-ollama.json", &refs)
	if len(refs.Cases) < 20 {
		t.Fatalf("refs-gemma-ollama.json has %d cases, want the 27 of make_gemma_refs.py", len(refs.Cases))
	}
	gemma := refTokenizers[slices.IndexFunc(refTokenizers, func(r refTokenizer) bool { return r.name == "gemma-spm" })]
	for _, arch := range []string{"gemma", "gemma2", "gemma3"} {
		t.Run(arch, func(t *testing.T) {
			tok := ollamaForm(t, gemma.convert(t), arch)
			if tok.Vocab().AddSpacePrefix {
				t.Errorf("%s without %s: AddSpacePrefix is on; Gemma's tokenizer has add_dummy_prefix off", arch, KeyAddSpacePrefix)
			}
			for i, c := range refs.Cases {
				text := caseText(t, c.Text, c.Hex)
				got := tok.Encode(text, EncodeOptions{})
				if !slices.Equal(got, c.SP) {
					t.Errorf("case %d %q:\n got %v\nwant %v (sentencepiece)", i, clip(text), got, c.SP)
				}
				// transformers only sees invalid UTF-8 after Python has
				// decoded it, which replaces a truncated sequence by one
				// U+FFFD where sentencepiece puts one per byte; its ids of
				// valid text are checked too.
				if c.Hex == "" && !slices.Equal(got, c.HF) {
					t.Errorf("case %d %q:\n got %v\nwant %v (transformers' GemmaTokenizer)", i, clip(text), got, c.HF)
				}
			}
		})
	}
	t.Run("llama", func(t *testing.T) {
		llama := refTokenizers[slices.IndexFunc(refTokenizers, func(r refTokenizer) bool { return r.name == "llama-spm" })]
		tok := ollamaForm(t, llama.convert(t), "llama")
		cases := loadRefs(t)["llama-spm"]
		if len(cases) == 0 {
			t.Fatal("no llama-spm references")
		}
		for i, c := range cases {
			if got := tok.Encode(c.Text, EncodeOptions{}); !slices.Equal(got, c.IDs) {
				t.Errorf("case %d %q:\n got %v\nwant %v", i, clip(c.Text), got, c.IDs)
			}
		}
	})
}
