package settings

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestSaveLoadRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hearth", "settings.json")
	s := Defaults()
	s.Folders = []string{"/models", "/more models"}
	s.LastModel = "gemma3:1b"
	s.Sampling.Temperature = 0.2
	s.Tune = Tune{Model: "gemma3:1b", Data: "/data/chats.jsonl", OutDir: "/adapters", Preset: "quick",
		Rank: 8, Alpha: 16, LR: 3e-4, Epochs: 1.5, SeqLen: 256, Batch: 2, Accum: 4, Valid: 0.1}
	if err := Save(path, s); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Errorf("loaded %+v, saved %+v", got, s)
	}
}

// A settings file from before the Tune tab loads, with the tab's choices
// left empty.
func TestLoadBeforeTune(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	os.WriteFile(path, []byte(`{"backend": "gpu", "last_model": "gemma3:1b", "sampling": {"temperature": 0.7, "top_k": 40, "top_p": 0.95, "min_p": 0.05, "repeat_penalty": 1}}`), 0o644)
	s, err := Load(path)
	if err != nil || s.Backend != "gpu" || s.LastModel != "gemma3:1b" || s.Tune != (Tune{}) {
		t.Errorf("got %+v, %v", s, err)
	}
	if data, _ := json.Marshal(Defaults()); strings.Contains(string(data), `"tune"`) {
		t.Errorf("the defaults write a tune object: %s", data)
	}
}

// The Voice tab's choices round-trip, a speed off the tab's range is
// dropped with an error naming the file, and defaults write no voice.
func TestLoadVoice(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "settings.json")
	s := Defaults()
	s.Voice = Voice{Voice: "af_heart:0.5,am_adam:0.25", Speed: 1.25, Float: true}
	if err := Save(path, s); err != nil {
		t.Fatal(err)
	}
	if got, err := Load(path); err != nil || got.Voice != s.Voice {
		t.Errorf("got %+v, %v; want %+v", got.Voice, err, s.Voice)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"voice": {"voice": "af_heart", "speed": 9}}`), 0o644)
	got, err := Load(bad)
	if err == nil || !strings.Contains(err.Error(), bad) || got.Voice != (Voice{Voice: "af_heart"}) {
		t.Errorf("speed 9: %+v, %v; want the speed dropped and an error naming the file", got.Voice, err)
	}
	if data, _ := json.Marshal(Defaults()); strings.Contains(string(data), `"voice"`) {
		t.Errorf("the defaults write a voice object: %s", data)
	}
}

func TestLoadMissingGivesDefaults(t *testing.T) {
	got, err := Load(filepath.Join(t.TempDir(), "none.json"))
	if err != nil || !reflect.DeepEqual(got, Defaults()) {
		t.Errorf("got %+v, %v; want the defaults and no error", got, err)
	}
}

// A corrupt file or impossible sampling values give defaults and an error
// naming the file, and the file itself is left for the user to see.
func TestLoadBadFile(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"truncated": `{"backend": "gpu", "fold`,
		"sampling":  `{"sampling": {"temperature": -3, "top_p": 1}}`,
	} {
		path := filepath.Join(dir, name+".json")
		os.WriteFile(path, []byte(body), 0o644)
		s, err := Load(path)
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %v, want one naming %s", name, err, path)
		}
		if s.Sampling != Defaults().Sampling {
			t.Errorf("%s: sampling %+v, want the defaults", name, s.Sampling)
		}
		if b, _ := os.ReadFile(path); string(b) != body {
			t.Errorf("%s: the bad file was changed by Load", name)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]uint64{"8GiB": 8 << 30, "7.5 GB": 7.5e9, "512mib": 512 << 20, "1048576": 1 << 20,
		"10B": 10, "2KB": 2000, "64KiB": 64 << 10, "6 GiB": 6 << 30, "8000 MB": 8e9, "1.5gib": 3 << 29, " 1 TiB ": 1 << 40} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "GiB", "-1GiB", "-1 GiB", "0", "lots", "1e400"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q): no error", bad)
		}
	}
}
