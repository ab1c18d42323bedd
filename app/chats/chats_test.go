package chats

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hearthstudio/hearth/engine/chat"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func sample(system string, at time.Time, texts ...string) *Conversation {
	c := New(system, at)
	for i, text := range texts {
		m := Message{Role: User, Content: text}
		if i%2 == 1 {
			m = Message{Role: Assistant, Content: text, Reply: Reply{Model: "tiny", PromptTokens: 20, Tokens: 7, TokensPerSecond: 41.5, Stop: "stop"}}
		}
		c.Add(m, at.Add(time.Duration(i)*time.Second))
	}
	return c
}

func openStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "chats"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSaveLoadRoundTrip(t *testing.T) {
	s := openStore(t)
	c := sample("Be brief.", t0, "What is a **GGUF** file?", "A model file:\n\n```\nheader, tensors\n```", "Thanks")
	c.Messages[1].Reply.Stop = "canceled"
	if err := s.Save(c); err != nil {
		t.Fatal(err)
	}
	got, bad, err := s.Load()
	if err != nil || len(bad) != 0 {
		t.Fatalf("Load: %v, bad %v", err, bad)
	}
	if len(got) != 1 || !reflect.DeepEqual(got[0], c) {
		t.Fatalf("loaded %+v\nsaved  %+v", got, c)
	}
}

// A conversation's adapter is kept, and Clone copies it: the writer's
// goroutine reads the copy while the studio changes the scale.
func TestAdapterRoundTripAndClone(t *testing.T) {
	s := openStore(t)
	c := sample("", t0, "Hi")
	c.Adapter = &Adapter{Path: "/adapters/answers.gguf", Scale: 0.75, Model: "tiny-qwen2"}
	if err := s.Save(c); err != nil {
		t.Fatal(err)
	}
	got, _, err := s.Load()
	if err != nil || len(got) != 1 || !reflect.DeepEqual(got[0].Adapter, c.Adapter) {
		t.Fatalf("loaded %+v, %v; want the adapter %+v", got, err, c.Adapter)
	}
	d := c.Clone()
	c.Adapter.Scale = 2
	if d.Adapter.Scale != 0.75 {
		t.Errorf("the clone's adapter changed with the original's")
	}
}

func TestLoadSortsNewestChangeFirst(t *testing.T) {
	s := openStore(t)
	old := sample("", t0, "old")
	mid := sample("", t0.Add(time.Minute), "middle")
	fresh := sample("", t0.Add(-time.Hour), "made first, changed last")
	fresh.Add(Message{Role: Assistant, Content: "ok"}, t0.Add(time.Hour))
	for _, c := range []*Conversation{old, mid, fresh} {
		if err := s.Save(c); err != nil {
			t.Fatal(err)
		}
	}
	got, _, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	var titles []string
	for _, c := range got {
		titles = append(titles, c.Title)
	}
	want := []string{"made first, changed last", "middle", "old"}
	if !reflect.DeepEqual(titles, want) {
		t.Errorf("order %q, want %q", titles, want)
	}
}

// A corrupt, a truncated and a wrongly shaped file are each reported and set
// aside unchanged; the good conversations still load, and a second Load
// finds nothing more to report. Temporary files left by a crashed write are
// not conversations.
func TestLoadSetsBadFilesAside(t *testing.T) {
	s := openStore(t)
	good := sample("", t0, "hello", "hi")
	if err := s.Save(good); err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(filepath.Join(s.Dir(), good.ID+".json"))
	if err != nil {
		t.Fatal(err)
	}
	bodies := map[string]string{
		"corrupt":   "\x00\x01 not json",
		"truncated": string(whole[:len(whole)/2]),
		"role":      `{"id": "role", "messages": [{"role": "wizard", "content": "x"}]}`,
		"two":       `{"id": "two"} {"id": "three"}`,
	}
	for name, body := range bodies {
		os.WriteFile(filepath.Join(s.Dir(), name+".json"), []byte(body), 0o600)
	}
	os.WriteFile(filepath.Join(s.Dir(), "."+good.ID+".json.tmp-123"), whole[:10], 0o600)
	os.WriteFile(filepath.Join(s.Dir(), "notes.txt"), []byte("mine"), 0o600)
	// An earlier bad file of the same name is kept too.
	os.WriteFile(filepath.Join(s.Dir(), "corrupt.json.bad"), []byte("older"), 0o600)

	convs, bad, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(convs) != 1 || convs[0].ID != good.ID {
		t.Fatalf("loaded %d conversations, want only the good one", len(convs))
	}
	if len(bad) != len(bodies) {
		t.Fatalf("%d reports, want %d: %v", len(bad), len(bodies), bad)
	}
	for _, e := range bad {
		var bf *BadFileError
		if !errors.As(e, &bf) || bf.Moved == "" {
			t.Fatalf("report %v: want a *BadFileError with the file set aside", e)
		}
		name := strings.TrimSuffix(filepath.Base(bf.Path), ".json")
		if got, err := os.ReadFile(bf.Moved); err != nil || string(got) != bodies[name] {
			t.Errorf("%s: set aside as %s holding %q (%v), want the original contents", name, bf.Moved, got, err)
		}
		if !strings.Contains(e.Error(), bf.Path) {
			t.Errorf("report %q does not name the file", e)
		}
		if _, err := os.Stat(bf.Path); err == nil {
			t.Errorf("%s still in place after being set aside", bf.Path)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(s.Dir(), "corrupt.json.bad")); string(got) != "older" {
		t.Errorf("the earlier corrupt.json.bad was overwritten: %q", got)
	}
	if _, err := os.Stat(filepath.Join(s.Dir(), "corrupt.json.2.bad")); err != nil {
		t.Errorf("the second corrupt file was not kept as corrupt.json.2.bad: %v", err)
	}

	convs, bad, err = s.Load()
	if err != nil || len(bad) != 0 || len(convs) != 1 {
		t.Errorf("second Load: %d conversations, reports %v, %v; want the good one alone", len(convs), bad, err)
	}
}

// The file's name, not the ID written inside, says which file a
// conversation is saved to.
func TestLoadTakesTheIDFromTheFileName(t *testing.T) {
	s := openStore(t)
	c := sample("", t0, "original")
	s.Save(c)
	data, _ := os.ReadFile(filepath.Join(s.Dir(), c.ID+".json"))
	os.WriteFile(filepath.Join(s.Dir(), "copy.json"), data, 0o600)
	convs, _, _ := s.Load()
	ids := map[string]bool{}
	for _, c := range convs {
		ids[c.ID] = true
	}
	if len(convs) != 2 || !ids["copy"] || !ids[c.ID] {
		t.Errorf("IDs %v, want %s and copy", ids, c.ID)
	}
}

// brokenDir makes every write to the store fail, as a full disk would, and
// returns a function that repairs it. (Tests may run as root, who can write
// to a read-only folder, so the folder is replaced by a file instead.)
func brokenDir(t *testing.T, s *Store) (repair func()) {
	t.Helper()
	if err := os.RemoveAll(s.Dir()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.Dir(), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return func() {
		os.Remove(s.Dir())
		if err := os.MkdirAll(s.Dir(), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSaveFailureIsReturnedAndChangesNothing(t *testing.T) {
	s := openStore(t)
	c := sample("", t0, "keep me")
	before := c.Clone()
	brokenDir(t, s)
	err := s.Save(c)
	if err == nil || !strings.Contains(err.Error(), "keep me") {
		t.Fatalf("Save into a broken folder: %v, want an error naming the chat", err)
	}
	if !reflect.DeepEqual(c, before) {
		t.Errorf("the conversation changed on a failed save")
	}
}

func TestIDsCannotLeaveTheFolder(t *testing.T) {
	s := openStore(t)
	for _, id := range []string{"", "../x", "a/b", ".hidden", `a\b`} {
		c := sample("", t0, "x")
		c.ID = id
		if err := s.Save(c); err == nil {
			t.Errorf("Save with ID %q succeeded", id)
		}
		if err := s.Delete(id); err == nil {
			t.Errorf("Delete with ID %q succeeded", id)
		}
	}
}

func TestWriterSavesDeletesAndFlushes(t *testing.T) {
	s := openStore(t)
	w := s.NewWriter(func(err error) { t.Errorf("unexpected write error: %v", err) })
	defer w.Close()
	a, b := sample("", t0, "a"), sample("", t0, "b")
	w.Save(a)
	// The writer keeps a copy: changing a after Save does not change what
	// that save writes, and the later save wins.
	a.Add(Message{Role: Assistant, Content: "reply"}, t0.Add(time.Second))
	w.Save(a)
	w.Save(b)
	w.Delete(b.ID)
	w.Flush()
	convs, _, _ := s.Load()
	if len(convs) != 1 || convs[0].ID != a.ID || len(convs[0].Messages) != 2 {
		t.Fatalf("after flush: %+v, want a with its reply and no b", convs)
	}
}

func TestWriterReportsAFailureOnce(t *testing.T) {
	s := openStore(t)
	var mu sync.Mutex
	var errs []error
	w := s.NewWriter(func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() })
	defer w.Close()
	c := sample("", t0, "x")
	repair := brokenDir(t, s)
	for range 3 {
		w.Save(c)
		w.Flush()
	}
	mu.Lock()
	if len(errs) != 1 {
		t.Errorf("%d reports for three failed saves, want one", len(errs))
	}
	mu.Unlock()

	repair()
	w.Save(c)
	w.Flush()
	if convs, _, _ := s.Load(); len(convs) != 1 {
		t.Errorf("the save after the repair did not write the conversation")
	}
	brokenDir(t, s)
	w.Save(c)
	w.Flush()
	mu.Lock()
	if len(errs) != 2 {
		t.Errorf("%d reports, want a second one after a success and a new failure", len(errs))
	}
	mu.Unlock()
}

func TestTitles(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"Hello", "Hello"},
		{"\n\n  What is   a token?\nMore lines", "What is a token?"},
		{"Explain the difference between prefill and decode throughput on a GPU please", "Explain the difference between prefill and…"},
		{strings.Repeat("x", 60), strings.Repeat("x", 48) + "…"},
		{"", ""},
	} {
		if got := TitleFrom(tc.text); got != tc.want {
			t.Errorf("TitleFrom(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

// The first user message titles the chat until the user renames it; an
// edit of the first message (a cut and a new message) retitles it.
func TestTitleFollowsTheFirstMessageUntilRenamed(t *testing.T) {
	c := sample("", t0, "first question", "answer")
	if c.Title != "first question" {
		t.Fatalf("title %q", c.Title)
	}
	c.Cut(0, t0)
	c.Add(Message{Role: User, Content: "edited question"}, t0)
	if c.Title != "edited question" {
		t.Errorf("after an edit: title %q", c.Title)
	}
	c.Rename("  My chat ", t0)
	c.Cut(0, t0)
	c.Add(Message{Role: User, Content: "another"}, t0)
	if c.Title != "My chat" {
		t.Errorf("a renamed chat was retitled: %q", c.Title)
	}
	c.Rename("", t0)
	if c.Title != "another" {
		t.Errorf("clearing the title gave %q, want the first message's", c.Title)
	}
}

func TestChatMessages(t *testing.T) {
	c := sample("Be brief.", t0, "q", "a")
	want := []chat.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "q"}, {Role: "assistant", Content: "a"}}
	if got := c.Chat(); !reflect.DeepEqual(got, want) {
		t.Errorf("Chat() = %+v, want %+v", got, want)
	}
	c.System = ""
	if got := c.Chat(); len(got) != 2 || got[0].Role != "user" {
		t.Errorf("without a system prompt: %+v", got)
	}
}
