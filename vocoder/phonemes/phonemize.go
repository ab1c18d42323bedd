package phonemes

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// A Word is one word or punctuation mark of a chunk with the phonemes it is
// spoken with. Start and End delimit those phonemes in Chunk.Phonemes,
// counted in symbols (one token each): the word's tokens are
// Chunk.Tokens[Start+1 : End+1], after the leading pad. A word espeak-ng
// could not read (another script) has no phonemes and Start == End: like
// kokoro's pipeline (misaki with an empty unk), it is skipped, not spelled.
type Word struct {
	Text     string // as written: "$5", "Dr.", ","
	Phonemes string
	Start    int
	End      int
	Punct    bool
}

// A Chunk is a stretch of text short enough for one forward pass of the
// model: at most the config's MaxPhonemes symbols.
type Chunk struct {
	Text     string // the chunk's words as written, with their spacing
	Phonemes string // Kokoro symbols, each in the vocabulary
	Tokens   []int  // 0, one id per symbol of Phonemes, 0 (KModel's input_ids)
	Words    []Word
}

// ErrNothingToSay is returned for text that has no word to speak: empty,
// only punctuation or symbols, or only words in scripts espeak-ng's English
// voices cannot read.
var ErrNothingToSay = errors.New("the text has nothing to speak")

// Languages are the espeak-ng voices Phonemize supports, with kokoro's
// one-letter aliases ('a' American, 'b' British English).
var languages = map[string]string{"en-us": "en-us", "a": "en-us", "en-gb": "en-gb", "b": "en-gb"}

// A Phonemizer turns English text into Kokoro's phoneme tokens: normalise
// (numbers, currency, abbreviations), phonemize each clause with espeak-ng,
// map espeak's IPA to misaki's symbols (fromEspeak), keep the symbols the
// vocabulary has, and split into chunks that fit the model. It is safe for
// concurrent use.
type Phonemizer struct {
	voice     string
	british   bool
	vocab     map[string]int
	maxTokens int
	espeak    espeakBackend
}

// NewPhonemizer makes a phonemizer for lang ("en-us" or "en-gb") with a
// model's vocabulary (symbol → token id) and its limit on symbols per
// utterance (Kokoro's Config.Vocab and Config.MaxPhonemes). It fails,
// wrapping ErrNoEspeak, when espeak-ng is not installed.
func NewPhonemizer(lang string, vocab map[string]int, maxPhonemes int) (*Phonemizer, error) {
	voice, ok := languages[strings.ToLower(lang)]
	if !ok {
		return nil, fmt.Errorf("phonemes: language %q: only English is supported now (en-us, en-gb)", lang)
	}
	if len(vocab) == 0 || maxPhonemes < 1 {
		return nil, fmt.Errorf("phonemes: a vocabulary of %d symbols and room for %d phonemes: the model's config has none", len(vocab), maxPhonemes)
	}
	be, err := findEspeak()
	if err != nil {
		return nil, err // ErrNoEspeak, which says what to install
	}
	return &Phonemizer{voice: voice, british: voice == "en-gb", vocab: vocab, maxTokens: maxPhonemes, espeak: be}, nil
}

// Backend names the espeak-ng the phonemizer uses (the library or the
// command's path).
func (p *Phonemizer) Backend() string { return p.espeak.name() }

// Phonemize turns text into chunks of at most the model's phoneme limit,
// split at sentence ends, or, for a longer sentence, at the last clause
// mark (: ;), then comma or dash, then word that fits. Text with nothing
// to speak returns ErrNothingToSay.
func (p *Phonemizer) Phonemize(text string) ([]Chunk, error) {
	toks := tokenize(validUTF8(text))
	words, err := p.phonemizeTokens(toks)
	if err != nil {
		return nil, err
	}
	chunks := splitChunks(words, p.maxTokens, p.vocab)
	if len(chunks) == 0 {
		return nil, ErrNothingToSay
	}
	return chunks, nil
}

// pword is a token with its phonemes, before chunking.
type pword struct {
	textToken
	phonemes string
}

// maxLineWords caps the words of one espeak-ng line: espeak splits a long
// clause itself, and alignment (align) is quadratic in the line length.
const maxLineWords = 40

// phonemizeTokens phonemizes the words clause by clause, so that espeak
// sees each word in context (weak forms: "a" is ɐ, not the letter eɪ, and
// "to the" tə ðə), and gives each token its share of the output.
func (p *Phonemizer) phonemizeTokens(toks []textToken) ([]pword, error) {
	out := make([]pword, len(toks))
	type span struct{ tok, word int } // one spoken word of a token
	var lines []string
	var lineSpans [][]span
	var cur []span
	var curWords []string
	flush := func() {
		if len(cur) > 0 {
			lines = append(lines, strings.Join(curWords, " "))
			lineSpans = append(lineSpans, cur)
		}
		cur, curWords = nil, nil
	}
	for i, t := range toks {
		out[i].textToken = t
		if t.punct != "" {
			flush()
			continue
		}
		for k, w := range t.spoken {
			if !readable(w) {
				continue
			}
			if len(cur) == maxLineWords {
				flush()
			}
			cur = append(cur, span{i, k})
			curWords = append(curWords, w)
		}
		if t.brk != 0 {
			flush()
		}
	}
	flush()

	res, err := p.espeak.phonemes(p.voice, lines)
	if err != nil {
		return nil, fmt.Errorf("phonemes: espeak-ng: %w", err)
	}
	// Lines whose output words do not pair one to one with their input
	// words (espeak joins "in the" into ɪnðə) are aligned against each
	// word phonemized alone.
	var isoWords []string
	isoIndex := map[string]int{}
	perLine := make([][]string, len(lines))
	for l, r := range res {
		perLine[l] = strings.Fields(r)
		if len(perLine[l]) != len(lineSpans[l]) {
			for _, w := range strings.Fields(lines[l]) {
				if _, ok := isoIndex[w]; !ok {
					isoIndex[w] = len(isoWords)
					isoWords = append(isoWords, w)
				}
			}
		}
	}
	var iso []string
	if len(isoWords) > 0 {
		if iso, err = p.espeak.phonemes(p.voice, isoWords); err != nil {
			return nil, fmt.Errorf("phonemes: espeak-ng: %w", err)
		}
	}
	spoken := make([][]string, len(toks))
	for i, t := range toks {
		spoken[i] = make([]string, len(t.spoken))
	}
	for l, spans := range lineSpans {
		got := perLine[l]
		if len(got) != len(spans) {
			ws := strings.Fields(lines[l])
			ref := make([]string, len(ws))
			for k, w := range ws {
				ref[k] = iso[isoIndex[w]]
			}
			got = align(ref, got)
		}
		for k, s := range spans {
			spoken[s.tok][s.word] = fromEspeak(got[k], p.british)
		}
	}
	for i, t := range toks {
		if t.punct != "" {
			out[i].phonemes = t.punct
			continue
		}
		var parts []string
		for _, ph := range spoken[i] {
			if ph != "" {
				parts = append(parts, ph)
			}
		}
		out[i].phonemes = strings.Join(parts, " ")
	}
	return out, nil
}

// readable reports whether espeak-ng's English voice can read w: Latin
// letters (with their accents) and apostrophes, hyphens and periods
// between them. Other scripts are skipped rather than read as
// "Chinese letter" or switched to another language.
func readable(w string) bool {
	letters := 0
	for _, r := range w {
		switch {
		case unicode.Is(unicode.Latin, r):
			letters++
		case unicode.IsMark(r) || r == '\'' || r == '-' || r == '.':
		default:
			return false
		}
	}
	return letters > 0
}
