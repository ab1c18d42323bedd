package phonemes

import (
	"strings"
	"unicode/utf8"
)

// Chunking follows kokoro's KPipeline.en_tokenize: tokens are added to a
// chunk while its phonemes fit the limit (510); when the next one would
// not, the chunk is cut after its last sentence end (! . ? …), else its
// last : or ;, else its last , or —, taking a closing ) ” or " along, and
// provided what is left still fits with the next token (kokoro's
// waterfall_last); failing all that, before the next token. A line break
// always ends a chunk (kokoro splits its input at \n+ first).

// waterfall are the cut points in order of preference.
var waterfall = []string{"!.?…", ":;", ",—"}

// FilterVocab keeps the symbols of ps that the vocabulary has: KModel
// drops the others (vocab.get(p) is None) and they must not count
// towards the limit or shift the word spans.
func FilterVocab(ps string, vocab map[string]int) string {
	return strings.Map(func(r rune) rune {
		if _, ok := vocab[string(r)]; ok {
			return r
		}
		return -1
	}, ps)
}

// splitChunks groups phonemized tokens into chunks of at most max symbols.
func splitChunks(words []pword, max int, vocab map[string]int) []Chunk {
	_, spaceOK := vocab[" "]
	sep := func(w pword) int { // the symbols the space after w adds
		if w.space && spaceOK {
			return 1
		}
		return 0
	}
	for i := range words {
		words[i].phonemes = FilterVocab(words[i].phonemes, vocab)
		// A single word longer than a chunk (a run of letters espeak
		// spells out) is cut to fit, as kokoro truncates ps[:510].
		if utf8.RuneCountInString(words[i].phonemes) > max {
			words[i].phonemes = string([]rune(words[i].phonemes)[:max])
		}
	}
	// count is the symbols of ws as one chunk: the phonemes, and a space
	// after every word but the last that has whitespace after it.
	count := func(ws []pword) int {
		n := 0
		for k, w := range ws {
			n += utf8.RuneCountInString(w.phonemes)
			if k < len(ws)-1 {
				n += sep(w)
			}
		}
		return n
	}

	var chunks []Chunk
	var cur []pword
	emit := func(ws []pword) {
		if c, ok := makeChunk(ws, vocab, spaceOK); ok {
			chunks = append(chunks, c)
		}
	}
	for _, w := range words {
		if len(cur) > 0 && count(append(cur[:len(cur):len(cur)], w)) > max {
			z := waterfallCut(cur, w, max, count)
			emit(cur[:z])
			cur = append([]pword(nil), cur[z:]...)
		}
		cur = append(cur, w)
		if w.brk == breakParagraph {
			emit(cur)
			cur = nil
		}
	}
	emit(cur)
	return chunks
}

// waterfallCut is where to end the chunk cur when next does not fit.
func waterfallCut(cur []pword, next pword, max int, count func([]pword) int) int {
	for _, marks := range waterfall {
		z := -1
		for i := len(cur) - 1; i >= 0; i-- {
			if cur[i].punct != "" && strings.Contains(marks, cur[i].punct) {
				z = i
				break
			}
		}
		if z < 0 {
			continue
		}
		z++
		if z < len(cur) && isCloser(cur[z].punct) {
			z++
		}
		if z < len(cur) && count(append(cur[z:len(cur):len(cur)], next)) <= max {
			return z
		}
	}
	return len(cur)
}

// makeChunk lays out ws as one chunk; false if it speaks no word.
func makeChunk(ws []pword, vocab map[string]int, spaceOK bool) (Chunk, bool) {
	// Leading and trailing tokens without phonemes carry no sound.
	spoken := false
	for _, w := range ws {
		if !w.isPunct() && w.phonemes != "" {
			spoken = true
		}
	}
	if !spoken {
		return Chunk{}, false
	}
	var c Chunk
	var ps, text strings.Builder
	pos := 0
	for k, w := range ws {
		text.WriteString(w.text)
		n := utf8.RuneCountInString(w.phonemes)
		c.Words = append(c.Words, Word{Text: w.text, Phonemes: w.phonemes, Start: pos, End: pos + n, Punct: w.isPunct()})
		ps.WriteString(w.phonemes)
		pos += n
		if k < len(ws)-1 && w.space {
			text.WriteByte(' ')
			if spaceOK {
				ps.WriteByte(' ')
				pos++
			}
		}
	}
	c.Text, c.Phonemes = text.String(), ps.String()
	c.Tokens = make([]int, 0, pos+2)
	c.Tokens = append(c.Tokens, 0)
	for _, r := range c.Phonemes {
		c.Tokens = append(c.Tokens, vocab[string(r)])
	}
	c.Tokens = append(c.Tokens, 0)
	return c, true
}

func (w pword) isPunct() bool { return w.punct != "" }
