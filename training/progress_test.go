package training

import (
	"testing"
	"time"
)

// TestPaceETAFromMeasuredSteps: the ETA is unknown until a step has been
// measured; the first step alone sets the pace until a later one is
// measured, then it is left out (it compiled the kernels); the mean covers
// the last paceWindow steps; the step under way counts what it has left,
// and the validations and checkpoints left count their last measured time.
func TestPaceETAFromMeasuredSteps(t *testing.T) {
	var p pace
	if _, ok := p.eta(10, 1, 1, 0); ok {
		t.Fatal("an ETA before any step was measured")
	}
	p.step(30 * time.Second) // the first: compiles the kernels
	if d, ok := p.eta(4, 0, 0, 0); !ok || d != 120*time.Second {
		t.Fatalf("after the first step: %v %v, want 4 × 30s", d, ok)
	}
	p.step(2 * time.Second)
	p.step(4 * time.Second)
	if d, _ := p.eta(4, 0, 0, 0); d != 12*time.Second {
		t.Fatalf("after 30s, 2s, 4s: %v, want 4 × 3s (the first left out)", d)
	}
	// One second into the step under way, with two validations of 5 s and
	// a checkpoint of 1 s to come.
	p.valid, p.saved = 5*time.Second, time.Second
	if d, _ := p.eta(4, 2, 1, time.Second); d != 4*3*time.Second-time.Second+2*5*time.Second+time.Second {
		t.Fatalf("with a step under way, validations and a checkpoint: %v", d)
	}
	// A step running longer than the pace has nothing left of it, not less.
	if d, _ := p.eta(1, 0, 0, time.Minute); d != 0 {
		t.Fatalf("a step past its pace: %v, want 0", d)
	}
	// The recent steps only: after 20 steps of 1 s the earlier 2 s and 4 s
	// are out of the window.
	for range paceWindow {
		p.step(time.Second)
	}
	if d, _ := p.eta(7, 0, 0, 0); d != 7*time.Second {
		t.Fatalf("after %d steps of 1s: %v, want 7s", paceWindow, d)
	}
	if _, ok := p.eta(0, 0, 0, 0); ok {
		t.Fatal("an ETA with no steps left")
	}
}

// TestPaceCut: the first step of a session is cut after every pass (its
// length is unknown); a step measured at under two partTargets is one
// submit per micro-batch again; a long one is cut into submits of about
// partTarget.
func TestPaceCut(t *testing.T) {
	var p pace
	if c := p.cut(33); c != 1 {
		t.Fatalf("before any step: cut %d, want 1", c)
	}
	p.step(100 * time.Millisecond)
	if c := p.cut(33); c != 0 {
		t.Fatalf("a 100 ms step: cut %d, want 0", c)
	}
	p = pace{}
	p.step(time.Second) // 4 parts of 250 ms: 33 passes in submits of 9
	if c := p.cut(33); c != 9 {
		t.Fatalf("a 1 s step of 33 passes: cut %d, want 9", c)
	}
	p = pace{}
	p.step(80 * time.Second) // 320 parts of 250 ms, more than the passes
	if c := p.cut(33); c != 1 {
		t.Fatalf("an 80 s step of 33 passes: cut %d, want 1", c)
	}
}

func TestFormatETA(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{1400 * time.Millisecond, "1s"},
		{59600 * time.Millisecond, "1m"},
		{45 * time.Minute, "45m"},
		{90*time.Minute + 20*time.Second, "1h30m"},
		{26*time.Hour + 5*time.Minute, "26h05m"},
	} {
		if got := FormatETA(c.d); got != c.want {
			t.Errorf("FormatETA(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}

// TestMeter: the reports passed on are the first, the first after each
// hundredth of the total has moved since the last, and the last.
func TestMeter(t *testing.T) {
	var got []int64
	m := meter(func(done, total int64) { got = append(got, done) })
	for d := int64(0); d <= 1000; d += 3 {
		m(d, 1000)
	}
	m(1000, 1000)
	if len(got) > 101 || got[0] != 0 || got[len(got)-1] != 1000 {
		t.Fatalf("%d reports: %v", len(got), got)
	}
	for i := 1; i < len(got)-1; i++ {
		// Reads of 3 pass a hundredth (10) at 12 past the last report.
		if gap := got[i] - got[i-1]; gap != 12 {
			t.Fatalf("reports %d and %d: want them 12 apart", got[i-1], got[i])
		}
	}
}

// TestRunnerAfter: the validations (or checkpoints) left, every 4 steps
// and at the last.
func TestRunnerAfter(t *testing.T) {
	for _, c := range []struct{ step, steps, every, want int }{
		{0, 10, 4, 3},  // 4, 8, 10
		{4, 10, 4, 2},  // 8, 10
		{8, 10, 4, 1},  // 10
		{10, 10, 4, 0}, // done
		{0, 8, 4, 2},   // 4, 8
		{5, 8, 4, 1},   // 8
		{0, 2, 50, 1},  // 2
	} {
		r := &runner{st: State{Step: c.step, Steps: c.steps}}
		if got := r.after(c.every); got != c.want {
			t.Errorf("step %d of %d, every %d: %d left, want %d", c.step, c.steps, c.every, got, c.want)
		}
	}
}
