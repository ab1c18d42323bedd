package structured

import "sync"

// trie is a vocabulary's tokens by their bytes: a token that begins with a
// byte the matcher refuses is refused with every other that does, at once.
type trie struct {
	nodes []trieNode
	edges []trieEdge
}

type trieNode struct {
	edges, nEdges int32   // this node's edges: edges[edges : edges+nEdges]
	ids           []int32 // the tokens whose bytes end here
}

type trieEdge struct {
	b    byte
	next int32
}

var tries sync.Map // Pieces → *trie

// trieOf is tok's trie, built on first use (about 0.1 s for a 128K
// vocabulary) and kept for the process.
func trieOf(tok Pieces) *trie {
	if t, ok := tries.Load(tok); ok {
		return t.(*trie)
	}
	t := buildTrie(tok)
	tries.Store(tok, t)
	return t
}

func buildTrie(tok Pieces) *trie {
	// Build with maps, then lay the edges out flat.
	type mnode struct {
		kids map[byte]int32
		ids  []int32
	}
	nodes := []mnode{{}}
	for id := range int32(tok.Size()) {
		p := tok.Piece(id)
		if len(p) == 0 {
			continue
		}
		at := int32(0)
		for _, b := range p {
			next, ok := nodes[at].kids[b]
			if !ok {
				if nodes[at].kids == nil {
					nodes[at].kids = map[byte]int32{}
				}
				next = int32(len(nodes))
				nodes[at].kids[b] = next
				nodes = append(nodes, mnode{})
			}
			at = next
		}
		nodes[at].ids = append(nodes[at].ids, id)
	}
	t := &trie{nodes: make([]trieNode, len(nodes))}
	for i, n := range nodes {
		t.nodes[i] = trieNode{edges: int32(len(t.edges)), nEdges: int32(len(n.kids)), ids: n.ids}
		for b, next := range n.kids {
			t.edges = append(t.edges, trieEdge{b, next})
		}
	}
	return t
}

// walk calls allow with every token the matcher accepts whole.
func (t *trie) walk(m *Matcher, allow func(id int32)) {
	var visit func(at int32, m *Matcher)
	visit = func(at int32, m *Matcher) {
		n := &t.nodes[at]
		if at != 0 {
			for _, id := range n.ids {
				allow(id)
			}
		}
		for _, e := range t.edges[n.edges : n.edges+n.nEdges] {
			c := m.Clone()
			if c.Feed([]byte{e.b}) {
				visit(e.next, c)
			}
		}
	}
	visit(0, m)
}
