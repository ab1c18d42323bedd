package training

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hearthstudio/hearth/engine/adapter"
	"github.com/hearthstudio/hearth/engine/model"
)

// answerFormat is the sample dataset the studio ships: questions answered
// as "ANSWER: word".
var answerFormat = filepath.Join("..", "assets", "datasets", "answer-format.jsonl")

// testRun is a short run of the sample dataset on a tiny model: 6
// optimizer steps of 2 sequences, a checkpoint and a validation loss every
// 2. Lavapipe runs a step of tiny-qwen2 in about a second: each step is a
// few hundred small dispatches.
func testRun(dir string) RunConfig {
	return RunConfig{
		Settings: Settings{
			LoRA: LoRAConfig{Rank: 4, Alpha: 8, Dropout: 0.1}, AdamW: DefaultAdamW, LR: 1e-2, Warmup: 1,
			Steps: 6, SeqLen: 48, Batch: 2, Accum: 1, Valid: 0.2, Seed: 3,
		},
		Data:      answerFormat,
		Out:       filepath.Join(dir, "adapter.gguf"),
		SaveEvery: 2,
	}
}

// TestRunReportsMovement: in a 2-step run every long phase reports as it
// goes, with Done advancing to Total and never past it: the dataset's
// bytes read, the model's bytes put on the device, and the first step's
// passes (a submit each: its length is unknown, and on a CPU adapter it
// takes minutes; it used to show one "putting the model on the GPU" report
// and nothing until the step ended). Sequences of 160 tokens pack several
// samples, each an example of its own passes. The ETA is unknown until
// the first step has ended, and then there is one; no step runs at rate 0.
func TestRunReportsMovement(t *testing.T) {
	dev := openDevice(t)
	m := loadSynth(t, "tiny-qwen2", "Q8_0")
	c := testRun(t.TempDir())
	c.Steps, c.SeqLen = 2, 160
	size, err := os.Stat(c.Data)
	if err != nil {
		t.Fatal(err)
	}
	var reports []Progress
	if _, err := Run(context.Background(), dev, m, c, func(p Progress) { reports = append(reports, p) }, nil); err != nil {
		t.Fatal(err)
	}
	// moving returns the reports of phase before the first of until, after
	// checking them: at least two, one Total, Done rising (strictly, with
	// strict) from at most from to Total.
	moving := func(phase, until Phase, from int64, strict bool) []Progress {
		t.Helper()
		var got []Progress
		for _, p := range reports {
			if p.Phase == until {
				break
			}
			if p.Phase == phase && (p.Phase != PhaseData || p.Report == nil) {
				got = append(got, p)
			}
		}
		if len(got) < 2 {
			t.Fatalf("%s: %d reports before %s, want movement", phase, len(got), until)
		}
		total := got[0].Total
		for i, p := range got {
			if p.Total != total || p.Done > total || i > 0 && (p.Done < got[i-1].Done || strict && p.Done == got[i-1].Done) {
				t.Errorf("%s: report %d is %d of %d after %d, want it rising to %d", phase, i, p.Done, p.Total, got[max(i-1, 0)].Done, total)
			}
		}
		if got[0].Done > from || got[len(got)-1].Done != total {
			t.Errorf("%s: from %d to %d of %d", phase, got[0].Done, got[len(got)-1].Done, total)
		}
		return got
	}
	if r := moving(PhaseData, PhaseLoad, 0, false); r[0].Total != size.Size() {
		t.Errorf("the dataset's %d bytes reported as %d", size.Size(), r[0].Total)
	}
	g, err := NewGPU(dev, m, mustLoRA(t, m, c.LoRA), c.SeqLen, c.Batch*c.SeqLen)
	if err != nil {
		t.Fatal(err)
	}
	upload, perExample := g.uploadBytes(), int64(g.examplePasses(true))
	g.Close()
	if r := moving(PhaseLoad, PhaseStep, 0, true); r[0].Total != upload {
		t.Errorf("the upload's %d bytes reported as %d", upload, r[0].Total)
	}
	if r := moving(PhaseStep, PhaseTrain, 1, true); r[0].Total%perExample != 0 || r[0].Total <= int64(c.Batch)*perExample {
		t.Errorf("a step of %d passes, want the passes of more examples than the %d sequences (%d each)", r[0].Total, c.Batch, perExample)
	}
	for _, p := range reports {
		if p.Phase == PhaseTrain {
			break
		}
		if p.ETA != 0 {
			t.Errorf("%s report %d/%d: an ETA of %v before a step was measured", p.Phase, p.Done, p.Total, p.ETA)
		}
	}
	trained := 0
	for _, p := range reports {
		if p.Phase != PhaseTrain {
			continue
		}
		trained++
		if !(p.LR > 0) {
			t.Errorf("step %d ran at rate %v", p.Step, p.LR)
		}
		if p.Step < p.Steps && p.ETA <= 0 {
			t.Errorf("step %d of %d: no ETA after a measured step", p.Step, p.Steps)
		}
	}
	if trained != 2 {
		t.Errorf("%d steps reported, want 2", trained)
	}
}

// mustLoRA is a new adapter of c for m.
func mustLoRA(t *testing.T, m *model.Model, c LoRAConfig) *LoRA {
	t.Helper()
	l, err := NewLoRA(m, c, 1)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestRunStopResumeEqualsUninterrupted: a run stopped after step 3 (the
// context ends; a checkpoint and the adapter are written) and resumed
// makes the same adapter, bit for bit, as the run that was never stopped:
// the checkpoint holds everything the steps depend on (the pairs, the
// moments, the step count, the data position, the dropout counter). The loss falls, and the
// reports come in order.
func TestRunStopResumeEqualsUninterrupted(t *testing.T) {
	dev := openDevice(t)
	m := loadSynth(t, "tiny-qwen2", "Q8_0")

	whole := testRun(t.TempDir())
	var phases []Phase
	res, err := Run(context.Background(), dev, m, whole, func(p Progress) { phases = append(phases, p.Phase) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Stopped || res.Step != 6 || !res.HasValid {
		t.Fatalf("result %+v", res)
	}
	first, _ := lastPoint(res.History[:1], false)
	t.Logf("loss %.3f → %.3f, validation %.3f", first.Loss, res.Loss, res.ValidLoss)
	if !(res.Loss < first.Loss) {
		t.Errorf("the loss went from %v to %v", first.Loss, res.Loss)
	}
	// The events in order, a phase's reports while it runs as one, and the
	// reports within steps and validations left out: how many there are
	// depends on the pace measured (pace.cut).
	var events []Phase
	for _, p := range phases {
		if p != PhaseStep && p != PhaseValidating && (len(events) == 0 || p != events[len(events)-1] || p == PhaseTrain) {
			events = append(events, p)
		}
	}
	want := []Phase{PhaseData, PhaseLoad, PhaseTrain, PhaseTrain, PhaseValid, PhaseSaving, PhaseCheckpoint}
	if !slices.Equal(events[:len(want)], want) || events[len(events)-1] != PhaseDone {
		t.Errorf("phases %v", events)
	}

	parts := testRun(t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	res, err = Run(ctx, dev, m, parts, func(p Progress) {
		if p.Phase == PhaseTrain && p.Step == 3 {
			cancel()
		}
	}, nil)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	if !res.Stopped || res.Step != 3 {
		t.Fatalf("stopped run: %+v", res)
	}
	if _, err := adapter.ReadGGUF(parts.Out); err != nil {
		t.Fatalf("the stopped run's adapter: %v", err)
	}
	parts.Resume = true
	var history []Point
	res, err = Run(context.Background(), dev, m, parts, func(p Progress) {
		if p.Phase == PhaseResumed {
			history = p.History
		}
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(history) == 0 || history[len(history)-1].Step != 3 {
		t.Errorf("the resumed run reported the history %v", history)
	}
	if res.Stopped || res.Step != 6 {
		t.Fatalf("resumed run: %+v", res)
	}
	a, b := readPairs(t, whole.Out), readPairs(t, parts.Out)
	for name, p := range a.Pairs {
		q := b.Pairs[name]
		if !slices.Equal(p.A, q.A) || !slices.Equal(p.B, q.B) {
			t.Fatalf("%s: the resumed run's adapter differs from the uninterrupted one's", name)
		}
	}
}

func readPairs(t *testing.T, path string) *adapter.Adapter {
	t.Helper()
	a, err := adapter.ReadGGUF(path)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestRunPauses: a paused run waits between steps, reports that it does,
// and goes on after Resume.
func TestRunPauses(t *testing.T) {
	dev := openDevice(t)
	m := loadSynth(t, "tiny-qwen2", "Q4_0")
	c := testRun(t.TempDir())
	c.Steps = 4
	var pause Pause
	paused := make(chan int, 1)
	go func() {
		step := <-paused
		time.Sleep(50 * time.Millisecond)
		if step != 2 {
			t.Errorf("paused at step %d", step)
		}
		pause.Resume()
	}()
	res, err := Run(context.Background(), dev, m, c, func(p Progress) {
		switch {
		case p.Phase == PhaseTrain && p.Step == 2:
			pause.Pause()
		case p.Phase == PhasePaused:
			paused <- p.Step
		}
	}, &pause)
	if err != nil {
		t.Fatal(err)
	}
	if res.Step != 4 {
		t.Fatalf("the run ended at step %d", res.Step)
	}
}

// TestRunDivergesKeepingTheCheckpoint: a learning rate of 1e30 sends the
// adapter to ±1e30 in one AdamW step, and the next loss is not a number.
// The run stops with ErrDiverged naming the last good checkpoint, which
// is still readable.
func TestRunDivergesKeepingTheCheckpoint(t *testing.T) {
	dev := openDevice(t)
	m := loadSynth(t, "tiny-qwen2", "Q8_0")
	c := testRun(t.TempDir())
	c.LR, c.Warmup, c.SaveEvery = 1e-3, 0, 1
	// The rate explodes after the first step's checkpoint.
	c.Steps = 3
	ctx := context.Background()
	if _, err := Run(ctx, dev, m, withSteps(c, 1), nil, nil); err != nil {
		t.Fatal(err)
	}
	c.Resume, c.LR = true, 1e30
	_, err := Run(ctx, dev, m, c, nil, nil)
	if !errors.Is(err, ErrDiverged) {
		t.Fatalf("got %v, want ErrDiverged", err)
	}
	t.Log(err)
	if !strings.Contains(err.Error(), c.CheckpointPath()) {
		t.Errorf("the error does not name the checkpoint: %v", err)
	}
	ck, err := ReadCheckpoint(c.CheckpointPath(), m)
	if err != nil {
		t.Fatalf("the last good checkpoint: %v", err)
	}
	if ck.State.Step < 1 {
		t.Fatalf("the checkpoint is at step %d", ck.State.Step)
	}
}

func withSteps(c RunConfig, n int) RunConfig {
	c.Steps = n
	return c
}

// TestRunRefusesBadInput: each bad input is an error that names it, before
// anything is written.
func TestRunRefusesBadInput(t *testing.T) {
	dev := openDevice(t)
	m := loadSynth(t, "tiny-qwen2", "Q8_0")
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	empty := write("empty.jsonl", "\n\n")
	broken := write("broken.jsonl", `{"text": "fine"}`+"\n"+`{"text": "no end`+"\n")
	noAssistant := write("user-only.jsonl", `{"messages": [{"role": "user", "content": "hi"}]}`+"\n")
	// A checkpoint of another run, and a corrupt one.
	other := testRun(t.TempDir())
	if _, err := Run(context.Background(), dev, m, withSteps(other, 1), nil, nil); err != nil {
		t.Fatal(err)
	}
	corrupt := write("corrupt.checkpoint", "GGUF")
	raw, err := os.ReadFile(other.CheckpointPath())
	if err != nil {
		t.Fatal(err)
	}
	truncated := write("truncated.checkpoint", string(raw[:len(raw)/2]))
	otherModel := loadSynth(t, "tiny-qwen3", "Q8_0")

	for _, c := range []struct {
		name  string
		edit  func(*RunConfig)
		m     *model.Model
		wants string
	}{
		{"empty dataset", func(c *RunConfig) { c.Data = empty }, m, "empty.jsonl: empty dataset"},
		{"malformed line", func(c *RunConfig) { c.Data = broken }, m, "broken.jsonl:2: malformed JSON"},
		{"no assistant turn", func(c *RunConfig) { c.Data = noAssistant }, m, "line 1: no assistant message"},
		{"missing dataset", func(c *RunConfig) { c.Data = filepath.Join(dir, "none.jsonl") }, m, "none.jsonl"},
		{"longer than the context", func(c *RunConfig) { c.SeqLen = m.Config.Context + 1 }, m, "context"},
		{"zero learning rate", func(c *RunConfig) { c.LR = 0 }, m, "learning rate"},
		{"no steps", func(c *RunConfig) { c.Steps, c.Epochs = 0, 0 }, m, "epochs"},
		{"existing checkpoint", func(c *RunConfig) { c.Checkpoint = other.CheckpointPath() }, m, "resume it"},
		{"resume without a checkpoint", func(c *RunConfig) { c.Resume = true }, m, "no such file"},
		{"resume with another rank", func(c *RunConfig) {
			c.Checkpoint, c.Resume, c.LoRA.Rank = other.CheckpointPath(), true, 8
		}, m, "rank 4 (now 8)"},
		{"resume onto another model", func(c *RunConfig) { c.Checkpoint, c.Resume = other.CheckpointPath(), true }, otherModel, "made on"},
		{"corrupt checkpoint", func(c *RunConfig) { c.Checkpoint, c.Resume = corrupt, true }, m, "corrupt.checkpoint"},
		{"truncated checkpoint", func(c *RunConfig) { c.Checkpoint, c.Resume = truncated, true }, m, "truncated.checkpoint"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rc := testRun(t.TempDir())
			c.edit(&rc)
			_, err := Run(context.Background(), dev, c.m, rc, nil, nil)
			if err == nil || !strings.Contains(err.Error(), c.wants) {
				t.Fatalf("got %v, want an error saying %q", err, c.wants)
			}
			if _, err := os.Stat(rc.Out); err == nil {
				t.Errorf("an adapter was written")
			}
		})
	}
}

// TestRunSurvivesKill: a run in a child process is killed (SIGKILL) at
// moments spread over its checkpoint writes; after each kill the
// checkpoint on disk is whole, and a resumed run finishes. atomicfile
// writes a checkpoint beside its name and renames it, so a kill leaves the
// old one or the new one.
func TestRunSurvivesKill(t *testing.T) {
	if os.Getenv("HEARTH_TRAIN_CHILD") != "" {
		runChild(t)
		return
	}
	dev := openDevice(t)
	m := loadSynth(t, "tiny-qwen2", "Q8_0")
	dir := t.TempDir()
	c := testRun(dir)
	c.SaveEvery, c.Steps = 1, 12
	ck := c.CheckpointPath()
	kills := 0
	for _, after := range []time.Duration{200 * time.Millisecond, 900 * time.Millisecond} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRunSurvivesKill$")
		cmd.Env = append(os.Environ(), "HEARTH_TRAIN_CHILD="+m.Path, "HEARTH_TRAIN_DIR="+dir)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		// Wait for this child's first checkpoint, then kill at a moment
		// after it: in a later step, or in the middle of a write. A step on
		// lavapipe takes seconds under load; 5 min only ends a child that
		// hangs, inside go test's timeout.
		started := time.Now()
		deadline := started.Add(5 * time.Minute)
		checkpointed := func() bool {
			fi, err := os.Stat(ck)
			return err == nil && fi.ModTime().After(started)
		}
		for !checkpointed() {
			select {
			case werr := <-exited:
				if !checkpointed() {
					t.Fatalf("the child ended before its first checkpoint: %v", werr)
				}
				exited <- werr
			default:
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				<-exited
				t.Fatalf("the child wrote no checkpoint within %v", deadline.Sub(started))
			}
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(after)
		cmd.Process.Kill()
		werr := <-exited
		if werr == nil {
			// The child finished before the kill: the run is complete.
			break
		}
		kills++
		got, err := ReadCheckpoint(ck, m)
		if err != nil {
			t.Fatalf("after a kill: %v", err)
		}
		t.Logf("killed at step %d or after", got.State.Step)
	}
	if kills == 0 {
		t.Fatal("the child finished before any kill")
	}
	c.Resume = true
	res, err := Run(context.Background(), dev, m, c, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Step != c.Steps {
		t.Fatalf("the resumed run ended at step %d", res.Step)
	}
	// A kill during a write leaves the temporary file; the resumed run
	// removes what earlier writes left.
	if left, _ := filepath.Glob(filepath.Join(dir, ".*.tmp-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// runChild is TestRunSurvivesKill's child: it runs (or resumes) the run
// until it is killed.
func runChild(t *testing.T) {
	m, err := model.Load(os.Getenv("HEARTH_TRAIN_CHILD"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c := testRun(os.Getenv("HEARTH_TRAIN_DIR"))
	c.SaveEvery, c.Steps = 1, 12
	if _, err := os.Stat(c.CheckpointPath()); err == nil {
		c.Resume = true
	}
	if _, err := Run(context.Background(), openDevice(t), m, c, nil, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		t.Fatal(err)
	}
}
