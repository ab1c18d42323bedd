package data

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// synthetic is a sample of n tokens, each token line*1000+position, with
// every other position trained, so where each token landed is visible.
func synthetic(line, n int) Sample {
	s := Sample{Line: line, Tokens: make([]int32, n), Targets: make([]int32, n)}
	for i := range s.Tokens {
		s.Tokens[i] = int32(line*1000 + i)
	}
	for i := range s.Targets {
		s.Targets[i] = -1
		if i+1 < n && i%2 == 0 {
			s.Targets[i] = s.Tokens[i+1]
		}
	}
	return s
}

func TestPackKeepsSamplesWholeAndTokensCounted(t *testing.T) {
	const seqLen, pad = 16, -7
	lengths := []int{6, 5, 4, 3, 2, 16, 9, 7, 1, 12, 8, 8}
	var samples []Sample
	total, trainedTotal := 0, 0
	for i, n := range lengths {
		s := synthetic(i+1, n)
		samples = append(samples, s)
		total += n
		trainedTotal += s.Trained()
	}
	seqs := pack(samples, seqLen, pad, true)
	seen := map[int]bool{}
	gotTotal, gotTrained := 0, 0
	for _, q := range seqs {
		if len(q.Tokens) != seqLen || len(q.Targets) != seqLen {
			t.Fatalf("sequence of %d/%d positions", len(q.Tokens), len(q.Targets))
		}
		if q.Bounds[0] != 0 || len(q.Bounds) != len(q.Lines)+1 {
			t.Fatalf("bounds %v for lines %v", q.Bounds, q.Lines)
		}
		for k, line := range q.Lines {
			if seen[line] {
				t.Fatalf("line %d packed twice", line)
			}
			seen[line] = true
			s := samples[line-1]
			lo, hi := q.Bounds[k], q.Bounds[k+1]
			if !slices.Equal(q.Tokens[lo:hi], s.Tokens) || !slices.Equal(q.Targets[lo:hi], s.Targets) {
				t.Errorf("line %d at [%d,%d) is not the sample", line, lo, hi)
			}
		}
		for i := q.Len(); i < seqLen; i++ {
			if q.Tokens[i] != pad || q.Targets[i] != -1 {
				t.Errorf("padding at %d is %d→%d", i, q.Tokens[i], q.Targets[i])
			}
		}
		gotTotal += q.Len()
		gotTrained += q.Trained()
	}
	if len(seen) != len(samples) || gotTotal != total || gotTrained != trainedTotal {
		t.Errorf("packed %d samples, %d tokens, %d trained; want %d, %d, %d", len(seen), gotTotal, gotTrained, len(samples), total, trainedTotal)
	}
	// 81 tokens fit in 6 sequences of 16 (81/16 rounded up); best fit
	// decreasing reaches that here.
	if len(seqs) != 6 {
		t.Errorf("%d sequences, want 6", len(seqs))
	}
}

func TestPackBestFit(t *testing.T) {
	var samples []Sample
	for i, n := range []int{6, 5, 4, 3, 2} {
		samples = append(samples, synthetic(i+1, n))
	}
	seqs := pack(samples, 8, 0, true)
	var got []string
	for _, q := range seqs {
		got = append(got, fmt.Sprint(q.Lines))
	}
	// 6 opens a sequence, 5 another, 4 a third; 3 fits best beside 5, 2
	// beside 6.
	if want := []string{"[1 5]", "[2 4]", "[3]"}; !slices.Equal(got, want) {
		t.Errorf("packed %v, want %v", got, want)
	}
	if got := seqs[0].Positions(); !slices.Equal(got, []int32{0, 1, 2, 3, 4, 5, 0, 1}) {
		t.Errorf("positions %v", got)
	}
	if got := seqs[2].Positions(); !slices.Equal(got, []int32{0, 1, 2, 3, 4, 5, 6, 7}) {
		t.Errorf("positions with padding %v", got)
	}
	unpacked := pack(samples, 8, 0, false)
	if len(unpacked) != len(samples) {
		t.Errorf("without packing %d sequences for %d samples", len(unpacked), len(samples))
	}
}

// lines is a JSONL dataset of n text lines of different lengths.
func lines(n int) string {
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, `{"text": "line %d%s"}`+"\n", i+1, strings.Repeat(" and more", i%7))
	}
	return sb.String()
}

func TestValidationSplit(t *testing.T) {
	tok, f := tinyModel(t, "tiny-llama")
	for _, tc := range []struct {
		lines int
		o     Options
		valid int
	}{
		{1, Options{}, 0},
		{2, Options{}, 1},
		{2, Options{Valid: 0.9}, 1},
		{10, Options{}, 1},
		{10, Options{Valid: 0.3}, 3},
		{10, Options{Valid: 0.99}, 9},
		{10, Options{Valid: -1}, 0},
		{10, Options{ValidCount: 4}, 4},
		{10, Options{ValidCount: 100}, 9},
		{100, Options{}, 5},
	} {
		tc.o.SeqLen = 32
		d, rep, err := readString(t, "v.jsonl", lines(tc.lines), tok, f, tc.o)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Valid.Samples) != tc.valid || len(d.Train.Samples) != tc.lines-tc.valid {
			t.Errorf("%d lines, %+v: %d validation, %d training; want %d validation", tc.lines, tc.o, len(d.Valid.Samples), len(d.Train.Samples), tc.valid)
		}
		if rep.ValidSamples != tc.valid || (tc.valid > 0) != (rep.ValidSequences > 0) {
			t.Errorf("report: %+v", rep)
		}
	}
	// The split is a function of the seed.
	validLines := func(seed uint64) []int {
		d, _, err := readString(t, "v.jsonl", lines(50), tok, f, Options{SeqLen: 32, Valid: 0.2, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		var out []int
		for _, s := range d.Valid.Samples {
			out = append(out, s.Line)
		}
		return out
	}
	a, b, c := validLines(1), validLines(1), validLines(2)
	if !slices.Equal(a, b) || slices.Equal(a, c) || len(a) != 10 {
		t.Errorf("seed 1: %v and %v; seed 2: %v", a, b, c)
	}
}

func order(it *Iterator, n int) []string {
	var out []string
	for range n {
		out = append(out, fmt.Sprint(it.Next().Lines))
	}
	return out
}

func TestShuffleIsDeterministicAndCoversEachEpoch(t *testing.T) {
	tok, f := tinyModel(t, "tiny-llama")
	d, _, err := readString(t, "s.jsonl", lines(40), tok, f, Options{SeqLen: 16, Valid: -1, NoPacking: true})
	if err != nil {
		t.Fatal(err)
	}
	n := len(d.Train.Sequences)
	if n != 40 {
		t.Fatalf("%d sequences", n)
	}
	a, b, c := order(d.Batches(3), 2*n), order(d.Batches(3), 2*n), order(d.Batches(4), 2*n)
	if !slices.Equal(a, b) {
		t.Error("the same seed gave two orders")
	}
	if slices.Equal(a, c) {
		t.Error("two seeds gave one order")
	}
	if slices.Equal(a[:n], a[n:]) {
		t.Error("epochs 0 and 1 have one order")
	}
	for e := range 2 {
		epoch := slices.Clone(a[e*n : (e+1)*n])
		slices.Sort(epoch)
		if len(slices.Compact(epoch)) != n {
			t.Errorf("epoch %d does not visit each sequence once", e)
		}
	}
}

func TestPositionRestoresTheNextBatch(t *testing.T) {
	tok, f := tinyModel(t, "tiny-llama")
	data := lines(30)
	o := Options{SeqLen: 24}
	d, _, err := readString(t, "p.jsonl", data, tok, f, o)
	if err != nil {
		t.Fatal(err)
	}
	n := len(d.Train.Sequences)
	// Stop mid-epoch, and at an epoch's end.
	for _, done := range []int{3, n, n + 5} {
		it := d.Batches(11)
		for range done {
			it.Next()
		}
		saved, err := json.Marshal(it.Position())
		if err != nil {
			t.Fatal(err)
		}
		want := order(it, n+3)

		// A resumed run reads the dataset again and seeks.
		d2, _, err := readString(t, "p.jsonl", data, tok, f, o)
		if err != nil {
			t.Fatal(err)
		}
		var p Position
		if err := json.Unmarshal(saved, &p); err != nil {
			t.Fatal(err)
		}
		it2 := d2.Batches(0)
		if err := it2.Seek(p); err != nil {
			t.Fatal(err)
		}
		if got := order(it2, n+3); !slices.Equal(got, want) {
			t.Errorf("after %d: resumed %v, want %v", done, got, want)
		}
	}

	// A position of another dataset is refused.
	other, _, err := readString(t, "p.jsonl", data, tok, f, Options{SeqLen: 32})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Batches(11).Seek(d.Batches(11).Position()); err == nil || !strings.Contains(err.Error(), "changed") {
		t.Errorf("seek into another dataset: %v", err)
	}
	if err := d.Batches(1).Seek(Position{Index: n + 1}); err == nil {
		t.Error("seek past the epoch's end succeeded")
	}
}

func TestBatchSpansEpochs(t *testing.T) {
	tok, f := tinyModel(t, "tiny-llama")
	d, _, err := readString(t, "b.jsonl", lines(5), tok, f, Options{SeqLen: 16, Valid: -1, NoPacking: true})
	if err != nil {
		t.Fatal(err)
	}
	it := d.Batches(1)
	if b := it.Batch(7); len(b) != 7 || slices.Contains(b, nil) {
		t.Fatalf("batch %v", b)
	}
	if p := it.Position(); p.Epoch != 1 || p.Index != 2 {
		t.Errorf("position %+v, want epoch 1 index 2", p)
	}
}
