package phonemes

import (
	"strings"
	"testing"
)

// words builds phonemized tokens from a compact form: "aaaa" is a word
// whose phonemes are its text, ". , ; ) — …" are punctuation; a "/"
// item is a line break after the previous token.
func words(items ...string) []pword {
	var ws []pword
	for _, it := range items {
		if it == "/" {
			ws[len(ws)-1].brk = breakParagraph
			continue
		}
		w := pword{textToken: textToken{text: it, space: true}, phonemes: it}
		if strings.Contains(".,;:!?…—)”", it) {
			w.punct = it
			// Punctuation sticks to the word before it.
			if len(ws) > 0 {
				ws[len(ws)-1].space = false
			}
		}
		ws = append(ws, w)
	}
	return ws
}

func chunkTexts(cs []Chunk) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Text
	}
	return out
}

func TestSplitChunks(t *testing.T) {
	vocab := testConfig(0).Vocab
	cases := []struct {
		name string
		ws   []pword
		max  int
		want []string
	}{
		{"fits", words("aa", "bb", "."), 20, []string{"aa bb."}},
		// "aa bb. cc dd, ee" is 16 symbols; with ff (19) over 18: the cut
		// goes after the sentence end, not the later comma.
		{"sentence first", words("aa", "bb", ".", "cc", "dd", ",", "ee", "ff"), 18, []string{"aa bb.", "cc dd, ee ff"}},
		{"comma when no sentence end", words("aa", "bb", "cc", ",", "dd", "ee", "ff"), 12, []string{"aa bb cc,", "dd ee ff"}},
		{"clause mark before comma", words("aa", ",", "bb", ";", "cc", "dd", "ee"), 12, []string{"aa, bb;", "cc dd ee"}},
		{"word when no mark", words("aaa", "bbb", "ccc", "ddd"), 8, []string{"aaa bbb", "ccc ddd"}},
		{"closing bracket follows", words("aa", ".", ")", "bb", "cc", "dd"), 9, []string{"aa.)", "bb cc dd"}},
		{"line break", words("aa", ".", "/", "bb", "."), 100, []string{"aa.", "bb."}},
		{"punctuation only dropped", words("aa", ".", "/", ",", ".", "/", "bb"), 100, []string{"aa.", "bb"}},
		// A cut that would leave the rest too long with the next word
		// is not taken (waterfall_last's next_count check).
		{"sentence end too early", words("a", ".", "bbbb", "cccc", "dddd"), 13, []string{"a. bbbb cccc", "dddd"}},
		{"sentence end taken", words("a", ".", "bbbb", "cccc", "dddd"), 14, []string{"a.", "bbbb cccc dddd"}},
		{"one word over the limit", words("aaaaaaaaaaaa", "b"), 5, []string{"aaaaaaaaaaaa", "b"}},
	}
	for _, c := range cases {
		cs := splitChunks(c.ws, c.max, vocab)
		if got := chunkTexts(cs); strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("%s: chunks %q, want %q", c.name, got, c.want)
		}
		for _, ch := range cs {
			checkChunk(t, ch, testConfig(c.max))
		}
	}
}
