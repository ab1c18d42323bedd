package phonemes

import (
	"strings"
	"unicode/utf8"
)

// align shares espeak-ng's output words among the input words of a line
// when their counts differ. ref holds each input word phonemized alone;
// got is the line's output, in which espeak may have joined words ("in
// the" → ɪnðə) or split one (a hyphenated compound). A dynamic programme
// pairs them — one to one, two or three input words to one output word,
// or one input word to two or three output words — minimising the edit
// distance between the pairs with stress, length and ties ignored; a
// joined output word is then cut where its pieces best match the words
// alone. The result has one entry per input word (empty when espeak said
// nothing for it).
func align(ref, got []string) []string {
	n, m := len(ref), len(got)
	const inf = 1 << 30
	type step struct{ di, dj int }
	cost := make([][]int, n+1)
	back := make([][]step, n+1)
	for i := range cost {
		cost[i] = make([]int, m+1)
		back[i] = make([]step, m+1)
		for j := range cost[i] {
			cost[i][j] = inf
		}
	}
	sref := make([]string, n)
	for i, r := range ref {
		sref[i] = bare(r)
	}
	sgot := make([]string, m)
	for j, g := range got {
		sgot[j] = bare(g)
	}
	cost[0][0] = 0
	relax := func(i, j, di, dj, c int) {
		if c += cost[i][j]; c < cost[i+di][j+dj] {
			cost[i+di][j+dj] = c
			back[i+di][j+dj] = step{di, dj}
		}
	}
	for i := 0; i <= n; i++ {
		for j := 0; j <= m; j++ {
			if cost[i][j] == inf {
				continue
			}
			if i < n && j < m {
				relax(i, j, 1, 1, editDistance(sref[i], sgot[j]))
			}
			// Pairings other than one to one cost one more, so that a
			// tie goes to the plain pairing.
			for k := 2; k <= 3; k++ {
				if i+k <= n && j < m {
					relax(i, j, k, 1, 1+editDistance(strings.Join(sref[i:i+k], ""), sgot[j]))
				}
				if i < n && j+k <= m {
					relax(i, j, 1, k, 1+editDistance(sref[i], strings.Join(sgot[j:j+k], "")))
				}
			}
			if i < n {
				relax(i, j, 1, 0, 2+utf8.RuneCountInString(sref[i]))
			}
			if j < m {
				relax(i, j, 0, 1, 2+utf8.RuneCountInString(sgot[j]))
			}
		}
	}
	out := make([]string, n)
	for i, j := n, m; i > 0 || j > 0; {
		s := back[i][j]
		switch {
		case s.di == 1:
			out[i-1] = strings.Join(got[j-s.dj:j], "")
		case s.di > 1:
			copy(out[i-s.di:i], cut(got[j-1], sref[i-s.di:i]))
		}
		i, j = i-s.di, j-s.dj
	}
	return out
}

// cut divides one output word among len(parts) input words at the rune
// boundaries that minimise the pieces' summed edit distance to parts.
func cut(word string, parts []string) []string {
	rs := []rune(word)
	best, bestCost := []int(nil), 1<<30
	var try func(from int, cuts []int)
	try = func(from int, cuts []int) {
		if len(cuts) == len(parts)-1 {
			c, prev := 0, 0
			for k, at := range append(cuts, len(rs)) {
				c += editDistance(bare(string(rs[prev:at])), parts[k])
				prev = at
			}
			if c < bestCost {
				bestCost, best = c, append([]int(nil), cuts...)
			}
			return
		}
		for at := from + 1; at < len(rs); at++ {
			try(at, append(cuts, at))
		}
	}
	try(0, nil)
	out := make([]string, len(parts))
	if best == nil { // shorter than the number of words: all to the first
		out[0] = word
		return out
	}
	prev := 0
	for k, at := range append(best, len(rs)) {
		out[k] = string(rs[prev:at])
		prev = at
	}
	return out
}

// bare drops what varies with context and position: stress, length and
// tie marks.
func bare(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case 'ˈ', 'ˌ', 'ː', '^':
			return -1
		}
		return r
	}, s)
}

func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	curr := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		curr[0] = i
		for j := 1; j <= len(rb); j++ {
			c := prev[j-1]
			if ra[i-1] != rb[j-1] {
				c++
			}
			curr[j] = min(c, prev[j]+1, curr[j-1]+1)
		}
		prev, curr = curr, prev
	}
	return prev[len(rb)]
}
