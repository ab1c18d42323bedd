package server

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// deadlineRecorder is a ResponseWriter that keeps the write deadline each
// write met, as a connection would enforce it.
type deadlineRecorder struct {
	*httptest.ResponseRecorder
	deadline time.Time
	seen     []time.Time // the deadline at each Write
}

func (d *deadlineRecorder) SetWriteDeadline(t time.Time) error { d.deadline = t; return nil }

func (d *deadlineRecorder) Write(b []byte) (int, error) {
	d.seen = append(d.seen, d.deadline)
	return d.ResponseRecorder.Write(b)
}

// TestStreamWritesHaveADeadline: every write of a stream has a deadline, so
// a client that stops reading cannot hold the engine goroutine, which
// writes the tokens; the deadline is cleared when the handler ends, so it
// does not outlive the response on a keep-alive connection.
func TestStreamWritesHaveADeadline(t *testing.T) {
	w := &deadlineRecorder{ResponseRecorder: httptest.NewRecorder()}
	var rw http.ResponseWriter = w
	run := newRun(rw, "application/x-ndjson", true)
	start := time.Now()
	for range 3 {
		if err := run.s.write([]byte("{}\n")); err != nil {
			t.Fatal(err)
		}
	}
	for i, d := range w.seen {
		if d.Before(start.Add(streamWriteTimeout)) || d.After(time.Now().Add(streamWriteTimeout)) {
			t.Errorf("write %d: deadline %v, want %v after the write", i, d, streamWriteTimeout)
		}
	}
	if len(w.seen) != 3 {
		t.Errorf("%d writes seen, want 3", len(w.seen))
	}
	run.end()
	if !w.deadline.IsZero() {
		t.Errorf("deadline %v left after the handler's end", w.deadline)
	}
}
