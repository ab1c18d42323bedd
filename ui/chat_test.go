package ui

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/hearthstudio/hearth/app/chats"
	"github.com/hearthstudio/hearth/app/library"
	"github.com/hearthstudio/hearth/app/settings"
	"github.com/hearthstudio/hearth/engine/synth"
)

// uiLoop is the UI goroutine that Fyne's test driver lacks. The test
// driver runs fyne.Do inline on whichever goroutine calls it
// (test/driver.go: DoFromGoroutine), so under it the engine's goroutine
// would change widgets while the test reads them, and nothing could show
// whether the UI goroutine stays free. The GLFW driver queues fyne.Do's
// functions and runs them one at a time on the main goroutine between
// frames (internal/driver/glfw/loop.go); uiLoop does the same, and a test
// studio posts to it (studio.post). The test reaches the widgets only
// through it, as a user's clicks would.
type uiLoop struct {
	mu      sync.Mutex
	queue   []func()
	stopped bool
	longest time.Duration // the longest function it ran
	wake    chan struct{}
	done    chan struct{}
}

func newUILoop(t *testing.T) *uiLoop {
	l := &uiLoop{wake: make(chan struct{}, 1), done: make(chan struct{})}
	go l.run()
	t.Cleanup(l.stop)
	return l
}

// do queues f without waiting, as fyne.Do does. It never blocks: the
// engine's goroutine must not wait for the UI.
func (l *uiLoop) do(f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return
	}
	l.queue = append(l.queue, f)
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// wait runs f on the loop and returns when it has run.
func (l *uiLoop) wait(f func()) {
	ran := make(chan struct{})
	l.do(func() { f(); close(ran) })
	select {
	case <-ran:
	case <-l.done:
	}
}

func (l *uiLoop) run() {
	defer close(l.done)
	for range l.wake {
		for {
			l.mu.Lock()
			if len(l.queue) == 0 || l.stopped {
				stopped := l.stopped
				l.mu.Unlock()
				if stopped {
					return
				}
				break
			}
			f := l.queue[0]
			l.queue = l.queue[1:]
			l.mu.Unlock()
			start := time.Now()
			f()
			d := time.Since(start)
			l.mu.Lock()
			l.longest = max(l.longest, d)
			l.mu.Unlock()
		}
	}
}

func (l *uiLoop) stop() {
	l.mu.Lock()
	if !l.stopped {
		l.stopped = true
		close(l.wake)
	}
	l.mu.Unlock()
	<-l.done
}

// chatStudio is a test studio posting to a uiLoop, with a window of the
// studio's usual size so that replies wrap as they would. setup, if not
// nil, runs before the engine starts.
func chatStudio(t *testing.T, setup ...func(*studio)) (*studio, *chatView) {
	t.Helper()
	l := newUILoop(t)
	st, w := newTestStudioWith(t, func(st *studio) {
		st.post = l.do
		for _, f := range setup {
			f(st)
		}
	}, l.wait)
	var cv *chatView
	l.wait(func() {
		w.Resize(fyne.NewSize(1100, 720))
		cv = st.tabs.Items[0].Content.(*chatView)
	})
	loops.Store(cv, l)
	// Stop a reply and write every chat before the studio and its engine
	// close.
	t.Cleanup(func() { l.wait(cv.close) })
	return st, cv
}

// loops finds a chat view's loop, so helpers take only the view.
var loops sync.Map

func loopOf(cv *chatView) *uiLoop {
	l, _ := loops.Load(cv)
	return l.(*uiLoop)
}

// on runs f on cv's UI loop and waits for it.
func on(cv *chatView, f func()) { loopOf(cv).wait(f) }

// loadTiny writes a tiny random-weight Llama and loads it: a model that
// goes through the same code as a user's, and answers in milliseconds.
func loadTiny(t *testing.T, st *studio) {
	t.Helper()
	dir := t.TempDir()
	writeTiny(t, filepath.Join(dir, "tiny-llama.gguf"))
	// The studio's engine loads library names only, so the model goes
	// through a library that lists it, as a model the user chose does.
	st.libMu.Lock()
	st.lib = library.New(library.Roots{Folders: []string{dir}})
	st.libMu.Unlock()
	if _, err := st.engine.Load(context.Background(), "tiny-llama", nil); err != nil {
		t.Fatal(err)
	}
}

func writeTiny(t *testing.T, path string) {
	t.Helper()
	p, ok := synth.PresetByName("tiny-llama")
	if !ok {
		t.Fatal("no tiny-llama preset")
	}
	if err := synth.WriteFile(path, p, synth.Options{Quant: "Q8_0", Seed: 7}); err != nil {
		t.Fatal(err)
	}
}

// greedy sets temperature 0, so replies are the same on every run, and
// the reply length.
func greedy(cv *chatView, maxTokens int) {
	on(cv, func() {
		cv.st.settings.Sampling.Temperature = 0
		cv.st.settings.Sampling.MaxTokens = maxTokens
	})
}

// send types text into the message box and presses Enter.
func send(cv *chatView, text string) {
	on(cv, func() {
		cv.input.SetText(text)
		cv.input.TypedKey(&fyne.KeyEvent{Name: fyne.KeyReturn})
	})
}

// waitFor polls cond on the UI loop until it holds. Waits on fakes and
// the UI itself take 30 s: they pass in milliseconds on an idle machine,
// and 5 s failed while go test ran the other packages beside them; only a
// hang runs out the 30 s.
func waitFor(t *testing.T, cv *chatView, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var ok bool
		on(cv, func() { ok = cond() })
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitReply(t *testing.T, cv *chatView) {
	t.Helper()
	waitFor(t, cv, "the reply to end", 60*time.Second, func() bool { return cv.gen == nil })
}

// rendered is the text a row's Markdown shows, block after block.
func rendered(r *messageRow) string {
	var b strings.Builder
	for _, o := range r.md.box.Objects {
		b.WriteString(o.(*widget.RichText).String())
	}
	return b.String()
}

// savedChats reads the chat files as a new start would.
func savedChats(t *testing.T, st *studio) []*chats.Conversation {
	t.Helper()
	s, err := chats.Open(filepath.Join(st.dir, "chats"))
	if err != nil {
		t.Fatal(err)
	}
	convs, bad, err := s.Load()
	if err != nil || len(bad) > 0 {
		t.Fatalf("loading the saved chats: %v %v", err, bad)
	}
	return convs
}

func TestChatStreamsAReply(t *testing.T) {
	st, cv := chatStudio(t)
	loadTiny(t, st)
	greedy(cv, 300)
	// Watch the reply grow: several different prefixes of the final text
	// must show before it ends. The tiny model writes its 300 tokens in
	// about a tenth of a second, one or two of the studio's 75 ms updates,
	// so the test updates every millisecond and records each update as
	// the transcript shows it.
	var seen []string
	on(cv, func() {
		cv.streamEvery = time.Millisecond
		cv.onStream = func(text string) {
			if s := cv.rows[1].md.src; s != text {
				t.Errorf("an update of %q shows %q", text, s)
			}
			if text != "" && (len(seen) == 0 || seen[len(seen)-1] != text) {
				seen = append(seen, text)
			}
		}
	})
	send(cv, "Hello there")
	waitReply(t, cv)
	on(cv, func() {
		c := cv.cur
		if len(c.Messages) != 2 || c.Messages[0].Content != "Hello there" || c.Messages[0].Role != chats.User {
			t.Fatalf("messages %+v, want the user's and a reply", c.Messages)
		}
		reply := c.Messages[1]
		if reply.Reply.Tokens != 300 || reply.Reply.Stop != "length" || reply.Reply.TokensPerSecond <= 0 || reply.Reply.Model == "" {
			t.Errorf("reply statistics %+v, want 300 tokens cut at the length limit, a rate and the model", reply.Reply)
		}
		// The last update may show the whole reply before it ends; the
		// ones before it must show parts of it.
		partial := 0
		for _, s := range seen {
			if !strings.HasPrefix(reply.Content, s) {
				t.Errorf("an update showed %q (%d bytes), not a prefix of the reply (%d bytes)", s, len(s), len(reply.Content))
				break
			}
			if s != reply.Content {
				partial++
			}
		}
		if partial < 2 {
			t.Errorf("the reply showed %d partial states before it ended (of %d updates), want it streamed", partial, len(seen))
		}
		if cv.rows[1].md.src != reply.Content || strings.TrimSpace(rendered(cv.rows[1])) == "" {
			t.Errorf("the transcript shows %q, want the reply", rendered(cv.rows[1]))
		}
		if cv.rows[0].plain.Text != "Hello there" {
			t.Errorf("the user's row shows %q", cv.rows[0].plain.Text)
		}
		if m := cv.rows[1].meta.Text; !strings.Contains(m, "300 tokens") || !strings.Contains(m, "tokens/s") {
			t.Errorf("the reply's header says %q, want its tokens and speed", m)
		}
		if m := cv.meter.Text; !strings.Contains(m, "/ 2048") {
			t.Errorf("the meter says %q, want the context use out of 2048", m)
		}
		if cv.send.Text != "Send" || cv.regenerate.Disabled() {
			t.Errorf("after the reply: button %q, regenerate disabled %v", cv.send.Text, cv.regenerate.Disabled())
		}
		test.Tap(cv.rows[1].copy)
		if got := st.app.Clipboard().Content(); got != reply.Content {
			t.Errorf("the copy button copied %q", got)
		}
		cv.saver.Flush()
	})
	saved := savedChats(t, st)
	if len(saved) != 1 || len(saved[0].Messages) != 2 || saved[0].Messages[1].Reply.Tokens != 300 || saved[0].Title != "Hello there" {
		t.Errorf("on disk: %+v", saved)
	}
}

// Esc stops a long reply after its first tokens; what was written stays,
// marked as stopped, on screen and on disk.
func TestChatStopKeepsWhatWasWritten(t *testing.T) {
	st, cv := chatStudio(t)
	loadTiny(t, st)
	greedy(cv, 2000)
	send(cv, "Hello there")
	waitFor(t, cv, "the first tokens", 30*time.Second, func() bool { return len(cv.rows) == 2 && cv.rows[1].md.src != "" })
	on(cv, func() {
		if cv.send.Text != "Stop" {
			t.Errorf("while a reply is written the button says %q, want Stop", cv.send.Text)
		}
		cv.st.win.Canvas().OnTypedKey()(&fyne.KeyEvent{Name: fyne.KeyEscape})
	})
	waitReply(t, cv)
	on(cv, func() {
		r := cv.cur.Messages[1]
		if r.Reply.Stop != "canceled" || r.Content == "" || r.Reply.Tokens >= 2000 {
			t.Errorf("stopped reply: %d tokens, stop %q, %d bytes; want a partial reply marked canceled", r.Reply.Tokens, r.Reply.Stop, len(r.Content))
		}
		if !strings.Contains(cv.rows[1].meta.Text, "stopped") {
			t.Errorf("the reply's header says %q, want it marked stopped", cv.rows[1].meta.Text)
		}
		if cv.send.Text != "Send" {
			t.Errorf("after stopping the button says %q", cv.send.Text)
		}
		cv.saver.Flush()
	})
	if saved := savedChats(t, st); len(saved) != 1 || saved[0].Messages[1].Reply.Stop != "canceled" {
		t.Errorf("on disk: %+v", saved)
	}
}

func TestChatSwitchRegenerateAndEdit(t *testing.T) {
	st, cv := chatStudio(t)
	loadTiny(t, st)
	greedy(cv, 8)
	send(cv, "first question")
	waitReply(t, cv)
	var a, b *chats.Conversation
	on(cv, func() {
		a = cv.cur
		cv.st.win.Canvas().(fyne.Shortcutable).TypedShortcut(&desktop.CustomShortcut{KeyName: fyne.KeyN, Modifier: fyne.KeyModifierShortcutDefault})
		if cv.cur == a || len(cv.cur.Messages) != 0 || len(cv.rows) != 0 {
			t.Fatalf("Ctrl+N did not open an empty chat")
		}
	})
	send(cv, "second question")
	waitReply(t, cv)
	on(cv, func() {
		b = cv.cur
		if len(cv.convs) != 2 || cv.convs[0] != b || cv.convs[1] != a {
			t.Fatalf("list %v, want the second chat above the first", titles(cv.convs))
		}
		// Switch back with the list, as a click would.
		cv.list.Select(1)
		if cv.cur != a || len(cv.rows) != 2 || cv.rows[0].plain.Text != "first question" || cv.title.Text != "first question" {
			t.Fatalf("after selecting the first chat: showing %q with %d rows", cv.title.Text, len(cv.rows))
		}
		cv.st.settings.Sampling.MaxTokens = 12
		test.Tap(cv.regenerate)
	})
	waitReply(t, cv)
	on(cv, func() {
		if len(a.Messages) != 2 || a.Messages[1].Reply.Tokens != 12 || len(cv.rows) != 2 {
			t.Fatalf("after regenerate: %d messages, reply of %d tokens; want the last reply written again with 12", len(a.Messages), a.Messages[1].Reply.Tokens)
		}
		if len(b.Messages) != 2 {
			t.Errorf("regenerating in one chat changed the other")
		}
	})
	send(cv, "a follow-up")
	waitReply(t, cv)
	on(cv, func() {
		if len(a.Messages) != 4 {
			t.Fatalf("%d messages after a follow-up, want 4", len(a.Messages))
		}
		test.Tap(cv.rows[0].edit)
		r := cv.rows[0]
		if r.editor == nil || r.editor.Text != "first question" {
			t.Fatalf("the edit button did not open an editor holding the message")
		}
		r.editor.SetText("edited question")
		test.Tap(r.resend)
	})
	waitReply(t, cv)
	on(cv, func() {
		if len(a.Messages) != 2 || a.Messages[0].Content != "edited question" || a.Messages[1].Reply.Tokens != 12 {
			t.Fatalf("after edit-and-resend: %+v, want the edited question and a new reply", a.Messages)
		}
		if len(cv.rows) != 2 || cv.rows[0].plain.Text != "edited question" || a.Title != "edited question" {
			t.Errorf("transcript or title not updated: %d rows, title %q", len(cv.rows), a.Title)
		}
		cv.deleteChat(b)
		if slices.Contains(cv.convs, b) || cv.cur != a {
			t.Errorf("deleting the other chat: list %v, showing %q", titles(cv.convs), cv.title.Text)
		}
		cv.saver.Flush()
	})
	if saved := savedChats(t, st); len(saved) != 1 || saved[0].ID != a.ID || saved[0].Messages[0].Content != "edited question" {
		t.Errorf("on disk: %v", titles(saved))
	}
}

func titles(cs []*chats.Conversation) []string {
	var out []string
	for _, c := range cs {
		out = append(out, displayTitle(c))
	}
	return out
}

// inDir makes a test studio use dir, as the next start of Hearth on the
// same folder would.
func inDir(t *testing.T, dir string) func(*studio) {
	return func(st *studio) {
		st.dir = dir
		s, err := settings.Load(st.settingsPath())
		if err != nil {
			t.Fatal(err)
		}
		s.Backend = "cpu"
		st.settings = s
	}
}

// A chat, its reply, its title and its system prompt are there after a
// restart; a corrupt and a truncated chat file beside it are reported and
// kept as .bad files, and do not stop the good one from loading.
func TestChatHistorySurvivesARestart(t *testing.T) {
	st, cv := chatStudio(t)
	loadTiny(t, st)
	greedy(cv, 6)
	on(cv, func() { cv.system.SetText("Answer in French.") })
	send(cv, "remember me")
	waitReply(t, cv)
	var id, reply string
	on(cv, func() {
		cv.rename(cv.cur, "Kept chat")
		id, reply = cv.cur.ID, cv.cur.Messages[1].Content
		cv.close()
	})
	st.settingsOut.flush() // as closing the studio does
	dir := filepath.Join(st.dir, "chats")
	good, err := os.ReadFile(filepath.Join(dir, id+".json"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "broken.json"), []byte("{\"id\": \"broken\", \"messages\": [{\"role\""), 0o600)
	os.WriteFile(filepath.Join(dir, "truncated.json"), good[:len(good)/3], 0o600)

	st2, cv2 := chatStudio(t, inDir(t, st.dir))
	on(cv2, func() {
		if text := overlayText(st2.win); !strings.Contains(text, "2 chat file(s) could not be loaded") || !strings.Contains(text, "broken.json") {
			t.Errorf("the studio said %q, want a report of the two bad files", text)
		}
		if len(cv2.convs) != 1 || cv2.cur.ID != id {
			t.Fatalf("after the restart: chats %v", titles(cv2.convs))
		}
		c := cv2.cur
		if c.Title != "Kept chat" || c.System != "Answer in French." || cv2.system.Text != "Answer in French." {
			t.Errorf("title %q, system prompt %q", c.Title, c.System)
		}
		if len(cv2.rows) != 2 || cv2.rows[0].plain.Text != "remember me" || cv2.rows[1].md.src != reply {
			t.Errorf("the transcript after the restart has %d rows", len(cv2.rows))
		}
		if !strings.Contains(cv2.rows[1].meta.Text, "6 tokens") {
			t.Errorf("the reply's statistics were lost: %q", cv2.rows[1].meta.Text)
		}
	})
	for _, name := range []string{"broken", "truncated"} {
		if _, err := os.Stat(filepath.Join(dir, name+".json.bad")); err != nil {
			t.Errorf("%s.json was not kept as %s.json.bad: %v", name, name, err)
		}
	}
}

// overlayText is the text of the dialog over w, if any.
func overlayText(w fyne.Window) string {
	top := w.Canvas().Overlays().Top()
	if top == nil {
		return ""
	}
	return shown(top)
}

// With no model loaded the chat says so, keeps the message, and offers the
// Models tab; once a model is loaded, Regenerate answers the message.
func TestChatWithoutAModel(t *testing.T) {
	st, cv := chatStudio(t)
	on(cv, func() {
		if !cv.noModel.Visible() {
			t.Error("no model is loaded, but the chat does not say so")
		}
	})
	send(cv, "anyone there?")
	waitReply(t, cv)
	on(cv, func() {
		if len(cv.cur.Messages) != 1 || len(cv.rows) != 1 {
			t.Errorf("%d messages, %d rows; want the user's message kept and no reply", len(cv.cur.Messages), len(cv.rows))
		}
		if len(cv.notice.Objects) == 0 {
			t.Fatal("no notice under the transcript")
		}
		row := cv.notice.Objects[0].(*fyne.Container)
		var label *widget.Label
		var button *widget.Button
		for _, o := range row.Objects {
			switch v := o.(type) {
			case *widget.Label:
				label = v
			case *widget.Button:
				button = v
			}
		}
		if label == nil || !strings.Contains(label.Text, "No model is loaded") || button == nil {
			t.Fatalf("the notice does not explain the missing model or offer the Models tab")
		}
		test.Tap(button)
		if st.tabs.SelectedIndex() != 3 {
			t.Errorf("the notice's button selected tab %d, want Models", st.tabs.SelectedIndex())
		}
		st.tabs.SelectIndex(0)
	})
	loadTiny(t, st)
	greedy(cv, 4)
	waitFor(t, cv, "the no-model banner to go", 30*time.Second, func() bool { return !cv.noModel.Visible() })
	on(cv, func() { test.Tap(cv.regenerate) })
	waitReply(t, cv)
	on(cv, func() {
		if len(cv.cur.Messages) != 2 || cv.cur.Messages[1].Reply.Tokens != 4 || len(cv.notice.Objects) != 0 {
			t.Errorf("after loading a model, Regenerate gave %+v", cv.cur.Messages)
		}
	})
}

// With no model loaded, the chat offers the library's models and loads the
// one chosen.
func TestChatPickerLoadsAModel(t *testing.T) {
	dir := t.TempDir()
	writeTiny(t, filepath.Join(dir, "tiny-llama.gguf"))
	_, cv := chatStudio(t, func(st *studio) { st.settings.Folders = []string{dir} })
	waitFor(t, cv, "the picker to offer the model", 30*time.Second, func() bool { return len(cv.picker.Options) == 1 })
	on(cv, func() {
		if !cv.noModel.Visible() {
			t.Error("the picker's banner is hidden though no model is loaded")
		}
		cv.picker.SetSelected(cv.picker.Options[0])
	})
	waitFor(t, cv, "the model to load", 30*time.Second, func() bool {
		return cv.model != nil && !cv.noModel.Visible() && cv.st.loading == ""
	})
	on(cv, func() {
		if cv.picker.Selected != "" {
			t.Errorf("the picker still shows %q after the load", cv.picker.Selected)
		}
	})
}

// Enter sends and Shift+Enter starts a new line; Esc in the message box
// stops the reply and Ctrl+N in it opens a new chat, though a focused
// entry gets keys before the canvas.
func TestChatKeys(t *testing.T) {
	st, cv := chatStudio(t)
	loadTiny(t, st)
	greedy(cv, 2000)
	on(cv, func() {
		e := cv.input
		cv.st.win.Canvas().Focus(e)
		test.Type(e, "line one")
		e.KeyDown(&fyne.KeyEvent{Name: desktop.KeyShiftLeft})
		e.TypedKey(&fyne.KeyEvent{Name: fyne.KeyReturn})
		e.KeyUp(&fyne.KeyEvent{Name: desktop.KeyShiftLeft})
		test.Type(e, "line two")
		if e.Text != "line one\nline two" || len(cv.cur.Messages) != 0 {
			t.Fatalf("after Shift+Enter: %q and %d messages", e.Text, len(cv.cur.Messages))
		}
		e.TypedKey(&fyne.KeyEvent{Name: fyne.KeyReturn})
		if e.Text != "" || len(cv.cur.Messages) != 2 || cv.cur.Messages[0].Content != "line one\nline two" {
			t.Fatalf("Enter did not send the message: box %q, messages %+v", e.Text, cv.cur.Messages)
		}
	})
	waitFor(t, cv, "the first tokens", 30*time.Second, func() bool { return cv.rows[1].md.src != "" })
	on(cv, func() { cv.input.TypedKey(&fyne.KeyEvent{Name: fyne.KeyEscape}) })
	waitReply(t, cv)
	on(cv, func() {
		if s := cv.cur.Messages[1].Reply.Stop; s != "canceled" {
			t.Errorf("Esc in the message box: reply stop %q, want canceled", s)
		}
		first := cv.cur
		cv.input.TypedShortcut(&desktop.CustomShortcut{KeyName: fyne.KeyN, Modifier: fyne.KeyModifierShortcutDefault})
		if cv.cur == first || len(cv.cur.Messages) != 0 {
			t.Errorf("Ctrl+N in the message box did not open a new chat")
		}
		// An empty chat is reused rather than a second one made.
		n := len(cv.convs)
		cv.newChat()
		if len(cv.convs) != n {
			t.Errorf("a second empty chat was made")
		}
	})
}

func TestSamplingForm(t *testing.T) {
	st, cv := chatStudio(t)
	on(cv, func() {
		f := newSamplingForm(st.settings.Sampling)
		if v, err := f.value(); err != nil || v != st.settings.Sampling {
			t.Fatalf("an untouched form gives %+v, %v; want the settings", v, err)
		}
		f.temperature.SetText("0.3")
		f.topK.SetText("20")
		f.topP.SetText("0.9")
		f.minP.SetText("0.1")
		f.repeat.SetText("1.1")
		f.maxTokens.SetText("256")
		cv.applySampling(f)
		want := settings.Sampling{Temperature: 0.3, TopK: 20, TopP: 0.9, MinP: 0.1, RepeatPenalty: 1.1, MaxTokens: 256}
		if st.settings.Sampling != want {
			t.Errorf("settings %+v, want %+v", st.settings.Sampling, want)
		}
		for name, bad := range map[string]func(*samplingForm){
			"not a number":         func(f *samplingForm) { f.temperature.SetText("warm") },
			"negative temperature": func(f *samplingForm) { f.temperature.SetText("-1") },
			"top-p above 1":        func(f *samplingForm) { f.topP.SetText("1.5") },
			"negative max tokens":  func(f *samplingForm) { f.maxTokens.SetText("-5") },
		} {
			f := newSamplingForm(want)
			bad(f)
			if _, err := f.value(); err == nil {
				t.Errorf("%s: the form accepted it", name)
			}
			cv.applySampling(f)
			if st.settings.Sampling != want {
				t.Errorf("%s: applied anyway: %+v", name, st.settings.Sampling)
			}
		}
	})
	if saved := savedSettings(t, st); saved.Sampling.TopK != 20 || saved.Sampling.MaxTokens != 256 {
		t.Errorf("settings file: %+v", saved.Sampling)
	}
}

// The UI goroutine keeps serving while a 2,000-token reply streams, the
// user switches chats and types, and the reply is saved on the way.
//
// The measure: a ticker posts a function to the UI loop every 10 ms, and
// each records how long it waited in the queue. Under the GLFW driver a
// frame is drawn between two batches of fyne.Do functions, so this lag is
// how late a frame or a click would be because of the chat's own work on
// the UI goroutine (Markdown parsing and layout); painting itself, which
// the test driver does not do, is not in it. What the test catches is an
// update whose cost grows with the reply (a whole 2,000-token reply parsed
// per token took seconds) or a wait for the engine, which would be the
// whole reply: both cost seconds. The bounds, 1 s for the longest single
// UI function and 2 s for the worst lag, catch those and still hold when
// other test binaries share the 2 cores: run alone the worst lag is about
// 40 ms, but at load averages of 12-15 it reached 583 and 725 ms, and a
// 250 ms bound failed `make test` for load alone.
func TestChatUINeverBlocks(t *testing.T) {
	st, cv := chatStudio(t)
	loadTiny(t, st)
	greedy(cv, 2000)
	l := loopOf(cv)

	var mu sync.Mutex
	var lags []time.Duration
	l.mu.Lock()
	l.longest = 0 // the studio's construction is not part of the measure
	l.mu.Unlock()
	stop := make(chan struct{})
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				posted := time.Now()
				l.do(func() {
					mu.Lock()
					lags = append(lags, time.Since(posted))
					mu.Unlock()
				})
			}
		}
	}()

	start := time.Now()
	send(cv, "Hello there")
	var a *chats.Conversation
	on(cv, func() { a = cv.cur })

	// Half a second in, switch to a new chat, type there, and come back.
	time.Sleep(500 * time.Millisecond)
	on(cv, func() {
		cv.newChat()
		test.Type(cv.input, "typed while a reply streams")
	})
	time.Sleep(300 * time.Millisecond)
	on(cv, func() { cv.open(a) })

	// A crash loses at most saveInterval of the reply: the file holds part
	// of it while it is still being written.
	var partial bool
	waitFor(t, cv, "the reply to end", 120*time.Second, func() bool {
		if cv.gen != nil && !partial {
			data, err := os.ReadFile(filepath.Join(st.dir, "chats", a.ID+".json"))
			var c chats.Conversation
			if err == nil && json.Unmarshal(data, &c) == nil && len(c.Messages) == 2 && c.Messages[1].Content != "" && c.Messages[1].Reply.Stop == "" {
				partial = true
			}
		}
		return cv.gen == nil
	})
	elapsed := time.Since(start)
	close(stop)
	<-ticked

	var reply chats.Message
	var box string
	on(cv, func() {
		reply = a.Messages[1]
		box = cv.input.Text
		if len(cv.rows) != 2 || cv.rows[1].md.src != reply.Content {
			t.Errorf("after switching back, the transcript does not show the finished reply")
		}
	})
	if reply.Reply.Tokens != 2000 {
		t.Fatalf("the reply has %d tokens (stop %q), want 2000: the measure needs a long reply", reply.Reply.Tokens, reply.Reply.Stop)
	}
	if !partial {
		t.Errorf("no partial reply reached the disk in %s of streaming", elapsed.Round(time.Millisecond))
	}
	if box != "typed while a reply streams" {
		t.Errorf("typing while the reply streamed left %q in the message box", box)
	}

	mu.Lock()
	defer mu.Unlock()
	worst, total := time.Duration(0), time.Duration(0)
	for _, d := range lags {
		worst = max(worst, d)
		total += d
	}
	l.mu.Lock()
	longest := l.longest
	l.mu.Unlock()
	t.Logf("2000 tokens in %s (%.0f tokens/s); %d ticks, UI lag mean %s, worst %s; longest single UI function %s",
		elapsed.Round(time.Millisecond), reply.Reply.TokensPerSecond, len(lags),
		(total / time.Duration(max(1, len(lags)))).Round(time.Microsecond), worst.Round(time.Microsecond), longest.Round(time.Microsecond))
	if len(lags) < int(elapsed/(100*time.Millisecond)) {
		t.Errorf("only %d ticks ran in %s: the UI loop was starved", len(lags), elapsed)
	}
	if longest > time.Second {
		t.Errorf("one UI function ran for %s while a reply streamed, want < 1s", longest)
	}
	if worst > 2*time.Second {
		t.Errorf("the UI goroutine was busy for %s at once while a reply streamed, want < 2s", worst)
	}
}

// A reply streamed in small pieces is cut into blocks where later text
// cannot change them: paragraphs and finished lists freeze, a loose list
// and an open code fence wait, and a long code block is cut every
// fenceRowsPerBlock lines. Whatever the pieces, the blocks render what the
// whole text parsed at once renders.
func TestMarkdownViewFreezesFinishedBlocks(t *testing.T) {
	test.NewTempApp(t)
	var code strings.Builder
	for i := range 150 {
		code.WriteString("    line " + strings.Repeat("x", i%7) + "\n")
	}
	for _, tc := range []struct {
		name   string
		text   string
		blocks int // frozen blocks once the text is in, plus the tail
	}{
		{"paragraphs", "One.\n\nTwo **bold**.\n\nThree.\n", 3},
		// A block ends only when the line after the blank one is whole: a
		// "1" could still become "1." and continue a list.
		{"unfinished last line", "One.\n\nTwo.\n\nThr", 2},
		{"loose list waits for its end", "1. a\n\n2. b\n\n3. c\n\nAfter.\n", 2},
		{"indented continuation waits", "- item\n\n  more of it\n\nAfter.\n", 2},
		{"fence with blank lines", "Code:\n\n```go\nfunc f() {\n\n\treturn\n}\n```\n\nAfter.\n", 3},
		{"long code block", "```\n" + code.String() + "```\n\nEnd.\n", 150/fenceRowsPerBlock + 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMarkdownView()
			for i := 0; i < len(tc.text); i += 3 {
				m.Set(tc.text[:min(len(tc.text), i+3)])
			}
			m.Set(tc.text)
			if n := len(m.box.Objects); n != tc.blocks {
				t.Errorf("%d blocks, want %d", n, tc.blocks)
			}
			var got strings.Builder
			for _, o := range m.box.Objects {
				got.WriteString(o.(*widget.RichText).String())
			}
			whole := widget.NewRichTextFromMarkdown(tc.text).String()
			if squash(got.String()) != squash(whole) {
				t.Errorf("blocks show\n%q\nthe whole text parsed at once shows\n%q", got.String(), whole)
			}
		})
	}
}

// squash drops whitespace, which differs between one RichText and several
// (the space between blocks is padding, not text).
func squash(s string) string { return strings.Join(strings.Fields(s), "") }

// A text that does not extend what is shown (a regenerated reply) is shown
// afresh.
func TestMarkdownViewReplacedText(t *testing.T) {
	test.NewTempApp(t)
	m := newMarkdownView()
	m.Set("First reply.\n\nSecond paragraph.\n\nThird")
	m.Set("Another")
	if len(m.box.Objects) != 1 || m.tail.String() != "Another" {
		t.Errorf("after replacing the text: %d blocks, tail %q", len(m.box.Objects), m.tail.String())
	}
}

func TestDisplayMarkdownBreaksLongLines(t *testing.T) {
	words := strings.Repeat("word ", 100)
	for _, tc := range []struct {
		name, src string
	}{
		{"prose", words},
		{"unbroken run", strings.Repeat("ks", 500)},
		{"prose before list markers", strings.Repeat("a - b ", 80)},
		{"code", "```\n" + strings.Repeat("x = 1; ", 100) + "\n```\n"},
		{"indented code", "    " + strings.Repeat("y", 450)},
		{"heading stays whole", "# " + words},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := displayMarkdown(tc.src)
			heading := strings.HasPrefix(tc.src, "#")
			for l := range strings.Lines(out) {
				if n := len([]rune(strings.TrimSuffix(l, "\n"))); n > maxLineRunes+5 && !heading {
					t.Errorf("a line of %d runes is left", n)
				}
			}
			// Breaking lines must not change what the Markdown says, only
			// where rows wrap.
			if got, want := squash(widget.NewRichTextFromMarkdown(out).String()), squash(widget.NewRichTextFromMarkdown(tc.src).String()); got != want {
				t.Errorf("rendered text changed:\n got %.120q\nwant %.120q", got, want)
			}
			if seg := widget.NewRichTextFromMarkdown(out).Segments; len(seg) > 0 {
				if _, isList := seg[0].(*widget.ListSegment); isList {
					t.Errorf("breaking made a list")
				}
			}
		})
	}
	if s := "short\nlines\n"; displayMarkdown(s) != s {
		t.Errorf("short lines were changed")
	}
}

// A chat that cannot be saved (a full disk; here the folder is replaced
// by a file) is reported once, and the chat goes on in memory.
func TestChatSaveFailureIsShown(t *testing.T) {
	st, cv := chatStudio(t)
	loadTiny(t, st)
	greedy(cv, 4)
	dir := filepath.Join(st.dir, "chats")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	send(cv, "will this be kept?")
	waitReply(t, cv)
	on(cv, func() { cv.saver.Flush() })
	on(cv, func() {
		if text := overlayText(st.win); !strings.Contains(text, "saving") {
			t.Errorf("the studio said %q, want the failed save reported", text)
		}
		if len(cv.cur.Messages) != 2 || len(cv.rows) != 2 {
			t.Errorf("the chat has %d messages after a failed save, want it kept in memory", len(cv.cur.Messages))
		}
	})
}

// A reply that fills the context is cut and explained, and a prompt that
// no longer fits is refused with the same explanation; the studio goes on.
func TestChatContextFull(t *testing.T) {
	st, cv := chatStudio(t, func(st *studio) { st.settings.Context = 48 })
	loadTiny(t, st)
	greedy(cv, 0)
	send(cv, "Hello there")
	waitReply(t, cv)
	notice := func() string { return shown(cv.notice) }
	on(cv, func() {
		r := cv.cur.Messages[1].Reply
		if r.Stop != "length" || r.PromptTokens+r.Tokens < 48 {
			t.Fatalf("reply %+v, want it cut at the 48-token context", r)
		}
		if !strings.Contains(notice(), "filled the model's context") {
			t.Errorf("notice %q, want the full context explained", notice())
		}
		if !strings.Contains(cv.meter.Text, "/ 48") {
			t.Errorf("meter %q", cv.meter.Text)
		}
	})
	send(cv, "And now?")
	waitReply(t, cv)
	on(cv, func() {
		if len(cv.cur.Messages) != 3 || !strings.Contains(notice(), "filled the model's context") {
			t.Errorf("a prompt beyond the context: %d messages, notice %q", len(cv.cur.Messages), notice())
		}
	})
}

// Deleting the chat whose reply is being written stops the reply, shows
// the next chat, and leaves no file behind, though the reply's end comes
// after the deletion.
func TestChatDeleteWhileWriting(t *testing.T) {
	st, cv := chatStudio(t)
	loadTiny(t, st)
	greedy(cv, 4)
	send(cv, "keep this one")
	waitReply(t, cv)
	on(cv, cv.newChat)
	greedy(cv, 2000)
	send(cv, "delete this one")
	waitFor(t, cv, "the first tokens", 30*time.Second, func() bool { return cv.rows[1].md.src != "" })
	on(cv, func() {
		cv.deleteChat(cv.cur)
		if cv.title.Text != "keep this one" || len(cv.convs) != 1 {
			t.Errorf("after the delete: showing %q, list %v", cv.title.Text, titles(cv.convs))
		}
	})
	waitReply(t, cv)
	on(cv, func() { cv.saver.Flush() })
	if saved := savedChats(t, st); len(saved) != 1 || saved[0].Title != "keep this one" {
		t.Errorf("on disk: %v", titles(saved))
	}
}

// A chat's adapter and its scale go with every reply of that chat and are
// kept with it; another chat has none. An adapter that does not fit the
// model fails the reply with the engine's reason.
func TestChatAdapterPerConversation(t *testing.T) {
	st, cv := chatStudio(t)
	loadTiny(t, st)
	greedy(cv, 4)
	bogus := filepath.Join(t.TempDir(), "answers.gguf")
	os.WriteFile(bogus, []byte("not an adapter"), 0o644)
	on(cv, func() {
		cv.setAdapter(bogus, "")
		if cv.adapterName.Text != "answers.gguf" || cv.adapterScale.Hidden || cv.adapterScale.Value != 1 {
			t.Errorf("the adapter control shows %q at %v", cv.adapterName.Text, cv.adapterScale.Value)
		}
		cv.adapterScale.SetValue(0.5)
		cv.setAdapterScale(0.5)
	})
	send(cv, "Hello")
	waitReply(t, cv)
	var id string
	on(cv, func() {
		id = cv.cur.ID
		// A reply that failed before its first word is not kept; the
		// failure shows under the transcript.
		if text := shown(cv.notice); !strings.Contains(text, "answers.gguf") || len(cv.cur.Messages) != 1 {
			t.Errorf("a reply with a file that is no adapter: %q, %d messages", text, len(cv.cur.Messages))
		}
		cv.newChat()
		if cv.cur.Adapter != nil || !cv.adapterScale.Hidden || cv.adapterName.Text != "none (choose…)" {
			t.Errorf("a new chat has the adapter %+v", cv.cur.Adapter)
		}
	})
	on(cv, cv.saver.Flush)
	saved := savedChats(t, st)
	if i := slices.IndexFunc(saved, func(c *chats.Conversation) bool { return c.ID == id }); i < 0 {
		t.Error("the chat with the adapter was not saved")
	} else if a := saved[i].Adapter; a == nil || a.Path != bogus || a.Scale != 0.5 {
		t.Errorf("the saved chat's adapter: %+v", a)
	}
	on(cv, func() {
		cv.open(cv.convs[slices.IndexFunc(cv.convs, func(c *chats.Conversation) bool { return c.ID == id })])
		if cv.adapterName.Text != "answers.gguf" || cv.adapterScale.Value != 0.5 {
			t.Errorf("back in the chat, the adapter shows %q at %v", cv.adapterName.Text, cv.adapterScale.Value)
		}
		cv.clearAdapter()
		if cv.cur.Adapter != nil || !cv.adapterClear.Hidden {
			t.Error("the adapter stayed after ×")
		}
	})
	send(cv, "Hello again")
	waitReply(t, cv)
	on(cv, func() {
		if r := cv.cur.Messages[len(cv.cur.Messages)-1].Reply; r.Stop == "error" {
			t.Errorf("without the adapter the reply failed: %s", r.Error)
		}
	})
}
