package ui

import (
	"errors"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/driver/software"
	"fyne.io/fyne/v2/test"

	"github.com/hearthstudio/hearth/app"
)

// ScreenshotPromptEnv, with ScreenshotsEnv, names a message to send from
// the Chat tab before it is captured, so the screenshot shows a chat.
const ScreenshotPromptEnv = "HEARTH_SCREENSHOTS_PROMPT"

const (
	// screenshotStartup bounds the wait for the first scan and the loading
	// of the last model; loading a large model on lavapipe is slow, and a
	// screenshot of a half-loaded model would still show the app.
	screenshotStartup = 2 * time.Minute
	// screenshotSettle is the time a tab gets to lay out and paint after
	// it is selected: the GL driver draws on its next frame, not at once.
	screenshotSettle = 700 * time.Millisecond
)

// screenshots waits until the studio has started (the first scan, and
// the last model loaded if there was one), then selects each tab in turn
// and writes what the window shows to dir/<tab>.png. It runs on its own
// goroutine; the caller quits the app after it.
func (st *studio) screenshots(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("screenshots: %w", err)
	}
	select {
	case <-st.started:
	case <-time.After(screenshotStartup):
		return fmt.Errorf("screenshots: the studio did not finish starting within %s", screenshotStartup)
	}
	var names []string
	fyne.DoAndWait(func() {
		for _, it := range st.tabs.Items {
			names = append(names, strings.ToLower(it.Text))
		}
	})
	for i, name := range names {
		fyne.DoAndWait(func() { st.tabs.SelectIndex(i) })
		if prompt := os.Getenv(ScreenshotPromptEnv); prompt != "" && name == "chat" {
			st.screenshotChat(prompt)
		}
		if name == "tune" {
			st.screenshotTune()
		}
		if name == "voice" {
			st.screenshotVoice()
		}
		time.Sleep(screenshotSettle)
		var img image.Image
		fyne.DoAndWait(func() { img = st.capture() })
		if err := writePNG(filepath.Join(dir, name+".png"), img); err != nil {
			return err
		}
	}
	return nil
}

// screenshotChat sends prompt from the Chat tab as a user would, typing it
// into the message box and pressing Enter, then waits for the reply to
// end. A Chat tab without a message box is captured as it is.
func (st *studio) screenshotChat(prompt string) {
	eng, sent := st.sendPrompt(prompt)
	if !sent {
		fmt.Fprintln(os.Stderr, "hearth: screenshots: no message box in the Chat tab; captured without a chat")
		return
	}
	// The reply runs on the engine: wait for it to start (a second at
	// most), then to end.
	deadline := time.Now().Add(screenshotStartup)
	started := false
	for time.Now().Before(deadline) {
		s := eng.Status()
		busy := s.Busy || s.Waiting > 0
		if busy {
			started = true
		}
		if !busy && (started || time.Until(deadline) < screenshotStartup-time.Second) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sendPrompt types prompt into the selected tab's message box and presses
// Enter, on the UI goroutine. It returns the engine that answers, and
// false when the tab has no message box.
func (st *studio) sendPrompt(prompt string) (eng *app.Engine, sent bool) {
	fyne.DoAndWait(func() {
		eng = st.engine
		var box *promptEntry
		walkObjects(st.tabs.Selected().Content, func(o fyne.CanvasObject) bool {
			if e, ok := o.(*promptEntry); ok && box == nil {
				box = e
			}
			return box == nil
		})
		if box == nil || box.onSend == nil {
			return
		}
		box.SetText(prompt)
		box.onSend()
		sent = true
	})
	return eng, sent
}

// quitMidReplyPrompt is the message quitMidReply sends: one a tiny model
// answers at length.
const quitMidReplyPrompt = "Tell me a long story about a warm hearth."

// quitMidReply sends a message from the Chat tab once the studio has
// started, waits until the reply has shown a few updates on screen, and,
// while the reply is still being written, quits: st.quit, which the
// window's close button runs too (Run's close intercept), as does the end
// of the screenshots. It runs on its own goroutine.
func (st *studio) quitMidReply() error {
	select {
	case <-st.started:
	case <-time.After(screenshotStartup):
		return fmt.Errorf("quit mid-reply: the studio did not finish starting within %s", screenshotStartup)
	}
	fyne.DoAndWait(func() { st.tabs.SelectIndex(0) })
	// The test model has random weights, so a reply can sample its end of
	// turn within a few tokens; then the prompt is sent again, a few
	// times, so the studio still quits only while a reply streams.
	const tries = 5
	for try := 0; try < tries; try++ {
		if _, sent := st.sendPrompt(quitMidReplyPrompt); !sent {
			return errors.New("quit mid-reply: no message box in the Chat tab")
		}
		// Three updates: the reply is streaming, not just started.
		const updates = 3
		ended := false
		for deadline := time.Now().Add(screenshotStartup); time.Now().Before(deadline); time.Sleep(streamInterval / 3) {
			shown, writing := 0, false
			fyne.DoAndWait(func() {
				if g := st.chat.gen; g != nil {
					writing = true
					shown = g.shown
				}
			})
			if !writing {
				ended = true
				break
			}
			if shown >= updates {
				fyne.DoAndWait(st.quit)
				return nil
			}
		}
		if !ended {
			return fmt.Errorf("quit mid-reply: the reply showed nothing within %s", screenshotStartup)
		}
	}
	return fmt.Errorf("quit mid-reply: %d replies ended before the studio quit", tries)
}

// screenshotTune waits (a few seconds at most) until the Tune tab has
// read the checkpoint of the adapter it names, so the picture shows that
// run's loss curve.
func (st *studio) screenshotTune() {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		looking := false
		fyne.DoAndWait(func() { looking = st.tune != nil && st.tune.looking })
		if !looking {
			return
		}
	}
}

// walkObjects calls f with o and, when f returns true, with everything
// drawn inside it: the objects of containers and of widgets' renderers.
func walkObjects(o fyne.CanvasObject, f func(fyne.CanvasObject) bool) {
	if !f(o) {
		return
	}
	switch v := o.(type) {
	case *fyne.Container:
		for _, c := range v.Objects {
			walkObjects(c, f)
		}
	case fyne.Widget:
		if r := test.WidgetRenderer(v); r != nil {
			for _, c := range r.Objects() {
				walkObjects(c, f)
			}
		}
	}
}

// capture is what the window shows. It reads the GL front buffer, and
// where that comes back empty, as it does under Xvfb with Mesa's software
// GL (a double-buffered window there has no front buffer to read), it
// paints the same widget tree, laid out at the window's size, with Fyne's
// software painter.
func (st *studio) capture() image.Image {
	c := st.win.Canvas()
	if img := c.Capture(); img != nil && !flat(img) {
		return img
	}
	content := c.Content()
	sc := software.NewCanvas()
	sc.SetScale(c.Scale())
	sc.SetContent(content)
	sc.Resize(c.Size())
	img := sc.Capture()
	st.win.SetContent(content)
	return img
}

// flat reports whether every pixel of img has one colour: a window that
// shows anything has at least its text on a background.
func flat(img image.Image) bool {
	b := img.Bounds()
	if b.Empty() {
		return true
	}
	first := img.At(b.Min.X, b.Min.Y)
	r0, g0, b0, a0 := first.RGBA()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if r, g, bl, a := img.At(x, y).RGBA(); r != r0 || g != g0 || bl != b0 || a != a0 {
				return false
			}
		}
	}
	return true
}

func writePNG(path string, img image.Image) error {
	if img == nil {
		return fmt.Errorf("screenshots: %s: the window gave no image", path)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("screenshots: %w", err)
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return fmt.Errorf("screenshots: %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("screenshots: %w", err)
	}
	return nil
}
