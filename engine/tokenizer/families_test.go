package tokenizer

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// bpeRefCase is an entry of testdata/refs-bpe.json.gz (made by
// testdata/make_bpe_refs.py with Hugging Face tokenizers): ids reads the
// special tokens written in the text, ids_plain takes them as text
// (encode_special_tokens), and the decodings keep and skip special tokens.
type bpeRefCase struct {
	Text        string  `json:"text"`
	IDs         []int32 `json:"ids"`
	IDsPlain    []int32 `json:"ids_plain"`
	Decoded     string  `json:"decoded"`
	DecodedSkip string  `json:"decoded_skip"`
}

func readGzip(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return b
}

// TestBPEFamiliesMatchReference checks the pre-tokenizers the shared data
// has no vocabulary for (gpt-2, smollm, command-r, tekken, gpt-4o,
// deepseek-llm, default) on small BPEs trained with each one's Hugging Face
// pre-tokenizer, and special tokens in text for the shared Llama 3 and
// Qwen 2 vocabularies: ids with and without ParseSpecial, and decoding with
// and without special tokens, all through GGUF.
func TestBPEFamiliesMatchReference(t *testing.T) {
	var refs map[string]json.RawMessage
	if err := json.Unmarshal(readGzip(t, filepath.Join("testdata", "refs-bpe.json.gz")), &refs); err != nil {
		t.Fatal(err)
	}
	for _, pre := range []string{"gpt-2", "smollm", "command-r", "tekken", "gpt-4o", "deepseek-llm", "default", "llama3-bpe", "qwen2-bpe"} {
		t.Run(pre, func(t *testing.T) {
			var cases []bpeRefCase
			if err := json.Unmarshal(refs[pre], &cases); err != nil || len(cases) == 0 {
				t.Fatalf("no references for %s (%v)", pre, err)
			}
			var tok *Tokenizer
			if pre == "llama3-bpe" || pre == "qwen2-bpe" {
				tok = refTok(t, pre)
			} else {
				data := readGzip(t, filepath.Join("testdata", "bpe-"+pre+".tokenizer.json.gz"))
				v, err := FromHFTokenizerJSON(data, pre)
				if err != nil {
					t.Fatal(err)
				}
				tok = viaGGUF(t, v)
			}
			matched := 0
			for i, c := range cases {
				ok := true
				for _, chk := range []struct {
					opts EncodeOptions
					want []int32
				}{{EncodeOptions{ParseSpecial: true}, c.IDs}, {EncodeOptions{}, c.IDsPlain}} {
					if got := tok.Encode(c.Text, chk.opts); !slices.Equal(got, chk.want) {
						t.Errorf("case %d Encode(%q, %+v):\n got %v\nwant %v", i, clip(c.Text), chk.opts, got, chk.want)
						ok = false
					}
				}
				for _, chk := range []struct {
					opts DecodeOptions
					want string
				}{{DecodeOptions{Special: true}, c.Decoded}, {DecodeOptions{}, c.DecodedSkip}} {
					if got, err := tok.Decode(c.IDs, chk.opts); err != nil || got != chk.want {
						t.Errorf("case %d Decode(%+v) = %q, %v; want %q", i, chk.opts, clip(got), err, clip(chk.want))
						ok = false
					}
				}
				if ok {
					matched++
				}
			}
			t.Logf("%s: %d/%d cases match", pre, matched, len(cases))
		})
	}
}
