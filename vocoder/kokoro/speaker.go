package kokoro

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hearthstudio/hearth/vocoder/phonemes"
)

// A Synthesizer runs the model's forward pass on one utterance: the CPU
// reference (*Model) or the GPU forward (*GPUModel). See Model.Forward.
type Synthesizer interface {
	Forward(tokens []int, style []float32, speed float64, deterministic bool) (audio []float32, durations []int, err error)
}

// Speeds a Speaker accepts. speed divides every predicted duration, and
// the model rounds each to at least one frame (25 ms at 24 kHz): a phoneme
// lasts 2 to 4 frames at speed 1, so past 4 nearly every phoneme is that
// one frame and a higher speed changes nothing but the pauses. Below 1/4
// a chunk's frames, and the decoder's memory and time with them, grow
// fourfold past speed 1's, for speech too slow to follow.
const (
	MinSpeed = 0.25
	MaxSpeed = 4.0
)

// A WordTime is a spoken word and when it is heard, from the start of the
// whole speech.
type WordTime struct {
	Text       string
	Start, End time.Duration
}

// An Utterance is one chunk of a speech, synthesised.
type Utterance struct {
	Index    int    // 0 for the first chunk
	Text     string // the chunk's text as written
	Phonemes string
	Audio    []float32     // SampleRate Hz mono; the receiver owns it
	Start    time.Duration // where Audio starts in the whole speech
	Words    []WordTime    // the chunk's spoken words, punctuation left out
}

// A Speaker turns text into speech chunk by chunk: it phonemizes the whole
// text (fast), then synthesises one chunk at a time and hands each to the
// caller as soon as it is made, so the first sentence can play while the
// rest is synthesised. It is as safe for concurrent use as its
// Synthesizer (a GPUModel is not).
type Speaker struct {
	cfg   *Config
	synth Synthesizer
	phon  *phonemes.Phonemizer
	// Deterministic zeroes the harmonic source's random phases and noise
	// (Model.Forward), for tests that compare runs.
	Deterministic bool
}

// NewSpeaker makes a speaker from a model's config, its forward pass and a
// phonemizer made with the same config.
func NewSpeaker(cfg *Config, s Synthesizer, p *phonemes.Phonemizer) (*Speaker, error) {
	if cfg == nil || s == nil || p == nil {
		return nil, errors.New("kokoro: speaker: a config, a synthesizer and a phonemizer are all needed")
	}
	if cfg.FrameSamples() <= 0 {
		return nil, fmt.Errorf("kokoro: speaker: the config's frames are %d samples: istftnet is missing from config.json", cfg.FrameSamples())
	}
	return &Speaker{cfg: cfg, synth: s, phon: p}, nil
}

// CheckSpeed says why speed is not one a Speaker takes, or nil.
func CheckSpeed(speed float64) error {
	if !(speed >= MinSpeed && speed <= MaxSpeed) {
		return fmt.Errorf("speed %g: want %g to %g (1 is the voice's own pace)", speed, MinSpeed, MaxSpeed)
	}
	return nil
}

// Speak says text with voice at speed, calling emit with each chunk in
// order as soon as it is synthesised. emit's error stops Speak and is
// returned. Cancelling ctx stops between chunks with ctx's error. Text
// with nothing to speak returns phonemes.ErrNothingToSay.
func (s *Speaker) Speak(ctx context.Context, text string, voice *Voice, speed float64, emit func(Utterance) error) error {
	if err := CheckSpeed(speed); err != nil {
		return err
	}
	if voice == nil || len(voice.Pack) != VoiceRows*VoiceDim {
		return errors.New("kokoro: speak: no voice, or a voice pack of the wrong size")
	}
	if 2*s.cfg.StyleDim != VoiceDim {
		return fmt.Errorf("kokoro: speak: the model's style_dim (%d) is not half a voice pack's row (%d)", s.cfg.StyleDim, VoiceDim)
	}
	var (
		at     int64 // samples of speech before the current chunk
		index  int
		recut  phonemes.Rechunker
		spoken bool
	)
	// Line by line: a line break always ends a chunk (Phonemize's rule,
	// after kokoro's pipeline), so this cuts where Phonemize would, and
	// the first sentence plays without waiting for the whole text's
	// phonemes (half a second for 100 KB).
	for _, line := range strings.FieldsFunc(text, isLineBreak) {
		if err := ctx.Err(); err != nil {
			return err
		}
		chunks, err := s.phon.Phonemize(line)
		if errors.Is(err, phonemes.ErrNothingToSay) {
			continue
		}
		if err != nil {
			return err
		}
		spoken = true
		for _, c := range recut.Rechunk(chunks) {
			if err := ctx.Err(); err != nil {
				return err
			}
			u, err := s.utter(c, voice, speed, index, at)
			if err != nil {
				return err
			}
			at += int64(len(u.Audio))
			index++
			if err := emit(u); err != nil {
				return err
			}
		}
	}
	if !spoken {
		return fmt.Errorf("%w: %q has no word espeak-ng can read (only punctuation, symbols or other scripts, or nothing)", phonemes.ErrNothingToSay, excerpt(text))
	}
	return nil
}

// utter synthesises chunk c, the index-th of the speech, starting at
// sample at of it.
func (s *Speaker) utter(c phonemes.Chunk, voice *Voice, speed float64, index int, at int64) (Utterance, error) {
	style, err := voice.Style(len(c.Tokens) - 2) // the row for its phoneme count
	if err != nil {
		return Utterance{}, err
	}
	audio, durations, err := s.synth.Forward(c.Tokens, style, speed, s.Deterministic)
	if err != nil {
		return Utterance{}, fmt.Errorf("kokoro: speak: chunk %d (%q): %w", index+1, excerpt(c.Text), err)
	}
	if len(durations) != len(c.Tokens) {
		return Utterance{}, fmt.Errorf("kokoro: speak: chunk %d: %d durations for %d tokens", index+1, len(durations), len(c.Tokens))
	}
	return Utterance{Index: index, Text: c.Text, Phonemes: c.Phonemes, Audio: audio, Start: samplesToDuration(at),
		Words: wordTimes(c, durations, s.cfg.FrameSamples(), at, int64(len(audio)))}, nil
}

// isLineBreak is what the phonemizer takes as a line break.
func isLineBreak(r rune) bool { return r == '\n' || r == '\u2028' || r == '\u2029' }

// wordTimes places c's spoken words in time. Token i lasts durations[i]
// frames of frame samples; token 0 is the leading pad, so a word's
// phoneme span [Start, End) is tokens [Start+1, End+1). at is where the
// chunk starts in the speech and n its audio's length: the decoder's
// output and the frames agree (FrameSamples is its upsampling), but a
// word's end is clamped to the audio in case a generator pads differently.
func wordTimes(c phonemes.Chunk, durations []int, frame int, at, n int64) []WordTime {
	// offset[i] is where token i starts, in samples from the chunk's start.
	offset := make([]int64, len(durations)+1)
	for i, d := range durations {
		offset[i+1] = offset[i] + int64(max(d, 0))*int64(frame)
	}
	var out []WordTime
	for _, w := range c.Words {
		if w.Punct || w.Start == w.End {
			continue // punctuation, or a word espeak-ng could not read: not heard
		}
		start, end := min(offset[w.Start+1], n), min(offset[w.End+1], n)
		out = append(out, WordTime{Text: w.Text, Start: samplesToDuration(at + start), End: samplesToDuration(at + end)})
	}
	return out
}

func samplesToDuration(n int64) time.Duration {
	return time.Duration(n) * time.Second / SampleRate
}

// excerpt shortens text for an error message.
func excerpt(text string) string {
	const most = 60
	text = strings.TrimSpace(text)
	if utf8.RuneCountInString(text) <= most {
		return text
	}
	return string([]rune(text)[:most]) + "…"
}
