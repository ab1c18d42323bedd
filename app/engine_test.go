package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hearthstudio/hearth/engine/chat"
	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/engine/sample"
	"github.com/hearthstudio/hearth/engine/synth"
	"github.com/hearthstudio/hearth/engine/tokenizer"
	"github.com/hearthstudio/hearth/training"
)

var (
	tinyOnce sync.Once
	tinyDir  string // removed by TestMain
	tinyPath string
	tinyErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if tinyDir != "" {
		os.RemoveAll(tinyDir)
	}
	os.Exit(code)
}

// tinyModel is a tiny-llama file shared by the tests of this package.
func tinyModel(t *testing.T) string {
	t.Helper()
	tinyOnce.Do(func() {
		p, _ := synth.PresetByName("tiny-llama")
		if tinyDir, tinyErr = os.MkdirTemp("", "hearth-app-test-"); tinyErr != nil {
			return
		}
		tinyPath = filepath.Join(tinyDir, "tiny-llama.gguf")
		tinyErr = synth.WriteFile(tinyPath, p, synth.Options{Quant: "Q8_0", Seed: 7})
	})
	if tinyErr != nil {
		t.Fatal(tinyErr)
	}
	return tinyPath
}

func greedy() sample.Options { return sample.Options{Temperature: 0} }

func hello(n int) ChatRequest {
	return ChatRequest{GenerateOptions: GenerateOptions{Sampling: greedy(), MaxTokens: n},
		Messages: []chat.Message{{Role: "user", Content: "Hello there"}}}
}

func cpuEngine(t *testing.T, o EngineOptions) *Engine {
	t.Helper()
	o.Backend = "cpu"
	e := NewEngine(o)
	t.Cleanup(e.Close)
	return e
}

// TestChatStreamsAndReusesTheCache: the tokens emitted make up the reply's
// text, and the next turn of the conversation evaluates only what is new.
func TestChatStreamsAndReusesTheCache(t *testing.T) {
	path := tinyModel(t)
	e := cpuEngine(t, EngineOptions{})
	ctx := context.Background()
	if _, err := e.Chat(ctx, hello(4), nil); !errors.Is(err, ErrNoModel) {
		t.Fatalf("chat before any load: %v, want ErrNoModel", err)
	}
	req := hello(6)
	req.Model = path
	var streamed strings.Builder
	n := 0
	r, err := e.Chat(ctx, req, func(tok model.Token) error {
		streamed.WriteString(tok.Text)
		if tok.ID >= 0 {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Text != streamed.String() || n != r.Stats.Generated || r.Model != path {
		t.Errorf("reply %q (%d tokens, model %q), streamed %q (%d)", r.Text, r.Stats.Generated, r.Model, streamed.String(), n)
	}
	if s := e.Status(); s.Model == nil || s.Model.Backend != "cpu" || s.Model.Arch != "llama" || s.Busy {
		t.Errorf("status after the turn: %+v", s)
	}
	next := hello(3)
	next.Messages = append(next.Messages, chat.Message{Role: "assistant", Content: r.Text}, chat.Message{Role: "user", Content: "And then?"})
	r2, err := e.Chat(ctx, next, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Stats.CachedTokens < r.Stats.PromptTokens {
		t.Errorf("second turn reused %d tokens, want at least the first prompt's %d", r2.Stats.CachedTokens, r.Stats.PromptTokens)
	}
}

// TestCompleteMatchesSession: a completion through the engine gives the
// tokens a session on its own gives.
func TestCompleteMatchesSession(t *testing.T) {
	path := tinyModel(t)
	e := cpuEngine(t, EngineOptions{})
	r, err := e.Complete(context.Background(), CompleteRequest{GenerateOptions: GenerateOptions{Model: path, Sampling: greedy(), MaxTokens: 8}, Prompt: "Once upon"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cpu, err := model.NewCPU(m, min(m.Config.Context, model.DefaultContext))
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	req := model.Request{Prompt: m.Tokenizer.Encode("Once upon", tokenizerOpts()), MaxTokens: 8, Sampling: greedy(),
		Decoder: m.Tokenizer.NewDecoder(decodeOpts())}
	if _, err := model.NewSession(cpu).Generate(context.Background(), req, func(tok model.Token) error {
		want.WriteString(tok.Text)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if r.Text != want.String() {
		t.Errorf("engine %q, session %q", r.Text, want.String())
	}
}

// TestQueueBoundAndOrder: with one job running and the queue full, the
// next job fails at once with ErrBusy; the queued one runs after.
func TestQueueBoundAndOrder(t *testing.T) {
	path := tinyModel(t)
	e := cpuEngine(t, EngineOptions{Queue: 1})
	if _, err := e.Load(context.Background(), path, nil); err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	first := make(chan error, 1)
	go func() {
		_, err := e.Chat(context.Background(), hello(3), func(model.Token) error {
			once.Do(func() { close(started) })
			<-release
			return nil
		})
		first <- err
	}()
	<-started
	second := make(chan error, 1)
	go func() {
		_, err := e.Chat(context.Background(), hello(2), nil)
		second <- err
	}()
	waitFor(t, "the second job to queue", func() bool { return e.Status().Waiting == 1 })
	if _, err := e.Chat(context.Background(), hello(2), nil); !errors.Is(err, ErrBusy) {
		t.Errorf("third job with the queue full: %v, want ErrBusy", err)
	}
	close(release)
	for _, ch := range []chan error{first, second} {
		if err := <-ch; err != nil {
			t.Error(err)
		}
	}
}

// TestCancel: a job cancelled while running stops at a token with Stop
// "canceled"; one cancelled while waiting never runs.
func TestCancel(t *testing.T) {
	path := tinyModel(t)
	e := cpuEngine(t, EngineOptions{})
	if _, err := e.Load(context.Background(), path, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	req := hello(500)
	req.Sampling = sample.Options{Temperature: 1, Seed: 3}
	r, err := e.Chat(ctx, req, func(model.Token) error {
		if n++; n == 2 {
			cancel()
		}
		return nil
	})
	if err != nil || r.Stats.Stop != "canceled" || r.Stats.Generated > 3 {
		t.Errorf("cancelled at token 2: %+v, %v", r.Stats, err)
	}

	release := make(chan struct{})
	go e.submit(context.Background(), func(context.Context) error { <-release; return nil })
	waitFor(t, "the blocking job to start", func() bool { return e.Status().Busy })
	ctx, cancel = context.WithCancel(context.Background())
	ran := false
	done := make(chan error, 1)
	go func() { done <- e.submit(ctx, func(context.Context) error { ran = true; return nil }) }()
	waitFor(t, "the job to queue", func() bool { return e.Status().Waiting == 1 })
	cancel()
	close(release)
	if err := <-done; !errors.Is(err, context.Canceled) || ran {
		t.Errorf("job cancelled while queued: %v, ran %v", err, ran)
	}
}

// TestIdleUnload: the model is freed after the idle time, and loads again
// on the next request. The reload is read from the OnStatus record, not
// from Status after the request: with 50 ms idle the model may already be
// unloaded again by the time a loaded machine lets the test look.
func TestIdleUnload(t *testing.T) {
	path := tinyModel(t)
	var mu sync.Mutex
	var seen []Status
	e := cpuEngine(t, EngineOptions{IdleUnload: 50 * time.Millisecond, OnStatus: func(s Status) {
		mu.Lock()
		seen = append(seen, s)
		mu.Unlock()
	}})
	// unloaded is the index of the first status saying the model was
	// unloaded for idleness, -1 while none does.
	unloaded := func() int {
		mu.Lock()
		defer mu.Unlock()
		for i, s := range seen {
			if s.Model == nil && strings.Contains(s.Note, "unloaded") {
				return i
			}
		}
		return -1
	}
	req := hello(2)
	req.Model = path
	if _, err := e.Chat(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the idle unload", func() bool { return e.Status().Model == nil })
	waitFor(t, "a status note saying the model was unloaded", func() bool { return unloaded() >= 0 })
	if _, err := e.Chat(context.Background(), req, nil); err != nil {
		t.Errorf("after the unload: %v", err)
	}
	at := unloaded()
	mu.Lock()
	defer mu.Unlock()
	reloaded := false
	for _, s := range seen[at+1:] {
		reloaded = reloaded || s.Model != nil && s.Model.Path == path
	}
	if !reloaded {
		t.Errorf("no status after the unload had the model loaded again: %+v", seen)
	}
}

// TestDeviceLost: a job failing with a lost device drops the model, says
// so, and the next request loads it again.
func TestDeviceLost(t *testing.T) {
	path := tinyModel(t)
	e := cpuEngine(t, EngineOptions{})
	if _, err := e.Load(context.Background(), path, nil); err != nil {
		t.Fatal(err)
	}
	err := e.submit(context.Background(), func(context.Context) error {
		return fmt.Errorf("model: step: %w (driver reset)", gpu.ErrDeviceLost)
	})
	if !errors.Is(err, gpu.ErrDeviceLost) || !strings.Contains(err.Error(), "loaded again") {
		t.Errorf("error %v", err)
	}
	if s := e.Status(); s.Model != nil || !strings.Contains(s.Note, "lost") {
		t.Errorf("status after the loss: %+v", s)
	}
	req := hello(2)
	req.Model = path
	if _, err := e.Chat(context.Background(), req, nil); err != nil {
		t.Errorf("after the loss: %v", err)
	}
}

// TestBadRequests: each is refused with an error naming the problem, and
// the engine goes on serving.
func TestBadRequests(t *testing.T) {
	path := tinyModel(t)
	e := cpuEngine(t, EngineOptions{Resolve: func(name string) (string, error) {
		if name == "tiny" {
			return path, nil
		}
		return "", fmt.Errorf("unknown model %q", name)
	}})
	ctx := context.Background()
	bad := func(mut func(*ChatRequest)) ChatRequest {
		r := hello(2)
		r.Model = "tiny"
		mut(&r)
		return r
	}
	for _, tc := range []struct {
		name string
		req  ChatRequest
		want string
	}{
		{"unknown model", bad(func(r *ChatRequest) { r.Model = "nope" }), `unknown model "nope"`},
		{"no messages", bad(func(r *ChatRequest) { r.Messages = nil }), "at least one message"},
		{"negative max tokens", bad(func(r *ChatRequest) { r.MaxTokens = -1 }), "must not be negative"},
		{"bad temperature", bad(func(r *ChatRequest) { r.Sampling.Temperature = -1 }), "Temperature = -1"},
	} {
		if _, err := e.Chat(ctx, tc.req, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	long := bad(func(r *ChatRequest) { r.Messages[0].Content = strings.Repeat("word ", 5000) })
	if _, err := e.Chat(ctx, long, nil); !errors.Is(err, model.ErrContextFull) {
		t.Errorf("a prompt over the context: %v", err)
	}
	if _, err := e.Chat(ctx, bad(func(*ChatRequest) {}), nil); err != nil {
		t.Errorf("a good request after the bad ones: %v", err)
	}
	e.Close()
	if _, err := e.Chat(ctx, bad(func(*ChatRequest) {}), nil); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

// TestLoadOnGPUReportsProgress: loading on the default backend (lavapipe
// in CI) reports upload progress ending at the total, and a prompt reports
// its prefill.
func TestLoadOnGPUReportsProgress(t *testing.T) {
	path := tinyModel(t)
	e := NewEngine(EngineOptions{Backend: "gpu"})
	defer e.Close()
	var stages []Progress
	req := hello(2)
	req.Model = path
	req.Progress = func(p Progress) { stages = append(stages, p) }
	if _, err := e.Chat(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	var load, prefill Progress
	for _, p := range stages {
		switch p.Stage {
		case "load":
			if p.Done < load.Done {
				t.Errorf("load progress went back from %d to %d", load.Done, p.Done)
			}
			load = p
		case "prefill":
			prefill = p
		}
	}
	if load.Total == 0 || load.Done != load.Total {
		t.Errorf("last load progress %+v, want done = total > 0", load)
	}
	if prefill.Total == 0 || prefill.Done != prefill.Total {
		t.Errorf("last prefill progress %+v, want done = total > 0", prefill)
	}
	s := e.Status()
	if s.Model == nil || !strings.HasPrefix(s.Model.Backend, "gpu: ") || s.Model.Memory.Total() == 0 {
		t.Errorf("status %+v, want a GPU model with its memory estimate", s.Model)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func tokenizerOpts() tokenizer.EncodeOptions { return tokenizer.EncodeOptions{AddSpecial: true} }
func decodeOpts() tokenizer.DecodeOptions    { return tokenizer.DecodeOptions{} }

// TestOnStatusEndsOnTheEngineState: the last status OnStatus is told is
// the engine's state once it is idle. Reported outside any lock, the
// caller's "one waiting" raced the engine goroutine's "idle" and could
// arrive last, and a status bar showed a job waiting that had finished.
func TestOnStatusEndsOnTheEngineState(t *testing.T) {
	var mu sync.Mutex
	var last Status
	e := cpuEngine(t, EngineOptions{OnStatus: func(s Status) {
		if s.Waiting > 0 {
			// A listener slow on this call: the engine runs the job and
			// reports the end meanwhile.
			time.Sleep(20 * time.Millisecond)
		}
		mu.Lock()
		last = s
		mu.Unlock()
	}})
	for round := range 3 {
		if err := e.Unload(context.Background()); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		got := last
		mu.Unlock()
		if got.Busy || got.Waiting != 0 {
			t.Fatalf("round %d: the last status told is %+v; the engine is idle: %+v", round, got, e.Status())
		}
	}
}

// TestAnotherNameOfTheResidentModel: a second name of the resident file
// (two Ollama tags of one blob) reuses the model, and Status reports the
// name it was last asked by, as the reply does.
func TestAnotherNameOfTheResidentModel(t *testing.T) {
	path := tinyModel(t)
	e := cpuEngine(t, EngineOptions{Resolve: func(string) (string, error) { return path, nil }})
	ctx := context.Background()
	first, err := e.Load(ctx, "tiny:latest", nil)
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.Load(ctx, "tiny:1b", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Loaded.Equal(first.Loaded) {
		t.Error("the second name loaded the file again")
	}
	if m := e.Status().Model; m == nil || m.Name != "tiny:1b" {
		t.Errorf("Status names %+v, want tiny:1b", m)
	}
}

// TestTrainThenChatWithTheAdapter: a fine-tuning job on the engine's
// device unloads the resident model, refuses other requests while it runs
// (ErrTraining), and writes an adapter; a chat with that adapter differs
// from the base's reply, and one without it is the base's again (the
// adapters are swapped per request, the KV cache dropped with them).
func TestTrainThenChatWithTheAdapter(t *testing.T) {
	path := tinyModel(t)
	e := NewEngine(EngineOptions{Backend: "gpu"})
	defer e.Close()
	ctx := context.Background()
	base := hello(8)
	base.Model = path
	want, err := e.Chat(ctx, base, nil)
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	out := filepath.Join(dir, "tuned.gguf")
	var refused error
	res, err := e.Train(ctx, TrainRequest{Model: path, RunConfig: training.RunConfig{
		Settings: training.Settings{LoRA: training.LoRAConfig{Rank: 4, Alpha: 8}, AdamW: training.DefaultAdamW,
			LR: 5e-2, Steps: 3, SeqLen: 48, Batch: 2, Valid: -1, Seed: 1},
		Data: filepath.Join("..", "assets", "datasets", "answer-format.jsonl"), Out: out,
	}, Progress: func(p training.Progress) {
		if p.Phase == training.PhaseTrain && p.Step == 1 {
			// Called on the engine's goroutine, mid-job: another request
			// must be refused at once, not queued behind the run.
			_, refused = e.Chat(ctx, base, nil)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(refused, ErrTraining) {
		t.Errorf("a chat during training: %v, want ErrTraining", refused)
	}
	if res.Step != 3 || e.Status().Model != nil || e.Status().Training != "" {
		t.Fatalf("result %+v, status %+v", res, e.Status())
	}

	tuned := base
	tuned.Adapters = []AdapterSpec{{Path: out, Scale: 1}}
	got, err := e.Chat(ctx, tuned, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Text == want.Text {
		t.Errorf("the adapter did not change the reply %q", got.Text)
	}
	again, err := e.Chat(ctx, base, nil)
	if err != nil {
		t.Fatal(err)
	}
	if again.Text != want.Text {
		t.Errorf("without the adapter: %q, the base said %q", again.Text, want.Text)
	}
	tuned.Adapters = []AdapterSpec{{Path: filepath.Join(dir, "none.gguf"), Scale: 1}}
	if _, err := e.Chat(ctx, tuned, nil); err == nil || !strings.Contains(err.Error(), "none.gguf") {
		t.Errorf("a missing adapter: %v", err)
	}
}
