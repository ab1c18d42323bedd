package chats

import "sync"

// Writer saves and deletes conversations on a goroutine of its own, so a
// caller on a UI goroutine never waits for the disk (a synced write can take
// tens of milliseconds, more on a busy disk). Only the newest state of a
// conversation matters, so a state still waiting to be written is replaced
// by a newer one, and the writer never falls behind.
type Writer struct {
	s       *Store
	onError func(error)

	mu      sync.Mutex
	cond    *sync.Cond // signalled when pending empties and no write runs
	pending map[string]*Conversation
	order   []string // pending's IDs in the order they came
	busy    bool
	closed  bool
	failed  bool // the last write failed
	wake    chan struct{}
	done    chan struct{}
}

// NewWriter starts a writer. onError, when set, is told of a failed write
// on the writer's goroutine; it is told once until a write succeeds again,
// so a full disk gives one report rather than one per save.
func (s *Store) NewWriter(onError func(error)) *Writer {
	w := &Writer{s: s, onError: onError, pending: map[string]*Conversation{},
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	w.cond = sync.NewCond(&w.mu)
	go w.loop()
	return w
}

// Save queues a copy of c as it is now.
func (w *Writer) Save(c *Conversation) { w.queue(c.ID, c.Clone()) }

// Delete queues the removal of the conversation id; a save of it still
// waiting is dropped.
func (w *Writer) Delete(id string) { w.queue(id, nil) }

func (w *Writer) queue(id string, c *Conversation) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	if _, ok := w.pending[id]; !ok {
		w.order = append(w.order, id)
	}
	w.pending[id] = c
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Flush waits until everything queued before it is on disk.
func (w *Writer) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.pending) > 0 || w.busy {
		w.cond.Wait()
	}
}

// Close writes what is queued and stops the writer; later calls to Save
// and Delete do nothing.
func (w *Writer) Close() {
	w.Flush()
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.wake)
	}
	w.mu.Unlock()
	<-w.done
}

func (w *Writer) loop() {
	defer close(w.done)
	for range w.wake {
		w.mu.Lock()
		pending, order := w.pending, w.order
		w.pending, w.order = map[string]*Conversation{}, nil
		w.busy = true
		w.mu.Unlock()

		var err error
		for _, id := range order {
			var e error
			if c := pending[id]; c != nil {
				e = w.s.Save(c)
			} else {
				e = w.s.Delete(id)
			}
			if e != nil && err == nil {
				err = e
			}
		}

		w.mu.Lock()
		report := err != nil && !w.failed
		w.failed = err != nil
		w.mu.Unlock()
		// Report before Flush can return, so whoever waited on it has been
		// told.
		if report && w.onError != nil {
			w.onError(err)
		}
		w.mu.Lock()
		w.busy = false
		if len(w.pending) == 0 {
			w.cond.Broadcast()
		}
		w.mu.Unlock()
	}
}
