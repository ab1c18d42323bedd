package training

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hearthstudio/hearth/engine/adapter"
	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/training/data"
)

// Settings are the choices of a run that a checkpoint keeps.
type Settings struct {
	LoRA  LoRAConfig  `json:"lora"`
	AdamW AdamWConfig `json:"adamw"`
	// LR is the peak learning rate; Warmup the optimizer steps of its
	// linear warmup (negative: 3% of the steps, the common warmup_ratio
	// 0.03; at most a tenth of the steps), after which it decays on a
	// cosine towards zero (Schedule: no step runs at rate 0).
	LR     float64 `json:"lr"`
	Warmup int     `json:"warmup"`
	// Epochs are passes over the training sequences; Steps, when
	// positive, is the number of optimizer steps instead.
	Epochs float64 `json:"epochs"`
	Steps  int     `json:"steps,omitempty"`
	// SeqLen is the positions of a packed sequence; Batch the sequences of
	// a micro-batch (one chain on the device); Accum the micro-batches
	// whose gradients accumulate into one optimizer step.
	SeqLen int `json:"seq_len"`
	Batch  int `json:"batch"`
	Accum  int `json:"accum"`
	// Valid is the fraction of the dataset's lines held out for the
	// validation loss (data.Options.Valid: 0 is data.DefaultValid, a
	// negative value none).
	Valid float64 `json:"valid"`
	// Seed draws the adapter's initial A, the validation split, the order
	// of the sequences and, unless LoRA.DropoutSeed is set, the dropout
	// masks.
	Seed uint64 `json:"seed"`
}

// Preset is a named set of Settings for people who would rather not pick
// each number.
type Preset struct {
	Name, About string
	Settings    Settings
}

// Presets are the Tune tab's and `hearth train --preset`'s choices, the
// first the default. The learning rates and ranks are the common LoRA
// recipes (2e-4 at rank 16 is QLoRA's and Unsloth's default).
var Presets = []Preset{
	{"balanced", "rank 16, 3 epochs: most fine-tunes", Settings{
		LoRA: LoRAConfig{Rank: 16, Alpha: 32}, AdamW: DefaultAdamW, LR: 2e-4, Warmup: -1, Epochs: 3,
		SeqLen: 512, Batch: 4, Accum: 1, Seed: 1,
	}},
	{"quick", "rank 8, 1 epoch: a first look at what the data does", Settings{
		LoRA: LoRAConfig{Rank: 8, Alpha: 16}, AdamW: DefaultAdamW, LR: 3e-4, Warmup: -1, Epochs: 1,
		SeqLen: 512, Batch: 4, Accum: 1, Seed: 1,
	}},
	{"thorough", "rank 32, 5 epochs at a lower rate: more capacity, slower", Settings{
		LoRA: LoRAConfig{Rank: 32, Alpha: 64}, AdamW: DefaultAdamW, LR: 1e-4, Warmup: -1, Epochs: 5,
		SeqLen: 1024, Batch: 2, Accum: 4, Seed: 1,
	}},
}

// PresetByName finds a preset.
func PresetByName(name string) (Preset, bool) {
	for _, p := range Presets {
		if strings.EqualFold(p.Name, name) {
			return p, true
		}
	}
	return Preset{}, false
}

// RunConfig is a training run: the settings, the files, how often to save
// and validate.
type RunConfig struct {
	Settings
	// Data is the dataset file (training/data reads it).
	Data string
	// Out is where the adapter goes: a .gguf path is a llama.cpp GGUF
	// LoRA, anything else a Hugging Face PEFT folder.
	Out string
	// Checkpoint is the checkpoint file; "" is Out + ".checkpoint".
	Checkpoint string
	// SaveEvery is the optimizer steps between checkpoints (0: 50). A
	// checkpoint is also written at the end and when the run is stopped.
	SaveEvery int
	// ValidEvery is the optimizer steps between validation losses (0:
	// SaveEvery). The last step is always validated.
	ValidEvery int
	// Resume continues the run of the checkpoint; without it an existing
	// checkpoint is an error rather than something overwritten.
	Resume bool
}

// CheckpointPath is where the run's checkpoint goes.
func (c RunConfig) CheckpointPath() string {
	if c.Checkpoint != "" {
		return c.Checkpoint
	}
	return strings.TrimRight(c.Out, `/\`) + ".checkpoint"
}

func (c *RunConfig) defaults() {
	if c.SaveEvery <= 0 {
		c.SaveEvery = 50
	}
	if c.ValidEvery <= 0 {
		c.ValidEvery = c.SaveEvery
	}
	if c.Accum <= 0 {
		c.Accum = 1
	}
}

func (c *RunConfig) validate(m *model.Model) error {
	switch {
	case c.Data == "":
		return errors.New("training: no dataset")
	case c.Out == "":
		return errors.New("training: no output path for the adapter")
	case c.SeqLen < 2:
		return fmt.Errorf("training: a sequence length of %d; it must be at least 2", c.SeqLen)
	case c.SeqLen > m.Config.Context:
		return fmt.Errorf("training: a sequence length of %d is longer than the model's context of %d", c.SeqLen, m.Config.Context)
	case c.Batch < 1:
		return fmt.Errorf("training: a batch of %d sequences; it must be at least 1", c.Batch)
	case !(c.LR > 0) || math.IsInf(c.LR, 0):
		return fmt.Errorf("training: learning rate %v must be a positive number", c.LR)
	case c.Steps < 0 || c.Steps == 0 && (!(c.Epochs > 0) || math.IsInf(c.Epochs, 0)):
		return fmt.Errorf("training: %v epochs, %d steps: one must be positive", c.Epochs, c.Steps)
	}
	return c.LoRA.validate()
}

// compatible says why a resumed run cannot continue checkpoint settings
// old with c's: what shapes the adapter or the data must not change. The
// learning rate, warmup, epochs and steps may (to train longer, say).
func (c *RunConfig) compatible(old Settings) error {
	var diffs []string
	add := func(what string, was, now any) {
		diffs = append(diffs, fmt.Sprintf("%s %v (now %v)", what, was, now))
	}
	if old.LoRA.Rank != c.LoRA.Rank {
		add("rank", old.LoRA.Rank, c.LoRA.Rank)
	}
	if old.LoRA.Alpha != c.LoRA.Alpha {
		add("alpha", old.LoRA.Alpha, c.LoRA.Alpha)
	}
	if old.LoRA.Dropout != c.LoRA.Dropout || old.LoRA.DropoutSeed != c.LoRA.DropoutSeed {
		add("dropout", old.LoRA.Dropout, c.LoRA.Dropout)
	}
	if a, b := strings.Join(old.LoRA.Targets, ","), strings.Join(c.LoRA.Targets, ","); a != b {
		add("targets", a, b)
	}
	if old.SeqLen != c.SeqLen {
		add("sequence length", old.SeqLen, c.SeqLen)
	}
	if old.Batch != c.Batch {
		add("batch", old.Batch, c.Batch)
	}
	if old.Accum != c.Accum {
		add("accumulation", old.Accum, c.Accum)
	}
	if old.Valid != c.Valid {
		add("validation fraction", old.Valid, c.Valid)
	}
	if old.Seed != c.Seed {
		add("seed", old.Seed, c.Seed)
	}
	if old.AdamW != c.AdamW {
		add("AdamW settings", old.AdamW, c.AdamW)
	}
	if len(diffs) > 0 {
		return fmt.Errorf("the checkpoint was made with %s: resume with the same settings, or start a new run", strings.Join(diffs, ", "))
	}
	return nil
}

// Phase is what a run is doing.
type Phase string

const (
	PhaseData       Phase = "data"       // reading the dataset: Done of Total bytes
	PhaseLoad       Phase = "load"       // putting the model on the device: Done of Total bytes
	PhaseStep       Phase = "step"       // an optimizer step is under way: Done of Total passes
	PhaseTrain      Phase = "train"      // an optimizer step was taken
	PhaseValidating Phase = "validating" // the validation loss is being measured: Done of Total passes
	PhaseValid      Phase = "valid"      // a validation loss was measured
	PhaseSaving     Phase = "saving"     // a checkpoint is being written
	PhaseCheckpoint Phase = "checkpoint" // a checkpoint was written
	PhaseResumed    Phase = "resumed"    // a checkpoint was read: History has its losses
	PhasePaused     Phase = "paused"     // waiting for Pause.Resume
	PhaseDone       Phase = "done"       // the adapter was written
)

// Progress is a run's report, sent after each event of its Phase.
type Progress struct {
	Phase       Phase
	Step, Steps int
	// Epoch is the passes over the training sequences so far.
	Epoch float64
	// Loss is the last step's mean loss, ValidLoss the last validation
	// loss (HasValid once there is one).
	Loss, ValidLoss float64
	HasValid        bool
	LR, GradNorm    float64
	// Done of Total is how far the phase under way has got, in the
	// reports sent while it runs (the phases that say so); Total is 0 in
	// the others. A pass is one layer's forward or backward, or the LM
	// head, of one example (a packed sample): a long step reports after
	// each few.
	Done, Total int64
	// TokensPerSec are the tokens run through forward and backward per
	// second of this session (padding excluded, prompts included: the
	// throughput training benchmarks count); ETA the time the rest of the
	// run will take at the pace measured (pace.eta), 0 while unknown:
	// before the first step has ended.
	TokensPerSec float64
	Elapsed, ETA time.Duration
	// GPUMemory is the bytes the step holds on the device.
	GPUMemory uint64
	// Checkpoint is the last checkpoint written, "" before the first.
	Checkpoint string
	// Report is the dataset's report, with PhaseData.
	Report *data.Report
	// History, in the first report of a resumed run, is the losses of
	// the steps before it.
	History []Point
}

// Pause holds a run between optimizer steps while paused; the device
// keeps everything, so Resume continues at once.
type Pause struct {
	mu sync.Mutex
	ch chan struct{} // open while paused
}

// Pause asks the run to wait after its current step.
func (p *Pause) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ch == nil {
		p.ch = make(chan struct{})
	}
}

// Resume lets a paused run go on.
func (p *Pause) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ch != nil {
		close(p.ch)
		p.ch = nil
	}
}

// Paused reports whether the run is asked to wait.
func (p *Pause) Paused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ch != nil
}

// wait blocks while paused, until Resume or ctx's end.
func (p *Pause) wait(ctx context.Context) {
	p.mu.Lock()
	ch := p.ch
	p.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

// Result is how a run ended.
type Result struct {
	Adapter    string // the adapter written
	Checkpoint string // the last checkpoint
	Step       int    // optimizer steps taken in all
	Steps      int
	Loss       float64 // the last step's loss
	ValidLoss  float64 // the last validation loss; HasValid says if there is one
	HasValid   bool
	// Stopped is set when the context ended the run before its last step:
	// the adapter and the checkpoint hold the steps taken, and Resume
	// continues.
	Stopped bool
	History []Point
}

// ErrDiverged wraps the error of a run stopped by a loss or gradient that
// is not a finite number.
var ErrDiverged = errors.New("training diverged")

// Run trains an adapter for m on dev as c says: it reads the dataset,
// puts the model on the device, takes optimizer steps (each Accum
// micro-batches of Batch sequences, one chain each), measures the
// validation loss, writes a checkpoint every SaveEvery steps and at the
// end, and writes the adapter to c.Out. progress, if not nil, hears every
// event; pause, if not nil, holds the run between steps.
//
// When ctx ends, Run writes a checkpoint and the adapter as they are and
// returns a Result with Stopped set, and no error. A loss or gradient norm
// that is not finite stops the run with an error wrapping ErrDiverged that
// names the last good checkpoint, which is left as it was.
func Run(ctx context.Context, dev *gpu.Device, m *model.Model, c RunConfig, progress func(Progress), pause *Pause) (*Result, error) {
	c.defaults()
	if c.LoRA.DropoutSeed == 0 {
		c.LoRA.DropoutSeed = c.Seed
	}
	if err := c.validate(m); err != nil {
		return nil, err
	}
	if progress == nil {
		progress = func(Progress) {}
	}
	ckPath := c.CheckpointPath()

	// The dataset.
	read := meter(func(done, total int64) { progress(Progress{Phase: PhaseData, Done: done, Total: total}) })
	ds, rep, err := data.Load(c.Data, m.Tokenizer, m.Chat, data.Options{SeqLen: c.SeqLen, Valid: c.Valid, Seed: c.Seed, Progress: read})
	if err != nil {
		return nil, err
	}
	progress(Progress{Phase: PhaseData, Report: &rep})
	if len(ds.Train.Sequences) == 0 {
		return nil, fmt.Errorf("training: %s has nothing to train on: %s", c.Data, strings.TrimSpace(rep.String()))
	}
	it := ds.Batches(c.Seed)

	// A new adapter, or the checkpoint's.
	var (
		lora *LoRA
		opt  *Optimizer
		st   State
	)
	if c.Resume {
		ck, err := ReadCheckpoint(ckPath, m)
		if err != nil {
			return nil, err
		}
		if err := c.compatible(ck.State.Settings); err != nil {
			return nil, fmt.Errorf("training: %s: %w", ckPath, err)
		}
		if err := it.Seek(ck.State.Position); err != nil {
			return nil, fmt.Errorf("training: %s: %w", ckPath, err)
		}
		lora, opt, st = ck.LoRA, ck.Opt, ck.State
		// A kill during a checkpoint write leaves atomicfile's temporary
		// file beside it; the checkpoint itself is whole.
		left, _ := filepath.Glob(filepath.Join(filepath.Dir(ckPath), "."+filepath.Base(ckPath)+".tmp-*"))
		for _, f := range left {
			os.Remove(f)
		}
	} else {
		if _, err := os.Stat(ckPath); err == nil {
			return nil, fmt.Errorf("training: a checkpoint of an earlier run is at %s: resume it, or delete it to start anew", ckPath)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("training: %w", err)
		}
		if lora, err = NewLoRA(m, c.LoRA, c.Seed); err != nil {
			return nil, err
		}
		opt = NewOptimizer(lora, c.AdamW)
		st = State{Base: baseInfo(m)}
	}
	opt.Config = c.AdamW
	st.Settings = c.Settings
	perStep := c.Batch * c.Accum
	st.Steps = c.Steps
	if st.Steps == 0 {
		st.Steps = int(math.Ceil(c.Epochs * float64(len(ds.Train.Sequences)) / float64(perStep)))
	}
	if st.Step > st.Steps {
		return nil, fmt.Errorf("training: the checkpoint is at step %d, past the %d steps asked for", st.Step, st.Steps)
	}
	sched := Schedule{Peak: c.LR, Warmup: c.Warmup, Total: st.Steps}

	// The device.
	uploaded := meter(func(done, total int64) {
		progress(Progress{Phase: PhaseLoad, Step: st.Step, Steps: st.Steps, Done: done, Total: total})
	})
	g, err := newGPU(dev, m, lora, c.SeqLen, c.Batch*c.SeqLen, uploaded)
	if err != nil {
		return nil, err
	}
	defer g.Close()
	if c.Resume {
		if err := g.SetMoments(opt); err != nil {
			return nil, err
		}
		g.SetDropoutStep(st.Dropout)
	}

	r := &runner{c: c, m: m, g: g, lora: lora, opt: opt, st: st, it: it, ds: ds, ckPath: ckPath, progress: progress}
	if c.Resume {
		r.saved, r.savedStep = ckPath, st.Step
		p := r.report(PhaseResumed)
		p.History = st.History
		if last, ok := lastPoint(st.History, false); ok {
			p.Loss = last.Loss
		}
		progress(p)
	}
	return r.loop(ctx, sched, pause)
}

// runner is a run's state between its steps.
type runner struct {
	c         RunConfig
	m         *model.Model
	g         *GPU
	lora      *LoRA
	opt       *Optimizer
	st        State
	it        *data.Iterator
	ds        *data.Dataset
	ckPath    string
	saved     string // the last checkpoint written
	savedStep int    // its step
	progress  func(Progress)

	start  time.Time
	tokens int64 // tokens trained on this session
	pace   pace
	// stepStart is when the step under way began (zero between steps);
	// stepPasses the passes of the last step begun.
	stepStart  time.Time
	stepPasses int
	last       Progress
}

func (r *runner) loop(ctx context.Context, sched Schedule, pause *Pause) (*Result, error) {
	r.start = time.Now()
	for r.st.Step < r.st.Steps {
		if pause != nil && pause.Paused() {
			r.progress(r.report(PhasePaused))
			pause.wait(ctx)
			// Waiting is not training: this session's clock restarts.
			r.start, r.tokens = time.Now(), 0
		}
		if ctx.Err() != nil {
			return r.stop()
		}
		if err := r.step(sched); err != nil {
			return nil, err
		}
		last := r.st.Step == r.st.Steps
		if r.st.Step%r.c.ValidEvery == 0 || last {
			if err := r.validate(); err != nil {
				return nil, err
			}
		}
		if r.st.Step%r.c.SaveEvery == 0 || last {
			if err := r.checkpoint(); err != nil {
				return nil, err
			}
		}
	}
	return r.finish(false)
}

// step takes one optimizer step: Accum micro-batches forward and backward,
// then AdamW on the device.
func (r *runner) step(sched Schedule) error {
	t0 := time.Now()
	r.stepStart = t0
	defer func() { r.stepStart = time.Time{} }() // a step that fails too
	if err := r.g.ZeroGrads(); err != nil {
		return err
	}
	sum, count, tokens := 0.0, 0, 0
	for k := range r.c.Accum {
		ex := Examples(r.it.Batch(r.c.Batch))
		// The micro-batches of a step hold about as many examples (packed
		// samples) each: the step's passes are taken as Accum times this
		// one's, and Done/Total is (k + this one's fraction)/Accum.
		r.stepPasses = r.c.Accum * len(ex) * r.g.examplePasses(true)
		r.g.SetPassCut(r.pace.cut(r.stepPasses), func(done, total int) {
			p := r.report(PhaseStep)
			p.Done, p.Total = int64(k*total+done), int64(r.c.Accum*total)
			r.progress(p)
		})
		s, n, err := r.g.Backward(ex)
		if err != nil {
			return err
		}
		sum, count = sum+s, count+n
		for _, e := range ex {
			tokens += len(e.Tokens)
		}
	}
	loss := meanLoss(sum, count)
	step := r.st.Step + 1
	if count == 0 {
		return fmt.Errorf("training: step %d: the batch has no trained positions", step)
	}
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return r.diverged(fmt.Sprintf("the loss is %v at step %d", loss, step))
	}
	lr := sched.LR(r.opt.Steps)
	norm, err := r.g.Step(r.c.AdamW, r.opt.Steps+1, count, lr)
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		return r.diverged(fmt.Sprintf("the gradient norm is %v at step %d", norm, step))
	}
	if err != nil {
		return err
	}
	r.opt.Steps++
	r.st.Step = step
	r.st.Position = r.it.Position()
	r.st.Dropout = r.g.DropoutStep()
	r.st.Tokens += int64(tokens)
	r.tokens += int64(tokens)
	r.st.History = append(r.st.History, Point{Step: step, Loss: loss})
	took := time.Since(t0)
	r.st.Seconds += took.Seconds()
	r.pace.step(took)
	r.stepStart = time.Time{}
	p := r.report(PhaseTrain)
	p.Loss, p.LR, p.GradNorm = loss, lr, norm
	r.last = p
	r.progress(p)
	return nil
}

// diverged stops the run without touching the last checkpoint.
func (r *runner) diverged(what string) error {
	if r.saved == "" {
		return fmt.Errorf("training: %s: %w; no checkpoint was written yet (try a lower learning rate)", what, ErrDiverged)
	}
	return fmt.Errorf("training: %s: %w; the last good checkpoint, of step %d, is %s (resume it with a lower learning rate)", what, ErrDiverged, r.savedStep, r.saved)
}

// validate measures the mean loss over the validation sequences, in
// micro-batches of at most Batch sequences' positions.
func (r *runner) validate() error {
	if len(r.ds.Valid.Sequences) == 0 {
		return nil
	}
	t0 := time.Now()
	sum, count := 0.0, 0
	var batch []Example
	tokens := 0
	examples := Examples(r.ds.Valid.Sequences)
	// Done of Total passes, a pass a layer or the head of one example; cut
	// every as many passes as the last step was (a forward pass is no
	// longer than a recomputation and backward).
	perExample := r.g.examplePasses(false)
	total, done := int64(len(examples)*perExample), int64(0)
	r.g.SetPassCut(r.pace.cut(r.stepPasses), func(d, _ int) {
		p := r.report(PhaseValidating)
		p.Done, p.Total = done+int64(d), total
		r.progress(p)
	})
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		s, n, err := r.g.Loss(batch)
		sum, count = sum+s, count+n
		done += int64(len(batch) * perExample)
		batch, tokens = batch[:0], 0
		return err
	}
	for _, e := range examples {
		if tokens+len(e.Tokens) > r.c.Batch*r.c.SeqLen {
			if err := flush(); err != nil {
				return err
			}
		}
		batch = append(batch, e)
		tokens += len(e.Tokens)
	}
	if err := flush(); err != nil {
		return err
	}
	loss := meanLoss(sum, count)
	if count == 0 || math.IsNaN(loss) || math.IsInf(loss, 0) {
		return r.diverged(fmt.Sprintf("the validation loss is %v at step %d", loss, r.st.Step))
	}
	r.pace.valid = time.Since(t0)
	r.st.History = append(r.st.History, Point{Step: r.st.Step, Loss: loss, Valid: true})
	p := r.report(PhaseValid)
	r.last.ValidLoss, r.last.HasValid = loss, true
	p.ValidLoss, p.HasValid = loss, true
	r.progress(p)
	return nil
}

// checkpoint copies the adapter and moments from the device and writes
// them with the state.
func (r *runner) checkpoint() error {
	t0 := time.Now()
	r.progress(r.report(PhaseSaving))
	if err := r.g.Download(); err != nil {
		return err
	}
	if err := r.g.Moments(r.opt); err != nil {
		return err
	}
	if err := writeCheckpoint(r.ckPath, r.st, r.lora, r.opt); err != nil {
		return err
	}
	r.pace.saved = time.Since(t0)
	r.saved, r.savedStep = r.ckPath, r.st.Step
	r.progress(r.report(PhaseCheckpoint))
	return nil
}

// stop saves what the steps so far made, for a resume.
func (r *runner) stop() (*Result, error) {
	if r.saved == "" || r.savedStep != r.st.Step {
		if err := r.checkpoint(); err != nil {
			return nil, err
		}
	}
	return r.finish(true)
}

// finish writes the adapter.
func (r *runner) finish(stopped bool) (*Result, error) {
	if err := r.g.Download(); err != nil {
		return nil, err
	}
	if err := writeAdapter(r.c.Out, r.lora.Adapter(r.m.Config.Arch), &r.m.Config); err != nil {
		return nil, err
	}
	res := &Result{Adapter: r.c.Out, Checkpoint: r.saved, Step: r.st.Step, Steps: r.st.Steps, Stopped: stopped, History: r.st.History}
	if p, ok := lastPoint(r.st.History, false); ok {
		res.Loss = p.Loss
	}
	if p, ok := lastPoint(r.st.History, true); ok {
		res.ValidLoss, res.HasValid = p.Loss, true
	}
	p := r.report(PhaseDone)
	r.progress(p)
	return res, nil
}

// writeAdapter writes a as a GGUF LoRA when path ends in .gguf, else as a
// PEFT folder.
func writeAdapter(path string, a *adapter.Adapter, c *model.Config) error {
	if strings.EqualFold(filepath.Ext(path), ".gguf") {
		return adapter.WriteGGUF(path, a)
	}
	return adapter.WritePEFT(path, a, c)
}

// report is a Progress of the run as it stands.
func (r *runner) report(phase Phase) Progress {
	p := r.last
	p.Phase, p.Step, p.Steps, p.Checkpoint = phase, r.st.Step, r.st.Steps, r.saved
	p.Report, p.History = nil, nil
	pos := r.it.Position()
	p.Epoch = float64(pos.Epoch) + float64(pos.Index)/float64(len(r.ds.Train.Sequences))
	if r.st.Step == 0 && pos.Index == 0 {
		p.Epoch = 0
	}
	p.Elapsed = time.Duration(r.st.Seconds * float64(time.Second))
	if d := time.Since(r.start).Seconds(); d > 0 && r.tokens > 0 {
		p.TokensPerSec = float64(r.tokens) / d
	}
	p.Done, p.Total = 0, 0
	var running time.Duration
	if !r.stepStart.IsZero() {
		running = time.Since(r.stepStart)
	}
	p.ETA, _ = r.pace.eta(r.st.Steps-r.st.Step, r.after(r.c.ValidEvery), r.after(r.c.SaveEvery), running)
	p.GPUMemory = r.g.Memory()
	return p
}

// after is how many of the steps left end with an event every every steps
// and at the last step: a validation or a checkpoint.
func (r *runner) after(every int) int {
	left := r.st.Steps/every - r.st.Step/every
	if r.st.Steps%every != 0 && r.st.Step < r.st.Steps {
		left++
	}
	return left
}

// lastPoint is the last training (or, with valid, validation) point.
func lastPoint(h []Point, valid bool) (Point, bool) {
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Valid == valid {
			return h[i], true
		}
	}
	return Point{}, false
}
