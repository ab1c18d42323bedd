package cli

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/internal/sharedtest"
	"github.com/hearthstudio/hearth/vocoder/audio"
	"github.com/hearthstudio/hearth/vocoder/kokoro"
)

// styleEncoderFixture is the small StyleTTS2 checkpoint torch wrote for
// vocoder/kokoro's tests (vocoder/kokoro/testdata/make_style_fixture.py).
const styleEncoderFixture = "../../vocoder/kokoro/testdata/styletts2/encoder.pth"

// writeReference writes 1.2 s of a vowel-like harmonic sound at 16 kHz
// between 0.3 s silences, as a 16-bit WAV.
func writeReference(t *testing.T, dir string) string {
	t.Helper()
	const rate = 16000
	x := make([]float32, rate*18/10)
	for i := rate * 3 / 10; i < rate*15/10; i++ {
		tt := float64(i) / rate
		f0 := 120 + 20*tt
		v := 0.0
		for h := 1; h <= 12; h++ {
			// Harmonics shaped by a formant near 700 Hz.
			amp := 1 / (1 + math.Pow((float64(h)*f0-700)/300, 2))
			v += amp * math.Sin(2*math.Pi*float64(h)*f0*tt)
		}
		x[i] = float32(0.2 * v)
	}
	path := filepath.Join(dir, "ref.wav")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := audio.WriteWAV(f, x, rate, audio.PCM16); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestVoiceCommand(t *testing.T) {
	dir := t.TempDir()
	ref := writeReference(t, dir)
	out := filepath.Join(dir, "me.bin")
	stdout, _, err := execute(newVoiceCmd(), "--from", ref, "--encoder", styleEncoderFixture, "-o", out, "--backend", "cpu", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep voiceReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v in %s", err, stdout)
	}
	// 1.2 s of sound, trimmed to about that (librosa's frames reach
	// ±1024 samples at 24 kHz past it): 96 to 110 frames.
	if rep.Rate != 16000 || rep.Backend != "cpu" || rep.Frames < 96 || rep.Frames > 110 || len(rep.Style) != 256 || rep.RefShare != 1 {
		t.Errorf("report %+v", rep)
	}
	v, err := kokoro.LoadVoice(out)
	if err != nil {
		t.Fatal(err)
	}
	for r := range kokoro.VoiceRows {
		for j, want := range rep.Style {
			if v.Pack[r*kokoro.VoiceDim+j] != want {
				t.Fatalf("row %d, value %d: %g, want the style's %g", r, j, v.Pack[r*kokoro.VoiceDim+j], want)
			}
		}
	}

	// The same on the GPU (lavapipe under make test).
	outGPU := filepath.Join(dir, "me-gpu.bin")
	stdout, _, err = execute(newVoiceCmd(), "--from", ref, "--encoder", styleEncoderFixture, "-o", outGPU, "--backend", "gpu", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var repGPU voiceReport
	if err := json.Unmarshal([]byte(stdout), &repGPU); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(repGPU.Backend, "gpu: ") {
		t.Errorf("backend %q", repGPU.Backend)
	}
	for j := range rep.Style {
		// vocoder/kokoro's parity tests bound the GPU at 5e-6 of the scale
		// (styles of ~0.2 here); 1e-5 absolute is twice that.
		if d := math.Abs(float64(repGPU.Style[j] - rep.Style[j])); d > 1e-5 {
			t.Fatalf("GPU style value %d off by %g", j, d)
		}
	}

	// auto: the GPU when it is a hardware one; a software adapter
	// (lavapipe) is slower than the CPU, so auto runs on the CPU there.
	dev, err := gpu.Open(gpu.OptionsFromEnv())
	if err != nil {
		t.Fatal(err)
	}
	software, adapter := dev.Info.Type == "cpu", dev.Info.Label()
	dev.Release()
	stdout, stderr, err := execute(newVoiceCmd(), "--from", ref, "--encoder", styleEncoderFixture, "-o", filepath.Join(dir, "me-auto.bin"), "--backend", "auto", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var repAuto voiceReport
	if err := json.Unmarshal([]byte(stdout), &repAuto); err != nil {
		t.Fatal(err)
	}
	if software {
		if repAuto.Backend != "cpu" || !strings.Contains(stderr, "software renderer") || !strings.Contains(stderr, adapter) {
			t.Errorf("auto on the software adapter %s: backend %q, stderr %q; want the CPU, saying why", adapter, repAuto.Backend, stderr)
		}
	} else if repAuto.Backend != "gpu: "+adapter {
		t.Errorf("auto on the adapter %s: backend %q", adapter, repAuto.Backend)
	}

	// Blended half and half with af_heart, row by row.
	voices := filepath.Join(sharedtest.Dir(t, "kokoro"), "voices")
	outMix := filepath.Join(dir, "mix.bin")
	stdout, _, err = execute(newVoiceCmd(), "--from", ref, "--encoder", styleEncoderFixture, "-o", outMix,
		"--backend", "cpu", "--blend", "af_heart:0.5", "--voices", voices)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout, "blend: recording 0.50, af_heart 0.50") || !strings.Contains(stdout, "wrote "+outMix) {
		t.Errorf("output: %s", stdout)
	}
	mix, err := kokoro.LoadVoice(outMix)
	if err != nil {
		t.Fatal(err)
	}
	heart, err := kokoro.LoadVoice(filepath.Join(voices, "af_heart.bin"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []int{0, 200, kokoro.VoiceRows - 1} {
		for j := 0; j < kokoro.VoiceDim; j += 17 {
			i := r*kokoro.VoiceDim + j
			want := 0.5*float64(rep.Style[j]) + 0.5*float64(heart.Pack[i])
			// One f32 rounding of a mean of values up to ~1.
			if math.Abs(float64(mix.Pack[i])-want) > 1e-6 {
				t.Fatalf("blend row %d value %d: %g, want %g", r, j, mix.Pack[i], want)
			}
		}
	}
}

func TestVoiceCommandErrors(t *testing.T) {
	dir := t.TempDir()
	ref := writeReference(t, dir)
	short := filepath.Join(dir, "short.wav")
	f, err := os.Create(short)
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, 8000)
	for i := range x {
		x[i] = float32(0.3 * math.Sin(float64(i)*0.1))
	}
	if err := audio.WriteWAV(f, x, 16000, audio.PCM16); err != nil {
		t.Fatal(err)
	}
	f.Close()
	voices := filepath.Join(sharedtest.Dir(t, "kokoro"), "voices")
	out := filepath.Join(dir, "out.bin")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--from", ref, "-o", out}, "required"},
		{[]string{"--from", ref, "--encoder", styleEncoderFixture, "-o", out, "--blend", "af_heart", "--voices", voices}, "share"},
		{[]string{"--from", ref, "--encoder", styleEncoderFixture, "-o", out, "--blend", "af_heart:0.6,am_adam:0.4", "--voices", voices}, "sum"},
		{[]string{"--from", ref, "--encoder", styleEncoderFixture, "-o", out, "--blend", "nobody:0.5", "--voices", voices}, "unknown voice"},
		{[]string{"--from", short, "--encoder", styleEncoderFixture, "-o", out}, "at least 0.80 s"},
		{[]string{"--from", filepath.Join(dir, "none.wav"), "--encoder", styleEncoderFixture, "-o", out}, "none.wav"},
		{[]string{"--from", ref, "--encoder", ref, "-o", out}, "style encoder"},
		{[]string{"--from", ref, "--encoder", styleEncoderFixture, "-o", out, "--backend", "tpu"}, "--backend"},
	} {
		_, _, err := execute(newVoiceCmd(), tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v (want an error mentioning %q)", tc.args, err, tc.want)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a failed run left %s", out)
	}
}
