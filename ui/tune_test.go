package ui

import (
	"errors"
	"fmt"
	"image"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/storage"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/hearthstudio/hearth/app"
)

// answerFormat is the sample dataset the studio ships.
var answerFormat, _ = filepath.Abs(filepath.Join("..", "assets", "datasets", "answer-format.jsonl"))

// tuneStudio is a test studio whose engine runs on the GPU (lavapipe
// under make test: training refuses the CPU backend), with a library of
// one tiny Qwen 2 and the Tune tab showing. Its background work reports
// to a serial UI loop, as in the Models tab's tests.
func tuneStudio(t *testing.T) (*studio, *tuneView, fyne.Window, *uiLoop) {
	t.Helper()
	dir := t.TempDir()
	writeModel(t, filepath.Join(dir, "tiny-qwen2.gguf"), "tiny-qwen2")
	l := newUILoop(t)
	st, w := newTestStudioWith(t, func(st *studio) {
		st.post = l.do
		st.settings.Backend = "gpu"
		st.settings.Folders = []string{dir}
	}, l.wait)
	l.wait(func() {
		w.Resize(fyne.NewSize(1100, 720))
		st.tabs.Select(st.tuneTab)
	})
	eventually(t, l, "the first scan", func() bool { return st.scanned })
	return st, st.tune, w, l
}

// tinyRun fills the form for a short run of the sample dataset: a
// rank-2 adapter, sequences of 32 tokens one at a time, at a high rate so
// the loss visibly falls; epochs sets its length (0.2 is 5 steps, which
// lavapipe takes in about a second).
func tinyRun(tv *tuneView, epochs string) {
	tv.model.SetSelected("tiny-qwen2")
	tv.setData(answerFormat)
	a := tv.adv
	for e, v := range map[*widget.Entry]string{
		a.rank: "2", a.alpha: "4", a.lr: "0.01", a.epochs: epochs, a.seqLen: "32", a.batch: "1", a.accum: "1", a.valid: "20%",
	} {
		e.SetText(v)
	}
}

// waitRunEnd waits for the tab's run to end; the run trains on the GPU, so
// it gets gpuWait.
func waitRunEnd(t *testing.T, l *uiLoop, tv *tuneView) {
	t.Helper()
	eventuallyWithin(t, l, gpuWait, "the run to end", func() bool { return tv.run == nil })
}

func TestTunePresetsFillTheAdvancedFields(t *testing.T) {
	st, tv, _, l := tuneStudio(t)
	l.wait(func() {
		text := shown(st.tuneTab.Content)
		for _, want := range []string{"Fine-tune", "Base model", "Dataset", "Preset", "No run yet", app.TrainPresets()[0].About} {
			if !strings.Contains(text, want) {
				t.Errorf("the Tune tab does not show %q:\n%s", want, text)
			}
		}
		if len(tv.model.Options) != 1 || tv.model.Options[0] != "tiny-qwen2" {
			t.Errorf("models offered: %v, want the library's tiny-qwen2", tv.model.Options)
		}
		if tv.preset.Selected != "balanced" || tv.adv.rank.Text != "16" || tv.adv.valid.Text != "5%" {
			t.Errorf("preset %q, rank %q, validation %q; want balanced's 16 and the default 5%%", tv.preset.Selected, tv.adv.rank.Text, tv.adv.valid.Text)
		}
		if !tv.start.Disabled() && !tv.stop.Disabled() {
			t.Error("Stop is enabled with no run")
		}
		for _, p := range app.TrainPresets() {
			tv.preset.SetSelected(p.Name)
			s, err := tv.adv.value(app.TrainSettings{})
			if err != nil {
				t.Fatalf("%s: %v", p.Name, err)
			}
			want := p.Settings
			if s.LoRA.Rank != want.LoRA.Rank || s.LoRA.Alpha != want.LoRA.Alpha || s.LR != want.LR || s.Epochs != want.Epochs ||
				s.SeqLen != want.SeqLen || s.Batch != want.Batch || s.Accum != want.Accum || s.Valid != 0.05 {
				t.Errorf("%s fills %+v, want %+v", p.Name, s, want)
			}
			if tv.about.Text != p.About {
				t.Errorf("%s: about %q", p.Name, tv.about.Text)
			}
		}
		// A value that does not parse is named, and nothing starts.
		tv.adv.rank.SetText("lots")
		tv.model.SetSelected("tiny-qwen2")
		tv.setData(answerFormat)
		tv.startTapped()
		if tv.run != nil || !strings.Contains(tv.notice.Text, `rank: "lots"`) {
			t.Errorf("a bad rank: run %v, notice %q", tv.run, tv.notice.Text)
		}
		// The default adapter name is the dataset's and the model's.
		if tv.outName.Text != "answer-format-tiny-qwen2.gguf" || tv.outPath() != filepath.Join(st.dir, "adapters", "answer-format-tiny-qwen2.gguf") {
			t.Errorf("the adapter goes to %q (%s)", tv.outName.Text, tv.outPath())
		}
	})
}

// A real run on the engine: the plot gets every step's loss and the
// validation's, the numbers and the dataset's report show, the adapter is
// written, the choices are saved, and "Chat with this adapter" opens a
// chat whose replies use it.
func TestTuneRunsAndChatsWithTheAdapter(t *testing.T) {
	st, tv, _, l := tuneStudio(t)
	l.wait(func() {
		tinyRun(tv, "0.2")
		tv.startTapped()
	})
	eventually(t, l, "the run to start", func() bool { return tv.run != nil })
	waitRunEnd(t, l, tv)
	var out string
	l.wait(func() {
		out = tv.outPath()
		train, valid := tv.plot.Len()
		if tv.last == nil || tv.last.adapter != out {
			t.Fatalf("the run ended without an adapter: %s / %s", tv.headline.Text, tv.notice.Text)
		}
		if !strings.HasPrefix(tv.headline.Text, "Done: ") || train == 0 || valid == 0 {
			t.Errorf("headline %q; the plot has %d training and %d validation points", tv.headline.Text, train, valid)
		}
		if want := tv.headline.Text[len("Done: "):]; want != plural(train, "step") {
			t.Errorf("the plot has %d training points after %q", train, tv.headline.Text)
		}
		if s, want := tv.stats["Step"].Text, fmt.Sprintf("%d / %d", train, train); s != want {
			t.Errorf("step shows %q, want %q", s, want)
		}
		for _, name := range []string{"Loss", "Validation loss", "Learning rate", "Tokens/s", "GPU memory"} {
			if tv.stats[name].Text == "–" {
				t.Errorf("%s shows nothing", name)
			}
		}
		if !strings.Contains(tv.report.Text, "samples from 30 lines") || !strings.Contains(tv.report.Text, "Truncated") {
			t.Errorf("the dataset's report: %q", tv.report.Text)
		}
		if !strings.Contains(tv.fullReport, "answer-format.jsonl: ") || !strings.Contains(tv.fullReport, "validation: ") {
			t.Errorf("the report's details: %q", tv.fullReport)
		}
		if tv.chatWith.Hidden || tv.start.Disabled() {
			t.Errorf("after the run: chat button hidden %v, Start disabled %v", tv.chatWith.Hidden, tv.start.Disabled())
		}
	})
	if _, err := os.Stat(out); err != nil {
		t.Fatalf("the adapter: %v", err)
	}
	saved := savedSettings(t, st).Tune
	if saved.Model != "tiny-qwen2" || saved.Data != answerFormat || saved.Rank != 2 || saved.Epochs != 0.2 || saved.Valid != 0.2 {
		t.Errorf("saved choices %+v", saved)
	}

	// The tab shows the last run of the chosen adapter again, from its
	// checkpoint, as after a restart.
	l.wait(func() {
		tv.plot.Set(nil, 0)
		tv.last = nil
		tv.lookForRun()
	})
	eventually(t, l, "the last run's curve", func() bool {
		train, _ := tv.plot.Len()
		return train > 0 && strings.HasPrefix(tv.headline.Text, "Last run: done") && tv.last != nil
	})

	// Chat with it: a new chat with the adapter, the base model loaded.
	cv := st.chat
	l.wait(func() {
		st.settings.Sampling.Temperature = 0
		st.settings.Sampling.MaxTokens = 8
		test.Tap(tv.chatWith)
		if st.tabs.SelectedIndex() != 0 || cv.cur.Adapter == nil || cv.cur.Adapter.Path != out || cv.cur.Adapter.Scale != 1 {
			t.Fatalf("after Chat with this adapter: tab %d, adapter %+v", st.tabs.SelectedIndex(), cv.cur.Adapter)
		}
		if cv.adapterName.Text != filepath.Base(out) || cv.adapterScale.Hidden {
			t.Errorf("the adapter control shows %q", cv.adapterName.Text)
		}
	})
	eventuallyWithin(t, l, gpuWait, "the base model loaded", func() bool {
		m := st.engine.Status().Model
		return m != nil && m.Name == "tiny-qwen2" && st.loading == ""
	})
	l.wait(func() {
		cv.input.SetText("What colour is the sky?")
		cv.input.TypedKey(&fyne.KeyEvent{Name: fyne.KeyReturn})
	})
	eventuallyWithin(t, l, gpuWait, "the reply", func() bool { return cv.gen == nil })
	l.wait(func() {
		r := cv.cur.Messages[len(cv.cur.Messages)-1].Reply
		if r.Stop == "error" || r.Tokens == 0 {
			t.Errorf("the reply with the adapter: %+v", r)
		}
	})
}

// Stop ends a run at a step with a checkpoint and the adapter; chat is
// refused with a clear message meanwhile; Start then offers to resume,
// and Start over asks before the checkpoint is deleted.
// TestTuneShowsMovementWithinAStep: the reports of a run's long phases
// move the headline and the bar: the upload's bytes, and a step's passes
// as a fraction of the bar (it used to sit at "Putting … on the GPU…" and
// 0% until the first step ended); the ETA is the measured one, formatted
// as `hearth train` formats it.
func TestTuneShowsMovementWithinAStep(t *testing.T) {
	_, tv, _, l := tuneStudio(t)
	l.wait(func() {
		r := &tuneRun{model: "tiny-qwen2", pause: &app.TrainPause{}}
		tv.showProgress(r, app.TrainProgress{Phase: app.TrainPhaseLoad, Steps: 2, Done: 30, Total: 120})
		if h := tv.headline.Text; h != "Putting tiny-qwen2 on the GPU… 25%" {
			t.Errorf("uploading: %q", h)
		}
		tv.showProgress(r, app.TrainProgress{Phase: app.TrainPhaseStep, Steps: 2, Done: 11, Total: 44})
		if h := tv.headline.Text; !strings.HasPrefix(h, "Step 1 of 2… 25%") {
			t.Errorf("in the first step: %q", h)
		}
		if v := tv.progress.Value / tv.progress.Max; v != 0.125 {
			t.Errorf("a quarter into step 1 of 2 the bar is at %v, want 0.125", v)
		}
		if e := tv.stats["ETA"].Text; e != "–" {
			t.Errorf("an ETA of %q before a step was measured", e)
		}
		eta := 95 * time.Second
		tv.showProgress(r, app.TrainProgress{Phase: app.TrainPhaseStep, Step: 1, Steps: 2, Done: 22, Total: 44, ETA: eta})
		if v := tv.progress.Value / tv.progress.Max; v != 0.75 {
			t.Errorf("half into step 2 of 2 the bar is at %v, want 0.75", v)
		}
		if e := tv.stats["ETA"].Text; e != app.FormatETA(eta) {
			t.Errorf("ETA %q, want %q", e, app.FormatETA(eta))
		}
	})
}

func TestTuneStopOffersResume(t *testing.T) {
	st, tv, w, l := tuneStudio(t)
	l.wait(func() {
		tinyRun(tv, "4")
		tv.startTapped()
	})
	eventuallyWithin(t, l, gpuWait, "two steps", func() bool { n, _ := tv.plot.Len(); return n >= 2 })

	// Pause holds the run between steps; Resume lets it go on.
	l.wait(func() { test.Tap(tv.pause) })
	eventuallyWithin(t, l, gpuWait, "the pause", func() bool { return strings.HasPrefix(tv.headline.Text, "Paused at step") })
	var paused int
	l.wait(func() {
		paused, _ = tv.plot.Len()
		if tv.pause.Text != "Resume" || tv.stop.Disabled() {
			t.Errorf("while paused: the button says %q, Stop disabled %v", tv.pause.Text, tv.stop.Disabled())
		}
	})
	time.Sleep(300 * time.Millisecond)
	l.wait(func() {
		if n, _ := tv.plot.Len(); n != paused {
			t.Errorf("a paused run went from step %d to %d", paused, n)
		}
		test.Tap(tv.pause)
	})
	eventuallyWithin(t, l, gpuWait, "a step after Resume", func() bool { n, _ := tv.plot.Len(); return n > paused })

	// Meanwhile the Chat tab explains why it cannot answer.
	cv := st.chat
	l.wait(func() {
		cv.input.SetText("Hello?")
		cv.input.TypedKey(&fyne.KeyEvent{Name: fyne.KeyReturn})
	})
	eventually(t, l, "the chat's refusal", func() bool { return cv.gen == nil && len(cv.notice.Objects) > 0 })
	l.wait(func() {
		if text := shown(cv.notice); !strings.Contains(text, "The GPU is fine-tuning tiny-qwen2") {
			t.Errorf("the chat says %q", text)
		}
		if !strings.Contains(st.status.Text, "fine-tuning tiny-qwen2") {
			t.Errorf("the status bar says %q", st.status.Text)
		}
		st.tabs.SelectIndex(3)
		if choose := find[*widget.Select](modelsTab(st), nil); choose == nil || !choose.Disabled() {
			t.Errorf("the Models tab's adapter choice (%v) is enabled while a run holds the device", choose)
		}
		st.tabs.Select(st.tuneTab)
		test.Tap(tv.stop)
		if !tv.stop.Disabled() {
			t.Error("Stop stays enabled while the run stops")
		}
	})
	waitRunEnd(t, l, tv)
	var ck string
	var stopped int
	l.wait(func() {
		ck = app.TrainConfig{Out: tv.outPath()}.CheckpointPath()
		stopped, _ = tv.plot.Len()
		if !strings.HasPrefix(tv.headline.Text, "Stopped at step") || tv.last == nil {
			t.Errorf("after Stop: %q, %q", tv.headline.Text, tv.notice.Text)
		}
	})
	state, err := app.ReadTrainState(ck)
	if err != nil || state.Step != stopped || state.Step >= state.Steps {
		t.Fatalf("the checkpoint: step %d of %d, %v; the plot has %d steps", state.Step, state.Steps, err, stopped)
	}

	// Start offers to resume; Start over asks first, and keeping the
	// checkpoint changes nothing.
	l.wait(tv.startTapped)
	eventually(t, l, "the resume offer", func() bool { return tv.offer != nil })
	l.wait(func() {
		want := fmt.Sprintf("stopped at step %d of %d", state.Step, state.Steps)
		if text := dialogs(w); !strings.Contains(text, want) || !strings.Contains(text, ck) {
			t.Errorf("the offer says:\n%s", text)
		}
		test.Tap(tv.offerButtons["Start over"])
		if tv.offer == nil || tv.offerButtons["Keep it"] == nil || !strings.Contains(dialogs(w), "Delete the checkpoint") {
			t.Fatalf("Start over did not ask first:\n%s", dialogs(w))
		}
		test.Tap(tv.offerButtons["Keep it"])
		if tv.run != nil {
			t.Error("a run started after Keep it")
		}
	})
	if _, err := os.Stat(ck); err != nil {
		t.Fatalf("the checkpoint after Keep it: %v", err)
	}

	// Resume: the plot starts from the checkpoint's losses.
	l.wait(tv.startTapped)
	eventually(t, l, "the resume offer", func() bool { return tv.offer != nil })
	l.wait(func() { test.Tap(tv.offerButtons["Resume"]) })
	eventuallyWithin(t, l, gpuWait, "the resumed run's next step", func() bool { n, _ := tv.plot.Len(); return n > stopped })
	l.wait(func() { test.Tap(tv.stop) })
	waitRunEnd(t, l, tv)
	if again, err := app.ReadTrainState(ck); err != nil || again.Step <= state.Step || again.Steps != state.Steps {
		t.Errorf("after the resumed run: step %d of %d (%v), was %d of %d", again.Step, again.Steps, err, state.Step, state.Steps)
	}
}

// A dataset with a broken line stops the run with the file and the line
// named in the tab.
func TestTuneBadDatasetIsShown(t *testing.T) {
	_, tv, _, l := tuneStudio(t)
	bad := filepath.Join(t.TempDir(), "broken.jsonl")
	good, _ := os.ReadFile(answerFormat)
	lines := strings.SplitAfter(string(good), "\n")
	os.WriteFile(bad, []byte(lines[0]+lines[1]+"{\"messages\": [oops\n"+lines[2]), 0o644)
	l.wait(func() {
		tinyRun(tv, "0.2")
		tv.setData(bad)
		tv.startTapped()
	})
	eventually(t, l, "the run to start", func() bool { return tv.run != nil })
	waitRunEnd(t, l, tv)
	l.wait(func() {
		if !tv.notice.Visible() || !strings.Contains(tv.notice.Text, "broken.jsonl:3:") || !strings.Contains(tv.notice.Text, "dataset") {
			t.Errorf("the notice: %q", tv.notice.Text)
		}
		if tv.headline.Text != "The run failed" || tv.last != nil || !tv.chatWith.Hidden {
			t.Errorf("headline %q, last %v", tv.headline.Text, tv.last)
		}
	})
}

// A dataset dropped on the window goes to the Tune tab; a model dropped
// while the Tune tab shows becomes its base model and is not loaded.
func TestTuneDrops(t *testing.T) {
	st, tv, _, l := tuneStudio(t)
	other := filepath.Join(t.TempDir(), "tiny-llama.gguf")
	writeModel(t, other, "tiny-llama")
	notes := filepath.Join(t.TempDir(), "notes.txt")
	os.WriteFile(notes, []byte("Plain text to train on.\n"), 0o644)
	l.wait(func() {
		st.tabs.SelectIndex(0)
		st.dropped([]fyne.URI{storage.NewFileURI(notes)})
		if tv.data != notes || st.tabs.Selected() != st.tuneTab || tv.dataName.Text != "notes.txt" {
			t.Errorf("after the drop: dataset %q, tab %q", tv.data, st.tabs.Selected().Text)
		}
		st.dropped([]fyne.URI{storage.NewFileURI(other)})
	})
	eventually(t, l, "the dropped model chosen", func() bool { return tv.model.Selected == "tiny-llama" })
	l.wait(func() {
		if st.engine.Status().Model != nil || st.loading != "" {
			t.Error("a model dropped on the Tune tab was loaded")
		}
		if tv.outName.Text != "notes-tiny-llama.gguf" {
			t.Errorf("the adapter's name %q", tv.outName.Text)
		}
	})
}

// Ten thousand steps: the plot reduces them to a column per pixel that
// keeps every spike, and its objects do not grow with the points.
func TestLossPlotDownsamples(t *testing.T) {
	pts := make([]app.TrainPoint, 10000)
	for i := range pts {
		pts[i] = app.TrainPoint{Step: i + 1, Loss: 3 + math.Sin(float64(i)/50)}
	}
	pts[5000].Loss = 9 // a spike
	cols := downsample(pts, 0, 10000, 400)
	if len(cols) > 400 || len(cols) < 390 {
		t.Fatalf("%d columns for 400 pixels", len(cols))
	}
	hi, lo := 0.0, math.Inf(1)
	for i, c := range cols {
		if i > 0 && c.x <= cols[i-1].x {
			t.Fatalf("column %d at x %d after %d", i, c.x, cols[i-1].x)
		}
		hi, lo = max(hi, c.max), min(lo, c.min)
	}
	want := math.Inf(1)
	for _, p := range pts {
		want = min(want, p.Loss)
	}
	if hi != 9 || lo != want {
		t.Errorf("the columns span %v..%v, want the minimum %v and the spike 9", lo, hi, want)
	}

	test.NewTempApp(t)
	p := newLossPlot()
	w := test.NewWindow(p)
	defer w.Close()
	w.Resize(fyne.NewSize(500, 300))
	p.Set(pts[:10], 10000)
	few := len(test.WidgetRenderer(p).Objects())
	p.Add(pts[10:], 10000)
	p.Add([]app.TrainPoint{{Step: 5000, Loss: 4, Valid: true}, {Step: 10000, Loss: 3.5, Valid: true}}, 10000)
	if n := len(test.WidgetRenderer(p).Objects()); n != few {
		t.Errorf("%d objects with 10 points, %d with 10 000", few, n)
	}
	r := test.WidgetRenderer(p).(*lossPlotRenderer)
	start := time.Now()
	img := r.draw(800, 400)
	t.Logf("drawing 10 000 steps at 800×400 px took %s", time.Since(start))
	train, valid := colourPixels(img, r.trainColor()), colourPixels(img, r.validColor())
	if train < 800 || valid < 20 {
		t.Errorf("the image has %d pixels of the training colour and %d of the validation's", train, valid)
	}
	if r.yTicks[0].Hidden || r.xTicks[0].Hidden || r.empty.Visible() {
		t.Error("the axes have no ticks, or the empty text shows")
	}
	if got := r.xTicks[len(r.xs)-1].Text; got != "1e+04" && got != "10000" {
		t.Errorf("the last step tick is %q", got)
	}
}

// colourPixels counts the pixels of img painted in c at full coverage.
func colourPixels(img image.Image, c interface{ RGBA() (r, g, b, a uint32) }) int {
	r0, g0, b0, _ := c.RGBA()
	n := 0
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			r, g, b, a := img.At(x, y).RGBA()
			if a == 0xffff && r>>8 == r0>>8 && g>>8 == g0>>8 && b>>8 == b0>>8 {
				n++
			}
		}
	}
	return n
}

func TestNiceTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		whole  bool
		want   string
	}{
		{0, 10000, true, "0 2000 4000 6000 8000 10000"},
		{0, 3, true, "0 1 2 3"},
		{4.61, 7.2, false, "5 6 7"}, {4.61, 6.2, false, "5 5.5 6"},
		{0.012, 0.031, false, "0.015 0.02 0.025 0.03"},
	} {
		var got []string
		for _, v := range niceTicks(c.lo, c.hi, maxTicks, c.whole) {
			got = append(got, formatNum(v))
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("niceTicks(%v, %v) = %v, want %s", c.lo, c.hi, got, c.want)
		}
	}
}

func TestValidEvery(t *testing.T) {
	s := app.TrainPresets()[0].Settings // batch 4, accumulation 1, 5% held out
	for _, c := range []struct{ lines, valid, want int }{
		{30, 0, 5}, {2000, 0, 50}, {400, 0, 17}, {400, -1, 0},
	} {
		s.Valid = map[int]float64{0: 0, -1: -1}[c.valid]
		if got := validEvery(c.lines, s); got != c.want {
			t.Errorf("validEvery(%d lines, valid %v) = %d, want %d", c.lines, s.Valid, got, c.want)
		}
	}
}

func TestTrainFailureTexts(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w tiny-qwen2; requests are taken again when the run ends or is stopped", app.ErrTraining), "Another fine-tuning run holds the GPU"},
		{fmt.Errorf("training: the loss is NaN at step 7: %w; the last good checkpoint, of step 6, is /a/b.checkpoint (resume it with a lower learning rate)", app.ErrDiverged),
			"The training diverged (a loss or gradient stopped being a number): training: the loss is NaN at step 7"},
		{&app.DatasetLineError{Path: "chats.jsonl", Line: 12, Err: errors.New("malformed JSON")}, "The dataset has a problem: chats.jsonl:12: malformed JSON."},
		{errors.New("disk full"), "The run failed: disk full"},
	} {
		if got := trainFailure(c.err); !strings.Contains(got, c.want) {
			t.Errorf("trainFailure(%v) = %q, want it to say %q", c.err, got, c.want)
		}
	}
	if got := trainFailure(fmt.Errorf("x: %w", app.ErrDiverged)); !strings.Contains(got, "x: training diverged") {
		t.Errorf("the divergence's own message is lost: %q", got)
	}
}

// Until a base model is chosen, the Tune tab offers the loaded one; a
// choice of the last session stays.
func TestTuneOffersTheLoadedModel(t *testing.T) {
	for _, c := range []struct{ saved, want string }{{"", "tiny-qwen3"}, {"tiny-llama", "tiny-llama"}} {
		dir := modelFolder(t)
		l := newUILoop(t)
		st, _ := newTestStudioWith(t, func(st *studio) {
			st.post = l.do
			st.settings.Folders = []string{dir}
			st.settings.LastModel = "tiny-qwen3"
			st.settings.Tune.Model = c.saved
		}, l.wait)
		eventually(t, l, "tiny-qwen3 loaded", func() bool {
			m := st.engine.Status().Model
			return m != nil && m.Name == "tiny-qwen3" && st.loading == ""
		})
		l.wait(func() {
			if tv := st.tune; tv.model.Selected != c.want || tv.modelName != c.want {
				t.Errorf("saved %q: the Tune tab chose %q (%q), want %q", c.saved, tv.model.Selected, tv.modelName, c.want)
			}
		})
	}
}

// Why Start did nothing shows under the buttons, not across the window.
func TestTuneNoticeIsUnderStart(t *testing.T) {
	_, tv, _, l := tuneStudio(t)
	l.wait(func() {
		tv.startTapped() // no dataset chosen
		if !tv.notice.Visible() || tv.notice.Text == "" {
			t.Fatalf("Start without a dataset showed no notice")
		}
		d := fyne.CurrentApp().Driver()
		start, notice := d.AbsolutePositionForObject(tv.start), d.AbsolutePositionForObject(tv.notice)
		// Within the column and right under the buttons: below Start by
		// at most a button's height and two paddings.
		below := notice.Y - (start.Y + tv.start.Size().Height)
		if notice.X > start.X+tv.start.Size().Width || below < 0 || below > tv.start.Size().Height+2*theme.Padding() {
			t.Errorf("the notice is at %v, Start at %v (%v): not under it", notice, start, tv.start.Size())
		}
	})
}
