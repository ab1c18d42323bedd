package data

import (
	"math/bits"
	"math/rand/v2"
	"sort"
)

// Sequence is one row of a training batch: SeqLen positions holding one or
// more whole samples, then padding.
type Sequence struct {
	// Tokens are the ids read, padded with the pad token after the
	// samples; Targets the id to predict at each position, -1 where there
	// is no loss (prompts, padding, each sample's last position).
	Tokens, Targets []int32
	// Bounds are where each packed sample starts, then where the padding
	// starts: sample i is [Bounds[i], Bounds[i+1]). A trainer that keeps
	// attention within a sample masks across these and restarts the
	// positions at each (see Positions).
	Bounds []int32
	// Lines are the samples' source lines, for messages.
	Lines []int
}

// Len is the number of positions holding samples; the rest is padding.
func (s *Sequence) Len() int { return int(s.Bounds[len(s.Bounds)-1]) }

// Trained is the number of positions with a loss.
func (s *Sequence) Trained() int { return trained(s.Targets) }

// Positions are the RoPE positions of a trainer that keeps attention
// within each sample: 0, 1, … from each sample's start, and on through the
// padding after the last.
func (s *Sequence) Positions() []int32 {
	pos := make([]int32, len(s.Tokens))
	k := 0
	for i := range pos {
		for k+1 < len(s.Bounds)-1 && int32(i) >= s.Bounds[k+1] {
			k++
		}
		pos[i] = int32(i) - s.Bounds[k]
	}
	return pos
}

// pack puts samples, none longer than seqLen, into sequences of seqLen,
// best fit by decreasing length: each sample goes into the open sequence
// with the least room that holds it. Without packing each sample has its
// own sequence. The order is a function of the lengths and indices only.
func pack(samples []Sample, seqLen int, pad int32, packing bool) []*Sequence {
	order := make([]int, len(samples))
	for i := range order {
		order[i] = i
	}
	var bins [][]int
	if !packing {
		for _, i := range order {
			bins = append(bins, []int{i})
		}
	} else {
		sort.SliceStable(order, func(a, b int) bool {
			return len(samples[order[a]].Tokens) > len(samples[order[b]].Tokens)
		})
		// byRoom[r] are the open sequences with r positions left; has marks
		// the non-empty ones, so the best fit is the first set bit at or
		// after a sample's length: a few words to scan, not every sequence.
		byRoom := make([][]int, seqLen+1)
		has := make([]uint64, seqLen/64+1)
		for _, i := range order {
			n := len(samples[i].Tokens)
			r := firstSet(has, n)
			var bin int
			if r < 0 {
				bin, r = len(bins), seqLen
				bins = append(bins, nil)
			} else {
				q := byRoom[r]
				bin = q[len(q)-1]
				byRoom[r] = q[:len(q)-1]
				if len(byRoom[r]) == 0 {
					has[r/64] &^= 1 << (r % 64)
				}
			}
			bins[bin] = append(bins[bin], i)
			if left := r - n; left > 0 {
				byRoom[left] = append(byRoom[left], bin)
				has[left/64] |= 1 << (left % 64)
			}
		}
	}
	seqs := make([]*Sequence, len(bins))
	for b, items := range bins {
		s := &Sequence{Tokens: make([]int32, seqLen), Targets: make([]int32, seqLen)}
		at := 0
		for _, i := range items {
			sm := &samples[i]
			s.Bounds = append(s.Bounds, int32(at))
			s.Lines = append(s.Lines, sm.Line)
			copy(s.Tokens[at:], sm.Tokens)
			copy(s.Targets[at:], sm.Targets)
			at += len(sm.Tokens)
		}
		s.Bounds = append(s.Bounds, int32(at))
		for i := at; i < seqLen; i++ {
			s.Tokens[i], s.Targets[i] = pad, -1
		}
		seqs[b] = s
	}
	return seqs
}

// firstSet is the first index ≥ from whose bit is set, -1 if none.
func firstSet(words []uint64, from int) int {
	w := from / 64
	if w >= len(words) {
		return -1
	}
	if m := words[w] >> (from % 64); m != 0 {
		return from + bits.TrailingZeros64(m)
	}
	for w++; w < len(words); w++ {
		if words[w] != 0 {
			return w*64 + bits.TrailingZeros64(words[w])
		}
	}
	return -1
}

// permutation is a uniformly random order of n items from (seed, stream):
// a Fisher–Yates shuffle on PCG, written here so that the order a
// checkpoint's position refers to is fixed by this code, whatever a later
// Go release does to math/rand's helpers.
func permutation(n int, seed, stream uint64) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	src := rand.NewPCG(seed, stream)
	for i := n - 1; i > 0; i-- {
		j := below(src, uint64(i+1))
		p[i], p[j] = p[j], p[i]
	}
	return p
}

// below is a uniform integer in [0, n) by rejection: values under
// 2⁶⁴ mod n would make the low residues likelier.
func below(src *rand.PCG, n uint64) int {
	lim := -n % n
	for {
		if x := src.Uint64(); x >= lim {
			return int(x % n)
		}
	}
}
