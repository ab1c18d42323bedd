package chats

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/chat"
	"github.com/hearthstudio/hearth/engine/vision"
	"github.com/hearthstudio/hearth/internal/visiontest"
)

// attached is the image of data as the studio attaches it.
func attached(t *testing.T, data []byte) Image {
	t.Helper()
	im, _, err := NewImage(data, "test.png")
	if err != nil {
		t.Fatal(err)
	}
	return im
}

// imageFiles are the names in the store's images folder.
func imageFiles(t *testing.T, s *Store) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(s.Dir(), imagesDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// A chat with images is saved with each image a file of the store, named
// by its hash, and the chat file naming them; reopened, the images are
// there by name, and ReadImages gives the engine their bytes.
func TestImagesRoundTrip(t *testing.T) {
	s := openStore(t)
	a, b := visiontest.PNG(20, 10, 1), visiontest.PNG(8, 8, 2)
	c := New("", t0)
	c.Add(Message{Role: User, Content: "What differs?", Images: []Image{attached(t, a), attached(t, b)}}, t0)
	c.Add(Message{Role: Assistant, Content: "The colours.", Reply: Reply{Stop: "stop"}}, t0)
	c.Add(Message{Role: User, Images: []Image{attached(t, a)}}, t0)
	if err := s.Save(c); err != nil {
		t.Fatal(err)
	}
	refA, refB := RefOf(a), RefOf(b)
	if !strings.HasSuffix(refA, ".png") || len(refA) != 64+len(".png") {
		t.Fatalf("ref %q, want the SHA-256 in hex and .png", refA)
	}
	if got := imageFiles(t, s); len(got) != 2 {
		t.Errorf("images folder holds %q, want the two images once each", got)
	}
	file, _ := os.ReadFile(filepath.Join(s.Dir(), c.ID+".json"))
	if !bytes.Contains(file, []byte(`"images": [`+"\n"+`        "`+refA+`",`)) {
		t.Errorf("the chat file does not name the images as a list of names:\n%s", file)
	}

	convs, bad, err := s.Load()
	if err != nil || len(bad) > 0 || len(convs) != 1 {
		t.Fatalf("load: %v %v %d", err, bad, len(convs))
	}
	got := convs[0]
	want := []Image{{Ref: refA}, {Ref: refB}}
	if !reflect.DeepEqual(got.Messages[0].Images, want) || got.Messages[0].Content != "What differs?" {
		t.Fatalf("loaded %+v, want the text and the images by name", got.Messages[0])
	}
	msgs, err := s.ReadImages(got.Chat())
	if err != nil {
		t.Fatal(err)
	}
	if ims := msgs[0].Images; len(ims) != 2 || !bytes.Equal(ims[0].Data, a) || !bytes.Equal(ims[1].Data, b) || ims[0].Ref != refA {
		t.Errorf("the engine gets %d images, want the bytes of both", len(ims))
	}
	if ims := msgs[2].Images; len(ims) != 1 || !bytes.Equal(ims[0].Data, a) {
		t.Errorf("the last message gives the engine %+v", ims)
	}
	// Saving the loaded chat, whose images are not in memory, keeps them.
	got.Add(Message{Role: Assistant, Content: "Again.", Reply: Reply{Stop: "stop"}}, t0)
	if err := s.Save(got); err != nil {
		t.Fatal(err)
	}
	if files := imageFiles(t, s); len(files) != 2 {
		t.Errorf("after a second save the images folder holds %q", files)
	}
}

// Without a store a conversation gives the engine the bytes it holds.
func TestChatGivesTheImagesInMemory(t *testing.T) {
	data := visiontest.PNG(4, 4, 3)
	c := New("", t0)
	c.Add(Message{Role: User, Content: "Look", Images: []Image{attached(t, data)}}, t0)
	msgs := c.Chat()
	if ims := msgs[0].Images; len(ims) != 1 || !bytes.Equal(ims[0].Data, data) || ims[0].Ref != RefOf(data) {
		t.Errorf("Chat() gives %+v", ims)
	}
	d := c.Clone()
	d.Messages[0].Images[0].Missing = true
	if c.Messages[0].Images[0].Missing {
		t.Error("the clone shares its images with the original")
	}
}

// A chat whose image file is gone, or names one no image has, still
// loads: the message keeps its text, its image is marked missing, and the
// engine gets the message without it.
func TestMissingImageStillLoads(t *testing.T) {
	s := openStore(t)
	keep, lose := visiontest.PNG(5, 5, 1), visiontest.PNG(6, 6, 2)
	c := New("", t0)
	c.Add(Message{Role: User, Content: "two pictures", Images: []Image{attached(t, keep), attached(t, lose)}}, t0)
	if err := s.Save(c); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(s.Dir(), imagesDir, RefOf(lose))); err != nil {
		t.Fatal(err)
	}
	odd := `{"id": "odd", "messages": [{"role": "user", "content": "edited by hand", "images": ["../../secret", "nothex.png"]}]}`
	os.WriteFile(filepath.Join(s.Dir(), "odd.json"), []byte(odd), 0o600)

	convs, bad, err := s.Load()
	if err != nil || len(bad) > 0 || len(convs) != 2 {
		t.Fatalf("load: %v, bad %v, %d chats; want both chats", err, bad, len(convs))
	}
	for _, got := range convs {
		m := got.Messages[0]
		switch got.ID {
		case c.ID:
			if m.Content != "two pictures" || len(m.Images) != 2 || m.Images[0].Missing || !m.Images[1].Missing {
				t.Errorf("loaded %+v, want the text, the kept image, and the lost one marked missing", m)
			}
		case "odd":
			if len(m.Images) != 2 || !m.Images[0].Missing || !m.Images[1].Missing {
				t.Errorf("names that are no image's: %+v, want both missing", m.Images)
			}
		}
		msgs, err := s.ReadImages(got.Chat())
		if err != nil {
			t.Fatalf("%s: %v", got.ID, err)
		}
		want := map[string]int{c.ID: 1, "odd": 0}[got.ID]
		if n := len(msgs[0].Images); n != want {
			t.Errorf("%s: the engine gets %d images, want %d", got.ID, n, want)
		}
	}
	// An image deleted after the chat loaded is left out too.
	os.Remove(filepath.Join(s.Dir(), imagesDir, RefOf(keep)))
	msgs, err := s.ReadImages([]chat.Message{{Role: "user", Images: []chat.Image{{Ref: RefOf(keep)}}}})
	if err != nil || len(msgs[0].Images) != 0 {
		t.Errorf("an image gone since the load: %v, %d images", err, len(msgs[0].Images))
	}
}

// Two chats showing the same image share one file, which stays until the
// last chat that names it is deleted.
func TestSharedImageIsOneFile(t *testing.T) {
	s := openStore(t)
	data := visiontest.PNG(7, 3, 4)
	a, b := New("", t0), New("", t0.Add(1))
	a.Add(Message{Role: User, Content: "first", Images: []Image{attached(t, data)}}, t0)
	b.Add(Message{Role: User, Content: "second", Images: []Image{attached(t, data), attached(t, data)}}, t0)
	for _, c := range []*Conversation{a, b} {
		if err := s.Save(c); err != nil {
			t.Fatal(err)
		}
	}
	if got := imageFiles(t, s); !reflect.DeepEqual(got, []string{RefOf(data)}) {
		t.Fatalf("images folder %q, want one file", got)
	}
	if err := s.Delete(a.ID); err != nil {
		t.Fatal(err)
	}
	if got := imageFiles(t, s); len(got) != 1 {
		t.Fatalf("deleting one chat removed the image the other shows")
	}
	// A chat file set aside as bad still keeps its images.
	bad := filepath.Join(s.Dir(), "kept.json.bad")
	os.WriteFile(bad, []byte(`{"messages": [{"images": ["`+RefOf(data)+`"`), 0o600)
	if err := s.Delete(b.ID); err != nil {
		t.Fatal(err)
	}
	if got := imageFiles(t, s); len(got) != 1 {
		t.Fatalf("the image a bad file names was removed")
	}
	os.Remove(bad)
	// A copy saved again brings the file back, and deleting it frees it.
	if err := s.Save(b); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(b.ID); err != nil {
		t.Fatal(err)
	}
	if got := imageFiles(t, s); len(got) != 0 {
		t.Errorf("after the last chat was deleted the images folder holds %q", got)
	}
}

// An image that cannot be written leaves the chat file as it was: no file
// ever names an image that is not there.
func TestImagesAreWrittenBeforeTheChat(t *testing.T) {
	s := openStore(t)
	c := New("", t0)
	c.Add(Message{Role: User, Content: "with a picture", Images: []Image{attached(t, visiontest.PNG(3, 3, 1))}}, t0)
	os.WriteFile(filepath.Join(s.Dir(), imagesDir), nil, 0o600) // a file where the folder goes
	if err := s.Save(c); err == nil {
		t.Fatal("Save succeeded though its image could not be written")
	}
	if _, err := os.Stat(filepath.Join(s.Dir(), c.ID+".json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the chat file was written without its image: %v", err)
	}
	// Bytes that are not the named image's are refused.
	c.Messages[0].Images[0].Ref = RefOf([]byte("\x89PNG\r\n\x1a\nother"))
	os.Remove(filepath.Join(s.Dir(), imagesDir))
	if err := s.Save(c); err == nil || !strings.Contains(err.Error(), "another image's") {
		t.Errorf("an image named for other bytes: %v", err)
	}
}

// hugePNG is a PNG whose header claims w×h pixels, with no pixels after it.
func hugePNG(w, h uint32) []byte {
	ihdr := make([]byte, 4+13)
	copy(ihdr, "IHDR")
	binary.BigEndian.PutUint32(ihdr[4:], w)
	binary.BigEndian.PutUint32(ihdr[8:], h)
	ihdr[12], ihdr[13] = 8, 2 // 8-bit RGB
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	binary.Write(&b, binary.BigEndian, uint32(13))
	b.Write(ihdr)
	binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(ihdr))
	return b.Bytes()
}

// ImageFile takes only images the engine can read, and names them by
// their format, whatever the file's name says.
func TestImageFile(t *testing.T) {
	dir := t.TempDir()
	good := visiontest.PNG(300, 100, 1)
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, data, 0o644)
		return p
	}
	im, img, err := ImageFile(write("photo.jpg", good))
	if err != nil {
		t.Fatal(err)
	}
	if im.Ref != RefOf(good) || !strings.HasSuffix(im.Ref, ".png") || !bytes.Equal(im.Data, good) {
		t.Errorf("image %s, want the PNG named by its hash", im.Ref)
	}
	if b := Thumbnail(img, 96).Bounds(); b.Dx() != 96 || b.Dy() != 32 {
		t.Errorf("thumbnail %v, want 96×32: the box, proportions kept", b)
	}
	for _, c := range []struct {
		name string
		data []byte
		want error
	}{
		{"notes.png", []byte("just some text"), vision.ErrNotImage},
		{"empty.png", nil, vision.ErrNotImage},
		{"huge.png", hugePNG(20000, 20000), vision.ErrTooLarge},
		{"cut.png", good[:len(good)/2], nil},
	} {
		_, _, err := ImageFile(write(c.name, c.data))
		if err == nil || c.want != nil && !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("%s: %v, want an error naming it (%v)", c.name, err, c.want)
		}
	}
	if _, _, err := ImageFile(dir); err == nil || !strings.Contains(err.Error(), "folder") {
		t.Errorf("a folder: %v", err)
	}
}

// An API client's images are kept with its conversation, and its next
// request, sending them again, continues it.
func TestRecordKeepsAnAPIClientsImages(t *testing.T) {
	s := openStore(t)
	data := visiontest.PNG(9, 9, 5)
	q := chat.Message{Role: "user", Content: "What is this?", Images: []chat.Image{{Data: data}}}
	reply := Message{Role: Assistant, Content: "A square.", Reply: Reply{Stop: "stop"}}
	c, _ := Record(nil, Exchange{API: "OpenAI", Messages: []chat.Message{q}, Reply: reply}, nil, t0)
	if ims := c.Messages[0].Images; len(ims) != 1 || ims[0].Ref != RefOf(data) {
		t.Fatalf("kept images %+v", ims)
	}
	if err := s.Save(c); err != nil {
		t.Fatal(err)
	}
	convs, _, _ := s.Load()
	next := []chat.Message{q, {Role: "assistant", Content: "A square."}, {Role: "user", Content: "Sure?"}}
	if got, isNew := Record(convs, Exchange{API: "OpenAI", Messages: next, Reply: reply}, nil, t0); isNew || got != convs[0] {
		t.Error("the follow-up with the same image started another conversation")
	}
	other := q
	other.Images = []chat.Image{{Data: visiontest.PNG(9, 9, 6)}}
	if _, isNew := Record(convs, Exchange{API: "OpenAI", Messages: []chat.Message{other, {Role: "assistant", Content: "A square."}, {Role: "user", Content: "Sure?"}}, Reply: reply}, nil, t0); !isNew {
		t.Error("a history with another image continued the conversation")
	}
}

// A chat file from before images loads as it did, and a chat without
// images is written as before, so an older Hearth still reads it.
func TestChatFilesWithoutImagesAreUnchanged(t *testing.T) {
	s := openStore(t)
	old := `{"id": "old", "title": "Hi", "created": "2025-01-01T00:00:00Z", "updated": "2025-01-01T00:00:00Z",
  "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello", "reply": {"tokens": 2, "stop": "stop"}}]}`
	os.WriteFile(filepath.Join(s.Dir(), "old.json"), []byte(old), 0o600)
	convs, bad, err := s.Load()
	if err != nil || len(bad) > 0 || len(convs) != 1 || len(convs[0].Messages) != 2 || convs[0].Messages[0].Images != nil {
		t.Fatalf("an old chat file: %v %v %+v", err, bad, convs)
	}
	if err := s.Save(convs[0]); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(s.Dir(), "old.json"))
	if bytes.Contains(data, []byte("images")) || imageFiles(t, s) != nil {
		t.Errorf("a chat without images was written with an images field or folder:\n%s", data)
	}
}

// A first message of images alone titles the chat by them.
func TestImagesTitleAChatWithoutText(t *testing.T) {
	one, two := visiontest.PNG(2, 2, 1), visiontest.PNG(2, 2, 2)
	c := New("", t0)
	c.Add(Message{Role: User, Images: []Image{attached(t, one)}}, t0)
	if c.Title != "An image" {
		t.Errorf("title %q", c.Title)
	}
	c.Cut(0, t0)
	c.Add(Message{Role: User, Content: "  ", Images: []Image{attached(t, one), attached(t, two)}}, t0)
	if c.Title != "2 images" {
		t.Errorf("title %q", c.Title)
	}
}
