package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hearthstudio/hearth/app"
)

// settle waits for the goroutine count to come back within slack of base:
// connections and handlers end a little after their clients return.
func settle(t *testing.T, base, slack int) {
	t.Helper()
	// 30 s: a leak never ends, so a long wait costs nothing when all is
	// well and spares a machine under load, where 5 s was flaky.
	deadline := time.Now().Add(30 * time.Second)
	for runtime.NumGoroutine() > base+slack {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// TestConcurrentStreams sends 50 streaming requests at once to a server
// whose queue holds 2: each one completes or is refused with 429 at once,
// none hangs, and goroutines and memory come back afterwards.
func TestConcurrentStreams(t *testing.T) {
	burst(t, app.EngineOptions{Queue: 2})
}

// TestConcurrentStreamsInSlots is the same burst on a GPU (lavapipe here)
// engine serving 8 at once with 8 more queued: every stream still
// completes or gets 429, and the engine ran 8 generations together.
func TestConcurrentStreamsInSlots(t *testing.T) {
	burst(t, app.EngineOptions{Backend: "gpu", Queue: 8, Parallel: 8, Context: 256})
}

// burst is TestConcurrentStreams on an engine made with eo; it reports
// the aggregate tokens a second of the completed streams.
func burst(t *testing.T, eo app.EngineOptions) {
	const clients, maxTokens = 50, 16
	var most atomic.Int32 // the most generations the status showed at once
	eo.OnStatus = func(s app.Status) {
		for m := most.Load(); int32(s.Generating) > m && !most.CompareAndSwap(m, int32(s.Generating)); m = most.Load() {
		}
	}
	ts := newTestServer(t, eo, Options{})
	// Load the model first, so the burst measures the queue, not a load.
	ts.post(t, "/v1/chat/completions", chatBody(llama, 1, nil), nil)
	ts.Client().CloseIdleConnections()
	baseG, baseHeap := runtime.NumGoroutine(), heapInUse()

	// Every request is done in well under a second; 30 s means hung.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body, _ := json.Marshal(chatBody(llama, maxTokens, map[string]any{"stream": true}))
	var ok, busy atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	began := time.Now()
	for range clients {
		wg.Go(func() {
			<-start
			req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/chat/completions", bytes.NewReader(body))
			resp, err := ts.Client().Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			data, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Error(err)
				return
			}
			switch resp.StatusCode {
			case http.StatusOK:
				if _, finish, _ := streamedChat(t, data); finish != "length" {
					t.Errorf("finish %q", finish)
				}
				ok.Add(1)
			case http.StatusTooManyRequests:
				if resp.Header.Get("Retry-After") == "" || deref(openAIErr(t, data).Code) != "rate_limit_exceeded" {
					t.Errorf("429 %v: %s", resp.Header, data)
				}
				busy.Add(1)
			default:
				t.Errorf("%s: %s", resp.Status, data)
			}
		})
	}
	close(start)
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatal("requests hung")
	}
	took := time.Since(began)
	t.Logf("%d completed, %d refused, at most %d at once; %.0f tokens/s in all", ok.Load(), busy.Load(), most.Load(),
		float64(ok.Load()*maxTokens)/took.Seconds())
	if p := max(eo.Parallel, 1); int(most.Load()) != p {
		t.Errorf("at most %d generations ran at once, want %d", most.Load(), p)
	}
	if ok.Load() < 1 || busy.Load() < 1 || ok.Load()+busy.Load() != clients {
		t.Errorf("%d completed, %d refused, of %d", ok.Load(), busy.Load(), clients)
	}
	if st := ts.engine.Status(); st.Busy || st.Waiting != 0 {
		t.Errorf("the engine after the burst: %+v", st)
	}

	ts.Client().CloseIdleConnections()
	// A handful over the baseline: the server's side of connections the
	// client just closed may take a moment to notice.
	settle(t, baseG, 4)
	// 50 requests held nothing: the tiny model's own buffers are a few MiB,
	// so 16 MiB of growth would mean responses or requests were kept.
	if now := heapInUse(); now > baseHeap+16<<20 {
		t.Errorf("heap in use grew from %d to %d bytes", baseHeap, now)
	}
}

// TestDisconnectFreesTheEngine: a client that goes away mid-stream stops
// its generation at the next token, so the request behind it runs at once
// instead of waiting for a reply nobody reads.
func TestDisconnectFreesTheEngine(t *testing.T) {
	ts := newTestServer(t, app.EngineOptions{Queue: 1, Context: 8192}, Options{})
	ts.post(t, "/v1/chat/completions", chatBody(llama, 1, nil), nil)
	baseG := runtime.NumGoroutine()

	// No max_tokens: the reply would run to the 8192-token context's end,
	// ~8100 tokens and ~50 s on an idle machine's CPU, longer under load.
	ctx, cancel := context.WithCancel(context.Background())
	body, _ := json.Marshal(map[string]any{"model": llama, "messages": conversation, "temperature": 0, "stream": true})
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/chat/completions", bytes.NewReader(body))
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(resp.Body)
	for chunks := 0; chunks < 3; {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "data: ") {
			chunks++
		}
	}
	cancel()
	resp.Body.Close()

	start := time.Now()
	var got chatCompletion
	ts.post(t, "/v1/chat/completions", chatBody(llama, 4, nil), &got)
	// 4 tokens take a few milliseconds, well under a second even at load
	// 20 (2 s was too tight for that); the abandoned reply would hold the
	// engine for ~50 s or more, so 20 s still tells the two apart.
	if took := time.Since(start); took > 20*time.Second || got.Usage.CompletionTokens != 4 {
		t.Errorf("the next request took %v (%+v)", took, got.Usage)
	}
	ts.Client().CloseIdleConnections()
	settle(t, baseG, 4)
}
