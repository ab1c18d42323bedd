package kokoro

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/internal/kokorotest"
)

// TestLoadModel loads the small fixture model from a Kokoro directory: it
// must be the model the fixture's weights build in memory, tensor for
// tensor.
func TestLoadModel(t *testing.T) {
	dir := kokorotest.WriteDir(t, t.TempDir())
	want := smallFixtureModel(t)
	m, err := LoadModel(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("%s: the model differs from the fixture's", dir)
	}
	// The directory's weights are the file LoadModel would take directly.
	file := filepath.Join(dir, "kokoro-v1_0.safetensors")
	if got, err := findWeights(dir); got != file || err != nil {
		t.Errorf("weights of %s: %s, %v", dir, got, err)
	}
	if got, err := findWeights(file); got != file || err != nil {
		t.Errorf("weights of %s: %s, %v", file, got, err)
	}
	if got := VoicesIn(dir); got != filepath.Join(dir, "voices") {
		t.Errorf("VoicesIn(%s) = %s", dir, got)
	}
	names, err := ListVoicesIn(dir)
	if err != nil || strings.Join(names, ",") != "af_heart,am_adam,bf_emma" {
		t.Errorf("voices %v, %v", names, err)
	}
	// A folder of packs given directly is its own voices folder.
	if got := VoicesIn(filepath.Join(dir, "voices")); got != filepath.Join(dir, "voices") {
		t.Errorf("VoicesIn(voices) = %s", got)
	}
}

// TestLoadModelErrors: each missing or bad file is named, and the
// missing ones say what to put where.
func TestLoadModelErrors(t *testing.T) {
	root := t.TempDir()
	write := func(name string, data []byte) string {
		t.Helper()
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fx := loadForwardFixture(t, "small")
	cfgJSON := []byte(fx.Config)

	// A torch zip's magic and then garbage.
	corrupt := write("corrupt/kokoro-v1_0.pth", append([]byte("PK\x03\x04"), make([]byte, 300)...))
	write("corrupt/config.json", cfgJSON)
	write("noconfig/kokoro-v1_0.pth", []byte("PK\x03\x04"))
	os.MkdirAll(filepath.Join(root, "empty"), 0o755)
	write("two/a.pth", []byte("x"))
	write("two/b.safetensors", []byte("x"))
	write("badconfig/kokoro-v1_0.pth", []byte("x"))
	write("badconfig/config.json", []byte(`{"hidden_dim": 512`))
	txt := write("weights.txt", []byte("x"))

	for _, c := range []struct {
		path    string
		missing bool     // matches fs.ErrNotExist
		want    []string // in the message
	}{
		{filepath.Join(root, "nowhere"), true, []string{"nowhere", "does not exist", "config.json", "kokoro-v1_0.pth", "voices"}},
		{filepath.Join(root, "empty"), true, []string{"empty", "no kokoro-v1_0.pth", "config.json"}},
		{filepath.Join(root, "noconfig"), true, []string{"no config.json beside", "noconfig"}},
		{filepath.Join(root, "corrupt"), false, []string{corrupt}},
		{corrupt, false, []string{corrupt}},
		{filepath.Join(root, "two"), false, []string{"a.pth", "b.safetensors", "several"}},
		{filepath.Join(root, "badconfig"), false, []string{filepath.Join(root, "badconfig", "config.json")}},
		{txt, false, []string{txt, ".pth or .safetensors"}},
	} {
		_, err := LoadModel(c.path)
		if err == nil {
			t.Errorf("%s: loaded", c.path)
			continue
		}
		if errors.Is(err, fs.ErrNotExist) != c.missing {
			t.Errorf("%s: missing %v for %v", c.path, !c.missing, err)
		}
		for _, s := range c.want {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: %q does not say %q", c.path, err, s)
			}
		}
	}

	// Voices: none, a pack of the wrong size, an unknown name.
	if _, err := ListVoicesIn(filepath.Join(root, "empty")); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), filepath.Join(root, "empty", "voices")) {
		t.Errorf("no voices: %v", err)
	}
	// A voices folder that is there but cannot be read is not missing: the
	// error names it and says why.
	notDir := write("notdir/voices", []byte("a file where the folder goes"))
	_, err := ListVoicesIn(notDir)
	if err == nil || errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), notDir) || !strings.Contains(err.Error(), "not a directory") || strings.Contains(err.Error(), "put Kokoro's") {
		t.Errorf("voices folder that is a file: %v", err)
	}
	if os.Geteuid() != 0 {
		locked := filepath.Join(root, "locked", "voices")
		if err := os.MkdirAll(locked, 0o755); err != nil {
			t.Fatal(err)
		}
		write("locked/voices/af_heart.pt", make([]byte, 10))
		if err := os.Chmod(locked, 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(locked, 0o755) })
		_, err := ListVoicesIn(filepath.Join(root, "locked"))
		if err == nil || errors.Is(err, fs.ErrNotExist) || !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), locked) {
			t.Errorf("unreadable voices folder: %v", err)
		}
	}
	short := write("vs/voices/short.bin", make([]byte, 1000))
	if _, err := OpenVoice(VoicesIn(filepath.Join(root, "vs")), "short"); err == nil || !strings.Contains(err.Error(), short) || !strings.Contains(err.Error(), "1000 bytes") {
		t.Errorf("short voice: %v", err)
	}
	_, err = OpenVoice(voicesDir(t), "zz_nobody")
	if err == nil || !strings.Contains(err.Error(), "zz_nobody") || !strings.Contains(err.Error(), "af_heart, am_adam, bf_emma") {
		t.Errorf("unknown voice: %v", err)
	}
}
