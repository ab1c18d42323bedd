package tokenizer

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/hearthstudio/hearth/gguf"
	"github.com/hearthstudio/hearth/internal/sharedtest"
)

// refTokenizer is one of the reference vocabularies of
// shared/testdata/tokenizer and how a converter turns it into GGUF metadata.
type refTokenizer struct {
	name    string // the key in refs-*.json
	file    string
	pre     string            // tokenizer.ggml.pre for a tokenizer.json
	special map[string]string // special ids that tokenizer_config.json would give, by role
}

var refTokenizers = []refTokenizer{
	{name: "llama3-bpe", file: "llama3-bpe.tokenizer.json", pre: "llama-bpe", special: map[string]string{
		"bos": "<|begin_of_text|>", "eos": "<|end_of_text|>", "eot": "<|eot_id|>", "eom": "<|eom_id|>",
	}},
	{name: "qwen2-bpe", file: "qwen2-bpe.tokenizer.json", pre: "qwen2", special: map[string]string{
		"eos": "<|im_end|>", "pad": "<|endoftext|>",
	}},
	{name: "gemma-spm", file: "gemma-spm.model"},
	{name: "llama-spm", file: "llama-spm.model"},
}

// convert reads a reference file into a Vocab as llama.cpp's converter
// would.
func (r refTokenizer) convert(tb testing.TB) *Vocab {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(sharedtest.Dir(tb, "tokenizer"), r.file))
	if err != nil {
		tb.Fatal(err)
	}
	if filepath.Ext(r.file) == ".model" {
		v, err := FromSentencePiece(data)
		if err != nil {
			tb.Fatalf("%s: %v", r.file, err)
		}
		return v
	}
	v, err := FromHFTokenizerJSON(data, r.pre)
	if err != nil {
		tb.Fatalf("%s: %v", r.file, err)
	}
	byText := map[string]int32{}
	for i, t := range v.Tokens {
		byText[t] = int32(i)
	}
	for role, text := range r.special {
		id, ok := byText[text]
		if !ok {
			tb.Fatalf("%s: special token %q not in the vocabulary", r.file, text)
		}
		switch role {
		case "bos":
			v.BOS = id
		case "eos":
			v.EOS = id
		case "eot":
			v.EOT = id
		case "eom":
			v.EOM = id
		case "pad":
			v.PAD = id
		}
	}
	return v
}

// ggufFile writes v as the tokenizer metadata of a GGUF file of
// architecture arch ("" for none) and reads the file back.
func ggufFile(tb testing.TB, v *Vocab, arch string) *gguf.File {
	tb.Helper()
	var buf bytes.Buffer
	w := gguf.NewWriter(&buf)
	if arch != "" {
		if err := w.SetString("general.architecture", arch); err != nil {
			tb.Fatal(err)
		}
	}
	if err := v.WriteGGUF(w); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	f, err := gguf.Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

// viaGGUF writes v as the tokenizer metadata of a GGUF file, reads the file
// back and builds the tokenizer from what was read, as a model load does.
func viaGGUF(tb testing.TB, v *Vocab) *Tokenizer {
	tb.Helper()
	tok, err := FromGGUF(ggufFile(tb, v, "llama"))
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// mustID is the token whose text is s.
func mustID(tb testing.TB, tok *Tokenizer, s string) int32 {
	tb.Helper()
	id, ok := tok.ID(s)
	if !ok {
		tb.Fatalf("no token %q", s)
	}
	return id
}

// readTestJSON reads testdata/name into v.
func readTestJSON(tb testing.TB, name string, v any) {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
}

// caseText is a reference case's text: text, or the bytes hexText spells
// where it is set (a text that is not UTF-8).
func caseText(tb testing.TB, text, hexText string) string {
	tb.Helper()
	if hexText == "" {
		return text
	}
	b, err := hex.DecodeString(hexText)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// refCache holds the converted reference tokenizers: converting the
// 128k-token Llama 3 vocabulary takes most of a second, and several tests
// use it.
var refCache sync.Map // name → func() *Tokenizer

func refTok(tb testing.TB, name string) *Tokenizer {
	tb.Helper()
	for _, r := range refTokenizers {
		if r.name != name {
			continue
		}
		f, _ := refCache.LoadOrStore(name, sync.OnceValue(func() *Tokenizer { return viaGGUF(tb, r.convert(tb)) }))
		return f.(func() *Tokenizer)()
	}
	tb.Fatalf("no reference tokenizer %q", name)
	return nil
}

type refCase struct {
	Text string  `json:"text"`
	IDs  []int32 `json:"ids"`
}

// loadRefs reads every refs-*.json of shared/testdata/tokenizer, so a
// reference file added there is checked without a code change.
func loadRefs(tb testing.TB) map[string][]refCase {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(sharedtest.Dir(tb, "tokenizer"), "refs-*.json"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no refs-*.json in shared/testdata/tokenizer (%v)", err)
	}
	all := map[string][]refCase{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			tb.Fatal(err)
		}
		var refs map[string][]refCase
		if err := json.Unmarshal(data, &refs); err != nil {
			tb.Fatalf("%s: %v", file, err)
		}
		for k, v := range refs {
			all[k] = append(all[k], v...)
		}
	}
	return all
}

// refOptions are the options under which Encode is the reference
// library's call that made the ids: Hugging Face tokenizers' encode with
// add_special_tokens=False still reads special tokens in the text;
// sentencepiece's encode never reads control symbols.
func refOptions(tok *Tokenizer) EncodeOptions {
	return EncodeOptions{ParseSpecial: tok.Vocab().Model == ModelBPE}
}

// TestEncodeMatchesReference checks every reference tokenization id for id,
// through a GGUF written and read back, and that decoding gives the text
// back.
func TestEncodeMatchesReference(t *testing.T) {
	refs := loadRefs(t)
	for _, r := range refTokenizers {
		t.Run(r.name, func(t *testing.T) {
			cases := refs[r.name]
			if len(cases) == 0 {
				t.Fatalf("no references for %s", r.name)
			}
			tok := refTok(t, r.name)
			matched := 0
			for i, c := range cases {
				got := tok.Encode(c.Text, refOptions(tok))
				if !slices.Equal(got, c.IDs) {
					t.Errorf("case %d %q:\n got %v\nwant %v", i, clip(c.Text), got, c.IDs)
					continue
				}
				matched++
				back, err := tok.Decode(got, DecodeOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if back != c.Text {
					t.Errorf("case %d: Decode(Encode(%q)) = %q", i, clip(c.Text), clip(back))
				}
			}
			t.Logf("%s: %d/%d reference tokenizations match", r.name, matched, len(cases))
		})
	}
}

// TestStreamingDecode feeds the reference tokenizations one token at a
// time: every chunk must be valid UTF-8 (emoji and CJK span several byte
// tokens) and the chunks must add up to the text.
func TestStreamingDecode(t *testing.T) {
	refs := loadRefs(t)
	for _, r := range refTokenizers {
		t.Run(r.name, func(t *testing.T) {
			tok := refTok(t, r.name)
			for i, c := range refs[r.name] {
				d := tok.NewDecoder(DecodeOptions{})
				var got []byte
				for _, id := range c.IDs {
					s, err := d.Next(id)
					if err != nil {
						t.Fatal(err)
					}
					if !utf8.ValidString(s) {
						t.Fatalf("case %d: token %d gave invalid UTF-8 %q", i, id, s)
					}
					got = append(got, s...)
				}
				got = append(got, d.Flush()...)
				if string(got) != c.Text {
					t.Errorf("case %d: streamed %q, want %q", i, clip(string(got)), clip(c.Text))
				}
			}
		})
	}
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}
