package chat

import (
	"strings"
	"unicode"
)

// toJSONFunc is the variable that rewriteToJSON calls in place of the
// tojson filter.
const toJSONFunc = "__hearth_tojson"

// rewriteToJSON turns each "operand | tojson(args)" in a tag's content into
// "__hearth_tojson(operand, args)". ardanlabs/jinja takes filters only from
// its own table, and its tojson is not json.dumps: it writes 2.0 as 2,
// escapes U+2028, and with indent sorts the keys and escapes <, > and &.
// Llama 3.1's template indents its tool definitions, so the prompt would
// differ from the one the model was trained on.
//
// A filter binds tighter than any operator, so its operand is the primary
// expression to its left with its postfix parts (attributes, subscripts,
// calls) and the filters before it in the same chain.
func rewriteToJSON(s string) string {
	for {
		toks := lexTag(s)
		i := findToJSONFilter(toks)
		if i < 0 {
			return s
		}
		pipe := prevToken(toks, i)
		start := operandStart(toks, prevToken(toks, pipe))
		if start < 0 {
			return s // not a form this rewrite understands; leave it to the engine
		}
		end := toks[i].end
		args := ""
		if j := nextToken(toks, i); j >= 0 && toks[j].text == "(" {
			k := matching(toks, j)
			if k < 0 {
				return s
			}
			args = strings.TrimSpace(s[toks[j].end:toks[k].start])
			end = toks[k].end
		}
		operand := strings.TrimSpace(s[toks[start].start:toks[pipe].start])
		call := toJSONFunc + "(" + operand
		if args != "" {
			call += ", " + args
		}
		call += ")"
		s = s[:toks[start].start] + call + s[end:]
	}
}

// token is a lexical token of a tag's content.
type token struct {
	text       string
	start, end int
	kind       byte // 'n' name, 's' string, '0' number, 'p' punctuation, ' ' space
}

// lexTag splits a tag's content into tokens: enough of Jinja's lexer to
// find brackets, names and strings.
func lexTag(s string) []token {
	var toks []token
	for i := 0; i < len(s); {
		c := s[i]
		j := i + 1
		kind := byte('p')
		switch {
		case c == '\'' || c == '"':
			kind = 's'
			for j < len(s) && s[j] != c {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			j = min(j+1, len(s))
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			kind = ' '
			for j < len(s) && strings.IndexByte(" \t\n\r", s[j]) >= 0 {
				j++
			}
		case c == '_' || unicode.IsLetter(rune(c)):
			kind = 'n'
			for j < len(s) && (s[j] == '_' || unicode.IsLetter(rune(s[j])) || unicode.IsDigit(rune(s[j]))) {
				j++
			}
		case c >= '0' && c <= '9':
			kind = '0'
			for j < len(s) && (s[j] == '.' || s[j] == '_' || unicode.IsLetter(rune(s[j])) || unicode.IsDigit(rune(s[j]))) {
				j++
			}
		}
		toks = append(toks, token{text: s[i:j], start: i, end: j, kind: kind})
		i = j
	}
	return toks
}

func findToJSONFilter(toks []token) int {
	for i, t := range toks {
		if t.kind == 'n' && t.text == "tojson" {
			if p := prevToken(toks, i); p >= 0 && toks[p].text == "|" {
				return i
			}
		}
	}
	return -1
}

func prevToken(toks []token, i int) int {
	for i--; i >= 0; i-- {
		if toks[i].kind != ' ' {
			return i
		}
	}
	return -1
}

func nextToken(toks []token, i int) int {
	for i++; i < len(toks); i++ {
		if toks[i].kind != ' ' {
			return i
		}
	}
	return -1
}

// matching is the index of the bracket that closes (or opens) toks[i].
func matching(toks []token, i int) int {
	want := map[string]string{"(": ")", "[": "]", "{": "}", ")": "(", "]": "[", "}": "{"}[toks[i].text]
	step := 1
	if strings.Contains(")]}", toks[i].text) {
		step = -1
	}
	depth := 0
	for j := i; j >= 0 && j < len(toks); j += step {
		switch toks[j].text {
		case toks[i].text:
			depth++
		case want:
			depth--
			if depth == 0 {
				return j
			}
		}
	}
	return -1
}

// isKeyword reports whether a name is an operator or statement word, not
// an operand.
func isKeyword(name string) bool {
	switch name {
	case "and", "or", "not", "in", "is", "if", "else", "elif", "for", "set", "print":
		return true
	}
	return false
}

// operandStart walks back from the last token of a filter's operand to its
// first, or -1.
func operandStart(toks []token, i int) int {
	for i >= 0 {
		t := toks[i]
		start := i
		switch {
		case t.text == ")" || t.text == "]" || t.text == "}":
			start = matching(toks, i)
			if start < 0 {
				return -1
			}
			// A bracket after an operand is a call or subscript of it.
			if p := prevToken(toks, start); p >= 0 && t.text != "}" && isOperandEnd(toks[p]) {
				i = p
				continue
			}
		case t.kind == 'n' && !isKeyword(t.text), t.kind == 's', t.kind == '0':
		default:
			return -1
		}
		p := prevToken(toks, start)
		switch {
		case p >= 0 && toks[p].text == ".":
			i = prevToken(toks, p) // attribute of what stands before the dot
		case p >= 0 && toks[p].text == "|" && t.kind == 'n':
			i = prevToken(toks, p) // an earlier filter of the same chain
		default:
			return start
		}
	}
	return -1
}

func isOperandEnd(t token) bool {
	return (t.kind == 'n' && !isKeyword(t.text)) || t.kind == 's' || t.text == ")" || t.text == "]"
}
