package tokenizer

import "unicode"

// A runeMatcher is a hand-written equivalent of one pre-tokenizer pattern:
// the length of the pattern's match anchored at rs[i], or 0 if it does not
// match there. The two patterns nearly every BPE model uses (GPT-2's and
// Llama 3's, with Qwen 2's one-digit variant) get one, because regexp2's
// backtracking costs three quarters of encoding time, and so does Gemma 4's
// newline split, which is trivial; regexp2 stays the engine for every other
// pattern and the oracle these are tested against
// (TestFastPreTokenizersMatchRegexp2, FuzzFastPreTokenizers).
type runeMatcher func(rs []rune, i int) int

// fastMatcher is the hand-written matcher of pattern, or nil.
func fastMatcher(pattern string) runeMatcher {
	switch pattern {
	case patGPT2:
		return matchGPT2
	case patLlama3:
		return func(rs []rune, i int) int { return matchLlama3(rs, i, 3) }
	case patQwen2:
		return func(rs []rune, i int) int { return matchLlama3(rs, i, 1) }
	case patNewlines:
		return matchNewlines
	}
	return nil
}

// matchNewlines is patNewlines: the run of newlines, or of other
// characters, that starts at rs[i].
func matchNewlines(rs []rune, i int) int {
	nl := rs[i] == '\n'
	j := i + 1
	for j < len(rs) && (rs[j] == '\n') == nl {
		j++
	}
	return j - i
}

// isSpace is \s: Unicode White_Space, as regexp2 and Oniguruma define it.
func isSpace(r rune) bool { return unicode.IsSpace(r) }

func isLetter(r rune) bool { return unicode.IsLetter(r) }
func isNumber(r rune) bool { return unicode.IsNumber(r) }

// isOther is [^\s\p{L}\p{N}].
func isOther(r rune) bool { return !isSpace(r) && !isLetter(r) && !isNumber(r) }

// contraction is the length of 's 't 're 've 'm 'll 'd at rs[i], tried in
// that order, matching case if fold is false.
func contraction(rs []rune, i int, fold bool) int {
	if rs[i] != '\'' || i+1 >= len(rs) {
		return 0
	}
	at := func(k int, c rune) bool {
		if i+k >= len(rs) {
			return false
		}
		r := rs[i+k]
		if fold && r >= 'A' && r <= 'Z' {
			r += 'a' - 'A'
		}
		return r == c
	}
	switch {
	case at(1, 's'), at(1, 't'):
		return 2
	case at(1, 'r') && at(2, 'e'), at(1, 'v') && at(2, 'e'):
		return 3
	case at(1, 'm'):
		return 2
	case at(1, 'l') && at(2, 'l'):
		return 3
	case at(1, 'd'):
		return 2
	}
	return 0
}

// run is the number of runes from rs[i] on that satisfy f.
func run(rs []rune, i int, f func(rune) bool) int {
	n := 0
	for i+n < len(rs) && f(rs[i+n]) {
		n++
	}
	return n
}

// trailingSpace is \s+(?!\S) at rs[i]: a whitespace run, less its last
// character when a non-space follows it.
func trailingSpace(rs []rune, i int) int {
	n := run(rs, i, isSpace)
	if n == 0 || i+n == len(rs) {
		return n
	}
	return n - 1
}

// matchGPT2 is patGPT2:
// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
func matchGPT2(rs []rune, i int) int {
	if n := contraction(rs, i, false); n > 0 {
		return n
	}
	for _, class := range [...]func(rune) bool{isLetter, isNumber, isOther} {
		if rs[i] == ' ' && i+1 < len(rs) && class(rs[i+1]) {
			return 1 + run(rs, i+1, class)
		}
		if class(rs[i]) {
			return run(rs, i, class)
		}
	}
	return trailingSpace(rs, i)
}

// matchLlama3 is patLlama3 (digits = 3) or patQwen2 (digits = 1):
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,digits}|
// ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func matchLlama3(rs []rune, i int, digits int) int {
	if n := contraction(rs, i, true); n > 0 {
		return n
	}
	r := rs[i]
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if r != '\r' && r != '\n' && !isLetter(r) && !isNumber(r) && i+1 < len(rs) && isLetter(rs[i+1]) {
		return 1 + run(rs, i+1, isLetter)
	}
	if isLetter(r) {
		return run(rs, i, isLetter)
	}
	// \p{N}{1,digits}
	if isNumber(r) {
		return min(run(rs, i, isNumber), digits)
	}
	// ?[^\s\p{L}\p{N}]+[\r\n]*
	sp := 0
	if r == ' ' {
		sp = 1
	}
	if i+sp < len(rs) {
		if n := run(rs, i+sp, isOther); n > 0 {
			n += sp
			return n + run(rs, i+n, func(c rune) bool { return c == '\r' || c == '\n' })
		}
	}
	// \s*[\r\n]+: up to the last newline of the whitespace run.
	ws := run(rs, i, isSpace)
	for k := ws - 1; k >= 0; k-- {
		if c := rs[i+k]; c == '\r' || c == '\n' {
			return k + 1
		}
	}
	// \s+(?!\S), then \s+
	if n := trailingSpace(rs, i); n > 0 {
		return n
	}
	return ws
}
