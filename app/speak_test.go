package app

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hearthstudio/hearth/internal/kokorotest"
	"github.com/hearthstudio/hearth/vocoder/audio"
	"github.com/hearthstudio/hearth/vocoder/phonemes"
)

// TestSpeakStreamsChunks speaks two sentences on the CPU with the small
// fixture model loaded from a Kokoro directory: two chunks in order, each
// starting where the one before ended, words inside their chunk; the
// model stays loaded for the next request; bad requests fail with errors
// that say what is wrong.
func TestSpeakStreamsChunks(t *testing.T) {
	dir := kokorotest.WriteDir(t, t.TempDir())
	e := NewEngine(EngineOptions{Backend: "cpu", Kokoro: dir})
	defer e.Close()
	ctx := context.Background()

	voices, err := e.Voices()
	if err != nil || strings.Join(voices, ",") != "af_heart,am_adam,bf_emma" {
		t.Fatalf("voices %v, %v", voices, err)
	}

	// Speed 2 halves the frames, and the CPU forward's time with them.
	var chunks []SpeechChunk
	err = e.Speak(ctx, SpeakRequest{Text: "Hi there. Go on.", Voice: "af_heart:0.6,am_adam:0.4", Speed: 2}, func(c SpeechChunk) error {
		chunks = append(chunks, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(chunks) != 2 || chunks[0].Text != "Hi there." || chunks[1].Text != "Go on." {
		t.Fatalf("%d chunks: %+v", len(chunks), chunks)
	}
	var at time.Duration
	for k, c := range chunks {
		if c.Start != at || len(c.Audio) == 0 {
			t.Errorf("chunk %d starts at %v with %d samples; the speech so far lasts %v", k, c.Start, len(c.Audio), at)
		}
		at += time.Duration(len(c.Audio)) * time.Second / SampleRate
		if len(c.Words) != 2 {
			t.Errorf("chunk %d: words %v", k, c.Words)
		}
		for _, w := range c.Words {
			if w.Start < c.Start || w.End > at || w.End <= w.Start {
				t.Errorf("chunk %d: word %+v outside [%v, %v)", k, w, c.Start, at)
			}
		}
	}
	loaded := e.speech

	// Bad requests, on the loaded model.
	for _, c := range []struct {
		req  SpeakRequest
		want []string
		is   error
	}{
		{SpeakRequest{Text: "", Voice: "af_heart"}, []string{"nothing to speak"}, phonemes.ErrNothingToSay},
		{SpeakRequest{Text: "?! ... ,", Voice: "bf_emma"}, []string{"nothing to speak"}, phonemes.ErrNothingToSay},
		{SpeakRequest{Text: "Hello.", Voice: "zz_nobody"}, []string{"zz_nobody", "af_heart, am_adam, bf_emma"}, nil},
		{SpeakRequest{Text: "Hello.", Voice: "af_heart", Speed: 9}, []string{"speed 9"}, nil},
	} {
		err := e.Speak(ctx, c.req, nil)
		if err == nil || (c.is != nil && !errors.Is(err, c.is)) {
			t.Errorf("%+v: %v", c.req, err)
			continue
		}
		for _, s := range c.want {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%+v: %q does not say %q", c.req, err, s)
			}
		}
	}
	if e.speech != loaded {
		t.Error("the model was loaded again for the next request")
	}
	if len(loaded.phonemizers) != 2 {
		t.Errorf("%d phonemizers; want en-us for af_heart and en-gb for bf_emma", len(loaded.phonemizers))
	}

	// The GPU forward is chosen when asked for (its parity with the CPU
	// forward is vocoder/kokoro's tests'; a sentence through it on lavapipe
	// takes longer than this whole test), and under auto only on a
	// hardware adapter: CI's is lavapipe, a software one, so the CPU.
	t.Setenv("HEARTH_ADAPTER", "")
	best := preferredAdapter(t)
	for _, backend := range []string{"gpu", "auto"} {
		g := NewEngine(EngineOptions{Backend: backend, Kokoro: dir})
		err := g.submit(ctx, func(context.Context) error {
			s, err := g.ensureSpeech(dir)
			if err != nil {
				return err
			}
			onGPU := strings.HasPrefix(s.backend, "gpu: ")
			if want := backend == "gpu" || (best.Type != "cpu" && best.Type != ""); onGPU != want || (onGPU && s.release == nil) {
				t.Errorf("%s: speech on %s (adapter %s, type %q)", backend, s.backend, best.Name, best.Type)
			}
			if !onGPU && !strings.Contains(g.Status().Note, "speech runs on the CPU") {
				t.Errorf("%s: on the CPU without a note: %q", backend, g.Status().Note)
			}
			return nil
		})
		g.Close()
		if err != nil {
			t.Fatalf("%s: %v", backend, err)
		}
	}

	// The WAV of the speech, both formats.
	var all []float32
	for _, c := range chunks {
		all = append(all, c.Audio...)
	}
	for _, f32 := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "out.wav")
		if err := WriteSpeech(path, all, f32); err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		got, rate, err := audio.ReadWAV(bytes.NewReader(raw))
		if err != nil || rate != SampleRate || len(got) != len(all) {
			t.Fatalf("float %v: %d samples at %d Hz, %v", f32, len(got), rate, err)
		}
		// 16-bit PCM rounds to the nearest of 32767 steps per unit: half
		// a step off at most, plus 1e-7 for the f32 scaling on the way
		// back; it clips to ±1. Float WAV stores the samples themselves.
		tol := 0.5/32767 + 1e-7
		if f32 {
			tol = 0
		}
		for i := range all {
			want := float64(all[i])
			if !f32 {
				want = math.Max(-1, math.Min(1, want))
			}
			if math.Abs(float64(got[i])-want) > tol {
				t.Fatalf("float %v: sample %d is %g, want %g", f32, i, got[i], all[i])
			}
		}
	}
	if err := WriteSpeech(filepath.Join(t.TempDir(), "no", "such", "dir", "x.wav"), all, false); err == nil || !strings.Contains(err.Error(), "x.wav") {
		t.Errorf("writing into a missing folder: %v", err)
	}
}

// TestSpeakWithoutModel: an empty Kokoro directory gives ErrNoVoiceModel,
// naming the directory and what to put there, from Speak and Voices.
// TestSpeakSlowListenerLeavesEngineFree holds the first chunk's emit (a
// client that stops reading, a sound card that blocks) and runs another
// engine job meanwhile: emit runs on the caller's goroutine and each
// chunk's forward is its own job, so the engine is free between chunks.
// Releasing emit lets the speech finish with both chunks.
func TestSpeakSlowListenerLeavesEngineFree(t *testing.T) {
	dir := kokorotest.WriteDir(t, t.TempDir())
	e := NewEngine(EngineOptions{Backend: "cpu", Kokoro: dir})
	defer e.Close()
	ctx := context.Background()
	held, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	chunks := 0
	go func() {
		done <- e.Speak(ctx, SpeakRequest{Text: "Hi there. Go on.", Voice: "af_heart", Speed: 2}, func(SpeechChunk) error {
			if chunks++; chunks == 1 {
				close(held)
				<-release
			}
			return nil
		})
	}()
	select {
	case <-held:
	case err := <-done:
		t.Fatalf("speech ended before its first chunk was emitted: %v", err)
	}
	ran := make(chan error, 1)
	go func() { ran <- e.submit(ctx, func(context.Context) error { return nil }) }()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second): // the job itself takes microseconds
		t.Fatal("an engine job waited while a listener held the speech's emit")
	}
	close(release)
	if err := <-done; err != nil || chunks != 2 {
		t.Fatalf("speech: %v, %d chunks", err, chunks)
	}
}

func TestSpeakWithoutModel(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "kokoro")
	e := NewEngine(EngineOptions{Backend: "cpu", Kokoro: dir})
	defer e.Close()
	err := e.Speak(context.Background(), SpeakRequest{Text: "Hello.", Voice: "af_heart"}, nil)
	if !errors.Is(err, ErrNoVoiceModel) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "kokoro-v1_0.pth") {
		t.Errorf("Speak: %v", err)
	}
	_, err = e.Voices()
	if !errors.Is(err, ErrNoVoiceModel) || !strings.Contains(err.Error(), dir+" does not exist") {
		t.Errorf("Voices: %v", err)
	}
	// The message is a user's: what is missing and the command that gets
	// it (with --dir, as dir is not the default), and no package names
	// stacked in front ("app: no voice model: kokoro: …").
	for _, err := range []error{e.Speak(context.Background(), SpeakRequest{Text: "Hello.", Voice: "af_heart"}, nil), err} {
		msg := err.Error()
		if !strings.HasPrefix(msg, "no Kokoro voice model: ") || strings.Contains(msg, "app:") || strings.Contains(msg, "kokoro:") ||
			!strings.Contains(msg, "`hearth pull hexgrad/Kokoro-82M --dir "+dir+"`") || !strings.Contains(msg, "Download Kokoro-82M") {
			t.Errorf("the error reads %q", msg)
		}
	}
	// A Kokoro directory made by hand and left empty is the same: the
	// model is missing, not the voice misspelt.
	empty := t.TempDir()
	e2 := NewEngine(EngineOptions{Backend: "cpu", Kokoro: empty})
	defer e2.Close()
	err = e2.Speak(context.Background(), SpeakRequest{Text: "Hello.", Voice: "af_heart"}, nil)
	if !errors.Is(err, ErrNoVoiceModel) || !strings.Contains(err.Error(), "kokoro-v1_0.pth") || !strings.Contains(err.Error(), "hearth pull") {
		t.Errorf("Speak with an empty Kokoro directory: %v", err)
	}
	// The default is kokoro/ in Hearth's folder.
	d, err := DefaultKokoroDir()
	if err != nil || filepath.Base(d) != "kokoro" || filepath.Base(filepath.Dir(d)) != "hearth" {
		t.Errorf("default Kokoro directory %s, %v", d, err)
	}
}

// TestTrainReleasesSpeech: a training job frees the speech model with the
// chat model, before it opens the device, even when the run then fails.
func TestTrainReleasesSpeech(t *testing.T) {
	e := NewEngine(EngineOptions{Backend: "auto"})
	defer e.Close()
	released := false
	err := e.submit(context.Background(), func(context.Context) error {
		e.speech = &speech{dir: "x", release: func() { released = true }}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Train(context.Background(), TrainRequest{Model: filepath.Join(t.TempDir(), "missing.gguf")})
	if err == nil {
		t.Fatal("trained a missing model")
	}
	if !released {
		t.Error("Train kept the speech model")
	}
	if err := e.submit(context.Background(), func(context.Context) error {
		if e.speech != nil {
			return errors.New("still loaded")
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
}

// TestVoicesNeedTheModel: voice packs without the weights and config to
// speak them are the missing-model error, naming the file missing, so the
// Voice tab offers the download rather than a Play that cannot work.
func TestVoicesNeedTheModel(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "voices"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "voices", "af_heart.bin"), make([]byte, 10), 0o644)
	e := NewEngine(EngineOptions{Backend: "cpu", Kokoro: dir})
	defer e.Close()
	for _, c := range []struct{ add, want string }{
		{"", "no kokoro-v1_0.pth"},
		{"kokoro-v1_0.pth", "no config.json beside"},
	} {
		if c.add != "" {
			os.WriteFile(filepath.Join(dir, c.add), []byte("x"), 0o644)
		}
		if names, err := e.Voices(); !errors.Is(err, ErrNoVoiceModel) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Voices: %v, %v; want the missing-model error saying %q", names, err, c.want)
		}
	}
	os.WriteFile(filepath.Join(dir, "config.json"), []byte("{}"), 0o644)
	if names, err := e.Voices(); err != nil || len(names) != 1 || names[0] != "af_heart" {
		t.Errorf("Voices with the model's files there: %v, %v", names, err)
	}
}
