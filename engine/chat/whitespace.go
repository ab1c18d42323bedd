package chat

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// resolveWhitespace rewrites a Jinja template so that it needs no
// whitespace control: it applies Jinja2's rules for the configuration
// transformers renders chat templates with (trim_blocks, lstrip_blocks, the
// "-" and "+" markers, newlines normalized to "\n", one trailing newline
// dropped), drops comments, and turns every piece of literal text into a
// string expression. The result renders the same in any engine that gets
// expressions and statements right.
//
// It exists because ardanlabs/jinja v1.8.0 applies a "-" marker (and the
// trim_blocks/lstrip_blocks defaults) to the nearest text segment even when
// another tag stands between: "User: {{ x }}{%- if y %}" loses the space
// after "User:", which Jinja2 keeps. With no text segments and no markers
// left, that code has nothing to act on.
func resolveWhitespace(src string) (string, error) {
	// Jinja2's lexer splits the source on \r\n, \r and \n and joins the
	// lines with \n, dropping the last line if it is empty
	// (keep_trailing_newline is off).
	src = strings.ReplaceAll(src, "\r\n", "\n")
	src = strings.ReplaceAll(src, "\r", "\n")
	src = strings.TrimSuffix(src, "\n")

	var out strings.Builder
	text := strings.Builder{} // literal text not yet written
	lineStarting := true      // the last thing consumed ended a line (or nothing was)
	// dropped counts the newlines consumed without being written
	// (comments, stripped whitespace); they are written as whitespace
	// inside the next expression so that line numbers in errors still
	// point into the source.
	dropped := 0
	drop := func(s string) { dropped += strings.Count(s, "\n") }
	flush := func() {
		if text.Len() > 0 || dropped > 0 {
			out.WriteString("{{ ")
			out.WriteString(quote(text.String()))
			out.WriteString(strings.Repeat("\n", dropped))
			out.WriteString(" }}")
			text.Reset()
			dropped = 0
		}
	}
	pos := 0
	for pos < len(src) {
		open := nextOpener(src, pos)
		if open < 0 {
			text.WriteString(src[pos:])
			break
		}
		data := src[pos:open]
		kind := src[open+1] // '{', '%' or '#'
		i := open + 2
		sign := byte(0)
		if i < len(src) && (src[i] == '-' || src[i] == '+') {
			sign = src[i]
			i++
		}
		raw := kind == '%' && isRawTag(src[i:])

		// Whitespace before the tag.
		kept := data
		switch {
		case sign == '-':
			kept = strings.TrimRightFunc(data, isPySpace)
		case sign != '+' && kind != '{':
			kept = lstrip(data, lineStarting)
		}
		text.WriteString(kept)
		drop(data[len(kept):])

		switch {
		case raw:
			// {% raw %}…{% endraw %}: the body is text. The opening tag
			// takes trim_blocks' newline only with "-"; the closing tag
			// follows the usual rules.
			_, after, ok := strings.Cut(src[i:], "%}")
			if !ok {
				return "", fmt.Errorf("chat template: unclosed raw tag at byte %d", open)
			}
			bodyStart := len(src) - len(after)
			drop(src[open:bodyStart])
			if strings.HasSuffix(strings.TrimRightFunc(src[i:bodyStart-2], isPySpace), "-") {
				after = strings.TrimLeftFunc(after, isPySpace)
				drop(src[bodyStart : len(src)-len(after)])
				bodyStart = len(src) - len(after)
			}
			endOpen, endSign, endClose, endLen, ok := findEndRaw(src, bodyStart)
			if !ok {
				return "", fmt.Errorf("chat template: raw block at byte %d has no endraw", open)
			}
			body := src[bodyStart:endOpen]
			kept := body
			switch {
			case endSign == '-':
				kept = strings.TrimRightFunc(body, isPySpace)
			case endSign != '+':
				kept = lstrip(body, false)
			}
			text.WriteString(kept)
			drop(body[len(kept):])
			pos, lineStarting = afterClose(src, endClose, endLen, '%')
			drop(src[endOpen:pos])
		case kind == '#':
			end := strings.Index(src[i:], "#}")
			if end < 0 {
				return "", fmt.Errorf("chat template: unclosed comment at byte %d", open)
			}
			closeAt := i + end
			closeLen := 2
			if closeAt > i && (src[closeAt-1] == '-' || src[closeAt-1] == '+') {
				closeAt--
				closeLen++
			}
			pos, lineStarting = afterClose(src, closeAt, closeLen, '#')
			drop(src[open:pos])
		default:
			closeAt, closeLen, err := findClose(src, i, kind)
			if err != nil {
				return "", fmt.Errorf("chat template: tag at byte %d: %w", open, err)
			}
			flush()
			if kind == '{' {
				out.WriteString("{{")
			} else {
				out.WriteString("{%")
			}
			content := rewriteToJSON(src[i:closeAt])
			if kind == '{' {
				content = splitBraces(content)
			}
			out.WriteString(content)
			if kind == '{' {
				out.WriteString("}}")
			} else {
				out.WriteString("%}")
			}
			pos, lineStarting = afterClose(src, closeAt, closeLen, kind)
			drop(src[closeAt+closeLen : pos])
		}
	}
	flush()
	return out.String(), nil
}

// nextOpener is the index of the next "{{", "{%" or "{#" at or after pos.
func nextOpener(src string, pos int) int {
	for {
		i := strings.IndexByte(src[pos:], '{')
		if i < 0 || pos+i+1 >= len(src) {
			return -1
		}
		i += pos
		if c := src[i+1]; c == '{' || c == '%' || c == '#' {
			return i
		}
		pos = i + 1
	}
}

// isRawTag reports whether a block tag's content (after "{%" and its sign)
// is "raw".
func isRawTag(s string) bool {
	s = strings.TrimLeftFunc(s, isPySpace)
	if !strings.HasPrefix(s, "raw") {
		return false
	}
	s = strings.TrimLeftFunc(s[3:], isPySpace)
	return strings.HasPrefix(s, "%}") || strings.HasPrefix(s, "-%}")
}

// findEndRaw finds "{% endraw %}" from pos: where its "{%" is, its sign,
// where its closer starts and how long the closer is (with its sign).
func findEndRaw(src string, pos int) (open int, sign byte, closeAt, closeLen int, ok bool) {
	for {
		o := strings.Index(src[pos:], "{%")
		if o < 0 {
			return 0, 0, 0, 0, false
		}
		o += pos
		i := o + 2
		s := byte(0)
		if i < len(src) && (src[i] == '-' || src[i] == '+') {
			s = src[i]
			i++
		}
		rest := strings.TrimLeftFunc(src[i:], isPySpace)
		if strings.HasPrefix(rest, "endraw") {
			rest = strings.TrimLeftFunc(rest[len("endraw"):], isPySpace)
			at := len(src) - len(rest)
			switch {
			case strings.HasPrefix(rest, "%}"):
				return o, s, at, 2, true
			case strings.HasPrefix(rest, "-%}"), strings.HasPrefix(rest, "+%}"):
				return o, s, at, 3, true
			}
		}
		pos = o + 2
	}
}

// findClose finds the end of a variable ('{') or block ('%') tag whose
// content starts at i: the closer outside string literals and brackets,
// as Jinja2's lexer finds it. It returns where the closer starts (at its
// sign, if any) and its length.
func findClose(src string, i int, kind byte) (int, int, error) {
	closer := "}}"
	if kind == '%' {
		closer = "%}"
	}
	depth := 0
	for j := i; j < len(src); j++ {
		c := src[j]
		if c == '\'' || c == '"' {
			k := j + 1
			for k < len(src) && src[k] != c {
				if src[k] == '\\' {
					k++
				}
				k++
			}
			if k >= len(src) {
				return 0, 0, fmt.Errorf("unterminated string")
			}
			j = k
			continue
		}
		if depth == 0 {
			if (c == '-' || (c == '+' && kind == '%')) && strings.HasPrefix(src[j+1:], closer) {
				return j, 3, nil
			}
			if strings.HasPrefix(src[j:], closer) {
				return j, 2, nil
			}
		}
		switch c {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			if depth > 0 {
				depth--
			}
		}
	}
	return 0, 0, fmt.Errorf("no closing %q", closer)
}

// afterClose applies the whitespace rules after a closer at closeAt (with
// its sign when closeLen is 3) and returns where the text resumes and
// whether what was consumed ended a line.
func afterClose(src string, closeAt, closeLen int, kind byte) (int, bool) {
	end := closeAt + closeLen
	switch {
	case closeLen == 3 && src[closeAt] == '-':
		// "-%}" and "-}}" take all whitespace after them.
		rest := strings.TrimLeftFunc(src[end:], isPySpace)
		end = len(src) - len(rest)
	case closeLen == 3 && src[closeAt] == '+':
		// "+%}" keeps the newline.
	case kind != '{' && strings.HasPrefix(src[end:], "\n"):
		// trim_blocks: one newline after a block or comment tag.
		end++
	}
	return end, end > 0 && src[end-1] == '\n'
}

// lstrip is lstrip_blocks: the spaces between the start of the line and a
// block tag go, if nothing else is on that line before the tag.
// lineStarting says whether the text starts a line.
func lstrip(data string, lineStarting bool) string {
	l := strings.LastIndexByte(data, '\n') + 1
	if l == 0 && !lineStarting {
		return data
	}
	tail := data[l:]
	if tail == "" || strings.TrimLeftFunc(tail, isPySpace) != "" {
		return data
	}
	return data[:l]
}

// splitBraces puts a space between two closing braces outside string
// literals in an expression: ardanlabs/jinja ends a {{ }} tag at the first
// "}}", even inside a dict literal ({{ {'a': {'b': 1}} }}), while Jinja2
// counts brackets.
func splitBraces(s string) string {
	if !strings.Contains(s, "}}") {
		return s
	}
	var sb strings.Builder
	for j := 0; j < len(s); j++ {
		c := s[j]
		if c == '\'' || c == '"' {
			k := j + 1
			for k < len(s) && s[k] != c {
				if s[k] == '\\' {
					k++
				}
				k++
			}
			k = min(k, len(s)-1)
			sb.WriteString(s[j : k+1])
			j = k
			continue
		}
		sb.WriteByte(c)
		if c == '}' && j+1 < len(s) && s[j+1] == '}' {
			sb.WriteByte(' ')
		}
	}
	return sb.String()
}

// isPySpace is Python's str.isspace for one character, what Jinja2's
// \s and strip() use: Unicode White_Space plus the four ASCII separators
// U+001C–U+001F.
func isPySpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1C && r <= 0x1F)
}

// quote writes s as a single-quoted Jinja string literal. Newlines stay
// raw, so that the rewritten template keeps the source's line numbers.
func quote(s string) string {
	var sb strings.Builder
	sb.Grow(len(s) + 2)
	sb.WriteByte('\'')
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch r {
		case '\\':
			sb.WriteString(`\\`)
		case '\'':
			sb.WriteString(`\'`)
		default:
			sb.WriteString(s[i : i+n])
		}
		i += n
	}
	sb.WriteByte('\'')
	return sb.String()
}
