// Package app is Hearth's core, free of any UI: the engine goroutine that
// owns the GPU device and the resident model, and the jobs the studio, the
// command line and the API server post to it. Sub-packages hold the model
// library, downloads, chat histories, settings, the API server and the
// command line.
//
// app is the only door to the GPU: the engine and LoadModel choose the
// backend, open the device and build the runners; the studio, the API
// server and the commands never hold a device (README's "Layers", checked
// by TestLayers).
package app

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hearthstudio/hearth/engine/adapter"
	"github.com/hearthstudio/hearth/engine/chat"
	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/engine/sample"
	"github.com/hearthstudio/hearth/engine/structured"
	"github.com/hearthstudio/hearth/engine/tokenizer"
	"github.com/hearthstudio/hearth/training"
)

// ErrBusy is returned when the engine's queue is full: the caller may try
// again later (the API server answers 429).
var ErrBusy = errors.New("app: the engine is busy: too many requests are waiting")

// ErrTraining is returned by every request while a fine-tuning job holds
// the device: a run takes minutes to hours, too long to queue behind.
var ErrTraining = errors.New("app: the GPU is busy fine-tuning")

// ErrClosed is returned by every call after Close.
var ErrClosed = errors.New("app: the engine is closed")

// ErrNoModel is returned by a request that names no model while none is
// loaded.
var ErrNoModel = errors.New("app: no model is loaded: choose one")

// EngineOptions configure an Engine.
type EngineOptions struct {
	// Backend is "gpu", "cpu" or "auto" ("" too): ChooseBackend says
	// what auto picks, the CPU when the only adapter is a software one.
	Backend string
	// GPU picks and opens the adapter (gpu.OptionsFromEnv by default).
	GPU gpu.Options
	// Context is the KV cache's length; 0 is the model's, at most
	// model.DefaultContext. Batch is the prompt tokens per submit (0: 512).
	Context, Batch int
	// GPUMemory, when nonzero, refuses a model whose estimate exceeds it
	// before anything is allocated.
	GPUMemory uint64
	// F32Activations keeps every product on f32 activations (the
	// reference arithmetic) instead of quantizing them to 8 bits where the
	// weights allow, as llama.cpp does (model.GPUOptions.F32Activations).
	F32Activations bool
	// Queue is how many jobs may wait behind the running ones, besides
	// one for each free slot (Parallel); a job past it fails at once with
	// ErrBusy. 0 means 8.
	Queue int
	// Parallel is how many generations (chat turns, completions) run at
	// once, each in a slot of its own with its own KV cache of Context
	// positions: their tokens are decoded together, one chain a step,
	// which reads the weights once for all of them. Every other job waits
	// until they end. 0 means 1.
	Parallel int
	// IdleUnload frees the model after this long without a job; 0 keeps it.
	IdleUnload time.Duration
	// Resolve turns a model name into a .gguf path. nil takes names as
	// paths. The API server passes a resolver that knows only the library's
	// names, so no request can open an arbitrary file.
	Resolve func(name string) (string, error)
	// Projector finds the vision projector (mmproj file) paired with a
	// model, by the name it was asked by and its resolved path: "" for
	// none. nil pairs none: a chat with images then needs
	// GenerateOptions.Projector.
	Projector func(name, path string) (string, error)
	// ImageTokens, when not 0, is the most tokens an image becomes in a
	// model whose projector takes a budget (Gemma 4: 70, 140, 280, 560 or
	// 1120; its default 280).
	ImageTokens int
	// OnStatus, when set, is called after each change of Status, one call
	// at a time and in the order of the changes. It runs on the engine's
	// goroutine or the caller's, so it must return quickly and never call
	// back into the engine (the studio hands it to fyne.Do).
	OnStatus func(Status)
	// Kokoro is the text-to-speech model's directory: config.json,
	// kokoro-v1_0.pth (or .safetensors) and voices/. "" is
	// DefaultKokoroDir.
	Kokoro string
}

// Status is what the engine is doing, for status bars and /api/ps.
type Status struct {
	Model *ModelInfo // the resident model; nil when none is loaded
	Busy  bool       // a job or a generation is running
	// Generating is how many generations hold a slot (at most
	// EngineOptions.Parallel).
	Generating int
	// Training names the model a fine-tuning job is training, "" when
	// none runs.
	Training string
	Waiting  int // jobs queued behind it
	// Note says what happened last that a user should know: a lost GPU
	// device, an idle unload.
	Note string
}

// ModelInfo describes the resident model.
type ModelInfo struct {
	Name    string // as the caller named it
	Path    string
	Arch    string
	Title   string // general.name, may be empty
	Backend string // "gpu: ADAPTER" or "cpu"
	// BackendReason says why the model runs there (Backend.Reason).
	BackendReason string
	Context       int // the KV cache's positions, per slot
	Slots         int // generations it serves at once (EngineOptions.Parallel)
	Memory        model.Memory
	Loaded        time.Time
}

// Progress reports a long step: loading ("load": bytes uploaded) or a
// prompt's evaluation ("prefill": tokens).
type Progress struct {
	Stage       string
	Done, Total int64
}

// Engine runs jobs on one goroutine that owns the GPU device and the one
// resident model, in the order they came. A generation's job only
// prepares it and takes a slot; the tokens are then generated on the
// caller's goroutine, whose forwards the engine goroutine runs together
// with those of the other generations in flight (model.Batcher). Jobs
// that are not generations on the resident model (another model, other
// adapters, embeddings, speech, training) wait until no generation holds
// a slot. Its methods are safe for concurrent use; each blocks until its
// work is done.
type Engine struct {
	o     EngineOptions
	jobs  chan *job
	freed chan freed // slots whose generations ended
	quit  chan struct{}
	done  chan struct{}

	mu      sync.Mutex // guards status, closed and waiting
	status  Status
	closed  bool
	waiting int
	// notify is held from a status snapshot to the end of its OnStatus
	// call, so the listener hears snapshots in the order they were taken
	// and the last one it hears is the engine's state: a caller's enqueue
	// and the engine goroutine's start of that job race otherwise, and the
	// stale "idle, one waiting" can arrive after "busy".
	notify sync.Mutex

	// Owned by the engine goroutine.
	dev     *gpu.Device
	choice  *Backend // where jobs run, decided by the first that needs it
	cur     *resident
	speech  *speech // Kokoro, loaded by the first Speak (speak.go)
	lastJob time.Time
	// active counts the generations holding a slot of cur, and calls are
	// their forwards waiting for the next step; held is a job taken from
	// the queue that waits for them to end (or for a free slot).
	active    int
	calls     []*model.Call
	firstCall time.Time // when the first of calls came
	held      *job
	// lost is set when a step lost the device: the generations in flight
	// fail, and the model and device go once the last one ends.
	lost error
}

// resident is the loaded model with its runner and its sessions: one per
// slot for generations, whose forwards go through the batcher, and the
// engine goroutine's own for embeddings. A request whose prompt extends
// what a free slot holds (the next turn of a chat) takes that slot and
// evaluates only what is new.
type resident struct {
	info    ModelInfo
	m       *model.Model
	runner  model.Runner
	session *model.Session   // slot 0, used on the engine goroutine
	batcher *model.Batcher   // the generations' forwards
	slots   []*model.Session // a generation's session per slot
	busy    []bool           // which slots a generation holds
	// expected are the slots whose next forward the next step waits
	// for: those of the last step, and those taken since.
	expected []bool
	adapters []AdapterSpec // applied to runner
	// dense are an embedding model's dense layers, decoded by the first
	// Embed (empty for a model without them); nil until then.
	dense *denseStack
	// vision is the model's vision tower, opened by the first image; nil
	// until then.
	vision *Vision
}

type job struct {
	ctx  context.Context
	run  func(ctx context.Context) error
	done chan error
	// gen, for a generation's job, is what it needs: it may run while
	// other generations are in flight if a slot is free and the model and
	// adapters are theirs. nil: the job runs only when none is.
	gen *needs
}

// freed is a slot whose generation ended; done closes once the engine
// took it back (and Status says so).
type freed struct {
	slot int
	done chan struct{}
}

// needs are a generation's model and adapters.
type needs struct {
	model    string
	adapters []AdapterSpec
}

// NewEngine starts the engine goroutine. Close stops it.
func NewEngine(o EngineOptions) *Engine {
	if o.Queue <= 0 {
		o.Queue = 8
	}
	if o.Backend == "" {
		o.Backend = "auto"
	}
	o.Parallel = max(o.Parallel, 1)
	e := &Engine{o: o, jobs: make(chan *job, o.Queue+o.Parallel), freed: make(chan freed),
		quit: make(chan struct{}), done: make(chan struct{})}
	go e.loop()
	return e
}

// Close waits for the running job, fails the queued ones with ErrClosed,
// stops the generations in flight at their next forward (they fail with
// ErrClosed), frees the model and releases the device.
func (e *Engine) Close() {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		<-e.done
		return
	}
	e.closed = true
	e.mu.Unlock()
	close(e.quit)
	<-e.done
}

// Status is a snapshot of what the engine is doing.
func (e *Engine) Status() Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.status
	s.Waiting = e.waiting
	if s.Model != nil {
		m := *s.Model
		s.Model = &m
	}
	return s
}

// setStatus applies change under the lock and tells OnStatus.
func (e *Engine) setStatus(change func(*Status)) {
	e.notify.Lock()
	defer e.notify.Unlock()
	e.mu.Lock()
	change(&e.status)
	s := e.status
	s.Waiting = e.waiting
	e.mu.Unlock()
	if e.o.OnStatus != nil {
		e.o.OnStatus(s)
	}
}

// submit queues run and waits for it. It waits for the job even when ctx
// ends first: run may be writing to the caller's memory (an HTTP response)
// until it returns, and it sees ctx itself.
func (e *Engine) submit(ctx context.Context, run func(ctx context.Context) error) error {
	return e.submitJob(&job{ctx: ctx, run: run})
}

// submitJob queues j and waits for it, as submit does.
func (e *Engine) submitJob(j *job) error {
	j.done = make(chan error, 1)
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return ErrClosed
	}
	if name := e.status.Training; name != "" {
		e.mu.Unlock()
		return fmt.Errorf("%w %s; requests are taken again when the run ends or is stopped", ErrTraining, name)
	}
	// waiting counts the queued jobs and the one the engine holds (loop).
	// As many as there are free slots will not wait long, and Queue more
	// may; the channel has room for them all.
	if e.waiting >= e.o.Queue+e.o.Parallel-e.status.Generating {
		e.mu.Unlock()
		return ErrBusy
	}
	e.waiting++
	e.jobs <- j
	e.mu.Unlock()
	e.setStatus(func(*Status) {})
	return <-j.done
}

func (e *Engine) loop() {
	defer close(e.done)
	var idle <-chan time.Time
	var timer *time.Timer
	stopTimer := func() {
		if timer != nil {
			timer.Stop()
			timer, idle = nil, nil
		}
	}
	for {
		if e.o.IdleUnload > 0 && e.cur != nil && e.active == 0 && e.held == nil && timer == nil {
			timer = time.NewTimer(e.o.IdleUnload)
			idle = timer.C
		}
		jobs := e.jobs
		if e.held != nil {
			jobs = nil // first the held one, in order
		}
		var calls <-chan *model.Call
		if e.cur != nil && e.active > 0 {
			calls = e.cur.batcher.Calls()
		}
		var wait <-chan time.Time
		if len(e.calls) > 0 {
			wait = time.After(stepWait - time.Since(e.firstCall))
		}
		select {
		case <-e.quit:
			stopTimer()
			e.shutdown()
			return
		case <-idle:
			timer, idle = nil, nil
			if e.cur != nil && e.active == 0 && time.Since(e.lastJob) >= e.o.IdleUnload {
				name := e.cur.info.Name
				e.unload()
				e.setStatus(func(s *Status) { s.Note = fmt.Sprintf("%s was unloaded after %s idle", name, e.o.IdleUnload) })
			}
		case j := <-jobs:
			stopTimer()
			e.held = j
		case c := <-calls:
			if len(e.calls) == 0 {
				e.firstCall = time.Now()
			}
			e.calls = append(e.calls, c)
		case <-wait:
			e.step()
		case f := <-e.freed:
			e.free(f.slot)
			close(f.done)
		}
		if e.ready() {
			e.step()
		}
		if j := e.held; j != nil && (e.active == 0 || e.joins(j)) {
			e.held = nil
			e.setStatus(func(*Status) { e.waiting-- })
			e.run(j)
			e.lastJob = time.Now()
		}
	}
}

// stepWait is how long the waiting forwards wait for a generation that
// ready expects before their step runs without it: a generation busy on
// the host (a client slow to take its tokens) must not hold the others
// back for more than a step, and one that only samples and sends its
// token comes well within it.
const stepWait = 20 * time.Millisecond

// ready says whether the waiting forwards should run now: every
// generation in flight waits, or at least every one the last step served
// and every one started since. One that missed a step (stepWait ran out
// on it) is not waited for again until it comes back.
func (e *Engine) ready() bool {
	if len(e.calls) == 0 {
		return false
	}
	if len(e.calls) >= e.active {
		return true
	}
	in := make([]bool, len(e.cur.expected))
	for _, c := range e.calls {
		in[c.Slot()] = true
	}
	for slot, want := range e.cur.expected {
		if want && !in[slot] {
			return false
		}
	}
	return true
}

// step runs the waiting forwards together (model.Batcher.Run).
func (e *Engine) step() {
	calls := e.calls
	e.calls = nil
	clear(e.cur.expected)
	for _, c := range calls {
		e.cur.expected[c.Slot()] = true
	}
	if e.lost != nil {
		e.cur.batcher.Fail(calls, e.lost)
		return
	}
	if err := e.cur.batcher.Run(calls); errors.Is(err, gpu.ErrDeviceLost) {
		// Nothing on a lost device can be used again: the generations in
		// flight fail, and the model and device go when the last ends.
		e.lost = fmt.Errorf("%w; the model was unloaded and will be loaded again on the next request", err)
		e.cur.batcher.Stop(e.lost)
	}
}

// free gives back a slot whose generation ended.
func (e *Engine) free(slot int) {
	e.cur.busy[slot], e.cur.expected[slot] = false, false
	e.active--
	if e.active > 0 {
		e.setStatus(func(s *Status) { s.Generating = e.active })
		return
	}
	if e.lost != nil {
		e.lost = nil
		e.dropDevice()
	}
	e.setStatus(func(s *Status) { s.Busy, s.Generating = false, 0 })
	e.lastJob = time.Now()
}

// joins says whether j, held while generations are in flight, can run
// beside them: a generation on the resident model with its adapters, a
// slot free, and the device not lost.
func (e *Engine) joins(j *job) bool {
	g := j.gen
	if g == nil || e.lost != nil || !slices.Contains(e.cur.busy, false) || !slices.Equal(e.cur.adapters, g.adapters) {
		return false
	}
	if g.model == "" || g.model == e.cur.info.Name {
		return true
	}
	path := g.model
	if e.o.Resolve != nil {
		p, err := e.o.Resolve(g.model)
		if err != nil {
			return false // it fails once it runs
		}
		path = p
	}
	return path == e.cur.info.Path
}

// shutdown is the end of the engine goroutine: queued and held jobs fail,
// the generations in flight fail at their next forward and are waited
// for, and the model, Kokoro and the device are freed.
func (e *Engine) shutdown() {
	e.drain()
	if j := e.held; j != nil {
		e.held = nil
		j.done <- ErrClosed
	}
	if e.active > 0 {
		b := e.cur.batcher
		b.Stop(ErrClosed)
		b.Fail(e.calls, ErrClosed)
		e.calls = nil
		for e.active > 0 {
			select {
			case c := <-b.Calls():
				b.Fail([]*model.Call{c}, ErrClosed)
			case f := <-e.freed:
				e.free(f.slot)
				close(f.done)
			}
		}
	}
	e.unload()
	e.unloadSpeech()
	e.releaseDevice()
}

// drain fails every queued job once the engine is closing.
func (e *Engine) drain() {
	for {
		select {
		case j := <-e.jobs:
			j.done <- ErrClosed
		default:
			return
		}
	}
}

func (e *Engine) run(j *job) {
	if err := j.ctx.Err(); err != nil {
		// The caller gave up while the job waited.
		j.done <- err
		return
	}
	e.setStatus(func(s *Status) { s.Busy = true })
	err := j.run(j.ctx)
	if errors.Is(err, gpu.ErrDeviceLost) {
		e.dropDevice()
		err = fmt.Errorf("%w; the model was unloaded and will be loaded again on the next request", err)
	}
	e.setStatus(func(s *Status) { s.Busy, s.Generating = e.active > 0, e.active })
	j.done <- err
}

// dropDevice unloads everything on a lost device: nothing on it can be
// used again, and the next request opens both afresh.
func (e *Engine) dropDevice() {
	e.unload()
	e.unloadSpeech()
	e.releaseDevice()
	e.setStatus(func(s *Status) {
		s.Note = "the GPU device was lost; the model will be loaded again on the next request"
	})
}

// Load makes name the resident model, loading it unless it already is.
func (e *Engine) Load(ctx context.Context, name string, progress func(Progress)) (ModelInfo, error) {
	var info ModelInfo
	err := e.submit(ctx, func(ctx context.Context) error {
		r, err := e.ensure(name, progress)
		if err == nil {
			info = r.info
		}
		return err
	})
	return info, err
}

// Unload frees the resident model, if any.
func (e *Engine) Unload(ctx context.Context) error {
	return e.submit(ctx, func(context.Context) error {
		e.unload()
		return nil
	})
}

func (e *Engine) unload() {
	if e.cur == nil {
		return
	}
	if e.cur.vision != nil {
		e.cur.vision.Close()
	}
	e.cur.runner.Close()
	e.cur.m.Close()
	e.cur = nil
	e.setStatus(func(s *Status) { s.Model = nil })
}

// ensure loads name unless it is resident; "" means the resident model.
func (e *Engine) ensure(name string, progress func(Progress)) (*resident, error) {
	if name == "" {
		if e.cur == nil {
			return nil, ErrNoModel
		}
		return e.cur, nil
	}
	path := name
	if e.o.Resolve != nil {
		p, err := e.o.Resolve(name)
		if err != nil {
			return nil, err
		}
		path = p
	}
	if e.cur != nil && e.cur.info.Path == path {
		// Another name of the same file (Ollama's tags often share a
		// blob): the resident model answers to it now, in Status too,
		// which /api/ps and keep_alive 0 go by.
		if e.cur.info.Name != name {
			e.cur.info.Name = name
			info := e.cur.info
			e.setStatus(func(s *Status) { s.Model = &info })
		}
		return e.cur, nil
	}
	e.unload()
	if progress == nil {
		progress = func(Progress) {}
	}
	m, err := model.Load(path)
	if err != nil {
		return nil, err
	}
	r, err := e.runner(m, progress)
	if err != nil {
		m.Close()
		return nil, err
	}
	e.cur = &resident{m: m, runner: r, session: model.NewSession(r), batcher: model.NewBatcher(r),
		busy: make([]bool, r.Slots()), expected: make([]bool, r.Slots()), info: ModelInfo{
			Name: name, Path: path, Arch: m.Config.Arch, Title: m.Config.Name,
			Context: r.Context(), Slots: r.Slots(), Loaded: time.Now(),
		}}
	for slot := range r.Slots() {
		e.cur.slots = append(e.cur.slots, e.cur.batcher.Session(slot))
	}
	if g, ok := r.(*model.GPU); ok {
		e.cur.info.Backend = "gpu: " + g.Device().Info.Label()
		e.cur.info.Memory = m.Memory(r.Context(), e.batch()).Slots(r.Slots())
	} else {
		e.cur.info.Backend = "cpu"
	}
	if e.choice != nil {
		e.cur.info.BackendReason = e.choice.Reason
	}
	info := e.cur.info
	e.setStatus(func(s *Status) { s.Model, s.Note = &info, "" })
	return e.cur, nil
}

func (e *Engine) batch() int {
	if e.o.Batch > 0 {
		return e.o.Batch
	}
	return 512
}

// runner puts m where the engine's backend says (Engine.backend).
func (e *Engine) runner(m *model.Model, progress func(Progress)) (model.Runner, error) {
	b, err := e.backend()
	if err != nil {
		return nil, err
	}
	return newRunner(m, b, e.dev, RunnerOptions{Context: e.o.Context, Batch: e.o.Batch, Slots: e.o.Parallel,
		GPUMemory: e.o.GPUMemory, F32Activations: e.o.F32Activations, Progress: progress})
}

// backend is where the engine's jobs run, decided once (openBackend);
// when that is the GPU the device is open.
func (e *Engine) backend() (Backend, error) {
	if e.choice == nil {
		b, dev, err := openBackend(e.o.Backend, JobInference, e.o.GPU)
		if err != nil {
			return Backend{}, err
		}
		e.choice, e.dev = &b, dev
	}
	if e.choice.GPU {
		// Open again after a lost device (Engine.run released it).
		if err := e.openDevice(); err != nil {
			return Backend{}, err
		}
	}
	return *e.choice, nil
}

// releaseDevice releases the engine's GPU device, if open.
func (e *Engine) releaseDevice() {
	if e.dev != nil {
		e.dev.Release()
		e.dev = nil
	}
}

// openDevice opens the engine's GPU device unless it is open.
func (e *Engine) openDevice() error {
	if e.dev != nil {
		return nil
	}
	dev, err := gpu.Open(e.o.GPU)
	if err != nil {
		return err
	}
	e.dev = dev
	return nil
}

// GenerateOptions are what a chat turn and a completion share.
type GenerateOptions struct {
	// Model names the model to use, loading it first if it is not
	// resident; "" is the resident one.
	Model    string
	Sampling sample.Options
	// MaxTokens bounds the reply; 0 is until a stop or the context's end.
	MaxTokens int
	// Stop are extra strings that end the reply.
	Stop []string
	// Shift drops the oldest half of the context when it fills instead of
	// stopping (a prompt longer than the context is refused otherwise).
	Shift bool
	// Progress is told about loading and prefill.
	Progress func(Progress)
	// Adapters are LoRA adapters applied to the model for this request
	// (hot-swapped: the weights stay resident); none runs the base.
	Adapters []AdapterSpec
	// Format, when set, holds the reply to a JSON document of that schema
	// (structured output): each step samples only the tokens that can
	// continue it, and the turn can end only once it is whole.
	Format *structured.Schema
	// Projector is the vision projector (mmproj file) that reads the
	// chat's images; "" is the one EngineOptions.Projector pairs with the
	// model.
	Projector string
}

// AdapterSpec is a LoRA adapter file (a llama.cpp GGUF LoRA or a PEFT
// folder) and the scale of its correction (1 is as trained).
type AdapterSpec struct {
	Path  string
	Scale float32
}

// ChatRequest is one assistant turn of a conversation.
type ChatRequest struct {
	GenerateOptions
	Messages []chat.Message
	// Tools are the function definitions the client sent, as JSON, for
	// templates that render them. With tools, the reply's calls in the
	// model's syntax (chat.ToolSyntax) are parsed into Reply.ToolCalls,
	// and streamed text that may open a call is held back until it is
	// known not to.
	Tools []json.RawMessage
	// RequireCall holds the reply to one call to any of Tools, or with
	// CallName to that function (constrained as Format constrains, in the
	// model's call syntax); without it the model decides.
	RequireCall bool
	CallName    string
}

// CompleteRequest continues raw text, with no template.
type CompleteRequest struct {
	GenerateOptions
	Prompt string
	// Special parses special tokens written in the prompt.
	Special bool
}

// Reply is the end of a generation.
type Reply struct {
	Model string // the name the model was asked by
	Text  string
	// ToolCalls are the calls the reply made (only with tools); Text is
	// then what the model wrote before them.
	ToolCalls []chat.ToolCall
	Stats     model.Stats
	// Notice says why the model's own chat template was not used, if so.
	Notice string
}

// Token is one sampled token as Chat and Complete emit it.
type Token = model.Token

// ErrContextFull ends a reply whose conversation has filled the model's
// context (model.ErrContextFull).
var ErrContextFull = model.ErrContextFull

// Chat answers the conversation's last message, calling emit with each
// token as it is sampled. Cancelling ctx stops at the next token (or the
// next chunk of the prompt) with Stats.Stop "canceled".
func (e *Engine) Chat(ctx context.Context, req ChatRequest, emit func(model.Token) error) (Reply, error) {
	if len(req.Messages) == 0 {
		return Reply{}, fmt.Errorf("app: a chat request needs at least one message")
	}
	return e.generate(ctx, req.GenerateOptions, emit, func(r *resident) (prepared, error) {
		m := r.m
		msgs, files, err := WithImageMarkers(req.Messages)
		if err != nil {
			return prepared{}, err
		}
		p, err := m.Chat.Render(chat.Request{Messages: msgs, Tools: req.Tools, AddGenerationPrompt: true})
		if err != nil {
			return prepared{}, err
		}
		mr := model.Request{StopIDs: m.Chat.StopIDs, StopStrings: append(slices.Clone(m.Chat.StopStrings), req.Stop...)}
		var ip *ImagePrompt
		var v *Vision
		if len(files) > 0 {
			if v, err = e.vision(r, req.Projector); err != nil {
				return prepared{}, err
			}
			sp, err := v.Splice(m, p.Text, files)
			if err != nil {
				return prepared{}, err
			}
			if err := sp.Fits(r.runner.Context()); err != nil {
				return prepared{}, err
			}
			ip, mr.Prompt, mr.Images = &sp, sp.Tokens, sp.Images
		} else {
			mr.Prompt = m.Chat.Tokenize(p.Text)
		}
		// A shift keeps the system prompt, as the template renders it.
		if n := leadingSystem(req.Messages); n > 0 {
			if sp, err := m.Chat.Render(chat.Request{Messages: req.Messages[:n]}); err == nil {
				mr.Keep = len(m.Chat.Tokenize(sp.Text))
			}
		}
		out := prepared{req: mr, notice: p.Notice, images: ip, vision: v}
		if len(req.Tools) > 0 {
			syntax := m.Chat.ToolSyntax()
			out.tools = &syntax
			if req.RequireCall {
				if out.format, err = syntax.Forced(req.Tools, req.CallName); err != nil {
					return prepared{}, err
				}
			}
		}
		return out, nil
	})
}

func leadingSystem(msgs []chat.Message) int {
	n := 0
	for n < len(msgs) && msgs[n].Role == "system" {
		n++
	}
	return n
}

// Complete continues req.Prompt as raw text.
func (e *Engine) Complete(ctx context.Context, req CompleteRequest, emit func(model.Token) error) (Reply, error) {
	return e.generate(ctx, req.GenerateOptions, emit, func(r *resident) (prepared, error) {
		tok := r.m.Tokenizer
		mr := model.Request{Prompt: tok.Encode(req.Prompt, tokenizer.EncodeOptions{AddSpecial: true, ParseSpecial: req.Special}),
			StopStrings: req.Stop}
		for _, id := range []int32{tok.EOS(), tok.EOT()} {
			if id != tokenizer.None {
				mr.StopIDs = append(mr.StopIDs, id)
			}
		}
		return prepared{req: mr}, nil
	})
}

// prepared is a generation's model request, the notice of its template,
// the tool-call syntax to parse its reply with (nil: none), and its images
// with the tower that encodes them (nil: none).
type prepared struct {
	req    model.Request
	notice string
	tools  *chat.ToolSyntax
	format *structured.Schema // overrides GenerateOptions.Format
	images *ImagePrompt
	vision *Vision
}

// withModel runs job on the engine's goroutine with the model name
// resident (loaded first, progress told) and adapters applied.
func (e *Engine) withModel(ctx context.Context, name string, progress func(Progress), adapters []AdapterSpec,
	job func(ctx context.Context, r *resident) error) error {
	if progress == nil {
		progress = func(Progress) {}
	}
	return e.submit(ctx, func(ctx context.Context) error {
		r, err := e.ensure(name, progress)
		if err != nil {
			return err
		}
		if err := e.applyAdapters(r, adapters); err != nil {
			return err
		}
		return job(ctx, r)
	})
}

// generate loads the model and builds its request with prepare on the
// engine goroutine, where it takes a slot; the tokens are then generated
// on the caller's goroutine, the forwards going back to the engine's to
// run together with those of the other generations in flight.
func (e *Engine) generate(ctx context.Context, o GenerateOptions, emit func(model.Token) error,
	prepare func(*resident) (prepared, error)) (Reply, error) {
	if o.MaxTokens < 0 {
		return Reply{}, fmt.Errorf("app: max tokens %d must not be negative", o.MaxTokens)
	}
	if err := o.Sampling.Validate(); err != nil {
		return Reply{}, err
	}
	progress := o.Progress
	if progress == nil {
		progress = func(Progress) {}
	}
	var (
		reply   Reply
		req     model.Request
		tools   *chat.ToolSyntax
		session *model.Session
	)
	err := e.submitJob(&job{ctx: ctx, gen: &needs{model: o.Model, adapters: o.Adapters}, run: func(ctx context.Context) error {
		r, err := e.ensure(o.Model, progress)
		if err != nil {
			return err
		}
		if err := e.applyAdapters(r, o.Adapters); err != nil {
			return err
		}
		reply.Model = r.info.Name
		if r.m.Config.Bidirectional {
			return fmt.Errorf("%s is %w", r.info.Name, model.ErrEmbeddingModel)
		}
		p, err := prepare(r)
		if err != nil {
			return err
		}
		req, tools = p.req, p.tools
		reply.Notice = p.notice
		req.MaxTokens, req.Sampling = o.MaxTokens, o.Sampling
		if o.Shift {
			req.Overflow = model.OverflowShift
		}
		var dopts tokenizer.DecodeOptions
		if p.tools != nil {
			dopts.Keep = p.tools.Markers()
		}
		req.Decoder = r.m.Tokenizer.NewDecoder(dopts)
		if format := cmp.Or(p.format, o.Format); format != nil {
			req.Constraint = structured.NewConstraint(format, r.m.Tokenizer, req.StopIDs)
		}
		req.Progress = func(done, total int) {
			progress(Progress{Stage: "prefill", Done: int64(done), Total: int64(total)})
		}
		session = e.takeSlot(req.Prompt, req.Images)
		if p.images != nil {
			// Only the images the slot's cache does not hold are read.
			if err := p.vision.Encode(ctx, *p.images, session.Reuse(req.Prompt, req.Images)); err != nil {
				e.free(session.Slot())
				session = nil
				return err
			}
			req.Images = p.images.Images
		}
		return nil
	}})
	if err != nil {
		return reply, err
	}
	defer func() {
		f := freed{slot: session.Slot(), done: make(chan struct{})}
		e.freed <- f
		<-f.done
	}()

	var text strings.Builder
	sent := 0 // bytes of text emitted; the rest may be a tool call
	reply.Stats, err = session.Generate(ctx, req, func(t model.Token) error {
		text.WriteString(t.Text)
		if tools != nil {
			all := text.String()
			safe := max(sent, len(all)-tools.Held(all))
			t.Text, sent = all[sent:safe], safe
		}
		if emit == nil {
			return nil
		}
		return emit(t)
	})
	reply.Text = text.String()
	if err != nil || tools == nil {
		return reply, err
	}
	reply.Text, reply.ToolCalls = tools.Parse(reply.Text)
	if reply.ToolCalls == nil && sent < len(reply.Text) && emit != nil {
		// No call after all: what was held back is text.
		return reply, emit(model.Token{ID: -1, Text: reply.Text[sent:]})
	}
	return reply, nil
}

// takeSlot gives a generation of prompt a free slot of the resident model:
// the one whose cache holds the most of prompt (the conversation's earlier
// turns), the first such. The engine goroutine calls it for a job that
// Engine.joins admitted, or with no generation in flight, so one is free.
func (e *Engine) takeSlot(prompt []int32, images []model.Image) *model.Session {
	best, reuse := -1, -1
	for slot, s := range e.cur.slots {
		if !e.cur.busy[slot] {
			if n := s.Reuse(prompt, images); n > reuse {
				best, reuse = slot, n
			}
		}
	}
	e.cur.busy[best], e.cur.expected[best] = true, true
	e.active++
	e.setStatus(func(s *Status) { s.Generating = e.active })
	return e.cur.slots[best]
}

// applyAdapters sets the resident runner's LoRA adapters to specs unless
// they already are. The KV cache was computed with the old ones, so the
// session starts afresh.
func (e *Engine) applyAdapters(r *resident, specs []AdapterSpec) error {
	if slices.Equal(r.adapters, specs) {
		return nil
	}
	var loras []model.LoRA
	for _, s := range specs {
		a, err := adapter.Load(s.Path, r.m)
		if err != nil {
			return err
		}
		l, err := a.LoRA(s.Scale)
		if err != nil {
			return fmt.Errorf("%s: %w", s.Path, err)
		}
		loras = append(loras, l)
	}
	if err := r.runner.SetAdapters(loras); err != nil {
		return err
	}
	r.adapters = slices.Clone(specs)
	return nil
}

// TrainRequest is a LoRA fine-tuning run (training.Run) of a model by name.
type TrainRequest struct {
	Model string
	training.RunConfig
	// Progress hears the run's reports; Pause, if not nil, holds it
	// between steps.
	Progress func(TrainProgress)
	Pause    *TrainPause
}

// Train runs a fine-tuning job on the engine's device. The resident model
// is unloaded first: training needs the device's memory, and chat
// requests wait behind the job (or get ErrBusy) until it ends. Cancelling
// ctx stops the run after its current step with a checkpoint and the
// adapter written (Result.Stopped).
func (e *Engine) Train(ctx context.Context, req TrainRequest) (*training.Result, error) {
	var res *training.Result
	err := e.submit(ctx, func(ctx context.Context) error {
		path := req.Model
		if e.o.Resolve != nil {
			p, err := e.o.Resolve(req.Model)
			if err != nil {
				return err
			}
			path = p
		}
		if _, err := ChooseBackend(e.o.Backend, JobTraining, e.o.GPU); err != nil {
			return fmt.Errorf("app: %w", err)
		}
		e.unload()
		e.unloadSpeech()
		if err := e.openDevice(); err != nil {
			return fmt.Errorf("app: training needs a GPU adapter: %w", err)
		}
		defer func() {
			// The device stays open only for text and speech that run on
			// it; their first job decides (Engine.backend) and opens it.
			if e.choice == nil || !e.choice.GPU {
				e.releaseDevice()
			}
		}()
		m, err := model.Load(path)
		if err != nil {
			return err
		}
		defer m.Close()
		e.setStatus(func(s *Status) { s.Training = req.Model })
		defer e.setStatus(func(s *Status) { s.Training = "" })
		res, err = training.Run(ctx, e.dev, m, req.RunConfig, req.Progress, req.Pause)
		return err
	})
	return res, err
}
