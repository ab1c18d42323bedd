package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/app/download"
	"github.com/hearthstudio/hearth/internal/hubtest"
	"github.com/hearthstudio/hearth/internal/kokorotest"
)

// fakeKokoro fills hub with a Kokoro-82M of random bytes: config.json in
// git, the weights and voice packs in LFS, as the real repository keeps
// them. It returns each file's content by its path in the repository.
func fakeKokoro(hub *hubtest.Hub, voices ...string) map[string][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	files := map[string][]byte{
		"config.json":     []byte(`{"n_token": 178}`),
		"kokoro-v1_0.pth": random(300_000),
		"README.md":       []byte("# Kokoro"),
	}
	for _, v := range voices {
		files["voices/"+v+".pt"] = random(5_000)
	}
	for p, data := range files {
		hub.Add(KokoroRepo, p, data, p != "config.json" && p != "README.md")
	}
	return files
}

// checkPlaced checks that dir holds exactly the files named, each with
// its content, as hard links to the cache's blobs.
func checkPlaced(t *testing.T, dir string, files map[string][]byte, names ...string) {
	t.Helper()
	for _, n := range names {
		p := filepath.Join(dir, filepath.FromSlash(n))
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, files[n]) {
			t.Errorf("%s: %d bytes (%v), want the repository's %d", p, len(got), err, len(files[n]))
		}
		if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s is not a hard link to the blob: %v", p, err)
		}
	}
	var have []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			have = append(have, filepath.ToSlash(rel))
		}
		return nil
	})
	slices.Sort(have)
	slices.Sort(names)
	if !slices.Equal(have, names) {
		t.Errorf("%s holds %v, want %v", dir, have, names)
	}
}

func TestPullKokoro(t *testing.T) {
	hub := hubtest.New(t)
	files := fakeKokoro(hub, "af_heart", "af_bella", "am_adam", "bf_emma", "jf_alpha")
	dir := filepath.Join(t.TempDir(), "kokoro")

	var last KokoroProgress
	calls := 0
	res, err := PullKokoro(context.Background(), KokoroPullOptions{
		Voices: []string{"af_heart", " bf_emma"},
		Dir:    dir,
		Progress: func(p KokoroProgress) {
			if p.Done < last.Done || p.Done > p.Total {
				t.Errorf("progress went from %+v to %+v", last, p)
			}
			last = p
			calls++
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	total := int64(len(files["config.json"]) + len(files["kokoro-v1_0.pth"]) + 2*5_000)
	if res.Dir != dir || res.Commit != hubtest.Commit || !slices.Equal(res.Voices, []string{"af_heart", "bf_emma"}) ||
		res.Bytes != total || res.Fetched != total {
		t.Errorf("pull %+v, want the two voices, %d bytes all fetched", res, total)
	}
	if calls < 3 || last.Done != total || last.Total != total {
		t.Errorf("%d progress calls, the last %+v; want several, ending at %d of %d", calls, last, total, total)
	}
	want := []string{"config.json", "kokoro-v1_0.pth", "voices/af_heart.pt", "voices/bf_emma.pt"}
	checkPlaced(t, dir, files, want...)
	snap := filepath.Join(os.Getenv("HF_HUB_CACHE"), "models--hexgrad--Kokoro-82M", "snapshots", hubtest.Commit)
	if res.Snapshot != snap {
		t.Errorf("snapshot %s, want %s", res.Snapshot, snap)
	}

	// The engine finds it: its voices are the ones pulled.
	e := NewEngine(EngineOptions{Backend: "cpu", Kokoro: dir})
	defer e.Close()
	if names, err := e.Voices(); err != nil || !slices.Equal(names, []string{"af_heart", "bf_emma"}) {
		t.Errorf("Voices after the pull: %v, %v", names, err)
	}

	// Again with another voice: the cache has the rest, so only the new
	// pack is fetched, and the pack is added beside the others.
	res, err = PullKokoro(context.Background(), KokoroPullOptions{Voices: []string{"am_adam"}, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if res.Fetched != 5_000 {
		t.Errorf("the second pull fetched %d bytes, want only the new voice's 5000", res.Fetched)
	}
	checkPlaced(t, dir, files, append(want, "voices/am_adam.pt")...)

	// "english" is every a… and b… pack; "all" every pack.
	for _, c := range []struct {
		voices string
		want   []string
	}{
		{"english", []string{"af_bella", "af_heart", "am_adam", "bf_emma"}},
		{"all", []string{"af_bella", "af_heart", "am_adam", "bf_emma", "jf_alpha"}},
	} {
		res, err := PullKokoro(context.Background(), KokoroPullOptions{Voices: []string{c.voices}, Dir: t.TempDir()})
		if err != nil || !slices.Equal(res.Voices, c.want) {
			t.Errorf("voices %q: pulled %v (%v), want %v", c.voices, res.Voices, err, c.want)
		}
	}
}

// TestPullKokoroDefaultVoices: with no voices named, the default set is
// pulled.
func TestPullKokoroDefaultVoices(t *testing.T) {
	hub := hubtest.New(t)
	fakeKokoro(hub, append([]string{"jf_alpha", "zm_yunxi"}, DefaultKokoroVoices...)...)
	res, err := PullKokoro(context.Background(), KokoroPullOptions{Dir: t.TempDir()})
	want := slices.Sorted(slices.Values(DefaultKokoroVoices))
	if err != nil || !slices.Equal(res.Voices, want) {
		t.Errorf("pulled %v (%v), want %v", res.Voices, err, want)
	}
}

func TestPullKokoroErrors(t *testing.T) {
	hub := hubtest.New(t)
	fakeKokoro(hub, "af_heart", "am_adam")
	dir := filepath.Join(t.TempDir(), "kokoro")
	for _, c := range []struct {
		o    KokoroPullOptions
		is   error
		want string
	}{
		{KokoroPullOptions{Voices: []string{"af_nobody"}}, nil, `no voice "af_nobody": it has af_heart, am_adam`},
		{KokoroPullOptions{Voices: []string{" , "}}, nil, "no voices chosen"},
		{KokoroPullOptions{Revision: "v9"}, download.ErrNotFound, "no revision v9"},
	} {
		c.o.Dir = dir
		_, err := PullKokoro(context.Background(), c.o)
		if err == nil || (c.is != nil && !errors.Is(err, c.is)) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error saying %q", c.o, err, c.want)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed pull made %s: %v", dir, err)
	}
}

// TestPullKokoroResumes: a connection dropped in the weights leaves the
// Kokoro directory as it was; the next pull asks only for the bytes after
// those received and completes the directory.
func TestPullKokoroResumes(t *testing.T) {
	hub := hubtest.New(t)
	files := fakeKokoro(hub, "af_heart")
	const cut = 120_000
	hub.CutAfter(KokoroRepo, "kokoro-v1_0.pth", cut)
	dir := filepath.Join(t.TempDir(), "kokoro")

	_, err := PullKokoro(context.Background(), KokoroPullOptions{Voices: []string{"af_heart"}, Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "connection lost") {
		t.Fatalf("pull through a dropped connection: %v, want connection lost", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the interrupted pull put files in the Kokoro directory: %v", err)
	}

	res, err := PullKokoro(context.Background(), KokoroPullOptions{Voices: []string{"af_heart"}, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(len(files["kokoro-v1_0.pth"]) - cut + 5_000); res.Fetched != want {
		t.Errorf("the resumed pull fetched %d bytes, want the weights' rest and the voice, %d", res.Fetched, want)
	}
	if !slices.Contains(hub.Gets(), fmt.Sprintf("kokoro-v1_0.pth bytes=%d-", cut)) {
		t.Errorf("no GET resumed the weights from byte %d: %v", cut, hub.Gets())
	}
	checkPlaced(t, dir, files, "config.json", "kokoro-v1_0.pth", "voices/af_heart.pt")
}

// TestPullKokoroChecksumMismatch: a voice whose bytes do not hash to the
// SHA-256 the hub publishes is refused, and nothing is put in the Kokoro
// directory.
func TestPullKokoroChecksumMismatch(t *testing.T) {
	hub := hubtest.New(t)
	fakeKokoro(hub, "af_heart", "am_adam")
	hub.PublishWrongSHA256(KokoroRepo, "voices/am_adam.pt")
	dir := filepath.Join(t.TempDir(), "kokoro")
	_, err := PullKokoro(context.Background(), KokoroPullOptions{Voices: []string{"af_heart", "am_adam"}, Dir: dir})
	if !errors.Is(err, download.ErrChecksum) || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("pull of a corrupted voice: %v, want a SHA-256 mismatch", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused pull made %s: %v", dir, err)
	}
}

// TestPullKokoroKeepsTheUsersFiles: a pack of the user's own under a stock
// name is not replaced; a link left by an earlier set-up is.
func TestPullKokoroKeepsTheUsersFiles(t *testing.T) {
	hub := hubtest.New(t)
	files := fakeKokoro(hub, "af_heart", "am_adam")
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "voices"), 0o755)
	mine := filepath.Join(dir, "voices", "af_heart.pt")
	os.WriteFile(mine, []byte("my own voice"), 0o644)
	os.WriteFile(filepath.Join(dir, "voices", "mine.bin"), []byte("made with hearth voice"), 0o644)
	os.Symlink(filepath.Join(dir, "gone.pth"), filepath.Join(dir, "kokoro-v1_0.pth"))

	_, err := PullKokoro(context.Background(), KokoroPullOptions{Voices: []string{"af_heart"}, Dir: dir})
	if err == nil || !strings.Contains(err.Error(), mine) || !strings.Contains(err.Error(), "kept") {
		t.Errorf("pull over the user's af_heart.pt: %v, want an error naming it", err)
	}
	if b, _ := os.ReadFile(mine); string(b) != "my own voice" {
		t.Errorf("the user's pack was overwritten")
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused pull put some of its files in the directory: %v", err)
	}
	if _, err := PullKokoro(context.Background(), KokoroPullOptions{Voices: []string{"am_adam"}, Dir: dir}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "kokoro-v1_0.pth")); err != nil || !bytes.Equal(b, files["kokoro-v1_0.pth"]) {
		t.Errorf("the dangling link was not replaced by the weights: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "voices", "mine.bin")); string(b) != "made with hearth voice" {
		t.Errorf("the user's made voice was touched")
	}
}

// TestSpeakFindsPulledKokoro: a Kokoro pulled into the default Kokoro
// directory speaks, with no further step. The hub serves the test model
// (kokorotest's small fixture, its safetensors under the .pth name, its
// .bin packs as .pt: Hearth reads either by content).
func TestSpeakFindsPulledKokoro(t *testing.T) {
	src := kokorotest.WriteDir(t, t.TempDir())
	hub := hubtest.New(t)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir()) // DefaultKokoroDir lies under it
	t.Setenv("HOME", t.TempDir())            // and on macOS under HOME
	for repoPath, local := range map[string]string{
		"config.json":        "config.json",
		"kokoro-v1_0.pth":    "kokoro-v1_0.safetensors",
		"voices/af_heart.pt": "voices/af_heart.bin",
	} {
		data, err := os.ReadFile(filepath.Join(src, local))
		if err != nil {
			t.Fatal(err)
		}
		hub.Add(KokoroRepo, repoPath, data, repoPath != "config.json")
	}

	e := NewEngine(EngineOptions{Backend: "cpu"})
	defer e.Close()
	err := e.Speak(context.Background(), SpeakRequest{Text: "Hi.", Voice: "af_heart"}, nil)
	if !errors.Is(err, ErrNoVoiceModel) {
		t.Fatalf("Speak before the pull: %v, want no voice model", err)
	}
	res, err := PullKokoro(context.Background(), KokoroPullOptions{Voices: []string{"af_heart"}})
	if err != nil {
		t.Fatal(err)
	}
	if def, _ := DefaultKokoroDir(); res.Dir != def {
		t.Errorf("pulled into %s, want the default Kokoro directory %s", res.Dir, def)
	}
	var samples int
	err = e.Speak(context.Background(), SpeakRequest{Text: "Hi.", Voice: "af_heart"}, func(c SpeechChunk) error {
		samples += len(c.Audio)
		return nil
	})
	if err != nil || samples == 0 {
		t.Fatalf("Speak after the pull: %v, %d samples", err, samples)
	}
}
