package model

import (
	"slices"
	"testing"
	"time"
)

// TestProfileDecode checks the profile's bookkeeping on a real chain: every
// dispatch of the token counted once under its kernel, and the runner
// whole afterwards (a keep
// count left behind would cut every later chain short).
func TestProfileDecode(t *testing.T) {
	m := synthModel(t, "tiny-llama", "Q8_0")
	g, err := NewGPU(dev, m, GPUOptions{Context: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	want, err := g.DecodeKernels(5)
	if err != nil {
		t.Fatal(err)
	}
	p, err := g.ProfileDecode(5, 1)
	if err != nil {
		t.Fatal(err)
	}
	if p.Dispatches != len(want) {
		t.Errorf("%d dispatches profiled, the chain has %d", p.Dispatches, len(want))
	}
	count := 0
	for _, k := range p.Kernels {
		if !slices.Contains(want, k.Name) {
			t.Errorf("kernel %q is not in the chain %v", k.Name, want)
		}
		count += k.Count
	}
	if count != len(want) {
		t.Errorf("kernels count %d dispatches, the chain has %d", count, len(want))
	}
	// Times are not compared with each other: on a loaded software
	// adapter any prefix can outlast a longer one.
	if p.Token <= 0 || p.Fixed <= 0 || p.Empty < 0 || p.Record <= 0 || p.Submit <= 0 || p.Submit > p.Token {
		t.Errorf("token %v, empty chain %v, empty dispatch %v, recording %v, submit %v", p.Token, p.Fixed, p.Empty, p.Record, p.Submit)
	}
	after, err := g.DecodeKernels(5)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(after, want) {
		t.Errorf("after profiling the chain records %d dispatches, want %d", len(after), len(want))
	}
	if _, err := g.ProfileDecode(32, 1); err == nil {
		t.Error("a position outside the context was profiled")
	}
}

// TestMonotone: the fit of a non-decreasing sequence is itself; a run that
// goes down is pooled into its mean, so the steps are never negative.
func TestMonotone(t *testing.T) {
	for _, c := range []struct{ in, want []time.Duration }{
		{[]time.Duration{1, 2, 2, 5}, []time.Duration{1, 2, 2, 5}},
		{[]time.Duration{1, 5, 3, 4}, []time.Duration{1, 4, 4, 4}},
		{[]time.Duration{9, 1, 2, 10}, []time.Duration{4, 4, 4, 10}},
		{[]time.Duration{7}, []time.Duration{7}},
		{nil, []time.Duration{}},
	} {
		if got := monotone(c.in); !slices.Equal(got, c.want) {
			t.Errorf("monotone(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}
