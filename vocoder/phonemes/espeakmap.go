package phonemes

import (
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"
)

// Kokoro was trained on misaki's phoneme set, which writes English
// diphthongs and affricates as single letters (A = eɪ, I = aɪ, O = oʊ,
// W = aʊ, Y = ɔɪ, Q = əʊ, ʤ, ʧ), American r as ɹ, and so on. espeak-ng
// writes standard IPA. fromEspeak converts one to the other the way
// misaki's EspeakFallback does for English words outside its lexicon:
// hexgrad/misaki, misaki/espeak.py at commit d0123ee8
// (EspeakFallback.E2M and EspeakFallback.__call__). The tables below are
// that data; the order of the steps is the reference's and matters.

// e2m is EspeakFallback.E2M: applied one after the other, longest key
// first (Python's sort by -len is stable, so keys of equal length keep
// the dict's order, which is kept here).
var e2m = func() [][2]string {
	pairs := [][2]string{
		{"ʔˌn\u0329", "tn"}, {"ʔn\u0329", "tn"}, {"ʔn", "tn"}, {"ʔ", "t"},
		{"a^ɪ", "I"}, {"a^ʊ", "W"},
		{"d^ʒ", "ʤ"},
		{"e^ɪ", "A"}, {"e", "A"},
		{"t^ʃ", "ʧ"},
		{"ɔ^ɪ", "Y"},
		{"ə^l", "ᵊl"},
		{"ʲo", "jo"}, {"ʲə", "jə"}, {"ʲ", ""},
		{"ɚ", "əɹ"},
		{"r", "ɹ"},
		{"x", "k"}, {"ç", "k"},
		{"ɐ", "ə"},
		{"ɬ", "l"},
		{"\u0303", ""},
	}
	sort.SliceStable(pairs, func(i, j int) bool {
		return utf8.RuneCountInString(pairs[i][0]) > utf8.RuneCountInString(pairs[j][0])
	})
	return pairs
}()

// syllabic is misaki's re.sub(r'(\S)\u0329', r'ᵊ\1', ps): a syllabic
// consonant (n̩) becomes schwa + consonant.
var syllabic = regexp.MustCompile(`(\S)\x{0329}`)

// langFlags are espeak's language-switch marks, "(fr)…(en)". misaki's
// EspeakFallback keeps them (phonemizer's default, keep-flags; only
// EspeakG2P asks for remove-flags) and its table then rewrites their
// letters. Hearth removes them: it sends espeak-ng only Latin-script words
// (readable), for which the English voices of espeak-ng 1.51 write no
// flag, so the two agree on every word Hearth can send (misaki_test.go).
var langFlags = regexp.MustCompile(`\([a-z]{2,3}(-[a-z0-9]+)?\)`)

// fromEspeak maps espeak-ng IPA (with '^' ties) to misaki's phonemes.
// british selects en-gb's rules, else en-us's.
func fromEspeak(ps string, british bool) string {
	ps = langFlags.ReplaceAllString(ps, "")
	for _, kv := range e2m {
		ps = strings.ReplaceAll(ps, kv[0], kv[1])
	}
	ps = syllabic.ReplaceAllString(ps, "ᵊ$1")
	ps = strings.ReplaceAll(ps, "\u0329", "")
	if british {
		// As in the reference, "e^ə" can no longer match here: the "e" → "A"
		// entry of E2M has already rewritten every e. Kept as it is, so
		// that the output stays the reference's.
		ps = strings.ReplaceAll(ps, "e^ə", "ɛː")
		ps = strings.ReplaceAll(ps, "iə", "ɪə")
		ps = strings.ReplaceAll(ps, "ə^ʊ", "Q")
	} else {
		ps = strings.ReplaceAll(ps, "o^ʊ", "O")
		ps = strings.ReplaceAll(ps, "ɜːɹ", "ɜɹ")
		ps = strings.ReplaceAll(ps, "ɜː", "ɜɹ")
		ps = strings.ReplaceAll(ps, "ɪə", "iə")
		ps = strings.ReplaceAll(ps, "ː", "")
	}
	// misaki: "for espeak < 1.52" (Debian 12 has 1.51).
	ps = strings.ReplaceAll(ps, "o", "ɔ")
	ps = strings.ReplaceAll(ps, "^", "")
	// misaki's G2P.__call__ (misaki/en.py) writes the flap as T after the
	// fallback, for both American and British English (every G2P version
	// but '2.0'; kokoro's KPipeline passes none). Its other replacement
	// there, ʔ → t, E2M has already made.
	ps = strings.ReplaceAll(ps, "ɾ", "T")
	return ps
}
