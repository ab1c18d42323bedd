package ui

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/app/chats"
	"github.com/hearthstudio/hearth/app/settings"
)

// fakeSpeaker is an engine that speaks chunks of a sine wave, two words a
// chunk. With gate set, each chunk after the first waits for a value on
// it (or for the speech to be stopped), so a test sees the speech while
// it is still being made.
type fakeSpeaker struct {
	voices    []string
	voicesErr error
	dir       string // the Kokoro directory it names
	speakErr  error
	chunks    int
	chunkLen  int // samples
	gate      chan struct{}
	lag       time.Duration // how long the first Speak takes to return once stopped
	deaf      chan struct{} // when set, each chunk after the first waits for it, stopped or not

	mu      sync.Mutex
	reqs    []app.SpeakRequest
	emitted int
	ended   error // what the last Speak returned
}

func (f *fakeSpeaker) Voices() ([]string, error) { return slices.Clone(f.voices), f.voicesErr }

func (f *fakeSpeaker) KokoroDir() (string, error) { return f.dir, nil }

func (f *fakeSpeaker) Speak(ctx context.Context, req app.SpeakRequest, emit func(app.SpeechChunk) error) (err error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	lag := f.lag
	if len(f.reqs) > 1 {
		lag = 0
	}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.ended = err
		f.mu.Unlock()
	}()
	if f.speakErr != nil {
		return f.speakErr
	}
	for i := range f.chunks {
		if i > 0 && f.deaf != nil {
			<-f.deaf
		}
		if i > 0 && f.gate != nil {
			select {
			case <-f.gate:
			case <-ctx.Done():
				time.Sleep(lag)
				return ctx.Err()
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		audio := make([]float32, f.chunkLen)
		for k := range audio {
			audio[k] = 0.5 * float32(math.Sin(float64(k)/10))
		}
		start := samplesDuration(i*f.chunkLen, app.SampleRate)
		half := samplesDuration(f.chunkLen/2, app.SampleRate)
		words := []app.WordTime{
			{Text: fmt.Sprintf("w%d", 2*i), Start: start, End: start + half},
			{Text: fmt.Sprintf("w%d", 2*i+1), Start: start + half, End: start + 2*half},
		}
		if err := emit(app.SpeechChunk{Text: fmt.Sprintf("chunk %d.", i), Audio: audio, Start: start, Words: words}); err != nil {
			return err
		}
		f.mu.Lock()
		f.emitted++
		f.mu.Unlock()
	}
	return nil
}

func (f *fakeSpeaker) requests() []app.SpeakRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

// fakePlayer keeps what it is given; its position is the test's to set.
// Wait returns at once unless hold is set, then when hold is closed or the
// speech stopped.
type fakePlayer struct {
	hold    chan struct{}
	waitErr error // what Wait returns when not held

	mu       sync.Mutex
	got      []float32
	enqueues int
	pos      time.Duration
	stopped  bool
	closed   bool
}

func (p *fakePlayer) Enqueue(s []float32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got = append(p.got, s...)
	p.enqueues++
}

func (p *fakePlayer) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
}

func (p *fakePlayer) Wait(ctx context.Context) error {
	if p.hold == nil {
		return p.waitErr
	}
	select {
	case <-p.hold:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *fakePlayer) Position() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pos
}

func (p *fakePlayer) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	return nil
}

func (p *fakePlayer) state() (enqueues int, stopped, closed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.enqueues, p.stopped, p.closed
}

var testVoices = []string{"af_bella", "af_heart", "am_adam", "bf_emma"}

// useFakes makes vv speak with fs and play through fp (or fail to open
// the sound card with playerErr), and lists fs's voices.
func useFakes(vv *voiceView, fs *fakeSpeaker, fp *fakePlayer, playerErr error) {
	vv.engine = func() speaker { return fs }
	vv.newPlayer = func() (audioPlayer, error) {
		if playerErr != nil {
			return nil, playerErr
		}
		return fp, nil
	}
	vv.listVoices()
}

// voiceStudio is a test studio on a UI loop with the Voice tab showing,
// speaking with fakes.
func voiceStudio(t *testing.T, fs *fakeSpeaker, fp *fakePlayer, playerErr error) (*studio, *voiceView, fyne.Window, *uiLoop) {
	t.Helper()
	l := newUILoop(t)
	st, w := newTestStudioWith(t, func(st *studio) { st.post = l.do }, l.wait)
	vv := st.voice
	l.wait(func() {
		w.Resize(fyne.NewSize(1100, 720))
		st.tabs.SelectIndex(1)
		useFakes(vv, fs, fp, playerErr)
	})
	t.Cleanup(func() { l.wait(vv.close) })
	eventually(t, l, "the voices listed", func() bool { return !vv.listing })
	return st, vv, w, l
}

func TestVoiceTabBuilds(t *testing.T) {
	st, vv, _, l := voiceStudio(t, &fakeSpeaker{voices: testVoices}, &fakePlayer{}, nil)
	l.wait(func() {
		if st.tabs.Items[1].Content != vv || st.tabs.Items[1].Text != "Voice" {
			t.Fatal("the Voice tab is not the voice view")
		}
		if len(vv.rows) != 1 || vv.rows[0].pick.Selected != "af_heart" || !slices.Equal(vv.rows[0].pick.Options, testVoices) {
			t.Errorf("the voice picker offers %v with %q chosen, want the engine's voices and af_heart", vv.rows[0].pick.Options, vv.rows[0].pick.Selected)
		}
		if vv.rows[0].weightLine.Visible() || vv.blendLabel.Visible() {
			t.Error("a single voice shows a weight or a blend")
		}
		if vv.play.Disabled() || vv.export.Disabled() || !vv.stop.Disabled() {
			t.Errorf("Play disabled %v, Export disabled %v, Stop disabled %v", vv.play.Disabled(), vv.export.Disabled(), vv.stop.Disabled())
		}
		if vv.speed.Min != 0.5 || vv.speed.Max != 2 || vv.speed.Value != 1 {
			t.Errorf("speed slider %v..%v at %v", vv.speed.Min, vv.speed.Max, vv.speed.Value)
		}
		if vv.noticeBx.Visible() {
			t.Errorf("a notice shows: %q", vv.notice.Text)
		}
		if !strings.Contains(shown(vv), "The speech's waveform is drawn here") {
			t.Error("the empty waveform does not say what it is for")
		}
	})
}

// Play streams: the first chunk is playing and drawn while the next is
// still to be made; the cursor and the spoken word follow the player; Stop
// cancels the synthesis and silences the player.
func TestVoicePlayStreamsAndStopCancels(t *testing.T) {
	fs := &fakeSpeaker{voices: testVoices, chunks: 4, chunkLen: 12000, gate: make(chan struct{})}
	fp := &fakePlayer{hold: make(chan struct{})}
	_, vv, _, l := voiceStudio(t, fs, fp, nil)
	l.wait(func() {
		vv.text.SetText("Hello there. How are you today?")
		test.Tap(vv.play)
		if !vv.play.Disabled() || vv.stop.Disabled() {
			t.Errorf("while speaking Play disabled %v, Stop disabled %v", vv.play.Disabled(), vv.stop.Disabled())
		}
	})
	eventually(t, l, "the first chunk drawn", func() bool { return len(vv.wave.Samples()) == 12000 })
	fs.mu.Lock()
	emitted := fs.emitted
	fs.mu.Unlock()
	if n, _, _ := fp.state(); n != 1 || emitted != 1 {
		t.Errorf("with one chunk made: %d given to the player, %d emitted", n, emitted)
	}
	fs.gate <- struct{}{}
	eventually(t, l, "the second chunk drawn", func() bool { return len(vv.wave.Samples()) == 24000 })

	// 0.6 s in: the second word of the second chunk (each word is 0.25 s).
	fp.mu.Lock()
	fp.pos = 600 * time.Millisecond
	fp.mu.Unlock()
	eventually(t, l, "the cursor and the word", func() bool { return vv.wave.showCursor && vv.wordAt == 2 })
	l.wait(func() {
		if vv.wave.cursor != 600*time.Millisecond {
			t.Errorf("cursor at %v", vv.wave.cursor)
		}
		if got := spokenWord(vv.words); got != "w2" {
			t.Errorf("the highlighted word is %q, want w2", got)
		}
		if !strings.Contains(vv.words.String(), "w0 w1 w2 w3") {
			t.Errorf("the words line reads %q", vv.words.String())
		}
		if vv.clock.Text != "0:00.6 / 0:01.0" {
			t.Errorf("the clock says %q", vv.clock.Text)
		}
		test.Tap(vv.stop)
	})
	eventually(t, l, "the speech to stop", func() bool { return vv.cur == nil })
	_, stopped, closed := fp.state()
	fs.mu.Lock()
	ended, emitted := fs.ended, fs.emitted
	fs.mu.Unlock()
	if !stopped || !closed || !errors.Is(ended, context.Canceled) || emitted != 2 {
		t.Errorf("after Stop: player stopped %v closed %v; synthesis returned %v after %d chunks", stopped, closed, ended, emitted)
	}
	l.wait(func() {
		if vv.headline.Text != "Stopped" || vv.play.Disabled() || !vv.stop.Disabled() || vv.wave.showCursor {
			t.Errorf("after Stop: headline %q, Play disabled %v, Stop disabled %v, cursor %v", vv.headline.Text, vv.play.Disabled(), vv.stop.Disabled(), vv.wave.showCursor)
		}
		if vv.shown != nil {
			t.Error("a stopped speech is kept for Export")
		}
	})
	if r := fs.requests(); len(r) != 1 || r[0].Text != "Hello there. How are you today?" || r[0].Voice != "af_heart" || r[0].Speed != 1 {
		t.Errorf("requests %+v", r)
	}
}

// Closing the studio stops every speech, the one shown and the one it
// replaced, and waits until they have closed their sound; a synthesis that
// does not notice the stop holds the close up for closeWait at most.
func TestVoiceCloseStopsEverySpeech(t *testing.T) {
	newPlayers := func(vv *voiceView, mu *sync.Mutex, players *[]*fakePlayer) {
		vv.newPlayer = func() (audioPlayer, error) {
			p := &fakePlayer{hold: make(chan struct{})}
			mu.Lock()
			*players = append(*players, p)
			mu.Unlock()
			return p, nil
		}
	}
	// closeWithin runs close on the UI goroutine and says how long it took,
	// failing if it took longer than limit.
	closeWithin := func(t *testing.T, l *uiLoop, vv *voiceView, limit time.Duration) time.Duration {
		t.Helper()
		done := make(chan time.Duration, 1)
		go func() {
			t0 := time.Now()
			l.wait(vv.close)
			done <- time.Since(t0)
		}()
		select {
		case d := <-done:
			return d
		case <-time.After(limit):
			t.Fatalf("close still waiting after %v", limit)
			return 0
		}
	}
	speakAndReplace := func(t *testing.T, fs *fakeSpeaker, l *uiLoop, vv *voiceView, mu *sync.Mutex, players *[]*fakePlayer) {
		t.Helper()
		l.wait(func() {
			vv.text.SetText("Two chunks.")
			test.Tap(vv.play)
		})
		eventually(t, l, "the first chunk", func() bool { return len(vv.wave.Samples()) == 1000 })
		l.wait(func() { vv.previewTapped(vv.rows[0]) })
		eventually(t, l, "the preview's chunk", func() bool {
			mu.Lock()
			defer mu.Unlock()
			if len(*players) != 2 {
				return false
			}
			n, _, _ := (*players)[1].state()
			return n == 1
		})
	}

	t.Run("replaced", func(t *testing.T) {
		fs := &fakeSpeaker{voices: testVoices, chunks: 2, chunkLen: 1000, gate: make(chan struct{}), lag: 600 * time.Millisecond}
		_, vv, _, l := voiceStudio(t, fs, &fakePlayer{}, nil)
		var mu sync.Mutex
		var players []*fakePlayer
		// The replaced speech ends 600 ms after its stop; close must wait
		// for it. The default 1 s bound on that wait left too little room
		// when other test binaries loaded the 2 cores (this failed at a
		// load average of 18), so the bound is long here and the test
		// still sees close wait for the speech and return once it ends.
		l.wait(func() {
			newPlayers(vv, &mu, &players)
			vv.closeWait = 20 * time.Second
		})
		speakAndReplace(t, fs, l, vv, &mu, &players)
		closeWithin(t, l, vv, 25*time.Second)
		mu.Lock()
		defer mu.Unlock()
		for i, p := range players {
			if _, stopped, closed := p.state(); !stopped || !closed {
				t.Errorf("speech %d after close: player stopped %v, closed %v", i, stopped, closed)
			}
		}
	})

	t.Run("deaf synthesis", func(t *testing.T) {
		fs := &fakeSpeaker{voices: testVoices, chunks: 2, chunkLen: 1000, deaf: make(chan struct{})}
		_, vv, _, l := voiceStudio(t, fs, &fakePlayer{}, nil)
		var hear sync.Once
		// A close that waits for the synthesis is released at the end.
		t.Cleanup(func() { hear.Do(func() { close(fs.deaf) }) })
		var mu sync.Mutex
		var players []*fakePlayer
		l.wait(func() { newPlayers(vv, &mu, &players) })
		speakAndReplace(t, fs, l, vv, &mu, &players)
		d := closeWithin(t, l, vv, vv.closeWait+3*time.Second)
		if d < vv.closeWait/2 {
			t.Errorf("close returned after %v while the synthesis was still going", d)
		}
		mu.Lock()
		for i, p := range players {
			if _, stopped, _ := p.state(); !stopped {
				t.Errorf("speech %d is still heard after close", i)
			}
		}
		mu.Unlock()
		hear.Do(func() { close(fs.deaf) })
		eventually(t, l, "the speeches to end", func() bool { return len(vv.liveRuns()) == 0 })
	})
}

// spokenWord is the bold segment of the words line.
func spokenWord(rt *widget.RichText) string {
	for _, s := range rt.Segments {
		if ts, ok := s.(*widget.TextSegment); ok && ts.Style.TextStyle.Bold {
			return ts.Text
		}
	}
	return ""
}

// A speech played to its end is exported as it was heard, in 16-bit or
// float WAV; once the text changes, Export synthesises it again.
func TestVoicePlayThenExport(t *testing.T) {
	fs := &fakeSpeaker{voices: testVoices, chunks: 3, chunkLen: 1000}
	fp := &fakePlayer{}
	_, vv, _, l := voiceStudio(t, fs, fp, nil)
	l.wait(func() {
		vv.text.SetText("Three short chunks.")
		vv.speed.SetValue(1.5)
		test.Tap(vv.play)
	})
	eventually(t, l, "the end", func() bool { return vv.cur == nil })
	dir := t.TempDir()
	l.wait(func() {
		if !strings.HasPrefix(vv.headline.Text, "Done") || len(vv.wave.Samples()) != 3000 || vv.shown == nil {
			t.Fatalf("after the speech: %q, %d samples", vv.headline.Text, len(vv.wave.Samples()))
		}
		vv.exportTo(filepath.Join(dir, "pcm.wav"))
	})
	eventually(t, l, "the export", func() bool { return strings.HasPrefix(vv.notice.Text, "Saved") })
	l.wait(func() {
		vv.format.SetSelected(formatFloat)
		vv.exportTo(filepath.Join(dir, "float.wav"))
	})
	eventually(t, l, "the float export", func() bool {
		return strings.HasPrefix(vv.notice.Text, "Saved") && strings.Contains(vv.notice.Text, "float.wav")
	})
	if n := len(fs.requests()); n != 1 {
		t.Errorf("exporting what was heard synthesised it again: %d requests", n)
	}
	checkWAV(t, filepath.Join(dir, "pcm.wav"), 1, 16, 3000)
	checkWAV(t, filepath.Join(dir, "float.wav"), 3, 32, 3000)

	l.wait(func() {
		vv.text.SetText("Other words.")
		vv.exportTo(filepath.Join(dir, "other.wav"))
	})
	eventually(t, l, "the new export", func() bool {
		return strings.HasPrefix(vv.notice.Text, "Saved") && strings.Contains(vv.notice.Text, "other.wav")
	})
	reqs := fs.requests()
	if len(reqs) != 2 || reqs[1].Text != "Other words." || reqs[1].Speed != 1.5 {
		t.Errorf("requests %+v, want a second for the new text", reqs)
	}
	if n, _, _ := fp.state(); n != 3 {
		t.Errorf("the export's synthesis was played: %d chunks given to the player", n)
	}
	checkWAV(t, filepath.Join(dir, "other.wav"), 3, 32, 3000)
}

// checkWAV reads a WAV's header: its format tag, bits and samples.
func checkWAV(t *testing.T, path string, format, bits, samples int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 44 || string(b[:4]) != "RIFF" || string(b[8:12]) != "WAVE" {
		t.Fatalf("%s is not a WAV file", path)
	}
	gotFormat, gotBits := int(binary.LittleEndian.Uint16(b[20:])), int(binary.LittleEndian.Uint16(b[34:]))
	rate := int(binary.LittleEndian.Uint32(b[24:]))
	data := len(b) - 44
	if gotFormat != format || gotBits != bits || rate != app.SampleRate || data < samples*bits/8 {
		t.Errorf("%s: format %d, %d bits, %d Hz, %d data bytes; want format %d, %d bits, %d samples",
			filepath.Base(path), gotFormat, gotBits, rate, data, format, bits, samples)
	}
}

// Export asks where to save only once the speech is complete: fyne's save
// dialog empties the file chosen before it answers, so a synthesis that
// fails or is stopped must not have asked, and a WAV the user had there
// keeps its samples.
func TestVoiceExportAsksOnlyOnceSynthesised(t *testing.T) {
	fs := &fakeSpeaker{voices: testVoices, chunks: 2, chunkLen: 1000, gate: make(chan struct{})}
	_, vv, _, l := voiceStudio(t, fs, &fakePlayer{}, nil)
	path := filepath.Join(t.TempDir(), "speech.wav")
	const old = "the user's old WAV"
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	var asked int
	// ask does what fyne's dialog does: it creates the file, then answers.
	ask := func(save func(string)) {
		asked++
		f, err := os.Create(path)
		if err != nil {
			t.Error(err)
			return
		}
		f.Close()
		save(path)
	}
	keptOld := func(when string) {
		t.Helper()
		if b, err := os.ReadFile(path); err != nil || string(b) != old {
			t.Errorf("%s: the file holds %q (%v), want %q", when, b, err, old)
		}
	}

	// Stopped after the first chunk.
	l.wait(func() {
		vv.text.SetText("Two chunks.")
		vv.exportSpeech(ask)
	})
	eventually(t, l, "the first chunk", func() bool { return len(vv.wave.Samples()) == 1000 })
	l.wait(func() {
		if asked != 0 {
			t.Errorf("asked where to save %d times during the synthesis", asked)
		}
		test.Tap(vv.stop)
	})
	eventually(t, l, "the stop", func() bool { return vv.cur == nil })
	l.wait(func() {
		if asked != 0 || vv.headline.Text != "Stopped" {
			t.Errorf("a stopped export asked %d times (%q)", asked, vv.headline.Text)
		}
	})
	keptOld("after a stopped export")

	// Failed.
	fs.mu.Lock()
	fs.speakErr = errors.New("kokoro: the GPU fell over")
	fs.mu.Unlock()
	l.wait(func() { vv.exportSpeech(ask) })
	eventually(t, l, "the failure", func() bool { return vv.cur == nil && strings.Contains(vv.notice.Text, "fell over") })
	l.wait(func() {
		if asked != 0 {
			t.Errorf("a failed export asked %d times", asked)
		}
	})
	keptOld("after a failed export")

	// Finished: asked once, after the last chunk, and saved.
	fs.mu.Lock()
	fs.speakErr, fs.gate = nil, nil
	fs.mu.Unlock()
	l.wait(func() { vv.exportSpeech(ask) })
	eventually(t, l, "the save", func() bool { return strings.HasPrefix(vv.notice.Text, "Saved") })
	l.wait(func() {
		if asked != 1 {
			t.Errorf("a finished export asked %d times, want 1", asked)
		}
	})
	checkWAV(t, path, 1, 16, 2000)
}

// TestVoiceTabRemembersChoices: the voice, blend, speed and export format
// chosen are saved in the settings, and a studio started with them shows
// them once the voices are listed; a saved voice whose pack is gone
// leaves the tab at its default.
func TestVoiceTabRemembersChoices(t *testing.T) {
	st, vv, _, l := voiceStudio(t, &fakeSpeaker{voices: testVoices}, &fakePlayer{}, nil)
	l.wait(func() {
		if st.settings.Voice != (settings.Voice{}) {
			t.Errorf("settings %+v before any choice", st.settings.Voice)
		}
		vv.rows[0].pick.SetSelected("am_adam")
		vv.addRow("bf_emma")
		vv.rows[1].weight.SetValue(0.25)
		vv.rows[1].weight.OnChangeEnded(0.25) // as a drag ends
		vv.speed.SetValue(1.5)
		vv.speed.OnChangeEnded(1.5)
		vv.format.SetSelected(formatFloat)
	})
	want := settings.Voice{Voice: "am_adam:0.5,bf_emma:0.25", Speed: 1.5, Float: true}
	l.wait(func() {
		if st.settings.Voice != want {
			t.Errorf("saved %+v, want %+v", st.settings.Voice, want)
		}
	})

	for _, tc := range []struct {
		saved     settings.Voice
		rows      []string
		speed     float64
		asFloat   bool
		blendSpec string
	}{
		{want, []string{"am_adam", "bf_emma"}, 1.5, true, "am_adam:0.67,bf_emma:0.33"},
		{settings.Voice{Voice: "af_gone:0.5,am_adam:0.5", Speed: 0.75}, []string{"af_heart"}, 0.75, false, "af_heart"},
	} {
		l2 := newUILoop(t)
		st2, w2 := newTestStudioWith(t, func(st *studio) { st.post, st.settings.Voice = l2.do, tc.saved }, l2.wait)
		vv2 := st2.voice
		l2.wait(func() {
			w2.Resize(fyne.NewSize(1100, 720))
			useFakes(vv2, &fakeSpeaker{voices: testVoices}, &fakePlayer{}, nil)
		})
		t.Cleanup(func() { l2.wait(vv2.close) })
		eventually(t, l2, "the voices listed", func() bool { return !vv2.listing })
		l2.wait(func() {
			var rows []string
			for _, r := range vv2.rows {
				rows = append(rows, r.pick.Selected)
			}
			spec, _ := vv2.voiceSpec()
			if !slices.Equal(rows, tc.rows) || spec != tc.blendSpec || math.Abs(vv2.speed.Value-tc.speed) > 1e-9 || (vv2.format.Selected == formatFloat) != tc.asFloat {
				t.Errorf("saved %+v: rows %v (%s), speed %v, format %s", tc.saved, rows, spec, vv2.speed.Value, vv2.format.Selected)
			}
		})
	}
}

func TestBlendSpec(t *testing.T) {
	for _, c := range []struct {
		terms   []blendTerm
		want    string
		wantErr bool
	}{
		{[]blendTerm{{"af_heart", 1}}, "af_heart", false},
		{[]blendTerm{{"af_heart", 0.6}, {"am_adam", 0.4}}, "af_heart:0.6,am_adam:0.4", false},
		{[]blendTerm{{"af_heart", 0.3}, {"am_adam", 0.2}}, "af_heart:0.6,am_adam:0.4", false},
		{[]blendTerm{{"a", 1}, {"b", 1}, {"c", 1}}, "a:0.33,b:0.33,c:0.33", false},
		{[]blendTerm{{"a", 1}, {"b", 0}}, "a", false},                               // a weight of 0 leaves the voice out
		{[]blendTerm{{"a", 1}, {"", 1}}, "a", false},                                // a row with no voice chosen
		{[]blendTerm{{"a", 0.5}, {"b", 0.25}, {"a", 0.25}}, "a:0.75,b:0.25", false}, // named twice: summed
		{[]blendTerm{{"a", 1000}, {"b", 1}}, "a:1,b:0.01", false},                   // never rounded to 0
		{[]blendTerm{{"a", math.NaN()}, {"b", math.Inf(1)}, {"c", -1}}, "", true},
		{nil, "", true},
	} {
		got, err := blendSpec(c.terms)
		if got != c.want || (err != nil) != c.wantErr {
			t.Errorf("blendSpec(%v) = %q, %v; want %q (error %v)", c.terms, got, err, c.want, c.wantErr)
		}
	}
}

// Blending in the tab: a second voice with the weights set makes the
// spec Play sends; removing it goes back to one voice.
func TestVoiceBlendInTheTab(t *testing.T) {
	fs := &fakeSpeaker{voices: testVoices, chunks: 1, chunkLen: 100}
	_, vv, _, l := voiceStudio(t, fs, &fakePlayer{}, nil)
	l.wait(func() {
		test.Tap(vv.addVoice)
		if len(vv.rows) != 2 || vv.rows[1].pick.Selected != "af_bella" || !vv.rows[0].weightLine.Visible() {
			t.Fatalf("after adding a voice: %d rows, the new one %q", len(vv.rows), vv.rows[1].pick.Selected)
		}
		vv.rows[1].pick.SetSelected("am_adam")
		vv.rows[0].weight.SetValue(0.6)
		vv.rows[1].weight.SetValue(0.4)
		if vv.blendLabel.Text != "Blend: af_heart:0.6,am_adam:0.4" || strings.TrimSpace(vv.rows[0].share.Text) != "60%" {
			t.Errorf("the blend shows %q, the first share %q", vv.blendLabel.Text, vv.rows[0].share.Text)
		}
		vv.text.SetText("Blended.")
		test.Tap(vv.play)
	})
	eventually(t, l, "the end", func() bool { return vv.cur == nil })
	l.wait(func() {
		if r := fs.requests(); len(r) != 1 || r[0].Voice != "af_heart:0.6,am_adam:0.4" {
			t.Errorf("requests %+v", r)
		}
		test.Tap(vv.rows[1].preview)
	})
	eventually(t, l, "the preview", func() bool { return len(fs.requests()) == 2 && vv.cur == nil })
	l.wait(func() {
		if r := fs.requests()[1]; r.Voice != "am_adam" || r.Text != previewText {
			t.Errorf("the preview asked for %+v, want the sample in am_adam alone", r)
		}
		if len(vv.wave.Samples()) != 100 {
			t.Error("the preview replaced the waveform")
		}
		test.Tap(vv.rows[1].remove)
		if len(vv.rows) != 1 || vv.rows[0].weightLine.Visible() || vv.blendLabel.Visible() {
			t.Errorf("after removing: %d rows, blend %q", len(vv.rows), vv.blendLabel.Text)
		}
		if spec, _ := vv.voiceSpec(); spec != "af_heart" {
			t.Errorf("the spec after removing the second voice: %q", spec)
		}
	})
}

// The states the tab explains: no voice model (and where it goes), no
// sound card (synthesis and export go on), nothing to say, a failure. One
// studio serves them all, its fakes replaced for each.
func TestVoiceErrorStates(t *testing.T) {
	noModel := &app.NoVoiceModelError{Dir: "/home/me/.config/hearth/kokoro", Missing: errors.New("no kokoro-v1_0.pth in /home/me/.config/hearth/kokoro")}
	fs := &fakeSpeaker{voicesErr: noModel}
	_, vv, _, l := voiceStudio(t, fs, &fakePlayer{}, nil)
	// with lists the voices again with new fakes.
	with := func(fs *fakeSpeaker, fp *fakePlayer, playerErr error) {
		l.wait(func() { useFakes(vv, fs, fp, playerErr) })
		eventually(t, l, "the voices listed", func() bool { return !vv.listing })
	}
	// play presses Play on text and waits for the speech's end.
	play := func(text string) {
		l.wait(func() {
			vv.text.SetText(text)
			test.Tap(vv.play)
		})
		eventually(t, l, "the speech's end", func() bool { return vv.cur == nil })
	}

	t.Run("no voice model", func(t *testing.T) {
		l.wait(func() {
			text := shown(vv)
			if !strings.Contains(text, "No Kokoro voice model") || !strings.Contains(text, "no kokoro-v1_0.pth in /home/me/.config/hearth/kokoro") ||
				!strings.Contains(text, "Press Download Kokoro-82M") || !strings.Contains(text, "put the files in /home/me/.config/hearth/kokoro and press Look again") ||
				strings.Contains(text, "hearth pull") {
				t.Errorf("the tab says %q", text)
			}
			if !vv.lookAgain.Visible() || !vv.download.Visible() || vv.download.Text != "Download Kokoro-82M" || !vv.play.Disabled() || !vv.export.Disabled() || !vv.rows[0].preview.Disabled() {
				t.Errorf("Look again shown %v, Download shown %v, Play disabled %v, Export disabled %v", vv.lookAgain.Visible(), vv.download.Visible(), vv.play.Disabled(), vv.export.Disabled())
			}
			fs.voicesErr, fs.voices = nil, testVoices
			test.Tap(vv.lookAgain)
		})
		eventually(t, l, "the voices after Look again", func() bool { return len(vv.voices) == 4 })
		l.wait(func() {
			if vv.noticeBx.Visible() || vv.play.Disabled() {
				t.Errorf("with the model there: notice %q, Play disabled %v", vv.notice.Text, vv.play.Disabled())
			}
			// The voices are there but Speak finds no model.
			fs.speakErr = noModel
		})
		play("Hello.")
		l.wait(func() {
			if !vv.noticeBx.Visible() || !strings.Contains(vv.notice.Text, "no kokoro-v1_0.pth in") || !vv.lookAgain.Visible() || !vv.download.Visible() {
				t.Errorf("Play without a model says %q", vv.notice.Text)
			}
		})
	})
	t.Run("no audio device", func(t *testing.T) {
		noDevice := fmt.Errorf("audio: %w: ALSA: no card", app.ErrNoAudioDevice)
		with(&fakeSpeaker{voices: testVoices, chunks: 2, chunkLen: 500}, nil, noDevice)
		play("Silent.")
		l.wait(func() {
			if !strings.Contains(vv.notice.Text, "No audio output device") || !strings.Contains(vv.notice.Text, "Export") {
				t.Errorf("the notice says %q", vv.notice.Text)
			}
			if len(vv.wave.Samples()) != 1000 || vv.shown == nil || vv.export.Disabled() || vv.play.Disabled() {
				t.Errorf("without sound: %d samples drawn, kept for export %v, Export disabled %v", len(vv.wave.Samples()), vv.shown != nil, vv.export.Disabled())
			}
			// A preview is only its sound: it says why there is none.
			test.Tap(vv.rows[0].preview)
		})
		eventually(t, l, "the preview's failure", func() bool { return vv.cur == nil && strings.Contains(vv.notice.Text, "ALSA: no card") })
	})
	t.Run("sound card lost", func(t *testing.T) {
		lost := &fakePlayer{waitErr: fmt.Errorf("audio: %w: the device went away", app.ErrNoAudioDevice)}
		with(&fakeSpeaker{voices: testVoices, chunks: 2, chunkLen: 500}, lost, nil)
		play("Cut short.")
		l.wait(func() {
			if !strings.Contains(vv.notice.Text, "the device went away") || vv.shown == nil || len(vv.shownAudio) != 1000 {
				t.Errorf("after the sound card failed: notice %q, kept for export %v", vv.notice.Text, vv.shown != nil)
			}
		})
	})
	t.Run("nothing to say", func(t *testing.T) {
		fs := &fakeSpeaker{voices: testVoices, chunks: 1, chunkLen: 10}
		with(fs, &fakePlayer{}, nil)
		l.wait(func() {
			vv.text.SetText("  \n\t ")
			test.Tap(vv.play)
			if !strings.HasPrefix(vv.notice.Text, "Nothing to say") || !vv.noticeBx.Visible() || vv.cur != nil {
				t.Errorf("Play with no text: %q", vv.notice.Text)
			}
			vv.notice.SetText("")
			vv.exportTo(filepath.Join(t.TempDir(), "x.wav"))
			if !strings.HasPrefix(vv.notice.Text, "Nothing to say") {
				t.Errorf("Export with no text: %q", vv.notice.Text)
			}
		})
		if n := len(fs.requests()); n != 0 {
			t.Errorf("%d requests for no text", n)
		}
	})
	t.Run("fine-tuning", func(t *testing.T) {
		with(&fakeSpeaker{voices: testVoices, speakErr: fmt.Errorf("%w tiny-qwen2", app.ErrTraining)}, &fakePlayer{}, nil)
		play("Hello.")
		l.wait(func() {
			if !strings.Contains(vv.notice.Text, "fine-tuning in the Tune tab") {
				t.Errorf("Play during a fine-tuning run says %q", vv.notice.Text)
			}
		})
	})
	t.Run("failure", func(t *testing.T) {
		with(&fakeSpeaker{voices: testVoices, speakErr: errors.New("kokoro: the GPU fell over")}, &fakePlayer{}, nil)
		play("Hello.")
		l.wait(func() {
			if !strings.Contains(vv.notice.Text, "the GPU fell over") || vv.headline.Text != "The speech failed" {
				t.Errorf("the failure shows %q / %q", vv.headline.Text, vv.notice.Text)
			}
		})
	})
}

// Read aloud speaks a reply's text without its Markdown, in the Voice
// tab's voice; pressed again it stops; a reply being written is not read.
func TestChatReadsAReplyAloud(t *testing.T) {
	st, cv := chatStudio(t)
	fs := &fakeSpeaker{voices: testVoices, chunks: 3, chunkLen: 100, gate: make(chan struct{})}
	fp := &fakePlayer{hold: make(chan struct{})}
	vv := st.voice
	on(cv, func() {
		useFakes(vv, fs, fp, nil)
		t.Cleanup(func() { on(cv, vv.close) })
	})
	waitFor(t, cv, "the voices", 30*time.Second, func() bool { return !vv.listing })
	reply := "# Plan\n\nThis is **bold** and a [link](https://example.com).\n\n- first item\n- second item\n\n```go\nfmt.Println(1)\n```\n"
	on(cv, func() {
		vv.speed.SetValue(1.25)
		cv.cur.Add(chats.Message{Role: chats.User, Content: "Plan?"}, time.Now())
		cv.cur.Add(chats.Message{Role: chats.Assistant, Content: reply, Reply: chats.Reply{Stop: "stop"}}, time.Now())
		cv.truncateRows(0)
		cv.appendRows()
		if cv.rows[0].speak != nil || cv.rows[1].speak == nil {
			t.Fatal("the read-aloud button is not on the reply alone")
		}
		test.Tap(cv.rows[1].speak)
		if cv.reading != cv.rows[1] {
			t.Error("the reply is not being read")
		}
	})
	waitFor(t, cv, "the first chunk", 30*time.Second, func() bool { n, _, _ := fp.state(); return n == 1 })
	reqs := fs.requests()
	want := "Plan\nThis is bold and a link.\nfirst item\nsecond item"
	if len(reqs) != 1 || reqs[0].Text != want || reqs[0].Voice != "af_heart" || reqs[0].Speed != 1.25 {
		t.Errorf("read aloud asked for %+v, want %q in af_heart at 1.25", reqs, want)
	}
	on(cv, func() { test.Tap(cv.rows[1].speak) })
	waitFor(t, cv, "the reading to stop", 30*time.Second, func() bool { return cv.reading == nil && vv.cur == nil })
	if _, stopped, closed := fp.state(); !stopped || !closed {
		t.Errorf("pressed again: player stopped %v, closed %v", stopped, closed)
	}
	on(cv, func() {
		// A reply being written: its button waits for its end.
		live := newMessageRow(cv, 1, chats.Message{Role: chats.Assistant, Content: "partial"}, true)
		if !live.speak.Disabled() {
			t.Error("the button of a reply being written is enabled")
		}
		cv.readAloud(live)
		if cv.reading != nil || vv.cur != nil {
			t.Error("a reply being written was read")
		}
		live.finish(chats.Message{Role: chats.Assistant, Content: "done now", Reply: chats.Reply{Stop: "stop"}})
		if live.speak.Disabled() {
			t.Error("the button stays disabled after the reply ended")
		}
	})
	if n := len(fs.requests()); n != 1 {
		t.Errorf("%d requests, want only the finished reply's", n)
	}
}

// With no voice model the chat's read-aloud says why.
func TestChatReadAloudWithoutAVoice(t *testing.T) {
	st, cv := chatStudio(t)
	fs := &fakeSpeaker{voicesErr: &app.NoVoiceModelError{Dir: "/nowhere/kokoro", Missing: errors.New("/nowhere/kokoro does not exist")}}
	on(cv, func() { useFakes(st.voice, fs, &fakePlayer{}, nil) })
	waitFor(t, cv, "the listing", 30*time.Second, func() bool { return !st.voice.listing })
	on(cv, func() {
		cv.cur.Add(chats.Message{Role: chats.Assistant, Content: "Hi.", Reply: chats.Reply{Stop: "stop"}}, time.Now())
		cv.truncateRows(0)
		cv.appendRows()
		test.Tap(cv.rows[0].speak)
	})
	waitFor(t, cv, "a dialog", 30*time.Second, func() bool { return strings.Contains(overlayText(st.win), "no Kokoro voice model") })
	// It points at a button that is where it says: on the Voice tab,
	// showing, with that label.
	text := overlayText(st.win)
	if !strings.Contains(text, "/nowhere/kokoro does not exist") || !strings.Contains(text, "Open the Voice tab and press Download Kokoro-82M there") {
		t.Errorf("the dialog says %q", text)
	}
	on(cv, func() {
		vv := st.voice
		if st.tabs.Items[1].Text != "Voice" || st.tabs.Items[1].Content != vv || vv.download.Text != "Download Kokoro-82M" || !vv.download.Visible() {
			t.Errorf("the Voice tab shows no Download Kokoro-82M button: %q, shown %v", vv.download.Text, vv.download.Visible())
		}
	})
	if len(fs.requests()) != 0 {
		t.Error("read aloud asked the engine with no voice")
	}
}

func TestSpeakableText(t *testing.T) {
	for _, c := range []struct{ md, want string }{
		{"Plain words.", "Plain words."},
		{"**Bold** and *italic* and `code`.", "Bold and italic and code."},
		{"## A heading\n\nA paragraph\nwrapped.", "A heading\nA paragraph wrapped."},
		{"1. one\n2. two", "one\ntwo"},
		{"Before.\n\n```\nx := 1\n```\n\nAfter.", "Before.\nAfter."},
		{"> quoted", "quoted"},
		{"", ""},
	} {
		if got := speakableText(c.md); got != c.want {
			t.Errorf("speakableText(%q) = %q, want %q", c.md, got, c.want)
		}
	}
	// Broken Markdown and bytes are read as they come, without a panic.
	if got := speakableText("\x00\xff[broken](<"); !strings.Contains(got, "broken") {
		t.Errorf("broken Markdown read as %q", got)
	}
}

func TestClockText(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0:00.0", 1500 * time.Millisecond: "0:01.5", 75 * time.Second: "1:15.0", -time.Second: "0:00.0"} {
		if got := clockText(d); got != want {
			t.Errorf("clockText(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestVoiceDownloadKokoro: with no model the tab offers Download
// Kokoro-82M; its dialog pulls the voices chosen into the engine's Kokoro
// directory with a progress bar, Cancel stops it, and once it is done the
// tab lists the voices without a restart.
func TestVoiceDownloadKokoro(t *testing.T) {
	const dir = "/home/me/.config/hearth/kokoro"
	fs := &fakeSpeaker{dir: dir, voicesErr: &app.NoVoiceModelError{Dir: dir, Missing: errors.New(dir + " does not exist")}}
	_, vv, _, l := voiceStudio(t, fs, &fakePlayer{}, nil)
	asked := make(chan app.KokoroPullOptions, 2)
	release := make(chan struct{})
	l.wait(func() {
		if !vv.noticeBx.Visible() || !vv.download.Visible() {
			t.Fatalf("no Download button with the no-model notice %q", vv.notice.Text)
		}
		vv.pullKokoro = func(ctx context.Context, o app.KokoroPullOptions) (app.KokoroPull, error) {
			asked <- o
			o.Progress(app.KokoroProgress{File: "kokoro-v1_0.pth", Done: 50, Total: 200})
			select {
			case <-release:
				return app.KokoroPull{Dir: o.Dir, Voices: testVoices}, nil
			case <-ctx.Done():
				return app.KokoroPull{}, fmt.Errorf("download: %w (kept for a resume)", ctx.Err())
			}
		}
		test.Tap(vv.download)
	})
	eventually(t, l, "the download dialog", func() bool { return vv.pulling != nil })
	kd := vv.pulling
	l.wait(func() {
		if kd.voices.Selected != kokoroFewVoices {
			t.Errorf("the dialog starts with %q chosen, want the few voices", kd.voices.Selected)
		}
		kd.voices.SetSelected(kokoroEnglishVoices)
		test.Tap(kd.start)
	})
	o := <-asked
	if o.Dir != dir || !slices.Equal(o.Voices, []string{app.EnglishVoices}) {
		t.Errorf("pulled with %+v, want the engine's Kokoro directory and the English voices", o)
	}
	eventually(t, l, "the progress", func() bool { return kd.progress.Visible() && kd.progress.Value == 0.25 })
	l.wait(func() {
		if kd.close.Text != "Cancel" || !kd.start.Disabled() || !strings.Contains(kd.message.Text, "kokoro-v1_0.pth") {
			t.Errorf("while downloading: %q button, Download disabled %v, message %q", kd.close.Text, kd.start.Disabled(), kd.message.Text)
		}
		test.Tap(kd.close)
	})
	eventually(t, l, "the cancel", func() bool { return strings.HasPrefix(kd.message.Text, "Canceled") })
	l.wait(func() {
		if kd.close.Text != "Close" || kd.start.Disabled() || kd.progress.Visible() || vv.pulling != kd {
			t.Errorf("after Cancel: %q button, Download disabled %v, the dialog closed %v", kd.close.Text, kd.start.Disabled(), vv.pulling != kd)
		}
		fs.voices, fs.voicesErr = testVoices, nil // what the finished download leaves
		test.Tap(kd.start)
	})
	<-asked
	close(release)
	eventually(t, l, "the voices after the download", func() bool { return len(vv.voices) == len(testVoices) })
	l.wait(func() {
		if vv.pulling != nil || vv.download.Visible() || vv.play.Disabled() || !strings.Contains(vv.notice.Text, "Kokoro-82M is ready") {
			t.Errorf("after the download: dialog open %v, Download shown %v, Play disabled %v, notice %q",
				vv.pulling != nil, vv.download.Visible(), vv.play.Disabled(), vv.notice.Text)
		}
	})
}
