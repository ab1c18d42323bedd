package training

import (
	"fmt"
	"time"
)

// meter passes progress on when done has moved by a hundredth of total
// since the last report, and at the start and the end: a report per read
// or per tensor would flood a `--json` log.
func meter(progress func(done, total int64)) func(done, total int64) {
	next := int64(0)
	return func(done, total int64) {
		if done < next && done < total {
			return
		}
		next = done + max(1, total/100)
		progress(done, total)
	}
}

// paceWindow is how many recent steps the ETA averages: enough to smooth
// one slow step, few enough to follow a change of pace (a machine that got
// busier).
const paceWindow = 20

// partTarget is how long one submit of a long step should run when the
// step is cut into passes: a fraction of a second keeps the progress
// moving, and each cut costs a wait and a re-record (under a millisecond).
const partTarget = 250 * time.Millisecond

// pace measures a run's steps, validations and checkpoints and estimates
// the time left from them. The first step of a session is kept apart: it
// compiles the kernels (2.3 s of a tiny model's first step on lavapipe,
// whose later steps took 80 s on a busy machine; on a fast GPU the compile
// can be most of it), so once a later step is measured the mean leaves it
// out.
type pace struct {
	first        time.Duration   // the session's first step, 0 before it
	recent       []time.Duration // up to paceWindow steps after it
	valid, saved time.Duration   // the last validation and checkpoint
}

func (p *pace) step(d time.Duration) {
	if p.first == 0 {
		p.first = d
		return
	}
	p.recent = append(p.recent, d)
	if len(p.recent) > paceWindow {
		p.recent = p.recent[1:]
	}
}

// perStep is the time of one step: the mean of the recent steps after the
// first, the first while it is all there is; false before any.
func (p *pace) perStep() (time.Duration, bool) {
	if len(p.recent) == 0 {
		return p.first, p.first > 0
	}
	var sum time.Duration
	for _, d := range p.recent {
		sum += d
	}
	return sum / time.Duration(len(p.recent)), true
}

// eta is the time the run has left: steps steps (the one under way, in
// it for running, among them), valids validations and saves checkpoints at
// the measured pace. It is unknown (false) until a step has been measured;
// a validation or checkpoint not yet measured counts nothing.
func (p *pace) eta(steps, valids, saves int, running time.Duration) (time.Duration, bool) {
	per, ok := p.perStep()
	if !ok || steps <= 0 {
		return 0, false
	}
	left := per*time.Duration(steps) - min(running, per) + p.valid*time.Duration(valids) + p.saved*time.Duration(saves)
	return max(left, 0), true
}

// cut is the passes per submit that keeps each submit of a step of
// passes passes near partTarget: 1 before a step is measured (the first
// step's length is unknown, and on a CPU adapter it takes minutes), 0 (one
// submit per micro-batch, as fast GPUs want) when a whole step is that
// short.
func (p *pace) cut(passes int) int {
	per, ok := p.perStep()
	if !ok {
		return 1
	}
	parts := int(per / partTarget)
	if parts < 2 || passes < 2 {
		return 0
	}
	return (passes + parts - 1) / parts
}

// FormatETA is the time left as the studio and `hearth train` show it:
// seconds under a minute, then minutes, then hours and minutes.
func FormatETA(d time.Duration) string {
	if d = d.Round(time.Second); d < time.Minute {
		return d.String()
	}
	if d = d.Round(time.Minute); d < time.Hour {
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return fmt.Sprintf("%dh%02dm", d/time.Hour, d%time.Hour/time.Minute)
}

// Doing says what the run is doing, for the reports sent while a phase
// runs (PhaseData, PhaseLoad, PhaseStep, PhaseValidating, PhaseSaving), as
// the studio's headline and `hearth train`'s log show it, with how far it
// has got; "" for the other phases. model names the model.
func (p Progress) Doing(model string) string {
	pct := ""
	if p.Total > 0 {
		pct = fmt.Sprintf(" %d%%", p.Done*100/p.Total)
	}
	switch p.Phase {
	case PhaseData:
		if p.Report != nil {
			return ""
		}
		return "Reading the dataset…" + pct
	case PhaseLoad:
		return fmt.Sprintf("Putting %s on the GPU…%s", model, pct)
	case PhaseStep:
		s := fmt.Sprintf("Step %d of %d…%s", p.Step+1, p.Steps, pct)
		if p.ETA == 0 {
			// No step of this session has ended: this is its first,
			// whose first passes compile the kernels.
			s += " (the first also compiles the kernels)"
		}
		return s
	case PhaseValidating:
		return "Measuring the validation loss…" + pct
	case PhaseSaving:
		return "Writing a checkpoint…"
	}
	return ""
}
