package tokenizer

import (
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hearthstudio/hearth/gguf"
)

// handVocab is a small Gemma-4-style vocabulary whose tokenizations
// TestGemma4HandDerived works out by hand: Gemma 4's special tokens, the 256
// byte tokens, newline runs, and pieces with merges that build "hello" and
// "▁world". Ids: 0–5 control, 6 <|tool_response> and 7 <|"|> user-defined
// (as llama.cpp's converter writes them), byte b is 8+b, then handPieces
// from 264.
func handVocab() *Vocab {
	v := NewVocab(ModelGemma4)
	add := func(text string, typ TokenType) {
		v.Tokens = append(v.Tokens, text)
		v.Types = append(v.Types, typ)
	}
	for _, s := range []string{"<pad>", "<eos>", "<bos>", "<unk>", "<|turn>", "<turn|>"} {
		add(s, Control)
	}
	add("<|tool_response>", UserDefined)
	add(`<|"|>`, UserDefined)
	for b := 0; b < 256; b++ {
		add(fmt.Sprintf("<0x%02X>", b), Byte)
	}
	for _, s := range handPieces {
		add(s, Normal)
	}
	v.Merges = []string{
		"h e", "l l", "he ll", "hell o", // hello
		"▁ w", "o r", "▁w or", "▁wor l", "▁worl d", // ▁world
		"▁ ▁", "\n \n", // no merge makes "\n\n\n"
	}
	v.PAD, v.EOS, v.BOS, v.UNK = 0, 1, 2, 3
	return v
}

var handPieces = []string{
	"▁", "\n", "\n\n", "\n\n\n", "h", "e", "l", "o", "w", "r", "d",
	"he", "ll", "hell", "hello", "▁w", "or", "▁wor", "▁worl", "▁world", "▁▁",
}

// TestGemma4HandDerived checks encodings worked out by hand from
// handVocab's merges, as llama.cpp's BPE session makes them: spaces become
// "▁" and merge with what follows, the lowest rank merges first, a run of
// newlines that is a token stays whole, and a character without a token
// falls back to its bytes.
func TestGemma4HandDerived(t *testing.T) {
	tok := viaGGUF(t, handVocab())
	id := func(s string) int32 { return mustID(t, tok, s) }
	b := func(s string) []int32 { // the byte tokens of s
		var ids []int32
		for i := 0; i < len(s); i++ {
			ids = append(ids, 8+int32(s[i]))
		}
		return ids
	}
	// chars is s character by character where no merge applies: a
	// character's token, or its bytes.
	chars := func(s string) []int32 {
		var ids []int32
		for _, r := range s {
			if i, ok := tok.ID(string(r)); ok {
				ids = append(ids, i)
			} else {
				ids = append(ids, b(string(r))...)
			}
		}
		return ids
	}
	const bos = 2
	tests := []struct {
		name, in string
		plain    bool // ParseSpecial off
		want     []int32
	}{
		// h e l l o ▁ w o r l d: "h e" (rank 0), "l l" (1), "he ll" (2),
		// "hell o" (3), "▁ w" (4), "o r" (5), then ▁w+or, +l, +d.
		{"words", "hello world", false, []int32{bos, id("hello"), id("▁world")}},
		// No merge joins "▁" to "h" or "o" to "▁".
		{"leading and trailing space", " hello ", false, []int32{bos, id("▁"), id("hello"), id("▁")}},
		// "▁ w" (rank 4) goes before "▁ ▁" (rank 9), which then has no pair.
		{"two spaces", "hello  world", false, []int32{bos, id("hello"), id("▁"), id("▁world")}},
		{"spaces only", "  ", false, []int32{bos, id("▁▁")}},
		// No merge builds "\n\n\n" ("\n \n" only): llama.cpp takes the
		// run whole because it is a token.
		{"newline run that is a token", "\n\n\n", false, []int32{bos, id("\n\n\n")}},
		// Four newlines are no token: "\n \n" twice, leftmost first.
		{"newline run that is none", "\n\n\n\n", false, []int32{bos, id("\n\n"), id("\n\n")}},
		// Lines merge apart; "world" has no "▁", and no merge "w or".
		{"lines", "hello\n\n\nworld", false, []int32{bos, id("hello"), id("\n\n\n"), id("w"), id("or"), id("l"), id("d")}},
		// "é" has no token: its two bytes.
		{"byte fallback", "hé", false, slices.Concat([]int32{bos, id("h")}, b("é"))},
		{"emoji", "🙂", false, slices.Concat([]int32{bos}, b("🙂"))},
		{"invalid UTF-8 reads as U+FFFD", "o\xffo", false, slices.Concat([]int32{bos, id("o")}, b("\uFFFD"), []int32{id("o")})},
		{"control tokens parsed", "<|turn>hi<turn|>", false, slices.Concat([]int32{bos, 4, id("h")}, b("i"), []int32{5})},
		{"control tokens as text", "<turn|>", true, slices.Concat([]int32{bos}, chars("<turn|>"))},
		// A user-defined token is matched in text either way, unless it is
		// one of llama.cpp's end-of-generation tokens, which it makes
		// control tokens on loading.
		{"user-defined", `o<|"|>`, true, []int32{bos, id("o"), 7}},
		{"end of generation as text", "<|tool_response>", true, slices.Concat([]int32{bos}, chars("<|tool_response>"))},
		{"end of generation parsed", "<|tool_response>", false, []int32{bos, 6}},
		{"empty", "", false, []int32{bos}},
	}
	for _, tc := range tests {
		got := tok.Encode(tc.in, EncodeOptions{AddSpecial: true, ParseSpecial: !tc.plain})
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: Encode(%q) = %v, want %v", tc.name, tc.in, got, tc.want)
		}
	}

	for _, tc := range []struct {
		ids  []int32
		opts DecodeOptions
		want string
	}{
		{[]int32{bos, id("hello"), id("▁world")}, DecodeOptions{}, "hello world"},
		{[]int32{bos, id("hello"), id("▁world")}, DecodeOptions{Special: true}, "<bos>hello world"},
		{[]int32{id("▁▁"), id("\n\n\n")}, DecodeOptions{}, "  \n\n\n"},
		{[]int32{6, 7}, DecodeOptions{}, `<|"|>`},
		{[]int32{6, 7}, DecodeOptions{Special: true}, `<|tool_response><|"|>`},
		// Bytes that make no character are one U+FFFD each, as Hugging
		// Face's ByteFallback decoder writes them.
		{slices.Concat(b("\xf0\x9f"), []int32{id("o")}), DecodeOptions{}, "\uFFFD\uFFFDo"},
	} {
		got, err := tok.Decode(tc.ids, tc.opts)
		if err != nil || got != tc.want {
			t.Errorf("Decode(%v, %+v) = %q, %v; want %q", tc.ids, tc.opts, got, err, tc.want)
		}
	}
	if typ := tok.Type(6); typ != Control {
		t.Errorf("<|tool_response> is %v, want control (llama.cpp makes end-of-generation tokens control)", typ)
	}
}

// TestGemma4RoundTrip decodes the encoding of texts back to themselves,
// streamed token by token too.
func TestGemma4RoundTrip(t *testing.T) {
	tok := viaGGUF(t, handVocab())
	texts := []string{
		"hello world", "  hello  world  ", "\n", "\n\n\n\n\n hello\n", "héllo wörld 🙂 日本語 \t\r\n",
		`<|turn>user<turn|> <|"|> <|tool_response>`, strings.Repeat("hello world ", 20),
	}
	for _, text := range texts {
		for _, parse := range []bool{false, true} {
			ids := tok.Encode(text, EncodeOptions{ParseSpecial: parse})
			got, err := tok.Decode(ids, DecodeOptions{Special: true})
			if err != nil || got != text {
				t.Errorf("Decode(Encode(%q, parse special %v)) = %q, %v", text, parse, got, err)
			}
			d := tok.NewDecoder(DecodeOptions{Special: true})
			var sb strings.Builder
			for _, id := range ids {
				s, err := d.Next(id)
				if err != nil || !utf8.ValidString(s) {
					t.Fatalf("streaming %q: token %d gave %q, %v", text, id, s, err)
				}
				sb.WriteString(s)
			}
			if sb.WriteString(d.Flush()); sb.String() != text {
				t.Errorf("streamed %q, want %q", sb.String(), text)
			}
		}
	}
}

// TestGemma4RefusesVocabWithoutMerges: llama.cpp refuses a gemma4 file
// without tokenizer.ggml.merges, and so does FromGGUF, naming the key.
func TestGemma4RefusesVocabWithoutMerges(t *testing.T) {
	v := handVocab()
	v.Merges = nil
	f := ggufFile(t, v, "gemma4")
	if _, ok := f.Value(KeyMerges); ok {
		t.Fatalf("the file has %s", KeyMerges)
	}
	_, err := FromGGUF(f)
	if err == nil || !strings.Contains(err.Error(), KeyMerges) || !strings.Contains(err.Error(), ModelGemma4) {
		t.Errorf("FromGGUF of a gemma4 vocabulary without merges: err = %v, want one naming %s", err, KeyMerges)
	}
	// A byte token that is not <0xXX> is refused too.
	v = handVocab()
	v.Types[slices.Index(v.Tokens, "he")] = Byte
	if _, err := New(v); err == nil || !strings.Contains(err.Error(), `"he"`) {
		t.Errorf("New with byte token \"he\": err = %v", err)
	}
}

// TestGemma4MergePathsAgree checks that the scan used for short words and
// the heap used for long ones merge every line the same way, with
// characters that have no token among them.
func TestGemma4MergePathsAgree(t *testing.T) {
	tok := viaGGUF(t, handVocab())
	var sc bpeScratch
	for _, line := range []string{
		"hello world", "hello  world hé", strings.Repeat("hello world🙂 ", 9), strings.Repeat("▁", 60),
		strings.Repeat("lo", 40) + "hello", "日本語 hello world 日本語 hello world 日本語 hello",
	} {
		word := []byte(strings.ReplaceAll(line, " ", spaceMarker))
		small := tok.bpe.encodeSmallWord(word, nil, &sc)
		long := tok.bpe.encodeLongWord(word, nil, &sc)
		if !slices.Equal(small, long) {
			t.Errorf("%q: scan %v, heap %v", line, small, long)
		}
	}
}

// gemma4Refs is testdata/refs-gemma4.json, made by make_gemma4_refs.py in
// two runs: gemma4-tiny with transformers (testdata/gemma4-tiny/, the
// tokenizer files transformers saves for Gemma 4, and Hugging Face
// tokenizers' ids for each text), gemma4-odd with llama.cpp (its
// gemma4-odd.gguf written with gguf-py, for what only llama.cpp reads, and
// llama.cpp's own tokenizer's ids and pieces). gemma4-tiny's llama.cpp half
// (the converter's GGUF of the folder, llama.cpp's ids) needs both on one
// machine and is not made yet.
type gemma4Refs struct {
	Transformers string `json:"transformers"`
	Tokenizers   string `json:"tokenizers"`
	Vocabularies map[string]struct {
		GGUF   string `json:"gguf"`
		BOS    int32  `json:"llama_bos"`
		AddBOS bool   `json:"llama_add_bos"`
		Attrs  []int  `json:"llama_attrs"`
		Cases  []struct {
			Text          string  `json:"text"`
			Hex           string  `json:"hex"`
			HFIDs         []int32 `json:"hf_ids"`
			HFDecoded     *string `json:"hf_decoded"`
			IDs           []int32 `json:"llama_ids"`
			IDsPlain      []int32 `json:"llama_ids_plain"`
			PiecesSpecial string  `json:"llama_pieces_special_hex"`
			Pieces        string  `json:"llama_pieces_hex"`
		} `json:"cases"`
	} `json:"vocabularies"`
}

func loadGemma4Refs(t *testing.T) gemma4Refs {
	t.Helper()
	var refs gemma4Refs
	readTestJSON(t, "refs-gemma4.json", &refs)
	return refs
}

// openGemma4 reads a testdata GGUF file's tokenizer, as a model load does.
func openGemma4(t *testing.T, name string) *Tokenizer {
	t.Helper()
	f, err := gguf.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := FromGGUF(f)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return tok
}

// llamaAttrType is the TokenType a llama.cpp token attribute (llama.h's
// llama_token_attr bits) stands for; control wins over user-defined, as
// llama.cpp treats a token with both.
func llamaAttrType(attr int) TokenType {
	switch {
	case attr&8 != 0:
		return Control
	case attr&16 != 0:
		return UserDefined
	case attr&32 != 0:
		return Byte
	case attr&2 != 0:
		return Unused
	case attr&1 != 0:
		return Unknown
	}
	return Normal
}

// TestGemma4MatchesLlamaCpp checks each reference vocabulary's GGUF file
// against llama.cpp's tokenizer: ids with special tokens parsed and as
// text (BOS added, which llama.cpp forces on for Gemma 4), what the ids
// decode to with and without special tokens, and the type llama.cpp gives
// each token after loading. (gemma4-tiny's llama.cpp references, with
// --llama-cpp and transformers on one machine, are not made yet.)
// gemma4-odd holds what Hugging Face cannot:
// merges through "ab" and "é", which are no tokens, a missing <0xA9>, a
// newline token that no merge builds, and add_bos_token false.
func TestGemma4MatchesLlamaCpp(t *testing.T) {
	refs := loadGemma4Refs(t)
	for _, name := range []string{"gemma4-odd"} {
		t.Run(name, func(t *testing.T) {
			ref, ok := refs.Vocabularies[name]
			if !ok || len(ref.Cases) == 0 || ref.Cases[0].IDs == nil {
				t.Fatalf("refs-gemma4.json has no llama.cpp references for %s", name)
			}
			tok := openGemma4(t, ref.GGUF)
			if tok.BOS() != ref.BOS || tok.Vocab().AddBOS != ref.AddBOS {
				t.Errorf("BOS %d add_bos %v, llama.cpp %d %v", tok.BOS(), tok.Vocab().AddBOS, ref.BOS, ref.AddBOS)
			}
			if len(ref.Attrs) != tok.Size() {
				t.Fatalf("%d token attributes for %d tokens", len(ref.Attrs), tok.Size())
			}
			for id, attr := range ref.Attrs {
				if got, want := tok.Type(int32(id)), llamaAttrType(attr); got != want {
					t.Errorf("token %d %q: type %v, llama.cpp's attributes %#x (%v)", id, tok.Token(int32(id)), got, attr, want)
				}
			}
			for i, c := range ref.Cases {
				text := caseText(t, c.Text, c.Hex)
				for _, chk := range []struct {
					opts EncodeOptions
					want []int32
				}{{EncodeOptions{AddSpecial: true, ParseSpecial: true}, c.IDs}, {EncodeOptions{AddSpecial: true}, c.IDsPlain}} {
					if got := tok.Encode(text, chk.opts); !slices.Equal(got, chk.want) {
						t.Errorf("case %d Encode(%q, %+v):\n got %v\nwant %v", i, text, chk.opts, got, chk.want)
					}
				}
				for _, chk := range []struct {
					opts   DecodeOptions
					pieces string
				}{{DecodeOptions{Special: true}, c.PiecesSpecial}, {DecodeOptions{}, c.Pieces}} {
					raw, err := hex.DecodeString(chk.pieces)
					if err != nil {
						t.Fatal(err)
					}
					// llama.cpp writes raw bytes; Decode makes invalid ones
					// U+FFFD, one a byte.
					if got, err := tok.Decode(c.IDs, chk.opts); err != nil || got != lossy(raw, true) {
						t.Errorf("case %d Decode(%v, %+v) = %q, %v; llama.cpp wrote %q", i, c.IDs, chk.opts, got, err, raw)
					}
				}
			}
		})
	}
}

// TestGemma4MatchesHuggingFace converts testdata/gemma4-tiny (the
// tokenizer files transformers saves for Gemma 4, made by
// make_gemma4_refs.py from its GemmaTokenizer) as hearth import does and
// checks it against Hugging Face tokenizers running the same tokenizer.json
// (no BOS, as add_special_tokens=False; special tokens in the text read).
func TestGemma4MatchesHuggingFace(t *testing.T) {
	refs := loadGemma4Refs(t)
	ref, ok := refs.Vocabularies["gemma4-tiny"]
	if !ok {
		t.Fatal("refs-gemma4.json has no gemma4-tiny")
	}
	data, err := os.ReadFile(filepath.Join("testdata", "gemma4-tiny", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := FromGemma4TokenizerJSON(data, gemma4TinySpecials)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := New(v)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i, c := range ref.Cases {
		if c.HFDecoded == nil {
			continue // bytes Python cannot hold
		}
		n++
		if got := tok.Encode(c.Text, EncodeOptions{ParseSpecial: true}); !slices.Equal(got, c.HFIDs) {
			t.Errorf("case %d Encode(%q):\n got %v\nwant %v (tokenizers %s)", i, c.Text, got, c.HFIDs, refs.Tokenizers)
		}
		if got, err := tok.Decode(c.HFIDs, DecodeOptions{Special: true}); err != nil || got != *c.HFDecoded {
			t.Errorf("case %d Decode(%v) = %q, %v; want %q", i, c.HFIDs, got, err, *c.HFDecoded)
		}
	}
	if n < 20 {
		t.Errorf("%d Hugging Face cases, want the %d texts of make_gemma4_refs.py", n, 28)
	}
}

// gemma4TinySpecials are transformers' all_special_tokens for
// testdata/gemma4-tiny's tokenizer_config.json: the named special tokens
// and Gemma 4's model-specific ones.
var gemma4TinySpecials = []string{"<bos>", "<eos>", "<unk>", "<pad>", "<mask>", "<|turn>", "<turn|>", "<|tool_response>", `<|"|>`}

// TestFromGemma4TokenizerJSON converts a small tokenizer.json of Gemma 4's
// form and checks the types gguf-py's LlamaHfVocab and Gemma4Model give:
// of the model's vocabulary, <0xXX> bytes, the special tokens control (not
// an added token marked special that no special name holds), the rest
// normal; added tokens past it control if special, else user-defined;
// <|tool_response> user-defined whatever it was; every score -1000; and
// the merges as "left right".
func TestFromGemma4TokenizerJSON(t *testing.T) {
	tj := `{
		"model": {"type": "BPE", "byte_fallback": true, "fuse_unk": true, "unk_token": "<unk>",
			"vocab": {"<pad>": 0, "<bos>": 1, "<|tool_response>": 2, "<unused0>": 3, "<0x0A>": 4, "▁": 5, "a": 6, "▁a": 7},
			"merges": [["▁", "a"]]},
		"added_tokens": [
			{"id": 1, "content": "<bos>", "special": true},
			{"id": 2, "content": "<|tool_response>", "special": true},
			{"id": 3, "content": "<unused0>", "special": true},
			{"id": 8, "content": "<extra>", "special": false},
			{"id": 10, "content": "<image>", "special": true}
		]
	}`
	v, err := FromGemma4TokenizerJSON([]byte(tj), []string{"<pad>", "<bos>", "<|tool_response>", "<image>"})
	if err != nil {
		t.Fatal(err)
	}
	want := []TokenType{Control, Control, UserDefined, Normal, Byte, Normal, Normal, Normal, UserDefined, Unused, Control}
	if !slices.Equal(v.Types, want) {
		t.Errorf("types %v, want %v", v.Types, want)
	}
	if v.Model != ModelGemma4 || v.Pre != "" || !v.AddBOS || v.AddSpacePrefix || v.Tokens[9] != "[PAD9]" {
		t.Errorf("model %q pre %q add_bos %v add_space_prefix %v token 9 %q", v.Model, v.Pre, v.AddBOS, v.AddSpacePrefix, v.Tokens[9])
	}
	if !slices.Equal(v.Merges, []string{"▁ a"}) || len(v.Scores) != 11 || v.Scores[0] != -1000 || v.Scores[10] != -1000 {
		t.Errorf("merges %q scores %v", v.Merges, v.Scores)
	}
	noFallback := strings.Replace(tj, `"byte_fallback": true`, `"byte_fallback": false`, 1)
	if _, err := FromGemma4TokenizerJSON([]byte(noFallback), nil); err == nil || !strings.Contains(err.Error(), "byte_fallback") {
		t.Errorf("without byte fallback: err = %v", err)
	}
}
