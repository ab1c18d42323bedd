package model

import (
	"errors"
	"sync"
)

// Batcher lets sessions on several goroutines share one runner, each on a
// slot of its own: a session's forward waits as a Call, and the runner's
// owner (the engine goroutine, which alone may use the runner) takes the
// calls from Calls and runs them together with Run, every waiting
// single-token decode in one Runner.Decode. Decode reads the weights once
// for all of them, which is what makes several requests at once cheaper
// than one after another.
type Batcher struct {
	r     Runner
	calls chan *Call
	stop  chan struct{}
	once  sync.Once
	err   error // why stop closed
}

// Call is one session's forward waiting for the runner's owner.
type Call struct {
	slot   int
	tokens []int32
	rows   []float32 // embedding rows instead of tokens (ForwardEmbeds)
	pos    int
	out    Output
	res    Result
	err    error
	done   chan struct{}
}

// Slot is the slot of the session waiting.
func (c *Call) Slot() int { return c.slot }

// ErrBatcherStopped is a forward's error after Batcher.Stop with no error
// of its own.
var ErrBatcherStopped = errors.New("model: the runner's batcher was stopped")

// NewBatcher returns a batcher for r.
func NewBatcher(r Runner) *Batcher {
	return &Batcher{r: r, calls: make(chan *Call), stop: make(chan struct{})}
}

// Session returns a session on slot whose forwards go through the batcher.
// Give each session being generated at once its own slot.
func (b *Batcher) Session(slot int) *Session {
	return &Session{r: b.r, slot: slot, via: b}
}

// Calls delivers the sessions' forwards as they wait.
func (b *Batcher) Calls() <-chan *Call { return b.calls }

// Stop fails every forward not yet taken from Calls, now and later, with
// err (nil: ErrBatcherStopped). Calls already taken are still the owner's
// to Run.
func (b *Batcher) Stop(err error) {
	b.once.Do(func() {
		b.err = err
		if err == nil {
			b.err = ErrBatcherStopped
		}
		close(b.stop)
	})
}

// forward hands one forward of tokens, or of embedding rows, to the
// runner's owner and waits for it.
func (b *Batcher) forward(slot int, tokens []int32, rows []float32, pos int, out Output) (Result, error) {
	c := &Call{slot: slot, tokens: tokens, rows: rows, pos: pos, out: out, done: make(chan struct{})}
	select {
	case b.calls <- c:
	case <-b.stop:
		return Result{}, b.err
	}
	<-c.done
	return c.res, c.err
}

// Run runs calls on the runner and answers each; the owner calls it with
// calls of distinct slots. A prompt's tokens or an image's rows (or a
// forward asking for every position or hidden states) run one call at a
// time; the
// single-token decodes run together, or, when there is one, as its
// session asked (top-k and penalties on the device). It returns the first
// error a forward met, for the owner to act on (a lost device); each call
// has its own.
func (b *Batcher) Run(calls []*Call) error {
	var decode []*Call
	var first error
	keep := func(err error) error {
		if first == nil {
			first = err
		}
		return err
	}
	for _, c := range calls {
		switch {
		case c.rows != nil:
			c.res, c.err = b.r.ForwardEmbeds(c.slot, c.rows, c.pos, c.out)
		case len(c.tokens) == 1 && !c.out.All && !c.out.Hidden:
			decode = append(decode, c)
			continue
		default:
			c.res, c.err = b.r.ForwardSlot(c.slot, c.tokens, c.pos, c.out)
		}
		keep(c.err)
	}
	switch len(decode) {
	case 0:
	case 1:
		c := decode[0]
		c.res, c.err = b.r.ForwardSlot(c.slot, c.tokens, c.pos, c.out)
		keep(c.err)
	default:
		steps := make([]Step, len(decode))
		for i, c := range decode {
			steps[i] = Step{Slot: c.slot, Token: c.tokens[0], Pos: c.pos}
		}
		res, err := b.r.Decode(steps)
		for i, c := range decode {
			if err != nil {
				c.err = keep(err)
			} else {
				c.res = res[i]
			}
		}
	}
	for _, c := range calls {
		close(c.done)
	}
	return first
}

// Fail answers calls with err without running them.
func (b *Batcher) Fail(calls []*Call, err error) {
	for _, c := range calls {
		c.err = err
		close(c.done)
	}
}
