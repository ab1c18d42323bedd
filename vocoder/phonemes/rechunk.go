package phonemes

import (
	"strings"
	"unicode/utf8"
)

// A Rechunker recuts Phonemize's chunks for streaming speech. Phonemize packs
// sentences into chunks of up to 510 phonemes (kokoro's pipeline), about
// 30 s of speech: synthesising the first of those before anything plays
// would keep the listener waiting for the whole chunk. So the first chunk
// is the first sentence alone, and each later one holds at most twice the
// phonemes of the one before (whole sentences, still within Phonemize's
// chunk and so within 510 and its line breaks). Audio lasts in proportion
// to phonemes, so while chunk k plays, chunk k+1, twice as long, is made
// in time whenever synthesis runs at least twice real time; the chunks
// reach the full 510 after a few sentences, where the model has the most
// context for its prosody and the fewest forward passes are run. A single
// sentence longer than the budget stays whole (Phonemize already cut it
// to fit the model), so cuts fall only at sentence ends.
type Rechunker struct {
	budget int // the next chunk's most phonemes; 0: the first, one sentence
}

// Rechunk recuts the next of Phonemize's chunks, in the text's order;
// the zero Rechunker starts a speech.
func (ck *Rechunker) Rechunk(chunks []Chunk) []Chunk {
	var out []Chunk
	for _, c := range chunks {
		sentences := sentenceSpans(c)
		for a := 0; a < len(sentences); {
			b := a + 1
			if ck.budget > 0 {
				for b < len(sentences) && phonemeSpan(c, sentences[a][0], sentences[b][1]) <= ck.budget {
					b++
				}
			}
			sub := subChunk(c, sentences[a][0], sentences[b-1][1])
			out = append(out, sub)
			ck.budget = 2 * utf8.RuneCountInString(sub.Phonemes)
			a = b
		}
	}
	return out
}

// sentenceSpans splits c's words into sentences, [first, end) word
// indices: a sentence ends after a mark that ends sentences (. ! ? …) and
// any marks and closing quotes or brackets right after it. A piece with
// no spoken word (trailing punctuation) joins the sentence before it.
func sentenceSpans(c Chunk) [][2]int {
	var spans [][2]int
	start, spoken := 0, false
	for i := 0; i < len(c.Words); i++ {
		w := c.Words[i]
		if !w.Punct && w.Phonemes != "" {
			spoken = true
		}
		if !(w.Punct && endsSentenceText(w.Text)) {
			continue
		}
		for i+1 < len(c.Words) && c.Words[i+1].Punct && (endsSentenceText(c.Words[i+1].Text) || isCloser(c.Words[i+1].Text)) {
			i++
		}
		if spoken {
			spans = append(spans, [2]int{start, i + 1})
			start, spoken = i+1, false
		}
	}
	if start < len(c.Words) {
		if spoken || len(spans) == 0 {
			spans = append(spans, [2]int{start, len(c.Words)})
		} else {
			spans[len(spans)-1][1] = len(c.Words)
		}
	}
	return spans
}

// endsSentenceText reports whether a punctuation word as written ends a
// sentence: ".", "!", "?", "…" or "...".
func endsSentenceText(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return strings.ContainsRune(".!?…", r)
}

// phonemeSpan is how many symbols words [a, b) of c take, spaces between
// them included.
func phonemeSpan(c Chunk, a, b int) int { return c.Words[b-1].End - c.Words[a].Start }

// subChunk is words [a, b) of c as a chunk of their own: their phonemes
// (and the spaces between them), those symbols' tokens between two pads,
// the word spans moved to start at 0, and their text as c has it.
func subChunk(c Chunk, a, b int) Chunk {
	if a == 0 && b == len(c.Words) {
		return c
	}
	lo, hi := c.Words[a].Start, c.Words[b-1].End
	ps := []rune(c.Phonemes)
	sub := Chunk{Phonemes: string(ps[lo:hi])}
	sub.Tokens = make([]int, 0, hi-lo+2)
	sub.Tokens = append(sub.Tokens, 0)
	sub.Tokens = append(sub.Tokens, c.Tokens[lo+1:hi+1]...)
	sub.Tokens = append(sub.Tokens, 0)
	for _, w := range c.Words[a:b] {
		w.Start -= lo
		w.End -= lo
		sub.Words = append(sub.Words, w)
	}
	// makeChunk wrote the text as the words joined by nothing or one
	// space: find each word's place in it in order.
	from, to := wordOffsets(c, a, b)
	sub.Text = c.Text[from:to]
	return sub
}

// wordOffsets are where word a starts and word b-1 ends in c.Text, in
// bytes.
func wordOffsets(c Chunk, a, b int) (from, to int) {
	off := 0
	for i, w := range c.Words[:b] {
		at := off // where it is not found (not for makeChunk's text), go on from here
		if k := strings.Index(c.Text[off:], w.Text); k >= 0 {
			at += k
		}
		if i == a {
			from = at
		}
		off = min(at+len(w.Text), len(c.Text))
	}
	return from, off
}
