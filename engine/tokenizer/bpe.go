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

// bpeModel is a BPE vocabulary ready to encode. A word starts as one
// symbol per byte (byte-level, "gpt2": the token of the byte's GPT-2
// stand-in) or per character (gemma4: the character's own token, in text
// whose spaces are "▁"), and the adjacent pair with the lowest merge rank
// merges, again and again, leftmost first among equal ranks.
type bpeModel struct {
	pre          *preTokenizer
	ignoreMerges bool
	// gemma4 is llama.cpp's Gemma 4 mode (LLAMA_VOCAB_PRE_TYPE_GEMMA4,
	// byte_encode off): spaces become "▁" before the text is split, words
	// start as characters, a word of newlines that is a token is taken
	// whole, and a final symbol that is no token falls back to the <0xXX>
	// tokens of its bytes.
	gemma4 bool
	byteID [256]int32 // the token of each byte (its stand-in, or <0xXX> for gemma4), None if missing
	// words maps raw text to the token a whole word may be (ignore_merges,
	// one-byte words, gemma4's newline runs): the normal tokens of a
	// byte-level vocabulary, every token of a gemma4 one, where it also
	// gives each character its first symbol.
	words   map[string]int32
	extra   map[string]int32 // gemma4: the texts merges name that are no token → ids from nTokens on
	merges  map[uint64]merge // (left id, right id) → merge
	nTokens int32
	unk     int32
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
		nTokens:      int32(len(v.Tokens)),
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
	err = m.readMerges(v.Merges, func(s string) (int32, bool) {
		id, ok := toID[s]
		return id, ok
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// readMerges fills m.merges from rules ("left right", highest priority
// first). symbol is the id of a text a rule names, false where it has none.
func (m *bpeModel) readMerges(rules []string, symbol func(string) (int32, bool)) error {
	m.merges = make(map[uint64]merge, len(rules))
	for rank, rule := range rules {
		// A token never holds a real space (it is "Ġ" in a byte-level
		// vocabulary, "▁" in Gemma 4's), so the first space after the
		// first character separates the pair, as llama.cpp reads it.
		sp := -1
		if rule != "" {
			_, n := utf8.DecodeRuneInString(rule)
			if i := strings.IndexByte(rule[n:], ' '); i >= 0 {
				sp = n + i
			}
		}
		if sp < 0 {
			return fmt.Errorf("tokenizer: %s[%d] = %q: not two tokens separated by a space", KeyMerges, rank, rule)
		}
		left, right := rule[:sp], rule[sp+1:]
		a, okA := symbol(left)
		b, okB := symbol(right)
		c, okC := symbol(left + right)
		if !okA || !okB || !okC {
			return fmt.Errorf("tokenizer: %s[%d] = %q: a token of the merge is not in the vocabulary", KeyMerges, rank, rule)
		}
		k := pairKey(a, b)
		if _, dup := m.merges[k]; !dup {
			m.merges[k] = merge{rank: int32(rank), id: c}
		}
	}
	return nil
}

// encode appends the tokens of text, which holds no special token, to ids.
func (m *bpeModel) encode(text string, ids []int32) []int32 {
	if m.gemma4 {
		text = strings.ReplaceAll(text, " ", spaceMarker)
	}
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

// firstSymbols appends the symbols word starts as to toks: a symbol per
// byte for a byte-level vocabulary, per character for gemma4, where it also
// appends where each starts in word to starts (a byte-level symbol that is
// no token needs no text: it is unk). A character that is no token is
// None, and merges nothing.
func (m *bpeModel) firstSymbols(word []byte, toks, starts []int32) ([]int32, []int32) {
	if !m.gemma4 {
		for _, c := range word {
			toks = append(toks, m.byteID[c])
		}
		return toks, starts
	}
	for i := 0; i < len(word); {
		_, n := utf8.DecodeRune(word[i:])
		id, ok := m.words[string(word[i:i+n])]
		if !ok {
			if id, ok = m.extra[string(word[i:i+n])]; !ok {
				id = None
			}
		}
		toks = append(toks, id)
		starts = append(starts, int32(i))
		i += n
	}
	return toks, starts
}

// emit appends the tokens of id, the i-th final symbol of word: id itself
// where it is a token, else its fallback.
func (m *bpeModel) emit(id int32, word []byte, starts []int32, i int, ids []int32) []int32 {
	if uint32(id) < uint32(m.nTokens) { // not None, nor past the vocabulary
		return append(ids, id)
	}
	return m.fallback(word, starts, i, ids)
}

// fallback appends the tokens of a final symbol that is no token, the i-th
// of word. A byte-level vocabulary lacks the byte, and Hugging Face's BPE
// emits unk; a gemma4 symbol becomes the <0xXX> tokens of its bytes, as in
// llama.cpp's BPE session, which leaves out a byte the vocabulary has no
// token for (Gemma 4 has all 256). It is rare, and kept out of line so that
// emit inlines.
//
//go:noinline
func (m *bpeModel) fallback(word []byte, starts []int32, i int, ids []int32) []int32 {
	if !m.gemma4 {
		if m.unk != None {
			ids = append(ids, m.unk)
		}
		return ids
	}
	end := int32(len(word))
	if i+1 < len(starts) {
		end = starts[i+1]
	}
	for _, c := range word[starts[i]:end] {
		if b := m.byteID[c]; b != None {
			ids = append(ids, b)
		}
	}
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
	syms   []bpeSymbol
	cand   candidateHeap
	small  []int32 // a word's symbols: firstSymbols', then those left after merging
	starts []int32 // gemma4: where each of small starts in the word
	rank   []merge // encodeSmallWord's merge of each adjacent pair
}

// smallWord is the longest word (in bytes) merged by scanning rather than
// with a heap: most words are a few bytes, and rescanning a handful of
// pairs costs less than heap operations.
const smallWord = 48

// encodeSmallWord is encodeWord by repeated scans: each round merges the
// pair of lowest rank, leftmost on ties, which is the order the heap gives.
func (m *bpeModel) encodeSmallWord(word []byte, ids []int32, sc *bpeScratch) []int32 {
	toks, starts := m.firstSymbols(word, sc.small[:0], sc.starts[:0])
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
		if m.gemma4 {
			starts = append(starts[:best+1], starts[best+2:]...)
		}
		rank = append(rank[:best], rank[best+1:]...)
		if best < len(rank) {
			rank[best] = rankOf(best)
		}
		if best > 0 {
			rank[best-1] = rankOf(best - 1)
		}
	}
	for i, id := range toks {
		ids = m.emit(id, word, starts, i, ids)
	}
	sc.small, sc.starts, sc.rank = toks, starts, rank
	return ids
}

// encodeWord appends the tokens of one pre-tokenized word (raw bytes).
func (m *bpeModel) encodeWord(word []byte, ids []int32, sc *bpeScratch) []int32 {
	if len(word) == 0 {
		return ids
	}
	// For Gemma 4 llama.cpp takes a run of newlines that is itself a token
	// whole, without merging (its PR 21343).
	if m.ignoreMerges || len(word) == 1 || (m.gemma4 && onlyNewlines(word)) {
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
	toks, starts := m.firstSymbols(word, sc.small[:0], sc.starts[:0])
	syms := sc.syms[:0]
	for i, id := range toks {
		syms = append(syms, bpeSymbol{id: id, prev: int32(i - 1), next: int32(i + 1)})
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
	// The symbols left, in order, and (gemma4) where they start: each is
	// at or after its place in toks and starts, so they move down in place.
	toks = toks[:0]
	for i := int32(0); i >= 0; i = syms[i].next {
		if m.gemma4 {
			starts[len(toks)] = starts[i]
		}
		toks = append(toks, syms[i].id)
	}
	if m.gemma4 {
		starts = starts[:len(toks)]
	}
	for i, id := range toks {
		ids = m.emit(id, word, starts, i, ids)
	}
	sc.syms, sc.small, sc.starts = syms, toks, starts
	return ids
}

// onlyNewlines reports whether word is all "\n".
func onlyNewlines(word []byte) bool {
	for _, c := range word {
		if c != '\n' {
			return false
		}
	}
	return true
}
