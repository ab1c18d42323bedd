package tokenizer

import (
	"container/heap"
	"fmt"
	"strings"
	"unicode/utf8"
)

// byteLevel is GPT-2's bytes_to_unicode: every byte has a printable stand-in
// character, so that a byte-level vocabulary is a list of printable strings.
// The printable Latin-1 bytes stand for themselves; the other 68 map, in byte
// order, to U+0100 onwards (the space is "Ġ", U+0120; "\n" is "Ċ").
type byteLevel struct {
	toRune   [256]rune
	fromRune map[rune]byte
}

func newByteLevel() *byteLevel {
	b := &byteLevel{fromRune: make(map[rune]byte, 256)}
	next := rune(256)
	for i := 0; i < 256; i++ {
		c := rune(i)
		printable := (c >= '!' && c <= '~') || (c >= '¡' && c <= '¬') || (c >= '®' && c <= 'ÿ')
		if !printable {
			c = next
			next++
		}
		b.toRune[i] = c
		b.fromRune[c] = byte(i)
	}
	return b
}

// decode turns a byte-level token text back into its bytes. A character that
// is not a stand-in (a malformed vocabulary) is kept as its UTF-8.
func (b *byteLevel) decode(s string) []byte {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if c, ok := b.fromRune[r]; ok {
			out = append(out, c)
		} else {
			out = utf8.AppendRune(out, r)
		}
	}
	return out
}

// encode is the byte-level text of raw bytes.
func (b *byteLevel) encode(raw string) string {
	var sb strings.Builder
	for i := 0; i < len(raw); i++ {
		sb.WriteRune(b.toRune[raw[i]])
	}
	return sb.String()
}

// merge is what one BPE merge rule makes of a pair of tokens.
type merge struct {
	rank int32 // position in tokenizer.ggml.merges: lower merges first
	id   int32 // the merged token
}

// bpeModel is a byte-level BPE vocabulary ready to encode.
type bpeModel struct {
	pre          *preTokenizer
	ignoreMerges bool
	byteID       [256]int32       // the token of each single byte, None if missing
	words        map[string]int32 // raw bytes of each normal token → id (for ignore_merges)
	merges       map[uint64]merge // (left id, right id) → merge
	unk          int32
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

func newBPEModel(v *Vocab, toID map[string]int32, bl *byteLevel) (*bpeModel, error) {
	pre := v.Pre
	spec, ok := preSpecFor(pre)
	if !ok {
		return nil, fmt.Errorf("tokenizer: %s = %q: unknown pre-tokenizer", KeyPre, pre)
	}
	pt, err := newPreTokenizer(pre)
	if err != nil {
		return nil, err
	}
	m := &bpeModel{
		pre:          pt,
		ignoreMerges: spec.ignoreMerges,
		words:        make(map[string]int32, len(v.Tokens)),
		merges:       make(map[uint64]merge, len(v.Merges)),
		unk:          v.UNK,
	}
	for i := range m.byteID {
		m.byteID[i] = None
		if id, ok := toID[string(bl.toRune[i])]; ok {
			m.byteID[i] = id
		}
	}
	for id, text := range v.Tokens {
		switch v.TypeOf(id) {
		case Normal, Unused:
			m.words[string(bl.decode(text))] = int32(id)
		}
	}
	for rank, rule := range v.Merges {
		// A byte-level token never holds a real space (it is "Ġ"), so the
		// first space after the first character separates the pair.
		sp := -1
		if rule != "" {
			_, n := utf8.DecodeRuneInString(rule)
			if i := strings.IndexByte(rule[n:], ' '); i >= 0 {
				sp = n + i
			}
		}
		if sp < 0 {
			return nil, fmt.Errorf("tokenizer: %s[%d] = %q: not two tokens separated by a space", KeyMerges, rank, rule)
		}
		left, right := rule[:sp], rule[sp+1:]
		a, okA := toID[left]
		b, okB := toID[right]
		c, okC := toID[left+right]
		if !okA || !okB || !okC {
			return nil, fmt.Errorf("tokenizer: %s[%d] = %q: a token of the merge is not in the vocabulary", KeyMerges, rank, rule)
		}
		k := pairKey(a, b)
		if _, dup := m.merges[k]; !dup {
			m.merges[k] = merge{rank: int32(rank), id: c}
		}
	}
	return m, nil
}

// encode appends the tokens of text, which holds no special token, to ids.
func (m *bpeModel) encode(text string, ids []int32) []int32 {
	var sc bpeScratch
	buf := make([]byte, 0, 64)
	m.pre.split(text, func(word []rune) {
		buf = buf[:0]
		for _, r := range word {
			buf = utf8.AppendRune(buf, r)
		}
		ids = m.encodeWord(buf, ids, &sc)
	})
	return ids
}

// bpeSymbol is one token of a word while it is being merged: a doubly linked
// list over the word, so that a merge is O(1).
type bpeSymbol struct {
	id         int32
	prev, next int32 // indexes into the word's symbols, -1 at the ends
}

// bpeCandidate is a pair that may merge: the symbol at left with its next.
type bpeCandidate struct {
	rank, left, id int32
}

// candidateHeap orders candidates by rank, then by position, so that the
// leftmost of equal merges goes first, as Hugging Face's BPE does.
type candidateHeap []bpeCandidate

func (h candidateHeap) Len() int { return len(h) }
func (h candidateHeap) Less(i, j int) bool {
	if h[i].rank != h[j].rank {
		return h[i].rank < h[j].rank
	}
	return h[i].left < h[j].left
}
func (h candidateHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *candidateHeap) Push(x any)   { *h = append(*h, x.(bpeCandidate)) }
func (h *candidateHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// bpeScratch is reused across the words of one encoding.
type bpeScratch struct {
	syms  []bpeSymbol
	cand  candidateHeap
	small []int32 // encodeSmallWord's tokens and ranks
	rank  []merge
}

// smallWord is the longest word (in bytes) merged by scanning rather than
// with a heap: most words are a few bytes, and rescanning a handful of
// pairs costs less than heap operations.
const smallWord = 48

// encodeSmallWord is encodeWord by repeated scans: each round merges the
// pair of lowest rank, leftmost on ties, which is the order the heap gives.
func (m *bpeModel) encodeSmallWord(word []byte, ids []int32, sc *bpeScratch) []int32 {
	toks := sc.small[:0]
	for _, c := range word {
		toks = append(toks, m.byteID[c])
	}
	noMerge := merge{rank: -1}
	rankOf := func(i int) merge {
		if mg, ok := m.merges[pairKey(toks[i], toks[i+1])]; ok {
			return mg
		}
		return noMerge
	}
	rank := sc.rank[:0]
	for i := 0; i+1 < len(toks); i++ {
		rank = append(rank, rankOf(i))
	}
	for {
		best := -1
		for i, r := range rank {
			if r.rank >= 0 && (best < 0 || r.rank < rank[best].rank) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		toks[best] = rank[best].id
		toks = append(toks[:best+1], toks[best+2:]...)
		rank = append(rank[:best], rank[best+1:]...)
		if best < len(rank) {
			rank[best] = rankOf(best)
		}
		if best > 0 {
			rank[best-1] = rankOf(best - 1)
		}
	}
	for _, id := range toks {
		switch {
		case id != None:
			ids = append(ids, id)
		case m.unk != None:
			ids = append(ids, m.unk)
		}
	}
	sc.small, sc.rank = toks, rank
	return ids
}

// encodeWord appends the tokens of one pre-tokenized word (raw bytes).
func (m *bpeModel) encodeWord(word []byte, ids []int32, sc *bpeScratch) []int32 {
	if len(word) == 0 {
		return ids
	}
	if m.ignoreMerges || len(word) == 1 {
		if id, ok := m.words[string(word)]; ok {
			return append(ids, id)
		}
	}
	if len(word) <= smallWord {
		return m.encodeSmallWord(word, ids, sc)
	}
	return m.encodeLongWord(word, ids, sc)
}

// encodeLongWord merges with a heap of candidate pairs: O(n log n) for a
// word of n bytes, where a run of 100 000 CJK characters without a space is
// one word.
func (m *bpeModel) encodeLongWord(word []byte, ids []int32, sc *bpeScratch) []int32 {
	syms := sc.syms[:0]
	for i, c := range word {
		syms = append(syms, bpeSymbol{id: m.byteID[c], prev: int32(i - 1), next: int32(i + 1)})
	}
	syms[len(syms)-1].next = -1
	sc.cand = sc.cand[:0]
	push := func(left int32) {
		if left < 0 {
			return
		}
		right := syms[left].next
		if right < 0 {
			return
		}
		if mg, ok := m.merges[pairKey(syms[left].id, syms[right].id)]; ok {
			heap.Push(&sc.cand, bpeCandidate{rank: mg.rank, left: left, id: mg.id})
		}
	}
	for i := range syms {
		if syms[i].id != None {
			push(int32(i))
		}
	}
	for sc.cand.Len() > 0 {
		c := heap.Pop(&sc.cand).(bpeCandidate)
		left := &syms[c.left]
		// A candidate is stale if its left symbol was merged away (id None
		// marks it) or either side changed since it was queued.
		if left.id == None || left.next < 0 {
			continue
		}
		right := &syms[left.next]
		if mg, ok := m.merges[pairKey(left.id, right.id)]; !ok || mg.id != c.id {
			continue
		}
		left.id = c.id
		right.id = None
		left.next = right.next
		if right.next >= 0 {
			syms[right.next].prev = c.left
		}
		push(left.prev)
		push(c.left)
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		switch id := syms[i].id; {
		case id != None:
			ids = append(ids, id)
		case m.unk != None:
			// A byte the vocabulary lacks: Hugging Face emits its unk token.
			ids = append(ids, m.unk)
		}
	}
	sc.syms = syms
	return ids
}
