// Package sample picks the next token from a logits vector with llama.cpp's
// sampler chain: repetition penalties, then top-k, top-p, min-p,
// temperature, and a seeded draw. Sample runs it all on the CPU over the
// whole vocabulary without sorting it; SampleCandidates runs the part after
// top-k over the few candidates a GPU top-k returned, and Penalties lists
// what the GPU's penalty kernel needs to apply the penalties before that.
package sample

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
)

// pcgStream is the PCG stream constant: any fixed value makes the draws a
// function of Seed alone.
const pcgStream = 0x5a4d_706c_6572_0001

// Sampler draws tokens for one generation. It keeps its random state and
// scratch buffers between calls, so after the first call a step allocates
// nothing; it is not safe for concurrent use.
type Sampler struct {
	o   Options
	rng *rand.Rand

	x       []float32         // the logits with penalties applied
	cands   []cand            // the candidates the chain keeps
	tail    []cand            // the top-p search's boundary buckets
	hist    [nBuckets]float64 // the top-p search's mass per bucket
	pv      []float32         // penalised values of the ids topPenalized fixes
	pos     []uint32          // 0, 1, ... len(pv)-1: pv's own indices
	weights []float64         // cumulative draw weights of the kept candidates
	window  []int32           // the sorted history window the penalties count
	ids     []uint32          // distinct ids of the window
	counts  []uint32          // their occurrences
}

// cand is a token and its logit. Candidates rank by logit, then by lower id,
// so every cut and every tie is deterministic.
type cand struct {
	v  float32
	id int32
}

// better orders candidates best first.
func better(a, b cand) int {
	if c := cmp.Compare(b.v, a.v); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

// New returns a sampler for o, or o's validation errors.
func New(o Options) (*Sampler, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &Sampler{o: o, rng: rand.New(rand.NewPCG(o.Seed, pcgStream))}, nil
}

// Options returns the options the sampler was made with.
func (s *Sampler) Options() Options { return s.o }

var negInf = float32(math.Inf(-1))

// Sample returns the next token for logits (one per vocabulary entry),
// history being the tokens so far (prompt and generated; the penalties look
// at its last RepeatLastN). It does not modify logits.
//
// Non-finite logits are handled as limits: NaN counts as -inf, a -inf token
// is never drawn while any other is finite, and +inf tokens, if any, share
// all the probability equally. When every logit is -inf or NaN the result
// is token 0, what greedy decoding's first maximum gives. Sample returns -1
// only for empty logits.
func (s *Sampler) Sample(logits []float32, history []int32) int32 {
	if len(logits) == 0 {
		return -1
	}
	c := s.candidates(logits, history)
	if s.o.Temperature == 0 {
		return c[0].id
	}
	return s.draw(c)
}

// candidates runs the chain up to the draw: penalties, top-k, top-p, min-p.
// Greedy decoding is top-k 1. The result is sorted best first when top-k
// ran, else in no particular order (the draw does not need one).
func (s *Sampler) candidates(logits []float32, history []int32) []cand {
	ids, counts := s.count(history, len(logits))
	k := s.o.TopK
	if s.o.Temperature == 0 {
		k = 1
	}
	if k > 0 && k < len(logits) {
		c := s.topPenalized(logits, k, ids, counts)
		return s.cut(c, mass(c, c[0].v))
	}
	x := logits
	if len(ids) > 0 {
		// The whole-vocabulary paths read every logit several times, so
		// they work on a penalised copy (1 MiB for 262144 logits, a small
		// part of the exponentials they take); writing into the caller's
		// slice would make Sample unsafe on logits the caller still reads.
		s.x = append(s.x[:0], logits...)
		Penalize(s.x, ids, counts, s.o.RepeatPenalty, s.o.FrequencyPenalty, s.o.PresencePenalty)
		x = s.x
	}
	return s.truncateAll(x)
}

// SampleCandidates returns one of the candidate tokens ids (below 2^31),
// whose logits, penalties already applied, are logits: the chain after the
// penalties, for the decode loop that ran ops.Penalize and ops.TopK on the
// GPU and read back CandidateCount candidates. They need not be sorted.
// With top-k on and within the GPU's limit, a sampler in the same state
// draws the token Sample would on the whole row. It returns -1 when there are no candidates or the
// two lists differ in length.
func (s *Sampler) SampleCandidates(ids []uint32, logits []float32) int32 {
	if len(ids) == 0 || len(ids) != len(logits) {
		return -1
	}
	c := s.cands[:0]
	for i, id := range ids {
		c = append(c, cand{notNaN(logits[i]), int32(id)})
	}
	slices.SortFunc(c, better)
	s.cands = c
	if s.o.Temperature == 0 {
		return c[0].id
	}
	if k := s.o.TopK; k > 0 && k < len(c) {
		c = c[:k]
	}
	return s.draw(s.cut(c, mass(c, c[0].v)))
}

// Penalties lists the distinct tokens among the last RepeatLastN of
// history, ascending, with how often each occurs there: the ids and counts
// ops.Penalize takes. Both are empty when the options penalise nothing.
// Negative ids are dropped; ids past the vocabulary are left for the kernel
// to skip. The slices are the caller's.
func (s *Sampler) Penalties(history []int32) (ids, counts []uint32) {
	i, c := s.count(history, math.MaxInt32)
	return slices.Clone(i), slices.Clone(c)
}

// count fills s.ids and s.counts from the window of history, keeping ids
// below vocab. Sorting a copy of the window (64 tokens by default) costs
// less than a map and gives the ids in order.
func (s *Sampler) count(history []int32, vocab int) (ids, counts []uint32) {
	s.ids, s.counts = s.ids[:0], s.counts[:0]
	if !s.o.penalizes() {
		return nil, nil
	}
	w := history
	if n := s.o.RepeatLastN; n >= 0 && n < len(w) {
		w = w[len(w)-n:]
	}
	s.window = append(s.window[:0], w...)
	slices.Sort(s.window)
	for i := 0; i < len(s.window); {
		id, j := s.window[i], i+1
		for j < len(s.window) && s.window[j] == id {
			j++
		}
		if id >= 0 && int(id) < vocab {
			s.ids = append(s.ids, uint32(id))
			s.counts = append(s.counts, uint32(j-i))
		}
		i = j
	}
	return s.ids, s.counts
}

// notNaN maps NaN to -inf, the rank the chain gives it.
func notNaN(v float32) float32 {
	if v != v {
		return negInf
	}
	return v
}

// argmax is the index of the largest logit, the first on ties, NaN ranking
// as -inf; 0 when none is above -inf.
func argmax(x []float32) int32 {
	best, bv := 0, notNaN(x[0])
	for i := 1; i < len(x); i++ {
		i += firstAbove(x[i:], bv)
		if i == len(x) {
			break
		}
		best, bv = i, x[i]
	}
	return int32(best)
}

// firstAbove is the index of the first value of x greater than t, len(x)
// if none. It tests blocks of 8 with independent comparisons that all
// predict "no": three times the speed of a loop carrying a running maximum
// (101 against 299 µs over 262144 logits on a 2-core AMD EPYC), and
// the scan is most of what greedy decoding and top-k cost.
func firstAbove(x []float32, t float32) int {
	i := 0
	for ; i+8 <= len(x); i += 8 {
		b := x[i : i+8 : i+8]
		if b[0] > t || b[1] > t || b[2] > t || b[3] > t || b[4] > t || b[5] > t || b[6] > t || b[7] > t {
			break
		}
	}
	for ; i < len(x); i++ {
		if x[i] > t {
			return i
		}
	}
	return len(x)
}

// truncateAll applies top-p and min-p to the whole vocabulary x (top-k is
// off or covers it) and returns the candidates left, in no particular order.
func (s *Sampler) truncateAll(x []float32) []cand {
	m := maxLogit(x)
	switch {
	case m == negInf:
		return append(s.cands[:0], cand{negInf, argmax(x)})
	case math.IsInf(float64(m), 1):
		return s.top(x, len(x), m) // only the +inf tokens
	}
	floor := negInf
	if s.o.minPOn() {
		floor = minPFloor(m, s.o.MinP)
	}
	if s.o.topPOn() {
		return s.nucleusOfAll(x, m, floor)
	}
	c := s.cands[:0]
	for i, v := range x {
		if v >= floor && v != negInf { // -inf has no chance in the draw
			c = append(c, cand{v, int32(i)})
		}
	}
	s.cands = c
	return c
}

// The top-p search over a whole vocabulary buckets the logits by their
// distance below the maximum, 1/32 of a logit wide: 1024 buckets cover 32
// logits (e^-32, about 1e-14 of the best token's probability), and the last
// also takes everything further down.
const (
	bucketsPerLogit = 32
	nBuckets        = 1024
)

// bucketOf is v's bucket below the maximum m. It never decreases as v
// decreases (each float step rounds monotonically), so bucket order agrees
// with value order and equal values share a bucket.
func bucketOf(m, v float32) int {
	d := (m - v) * bucketsPerLogit
	if !(d < nBuckets-1) { // also -inf's +inf distance
		return nBuckets - 1
	}
	return int(d)
}

// nucleusOfAll is top-p, then min-p's floor, over the whole vocabulary x
// with maximum m, without sorting it: one pass sums each bucket's
// probability mass, which finds the bucket b where the running mass reaches
// TopP. Every token above b is kept without ordering it; only bucket b is
// sorted, to find where in it the mass is reached. Should the sorted sum
// fall short of the bucket sum by rounding, the whole bucket is kept: the
// next token would be a choice made at the level of float64 rounding.
func (s *Sampler) nucleusOfAll(x []float32, m, floor float32) []cand {
	hist := &s.hist
	*hist = [nBuckets]float64{}
	z := 0.0
	for _, v := range x {
		if v == v && v != negInf {
			e := expNeg(float64(v) - float64(m))
			z += e
			hist[bucketOf(m, v)] += e
		}
	}
	target := float64(s.o.TopP) * z
	b, above := 0, 0.0
	for ; b < nBuckets-1 && above+hist[b] < target; b++ {
		above += hist[b]
	}
	c, tail := s.cands[:0], s.tail[:0]
	for i, v := range x {
		if v != v || v == negInf {
			continue
		}
		switch bk := bucketOf(m, v); {
		case bk < b:
			c = append(c, cand{v, int32(i)})
		case bk == b:
			tail = append(tail, cand{v, int32(i)})
		}
	}
	slices.SortFunc(tail, better)
	n, _ := nucleus(tail, m, target-above)
	c = append(c, tail[:n]...)
	s.cands, s.tail = c, tail
	if floor > negInf {
		c = slices.DeleteFunc(c, func(e cand) bool { return e.v < floor })
	}
	return c
}

// maxLogit is the largest non-NaN value of x, -inf when there is none.
func maxLogit(x []float32) float32 {
	return notNaN(x[argmax(x)])
}

// minPFloor is the smallest logit min-p keeps: p_i >= minP * p_max is
// logit_i >= max + ln(minP), llama.cpp's test.
func minPFloor(m, minP float32) float32 {
	return m + float32(math.Log(float64(minP)))
}

// mass is the sum of exp(v - m) over the candidates c, in float64: their
// softmax denominator relative to m.
func mass(c []cand, m float32) float64 {
	z := 0.0
	for _, e := range c {
		z += expNeg(float64(e.v) - float64(m))
	}
	return z
}

// nucleus is how many of the sorted candidates c top-p keeps: the shortest
// prefix whose mass exp(v - m) reaches target; ok is false when all of c
// falls short.
func nucleus(c []cand, m float32, target float64) (n int, ok bool) {
	cum := 0.0
	for i, e := range c {
		cum += expNeg(float64(e.v) - float64(m))
		if cum >= target {
			return i + 1, true
		}
	}
	return len(c), false
}

// cut applies top-p and min-p to the sorted candidates c, whose softmax
// denominator relative to c[0] is z.
func (s *Sampler) cut(c []cand, z float64) []cand {
	m := c[0].v
	switch {
	case m == negInf:
		return c[:1] // nothing is finite: greedy's first
	case math.IsInf(float64(m), 1):
		n := 1 // the +inf tokens share everything
		for n < len(c) && c[n].v == m {
			n++
		}
		return c[:n]
	}
	if s.o.topPOn() {
		n, _ := nucleus(c, m, float64(s.o.TopP)*z)
		c = c[:n]
	}
	if s.o.minPOn() {
		floor := minPFloor(m, s.o.MinP)
		n := 1
		for n < len(c) && c[n].v >= floor {
			n++
		}
		c = c[:n]
	}
	return c
}

// top returns the k best values of x at or above floor, sorted best first,
// NaN ranking as -inf. A min-heap of the k best so far, its worst at the
// root, sees each value once: most fail the single comparison with the
// root, so selecting 40 of 262144 costs about one pass, where sorting would
// cost eighteen.
func (s *Sampler) top(x []float32, k int, floor float32) []cand {
	h := s.cands[:0]
	i := 0
	for ; i < len(x) && len(h) < k; i++ {
		if v := notNaN(x[i]); v >= floor {
			h = append(h, cand{v, int32(i)})
		}
	}
	for j := len(h)/2 - 1; j >= 0; j-- {
		siftDown(h, j)
	}
	for ; len(h) > 0 && i < len(x); i++ {
		// Values arrive in id order, so one equal to the root's ranks after
		// it: only a strictly greater one enters (NaN never does, and the
		// root is already at or above floor).
		i += firstAbove(x[i:], h[0].v)
		if i == len(x) {
			break
		}
		h[0] = cand{x[i], int32(i)}
		siftDown(h, 0)
	}
	slices.SortFunc(h, better)
	s.cands = h
	return h
}

// topPenalized is top(x, k) for x with the penalties of ids and counts
// applied, without copying x: it selects the k+P best raw logits, P being
// the number of penalised ids, then replaces those ids with their penalised
// values and keeps the best k. That is exact: a token in the penalised top k
// that is not penalised itself has at most k-1 unpenalised tokens above it,
// and at most P penalised ones, in raw order too.
func (s *Sampler) topPenalized(x []float32, k int, ids, counts []uint32) []cand {
	if len(ids) == 0 {
		return s.top(x, k, negInf)
	}
	c := s.top(x, min(k+len(ids), len(x)), negInf)
	c = slices.DeleteFunc(c, func(e cand) bool {
		_, found := slices.BinarySearch(ids, uint32(e.id))
		return found
	})
	// Penalise a gathered copy of the few values with Penalize, so
	// the formula has one definition for the CPU and the kernel's test.
	s.pv, s.pos = s.pv[:0], s.pos[:0]
	for j, id := range ids {
		s.pv = append(s.pv, x[id])
		s.pos = append(s.pos, uint32(j))
	}
	Penalize(s.pv, s.pos, counts, s.o.RepeatPenalty, s.o.FrequencyPenalty, s.o.PresencePenalty)
	for j, id := range ids {
		c = append(c, cand{notNaN(s.pv[j]), int32(id)})
	}
	slices.SortFunc(c, better)
	c = c[:k]
	s.cands = c
	return c
}

// siftDown restores the heap below j; the root is the worst candidate.
func siftDown(h []cand, j int) {
	for {
		w := j
		if l := 2*j + 1; l < len(h) && better(h[l], h[w]) > 0 {
			w = l
		}
		if r := 2*j + 2; r < len(h) && better(h[r], h[w]) > 0 {
			w = r
		}
		if w == j {
			return
		}
		h[j], h[w] = h[w], h[j]
		j = w
	}
}

// draw picks one of c with probability softmax(v / Temperature): a uniform
// point in the cumulative weights, found by binary search.
func (s *Sampler) draw(c []cand) int32 {
	if len(c) == 1 {
		return c[0].id
	}
	m := negInf
	for _, e := range c {
		m = max(m, e.v)
	}
	switch {
	case m == negInf:
		return c[0].id
	case math.IsInf(float64(m), 1):
		// The limit of softmax as those logits grow: uniform among them.
		n := 0
		for _, e := range c {
			if e.v == m {
				n++
			}
		}
		r := s.rng.IntN(n)
		for _, e := range c {
			if e.v == m {
				if r == 0 {
					return e.id
				}
				r--
			}
		}
	}
	invT := 1 / float64(s.o.Temperature)
	w := s.weights[:0]
	total := 0.0
	for _, e := range c {
		total += expNeg((float64(e.v) - float64(m)) * invT)
		w = append(w, total)
	}
	s.weights = w
	u := s.rng.Float64() * total
	i := sort.Search(len(w), func(i int) bool { return w[i] > u })
	if i == len(w) {
		// u rounded up to total: take the last token with any weight.
		i--
		for i > 0 && w[i-1] == w[i] {
			i--
		}
	}
	return c[i].id
}
