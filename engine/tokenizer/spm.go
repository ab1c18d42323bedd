package tokenizer

import (
	"container/heap"
	"fmt"
	"strings"
	"unicode/utf8"
)

// spaceMarker is SentencePiece's stand-in for a space, U+2581 "▁".
const spaceMarker = "▁"

// spmModel is a SentencePiece BPE vocabulary ready to encode. It follows
// sentencepiece's bpe_model.cc: the text is cut into characters (and
// user-defined symbols, which never merge), then the adjacent pair whose
// concatenation is the best-scoring piece merges, again and again; a final
// piece the vocabulary lacks falls back to its bytes.
type spmModel struct {
	// pieces are the tokens merges may produce: sentencepiece's pieces_
	// (normal, user-defined and unused); control, unknown and byte tokens
	// are reserved and never come out of plain text.
	pieces map[string]int32
	scores []float32
	types  []TokenType
	byteID [256]int32 // <0x00>…<0xFF>, None if missing
	unk    int32

	addSpacePrefix bool
	removeExtraWS  bool
	// crossesSpace: some piece has a "▁" right after another character
	// ("a▁b"), so merges can join words and the text merges as a whole.
	crossesSpace bool
}

func newSPMModel(v *Vocab) (*spmModel, error) {
	m := &spmModel{
		pieces:         make(map[string]int32, len(v.Tokens)),
		scores:         v.Scores,
		types:          make([]TokenType, len(v.Tokens)),
		unk:            v.UNK,
		addSpacePrefix: v.AddSpacePrefix,
		removeExtraWS:  v.RemoveExtraWhitespaces,
	}
	if m.scores == nil {
		m.scores = make([]float32, len(v.Tokens))
	}
	for i := range m.byteID {
		m.byteID[i] = None
	}
	for id, text := range v.Tokens {
		t := v.TypeOf(id)
		m.types[id] = t
		switch t {
		case Normal, UserDefined, Unused:
			if _, dup := m.pieces[text]; !dup {
				m.pieces[text] = int32(id)
			}
			if t != UserDefined {
				prev := rune(-1)
				for _, r := range text {
					if r == '▁' && prev != -1 && prev != '▁' {
						m.crossesSpace = true
					}
					prev = r
				}
			}
		case Byte:
			b, ok := parseByteToken(text)
			if !ok {
				return nil, fmt.Errorf("tokenizer: token %d %q has type byte but is not <0xXX>", id, text)
			}
			m.byteID[b] = int32(id)
		}
	}
	return m, nil
}

// hasBytes reports whether every byte of piece has a byte token.
func (m *spmModel) hasBytes(piece string) bool {
	for i := 0; i < len(piece); i++ {
		if m.byteID[piece[i]] == None {
			return false
		}
	}
	return true
}

// parseByteToken reads "<0x0A>".
func parseByteToken(s string) (byte, bool) {
	if len(s) != 6 || !strings.HasPrefix(s, "<0x") || s[5] != '>' {
		return 0, false
	}
	var b byte
	for _, c := range []byte(s[3:5]) {
		switch {
		case c >= '0' && c <= '9':
			b = b<<4 | (c - '0')
		case c >= 'A' && c <= 'F':
			b = b<<4 | (c - 'A' + 10)
		case c >= 'a' && c <= 'f':
			b = b<<4 | (c - 'a' + 10)
		default:
			return 0, false
		}
	}
	return b, true
}

// normalize is sentencepiece's normalizer with the identity rule set (the
// one Llama and Gemma vocabularies use; GGUF keeps no other): invalid UTF-8
// bytes become U+FFFD one byte at a time, extra spaces go if the vocabulary
// says so (leading and trailing ones, and all but one of a run), "▁" goes in
// front if prefix, and every space becomes "▁".
func (m *spmModel) normalize(text string, prefix bool) string {
	if !utf8.ValidString(text) {
		var sb strings.Builder
		for i := 0; i < len(text); {
			r, n := utf8.DecodeRuneInString(text[i:])
			sb.WriteRune(r) // RuneError for an invalid byte, n = 1
			i += n
		}
		text = sb.String()
	}
	if m.removeExtraWS {
		text = strings.Join(strings.FieldsFunc(text, func(r rune) bool { return r == ' ' }), " ")
	}
	if text == "" {
		return ""
	}
	if prefix {
		text = " " + text
	}
	text = strings.ReplaceAll(text, " ", spaceMarker)
	if m.removeExtraWS {
		// sentencepiece strips the end after escaping, so a "▁" written
		// in the text goes too (a leading or inner one stays).
		text = strings.TrimRight(text, spaceMarker)
	}
	return text
}

// spmSymbol is a piece of the text while it is being merged: a byte range of
// the normalized text in a doubly linked list.
type spmSymbol struct {
	start, end int32
	prev, next int32
	frozen     bool // a user-defined symbol: never merges
}

type spmCandidate struct {
	score       float32
	left, right int32
	size        int32 // bytes of the merged piece; a stale candidate's sides no longer add up to it
}

// spmHeap pops the best score first, then the leftmost, as sentencepiece's
// agenda does.
type spmHeap []spmCandidate

func (h spmHeap) Len() int { return len(h) }
func (h spmHeap) Less(i, j int) bool {
	if h[i].score != h[j].score {
		return h[i].score > h[j].score
	}
	return h[i].left < h[j].left
}
func (h spmHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *spmHeap) Push(x any)   { *h = append(*h, x.(spmCandidate)) }
func (h *spmHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// encode appends the tokens of s, already normalized, to ids. match, if not
// nil, finds the user-defined symbols, which stay whole.
func (m *spmModel) encode(s string, match *specialMatcher, ids []int32) []int32 {
	start := len(ids)
	var sc spmScratch
	if m.crossesSpace {
		return m.encodeChunk(s, match, ids, start, &sc)
	}
	// No piece joins a character to a following "▁", so no merge crosses
	// the start of a word and each word merges on its own: the merges
	// within a word happen in the same order as they would in one pass
	// over the whole text, and the heap stays small.
	chunk := 0
	for i := 0; i < len(s); {
		if match != nil {
			if _, l := match.at(s, i); l > 0 {
				i += l
				continue
			}
		}
		if i > chunk && strings.HasPrefix(s[i:], spaceMarker) && !strings.HasSuffix(s[:i], spaceMarker) {
			ids = m.encodeChunk(s[chunk:i], match, ids, start, &sc)
			chunk = i
		}
		_, n := utf8.DecodeRuneInString(s[i:])
		i += n
	}
	return m.encodeChunk(s[chunk:], match, ids, start, &sc)
}

// spmScratch is reused across the chunks of one encoding.
type spmScratch struct {
	syms   []spmSymbol
	agenda spmHeap
}

// encodeChunk encodes one independent piece of the normalized text; start
// is where the whole encoding's ids begin.
func (m *spmModel) encodeChunk(s string, match *specialMatcher, ids []int32, start int, sc *spmScratch) []int32 {
	if s == "" {
		return ids
	}
	syms := sc.syms[:0]
	for i := 0; i < len(s); {
		n, frozen := 0, false
		if match != nil {
			if _, l := match.at(s, i); l > 0 {
				n, frozen = l, true
			}
		}
		if n == 0 {
			_, n = utf8.DecodeRuneInString(s[i:])
		}
		k := int32(len(syms))
		syms = append(syms, spmSymbol{start: int32(i), end: int32(i + n), prev: k - 1, next: k + 1, frozen: frozen})
		i += n
	}
	syms[len(syms)-1].next = -1
	sc.syms = syms

	agenda := &sc.agenda
	*agenda = (*agenda)[:0]
	var rev map[string][2]string // unused piece → the pair it merged from
	add := func(left, right int32) {
		if left < 0 || right < 0 || syms[left].frozen || syms[right].frozen {
			return
		}
		piece := s[syms[left].start:syms[right].end]
		id, ok := m.pieces[piece]
		if !ok {
			return
		}
		heap.Push(agenda, spmCandidate{score: m.scores[id], left: left, right: right, size: int32(len(piece))})
		if m.types[id] == Unused {
			if rev == nil {
				rev = make(map[string][2]string)
			}
			rev[piece] = [2]string{s[syms[left].start:syms[left].end], s[syms[right].start:syms[right].end]}
		}
	}
	for i := 1; i < len(syms); i++ {
		add(int32(i-1), int32(i))
	}
	for agenda.Len() > 0 {
		c := heap.Pop(agenda).(spmCandidate)
		l, r := &syms[c.left], &syms[c.right]
		if l.start == l.end || r.start == r.end || (l.end-l.start)+(r.end-r.start) != c.size {
			continue
		}
		l.end = r.end
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = c.left
		}
		r.start, r.end = 0, 0
		add(l.prev, c.left)
		add(c.left, l.next)
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		n := len(ids)
		ids = m.emit(s[syms[i].start:syms[i].end], rev, ids)
		// Without byte fallback sentencepiece merges a run of unknown
		// characters into one unk.
		if m.unk != None && len(ids) == n+1 && ids[n] == m.unk && n > start && ids[n-1] == m.unk {
			ids = ids[:n]
		}
	}
	return ids
}

// emit appends the tokens of one final piece: its id, or its bytes where the
// vocabulary lacks it (byte fallback), or unk where it has no byte tokens.
// An unused piece is split back into the two pieces it was merged from, as
// sentencepiece's resegment does.
func (m *spmModel) emit(piece string, rev map[string][2]string, ids []int32) []int32 {
	if id, ok := m.pieces[piece]; ok {
		if m.types[id] == Unused {
			if p, ok := rev[piece]; ok {
				ids = m.emit(p[0], rev, ids)
				return m.emit(p[1], rev, ids)
			}
		}
		return append(ids, id)
	}
	if m.hasBytes(piece) {
		for i := 0; i < len(piece); i++ {
			ids = append(ids, m.byteID[piece[i]])
		}
		return ids
	}
	if m.unk != None {
		ids = append(ids, m.unk)
	}
	return ids
}
