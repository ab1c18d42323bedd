package structured

import "slices"

// Matcher reads a document byte by byte against a schema: after each byte
// it knows whether the text so far can still become a valid document. It
// keeps one parse (a stack of frames) per way the text can still be read,
// which only anyOf and an ambiguous enum make more than one.
type Matcher struct {
	threads [][]frame
}

type what uint8

const (
	fValue   what = iota // a value of n is expected
	fObject              // inside an object
	fKey                 // reading an object's key
	fArray               // inside an array
	fString              // inside a string
	fNumber              // inside a number
	fLiteral             // inside one of a few fixed texts
)

// Object and array progress.
const (
	sOpen      = iota // after the opening bracket
	sColon            // after a key
	sAfter            // after a member
	sNeedKey          // after a comma, in an object
	sNeedValue        // after a comma, in an array
)

// Number progress.
const (
	nStart = iota
	nMinus
	nZero
	nInt
	nDot
	nFrac
	nExp
	nExpSign
	nExpDigits
)

type frame struct {
	w     what
	n     *node
	state int
	count int    // array items, string length, number digits, literal bytes read
	space int    // whitespace bytes in a row
	depth int    // nesting, for values the schema does not bound
	seen  uint64 // object: the properties written, bit i for props[i] (the first 64)
	cur   *node  // object: the schema of the member being read
	esc   int    // string, key: 0, or 1 after '\', or 2..5 inside \uXXXX
	// String, key: the UTF-8 continuation bytes still due, and the range
	// of the next one.
	utf    int
	lo, hi byte
	key    []byte // key: its text so far, quote and escapes included
	lits   []string
}

// NewMatcher starts a document of schema s. Its prefix and suffix are
// literal frames below and above the value.
func NewMatcher(s *Schema) *Matcher {
	var t []frame
	if s.suffix != "" {
		t = append(t, frame{w: fLiteral, lits: []string{s.suffix}})
	}
	t = append(t, frame{w: fValue, n: s.root})
	if s.prefix != "" {
		t = append(t, frame{w: fLiteral, lits: []string{s.prefix}})
	}
	return &Matcher{threads: [][]frame{t}}
}

// Clone is an independent copy. The parses are shared, not copied: step
// never changes a stack in place.
func (m *Matcher) Clone() *Matcher {
	return &Matcher{threads: slices.Clone(m.threads)}
}

// Feed reads b and reports whether the text can still become a valid
// document; on false the matcher is dead and stays so.
func (m *Matcher) Feed(b []byte) bool {
	for _, c := range b {
		var next [][]frame
		for _, t := range m.threads {
			next = append(next, step(t, c)...)
		}
		m.threads = next
		if len(next) == 0 {
			return false
		}
	}
	return true
}

// Alive reports whether the text so far can still become a valid document.
func (m *Matcher) Alive() bool { return len(m.threads) > 0 }

// Done reports whether the text so far is a whole valid document.
func (m *Matcher) Done() bool {
	for _, t := range m.threads {
		if canEnd(t) {
			return true
		}
	}
	return false
}

// More reports whether some byte can follow the text so far.
func (m *Matcher) More() bool {
	for _, t := range m.threads {
		if len(t) > 0 {
			return true
		}
	}
	return false
}

// canEnd says whether t is complete: its stack empty, or only frames that
// end where they stand (a number, a literal) left.
func canEnd(t []frame) bool {
	for i := len(t) - 1; i >= 0; i-- {
		if !complete(&t[i]) {
			return false
		}
	}
	return true
}

// complete says whether a number or literal frame may end here.
func complete(f *frame) bool {
	switch f.w {
	case fNumber:
		return f.state == nZero || f.state == nInt || f.state == nFrac || f.state == nExpDigits
	case fLiteral:
		for _, l := range f.lits {
			if len(l) == f.count {
				return true
			}
		}
	}
	return false
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' }

// skipSpace takes c when it is whitespace within the bound of a run, and
// reports whether it was whitespace at all; any other byte ends the run.
func skipSpace(t []frame, c byte) ([][]frame, bool) {
	f := &t[len(t)-1]
	if !isSpace(c) {
		f.space = 0
		return nil, false
	}
	if f.space >= maxSpace {
		return nil, true
	}
	f.space++
	return [][]frame{t}, true
}

// step returns the parses t becomes after c: none when c cannot follow.
// The stack is copied, never changed in place: other matchers may share it.
func step(t []frame, c byte) [][]frame {
	if len(t) == 0 {
		return nil // the document is over
	}
	t = slices.Clone(t)
	top := &t[len(t)-1]
	switch top.w {
	case fValue:
		return stepValue(t, c)
	case fObject:
		return stepObject(t, c)
	case fKey:
		return stepKey(t, c)
	case fArray:
		return stepArray(t, c)
	case fString:
		return stepString(t, c)
	case fNumber:
		return stepNumber(t, c)
	case fLiteral:
		return stepLiteral(t, c)
	}
	return nil
}

// pop ends the top frame and tells its parent that a value ended.
func pop(t []frame) []frame {
	t = t[:len(t)-1]
	if len(t) > 0 {
		p := &t[len(t)-1]
		switch p.w {
		case fObject:
			p.state, p.space = sAfter, 0
		case fArray:
			p.state, p.space = sAfter, 0
			p.count++
		}
	}
	return t
}

// popAndFeed ends a number or literal that c does not continue, and feeds
// c to what holds it.
func popAndFeed(t []frame, c byte) [][]frame {
	t = pop(t)
	if len(t) == 0 {
		return nil // nothing may follow the document
	}
	return step(t, c)
}

func stepValue(t []frame, c byte) [][]frame {
	top := &t[len(t)-1]
	n, depth := top.n, top.depth
	if out, ok := skipSpace(t, c); ok {
		return out
	}
	begin := func(f frame) [][]frame {
		f.depth = depth
		t[len(t)-1] = f
		return step(t, c)
	}
	switch n.kind {
	case kindAnyOf:
		var out [][]frame
		for _, a := range n.alts {
			u := slices.Clone(t)
			u[len(u)-1] = frame{w: fValue, n: a, depth: depth}
			out = append(out, stepValue(u, c)...)
		}
		return out
	case kindAny:
		if depth >= maxDepth && (c == '{' || c == '[') {
			return nil
		}
		switch {
		case c == '{':
			return begin(frame{w: fValue, n: &node{kind: kindObject, additional: anyValue}})
		case c == '[':
			return begin(frame{w: fValue, n: &node{kind: kindArray, items: anyValue, maxItems: -1}})
		case c == '"':
			return begin(frame{w: fValue, n: &node{kind: kindString, maxLen: -1}})
		case c == '-' || c >= '0' && c <= '9':
			return begin(frame{w: fValue, n: &node{kind: kindNumber}})
		case c == 't' || c == 'f' || c == 'n':
			return begin(frame{w: fLiteral, n: n, lits: []string{"true", "false", "null"}})
		}
		return nil
	case kindObject:
		if c != '{' {
			return nil
		}
		t[len(t)-1] = frame{w: fObject, n: n, state: sOpen, depth: depth + 1}
		return [][]frame{t}
	case kindArray:
		if c != '[' {
			return nil
		}
		t[len(t)-1] = frame{w: fArray, n: n, state: sOpen, depth: depth + 1}
		return [][]frame{t}
	case kindString:
		if c != '"' {
			return nil
		}
		t[len(t)-1] = frame{w: fString, n: n, depth: depth}
		return [][]frame{t}
	case kindNumber, kindInteger:
		t[len(t)-1] = frame{w: fNumber, n: n, state: nStart, depth: depth}
		return stepNumber(t, c)
	case kindBool:
		return begin(frame{w: fLiteral, n: n, lits: []string{"true", "false"}})
	case kindNull:
		return begin(frame{w: fLiteral, n: n, lits: []string{"null"}})
	case kindLiteral:
		return begin(frame{w: fLiteral, n: n, lits: n.literals})
	}
	return nil
}

// requiredDone says whether every required property of an object frame
// has been written.
func requiredDone(f *frame) bool {
	for i, r := range f.n.required {
		if r && (i >= 64 || f.seen&(1<<i) == 0) {
			return false
		}
	}
	return true
}

// canAddKey says whether an object frame may take another member.
func canAddKey(f *frame) bool {
	if f.n.additional != nil {
		return true
	}
	for i := range f.n.props {
		if i >= 64 || f.seen&(1<<i) == 0 {
			return true
		}
	}
	return false
}

func stepObject(t []frame, c byte) [][]frame {
	f := &t[len(t)-1]
	if out, ok := skipSpace(t, c); ok {
		return out
	}
	switch f.state {
	case sOpen, sNeedKey:
		if c == '"' && canAddKey(f) {
			return [][]frame{append(t, frame{w: fKey, n: f.n, key: []byte{'"'}})}
		}
		if c == '}' && f.state == sOpen && requiredDone(f) {
			return [][]frame{pop(t)}
		}
	case sColon:
		if c == ':' {
			f.state = sAfter // the value's end sets it again
			return [][]frame{append(t, frame{w: fValue, n: f.cur, depth: f.depth})}
		}
	case sAfter:
		if c == ',' && canAddKey(f) {
			f.state = sNeedKey
			return [][]frame{t}
		}
		if c == '}' && requiredDone(f) {
			return [][]frame{pop(t)}
		}
	}
	return nil
}

// maxKey bounds an object key's bytes: past it only the key's end (or
// the rest of an escape or character begun) may come.
const maxKey = 250

// stepKey reads an object's key: a prefix of a property not yet written,
// or any string where other keys are allowed. Its end picks the member's
// schema.
func stepKey(t []frame, c byte) [][]frame {
	k := &t[len(t)-1]
	obj := &t[len(t)-2]
	limit := len(k.key) >= maxKey && k.esc == 0 && k.utf == 0
	end := k.esc == 0 && k.utf == 0 && c == '"'
	if !end {
		if limit {
			return nil
		}
		if _, ok := stringByte(k, c); !ok {
			return nil
		}
	}
	key := append(slices.Clone(k.key), c)
	if !end {
		ok := obj.n.additional != nil
		for i, p := range obj.n.props {
			if !ok && (i >= 64 || obj.seen&(1<<i) == 0) && len(p.name) >= len(key) && p.name[:len(key)] == string(key) {
				ok = true
			}
		}
		if !ok {
			return nil
		}
		k.key = key
		return [][]frame{t}
	}
	for i, p := range obj.n.props {
		if p.name == string(key) {
			if i < 64 && obj.seen&(1<<i) != 0 {
				return nil // a key written twice
			}
			if i < 64 {
				obj.seen |= 1 << i
			}
			obj.cur, obj.state, obj.space = p.node, sColon, 0
			return [][]frame{t[:len(t)-1]}
		}
	}
	if obj.n.additional == nil {
		return nil
	}
	obj.cur, obj.state, obj.space = obj.n.additional, sColon, 0
	return [][]frame{t[:len(t)-1]}
}

// stringByte reads one byte of a string's inside other than its closing
// quote: escapes (\uXXXX included) and UTF-8 checked, so that the text
// decodes as written. It reports whether c begins a character (what a
// length counts) and whether it may come at all.
func stringByte(f *frame, c byte) (char, ok bool) {
	switch {
	case f.esc == 1:
		switch c {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			f.esc = 0
		case 'u':
			f.esc = 2
		default:
			return false, false
		}
		return false, true
	case f.esc >= 2:
		if !isHex(c) {
			return false, false
		}
		if f.esc++; f.esc == 6 {
			f.esc = 0
		}
		return false, true
	case f.utf > 0:
		if c < f.lo || c > f.hi {
			return false, false
		}
		f.utf--
		f.lo, f.hi = 0x80, 0xBF
		return false, true
	case c < 0x20 || c == '"':
		return false, false
	case c == '\\':
		f.esc = 1
	case c < 0x80:
	case c >= 0xC2 && c <= 0xDF:
		f.utf, f.lo, f.hi = 1, 0x80, 0xBF
	case c >= 0xE0 && c <= 0xEF:
		f.utf, f.lo, f.hi = 2, 0x80, 0xBF
		if c == 0xE0 {
			f.lo = 0xA0 // no overlong form
		} else if c == 0xED {
			f.hi = 0x9F // no surrogate
		}
	case c >= 0xF0 && c <= 0xF4:
		f.utf, f.lo, f.hi = 3, 0x80, 0xBF
		if c == 0xF0 {
			f.lo = 0x90
		} else if c == 0xF4 {
			f.hi = 0x8F // up to U+10FFFF
		}
	default:
		return false, false // a stray continuation byte, or never UTF-8
	}
	return true, true
}

func stepArray(t []frame, c byte) [][]frame {
	f := &t[len(t)-1]
	if out, ok := skipSpace(t, c); ok {
		return out
	}
	switch f.state {
	case sOpen, sNeedValue:
		if c == ']' && f.state == sOpen && f.count >= f.n.minItems {
			return [][]frame{pop(t)}
		}
		if f.n.maxItems >= 0 && f.count >= f.n.maxItems {
			return nil
		}
		f.state = sAfter
		return stepValue(append(t, frame{w: fValue, n: f.n.items, depth: f.depth}), c)
	case sAfter:
		if c == ',' && (f.n.maxItems < 0 || f.count < f.n.maxItems) {
			f.state = sNeedValue
			return [][]frame{t}
		}
		if c == ']' && f.count >= f.n.minItems {
			return [][]frame{pop(t)}
		}
	}
	return nil
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func stepString(t []frame, c byte) [][]frame {
	f := &t[len(t)-1]
	if c == '"' && f.esc == 0 && f.utf == 0 {
		if f.count < f.n.minLen {
			return nil
		}
		return [][]frame{pop(t)}
	}
	before := *f
	char, ok := stringByte(f, c)
	if !ok {
		return nil
	}
	if char {
		// A character (an escape is one) counts toward the length, at
		// its first byte.
		if f.n.maxLen >= 0 && f.count >= f.n.maxLen {
			*f = before
			return nil
		}
		f.count++
	}
	return [][]frame{t}
}

func stepNumber(t []frame, c byte) [][]frame {
	f := &t[len(t)-1]
	digit := c >= '0' && c <= '9'
	if digit {
		if f.count >= maxDigits {
			return nil
		}
	}
	integer := f.n.kind == kindInteger
	next := -1
	switch f.state {
	case nStart:
		switch {
		case c == '-':
			next = nMinus
		case c == '0':
			next = nZero
		case digit:
			next = nInt
		}
	case nMinus:
		switch {
		case c == '0':
			next = nZero
		case digit:
			next = nInt
		}
	case nZero, nInt:
		switch {
		case digit && f.state == nInt:
			next = nInt
		case c == '.' && !integer:
			next = nDot
		case (c == 'e' || c == 'E') && !integer:
			next = nExp
		}
	case nDot, nFrac:
		switch {
		case digit:
			next = nFrac
		case (c == 'e' || c == 'E') && f.state == nFrac:
			next = nExp
		}
	case nExp:
		switch {
		case c == '+' || c == '-':
			next = nExpSign
		case digit:
			next = nExpDigits
		}
	case nExpSign, nExpDigits:
		if digit {
			next = nExpDigits
		}
	}
	if next < 0 {
		if complete(f) {
			return popAndFeed(t, c)
		}
		return nil
	}
	// A state that needs a digit is entered only while one may still come,
	// so that the bound never leaves a number that cannot end.
	if (next == nMinus || next == nDot || next == nExp || next == nExpSign) && f.count >= maxDigits {
		return nil
	}
	f.state = next
	if digit {
		f.count++
	}
	return [][]frame{t}
}

func stepLiteral(t []frame, c byte) [][]frame {
	f := &t[len(t)-1]
	var keep []string
	for _, l := range f.lits {
		if len(l) > f.count && l[f.count] == c {
			keep = append(keep, l)
		}
	}
	if len(keep) == 0 {
		if complete(f) {
			return popAndFeed(t, c)
		}
		return nil
	}
	var out [][]frame
	if complete(f) {
		// "1" of an enum [1, 12] may end here, or go on.
		out = popAndFeed(slices.Clone(t), c)
	}
	f.lits, f.count = keep, f.count+1
	// A literal read to its end with no longer one left ends at once.
	if len(keep) == 1 && len(keep[0]) == f.count {
		last := keep[0][len(keep[0])-1]
		if last == '"' || last == '}' || last == ']' || last == 'e' || last == 'l' {
			return append(out, pop(t))
		}
	}
	return append(out, t)
}
