package phonemes

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A textToken is one word, number or punctuation mark of the input, with
// the words it is spoken as.
type textToken struct {
	text   string   // as written: "$5.50", "Dr.", ","
	spoken []string // what espeak-ng reads: "five dollars and fifty cents"; nil for punctuation
	punct  string   // the Kokoro symbol of a punctuation token ("," "—" "…")
	space  bool     // whitespace follows
	brk    int      // after this token: 0 nothing, breakSentence, breakParagraph
}

const (
	breakSentence  = 1 // . ! ? …
	breakParagraph = 2 // a line break: kokoro's pipeline splits its input at \n+
)

// abbreviations are read out in full; the key is the word before its
// period, lower-cased. Titles and the common Latin ones: these periods
// never end a sentence. ("St." is read as saint, the more frequent
// reading before a name.)
var abbreviations = map[string]string{
	"mr": "mister", "mrs": "missus", "ms": "miz", "dr": "doctor", "prof": "professor",
	"st": "saint", "jr": "junior", "sr": "senior", "mt": "mount", "gen": "general",
	"capt": "captain", "lt": "lieutenant", "col": "colonel", "sgt": "sergeant", "rev": "reverend",
	"etc": "et cetera", "vs": "versus", "approx": "approximately", "dept": "department",
	"fig": "figure", "no": "number", "vol": "volume", "inc": "incorporated", "ltd": "limited",
	"co": "company", "corp": "corporation", "jan": "january", "feb": "february", "mar": "march",
	"apr": "april", "jun": "june", "jul": "july", "aug": "august", "sep": "september",
	"sept": "september", "oct": "october", "nov": "november", "dec": "december",
}

// dottedWords are initialisms read as words rather than spelled.
var dottedWords = map[string]string{"e.g.": "for example", "i.e.": "that is"}

// symbolWords are symbols read as a word.
var symbolWords = map[rune]string{'&': "and", '+': "plus", '=': "equals", '@': "at", '%': "percent"}

// punctSymbols maps written punctuation to Kokoro's symbols; the kind says
// whether it ends a sentence.
var punctSymbols = map[rune]string{
	'.': ".", '!': "!", '?': "?", ',': ",", ';': ";", ':': ":", '…': "…",
	'—': "—", '–': "—", '(': "(", ')': ")", '[': "(", ']': ")", '{': "(", '}': ")",
	'"': "\"", '“': "“", '”': "”", '«': "“", '»': "”",
}

func endsSentence(p string) bool { return p == "." || p == "!" || p == "?" || p == "…" }

// Normalize returns what text is read as: numbers, currency, percentages,
// ordinals, years, times and abbreviations written out, punctuation kept.
// It is tokenize's result joined, for inspection and tests.
func Normalize(text string) string {
	var sb strings.Builder
	for _, t := range tokenize(text) {
		if t.punct != "" {
			sb.WriteString(t.punct)
		} else {
			sb.WriteString(strings.Join(t.spoken, " "))
		}
		if t.brk == breakParagraph {
			sb.WriteByte('\n')
		} else if t.space {
			sb.WriteByte(' ')
		}
	}
	return strings.TrimSpace(sb.String())
}

// tokenize splits text into words, numbers and punctuation and decides how
// each is spoken. Control characters are spaces; a line break ends a
// paragraph; symbols that are not read (emoji, #, *, /) are dropped.
func tokenize(text string) []textToken {
	var toks []textToken
	rs := []rune(text)
	markSpace := func() {
		if len(toks) > 0 {
			toks[len(toks)-1].space = true
		}
	}
	for i := 0; i < len(rs); {
		r := rs[i]
		switch {
		case r == '\n' || r == '\u2028' || r == '\u2029':
			markSpace()
			if len(toks) > 0 {
				toks[len(toks)-1].brk = breakParagraph
			}
			i++
		case unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
			markSpace()
			i++
		case isDigit(r) || (isCurrency(r) && i+1 < len(rs) && isDigit(rs[i+1])) ||
			((r == '-' || r == '−') && i+1 < len(rs) && isDigit(rs[i+1]) && (i == 0 || !isWordRune(rs[i-1]))):
			j, tok := scanNumber(rs, i)
			toks = append(toks, tok)
			i = j
		case unicode.IsLetter(r):
			j, tok := scanWord(rs, i)
			toks = append(toks, tok)
			i = j
		case r == '.' && i+2 < len(rs) && rs[i+1] == '.' && rs[i+2] == '.':
			toks = append(toks, textToken{text: "...", punct: "…"})
			i += 3
		case r == '-' && i+1 < len(rs) && rs[i+1] == '-':
			j := i
			for j < len(rs) && rs[j] == '-' {
				j++
			}
			toks = append(toks, textToken{text: string(rs[i:j]), punct: "—"})
			i = j
		case r == '-' && (i == 0 || unicode.IsSpace(rs[i-1])) && (i+1 == len(rs) || unicode.IsSpace(rs[i+1])):
			toks = append(toks, textToken{text: "-", punct: "—"}) // a spaced hyphen is a dash
			i++
		case punctSymbols[r] != "":
			toks = append(toks, textToken{text: string(r), punct: punctSymbols[r]})
			i++
		case symbolWords[r] != "":
			toks = append(toks, textToken{text: string(r), spoken: []string{symbolWords[r]}})
			i++
		default:
			// Unread symbols separate words like a space.
			markSpace()
			i++
		}
	}
	for k := range toks {
		if endsSentence(toks[k].punct) && toks[k].brk == 0 {
			// "?!" and '."' end the sentence at their last mark.
			if k+1 < len(toks) && !toks[k].space && (endsSentence(toks[k+1].punct) || isCloser(toks[k+1].punct)) {
				continue
			}
			toks[k].brk = breakSentence
		} else if isCloser(toks[k].punct) && k > 0 && endsSentence(toks[k-1].punct) && !toks[k-1].space && toks[k].brk == 0 {
			toks[k].brk = breakSentence
		}
	}
	return toks
}

func isCloser(p string) bool { return p == ")" || p == "”" || p == "\"" }

func isDigit(r rune) bool { return r >= '0' && r <= '9' }

func isCurrency(r rune) bool { return r == '$' || r == '£' || r == '€' }

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsMark(r) || isDigit(r) }

// scanWord reads a word: letters and marks, with apostrophes and hyphens
// inside it. A following period is taken into the word when the word is a
// known abbreviation or a dotted initialism (U.S.A., e.g.), so that it
// does not end the sentence.
func scanWord(rs []rune, i int) (int, textToken) {
	j := i
	for j < len(rs) {
		r := rs[j]
		if unicode.IsLetter(r) || unicode.IsMark(r) {
			j++
			continue
		}
		if (r == '\'' || r == '’' || r == '-') && j+1 < len(rs) && unicode.IsLetter(rs[j+1]) {
			j++
			continue
		}
		break
	}
	word := strings.ReplaceAll(string(rs[i:j]), "’", "'")
	// Dotted initialisms: one letter, a period, one letter, a period, …
	if j-i == 1 && j+2 < len(rs) && rs[j] == '.' && unicode.IsLetter(rs[j+1]) && (rs[j+2] == '.') {
		k := j
		for k+1 < len(rs) && rs[k] == '.' && unicode.IsLetter(rs[k+1]) && (k+2 == len(rs) || !unicode.IsLetter(rs[k+2])) {
			k += 2
		}
		text := string(rs[i:k])
		if k < len(rs) && rs[k] == '.' {
			text += "."
			k++
		}
		if w, ok := dottedWords[strings.ToLower(text)]; ok {
			return k, textToken{text: text, spoken: strings.Fields(w)}
		}
		// espeak-ng spells a dotted initialism without its final period
		// (U.S.A → ju:Es'eI); a final period would end its clause.
		return k, textToken{text: text, spoken: []string{strings.TrimSuffix(text, ".")}}
	}
	if j < len(rs) && rs[j] == '.' {
		if w, ok := abbreviations[strings.ToLower(word)]; ok {
			return j + 1, textToken{text: word + ".", spoken: strings.Fields(w)}
		}
	}
	return j, textToken{text: word, spoken: []string{word}}
}

// scanNumber reads a number with what belongs to it: a currency sign
// before, thousands commas, a decimal part, and a %, an ordinal suffix, an
// "s" (1990s) or a ":MM" time after.
func scanNumber(rs []rune, i int) (int, textToken) {
	start := i
	neg := false
	if rs[i] == '-' || rs[i] == '−' {
		neg = true
		i++
	}
	var cur rune
	if isCurrency(rs[i]) {
		cur = rs[i]
		i++
	}
	j := i
	var digits strings.Builder
	commas := false
	for j < len(rs) {
		if isDigit(rs[j]) {
			digits.WriteRune(rs[j])
			j++
		} else if rs[j] == ',' && j > i && allDigits(rs, j+1, 3) && (j+4 == len(rs) || !isDigit(rs[j+4])) {
			commas = true
			j++
		} else {
			break
		}
	}
	intPart := digits.String()
	frac := ""
	if j+1 < len(rs) && rs[j] == '.' && isDigit(rs[j+1]) {
		k := j + 1
		for k < len(rs) && isDigit(rs[k]) {
			k++
		}
		frac = string(rs[j+1 : k])
		j = k
	}
	var words []string
	switch {
	case cur == 0 && frac == "" && !commas && j+2 < len(rs) && rs[j] == ':' && allDigits(rs, j+1, 2) && (j+3 == len(rs) || !isDigit(rs[j+3])):
		h, _ := strconv.Atoi(intPart)
		m, _ := strconv.Atoi(string(rs[j+1 : j+3]))
		j += 3
		words = timeWords(h, m, intPart)
	case j < len(rs) && rs[j] == '%':
		j++
		words = append(numberWords(intPart, frac), "percent")
	case cur == 0 && frac == "" && j+1 < len(rs) && isOrdinalSuffix(rs[j], rs[j+1]) && (j+2 == len(rs) || !unicode.IsLetter(rs[j+2])):
		j += 2
		words = ordinalWords(intPart)
	case cur != 0:
		words = currencyWords(cur, intPart, frac)
	case !commas && frac == "" && len(intPart) == 4 && isYear(intPart):
		words = yearWords(intPart)
		if j < len(rs) && rs[j] == 's' && (j+1 == len(rs) || !unicode.IsLetter(rs[j+1])) {
			j++
			words[len(words)-1] = plural(words[len(words)-1])
		}
	default:
		words = numberWords(intPart, frac)
	}
	if neg {
		words = append([]string{"minus"}, words...)
	}
	return j, textToken{text: string(rs[start:j]), spoken: words}
}

func allDigits(rs []rune, i, n int) bool {
	if i+n > len(rs) {
		return false
	}
	for k := i; k < i+n; k++ {
		if !isDigit(rs[k]) {
			return false
		}
	}
	return true
}

func isOrdinalSuffix(a, b rune) bool {
	s := strings.ToLower(string([]rune{a, b}))
	return s == "st" || s == "nd" || s == "rd" || s == "th"
}

var small = []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
	"eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"}
var tens = []string{"", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"}
var scales = []string{"", "thousand", "million", "billion", "trillion"}

// cardinal writes 0 ≤ n < 10^15 in words, tens and units hyphenated
// ("one hundred twenty-three").
func cardinal(n uint64) []string {
	if n < 20 {
		return []string{small[n]}
	}
	if n < 100 {
		if n%10 == 0 {
			return []string{tens[n/10]}
		}
		return []string{tens[n/10] + "-" + small[n%10]}
	}
	if n < 1000 {
		w := []string{small[n/100], "hundred"}
		if n%100 != 0 {
			w = append(w, cardinal(n%100)...)
		}
		return w
	}
	var groups []uint64
	for m := n; m > 0; m /= 1000 {
		groups = append(groups, m%1000)
	}
	var w []string
	for g := len(groups) - 1; g >= 0; g-- {
		if groups[g] == 0 {
			continue
		}
		w = append(w, cardinal(groups[g])...)
		if scales[g] != "" {
			w = append(w, scales[g])
		}
	}
	return w
}

// digitWords reads each digit ("zero zero seven").
func digitWords(s string) []string {
	w := make([]string, 0, len(s))
	for _, r := range s {
		w = append(w, small[r-'0'])
	}
	return w
}

// numberWords reads an integer part and an optional decimal part: leading
// zeros and numbers past the trillions are read digit by digit; decimals
// are "point" and digits.
func numberWords(intPart, frac string) []string {
	var w []string
	n, err := strconv.ParseUint(intPart, 10, 64)
	switch {
	case intPart == "":
		w = []string{"zero"}
	case err != nil || n >= 1e15 || (len(intPart) > 1 && intPart[0] == '0'):
		w = digitWords(intPart)
	default:
		w = cardinal(n)
	}
	if frac != "" {
		w = append(w, "point")
		w = append(w, digitWords(frac)...)
	}
	return w
}

func isYear(s string) bool {
	n, _ := strconv.Atoi(s)
	return n >= 1100 && n <= 2099
}

// yearWords reads a year as pairs: 1984 nineteen eighty-four, 1900
// nineteen hundred, 1905 nineteen oh five, 2000-2009 two thousand (five),
// 2024 twenty twenty-four.
func yearWords(s string) []string {
	n, _ := strconv.Atoi(s)
	hi, lo := n/100, n%100
	switch {
	case n >= 2000 && n < 2010:
		return cardinal(uint64(n))
	case lo == 0:
		return append(cardinal(uint64(hi)), "hundred")
	case lo < 10:
		return append(append(cardinal(uint64(hi)), "oh"), small[lo])
	}
	return append(cardinal(uint64(hi)), cardinal(uint64(lo))...)
}

func ordinalWords(intPart string) []string {
	w := numberWords(intPart, "")
	w[len(w)-1] = ordinal(w[len(w)-1])
	return w
}

// ordinal turns the last word of a cardinal into its ordinal, keeping a
// hyphenated tens part ("twenty-one" → "twenty-first").
func ordinal(word string) string {
	prefix := ""
	if i := strings.LastIndex(word, "-"); i >= 0 {
		prefix, word = word[:i+1], word[i+1:]
	}
	irregular := map[string]string{"one": "first", "two": "second", "three": "third", "five": "fifth",
		"eight": "eighth", "nine": "ninth", "twelve": "twelfth"}
	if o, ok := irregular[word]; ok {
		return prefix + o
	}
	if strings.HasSuffix(word, "y") {
		return prefix + strings.TrimSuffix(word, "y") + "ieth"
	}
	return prefix + word + "th"
}

func plural(word string) string {
	if strings.HasSuffix(word, "y") {
		return strings.TrimSuffix(word, "y") + "ies"
	}
	if strings.HasSuffix(word, "x") || strings.HasSuffix(word, "s") {
		return word + "es"
	}
	return word + "s"
}

// currencyWords reads $5 five dollars, $1 one dollar, $5.50 five dollars
// and fifty cents, $0.99 ninety-nine cents; a decimal part that is not
// two digits is read as a decimal ($1.5 one point five dollars).
func currencyWords(cur rune, intPart, frac string) []string {
	unit, units, sub, subs := "dollar", "dollars", "cent", "cents"
	switch cur {
	case '£':
		unit, units, sub, subs = "pound", "pounds", "penny", "pence"
	case '€':
		unit, units = "euro", "euros"
	}
	if frac != "" && len(frac) != 2 {
		return append(numberWords(intPart, frac), units)
	}
	n, err := strconv.ParseUint(intPart, 10, 64)
	if err != nil || n >= 1e15 {
		return append(numberWords(intPart, ""), units)
	}
	c, _ := strconv.Atoi(frac) // 0 when there is none
	var w []string
	if n > 0 || c == 0 {
		w = cardinal(n)
		if n == 1 {
			w = append(w, unit)
		} else {
			w = append(w, units)
		}
	}
	if c > 0 {
		if len(w) > 0 {
			w = append(w, "and")
		}
		w = append(w, cardinal(uint64(c))...)
		if c == 1 {
			w = append(w, sub)
		} else {
			w = append(w, subs)
		}
	}
	return w
}

// timeWords reads H:MM: 3:30 three thirty, 3:05 three oh five, 3:00 three
// o'clock. Anything that is not a clock time is read as two numbers.
func timeWords(h, m int, intPart string) []string {
	if h > 24 || m > 59 {
		return append(numberWords(intPart, ""), cardinal(uint64(m))...)
	}
	w := cardinal(uint64(h))
	switch {
	case m == 0:
		return append(w, "o'clock")
	case m < 10:
		return append(w, "oh", small[m])
	}
	return append(w, cardinal(uint64(m))...)
}

// validUTF8 replaces invalid bytes so that a bad file reads as text with
// gaps rather than failing.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, " ")
}
