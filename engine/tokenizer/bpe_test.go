package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/internal/sharedtest"
)

// TestPreTokenizerPatternsMatchTokenizerJSON checks that the pattern this
// package runs for llama-bpe and qwen2 is the one in the vocabulary's own
// tokenizer.json, which the reference library ran to make the references.
func TestPreTokenizerPatternsMatchTokenizerJSON(t *testing.T) {
	for _, r := range refTokenizers {
		if r.pre == "" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(sharedtest.Dir(t, "tokenizer"), r.file))
		if err != nil {
			t.Fatal(err)
		}
		var hf struct {
			PreTokenizer struct {
				Pretokenizers []struct {
					Type    string `json:"type"`
					Pattern struct {
						Regex string `json:"Regex"`
					} `json:"pattern"`
				} `json:"pretokenizers"`
			} `json:"pre_tokenizer"`
		}
		if err := json.Unmarshal(data, &hf); err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, p := range hf.PreTokenizer.Pretokenizers {
			if p.Type == "Split" {
				want = append(want, p.Pattern.Regex)
			}
		}
		spec, _ := preSpecFor(r.pre)
		if !slices.Equal(spec.patterns, want) {
			t.Errorf("%s (%s): patterns\n %q\nwant %q", r.pre, r.file, spec.patterns, want)
		}
	}
}

// TestPreTokenizerSplits runs every named pre-tokenizer on text whose
// split follows from the pattern's definition: contractions, digit
// grouping, letter case runs, CJK, whitespace before a word.
func TestPreTokenizerSplits(t *testing.T) {
	tests := []struct {
		pre, in string
		want    []string
	}{
		{"gpt-2", "Hello world's 123  x!!", []string{"Hello", " world", "'s", " 123", " ", " x", "!!"}},
		{"gpt-2", "a\tb", []string{"a", "\t", "b"}},
		{"llama-bpe", "I'M 1234567 ok\n\n  x", []string{"I", "'M", " ", "123", "456", "7", " ok", "\n\n", " ", " x"}},
		{"llama-bpe", "trailing   ", []string{"trailing", "   "}},
		{"qwen2", "v2026 αβγ", []string{"v", "2", "0", "2", "6", " αβγ"}},
		{"smollm", "x 42", []string{"x", " ", "4", "2"}},
		{"command-r", "ab12", []string{"ab", "1", "2"}},
		{"default", "a+b=42", []string{"a", "+", "b", "=", "42"}},
		{"default", "1234567", []string{"123", "456", "7"}},
		{"tekken", "HelloWorld ABCdef helloWORLD", []string{"Hello", "World", " ABCdef", " hello", "WORLD"}},
		{"tekken", "a/b\n/", []string{"a", "/b", "\n", "/"}},
		{"deepseek-llm", "Hello 世界123!\nx", []string{"Hello", " ", "世界", "123", "!", "\n", "x"}},
		{"gpt-4o", "HELLO's 12345", []string{"HELLO's", " ", "123", "45"}},
		{"falcon", "a,b 1234", []string{"a", ",", "b", " ", "123", "4"}},
		{"bloom", "hi, you", []string{"hi", ",", " you"}},
	}
	for _, tc := range tests {
		p, err := newPreTokenizer(tc.pre)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		p.split(tc.in, func(w []rune) { got = append(got, string(w)) })
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: split(%q) = %q, want %q", tc.pre, tc.in, got, tc.want)
		}
		if strings.Join(got, "") != tc.in {
			t.Errorf("%s: split(%q) lost text", tc.pre, tc.in)
		}
	}
}

// TestEveryPreTokenizerCompiles builds each pre-tokenizer name this package
// knows and checks it keeps all of a mixed text.
func TestEveryPreTokenizerCompiles(t *testing.T) {
	names := []string{"", "default", "llama-bpe", "llama3", "dbrx", "smaug-bpe", "chatglm-bpe", "glm4",
		"qwen2", "deepseek-r1-qwen", "megrez", "kormo", "stablelm2", "hunyuan", "grok-2",
		"gpt-2", "phi-2", "mpt", "olmo", "jais", "trillion", "granite-docling", "exaone4",
		"jina-es", "jina-de", "jina-v2-es", "jina-v2-de", "jina-v1-en", "jina-v2-code", "roberta-bpe",
		"gigachat", "a.x-4.0", "mellum",
		"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b",
		"falcon", "deepseek-llm", "deepseek-coder", "deepseek-v3", "hunyuan-dense",
		"poro-chat", "bloom", "gpt3-finnish", "viking", "tekken", "gpt-4o", "llama4", "minimax-m2"}
	text := "Hello, World! It's 2026-12-02.\n\t  日本語 🙂 naïve\xff end  "
	for _, name := range names {
		p, err := newPreTokenizer(name)
		if err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		var got []rune
		p.split(text, func(w []rune) { got = append(got, w...) })
		if string(got) != strings.ToValidUTF8(text, "\uFFFD") {
			t.Errorf("%q: split lost text: %q", name, string(got))
		}
	}
	if _, err := newPreTokenizer("no-such-pre"); err == nil || !strings.Contains(err.Error(), KeyPre) {
		t.Errorf("unknown pre-tokenizer: err = %v, want one naming %s", err, KeyPre)
	}
}

// TestSpecialTokensBPE checks that control tokens in text are tokens only
// with ParseSpecial, and decode to text only with Special.
func TestSpecialTokensBPE(t *testing.T) {
	tok := refTok(t, "llama3-bpe")
	id := func(s string) int32 { return mustID(t, tok, s) }
	plain := func(s string) []int32 { return tok.Encode(s, EncodeOptions{}) }
	prompt := "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
	tests := []struct {
		name string
		in   string
		opts EncodeOptions
		want []int32
	}{
		{"parse special", prompt, EncodeOptions{ParseSpecial: true},
			slices.Concat([]int32{id("<|start_header_id|>")}, plain("user"), []int32{id("<|end_header_id|>")}, plain("\n\nhi"), []int32{id("<|eot_id|>")})},
		{"add bos", "hi", EncodeOptions{AddSpecial: true}, slices.Concat([]int32{tok.BOS()}, plain("hi"))},
		{"adjacent specials", "<|eot_id|><|eot_id|>", EncodeOptions{ParseSpecial: true}, []int32{id("<|eot_id|>"), id("<|eot_id|>")}},
		{"partial special", "<|eot_id", EncodeOptions{ParseSpecial: true}, plain("<|eot_id")},
	}
	for _, tc := range tests {
		if got := tok.Encode(tc.in, tc.opts); !slices.Equal(got, tc.want) {
			t.Errorf("%s: Encode(%q) = %v, want %v", tc.name, tc.in, got, tc.want)
		}
	}
	// Without ParseSpecial a special token's text is text: no control id,
	// and it decodes back to itself.
	ids := plain(prompt)
	for _, i := range ids {
		if tok.Type(i) == Control {
			t.Fatalf("Encode without ParseSpecial produced control token %d in %v", i, ids)
		}
	}
	if s, _ := tok.Decode(ids, DecodeOptions{}); s != prompt {
		t.Errorf("Decode(Encode(%q)) = %q", prompt, s)
	}
	special := tok.Encode(prompt, EncodeOptions{ParseSpecial: true})
	for _, tc := range []struct {
		opts DecodeOptions
		want string
	}{{DecodeOptions{}, "user\n\nhi"}, {DecodeOptions{Special: true}, prompt}} {
		if s, _ := tok.Decode(special, tc.opts); s != tc.want {
			t.Errorf("Decode(%v, %+v) = %q, want %q", special, tc.opts, s, tc.want)
		}
	}
	// An invalid byte reads as U+FFFD, as in llama.cpp.
	if got, want := plain("a\xffb"), plain("a\uFFFDb"); !slices.Equal(got, want) {
		t.Errorf("Encode(a\\xffb) = %v, want %v", got, want)
	}
	if _, err := tok.Decode([]int32{int32(tok.Size())}, DecodeOptions{}); err == nil {
		t.Error("Decode of an id outside the vocabulary: no error")
	}
}

// TestDecoderHoldsPartialCharacters streams the byte tokens of a 4-byte
// emoji: nothing comes out until its last byte.
func TestDecoderHoldsPartialCharacters(t *testing.T) {
	tok := refTok(t, "llama3-bpe")
	bl := newByteLevel()
	emoji := "🙂"
	d := tok.NewDecoder(DecodeOptions{})
	for i := 0; i < len(emoji); i++ {
		id, ok := tok.ID(string(bl.toRune[emoji[i]]))
		if !ok {
			t.Fatalf("no byte token for %#x", emoji[i])
		}
		s, err := d.Next(id)
		if err != nil {
			t.Fatal(err)
		}
		want := ""
		if i == len(emoji)-1 {
			want = emoji
		}
		if s != want {
			t.Errorf("after byte %d: %q, want %q", i, s, want)
		}
	}
	// A character cut short at the end of the stream is U+FFFD.
	id, _ := tok.ID(string(bl.toRune[0xF0]))
	if s, _ := d.Next(id); s != "" {
		t.Errorf("lead byte alone: %q", s)
	}
	if s := d.Flush(); s != "\uFFFD" {
		t.Errorf("Flush = %q, want U+FFFD", s)
	}
}

// TestLossy checks the two replacement rules against Python's
// bytes.decode("utf-8", "replace"), which follows the same maximal-subpart
// rule as Rust's from_utf8_lossy, and sentencepiece's one per byte.
func TestLossy(t *testing.T) {
	tests := []struct {
		in               string
		maximal, perByte string
	}{
		{"\xe2\x82a", "\uFFFDa", "\uFFFD\uFFFDa"},
		{"\xff\xfe", "\uFFFD\uFFFD", "\uFFFD\uFFFD"},
		{"\xed\xa0\x80", "\uFFFD\uFFFD\uFFFD", "\uFFFD\uFFFD\uFFFD"},
		{"\xf0\x9f\x98", "\uFFFD", "\uFFFD\uFFFD\uFFFD"},
		{"\xf0\x9f\x98\x80", "😀", "😀"},
		{"\xc0\xaf", "\uFFFD\uFFFD", "\uFFFD\uFFFD"},
		{"\xe0\x80\x80", "\uFFFD\uFFFD\uFFFD", "\uFFFD\uFFFD\uFFFD"},
		{"\xf4\x90\x80\x80", "\uFFFD\uFFFD\uFFFD\uFFFD", "\uFFFD\uFFFD\uFFFD\uFFFD"},
		{"a\x80b", "a\uFFFDb", "a\uFFFDb"},
		{"\xf0\x9fA", "\uFFFDA", "\uFFFD\uFFFDA"},
		{"ok \uFFFD", "ok \uFFFD", "ok \uFFFD"},
	}
	for _, tc := range tests {
		if got := lossy([]byte(tc.in), false); got != tc.maximal {
			t.Errorf("lossy(%q) = %q, want %q", tc.in, got, tc.maximal)
		}
		if got := lossy([]byte(tc.in), true); got != tc.perByte {
			t.Errorf("lossy(%q, per byte) = %q, want %q", tc.in, got, tc.perByte)
		}
	}
	// completePrefix holds back exactly an unfinished character.
	for _, tc := range []struct {
		in   string
		want int
	}{{"ab", 2}, {"a\xe2\x82", 1}, {"a\xf0\x9f\x98", 1}, {"a\xe2\x82\xac", 4}, {"a\xff", 2}, {"a\xe2a", 3}, {"\xed\xa0", 2}} {
		if got := completePrefix([]byte(tc.in)); got != tc.want {
			t.Errorf("completePrefix(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// TestBPEMergePathsAgree checks that the scan used for short words and the
// heap used for long ones merge every word of the references the same way.
func TestBPEMergePathsAgree(t *testing.T) {
	refs := loadRefs(t)
	for _, name := range []string{"llama3-bpe", "qwen2-bpe"} {
		tok := refTok(t, name)
		var sc bpeScratch
		for _, c := range refs[name] {
			tok.bpe.pre.split(c.Text, func(w []rune) {
				word := []byte(string(w))
				small := tok.bpe.encodeSmallWord(word, nil, &sc)
				long := tok.bpe.encodeLongWord(word, nil, &sc)
				if !slices.Equal(small, long) {
					t.Errorf("%s: word %q: scan %v, heap %v", name, word, small, long)
				}
			})
		}
	}
}
