package ui

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/app/settings"
)

// tuneInterval is the shortest time between two updates of the Tune tab
// during a run: a tiny model takes several steps a second, a large one's
// reports come with its checkpoints too, and ten updates a second already
// read as live.
const tuneInterval = 100 * time.Millisecond

// datasetExts are the files the Tune tab takes as datasets: JSONL and
// plain text, as training/data reads them.
var datasetExts = []string{".jsonl", ".txt"}

func isDataset(path string) bool {
	ext := strings.ToLower(filepath.Ext(path))
	for _, e := range datasetExts {
		if ext == e {
			return true
		}
	}
	return false
}

// tunePanel is the Tune tab: a LoRA fine-tune of a library model on a
// dataset, its settings on the left, the run's loss and numbers on the
// right.
func tunePanel(st *studio) fyne.CanvasObject {
	tv := newTuneView(st)
	st.tune = tv
	// Quitting mid-run stops the run, which writes a checkpoint and the
	// adapter, before the engine closes.
	st.onClose(tv.close)
	return tv
}

// tuneView is the Tune tab's state and widgets; all of it belongs to the UI
// goroutine but a run's reports (tuneRun).
type tuneView struct {
	widget.BaseWidget
	st *studio

	// The choices.
	model      *widget.Select
	modelName  string // the chosen model, kept while a scan has not listed it yet
	data       string // the dataset's path
	dataName   *widget.Label
	report     *hintLabel // the dataset's report, after a run read it
	reportRow  fyne.CanvasObject
	fullReport string // as hearth train prints it
	outDir     string
	outName    *widget.Entry
	outFolder  *hintLabel
	setting    bool // the code, not the user, is changing outName
	preset     *widget.Select
	about      *hintLabel
	adv        *advancedForm
	// chooseData and chooseFolder open their dialogs; like the choices,
	// they wait while a run goes on.
	chooseData, chooseFolder *widget.Button

	// The run.
	start, pause, stop *widget.Button
	chatWith           *widget.Button
	headline           *widget.Label
	progress           *widget.ProgressBar
	plot               *lossPlot
	stats              map[string]*widget.Label
	notice             *widget.Label

	run  *tuneRun     // the run going on, nil when none
	last *tunedResult // the adapter of the last run, for "Chat with this adapter"
	// lookGen counts lookups of the output's checkpoint; a newer one wins.
	// looking is set while one is under way (the screenshots wait for it).
	lookGen int
	looking bool
	// offer is the dialog on screen that asks what to do with a checkpoint
	// (resume, start over, or confirm the deletion); tests press its
	// buttons.
	offer        *dialog.CustomDialog
	offerButtons map[string]*widget.Button

	// left and right hold the rows that show and hide (the report, the
	// notice, the chat button): they are laid out again when one does.
	left    *container.Scroll
	right   *fyne.Container
	content fyne.CanvasObject
}

// tunedResult is an adapter a run wrote, and its base model.
type tunedResult struct {
	model, adapter string
}

// statNames are the run's numbers, in the order they show.
var statNames = []string{"Step", "Epoch", "Loss", "Validation loss", "Learning rate", "Tokens/s", "ETA", "GPU memory"}

func newTuneView(st *studio) *tuneView {
	tv := &tuneView{st: st, stats: map[string]*widget.Label{}, offerButtons: map[string]*widget.Button{}}
	tv.ExtendBaseWidget(tv)
	tv.build()
	tv.restore(st.settings.Tune)
	st.onLibrary(tv.libraryChanged)
	tv.libraryChanged()
	tv.lookForRun()
	return tv
}

func (tv *tuneView) CreateRenderer() fyne.WidgetRenderer {
	return widget.NewSimpleRenderer(tv.content)
}

func (tv *tuneView) build() {
	heading := headingLabel("Fine-tune")
	intro := introLabel("Train a LoRA adapter on your own examples. Drop a .gguf model or a .jsonl/.txt dataset here.")

	tv.model = widget.NewSelect(nil, func(name string) {
		if name != "" && name != tv.modelName {
			tv.modelName = name
			tv.choicesChanged()
		}
	})
	tv.model.PlaceHolder = "Choose a model from the library"

	tv.dataName = widget.NewLabel("No dataset chosen")
	tv.dataName.Truncation = fyne.TextTruncateEllipsis
	tv.chooseData = widget.NewButtonWithIcon("Choose…", theme.FolderOpenIcon(), tv.pickData)
	// The report is a few lines, wrapped to the column's width; Details
	// shows it whole, with every line it skipped or cut.
	tv.report = newHintLabel("")
	tv.report.Wrapping = fyne.TextWrapWord
	details := widget.NewButton("Details", func() {
		if tv.fullReport != "" {
			text := widget.NewLabel(tv.fullReport)
			text.Wrapping = fyne.TextWrapWord
			d := dialog.NewCustom("The dataset", "Close", container.NewVScroll(text), tv.st.win)
			d.Resize(fyne.NewSize(720, 420))
			d.Show()
		}
	})
	details.Importance = widget.LowImportance
	tv.reportRow = formRow("", container.NewBorder(nil, nil, nil, container.NewVBox(details), tv.report))
	tv.reportRow.Hide()

	tv.outName = widget.NewEntry()
	tv.outName.SetPlaceHolder("<dataset>-<model>.gguf")
	tv.outName.OnChanged = func(string) {
		if !tv.setting {
			tv.st.settings.Tune.Out = strings.TrimSpace(tv.outName.Text)
			tv.lookForRun()
		}
	}
	tv.outFolder = newHintLabel("")
	tv.outFolder.Truncation = fyne.TextTruncateEllipsis
	tv.chooseFolder = widget.NewButtonWithIcon("Folder…", theme.FolderIcon(), tv.pickFolder)

	var names []string
	for _, p := range app.TrainPresets() {
		names = append(names, p.Name)
	}
	tv.about = newHintLabel("")
	tv.about.Wrapping = fyne.TextWrapWord
	tv.adv = newAdvancedForm()
	tv.preset = widget.NewSelect(names, tv.pickPreset)

	form := container.NewVBox(
		formRow("Base model", tv.model),
		formRow("Dataset", container.NewBorder(nil, nil, nil, tv.chooseData, tv.dataName)),
		tv.reportRow,
		// The name has the column's width; the folder button goes with
		// the folder it changes.
		formRow("Adapter", tv.outName),
		formRow("", container.NewBorder(nil, nil, nil, tv.chooseFolder, tv.outFolder)),
		formRow("Preset", tv.preset),
		formRow("", tv.about),
	)
	advanced := widget.NewAccordion(widget.NewAccordionItem("Advanced", widget.NewForm(tv.adv.items()...)))

	tv.start = widget.NewButtonWithIcon("Start", theme.MediaPlayIcon(), tv.startTapped)
	tv.start.Importance = widget.HighImportance
	tv.pause = widget.NewButtonWithIcon("Pause", theme.MediaPauseIcon(), tv.pauseTapped)
	tv.stop = widget.NewButtonWithIcon("Stop", theme.MediaStopIcon(), tv.stopTapped)
	buttons := container.NewGridWithColumns(3, tv.start, tv.pause, tv.stop)
	// The notice says why Start did nothing, or how the run ended: under
	// the buttons, where the eye is when it shows.
	tv.notice = widget.NewLabel("")
	tv.notice.Wrapping = fyne.TextWrapWord
	tv.notice.Hide()
	tv.left = scrollColumn(container.NewVBox(heading, intro, form, advanced, buttons, tv.notice))

	tv.headline = widget.NewLabelWithStyle("No run yet", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	tv.headline.Truncation = fyne.TextTruncateEllipsis
	tv.progress = widget.NewProgressBar()
	tv.plot = newLossPlot()
	grid := container.NewGridWithColumns(4)
	for _, name := range statNames {
		caption := newHintLabel(name)
		value := widget.NewLabelWithStyle("–", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
		tv.stats[name] = value
		grid.Add(container.NewVBox(caption, value))
	}
	tv.chatWith = widget.NewButtonWithIcon("Chat with this adapter", theme.MailComposeIcon(), tv.chatWithAdapter)
	tv.chatWith.Importance = widget.HighImportance
	tv.chatWith.Hide()
	top := container.NewVBox(tv.headline, tv.progress)
	bottom := container.NewVBox(grid, container.NewHBox(tv.chatWith))
	tv.right = container.NewBorder(top, bottom, nil, nil, tv.plot)

	split := container.NewHSplit(container.NewPadded(tv.left), container.NewPadded(tv.right))
	split.Offset = 0.42
	tv.content = split
	tv.updateControls()
}

// formRow is a control with its name on its left, in a column of one
// width for every row. A widget.Form would do, but it gives a wrapped
// label (the dataset's report) the height of one line.
func formRow(name string, obj fyne.CanvasObject) fyne.CanvasObject {
	label := widget.NewLabelWithStyle(name, fyne.TextAlignTrailing, fyne.TextStyle{Bold: true})
	return container.NewBorder(nil, nil, container.New(fixedWidth(100), label), nil, obj)
}

// fixedWidth lays out one object at least this wide.
type fixedWidth float32

func (f fixedWidth) MinSize(objs []fyne.CanvasObject) fyne.Size {
	m := objs[0].MinSize()
	return fyne.NewSize(max(float32(f), m.Width), m.Height)
}

func (f fixedWidth) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	objs[0].Move(fyne.NewPos(0, 0))
	objs[0].Resize(size)
}

// restore shows the choices of the last session.
func (tv *tuneView) restore(s settings.Tune) {
	tv.modelName = s.Model
	tv.data = s.Data
	tv.outDir = s.OutDir
	preset, ok := app.TrainPresetByName(s.Preset)
	if !ok {
		preset = app.TrainPresets()[0]
	}
	tv.preset.OnChanged = nil
	tv.preset.SetSelected(preset.Name)
	tv.preset.OnChanged = tv.pickPreset
	tv.about.SetText(preset.About)
	tv.adv.set(preset.Settings)
	tv.adv.setSaved(s)
	tv.showChoices()
}

// showChoices shows the dataset and the output as they are now.
func (tv *tuneView) showChoices() {
	if tv.data == "" {
		tv.dataName.SetText("No dataset chosen")
	} else {
		tv.dataName.SetText(filepath.Base(tv.data))
	}
	tv.setting = true
	if name := tv.st.settings.Tune.Out; name != "" {
		tv.outName.SetText(name)
	} else {
		tv.outName.SetText(tv.defaultName())
	}
	tv.setting = false
	tv.outFolder.SetText("in " + homeShort(tv.folder()))
}

// homeShort writes a path in the user's home folder as ~/…, which is
// shorter and says the same.
func homeShort(path string) string {
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return path
	}
	if rel, err := filepath.Rel(home, path); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return filepath.Join("~", rel)
	}
	return path
}

// folder is where adapters go: the user's choice, or the studio's
// adapters folder (next to its settings and chats, where nothing of the
// user's is overwritten and the sample dataset's folder may be read-only).
func (tv *tuneView) folder() string {
	if tv.outDir != "" {
		return tv.outDir
	}
	return filepath.Join(tv.st.dir, "adapters")
}

// defaultName is <dataset>-<model>.gguf, "" until both are chosen.
func (tv *tuneView) defaultName() string {
	if tv.data == "" || tv.modelName == "" {
		return ""
	}
	base := strings.TrimSuffix(filepath.Base(tv.data), filepath.Ext(tv.data))
	return fileSafe(base) + "-" + fileSafe(tv.modelName) + ".gguf"
}

// fileSafe makes a model name such as "gemma3:1b" or "org/model" usable in
// a file name on every platform.
func fileSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if strings.ContainsRune(`<>:"/\|?* `, r) || r < 32 {
			return '-'
		}
		return r
	}, s)
}

// outPath is the adapter's path as the form says.
func (tv *tuneView) outPath() string {
	name := strings.TrimSpace(tv.outName.Text)
	if name == "" {
		return ""
	}
	if filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(tv.folder(), name)
}

// libraryChanged offers the library's usable models. Until one is
// chosen, the loaded model is: the one a user most likely means to tune.
func (tv *tuneView) libraryChanged() {
	var names []string
	for _, e := range tv.st.entries {
		if e.Err == "" {
			names = append(names, e.Name)
		}
	}
	tv.model.Options = names
	tv.model.Refresh()
	if m := tv.st.engine.Status().Model; tv.modelName == "" && tv.run == nil && m != nil && slices.Contains(names, m.Name) {
		tv.modelName = m.Name
		tv.choicesChanged()
	}
	for _, n := range names {
		if n == tv.modelName && tv.model.Selected != n {
			tv.model.SetSelected(n)
		}
	}
}

// pickModel chooses a model of the library by name (a drop on the tab).
func (tv *tuneView) pickModel(name string) {
	if tv.busy() {
		return
	}
	tv.modelName = name
	tv.libraryChanged()
	tv.choicesChanged()
}

// setData chooses the dataset at path.
func (tv *tuneView) setData(path string) {
	if tv.busy() {
		return
	}
	tv.data = path
	tv.showReport("", "")
	tv.choicesChanged()
}

// busy says, in a dialog, that the choices wait while a run goes on.
func (tv *tuneView) busy() bool {
	if tv.run != nil {
		tv.st.showError(errors.New("a fine-tuning run is going on: stop it, or wait for its end, to choose another model or dataset"))
	}
	return tv.run != nil
}

// choicesChanged follows a new model or dataset: the default name, the
// settings, and whether a run of this output exists.
func (tv *tuneView) choicesChanged() {
	if tv.run == nil {
		tv.hideNotice() // it spoke of the run of the old choices
	}
	tv.remember()
	tv.showChoices()
	tv.lookForRun()
}

func (tv *tuneView) pickData() {
	dir := ""
	if tv.data != "" {
		dir = filepath.Dir(tv.data)
	}
	tv.st.openFile(datasetExts, dir, tv.setData)
}

func (tv *tuneView) pickFolder() {
	d := dialog.NewFolderOpen(func(u fyne.ListableURI, err error) {
		if err != nil {
			tv.st.showError(err)
			return
		}
		if u == nil {
			return
		}
		tv.outDir = u.Path()
		tv.choicesChanged()
	}, tv.st.win)
	d.Resize(fyne.NewSize(800, 560))
	d.Show()
}

func (tv *tuneView) pickPreset(name string) {
	p, ok := app.TrainPresetByName(name)
	if !ok {
		return
	}
	tv.about.SetText(p.About)
	tv.adv.set(p.Settings)
	tv.remember()
}

// remember keeps the choices in the settings, for the next start.
func (tv *tuneView) remember() {
	t := &tv.st.settings.Tune
	t.Model, t.Data, t.OutDir, t.Preset = tv.modelName, tv.data, tv.outDir, tv.preset.Selected
	tv.adv.save(t)
	tv.st.saveSettings()
}

// config is the run the form asks for: the preset's settings with the
// advanced values over them, as hearth train takes a preset and flags.
func (tv *tuneView) config() (string, app.TrainConfig, error) {
	var c app.TrainConfig
	switch {
	case tv.modelName == "":
		return "", c, errors.New("choose the base model to train")
	case tv.data == "":
		return "", c, errors.New("choose a dataset: a .jsonl file of conversations or a .txt file")
	case tv.outPath() == "":
		return "", c, errors.New("name the adapter file")
	}
	p, ok := app.TrainPresetByName(tv.preset.Selected)
	if !ok {
		p = app.TrainPresets()[0]
	}
	s, err := tv.adv.value(p.Settings)
	if err != nil {
		return "", c, err
	}
	c.Settings, c.Data, c.Out = s, tv.data, tv.outPath()
	return tv.modelName, c, nil
}

func (tv *tuneView) startTapped() {
	if tv.run != nil {
		return
	}
	model, c, err := tv.config()
	if err != nil {
		tv.showNotice(err.Error(), widget.DangerImportance)
		return
	}
	tv.remember()
	tv.hideNotice()
	// A checkpoint of this output is an earlier run, stopped or finished:
	// ask before it is resumed or deleted. Reading it opens a file, off
	// the UI goroutine.
	ck := c.CheckpointPath()
	go func() {
		if lines, err := countLines(c.Data); err == nil {
			c.ValidEvery = validEvery(lines, c.Settings)
		}
		state, err := app.ReadTrainState(ck)
		_, statErr := os.Stat(ck)
		tv.st.post(func() {
			if tv.run != nil {
				return
			}
			switch {
			case errors.Is(statErr, fs.ErrNotExist):
				tv.begin(model, c)
			case err != nil:
				tv.offerStartOver(model, c, err)
			default:
				tv.offerResume(model, c, state)
			}
		})
	}()
}

// validEvery is the steps between validation losses for a dataset of
// lines: often enough that the plot shows a validation curve, rarely
// enough that validating costs about a tenth of the training. A validation
// runs the held-out sequences forward only, a third of a training pass
// (forward and backward) each, so k steps of Batch·Accum sequences pay for
// held/3 sequences when k ≥ held·10/(3·Batch·Accum). At most 50, as
// hearth train's default.
func validEvery(lines int, s app.TrainSettings) int {
	share := s.Valid
	switch {
	case share < 0:
		return 0
	case share == 0:
		share = app.DefaultValidShare
	}
	held := max(1, math.Round(share*float64(lines)))
	k := int(math.Ceil(held * 10 / 3 / float64(max(s.Batch*s.Accum, 1))))
	return min(max(k, 5), 50)
}

// countLines counts the lines of the file at path, a dataset's records
// about.
func countLines(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	n, last := 0, byte('\n')
	for {
		k, err := f.Read(buf)
		if k > 0 {
			n += bytes.Count(buf[:k], []byte{'\n'})
			last = buf[k-1]
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	if last != '\n' {
		n++
	}
	return n, nil
}

// offerResume asks whether to continue the run of the checkpoint or to
// start over.
func (tv *tuneView) offerResume(model string, c app.TrainConfig, state app.TrainState) {
	ck := c.CheckpointPath()
	what := fmt.Sprintf("A run of this adapter stopped at step %d of %d.", state.Step, state.Steps)
	if state.Step >= state.Steps {
		what = fmt.Sprintf("A run of this adapter finished its %d steps; raise the epochs to train it further.", state.Steps)
	}
	text := what + "\n\nResume continues it with its own settings (the learning rate and epochs as set here). " +
		"Start over deletes its checkpoint:\n" + ck
	resume := func() {
		s := state.Settings
		// The learning rate and the length may change on a resume
		// (app.TrainConfig.compatible); the rest shapes the adapter and
		// the data, so the checkpoint's are kept, and shown.
		s.LR = c.LR
		if s.Steps == 0 {
			s.Epochs = c.Epochs
		}
		c.Settings, c.Resume = s, true
		tv.adv.set(s)
		tv.begin(model, c)
	}
	tv.showOffer("Resume training?", text, []offerButton{
		{"Cancel", widget.MediumImportance, nil},
		{"Start over", widget.DangerImportance, func() { tv.confirmStartOver(model, c, state) }},
		{"Resume", widget.HighImportance, resume},
	})
}

// offerStartOver is for a checkpoint that cannot be read: it can only be
// deleted.
func (tv *tuneView) offerStartOver(model string, c app.TrainConfig, err error) {
	text := fmt.Sprintf("The checkpoint of this adapter cannot be read: %v\n\nStart over deletes it.", err)
	tv.showOffer("Start over?", text, []offerButton{
		{"Cancel", widget.MediumImportance, nil},
		{"Start over", widget.DangerImportance, func() { tv.deleteAndBegin(model, c) }},
	})
}

// confirmStartOver asks once more before the checkpoint, hours of
// training perhaps, is deleted.
func (tv *tuneView) confirmStartOver(model string, c app.TrainConfig, state app.TrainState) {
	text := fmt.Sprintf("Delete the checkpoint of step %d of %d and train from the start?\n%s\nThis cannot be undone.",
		state.Step, state.Steps, c.CheckpointPath())
	tv.showOffer("Delete the checkpoint?", text, []offerButton{
		{"Keep it", widget.MediumImportance, nil},
		{"Delete and start", widget.DangerImportance, func() { tv.deleteAndBegin(model, c) }},
	})
}

func (tv *tuneView) deleteAndBegin(model string, c app.TrainConfig) {
	if err := os.Remove(c.CheckpointPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		tv.showNotice("The checkpoint could not be deleted: "+err.Error(), widget.DangerImportance)
		return
	}
	tv.begin(model, c)
}

type offerButton struct {
	text       string
	importance widget.Importance
	then       func() // nil only closes
}

// showOffer shows a question with buttons, replacing one on screen.
func (tv *tuneView) showOffer(title, text string, buttons []offerButton) {
	if tv.offer != nil {
		tv.offer.Hide()
	}
	label := widget.NewLabel(text)
	label.Wrapping = fyne.TextWrapWord
	d := dialog.NewCustomWithoutButtons(title, label, tv.st.win)
	tv.offer = d
	clear(tv.offerButtons)
	var objs []fyne.CanvasObject
	for _, b := range buttons {
		then := b.then
		btn := widget.NewButton(b.text, func() {
			d.Hide()
			if tv.offer == d {
				tv.offer = nil
			}
			if then != nil {
				then()
			}
		})
		btn.Importance = b.importance
		tv.offerButtons[b.text] = btn
		objs = append(objs, btn)
	}
	d.SetButtons(objs)
	d.Resize(fyne.NewSize(520, 0))
	d.Show()
}

// begin starts the run on the engine, on a goroutine of its own: Train
// blocks until the run ends.
func (tv *tuneView) begin(model string, c app.TrainConfig) {
	if tv.run != nil {
		return
	}
	job, ctx := newStoppable()
	r := &tuneRun{stoppable: job, model: model, cfg: c, pause: &app.TrainPause{}}
	tv.run, tv.last = r, nil
	tv.lookGen++ // a lookup under way must not show an older run now
	tv.looking = false
	tv.plot.Set(nil, 0)
	tv.showReport("", "")
	tv.hideNotice()
	for _, l := range tv.stats {
		l.SetText("–")
	}
	tv.headline.SetText("Starting…")
	tv.progress.SetValue(0)
	tv.updateControls()

	// The run stays with the engine it started on if the studio replaces
	// its engine (a new adapter chosen in the Models tab).
	eng := tv.st.engine
	flush := func() { tv.st.post(func() { tv.show(r) }) }
	go func() {
		defer r.cancel()
		var res *app.TrainResult
		err := os.MkdirAll(filepath.Dir(c.Out), 0o755)
		if err == nil {
			res, err = eng.Train(ctx, app.TrainRequest{Model: model, RunConfig: c, Pause: r.pause,
				Progress: func(p app.TrainProgress) { r.add(p, flush) }})
		}
		r.mu.Lock()
		r.res, r.err = res, err
		r.mu.Unlock()
		close(r.done)
		tv.st.post(func() { tv.finish(r) })
	}()
}

func (tv *tuneView) pauseTapped() {
	r := tv.run
	if r == nil || r.stopping {
		return
	}
	if r.pause.Paused() {
		r.pause.Resume()
		tv.headline.SetText(fmt.Sprintf("Training %s", r.model))
	} else {
		r.pause.Pause()
		tv.headline.SetText("Pausing after this step…")
	}
	tv.updateControls()
}

// stopTapped ends the run after its current step; it writes a checkpoint
// and the adapter as they are, so Start can resume it.
func (tv *tuneView) stopTapped() {
	if r := tv.run; r != nil && r.stop() {
		tv.headline.SetText("Stopping: writing a checkpoint and the adapter…")
		tv.updateControls()
	}
}

// close stops the run, if any, and waits until its checkpoint is written.
func (tv *tuneView) close() {
	if r := tv.run; r != nil {
		r.stopAndWait()
	}
	tv.remember()
}

// updateControls enables what can be done now.
func (tv *tuneView) updateControls() {
	r := tv.run
	setEnabled(r == nil, tv.start)
	setEnabled(r != nil && !r.stopping, tv.pause, tv.stop)
	if r != nil && r.pause.Paused() {
		tv.pause.SetText("Resume")
		tv.pause.SetIcon(theme.MediaPlayIcon())
	} else {
		tv.pause.SetText("Pause")
		tv.pause.SetIcon(theme.MediaPauseIcon())
	}
	setEnabled(r == nil, tv.model, tv.preset, tv.outName, tv.chooseData, tv.chooseFolder)
	tv.adv.enable(r == nil)
	if hide := r != nil || tv.last == nil; hide != tv.chatWith.Hidden {
		tv.chatWith.Hidden = hide
		tv.right.Refresh()
	}
}

// show takes what the run reported since the last update: new points for
// the plot, the latest numbers, the dataset's report.
func (tv *tuneView) show(r *tuneRun) {
	r.mu.Lock()
	r.scheduled = false
	p, have := r.latest, r.have
	points, reset, history := r.points, r.reset, r.history
	rep := r.report
	r.points, r.reset, r.history, r.report = nil, false, nil, nil
	r.mu.Unlock()
	if tv.run != r {
		return // a report of a run that has ended, come late
	}
	if reset {
		tv.plot.Set(history, p.Steps)
	}
	if len(points) > 0 || p.Steps != tv.plot.steps {
		tv.plot.Add(points, p.Steps)
	}
	if rep != nil {
		tv.showReport(reportText(*rep), rep.String())
	}
	if !have {
		return
	}
	tv.showProgress(r, p)
}

// showProgress shows a report's numbers and what the run is doing.
func (tv *tuneView) showProgress(r *tuneRun, p app.TrainProgress) {
	set := func(name, text string) { tv.stats[name].SetText(text) }
	if p.Steps > 0 {
		set("Step", fmt.Sprintf("%d / %d", p.Step, p.Steps))
		tv.progress.Max = float64(p.Steps)
		done := float64(p.Step)
		if p.Phase == app.TrainPhaseStep && p.Total > 0 {
			// A long step moves the bar as its passes finish.
			done += float64(p.Done) / float64(p.Total)
		}
		tv.progress.SetValue(done)
	}
	set("Epoch", strconv.FormatFloat(p.Epoch, 'f', 2, 64))
	if p.Step > 0 {
		set("Loss", strconv.FormatFloat(p.Loss, 'f', 4, 64))
		set("Learning rate", strconv.FormatFloat(p.LR, 'e', 2, 64))
	}
	if p.HasValid {
		set("Validation loss", strconv.FormatFloat(p.ValidLoss, 'f', 4, 64))
	}
	if p.TokensPerSec > 0 {
		set("Tokens/s", strconv.FormatFloat(p.TokensPerSec, 'f', 0, 64))
	}
	if p.ETA > 0 && p.Step < p.Steps {
		set("ETA", app.FormatETA(p.ETA))
	} else if p.Step >= p.Steps && p.Steps > 0 {
		set("ETA", "–")
	}
	if p.GPUMemory > 0 {
		set("GPU memory", settings.FormatSize(int64(p.GPUMemory)))
	}
	if r.stopping {
		return
	}
	doing := p.Doing(r.model)
	switch {
	case p.Phase == app.TrainPhasePaused:
		tv.headline.SetText(fmt.Sprintf("Paused at step %d of %d", p.Step, p.Steps))
	case p.Phase == app.TrainPhaseDone || p.Phase == app.TrainPhaseData && doing == "":
	case r.pause.Paused() && p.Phase != app.TrainPhaseData && p.Phase != app.TrainPhaseLoad:
		tv.headline.SetText("Pausing after this step…")
	case doing != "":
		tv.headline.SetText(doing)
	default:
		tv.headline.SetText(fmt.Sprintf("Training %s", r.model))
	}
}

// reportText is the dataset's report in a few lines: what was kept, and
// the first lines skipped or cut.
func reportText(r app.DatasetReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s from %s · %d tokens (%d trained)\n%d training and %d validation sequences",
		plural(r.Samples, "sample"), plural(r.Lines, "line"), r.Tokens, r.TrainedTokens, r.TrainSequences, r.ValidSequences)
	notes := func(what string, n int, lines []app.DatasetNote) {
		if n == 0 {
			return
		}
		fmt.Fprintf(&b, "\n%s %d: ", what, n)
		for i, l := range lines {
			if i == 3 {
				b.WriteString(", …")
				break
			}
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(l.String())
		}
	}
	notes("Skipped", r.Skipped, r.SkippedLines)
	notes("Truncated", r.Truncated, r.TruncatedLines)
	return b.String()
}

// finish shows how the run ended.
func (tv *tuneView) finish(r *tuneRun) {
	if tv.run != r {
		return
	}
	tv.show(r)
	tv.run = nil
	res, err := r.res, r.err
	switch {
	case err != nil:
		tv.headline.SetText("The run failed")
		tv.showNotice(trainFailure(err), widget.DangerImportance)
	case res.Stopped:
		tv.headline.SetText(fmt.Sprintf("Stopped at step %d of %d", res.Step, res.Steps))
		tv.showNotice(fmt.Sprintf("The adapter so far is %s. Start continues the run from its checkpoint.", res.Adapter), widget.MediumImportance)
		tv.last = &tunedResult{model: r.model, adapter: res.Adapter}
	default:
		tv.headline.SetText("Done: " + plural(res.Step, "step"))
		text := fmt.Sprintf("Final loss %.4f", res.Loss)
		if res.HasValid {
			text += fmt.Sprintf(", validation loss %.4f", res.ValidLoss)
		}
		tv.showNotice(text+". The adapter is "+res.Adapter+".", widget.SuccessImportance)
		tv.last = &tunedResult{model: r.model, adapter: res.Adapter}
	}
	tv.stats["ETA"].SetText("–")
	tv.updateControls()
	if err == nil {
		// The adapter written joins the library: the Models tab and the
		// chat's adapter menu list it.
		tv.st.rescan(nil)
	}
}

// trainFailure explains why a run did not finish.
func trainFailure(err error) string {
	var lineErr *app.DatasetLineError
	switch {
	case errors.Is(err, app.ErrTraining):
		return "Another fine-tuning run holds the GPU: " + err.Error() + "."
	case errors.Is(err, app.ErrDiverged):
		return "The training diverged (a loss or gradient stopped being a number): " + err.Error() + "."
	case errors.As(err, &lineErr):
		return "The dataset has a problem: " + err.Error() + ". Fix that line, or remove it, and start again."
	case errors.Is(err, app.ErrClosed):
		return "The run was not started: the engine restarted (a new adapter was chosen). Start it again."
	}
	return "The run failed: " + err.Error()
}

// A row that shows or hides changes its container's height: the container
// is laid out again at once (the GL driver would on its next frame, a
// software canvas, as the screenshots and the tests use, would not).

func (tv *tuneView) showNotice(text string, imp widget.Importance) {
	tv.notice.Importance = imp
	tv.notice.SetText(text)
	tv.notice.Show()
	tv.left.Refresh()
}

func (tv *tuneView) hideNotice() {
	if tv.notice.Visible() {
		tv.notice.Hide()
		tv.left.Refresh()
	}
}

// showReport shows the dataset's report, or hides it when text is "".
func (tv *tuneView) showReport(text, full string) {
	tv.report.SetText(text)
	tv.fullReport = full
	switch {
	case text == "" && tv.reportRow.Visible():
		tv.reportRow.Hide()
	case text != "" && !tv.reportRow.Visible():
		tv.reportRow.Show()
	default:
		return
	}
	tv.left.Refresh()
}

// lookForRun shows the last run of the chosen output, if its checkpoint
// is there: its loss curve, how far it got, and the adapter to chat with.
// The checkpoint is read off the UI goroutine.
func (tv *tuneView) lookForRun() {
	if tv.run != nil {
		return
	}
	tv.lookGen++
	gen, out, model := tv.lookGen, tv.outPath(), tv.modelName
	tv.looking = false
	if out == "" {
		return
	}
	ck := app.TrainConfig{Out: out}.CheckpointPath()
	tv.looking = true
	go func() {
		state, err := app.ReadTrainState(ck)
		_, adapterErr := os.Stat(out)
		tv.st.post(func() {
			if gen != tv.lookGen || tv.run != nil {
				return
			}
			tv.looking = false
			if err != nil {
				if tv.plot.steps != 0 || tv.last != nil {
					tv.clearRun()
				}
				return
			}
			tv.plot.Set(state.History, state.Steps)
			for _, l := range tv.stats {
				l.SetText("–")
			}
			tv.stats["Step"].SetText(fmt.Sprintf("%d / %d", state.Step, state.Steps))
			tv.progress.Max = float64(max(state.Steps, 1))
			tv.progress.SetValue(float64(state.Step))
			last := lastLoss(state.History, false)
			if last != "" {
				tv.stats["Loss"].SetText(last)
			}
			if v := lastLoss(state.History, true); v != "" {
				tv.stats["Validation loss"].SetText(v)
			}
			if state.Seconds > 0 {
				tv.stats["Tokens/s"].SetText(strconv.FormatFloat(float64(state.Tokens)/state.Seconds, 'f', 0, 64))
			}
			if state.Step >= state.Steps {
				tv.headline.SetText(fmt.Sprintf("Last run: done, %d steps", state.Steps))
			} else {
				tv.headline.SetText(fmt.Sprintf("Last run: stopped at step %d of %d · Start resumes it", state.Step, state.Steps))
			}
			tv.last = nil
			if adapterErr == nil {
				tv.last = &tunedResult{model: model, adapter: out}
			}
			tv.updateControls()
		})
	}()
}

// clearRun empties the run's side: no run of this output yet.
func (tv *tuneView) clearRun() {
	tv.plot.Set(nil, 0)
	for _, l := range tv.stats {
		l.SetText("–")
	}
	tv.progress.SetValue(0)
	tv.headline.SetText("No run yet")
	tv.last = nil
	tv.updateControls()
}

func lastLoss(h []app.TrainPoint, valid bool) string {
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Valid == valid {
			return strconv.FormatFloat(h[i].Loss, 'f', 4, 64)
		}
	}
	return ""
}

// chatWithAdapter opens a chat with the last run's base model loaded and
// its adapter applied.
func (tv *tuneView) chatWithAdapter() {
	if tv.last == nil || tv.st.chat == nil {
		return
	}
	tv.st.chat.useAdapter(tv.last.model, tv.last.adapter)
}

// tuneRun is a fine-tuning run under way. The engine's goroutine adds its
// reports under mu and schedules an update; the UI goroutine takes them at
// most every tuneInterval.
type tuneRun struct {
	stoppable // done is closed when Train has returned
	model     string
	cfg       app.TrainConfig
	pause     *app.TrainPause

	mu        sync.Mutex
	latest    app.TrainProgress
	have      bool
	points    []app.TrainPoint // not shown yet
	reset     bool             // a resumed run's history replaces the plot's points
	history   []app.TrainPoint
	report    *app.DatasetReport
	scheduled bool
	res       *app.TrainResult
	err       error
}

func (r *tuneRun) add(p app.TrainProgress, flush func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch p.Phase {
	case app.TrainPhaseTrain:
		r.points = append(r.points, app.TrainPoint{Step: p.Step, Loss: p.Loss})
	case app.TrainPhaseValid:
		r.points = append(r.points, app.TrainPoint{Step: p.Step, Loss: p.ValidLoss, Valid: true})
	case app.TrainPhaseResumed:
		r.reset, r.history, r.points = true, p.History, nil
	case app.TrainPhaseData:
		if p.Report != nil {
			r.report = p.Report
		}
	}
	p.Report, p.History = nil, nil
	r.latest, r.have = p, true
	if !r.scheduled {
		r.scheduled = true
		time.AfterFunc(tuneInterval, flush)
	}
}

// advancedForm edits the numbers of a run, prefilled from a preset.
type advancedForm struct {
	rank, alpha, lr, epochs, seqLen, batch, accum, valid *widget.Entry
}

func newAdvancedForm() *advancedForm {
	e := func() *widget.Entry { return widget.NewEntry() }
	return &advancedForm{rank: e(), alpha: e(), lr: e(), epochs: e(), seqLen: e(), batch: e(), accum: e(), valid: e()}
}

func (f *advancedForm) entries() []*widget.Entry {
	return []*widget.Entry{f.rank, f.alpha, f.lr, f.epochs, f.seqLen, f.batch, f.accum, f.valid}
}

func (f *advancedForm) items() []*widget.FormItem {
	return []*widget.FormItem{
		hintedItem("Rank", f.rank, "the adapter's size: more learns more, and needs more data"),
		hintedItem("Alpha", f.alpha, "the correction is scaled by alpha / rank"),
		hintedItem("Learning rate", f.lr, "the peak, after a warmup, before a cosine decay"),
		hintedItem("Epochs", f.epochs, "passes over the data; 0.5 is half of it"),
		hintedItem("Sequence length", f.seqLen, "tokens per packed sequence; longer samples are cut"),
		hintedItem("Batch", f.batch, "sequences per GPU pass"),
		hintedItem("Accumulation", f.accum, "passes per optimizer step"),
		hintedItem("Validation share", f.valid, "held out for the validation loss; 0 for none"),
	}
}

func formatNum(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// set shows s's values.
func (f *advancedForm) set(s app.TrainSettings) {
	f.rank.SetText(strconv.Itoa(s.LoRA.Rank))
	f.alpha.SetText(formatNum(float64(s.LoRA.Alpha)))
	f.lr.SetText(formatNum(s.LR))
	f.epochs.SetText(formatNum(s.Epochs))
	f.seqLen.SetText(strconv.Itoa(s.SeqLen))
	f.batch.SetText(strconv.Itoa(s.Batch))
	f.accum.SetText(strconv.Itoa(max(s.Accum, 1)))
	switch {
	case s.Valid < 0:
		f.valid.SetText("0%")
	case s.Valid == 0:
		f.valid.SetText(formatNum(100*app.DefaultValidShare) + "%")
	default:
		f.valid.SetText(formatNum(100*s.Valid) + "%")
	}
}

// setSaved shows the values the settings kept over the preset's.
func (f *advancedForm) setSaved(t settings.Tune) {
	if t.Rank > 0 {
		f.rank.SetText(strconv.Itoa(t.Rank))
	}
	if t.Alpha > 0 {
		f.alpha.SetText(formatNum(float64(t.Alpha)))
	}
	if t.LR > 0 {
		f.lr.SetText(formatNum(t.LR))
	}
	if t.Epochs > 0 {
		f.epochs.SetText(formatNum(t.Epochs))
	}
	if t.SeqLen > 0 {
		f.seqLen.SetText(strconv.Itoa(t.SeqLen))
	}
	if t.Batch > 0 {
		f.batch.SetText(strconv.Itoa(t.Batch))
	}
	if t.Accum > 0 {
		f.accum.SetText(strconv.Itoa(t.Accum))
	}
	if t.Valid != 0 {
		f.valid.SetText(formatNum(100*max(t.Valid, 0)) + "%")
	}
}

// save keeps the values that parse in t.
func (f *advancedForm) save(t *settings.Tune) {
	s, err := f.value(app.TrainPresets()[0].Settings)
	if err != nil {
		return
	}
	t.Rank, t.Alpha, t.LR, t.Epochs = s.LoRA.Rank, s.LoRA.Alpha, s.LR, s.Epochs
	t.SeqLen, t.Batch, t.Accum, t.Valid = s.SeqLen, s.Batch, s.Accum, s.Valid
}

func (f *advancedForm) enable(on bool) {
	for _, e := range f.entries() {
		setEnabled(on, e)
	}
}

// value is base with the form's values over it, each checked.
func (f *advancedForm) value(base app.TrainSettings) (app.TrainSettings, error) {
	s := base
	var errs []error
	integer := func(e *widget.Entry, name string, least int) int {
		v, err := strconv.Atoi(strings.TrimSpace(e.Text))
		if err != nil || v < least {
			errs = append(errs, fmt.Errorf("%s: %q is not a whole number of at least %d", name, e.Text, least))
		}
		return v
	}
	positive := func(e *widget.Entry, name string) float64 {
		v, err := strconv.ParseFloat(strings.TrimSpace(e.Text), 64)
		if err != nil || !(v > 0) || v > 1e9 {
			errs = append(errs, fmt.Errorf("%s: %q is not a positive number", name, e.Text))
		}
		return v
	}
	s.LoRA.Rank = integer(f.rank, "rank", 1)
	s.LoRA.Alpha = float32(positive(f.alpha, "alpha"))
	s.LR = positive(f.lr, "learning rate")
	s.Epochs, s.Steps = positive(f.epochs, "epochs"), 0
	s.SeqLen = integer(f.seqLen, "sequence length", 2)
	s.Batch = integer(f.batch, "batch", 1)
	s.Accum = integer(f.accum, "accumulation", 1)
	text := strings.TrimSpace(f.valid.Text)
	share, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(text, "%")), 64)
	if strings.HasSuffix(text, "%") {
		share /= 100
	}
	switch {
	case err != nil || share < 0 || share >= 1:
		errs = append(errs, fmt.Errorf("validation share: %q is not a share such as 5%% or 0.05", f.valid.Text))
	case share == 0:
		s.Valid = -1 // none
	default:
		s.Valid = share
	}
	return s, errors.Join(errs...)
}
