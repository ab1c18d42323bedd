package hfimport

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/arch"
	"github.com/hearthstudio/hearth/engine/tokenizer"
	"github.com/hearthstudio/hearth/gguf"
)

// gemma4Tiny is engine/tokenizer/testdata's Gemma 4 tokenizer folder: the
// tokenizer.json and tokenizer_config.json transformers' GemmaTokenizer
// saves, of a tiny vocabulary (make_gemma4_refs.py), whose Hugging Face
// tokenizations are in refs-gemma4.json beside it.
var gemma4Tiny = filepath.Join("..", "tokenizer", "testdata", "gemma4-tiny")

// gemma4HP are the hyper-parameters of a Gemma 4 class with vocab ids.
func gemma4HP(vocab int) *hparams {
	return &hparams{vocab: vocab, fam: &family{arch: &arch.Arch{Name: "gemma4"}}}
}

// gemma4Files are a Gemma 4 folder's tokenizer files as transformers'
// GemmaTokenizer (v5) writes them, for a small vocabulary: ids 0–8 the
// special tokens, bytes, pieces and a merge; <unused0> an added token
// marked special that no special name holds; past the model's 17 tokens,
// an added token that is not special and one named in
// extra_special_tokens.
func gemma4Files() map[string]any {
	vocab := map[string]int{}
	for i, s := range []string{"<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<|turn>", "<turn|>", "<|tool_response>", `<|"|>`,
		"<0x00>", "<0x41>", "▁", "a", "b", "ab", "▁a", "<unused0>"} {
		vocab[s] = i
	}
	var added []map[string]any
	for _, a := range []struct {
		id      int
		content string
		special bool
	}{
		{0, "<pad>", true}, {1, "<eos>", true}, {2, "<bos>", true}, {3, "<unk>", true}, {4, "<mask>", true},
		{5, "<|turn>", true}, {6, "<turn|>", true}, {7, "<|tool_response>", true}, {8, `<|"|>`, true},
		{16, "<unused0>", true}, {17, "<extra>", false}, {18, "<image>", true},
	} {
		added = append(added, map[string]any{"id": a.id, "content": a.content, "special": a.special, "normalized": false})
	}
	return map[string]any{
		"tokenizer.json": map[string]any{
			"version":      "1.0",
			"added_tokens": added,
			"normalizer":   map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"},
			"pre_tokenizer": map[string]any{"type": "Split", "pattern": map[string]any{"String": " "},
				"behavior": "MergedWithPrevious", "invert": false},
			"decoder": map[string]any{"type": "Sequence", "decoders": []any{
				map[string]any{"type": "Replace", "pattern": map[string]any{"String": "▁"}, "content": " "},
				map[string]any{"type": "ByteFallback"}, map[string]any{"type": "Fuse"},
			}},
			"model": map[string]any{"type": "BPE", "byte_fallback": true, "fuse_unk": true, "unk_token": "<unk>",
				"vocab": vocab, "merges": [][2]string{{"a", "b"}, {"▁", "a"}}},
		},
		"tokenizer_config.json": map[string]any{
			"backend": "tokenizers", "tokenizer_class": "GemmaTokenizer", "add_bos_token": false,
			"bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>", "pad_token": "<pad>", "mask_token": "<mask>",
			"sot_token": "<|turn>", "eot_token": "<turn|>", "str_token": "<|tool_response>", "escape_token": `<|"|>`,
			"extra_special_tokens": []string{"<image>"},
		},
	}
}

// TestTokenizerGemma4 imports gemma4Files as a Gemma 4 class and checks
// the keys against what llama.cpp's converter writes (Gemma4Model.set_vocab
// with gguf-py's LlamaHfVocab and SpecialVocab): model "gemma4" and no
// pre-tokenizer; every score -1000; of the model's vocabulary, bytes, the
// special tokens (transformers' all_special_tokens) control and the rest
// normal, added tokens past it control if special and user-defined if not,
// and the tokens a chat parser reads user-defined; the merges; the special
// ids tokenizer_config.json names, mask included; add_bos_token true though
// the file says false; and add_space_prefix false.
func TestTokenizerGemma4(t *testing.T) {
	vi, err := loadVocab(tokDir(t, gemma4Files()), gemma4HP(20), "")
	if err != nil {
		t.Fatal(err)
	}
	v := vi.vocab
	if vi.source != "tokenizer.json" || v.Model != tokenizer.ModelGemma4 || v.Pre != "" {
		t.Fatalf("source %q model %q pre %q, want tokenizer.json as gemma4 without pre", vi.source, v.Model, v.Pre)
	}
	C, U, N, B, X := tokenizer.Control, tokenizer.UserDefined, tokenizer.Normal, tokenizer.Byte, tokenizer.Unused
	wantTypes := []tokenizer.TokenType{C, C, C, C, C, C, C, U, U, B, B, N, N, N, N, N, N, U, C, X}
	if !slices.Equal(v.Types, wantTypes) {
		t.Errorf("types %v\nwant  %v", v.Types, wantTypes)
	}
	if len(v.Tokens) != 20 || v.Tokens[17] != "<extra>" || v.Tokens[18] != "<image>" || v.Tokens[19] != "[PAD19]" {
		t.Errorf("tokens %q", v.Tokens)
	}
	if len(v.Scores) != 20 || slices.ContainsFunc(v.Scores, func(s float32) bool { return s != -1000 }) {
		t.Errorf("scores %v, want -1000 each", v.Scores)
	}
	if !slices.Equal(v.Merges, []string{"a b", "▁ a"}) {
		t.Errorf("merges %q", v.Merges)
	}
	if v.BOS != 2 || v.EOS != 1 || v.UNK != 3 || v.PAD != 0 || v.MASK != 4 || v.EOT != tokenizer.None {
		t.Errorf("bos %d eos %d unk %d pad %d mask %d eot %d", v.BOS, v.EOS, v.UNK, v.PAD, v.MASK, v.EOT)
	}
	if !v.AddBOS || v.AddEOS || v.AddSpacePrefix {
		t.Errorf("add_bos %v add_eos %v add_space_prefix %v, want true false false", v.AddBOS, v.AddEOS, v.AddSpacePrefix)
	}
	var buf bytes.Buffer
	w := gguf.NewWriter(&buf)
	if err := errors.Join(v.WriteGGUF(w), w.Close()); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	// The converter's keys, and add_eos_token, which Hearth always writes.
	want := []string{tokenizer.KeyModel, tokenizer.KeyTokens, tokenizer.KeyScores, tokenizer.KeyTokenType, tokenizer.KeyMerges,
		tokenizer.KeyBOS, tokenizer.KeyEOS, tokenizer.KeyUNK, tokenizer.KeyPAD, tokenizer.KeyMASK,
		tokenizer.KeyAddBOS, tokenizer.KeyAddEOS, tokenizer.KeyAddSpacePrefix}
	slices.Sort(want)
	if got := tokenizerKeys(f); !slices.Equal(got, want) {
		t.Errorf("keys %q\nwant %q", got, want)
	}
	if _, err := tokenizer.FromGGUF(f); err != nil {
		t.Errorf("the imported vocabulary does not load: %v", err)
	}
}

// TestTokenizerGemma4MatchesHuggingFace imports the tiny Gemma 4 tokenizer
// folder as a Gemma 4 class, as hearth import does, and checks that the
// tokenizer it writes encodes each reference text to the ids Hugging Face
// tokenizers gave with that folder's tokenizer.json (special tokens read,
// BOS left to the caller as add_special_tokens=False does).
func TestTokenizerGemma4MatchesHuggingFace(t *testing.T) {
	var refs struct {
		Vocabularies map[string]struct {
			Cases []struct {
				Text  string  `json:"text"`
				HFIDs []int32 `json:"hf_ids"`
			} `json:"cases"`
		} `json:"vocabularies"`
	}
	raw, err := os.ReadFile(filepath.Join(gemma4Tiny, "..", "refs-gemma4.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &refs); err != nil {
		t.Fatal(err)
	}
	files := map[string]any{}
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json"} {
		if files[name], err = os.ReadFile(filepath.Join(gemma4Tiny, name)); err != nil {
			t.Fatal(err)
		}
	}
	cases := refs.Vocabularies["gemma4-tiny"].Cases
	vi, err := loadVocab(tokDir(t, files), gemma4HP(1<<10), "")
	if err != nil {
		t.Fatal(err)
	}
	if vi.vocab.Model != tokenizer.ModelGemma4 {
		t.Fatalf("model %q, want gemma4", vi.vocab.Model)
	}
	tok, err := tokenizer.New(vi.vocab)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i, c := range cases {
		if c.HFIDs == nil {
			continue // raw bytes: llama.cpp's cases only
		}
		n++
		if got := tok.Encode(c.Text, tokenizer.EncodeOptions{ParseSpecial: true}); !slices.Equal(got, c.HFIDs) {
			t.Errorf("case %d Encode(%q):\n got %v\nwant %v (Hugging Face)", i, c.Text, got, c.HFIDs)
		}
	}
	if n < 20 {
		t.Errorf("%d Hugging Face cases in refs-gemma4.json, want the 28 of make_gemma4_refs.py", n)
	}
}

// tokenizerKeys are the tokenizer.ggml.* keys of f, sorted.
func tokenizerKeys(f *gguf.File) []string {
	var ks []string
	for _, k := range f.Keys() {
		if strings.HasPrefix(k, "tokenizer.ggml.") {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	return ks
}

// TestTokenizerGemma4Form: the SentencePiece-style tokenizer.json is Gemma
// 4's only for a Gemma 4 class (Gemma 2 and 3 write the same form and are
// converted from tokenizer.model); a Gemma 4 class with a byte-level
// tokenizer.json keeps "gpt2"; and a Gemma 4 tokenizer.json without merges
// is refused, naming the key llama.cpp needs.
func TestTokenizerGemma4Form(t *testing.T) {
	if _, err := loadVocab(tokDir(t, gemma4Files()), &hparams{vocab: 20}, ""); err == nil || !strings.Contains(err.Error(), "tokenizer.model") {
		t.Errorf("another class with Gemma 4's tokenizer.json and no tokenizer.model: err = %v, want the one asking for tokenizer.model", err)
	}

	vi, err := loadVocab(tokDir(t, map[string]any{"tokenizer.json": tinyTokenizer()}), gemma4HP(8), "")
	if err != nil {
		t.Fatal(err)
	}
	if vi.vocab.Model != tokenizer.ModelBPE || vi.vocab.Pre != "gpt-2" {
		t.Errorf("Gemma 4 class, byte-level tokenizer.json: model %q pre %q, want gpt2 / gpt-2", vi.vocab.Model, vi.vocab.Pre)
	}

	files := gemma4Files()
	files["tokenizer.json"].(map[string]any)["model"].(map[string]any)["merges"] = []any{}
	if _, err := loadVocab(tokDir(t, files), gemma4HP(20), ""); err == nil || !strings.Contains(err.Error(), tokenizer.KeyMerges) {
		t.Errorf("Gemma 4 tokenizer.json without merges: err = %v, want one naming %s", err, tokenizer.KeyMerges)
	}
}

// TestAllSpecialTokens reads transformers' all_special_tokens from the
// forms tokenizer_config.json gives them in.
func TestAllSpecialTokens(t *testing.T) {
	tcfg := object{file: "tokenizer_config.json", m: map[string]any{
		"bos_token":            "<bos>",
		"eos_token":            map[string]any{"content": "<eos>", "special": true},
		"pad_token":            nil,
		"eot_token":            "<turn|>",
		"add_bos_token":        false,
		"extra_special_tokens": []any{"<|video|>", map[string]any{"content": "<x>"}},
		"additional_special_tokens": map[string]any{
			"image_token": "<|image|>",
		},
		"chat_template": "{{ bos_token }}",
	}}
	got, err := allSpecialTokens(tcfg)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"<bos>", "<eos>", "<turn|>", "<x>", "<|image|>", "<|video|>"}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("all special tokens %q, want %q", got, want)
	}
}
