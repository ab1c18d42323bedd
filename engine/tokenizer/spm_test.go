package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// spmExtraCase is an entry of testdata/refs-spm.json (made by
// testdata/make_spm_refs.py with the sentencepiece library): a text, or
// raw bytes in hex where they are not UTF-8, its ids, and sentencepiece's
// decoding of those ids.
type spmExtraCase struct {
	Text    string  `json:"text"`
	Hex     string  `json:"hex"`
	IDs     []int32 `json:"ids"`
	Decoded string  `json:"decoded"`
}

// spmTokenizer is a reference SentencePiece tokenizer by name: the shared
// ones, or testdata/spm-unk-ws.model, trained without byte fallback and with
// remove_extra_whitespaces.
func spmTokenizer(t *testing.T, name string) *Tokenizer {
	t.Helper()
	if name != "spm-unk-ws" {
		return refTok(t, name)
	}
	data, err := os.ReadFile(filepath.Join("testdata", "spm-unk-ws.model"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := FromSentencePiece(data)
	if err != nil {
		t.Fatal(err)
	}
	if !v.RemoveExtraWhitespaces || !v.AddSpacePrefix {
		t.Fatalf("spm-unk-ws.model: remove_extra_whitespaces=%v add_dummy_prefix=%v, want both", v.RemoveExtraWhitespaces, v.AddSpacePrefix)
	}
	return viaGGUF(t, v)
}

// TestSentencePieceHardCases checks the cases the shared references lack:
// user-defined and control symbols written in text, invalid UTF-8, unknown
// characters without byte fallback, extra whitespace, and decoding.
func TestSentencePieceHardCases(t *testing.T) {
	var refs map[string]json.RawMessage
	readTestJSON(t, "refs-spm.json", &refs)
	for _, name := range []string{"gemma-spm", "llama-spm", "spm-unk-ws"} {
		t.Run(name, func(t *testing.T) {
			tok := spmTokenizer(t, name)
			var cases, decodes []spmExtraCase
			if err := json.Unmarshal(refs[name], &cases); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(refs[name+":decode"], &decodes); err != nil {
				t.Fatal(err)
			}
			for i, c := range cases {
				text := caseText(t, c.Text, c.Hex)
				if got := tok.Encode(text, EncodeOptions{}); !slices.Equal(got, c.IDs) {
					t.Errorf("case %d Encode(%q):\n got %v\nwant %v", i, text, got, c.IDs)
				}
				decodes = append(decodes, c)
			}
			for i, c := range decodes {
				got, err := tok.Decode(c.IDs, DecodeOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if got != c.Decoded {
					t.Errorf("decode %d Decode(%v) = %q, want %q", i, c.IDs, got, c.Decoded)
				}
			}
		})
	}
}

// TestParseSpecialSentencePiece checks the llama.cpp side: with
// ParseSpecial, control tokens written in the text are read as tokens, and
// the space prefix goes before each piece of text that starts the text or
// follows a special token. Without it control tokens are text, while
// user-defined ones still match.
func TestParseSpecialSentencePiece(t *testing.T) {
	gemma := refTok(t, "gemma-spm")
	llama := refTok(t, "llama-spm")
	id := func(tok *Tokenizer, s string) []int32 { return []int32{mustID(t, tok, s)} }
	// text is the tokens of s encoded alone, with or without the prefix.
	text := func(tok *Tokenizer, s string, prefix bool) []int32 {
		return tok.spm.encode(tok.spm.normalize(s, prefix), nil, nil)
	}
	tests := []struct {
		name string
		tok  *Tokenizer
		in   string
		opts EncodeOptions
		want []int32
	}{
		{"gemma special", gemma, "<s><start_of_turn>user\nhi<end_of_turn>", EncodeOptions{ParseSpecial: true},
			slices.Concat(id(gemma, "<s>"), id(gemma, "<start_of_turn>"), text(gemma, "user\nhi", false), id(gemma, "<end_of_turn>"))},
		{"gemma plain", gemma, "<s><start_of_turn>", EncodeOptions{},
			slices.Concat(text(gemma, "<s>", false), id(gemma, "<start_of_turn>"))},
		{"gemma add special", gemma, "hi", EncodeOptions{AddSpecial: true},
			slices.Concat([]int32{gemma.BOS()}, text(gemma, "hi", false))},
		{"llama special", llama, "<s>hi<|user|>there", EncodeOptions{ParseSpecial: true},
			slices.Concat(id(llama, "<s>"), text(llama, "hi", true), id(llama, "<|user|>"), text(llama, "there", true))},
		{"llama leading text", llama, "hi</s>", EncodeOptions{ParseSpecial: true},
			slices.Concat(text(llama, "hi", true), id(llama, "</s>"))},
	}
	for _, tc := range tests {
		if got := tc.tok.Encode(tc.in, tc.opts); !slices.Equal(got, tc.want) {
			t.Errorf("%s: Encode(%q) = %v, want %v", tc.name, tc.in, got, tc.want)
		}
	}

	// Control tokens decode to nothing unless asked for.
	ids := slices.Concat([]int32{llama.BOS()}, text(llama, "hi", true))
	for _, tc := range []struct {
		opts DecodeOptions
		want string
	}{{DecodeOptions{}, "hi"}, {DecodeOptions{Special: true}, "<s> hi"}} {
		got, err := llama.Decode(ids, tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("Decode(%v, %+v) = %q, want %q", ids, tc.opts, got, tc.want)
		}
	}
}

// TestSentencePieceWordsMergeAlone checks the shortcut of encode: merging
// each word on its own gives what one pass over the whole text gives.
func TestSentencePieceWordsMergeAlone(t *testing.T) {
	refs := loadRefs(t)
	for _, name := range []string{"gemma-spm", "llama-spm"} {
		tok := refTok(t, name)
		if tok.spm.crossesSpace {
			t.Fatalf("%s: a piece joins a word to the next; the test needs a vocabulary without", name)
		}
		for i, c := range refs[name] {
			s := tok.spm.normalize(c.Text, tok.spm.addSpacePrefix)
			whole := tok.spm.encodeChunk(s, tok.userDefined, nil, 0, &spmScratch{})
			if got := tok.spm.encode(s, tok.userDefined, nil); !slices.Equal(got, whole) {
				t.Errorf("%s case %d: by words %v, whole %v", name, i, got, whole)
			}
		}
	}
}
