package structured

import (
	"container/heap"
	"fmt"
	"math"
	"slices"
)

// Pieces gives each token's bytes: what it writes mid-text, nil for a
// token that writes nothing (tokenizer.Tokenizer.Piece).
type Pieces interface {
	Piece(id int32) []byte
	Size() int
}

// Constraint holds a generation to a schema, token by token: the
// model.Constraint of structured output. Stop tokens are allowed only once
// the document is whole, and then only they are when nothing may follow.
type Constraint struct {
	m     *Matcher
	tok   Pieces
	stops []int32
	best  candHeap // scratch
}

// NewConstraint starts a document of s written in tok's tokens, ended by
// any of stops.
func NewConstraint(s *Schema, tok Pieces, stops []int32) *Constraint {
	return &Constraint{m: NewMatcher(s), tok: tok, stops: stops}
}

// firstLook is how many of the best tokens Limit tries before it reads the
// whole vocabulary: one of them nearly always continues the document.
const firstLook = 256

// Limit sets to -Inf the logit of every token but the keep best (by logit)
// that can continue the document; keep <= 0 keeps every one that can. It
// fails when no token can.
func (c *Constraint) Limit(logits []float32, keep int) error {
	n := len(logits)
	if keep <= 0 || keep > n {
		keep = n
	}
	allowed := make([]int32, 0, keep)
	tried := 0
	// The best firstLook tokens first, best first.
	if keep < n {
		c.best = c.best[:0]
		for i, v := range logits {
			if len(c.best) < firstLook {
				heap.Push(&c.best, cand{int32(i), v})
			} else if v > c.best[0].v {
				c.best[0] = cand{int32(i), v}
				heap.Fix(&c.best, 0)
			}
		}
		// The heap is rebuilt at every call: sorting it in place is free.
		slices.SortFunc(c.best, bestFirst)
		for _, x := range c.best {
			if len(allowed) == keep {
				break
			}
			if c.allows(x.id) {
				allowed = append(allowed, x.id)
			}
		}
		tried = len(c.best)
	}
	if len(allowed) < keep && tried < n {
		// Too few among the best: every token that may come, found by
		// walking the vocabulary's byte trie (a byte refused prunes every
		// token that starts with it), then the best keep of them.
		allowed = allowed[:0]
		var all []cand
		for _, id := range c.stops {
			if int(id) < n && c.m.Done() {
				all = append(all, cand{id, logits[id]})
			}
		}
		trieOf(c.tok).walk(c.m, func(id int32) {
			if int(id) < n && !slices.Contains(c.stops, id) {
				all = append(all, cand{id, logits[id]})
			}
		})
		slices.SortFunc(all, bestFirst)
		for _, x := range all[:min(keep, len(all))] {
			allowed = append(allowed, x.id)
		}
	}
	if len(allowed) == 0 {
		return fmt.Errorf("structured: no token continues the document")
	}
	kept := make([]float32, len(allowed))
	for i, id := range allowed {
		kept[i] = logits[id]
	}
	inf := float32(math.Inf(-1))
	for i := range logits {
		logits[i] = inf
	}
	for i, id := range allowed {
		logits[id] = kept[i]
	}
	return nil
}

// allows says whether token id may come next.
func (c *Constraint) allows(id int32) bool {
	if slices.Contains(c.stops, id) {
		return c.m.Done()
	}
	p := c.tok.Piece(id)
	if len(p) == 0 {
		return false
	}
	return c.m.Clone().Feed(p)
}

// Accept moves past the sampled token id. A token Limit did not allow is
// an error.
func (c *Constraint) Accept(id int32) error {
	if slices.Contains(c.stops, id) {
		if !c.m.Done() {
			return fmt.Errorf("structured: the reply ended before its document")
		}
		return nil
	}
	if !c.m.Feed(c.tok.Piece(id)) {
		return fmt.Errorf("structured: token %d does not continue the document", id)
	}
	return nil
}

type cand struct {
	id int32
	v  float32
}

// bestFirst orders candidates by logit, highest first, ties by id, so that
// the tokens kept do not depend on the order they were found in.
func bestFirst(a, b cand) int {
	switch {
	case a.v > b.v:
		return -1
	case a.v < b.v:
		return 1
	}
	return int(a.id - b.id)
}

// candHeap is a min-heap by logit: the smallest of the best kept on top.
type candHeap []cand

func (h candHeap) Len() int           { return len(h) }
func (h candHeap) Less(i, j int) bool { return h[i].v < h[j].v }
func (h candHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *candHeap) Push(x any)        { *h = append(*h, x.(cand)) }
func (h *candHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
