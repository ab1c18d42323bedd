package model

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/hearthstudio/hearth/engine/ops"
)

// DecodeProfile is where a decoded token's GPU time goes, measured by
// timing prefixes of its chain (gpu.Chain.KeepFirst): the first p
// dispatches of the token's chain are submitted and waited for, for every
// p, and the step between consecutive prefixes of the times' non-decreasing
// fit (monotone) is what a dispatch adds, its kernel's own time together
// with the barrier before it.
type DecodeProfile struct {
	// Token is the whole chain's time, Fixed that of its empty prefix (the
	// submit, the token's inputs and the readback).
	Token, Fixed time.Duration
	// Record and Submit are the host's share of a token, outside Token's
	// clock: recording the whole chain (which decode overlaps with the GPU
	// running the token before) and Submit's return (encoding finished,
	// the queue handed the work). Where Record approaches the time a token
	// takes in hearth bench, decode waits on the host, not on the kernels.
	Record, Submit time.Duration
	// Kernels sums the dispatches by kernel (family.entry), the most
	// expensive first.
	Kernels []KernelTime
	// Dispatches is how many dispatches the chain records.
	Dispatches int
	// Empty is the time one dependent dispatch of a one-workgroup kernel
	// adds in a chain of them: the floor every dispatch of a token pays
	// whatever its work.
	Empty time.Duration
}

// KernelTime is one kernel's share of a decoded token.
type KernelTime struct {
	Name  string
	Count int
	Time  time.Duration
}

// String is the profile as a table.
func (p DecodeProfile) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "decode profile: %v a token, %d dispatches; the empty chain %v; a dependent one-workgroup dispatch adds %v\n",
		p.Token.Round(time.Microsecond), p.Dispatches, p.Fixed.Round(time.Microsecond), p.Empty.Round(100*time.Nanosecond))
	fmt.Fprintf(&b, "host: recording the chain %v, its submit %v\n", p.Record.Round(time.Microsecond), p.Submit.Round(time.Microsecond))
	fmt.Fprintf(&b, "%-44s %6s %10s %10s %6s\n", "kernel", "count", "µs/token", "µs each", "share")
	for _, k := range p.Kernels {
		us := float64(k.Time) / float64(time.Microsecond)
		fmt.Fprintf(&b, "%-44s %6d %10.1f %10.2f %5.1f%%\n", k.Name, k.Count, us, us/float64(k.Count), 100*float64(k.Time)/float64(p.Token))
	}
	return b.String()
}

// ProfileDecode profiles the token decoded at pos (greedy, as hearth bench
// decodes), each prefix timed reps times and the fastest kept, so a
// dispatch's share is not the noise of one submit. It costs about
// reps × dispatches / 2 token times, and it overwrites the cache rows at
// pos, as decoding a token there would.
func (r *GPU) ProfileDecode(pos, reps int) (DecodeProfile, error) {
	if r.x == nil {
		return DecodeProfile{}, fmt.Errorf("model: GPU runner is closed")
	}
	if pos < 0 || pos >= r.ctx || reps < 1 {
		return DecodeProfile{}, fmt.Errorf("model: profile at position %d with %d repetitions: want a position in the %d-token context and at least one repetition", pos, reps, r.ctx)
	}
	key := stepKey{n: 1, pos: pos, topK: 1, logits: true}
	names, err := r.DecodeKernels(pos)
	if err != nil {
		return DecodeProfile{}, err
	}
	if r.next != nil {
		r.next.ch.Discard()
		r.next = nil
	}
	defer func() { r.keepFirst = 0 }()
	forever := time.Duration(1<<63 - 1)
	var record, submit time.Duration // the whole chain's, fastest of reps
	prefix := func(keep int) (time.Duration, error) {
		best := forever
		if keep == len(names) {
			record, submit = forever, forever
		}
		for range reps {
			r.keepFirst = keep + 1
			t0 := time.Now()
			s, err := r.record(key, nil)
			if err != nil {
				return 0, err
			}
			recorded := time.Since(t0)
			if err := r.inputs(batchInput{tokens: []int32{0}}, key, nil); err != nil {
				s.ch.Discard()
				return 0, err
			}
			start := time.Now()
			if err := s.ch.Submit(); err != nil {
				return 0, err
			}
			submitted := time.Since(start)
			if err := r.dev.Wait(); err != nil {
				return 0, err
			}
			best = min(best, time.Since(start))
			if keep == len(names) {
				record, submit = min(record, recorded), min(submit, submitted)
			}
		}
		return best, nil
	}
	// A warm-up: the first submits of a chain pay for what the driver
	// sets up once.
	if _, err := prefix(len(names)); err != nil {
		return DecodeProfile{}, err
	}
	times := make([]time.Duration, len(names)+1)
	for p := range times {
		if times[p], err = prefix(p); err != nil {
			return DecodeProfile{}, err
		}
	}
	// A dispatch's time is the step of the prefix times' non-decreasing
	// fit: where a dispatch takes less than a submit's jitter, the raw
	// times go up and down, and adding up their positive steps would count
	// the noise (on the H100, 4x the token on Gemma 3n's chain).
	fit := monotone(times)
	by := map[string]*KernelTime{}
	for i, name := range names {
		k := by[name]
		if k == nil {
			k = &KernelTime{Name: name}
			by[name] = k
		}
		k.Count++
		k.Time += fit[i+1] - fit[i]
	}
	prof := DecodeProfile{Token: times[len(names)], Fixed: times[0], Dispatches: len(names), Record: record, Submit: submit}
	for _, k := range by {
		prof.Kernels = append(prof.Kernels, *k)
	}
	sort.Slice(prof.Kernels, func(i, j int) bool { return prof.Kernels[i].Time > prof.Kernels[j].Time })
	if prof.Empty, err = r.emptyDispatch(reps); err != nil {
		return DecodeProfile{}, err
	}
	return prof, nil
}

// emptyDispatch times chains of 1 and 257 dependent one-element adds (a
// single workgroup each, each reading what the one before wrote) and
// returns what one adds.
func (r *GPU) emptyDispatch(reps int) (time.Duration, error) {
	chain := func(n int) (time.Duration, error) {
		best := time.Duration(1<<63 - 1)
		for range reps {
			ch, err := r.dev.NewChain("empty dispatches")
			if err != nil {
				return 0, err
			}
			for range n {
				if err := ops.AddInPlace(ch, r.xn, r.x, 1); err != nil {
					ch.Discard()
					return 0, err
				}
			}
			start := time.Now()
			if err := ch.Submit(); err != nil {
				return 0, err
			}
			if err := r.dev.Wait(); err != nil {
				return 0, err
			}
			best = min(best, time.Since(start))
		}
		return best, nil
	}
	one, err := chain(1)
	if err != nil {
		return 0, err
	}
	many, err := chain(257)
	if err != nil {
		return 0, err
	}
	// The best of reps runs of each can still invert on a loaded machine
	// (one slow single dispatch); a dispatch costs no less than nothing.
	return max(0, (many-one)/256), nil
}

// monotone is the non-decreasing sequence nearest to ts in least squares
// (isotonic regression by pooling adjacent violators): each run that goes
// down is replaced by its mean. Its steps are never negative and add up to
// its last value less its first.
func monotone(ts []time.Duration) []time.Duration {
	type block struct {
		sum   float64
		count int
	}
	var blocks []block
	for _, t := range ts {
		blocks = append(blocks, block{float64(t), 1})
		for len(blocks) > 1 {
			a, b := blocks[len(blocks)-2], blocks[len(blocks)-1]
			if a.sum/float64(a.count) <= b.sum/float64(b.count) {
				break
			}
			blocks = append(blocks[:len(blocks)-2], block{a.sum + b.sum, a.count + b.count})
		}
	}
	out := make([]time.Duration, 0, len(ts))
	for _, b := range blocks {
		for range b.count {
			out = append(out, time.Duration(b.sum/float64(b.count)))
		}
	}
	return out
}
