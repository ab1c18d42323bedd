package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/internal/kokorotest"
	"github.com/hearthstudio/hearth/vocoder/audio"
	"github.com/hearthstudio/hearth/vocoder/kokoro"
)

// TestSpeakCommand speaks with the small fixture model on the CPU, at
// speed 2, which halves the frames and the forward's time. This
// machine, like CI, has no sound card: --play says so and the WAV and the
// word timings are still written.
func TestSpeakCommand(t *testing.T) {
	dir := kokorotest.WriteDir(t, t.TempDir())
	tmp := t.TempDir()
	wav, vtt := filepath.Join(tmp, "out.wav"), filepath.Join(tmp, "out.vtt")
	out, log, err := runModelCmd(t, "", "speak", "--model", dir, "--backend", "cpu", "-t", "Hi there. Go on.",
		"--voice", "af_heart:0.6,am_adam:0.4", "--speed", "2", "--play", "-o", wav, "--float", "--words", vtt)
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	if out != "" {
		t.Errorf("stdout %q; the notes belong on stderr", out)
	}
	if !strings.Contains(log, "no audio device") || !strings.Contains(log, "still written to "+wav) {
		t.Errorf("no note about the missing sound card:\n%s", log)
	}
	if !strings.Contains(log, "[1]") || !strings.Contains(log, "[2]") || !strings.Contains(log, "wrote "+wav) {
		t.Errorf("progress:\n%s", log)
	}
	raw, err := os.ReadFile(wav)
	if err != nil {
		t.Fatal(err)
	}
	audio, rate, err := audio.ReadWAV(bytes.NewReader(raw))
	if err != nil || rate != kokoro.SampleRate || len(audio) == 0 {
		t.Fatalf("%d samples at %d Hz: %v", len(audio), rate, err)
	}
	if raw[20] != 3 { // wFormatTag: WAVE_FORMAT_IEEE_FLOAT for --float
		t.Errorf("format tag %d, want 3 (float)", raw[20])
	}
	cues, err := os.ReadFile(vtt)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^(\d\d:\d\d:\d\d\.\d\d\d) --> (\d\d:\d\d:\d\d\.\d\d\d)\n(\S+)$`)
	m := re.FindAllStringSubmatch(string(cues), -1)
	if !strings.HasPrefix(string(cues), "WEBVTT\n") || len(m) != 4 {
		t.Fatalf("WebVTT:\n%s", cues)
	}
	last := ""
	for i, c := range m {
		if c[1] < last || c[2] <= c[1] {
			t.Errorf("cue %d %s → %s after %s", i, c[1], c[2], last)
		}
		last = c[2]
	}
	if got := m[0][3] + " " + m[1][3] + " " + m[2][3] + " " + m[3][3]; got != "Hi there Go on" {
		t.Errorf("words %q", got)
	}

	// Text from standard input, JSON words and report, 16-bit PCM.
	words := filepath.Join(tmp, "words.json")
	out, log, err = runModelCmd(t, "Hello.", "speak", "--model", dir, "--backend", "cpu", "-f", "-", "--voice", "bf_emma", "--speed", "2",
		"-o", wav, "--words", words, "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	var rep speakReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Chunks != 1 || rep.AudioSeconds <= 0 || rep.Output != wav {
		t.Errorf("report %+v, %v:\n%s", rep, err, out)
	}
	var timeline struct{ Chunks []wordsJSON }
	data, _ := os.ReadFile(words)
	if err := json.Unmarshal(data, &timeline); err != nil || len(timeline.Chunks) != 1 || timeline.Chunks[0].Text != "Hello." ||
		len(timeline.Chunks[0].Words) != 1 || timeline.Chunks[0].Words[0].Text != "Hello" {
		t.Errorf("words file %v:\n%s", err, data)
	}
	if raw, _ := os.ReadFile(wav); len(raw) < 22 || raw[20] != 1 {
		t.Errorf("format tag %v, want 1 (PCM)", raw[20:22])
	}

	out, _, err = runModelCmd(t, "", "speak", "--model", dir, "--list-voices")
	if err != nil || out != "af_heart\nam_adam\nbf_emma\n" {
		t.Errorf("--list-voices: %q, %v", out, err)
	}

	// The same directory (writing one takes a second) for the mistakes.
	t.Run("bad input", func(t *testing.T) { speakBadInput(t, dir) })
}

// speakBadInput: each mistake is refused with a message that names what
// is wrong, and leaves an existing output file as it was. dir is a
// Kokoro directory.
func speakBadInput(t *testing.T, dir string) {
	tmp := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "voices", "short.bin"), make([]byte, 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	corrupt := filepath.Join(tmp, "corrupt")
	os.MkdirAll(corrupt, 0o755)
	cfg, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	os.WriteFile(filepath.Join(corrupt, "config.json"), cfg, 0o644)
	os.WriteFile(filepath.Join(corrupt, "kokoro-v1_0.pth"), append([]byte("PK\x03\x04"), bytes.Repeat([]byte{7}, 500)...), 0o644)
	os.MkdirAll(filepath.Join(corrupt, "voices"), 0o755)
	pack, _ := os.ReadFile(filepath.Join(dir, "voices", "af_heart.bin"))
	os.WriteFile(filepath.Join(corrupt, "voices", "af_heart.bin"), pack, 0o644)
	wav := filepath.Join(tmp, "keep.wav")
	os.WriteFile(wav, []byte("old"), 0o644)

	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"empty text", []string{"-t", ""}, []string{"nothing to speak"}},
		{"punctuation only", []string{"-t", "?! ... ;"}, []string{"nothing to speak", "?! ... ;"}},
		{"unknown voice", []string{"-t", "Hi.", "--voice", "zz_nobody"}, []string{"zz_nobody", "af_heart, am_adam, bf_emma, short"}},
		{"voice of the wrong size", []string{"-t", "Hi.", "--voice", "short"}, []string{filepath.Join(dir, "voices", "short.bin"), "1000 bytes"}},
		{"speed", []string{"-t", "Hi.", "--speed", "0"}, []string{"--speed", "0.25 to 4"}},
		{"no text", []string{}, []string{"-t TEXT", "-f FILE"}},
		{"both texts", []string{"-t", "Hi.", "-f", "x.txt"}, []string{"not both"}},
		{"missing file", []string{"-f", filepath.Join(tmp, "nope.txt")}, []string{"nope.txt"}},
		{"corrupt weights", []string{"-t", "Hi.", "--model", corrupt}, []string{filepath.Join(corrupt, "kokoro-v1_0.pth")}},
		{"no model", []string{"-t", "Hi.", "--model", filepath.Join(tmp, "none")}, []string{"no Kokoro voice model", filepath.Join(tmp, "none"), "config.json", "kokoro-v1_0.pth", "hearth pull hexgrad/Kokoro-82M --dir " + filepath.Join(tmp, "none")}},
	} {
		args := append([]string{"speak", "--model", dir, "--backend", "cpu", "-o", wav}, c.args...)
		_, _, err := runModelCmd(t, "", args...)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, s := range c.want {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: %q does not say %q", c.name, err, s)
			}
		}
		// A user reads these: the file or voice, not Hearth's package names.
		if strings.Contains(err.Error(), "kokoro:") || strings.Contains(err.Error(), "phonemes:") || strings.Contains(err.Error(), "audio:") || strings.Contains(err.Error(), "app:") {
			t.Errorf("%s: %q names an internal package", c.name, err)
		}
		if old, _ := os.ReadFile(wav); string(old) != "old" {
			t.Fatalf("%s: the existing output was overwritten", c.name)
		}
	}
	_, _, err := runModelCmd(t, "", "speak", "--model", dir, "-t", "Hi.")
	if err == nil || !strings.Contains(err.Error(), "-o FILE.wav, --play") {
		t.Errorf("no output asked for: %v", err)
	}
	if _, err := os.Stat(filepath.Join(tmp, "keep.wav")); err != nil {
		t.Error(err)
	}
}

func TestVTTTime(t *testing.T) {
	for sec, want := range map[float64]string{0: "00:00:00.000", 1.0005: "00:00:01.001", 3725.25: "01:02:05.250"} {
		if got := vttTime(sec); got != want {
			t.Errorf("vttTime(%g) = %s, want %s", sec, got, want)
		}
	}
}
