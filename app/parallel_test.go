package app

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hearthstudio/hearth/engine/chat"
	"github.com/hearthstudio/hearth/engine/model"
)

// parallelChats are four conversations of different lengths.
func parallelChats(path string) []ChatRequest {
	var reqs []ChatRequest
	for i, text := range []string{"Hello there", "What is the capital of Norway, and why is it there?", "Count: one two three four five six seven", "Hi"} {
		req := hello(10 + i)
		req.Model = path
		req.Messages = []chat.Message{{Role: "user", Content: text}}
		reqs = append(reqs, req)
	}
	return reqs
}

// chatAll runs reqs at once on e, holding each one's first token until all
// have one, so they are all in flight together; it returns the replies and
// the most generations the status showed at once.
func chatAll(t *testing.T, e *Engine, reqs []ChatRequest) ([]Reply, int) {
	t.Helper()
	var first sync.WaitGroup
	first.Add(len(reqs))
	replies := make([]Reply, len(reqs))
	errs := make([]error, len(reqs))
	most := 0
	var wg sync.WaitGroup
	for i, req := range reqs {
		wg.Go(func() {
			n := 0
			replies[i], errs[i] = e.Chat(context.Background(), req, func(model.Token) error {
				if n++; n == 1 {
					first.Done()
					first.Wait()
				}
				return nil
			})
		})
	}
	all := make(chan struct{})
	go func() { first.Wait(); close(all) }()
	select {
	case <-all:
	case <-time.After(time.Minute):
		// Each holds its first token until every one has its own: with
		// fewer slots than chats that never happens.
		t.Fatalf("the %d chats were never in flight together: %+v", len(reqs), e.Status())
	}
	most = e.Status().Generating
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("chat %d: %v", i, err)
		}
	}
	return replies, most
}

// TestParallelChatsMatchOneAtATime: four chats at once on a four-slot
// engine, their tokens decoded together, give each the reply it gets
// alone. On the CPU a batched step is each sequence's own forward, so the
// replies are the same text; on the GPU the products run on four rows at
// once (model's TestDecodeMatchesCPU checks those logits), and each reply
// is checked to be whole. The second round continues every conversation:
// each goes back to the slot that holds it and evaluates only its new
// message.
func TestParallelChatsMatchOneAtATime(t *testing.T) {
	path := tinyModel(t)
	reqs := parallelChats(path)
	alone := cpuEngine(t, EngineOptions{})
	want := make([]string, len(reqs))
	for i, req := range reqs {
		r, err := alone.Chat(context.Background(), req, nil)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = r.Text
	}
	for _, backend := range []string{"cpu", "gpu"} {
		t.Run(backend, func(t *testing.T) {
			e := NewEngine(EngineOptions{Backend: backend, Parallel: 4, Context: 256})
			defer e.Close()
			replies, most := chatAll(t, e, reqs)
			if most != 4 {
				t.Errorf("%d generations in flight at once, want 4", most)
			}
			for i, r := range replies {
				if r.Stats.Generated != reqs[i].MaxTokens && r.Stats.Stop != "stop" {
					t.Errorf("chat %d: %d tokens, stop %q", i, r.Stats.Generated, r.Stats.Stop)
				}
				if backend == "cpu" && r.Text != want[i] {
					t.Errorf("chat %d: %q at once, %q alone", i, r.Text, want[i])
				}
			}
			if st := e.Status(); st.Busy || st.Generating != 0 || st.Model == nil || st.Model.Slots != 4 {
				t.Errorf("status after the chats: %+v", st)
			}

			next := make([]ChatRequest, len(reqs))
			for i, req := range reqs {
				next[i] = req
				next[i].Messages = append(append([]chat.Message(nil), req.Messages...),
					chat.Message{Role: "assistant", Content: replies[i].Text}, chat.Message{Role: "user", Content: fmt.Sprintf("And %d?", i)})
			}
			// In reverse, so that a slot taken by order rather than by
			// what it holds would miss.
			for l, r := 0, len(next)-1; l < r; l, r = l+1, r-1 {
				next[l], next[r] = next[r], next[l]
			}
			again, _ := chatAll(t, e, next)
			for i, r := range again {
				if r.Stats.CachedTokens < replies[len(next)-1-i].Stats.PromptTokens {
					t.Errorf("second turn %d: %d tokens cached, want at least the first turn's prompt of %d", i, r.Stats.CachedTokens, replies[len(next)-1-i].Stats.PromptTokens)
				}
			}
		})
	}
}

// TestOtherJobsWaitForTheGenerations: while chats hold slots, a job that
// is not a generation on the resident model (an embedding, another model)
// waits until they end, and a chat beyond the slots waits for a free one;
// each then runs. Then the engine closes with a chat in flight: it ends
// with ErrClosed, and Close returns.
func TestOtherJobsWaitForTheGenerations(t *testing.T) {
	path := tinyModel(t)
	e := cpuEngine(t, EngineOptions{Parallel: 2})
	release := make(chan struct{})
	started := make(chan struct{}, 2)
	hold := func(model.Token) error {
		select {
		case started <- struct{}{}:
		default:
		}
		<-release
		return nil
	}
	var wg sync.WaitGroup
	chatErrs := make(chan error, 3)
	for range 2 {
		req := hello(3)
		req.Model = path
		wg.Go(func() {
			_, err := e.Chat(context.Background(), req, hold)
			chatErrs <- err
		})
	}
	<-started
	<-started
	embedded := make(chan error, 1)
	go func() {
		_, err := e.Embed(context.Background(), EmbedRequest{Model: path, Inputs: []string{"a"}})
		embedded <- err
	}()
	waitFor(t, "the embedding to wait", func() bool { return e.Status().Waiting == 1 })
	select {
	case err := <-embedded:
		t.Fatalf("the embedding ran beside the chats: %v", err)
	default:
	}
	close(release)
	wg.Wait()
	if err := <-embedded; err != nil {
		t.Errorf("the embedding after the chats: %v", err)
	}
	for range 2 {
		if err := <-chatErrs; err != nil {
			t.Error(err)
		}
	}

	// Close while a chat is in flight.
	release = make(chan struct{})
	req := hello(50)
	req.Model = path
	go func() {
		_, err := e.Chat(context.Background(), req, func(model.Token) error { <-release; return nil })
		chatErrs <- err
	}()
	waitFor(t, "the chat to start", func() bool { return e.Status().Generating == 1 })
	closed := make(chan struct{})
	go func() { e.Close(); close(closed) }()
	close(release)
	<-closed
	if err := <-chatErrs; !errors.Is(err, ErrClosed) {
		t.Errorf("a chat in flight when the engine closed: %v, want ErrClosed", err)
	}
}
