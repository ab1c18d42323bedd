package ui

import "context"

// stoppable is what the UI goroutine holds of work it runs on a goroutine
// of its own (a chat reply, a fine-tuning run, a speech) to stop it: the
// work ends soon after its context is cancelled, and closes done when it
// has.
type stoppable struct {
	cancel   context.CancelFunc
	done     chan struct{} // closed when the work's goroutine has returned
	stopping bool          // stop was asked; the UI goroutine's
}

// newStoppable is a stoppable and the context its work runs under.
func newStoppable() (stoppable, context.Context) {
	ctx, cancel := context.WithCancel(context.Background())
	return stoppable{cancel: cancel, done: make(chan struct{})}, ctx
}

// stop asks the work to end; it reports false when it had been asked
// already.
func (s *stoppable) stop() bool {
	if s.stopping {
		return false
	}
	s.stopping = true
	s.cancel()
	return true
}

// stopAndWait asks the work to end and waits until its goroutine has
// returned.
func (s *stoppable) stopAndWait() {
	s.stop()
	<-s.done
}
