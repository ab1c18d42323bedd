package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/hearthstudio/hearth/app/settings"
	"github.com/hearthstudio/hearth/internal/atomicfile"
	"github.com/hearthstudio/hearth/vocoder/audio"
	"github.com/hearthstudio/hearth/vocoder/kokoro"
	"github.com/hearthstudio/hearth/vocoder/phonemes"
)

// SampleRate is the rate of every SpeechChunk's audio, in Hz.
const SampleRate = kokoro.SampleRate

// ErrNoVoiceModel is matched by the errors of Speak and Voices when the
// Kokoro directory lacks the model or its voices: a *NoVoiceModelError,
// which names the file missing and how to get it.
var ErrNoVoiceModel = errors.New("no Kokoro voice model")

// NoVoiceModelError says what of Kokoro is missing from its directory and
// how to get it. Its text is a user's: the file and the remedy, with no
// package names stacked in front.
type NoVoiceModelError struct {
	Dir     string // the Kokoro directory searched
	Missing error  // what is not there, naming the file or folder
}

func (e *NoVoiceModelError) Error() string {
	return fmt.Sprintf("%v: %v; get it with `%s` or the Voice tab's Download Kokoro-82M button", ErrNoVoiceModel, e.Missing, PullKokoroCommand(e.Dir))
}

// Is makes the error match ErrNoVoiceModel.
func (e *NoVoiceModelError) Is(target error) bool { return target == ErrNoVoiceModel }

// Unwrap gives what is missing, which matches fs.ErrNotExist.
func (e *NoVoiceModelError) Unwrap() error { return e.Missing }

// PullKokoroCommand is the command that puts Kokoro-82M in dir: hearth
// pull, with --dir when dir is not the default.
func PullKokoroCommand(dir string) string {
	cmd := "hearth pull " + KokoroRepo
	if def, err := DefaultKokoroDir(); err != nil || filepath.Clean(def) != filepath.Clean(dir) {
		cmd += " --dir " + dir
	}
	return cmd
}

// SpeakRequest is one text to say.
type SpeakRequest struct {
	Text  string
	Voice string  // a pack name or a blend "af_heart:0.6,am_adam:0.4"
	Speed float64 // 0 means 1; otherwise kokoro.MinSpeed to kokoro.MaxSpeed
}

// WordTime is a spoken word and when it is heard: Start and End from the
// start of the speech.
type WordTime = kokoro.WordTime

// SpeechChunk is one synthesised stretch of a speech (a sentence, or
// several once the first has been heard).
type SpeechChunk struct {
	Text  string        // the chunk's text
	Audio []float32     // SampleRate Hz mono; the receiver owns it
	Start time.Duration // where the chunk starts in the whole speech
	Words []WordTime
}

// Player plays speech through the sound card.
type Player = audio.Player

// ErrNoAudioDevice is wrapped by NewPlayer's error on a machine without a
// sound card (or whose sound server refused).
var ErrNoAudioDevice = audio.ErrNoAudioDevice

// NewPlayer opens the sound card for SampleRate mono audio.
func NewPlayer() (*Player, error) { return audio.NewPlayer() }

// DefaultKokoroDir is where Hearth looks for Kokoro when
// EngineOptions.Kokoro is empty: kokoro/ in Hearth's folder
// (~/.config/hearth/kokoro on Linux), beside the settings.
func DefaultKokoroDir() (string, error) {
	dir, err := settings.Dir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "kokoro"), nil
}

// KokoroDir is the engine's Kokoro directory: EngineOptions.Kokoro, else
// DefaultKokoroDir.
func (e *Engine) KokoroDir() (string, error) {
	if e.o.Kokoro != "" {
		return e.o.Kokoro, nil
	}
	return DefaultKokoroDir()
}

// speech is the loaded Kokoro model, kept from the first Speak until
// Train or Close releases it. It lives on the engine goroutine.
type speech struct {
	dir         string
	model       *kokoro.Model
	synth       kokoro.Synthesizer              // model, or its GPU forward
	release     func()                          // frees the GPU forward's buffers; nil on the CPU
	backend     string                          // "gpu: ADAPTER" or "cpu"
	phonemizers map[string]*phonemes.Phonemizer // by language
}

// Voices names the voice packs in the Kokoro directory. Packs without
// the model to speak them are no use, so a missing model is the error.
func (e *Engine) Voices() ([]string, error) {
	dir, err := e.KokoroDir()
	if err != nil {
		return nil, err
	}
	if _, _, err := kokoro.ModelFiles(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, &NoVoiceModelError{Dir: dir, Missing: err}
	}
	names, err := kokoro.ListVoicesIn(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &NoVoiceModelError{Dir: dir, Missing: err}
	}
	if err != nil {
		return nil, err
	}
	return names, nil
}

// Speak says req.Text, calling emit with each chunk of audio as soon as
// it is synthesised, in order: the first chunk is the first sentence, so
// a player can start while the rest is made. emit runs on the engine
// goroutine, which nothing else can use until Speak returns, so it must
// not block long: copy the chunk into a Player (Enqueue) or a buffer and
// return. Its error stops the speech and is returned. Cancelling ctx
// stops between chunks. Text with nothing to speak returns an error
// wrapping phonemes.ErrNothingToSay; an unknown voice, one listing the
// voices there are.
func (e *Engine) Speak(ctx context.Context, req SpeakRequest, emit func(SpeechChunk) error) error {
	speed := req.Speed
	if speed == 0 {
		speed = 1
	}
	if err := kokoro.CheckSpeed(speed); err != nil {
		return err
	}
	if strings.TrimSpace(req.Text) == "" {
		return fmt.Errorf("%w: the text is empty", phonemes.ErrNothingToSay)
	}
	if emit == nil {
		emit = func(SpeechChunk) error { return nil }
	}
	dir, err := e.KokoroDir()
	if err != nil {
		return err
	}
	// The model is loaded and the voice opened on the engine goroutine;
	// then the speaker runs here, on the caller's goroutine: phonemes, and
	// emit (a client's socket, the sound card) however slow, while each
	// chunk's forward is one job on the engine goroutine (engineSynth), so
	// a chat reply or another request runs between chunks.
	var voice *kokoro.Voice
	var sp *kokoro.Speaker
	err = e.submit(ctx, func(context.Context) error {
		// The voice first: a misspelt name or a bad pack fails before the
		// model's seconds of loading. A missing folder is the model's
		// error, which says what to put where.
		v, verr := kokoro.OpenVoice(kokoro.VoicesIn(dir), req.Voice)
		if verr != nil && !errors.Is(verr, fs.ErrNotExist) {
			return verr
		}
		s, err := e.ensureSpeech(dir)
		if err != nil {
			return err
		}
		if verr != nil {
			// A folder with no packs at all is the model's missing part,
			// not a misspelt name.
			if _, lerr := kokoro.ListVoicesIn(dir); errors.Is(lerr, fs.ErrNotExist) {
				return &NoVoiceModelError{Dir: dir, Missing: lerr}
			}
			return verr
		}
		ph, err := s.phonemizer(req.Voice)
		if err != nil {
			return err
		}
		voice = v
		sp, err = kokoro.NewSpeaker(s.model.Config, engineSynth{ctx: ctx, e: e, s: s}, ph)
		return err
	})
	if err != nil {
		return err
	}
	return sp.Speak(ctx, req.Text, voice, speed, func(u kokoro.Utterance) error {
		return emit(SpeechChunk{Text: u.Text, Audio: u.Audio, Start: u.Start, Words: u.Words})
	})
}

// engineSynth is a speech model's forward run as a job on the engine
// goroutine, which owns the device, for a Speaker running elsewhere.
type engineSynth struct {
	ctx context.Context
	e   *Engine
	s   *speech
}

// engineBusyRetry is how long a chunk waits before asking again when the
// engine's queue is full (ErrBusy): mid-speech, a busy moment should delay
// the next chunk, not end the speech.
const engineBusyRetry = 20 * time.Millisecond

func (m engineSynth) Forward(tokens []int, style []float32, speed float64, deterministic bool) ([]float32, []int, error) {
	var audio []float32
	var durations []int
	for {
		err := m.e.submit(m.ctx, func(context.Context) error {
			if m.e.speech != m.s {
				return errors.New("speech stopped: the voice model was unloaded while speaking")
			}
			var err error
			audio, durations, err = m.s.synth.Forward(tokens, style, speed, deterministic)
			return err
		})
		if !errors.Is(err, ErrBusy) {
			return audio, durations, err
		}
		select {
		case <-m.ctx.Done():
			return nil, nil, m.ctx.Err()
		case <-time.After(engineBusyRetry):
		}
	}
}

// ensureSpeech loads Kokoro unless it is loaded: on the GPU when the
// engine's backend is (Engine.backend), else the CPU reference.
func (e *Engine) ensureSpeech(dir string) (*speech, error) {
	if e.speech != nil && e.speech.dir == dir {
		return e.speech, nil
	}
	e.unloadSpeech()
	m, err := kokoro.LoadModel(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &NoVoiceModelError{Dir: dir, Missing: err}
	}
	if err != nil {
		return nil, err
	}
	s := &speech{dir: dir, model: m, synth: m, backend: "cpu", phonemizers: map[string]*phonemes.Phonemizer{}}
	b, err := e.backend()
	if err != nil {
		return nil, err
	}
	note := b.Reason
	if b.GPU {
		if err := e.speechOnGPU(s); err != nil {
			if strings.EqualFold(e.o.Backend, "gpu") {
				return nil, err
			}
			note = err.Error()
		}
	}
	if s.release == nil && !strings.EqualFold(e.o.Backend, "cpu") {
		e.setStatus(func(st *Status) { st.Note = "speech runs on the CPU: " + note })
	}
	e.speech = s
	return s, nil
}

// unloadSpeech frees the Kokoro model, if loaded.
func (e *Engine) unloadSpeech() {
	if e.speech == nil {
		return
	}
	if e.speech.release != nil {
		e.speech.release()
	}
	e.speech = nil
}

// phonemizer is the Phonemizer for a voice spec's language, made once:
// Kokoro's voice names start with it ('a' American English, 'b' British;
// af_heart, bf_emma), and a blend takes its first voice's.
func (s *speech) phonemizer(spec string) (*phonemes.Phonemizer, error) {
	lang := "en-us"
	if terms, err := kokoro.ParseVoiceSpec(spec); err == nil && strings.HasPrefix(filepath.Base(terms[0].Name), "b") {
		lang = "en-gb"
	}
	if ph, ok := s.phonemizers[lang]; ok {
		return ph, nil
	}
	ph, err := phonemes.NewPhonemizer(lang, s.model.Config.Vocab, s.model.Config.MaxPhonemes())
	if err != nil {
		return nil, err
	}
	s.phonemizers[lang] = ph
	return ph, nil
}

// WriteSpeech writes samples as a SampleRate Hz mono WAV at path, 32-bit
// float or 16-bit PCM, atomically: a failed write leaves what was at path.
func WriteSpeech(path string, samples []float32, float32Samples bool) error {
	format := audio.PCM16
	if float32Samples {
		format = audio.Float32
	}
	return atomicfile.WriteFrom(path, 0o644, func(w io.Writer) error {
		return audio.WriteWAV(w, samples, SampleRate, format)
	})
}

// speechOnGPU moves s's forward pass to the engine's GPU device.
func (e *Engine) speechOnGPU(s *speech) error {
	g, err := kokoro.NewGPUModel(e.dev, s.model)
	if err != nil {
		return err
	}
	s.synth, s.release, s.backend = g, g.Release, "gpu: "+e.dev.Info.Label()
	return nil
}
