package ui

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/storage"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/app/settings"
)

// voiceInterval is the time between two updates of the Voice tab while
// speech is made or played: the cursor and the spoken word move twenty
// times a second, smooth enough to follow, and a chunk's samples are
// drawn within a frame or three of their arrival.
const voiceInterval = 50 * time.Millisecond

// previewText is what a voice's Preview says.
const previewText = "Hello! This is how I sound when I read your text aloud."

// defaultVoice is chosen first when the Kokoro directory has it: Kokoro's
// own default, and its best-rated voice.
const defaultVoice = "af_heart"

// Export formats.
const (
	formatPCM16 = "16-bit PCM"
	formatFloat = "32-bit float"
)

// speaker is what the Voice tab and the chat's read-aloud need of the
// engine: *app.Engine. Tests give a fake.
type speaker interface {
	Speak(ctx context.Context, req app.SpeakRequest, emit func(app.SpeechChunk) error) error
	Voices() ([]string, error)
	KokoroDir() (string, error)
}

// audioPlayer is what a speech needs of app.Player. Tests give a fake.
type audioPlayer interface {
	Enqueue(samples []float32)
	Stop()
	Wait(ctx context.Context) error
	Position() time.Duration
	Close() error
}

// openPlayer is app.NewPlayer as an audioPlayer: a failure is a nil
// interface, not an interface holding a nil *app.Player.
func openPlayer() (audioPlayer, error) {
	p, err := app.NewPlayer()
	if err != nil {
		return nil, err
	}
	return p, nil
}

// voicePanel is the Voice tab: text read aloud with a Kokoro voice or a
// blend of voices, played as it is synthesised, drawn as a waveform, and
// exported as WAV.
func voicePanel(st *studio) fyne.CanvasObject {
	vv := newVoiceView(st)
	st.voice = vv
	// Quitting mid-speech stops the synthesis and the sound before the
	// engine closes.
	st.onClose(vv.close)
	return vv
}

// voiceView is the Voice tab's state and widgets; all of it belongs to the
// UI goroutine but a speech's reports (speechRun).
type voiceView struct {
	widget.BaseWidget
	st *studio
	// engine, newPlayer and pullKokoro are the studio's engine,
	// app.NewPlayer and app.PullKokoro; tests replace them.
	engine     func() speaker
	newPlayer  func() (audioPlayer, error)
	pullKokoro func(context.Context, app.KokoroPullOptions) (app.KokoroPull, error)
	// closeWait bounds close's wait for the speeches to end
	// (defaultCloseWait; tests that need the wait to outlast a loaded
	// machine's delays lengthen it).
	closeWait time.Duration

	text       *widget.Entry
	voices     []string // the packs found; nil until listed
	voicesErr  error    // why there are none
	voicesGen  int      // counts the listings; a newer one wins
	listing    bool     // a listing is under way (the screenshots wait for it)
	rows       []*voiceRow
	restored   bool // the saved voice was put in the rows (or was gone)
	rowsBox    *fyne.Container
	addVoice   *widget.Button
	blendLabel *hintLabel
	speed      *widget.Slider
	speedLabel *widget.Label

	play, stop, export *widget.Button
	format             *widget.Select

	headline  *widget.Label
	clock     *widget.Label
	wave      *waveform
	words     *widget.RichText
	wordAt    int // the word highlighted, -1 for none
	notice    *widget.Label
	lookAgain *widget.Button // "Look again", after no voice model was found
	download  *widget.Button // "Download Kokoro-82M", shown with Look again
	noticeBx  *fyne.Container
	pulling   *kokoroDownload // the download dialog, while open

	cur *speechRun // the speech being made or played, nil when none
	// runs are the speeches started and maybe not ended: cur and those it
	// replaced, which were only asked to stop. close waits for them.
	runs []*speechRun
	// shown is what the waveform holds, once a speech of it is complete,
	// and shownAudio its samples as the engine made them: Export saves
	// them without synthesising again.
	shown      *app.SpeakRequest
	shownAudio []float32

	left    *container.Scroll
	content fyne.CanvasObject
}

// voiceRow is one voice of the blend: a pack, its weight (shown once there
// are two), and a preview of the pack alone.
type voiceRow struct {
	pick    *widget.Select
	weight  *widget.Slider
	share   *widget.Label
	preview *widget.Button
	remove  *widget.Button
	// weightLine holds the weight and the share; it shows in a blend.
	weightLine *fyne.Container
	box        *fyne.Container
}

func newVoiceView(st *studio) *voiceView {
	vv := &voiceView{st: st, wordAt: -1, newPlayer: openPlayer, pullKokoro: app.PullKokoro, closeWait: defaultCloseWait}
	vv.engine = func() speaker { return vv.st.engine }
	vv.ExtendBaseWidget(vv)
	vv.build()
	vv.listVoices()
	return vv
}

func (vv *voiceView) CreateRenderer() fyne.WidgetRenderer {
	return widget.NewSimpleRenderer(vv.content)
}

func (vv *voiceView) build() {
	heading := headingLabel("Voice")
	intro := introLabel("Read text aloud with Kokoro voices, on your GPU. Blend voices to make a new one.")

	vv.text = widget.NewMultiLineEntry()
	vv.text.Wrapping = fyne.TextWrapWord
	vv.text.SetPlaceHolder("Type or paste the text to read aloud")
	vv.text.SetMinRowsVisible(6)

	vv.rowsBox = container.NewVBox()
	vv.addVoice = widget.NewButtonWithIcon("Blend another voice", theme.ContentAddIcon(), func() { vv.addRow("") })
	vv.addVoice.Importance = widget.LowImportance
	vv.blendLabel = newHintLabel("")
	vv.blendLabel.Truncation = fyne.TextTruncateEllipsis
	vv.blendLabel.Hide()
	vv.addRow("")

	saved := vv.st.settings.Voice
	vv.speed = widget.NewSlider(settings.VoiceSpeedMin, settings.VoiceSpeedMax)
	vv.speed.Step = 0.05
	speed := 1.0
	if saved.Speed != 0 {
		speed = saved.Speed
	}
	vv.speed.SetValue(speed)
	vv.speedLabel = widget.NewLabel(speedText(speed))
	vv.speed.OnChanged = func(v float64) { vv.speedLabel.SetText(speedText(v)) }
	vv.speed.OnChangeEnded = func(float64) { vv.remember() }

	vv.play = widget.NewButtonWithIcon("Play", theme.MediaPlayIcon(), vv.playTapped)
	vv.play.Importance = widget.HighImportance
	vv.stop = widget.NewButtonWithIcon("Stop", theme.MediaStopIcon(), vv.halt)
	vv.export = widget.NewButtonWithIcon("Export…", theme.DocumentSaveIcon(), vv.exportTapped)
	vv.format = widget.NewSelect([]string{formatPCM16, formatFloat}, nil)
	if saved.Float {
		vv.format.SetSelected(formatFloat)
	} else {
		vv.format.SetSelected(formatPCM16)
	}
	vv.format.OnChanged = func(string) { vv.remember() }
	buttons := container.NewGridWithColumns(3, vv.play, vv.stop, vv.export)

	vv.notice = widget.NewLabel("")
	vv.notice.Wrapping = fyne.TextWrapWord
	vv.lookAgain = widget.NewButtonWithIcon("Look again", theme.ViewRefreshIcon(), vv.listVoices)
	vv.download = widget.NewButtonWithIcon(downloadKokoroLabel, theme.DownloadIcon(), vv.downloadKokoro)
	vv.download.Importance = widget.HighImportance
	// The buttons go under the notice: beside it, the wide Download
	// button would leave the explanation a few words a line.
	vv.noticeBx = container.NewVBox(vv.notice, container.NewHBox(vv.download, vv.lookAgain))
	vv.noticeBx.Hide()

	form := container.NewVBox(
		formRow("Voice", vv.rowsBox),
		formRow("", vv.blendLabel),
		formRow("", container.NewHBox(vv.addVoice)),
		formRow("Speed", container.NewBorder(nil, nil, nil, vv.speedLabel, vv.speed)),
		formRow("Export as", vv.format),
	)
	vv.left = scrollColumn(container.NewVBox(heading, intro, vv.text, form, buttons, vv.noticeBx))

	vv.headline = widget.NewLabelWithStyle("Nothing spoken yet", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	vv.headline.Truncation = fyne.TextTruncateEllipsis
	vv.clock = widget.NewLabelWithStyle("", fyne.TextAlignTrailing, fyne.TextStyle{})
	vv.wave = newWaveform(app.SampleRate)
	vv.words = widget.NewRichText()
	vv.words.Wrapping = fyne.TextWrapWord
	right := container.NewBorder(container.NewBorder(nil, nil, nil, container.New(fixedWidth(160), vv.clock), vv.headline), vv.words, nil, nil, vv.wave)

	split := container.NewHSplit(container.NewPadded(vv.left), container.NewPadded(right))
	split.Offset = 0.42
	vv.content = split
	vv.updateControls()
}

func speedText(v float64) string { return fmt.Sprintf("%.2f×", v) }

// addRow adds a voice to the blend, name if given.
func (vv *voiceView) addRow(name string) {
	r := &voiceRow{}
	r.pick = widget.NewSelect(vv.voices, func(string) { vv.blendChanged(); vv.remember() })
	r.pick.PlaceHolder = "Choose a voice"
	r.weight = widget.NewSlider(0, 1)
	r.weight.Step = 0.05
	r.weight.SetValue(0.5)
	r.weight.OnChanged = func(float64) { vv.blendChanged() }
	r.weight.OnChangeEnded = func(float64) { vv.remember() }
	r.share = widget.NewLabelWithStyle("", fyne.TextAlignTrailing, fyne.TextStyle{})
	r.preview = widget.NewButtonWithIcon("", theme.VolumeUpIcon(), func() { vv.previewTapped(r) })
	r.remove = widget.NewButtonWithIcon("", theme.CancelIcon(), func() { vv.removeRow(r) })
	r.remove.Importance = widget.LowImportance
	// The weight goes on a line of its own: beside a voice's name, at the
	// column's width, a slider is too short to set.
	r.weightLine = container.NewBorder(nil, nil, nil, r.share, r.weight)
	r.box = container.NewVBox(
		container.NewBorder(nil, nil, nil, container.NewHBox(r.preview, r.remove), r.pick),
		r.weightLine)
	if name == "" {
		name = vv.unusedVoice()
	}
	if slices.Contains(vv.voices, name) {
		r.pick.SetSelected(name)
	}
	vv.rows = append(vv.rows, r)
	vv.rowsBox.Add(r.box)
	vv.blendChanged()
}

// unusedVoice is the first voice of the list that no row has, the
// default voice first: what a new row starts with.
func (vv *voiceView) unusedVoice() string {
	used := func(n string) bool {
		return slices.ContainsFunc(vv.rows, func(r *voiceRow) bool { return r.pick.Selected == n })
	}
	for _, n := range append([]string{defaultVoice}, vv.voices...) {
		if slices.Contains(vv.voices, n) && !used(n) {
			return n
		}
	}
	return ""
}

func (vv *voiceView) removeRow(r *voiceRow) {
	i := slices.Index(vv.rows, r)
	if i < 0 || len(vv.rows) == 1 {
		return
	}
	vv.rows = slices.Delete(vv.rows, i, i+1)
	vv.rowsBox.Remove(r.box)
	vv.blendChanged()
	vv.remember()
}

// remember saves the tab's voice, speed and export format in the
// settings, once the saved voice was restored (or found missing): before
// that the rows hold only placeholders.
func (vv *voiceView) remember() {
	if !vv.restored {
		return
	}
	v := settings.Voice{Float: vv.format.Selected == formatFloat}
	if _, err := vv.voiceSpec(); err == nil {
		// The sliders' own values, not voiceSpec's shares: restored, the
		// shares would snap to the sliders' steps and change the blend.
		var parts []string
		for _, r := range vv.rows {
			if r.pick.Selected != "" && r.weight.Value > 0 {
				parts = append(parts, r.pick.Selected+":"+strconv.FormatFloat(r.weight.Value, 'f', -1, 64))
			}
		}
		if len(vv.rows) == 1 { // one voice: its weight is hidden and means nothing
			parts = []string{vv.rows[0].pick.Selected}
		}
		v.Voice = strings.Join(parts, ",")
	}
	if s := vv.speed.Value; s != 1 {
		v.Speed = s
	}
	if v != vv.st.settings.Voice {
		vv.st.settings.Voice = v
		vv.st.saveSettings()
	}
}

// restore sets the rows to the saved voice or blend, once the voices are
// listed, if every voice it names is among them.
func (vv *voiceView) restore() {
	defer func() { vv.restored = true }() // after: its own changes are not saved
	spec := vv.st.settings.Voice.Voice
	if spec == "" {
		return
	}
	terms, err := app.ParseVoiceSpec(spec)
	if err != nil || slices.ContainsFunc(terms, func(t app.VoiceWeight) bool { return !slices.Contains(vv.voices, t.Name) }) {
		return // a voice pack that is gone: the tab's default instead
	}
	for _, r := range vv.rows {
		vv.rowsBox.Remove(r.box)
	}
	vv.rows = nil
	for _, t := range terms {
		vv.addRow(t.Name)
		vv.rows[len(vv.rows)-1].weight.SetValue(min(t.Weight, 1))
	}
	vv.blendChanged()
}

// blendChanged shows the rows' weights and the blend they make.
func (vv *voiceView) blendChanged() {
	single := len(vv.rows) == 1
	var total float64
	for _, r := range vv.rows {
		if r.pick.Selected != "" {
			total += r.weight.Value
		}
	}
	for _, r := range vv.rows {
		for _, o := range []fyne.CanvasObject{r.weightLine, r.remove} {
			if single {
				o.Hide()
			} else {
				o.Show()
			}
		}
		share := 0.0
		if total > 0 && r.pick.Selected != "" {
			share = r.weight.Value / total
		}
		r.share.SetText(fmt.Sprintf("%3.0f%%", 100*share))
	}
	if spec, err := vv.voiceSpec(); err == nil && !single {
		vv.blendLabel.SetText("Blend: " + spec)
		vv.blendLabel.Show()
	} else {
		vv.blendLabel.SetText("")
		vv.blendLabel.Hide()
	}
	vv.rowsBox.Refresh()
	if vv.left != nil {
		vv.left.Refresh() // a row added or removed changes the column's height
	}
}

// blendTerm is one voice of a blend and its weight.
type blendTerm struct {
	name   string
	weight float64
}

// blendSpec is the voice spec the engine takes for terms: one voice's
// name, or "af_heart:0.6,am_adam:0.4" for a blend. Terms without a voice
// or with no weight are left out and a voice named twice counts once with
// the weights summed. The weights are written as shares of their sum,
// rounded to hundredths (never to 0, which the engine refuses): the engine
// normalises them too, so the spec reads as the mix it makes.
func blendSpec(terms []blendTerm) (string, error) {
	var kept []blendTerm
	var total float64
	for _, t := range terms {
		if t.name == "" || !(t.weight > 0) || math.IsInf(t.weight, 0) {
			continue
		}
		total += t.weight
		if i := slices.IndexFunc(kept, func(k blendTerm) bool { return k.name == t.name }); i >= 0 {
			kept[i].weight += t.weight
			continue
		}
		kept = append(kept, t)
	}
	switch len(kept) {
	case 0:
		return "", errors.New("choose a voice: with every weight at 0 there is no voice to speak with")
	case 1:
		return kept[0].name, nil
	}
	parts := make([]string, len(kept))
	for i, k := range kept {
		w := max(math.Round(100*k.weight/total)/100, 0.01)
		parts[i] = k.name + ":" + strconv.FormatFloat(w, 'f', -1, 64)
	}
	return strings.Join(parts, ","), nil
}

// voiceSpec is the blend the rows make.
func (vv *voiceView) voiceSpec() (string, error) {
	if len(vv.voices) == 0 {
		return "", errors.New("no voices are listed yet")
	}
	if len(vv.rows) == 1 {
		if n := vv.rows[0].pick.Selected; n != "" {
			return n, nil
		}
		return "", errors.New("choose a voice")
	}
	var terms []blendTerm
	for _, r := range vv.rows {
		terms = append(terms, blendTerm{r.pick.Selected, r.weight.Value})
	}
	return blendSpec(terms)
}

// lastVoice is the voice and speed the tab is set to, for the chat's
// read-aloud; err says why no voice can be named.
func (vv *voiceView) lastVoice() (voice string, speed float64, err error) {
	voice, err = vv.voiceSpec()
	return voice, vv.speed.Value, err
}

// listVoices asks the engine for the voice packs, off the UI goroutine:
// it reads a directory.
func (vv *voiceView) listVoices() {
	vv.voicesGen++
	vv.listing = true
	gen, eng := vv.voicesGen, vv.engine()
	go func() {
		names, err := eng.Voices()
		vv.st.post(func() {
			if gen == vv.voicesGen {
				vv.listing = false
				vv.setVoices(names, err)
			}
		})
	}()
}

// setVoices offers names in every row, or says why there are none.
func (vv *voiceView) setVoices(names []string, err error) {
	if err == nil && len(names) == 0 {
		err = &app.NoVoiceModelError{Missing: errors.New("the Kokoro folder has no voice packs (*.pt, *.bin)")}
	}
	vv.voicesErr = err
	if err != nil {
		vv.voices = nil
		vv.showFailure(err)
	} else {
		vv.voices = names
		if vv.lookAgain.Visible() {
			vv.hideNotice()
		}
	}
	for _, r := range vv.rows {
		r.pick.SetOptions(vv.voices)
		if !slices.Contains(vv.voices, r.pick.Selected) {
			r.pick.ClearSelected()
		}
	}
	for _, r := range vv.rows {
		if r.pick.Selected == "" {
			if n := vv.unusedVoice(); n != "" {
				r.pick.SetSelected(n)
			}
		}
	}
	if err == nil && !vv.restored {
		vv.restore()
	}
	vv.blendChanged()
	vv.updateControls()
}

// request is what the form asks to say, checked.
func (vv *voiceView) request() (app.SpeakRequest, error) {
	text := strings.TrimSpace(vv.text.Text)
	if text == "" {
		return app.SpeakRequest{}, errNothingToSay
	}
	voice, err := vv.voiceSpec()
	if err != nil {
		return app.SpeakRequest{}, err
	}
	return app.SpeakRequest{Text: text, Voice: voice, Speed: vv.speed.Value}, nil
}

var errNothingToSay = errors.New("nothing to say: type or paste the text to read aloud first")

func (vv *voiceView) playTapped() {
	req, err := vv.request()
	if err != nil {
		vv.showFailure(err)
		return
	}
	vv.hideNotice()
	vv.start(runPlay, req, nil)
}

func (vv *voiceView) previewTapped(r *voiceRow) {
	if r.pick.Selected == "" {
		vv.showFailure(errors.New("choose a voice to preview"))
		return
	}
	vv.hideNotice()
	vv.start(runPreview, app.SpeakRequest{Text: previewText, Voice: r.pick.Selected, Speed: vv.speed.Value}, nil)
}

// readAloud says text with the tab's voice and speed; onEnd runs on the UI
// goroutine when the speech ends, is stopped or fails (err says which).
// It returns the speech, which stopSpeech ends.
func (vv *voiceView) readAloud(text string, onEnd func(error)) (*speechRun, error) {
	if strings.TrimSpace(text) == "" {
		return nil, errors.New("this reply has nothing to read aloud")
	}
	if vv.voices == nil && vv.voicesErr != nil {
		return nil, readAloudFailure(vv.voicesErr)
	}
	voice, speed, err := vv.lastVoice()
	if err != nil {
		return nil, fmt.Errorf("no voice to read with: %w in the Voice tab", err)
	}
	return vv.start(runRead, app.SpeakRequest{Text: text, Voice: voice, Speed: speed}, onEnd), nil
}

// stopSpeech stops r if it is the speech going on.
func (vv *voiceView) stopSpeech(r *speechRun) {
	if vv.cur == r {
		vv.halt()
	}
}

// halt stops the speech going on: its synthesis at the next chunk, its
// sound at once.
func (vv *voiceView) halt() {
	if r := vv.cur; r != nil && r.stop() {
		vv.headline.SetText("Stopping…")
		vv.updateControls()
	}
}

// defaultCloseWait bounds how long closing the studio waits for its
// speeches to end: a synthesis notices the stop only between chunks, which
// can take seconds on a slow device.
const defaultCloseWait = time.Second

// close stops every speech still going, the one shown and those it
// replaced, and waits until each is silent and, for at most vv.closeWait in
// all, until each has ended and closed its sound. A synthesis still going
// after that ends on its own; its sound is already stopped.
func (vv *voiceView) close() {
	runs := vv.liveRuns()
	for _, r := range runs {
		r.stop()
	}
	deadline := time.NewTimer(vv.closeWait)
	defer deadline.Stop()
	for _, r := range runs {
		select {
		case <-r.silent:
		case <-r.done:
		case <-deadline.C:
			return
		}
	}
	for _, r := range runs {
		select {
		case <-r.done:
		case <-deadline.C:
			return
		}
	}
}

// liveRuns drops the speeches that have ended from vv.runs and returns the
// others.
func (vv *voiceView) liveRuns() []*speechRun {
	vv.runs = slices.DeleteFunc(vv.runs, func(r *speechRun) bool {
		select {
		case <-r.done:
			return true
		default:
			return false
		}
	})
	return vv.runs
}

// runKind is what a speech is for.
type runKind int

const (
	runPlay    runKind = iota // Play: heard, drawn and kept for Export
	runExport                 // Export of text not yet synthesised: drawn, silent
	runPreview                // a voice's sample: heard only
	runRead                   // a chat reply read aloud: heard only
)

// drawn says whether the speech shows in the waveform.
func (k runKind) drawn() bool { return k == runPlay || k == runExport }

// start begins a speech on a goroutine of its own, stopping the one going
// on: there is one sound card, and one voice at a time.
func (vv *voiceView) start(kind runKind, req app.SpeakRequest, onEnd func(error)) *speechRun {
	if old := vv.cur; old != nil {
		old.stop()
	}
	job, ctx := newStoppable()
	r := &speechRun{stoppable: job, kind: kind, req: req, onEnd: onEnd, silent: make(chan struct{})}
	vv.cur = r
	vv.runs = append(vv.liveRuns(), r)
	if kind.drawn() {
		vv.wave.Clear()
		vv.shown, vv.shownAudio = nil, nil
	}
	vv.setWords(nil, -1)
	vv.clock.SetText("")
	switch kind {
	case runPreview:
		vv.headline.SetText("Previewing " + req.Voice + "…")
	case runRead:
		vv.headline.SetText("Reading a chat reply aloud…")
	default:
		vv.headline.SetText("Synthesising…")
	}
	vv.updateControls()
	// The speech stays with the engine it started on if the studio
	// replaces its engine.
	eng, newPlayer, post := vv.engine(), vv.newPlayer, vv.st.post
	go r.run(ctx, eng, newPlayer, func() { post(func() { vv.update(r) }) })
	return r
}

// update shows what r reported since the last update.
func (vv *voiceView) update(r *speechRun) {
	r.mu.Lock()
	samples, words := r.pending, r.words
	r.pending = nil
	pos, playing, noAudio, chunks, ended := r.position, r.playing, r.noAudio, r.chunks, r.ended
	r.mu.Unlock()
	if vv.cur != r {
		if ended {
			vv.finish(r)
		}
		return
	}
	if r.kind.drawn() && len(samples) > 0 {
		vv.wave.Append(samples)
	}
	if noAudio != nil && !r.toldNoAudio && r.kind == runPlay {
		r.toldNoAudio = true
		vv.showNotice(noAudioText(noAudio), widget.WarningImportance, false)
	}
	total := samplesDuration(r.samples(), app.SampleRate)
	if r.kind.drawn() {
		total = vv.wave.Duration()
	}
	if playing {
		vv.clock.SetText(clockText(pos) + " / " + clockText(total))
		if r.kind.drawn() {
			vv.wave.SetCursor(pos)
			vv.setWords(words, wordAt(words, pos))
		}
	} else if chunks > 0 {
		vv.clock.SetText(clockText(total))
	}
	if !r.stopping && !ended {
		switch {
		case r.kind == runExport:
			vv.headline.SetText(fmt.Sprintf("Synthesising for export: %s", plural(chunks, "chunk")))
		case r.kind.drawn() && playing:
			vv.headline.SetText("Speaking")
		case r.kind.drawn():
			vv.headline.SetText(fmt.Sprintf("Synthesising: %s", plural(chunks, "chunk")))
		}
	}
	if ended {
		vv.finish(r)
	}
}

// finish shows how r ended and tells its caller.
func (vv *voiceView) finish(r *speechRun) {
	if r.finished {
		return
	}
	r.finished = true
	err := r.err
	stopped := errors.Is(err, context.Canceled)
	if vv.cur == r {
		vv.cur = nil
		vv.wave.HideCursor()
		switch {
		case stopped:
			vv.headline.SetText("Stopped")
		case err != nil:
			vv.headline.SetText("The speech failed")
			if r.onEnd == nil {
				vv.showFailure(err)
			}
		case r.kind.drawn():
			vv.headline.SetText("Done: " + clockText(vv.wave.Duration()) + " of speech")
		default:
			vv.headline.SetText("Done")
		}
		if r.kind.drawn() {
			vv.setWords(nil, -1)
			if err == nil {
				vv.shown, vv.shownAudio = &r.req, r.all
			}
		}
		vv.updateControls()
	}
	if r.onEnd != nil {
		r.onEnd(err)
	}
}

// updateControls enables what can be done now.
func (vv *voiceView) updateControls() {
	r := vv.cur
	haveVoices := len(vv.voices) > 0
	making := r != nil && r.kind.drawn()
	setEnabled(haveVoices && !making, vv.play, vv.export)
	setEnabled(r != nil && !r.stopping, vv.stop)
	setEnabled(haveVoices, vv.addVoice)
	for _, row := range vv.rows {
		setEnabled(haveVoices, row.preview, row.pick)
	}
}

// exportTapped makes the speech, if it is not the one shown, then asks
// where to save it and saves it.
func (vv *voiceView) exportTapped() {
	vv.exportSpeech(vv.askSavePath)
}

// askSavePath shows the save dialog and gives save the path chosen, if any.
// fyne's dialog has created, so emptied, the file at that path before its
// callback runs: it is shown only once the speech to save is complete, so
// that no failed or stopped synthesis leaves a file the user had there
// empty.
func (vv *voiceView) askSavePath(save func(path string)) {
	d := dialog.NewFileSave(func(w fyne.URIWriteCloser, err error) {
		if err != nil {
			vv.st.showError(err)
			return
		}
		if w == nil {
			return
		}
		w.Close()
		save(w.URI().Path())
	}, vv.st.win)
	d.SetFileName("speech.wav")
	d.SetFilter(storage.NewExtensionFileFilter([]string{".wav"}))
	d.Resize(fyne.NewSize(800, 560))
	d.Show()
}

// exportTo saves the speech of the form at path (the tests' way in).
func (vv *voiceView) exportTo(path string) {
	vv.exportSpeech(func(save func(string)) { save(path) })
}

// exportSpeech saves the speech of the form in the chosen format: the last
// finished speech's samples when it is of the form as it is now, or a new
// synthesis, silent, when it is not. ask is asked where to save only once
// the samples are complete; a synthesis that fails or is stopped asks
// nothing and touches no file.
func (vv *voiceView) exportSpeech(ask func(save func(path string))) {
	req, err := vv.request()
	if err != nil {
		vv.showFailure(err)
		return
	}
	asFloat := vv.format.Selected == formatFloat
	if vv.shown != nil && *vv.shown == req {
		audio := vv.shownAudio
		ask(func(path string) { vv.writeWAV(path, audio, asFloat) })
		return
	}
	vv.hideNotice()
	var r *speechRun
	r = vv.start(runExport, req, func(err error) {
		switch {
		case errors.Is(err, context.Canceled):
		case err != nil:
			vv.showFailure(err)
		default:
			audio := r.all
			ask(func(path string) { vv.writeWAV(path, audio, asFloat) })
		}
	})
}

// writeWAV writes audio off the UI goroutine and says where it went.
// audio is a finished speech's, which nothing changes after.
func (vv *voiceView) writeWAV(path string, audio []float32, asFloat bool) {
	vv.showNotice("Saving "+filepath.Base(path)+"…", widget.MediumImportance, false)
	go func() {
		err := app.WriteSpeech(path, audio, asFloat)
		vv.st.post(func() {
			if err != nil {
				vv.showNotice("The speech could not be saved: "+err.Error(), widget.DangerImportance, false)
				return
			}
			vv.showNotice(fmt.Sprintf("Saved %s of speech to %s.", clockText(samplesDuration(len(audio), app.SampleRate)), homeShort(path)),
				widget.SuccessImportance, false)
		})
	}()
}

// showFailure explains err under the buttons.
func (vv *voiceView) showFailure(err error) {
	switch {
	case errors.Is(err, app.ErrNoVoiceModel):
		vv.showNotice(noVoiceModelText(err), widget.WarningImportance, true)
	case errors.Is(err, app.ErrNoAudioDevice):
		vv.showNotice(noAudioText(err), widget.WarningImportance, false)
	case errors.Is(err, errNothingToSay):
		vv.showNotice("Nothing to say: type or paste the text to read aloud first.", widget.WarningImportance, false)
	case errors.Is(err, app.ErrTraining):
		vv.showNotice("The GPU is fine-tuning in the Tune tab, so it cannot speak now. Speech works again when the run ends or is stopped.", widget.WarningImportance, false)
	case errors.Is(err, app.ErrBusy):
		vv.showNotice("The engine is busy with other requests; press Play again in a moment.", widget.WarningImportance, false)
	default:
		vv.showNotice("The speech failed: "+err.Error(), widget.DangerImportance, false)
	}
}

func noAudioText(err error) string {
	return "No audio output device (" + err.Error() + "): Play draws the speech without sound, and Export… still saves it."
}

// A notice that shows or hides changes the left column's height: it is
// laid out again at once, as the Tune tab's are.

func (vv *voiceView) showNotice(text string, imp widget.Importance, lookAgain bool) {
	vv.notice.Importance = imp
	vv.notice.SetText(text)
	if lookAgain {
		vv.lookAgain.Show()
		vv.download.Show()
		defer vv.left.ScrollToBottom() // the notice and its buttons sit below the form
	} else {
		vv.lookAgain.Hide()
		vv.download.Hide()
	}
	vv.noticeBx.Show()
	vv.left.Refresh()
}

func (vv *voiceView) hideNotice() {
	if vv.noticeBx.Visible() {
		vv.noticeBx.Hide()
		vv.left.Refresh()
	}
}

// wordContext is how many words show on each side of the spoken one.
const wordContext = 8

// setWords shows the word at index i of words with some on each side, the
// spoken one highlighted; i < 0 shows nothing.
func (vv *voiceView) setWords(words []app.WordTime, i int) {
	if i == vv.wordAt && i >= 0 {
		return
	}
	vv.wordAt = i
	if i < 0 || i >= len(words) {
		vv.wordAt = -1
		vv.words.Segments = nil
		vv.words.Refresh()
		return
	}
	join := func(ws []app.WordTime) string {
		parts := make([]string, len(ws))
		for k, w := range ws {
			parts[k] = w.Text
		}
		return strings.Join(parts, " ")
	}
	from, to := max(i-wordContext, 0), min(i+1+wordContext, len(words))
	before, after := join(words[from:i]), join(words[i+1:to])
	if from > 0 {
		before = "…" + before
	}
	if to < len(words) {
		after += "…"
	}
	dim := widget.RichTextStyleInline
	dim.ColorName = theme.ColorNamePlaceHolder
	now := widget.RichTextStyleInline
	now.ColorName = theme.ColorNamePrimary
	now.TextStyle = fyne.TextStyle{Bold: true}
	if before != "" {
		before += " "
	}
	if after != "" {
		after = " " + after
	}
	vv.words.Segments = []widget.RichTextSegment{
		&widget.TextSegment{Style: dim, Text: before},
		&widget.TextSegment{Style: now, Text: words[i].Text},
		&widget.TextSegment{Style: dim, Text: after},
	}
	vv.words.Refresh()
}

// wordAt is the index of the word being heard at pos: the last one that
// has started, -1 before the first.
func wordAt(words []app.WordTime, pos time.Duration) int {
	return sort.Search(len(words), func(i int) bool { return words[i].Start > pos }) - 1
}

// clockText is d as m:ss.t.
func clockText(d time.Duration) string {
	d = max(d, 0)
	tenths := int64(d / (100 * time.Millisecond))
	return fmt.Sprintf("%d:%02d.%d", tenths/600, tenths/10%60, tenths%10)
}

// speechRun is a speech being made and played. The run's goroutine adds
// what the engine emits under mu; a ticker posts an update to the UI
// goroutine every voiceInterval, which takes it.
type speechRun struct {
	stoppable
	kind  runKind
	req   app.SpeakRequest
	onEnd func(error) // on the UI goroutine, when the speech has ended
	// silent is closed once the speech can no longer be heard: at once
	// when it has no player, else when its player is stopped.
	silent chan struct{}

	// The UI goroutine's.
	finished    bool
	toldNoAudio bool

	mu       sync.Mutex
	pending  []float32 // samples not shown yet
	all      []float32 // every sample; read by the UI only once ended
	words    []app.WordTime
	chunks   int
	position time.Duration // of the player
	playing  bool          // a player is open and has been given audio
	noAudio  error         // why there is no player
	ended    bool
	err      error
}

func (r *speechRun) samples() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.all)
}

// run synthesises r.req on eng and plays each chunk as it comes, then waits
// until the speech has been heard. tick asks for an update of the UI.
func (r *speechRun) run(ctx context.Context, eng speaker, newPlayer func() (audioPlayer, error), tick func()) {
	defer close(r.done)
	defer r.cancel()
	var p audioPlayer
	if r.kind != runExport {
		var err error
		if p, err = newPlayer(); err != nil {
			p = nil
			if r.kind != runPlay {
				// A preview or a read-aloud is only its sound.
				close(r.silent)
				r.end(err)
				tick()
				return
			}
			r.mu.Lock()
			r.noAudio = err
			r.mu.Unlock()
		}
	}
	// Stop silences the sound card at once when the speech is stopped,
	// without waiting for the chunk being synthesised.
	var unhook func() bool
	if p != nil {
		unhook = context.AfterFunc(ctx, func() { p.Stop(); close(r.silent) })
	} else {
		close(r.silent)
	}
	ticking := make(chan struct{})
	tickerDone := make(chan struct{})
	go func() {
		defer close(tickerDone)
		t := time.NewTicker(voiceInterval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				if p != nil {
					pos := p.Position()
					r.mu.Lock()
					r.position = pos
					r.mu.Unlock()
				}
				tick()
			case <-ticking:
				return
			}
		}
	}()
	err := eng.Speak(ctx, r.req, func(c app.SpeechChunk) error {
		// The player, pending and all each copy the chunk's audio.
		if p != nil {
			p.Enqueue(c.Audio)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.pending = append(r.pending, c.Audio...)
		r.all = append(r.all, c.Audio...)
		r.words = append(r.words, c.Words...)
		r.chunks++
		r.playing = p != nil
		return nil
	})
	if err == nil && p != nil {
		err = p.Wait(ctx)
		if errors.Is(err, app.ErrNoAudioDevice) && r.kind == runPlay {
			// The sound card failed while playing: the speech is whole
			// all the same, drawn and ready for Export.
			r.mu.Lock()
			r.noAudio, r.playing = err, false
			r.mu.Unlock()
			err = nil
		}
	}
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	close(ticking)
	<-tickerDone
	if p != nil {
		if unhook() {
			// The hook never ran: the speech ended on its own, or it was
			// stopped and Speak saw ctx.Done before the cancel reached the
			// hook (a context closes Done before it runs its AfterFuncs),
			// in which case its sound is stopped here.
			if ctx.Err() != nil {
				p.Stop()
			}
			p.Close() // its only failure would be a second Close
			close(r.silent)
		} else {
			<-r.silent
			p.Close()
		}
	}
	r.end(err)
	tick()
}

func (r *speechRun) end(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ended, r.err = true, err
}

// screenshotVoiceText is what the Voice tab's screenshot reads.
const screenshotVoiceText = "The hearth is the heart of the home. Its warmth gathers everyone at the end of the day, and its light keeps the dark at bay."

// screenshotVoice fills the Voice tab for its picture: a sample text in a
// blend of two voices, once the voices are listed (a few seconds at most).
// It does not press Play: the screenshots' Kokoro is the small fixture
// model, which takes tens of seconds to load and speak on lavapipe, and
// the whole run of the studio has 90 s.
func (st *studio) screenshotVoice() {
	vv := st.voice
	if vv == nil {
		return
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		listing := false
		fyne.DoAndWait(func() { listing = vv.listing })
		if !listing {
			break
		}
	}
	fyne.DoAndWait(func() {
		vv.text.SetText(screenshotVoiceText)
		if len(vv.voices) > 1 {
			vv.addRow("")
			vv.rows[0].weight.SetValue(0.6)
			vv.rows[1].weight.SetValue(0.4)
		}
	})
}
