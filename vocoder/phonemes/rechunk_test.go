package phonemes

import (
	"strings"
	"testing"
)

// TestRechunkKeepsText: the streaming chunks are whole sentences of the
// text as written, each a valid chunk of its own.
func TestRechunkKeepsText(t *testing.T) {
	p := newTestPhonemizer(t, "en-us", 510)
	text := `He said "stop." (Then he left.) Why?! Really... Yes, 3.5 times; then "no!" Fine`
	cs, err := p.Phonemize(text)
	if err != nil {
		t.Fatal(err)
	}
	var ck Rechunker
	out := ck.Rechunk(cs)
	var got []string
	for _, c := range out {
		checkChunk(t, c, testConfig(510))
		got = append(got, c.Text)
	}
	// The first sentence alone (with its closing quote), then whole
	// sentences up to twice its phonemes; "3.5" is not a sentence end.
	want := []string{`He said "stop."`, `(Then he left.) Why?! Really...`, `Yes, 3.5 times; then "no!" Fine`}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("chunks\n got %q\nwant %q", got, want)
	}
}
