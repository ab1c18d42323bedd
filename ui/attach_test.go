package ui

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/storage"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/app/chats"
	"github.com/hearthstudio/hearth/app/library"
	"github.com/hearthstudio/hearth/internal/visiontest"
)

// loadTinyVision writes tiny-gemma3 and its projector, mmproj-*.gguf
// beside it as a user's vision model comes, and loads the model through
// the library, which pairs the two.
func loadTinyVision(t *testing.T, st *studio) {
	t.Helper()
	dir := t.TempDir()
	if _, _, err := visiontest.Write(dir); err != nil {
		t.Fatal(err)
	}
	st.libMu.Lock()
	st.lib = library.New(library.Roots{Folders: []string{dir}})
	st.libMu.Unlock()
	if _, err := st.engine.Load(context.Background(), "tiny-gemma3", nil); err != nil {
		t.Fatal(err)
	}
}

// photoFile writes a w×h PNG whose colours follow (x, y) and seed to a file
// of a temporary folder, and returns its path and bytes.
func photoFile(t *testing.T, name string, w, h, seed int) (string, []byte) {
	t.Helper()
	data := visiontest.PNG(w, h, seed)
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, data
}

// drop drops the files at paths on the studio's window.
func drop(cv *chatView, paths ...string) {
	var uris []fyne.URI
	for _, p := range paths {
		uris = append(uris, storage.NewFileURI(p))
	}
	on(cv, func() { cv.st.dropped(uris) })
}

// thumbShown is the thumbnail under o that shows an image, nil if none
// does yet.
func thumbShown(o fyne.CanvasObject) *canvas.Image {
	return find(o, func(img *canvas.Image) bool {
		return img.MinSize().Width == thumbSize && img.Image != nil
	})
}

// An image dropped on the Chat tab shows as a thumbnail under the entry,
// goes with the message to a vision model, and shows in the sent message,
// then again from the chat's folder after a restart. A file that is not
// an image, or a damaged one, is refused with a message and not attached;
// a chat file naming an image that is gone still opens, saying so.
func TestChatSendsAnImage(t *testing.T) {
	st, cv := chatStudio(t)
	loadTinyVision(t, st)
	greedy(cv, 4)
	photo, data := photoFile(t, "photo.png", 40, 30, 1)
	drop(cv, photo)
	waitFor(t, cv, "the image attached", 30*time.Second, func() bool { return len(cv.attached) == 1 })
	on(cv, func() {
		if !cv.attachments.Visible() || thumbShown(cv.attachRow) == nil || !strings.Contains(shown(cv.attachRow), "photo.png") {
			t.Errorf("the attached image shows no thumbnail and name under the entry: %q", shown(cv.attachRow))
		}
	})

	dir := t.TempDir()
	notes := filepath.Join(dir, "notes.pdf")
	os.WriteFile(notes, []byte("%PDF-1.4 a document"), 0o644)
	broken := filepath.Join(dir, "broken.png")
	os.WriteFile(broken, data[:len(data)/2], 0o644)
	drop(cv, notes, broken, photo)
	waitFor(t, cv, "the refusal", 30*time.Second, func() bool { return strings.Contains(dialogs(st.win), "broken.png") })
	on(cv, func() {
		text := dialogs(st.win)
		for _, want := range []string{"The file notes.pdf was not attached", "not a PNG, JPEG, GIF or WebP image", "the file broken.png was not attached", "not a valid PNG image"} {
			if !strings.Contains(text, want) {
				t.Errorf("the studio said %q, want %q", text, want)
			}
		}
		if len(cv.attached) != 1 {
			t.Errorf("%d images attached, want the photo alone, once", len(cv.attached))
		}
		for _, o := range st.win.Canvas().Overlays().List() {
			st.win.Canvas().Overlays().Remove(o)
		}
	})

	send(cv, "What is in it?")
	waitReply(t, cv)
	ref := chats.RefOf(data)
	on(cv, func() {
		m := cv.cur.Messages
		if len(m) != 2 || len(m[0].Images) != 1 || m[0].Images[0].Ref != ref || m[0].Content != "What is in it?" {
			t.Fatalf("messages %+v, want the question with its image and a reply", m)
		}
		if r := m[1].Reply; r.Stop == "error" || r.Tokens != 4 {
			t.Errorf("the reply %+v, want 4 tokens: %s", r, shown(cv.notice))
		}
		if cv.attachments.Visible() || len(cv.attached) != 0 || cv.input.Text != "" {
			t.Error("the composer still holds the sent message")
		}
		if thumbShown(cv.rows[0].box) == nil {
			t.Error("the sent message shows no thumbnail")
		}
		cv.saver.Flush()
	})
	if got, err := os.ReadFile(filepath.Join(st.dir, "chats", "images", ref)); err != nil || !bytes.Equal(got, data) {
		t.Errorf("the image in the chats folder: %v", err)
	}

	// A chat naming an image that is not there.
	lost := `{"id": "lost", "title": "lost", "updated": "2020-01-01T00:00:00Z", "messages": [{"role": "user", "content": "where is it?", "images": ["` +
		strings.Repeat("0", 64) + `.png"]}]}`
	os.WriteFile(filepath.Join(st.dir, "chats", "lost.json"), []byte(lost), 0o600)
	on(cv, cv.close)
	st2, cv2 := chatStudio(t, inDir(t, st.dir))
	waitFor(t, cv2, "the thumbnail read from the store", 30*time.Second, func() bool {
		return len(cv2.rows) == 2 && thumbShown(cv2.rows[0].box) != nil
	})
	on(cv2, func() {
		if dialogs(st2.win) != "" {
			t.Errorf("the restart said %q", dialogs(st2.win))
		}
		cv2.open(cv2.convs[len(cv2.convs)-1])
		if cv2.cur.ID != "lost" || len(cv2.rows) != 1 {
			t.Fatalf("opened %q with %d rows", cv2.cur.ID, len(cv2.rows))
		}
		if text := shown(cv2.rows[0].box); !strings.Contains(text, "Image missing") || !strings.Contains(text, "where is it?") {
			t.Errorf("the message whose image is gone shows %q", text)
		}
	})
}

// A model without a projector refuses a message with an image: the
// engine's reason shows, and the message goes back to the composer, text
// and image, leaving nothing behind in the chat.
func TestChatImageWithoutProjector(t *testing.T) {
	st, cv := chatStudio(t)
	loadTiny(t, st)
	greedy(cv, 4)
	photo, _ := photoFile(t, "photo.png", 16, 16, 2)
	drop(cv, photo)
	waitFor(t, cv, "the image attached", 30*time.Second, func() bool { return len(cv.attached) == 1 })
	send(cv, "Describe it")
	waitReply(t, cv)
	on(cv, func() {
		if text := shown(cv.notice); !strings.Contains(text, app.ErrNoProjector.Error()) || !strings.Contains(text, "back in the message box") {
			t.Errorf("the notice says %q, want the engine's reason", text)
		}
		if cv.input.Text != "Describe it" || len(cv.attached) != 1 || !cv.attachments.Visible() {
			t.Errorf("the composer holds %q and %d images, want the message back", cv.input.Text, len(cv.attached))
		}
		if len(cv.cur.Messages) != 0 || len(cv.rows) != 0 {
			t.Errorf("the chat kept %d messages", len(cv.cur.Messages))
		}
		cv.saver.Flush()
	})
	if saved := savedChats(t, st); len(saved) != 0 {
		t.Errorf("on disk: %v, want no chat", titles(saved))
	}
	// Removed from the composer, the image is not sent.
	on(cv, func() {
		test.Tap(find[*widget.Button](cv.attachRow, nil))
		if cv.attachments.Visible() {
			t.Error("the composer still shows the removed image")
		}
	})
	send(cv, "Describe it")
	waitReply(t, cv)
	on(cv, func() {
		if m := cv.cur.Messages; len(m) != 2 || len(m[0].Images) != 0 || m[1].Reply.Stop == "error" {
			t.Errorf("without the image: %+v", m)
		}
	})
}
