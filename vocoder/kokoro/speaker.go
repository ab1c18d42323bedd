package kokoro

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
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
	phon  *Phonemizer
	// Deterministic zeroes the harmonic source's random phases and noise
	// (Model.Forward), for tests that compare runs.
	Deterministic bool
}

// NewSpeaker makes a speaker from a model's config, its forward pass and a
// phonemizer made with the same config.
func NewSpeaker(cfg *Config, s Synthesizer, p *Phonemizer) (*Speaker, error) {
	if cfg == nil || s == nil || p == nil {
		return nil, errors.New("vocoder: speaker: a config, a synthesizer and a phonemizer are all needed")
	}
	if cfg.FrameSamples() <= 0 {
		return nil, fmt.Errorf("vocoder: speaker: the config's frames are %d samples: istftnet is missing from config.json", cfg.FrameSamples())
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
// with nothing to speak returns ErrNothingToSay.
func (s *Speaker) Speak(ctx context.Context, text string, voice *Voice, speed float64, emit func(Utterance) error) error {
	if err := CheckSpeed(speed); err != nil {
		return err
	}
	if voice == nil || len(voice.Pack) != VoiceRows*VoiceDim {
		return errors.New("vocoder: speak: no voice, or a voice pack of the wrong size")
	}
	if 2*s.cfg.StyleDim != VoiceDim {
		return fmt.Errorf("vocoder: speak: the model's style_dim (%d) is not half a voice pack's row (%d)", s.cfg.StyleDim, VoiceDim)
	}
	var (
		at     int64 // samples of speech before the current chunk
		index  int
		recut  chunker
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
		if errors.Is(err, ErrNothingToSay) {
			continue
		}
		if err != nil {
			return err
		}
		spoken = true
		for _, c := range recut.chunks(chunks) {
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
		return fmt.Errorf("%w: %q has no word espeak-ng can read (only punctuation, symbols or other scripts, or nothing)", ErrNothingToSay, excerpt(text))
	}
	return nil
}

// utter synthesises chunk c, the index-th of the speech, starting at
// sample at of it.
func (s *Speaker) utter(c Chunk, voice *Voice, speed float64, index int, at int64) (Utterance, error) {
	style, err := voice.Style(len(c.Tokens) - 2) // the row for its phoneme count
	if err != nil {
		return Utterance{}, err
	}
	audio, durations, err := s.synth.Forward(c.Tokens, style, speed, s.Deterministic)
	if err != nil {
		return Utterance{}, fmt.Errorf("vocoder: speak: chunk %d (%q): %w", index+1, excerpt(c.Text), err)
	}
	if len(durations) != len(c.Tokens) {
		return Utterance{}, fmt.Errorf("vocoder: speak: chunk %d: %d durations for %d tokens", index+1, len(durations), len(c.Tokens))
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
func wordTimes(c Chunk, durations []int, frame int, at, n int64) []WordTime {
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

// A chunker recuts Phonemize's chunks for streaming. Phonemize packs
// sentences into chunks of up to 510 phonemes (kokoro's pipeline), about
// 30 s of speech: synthesising the first of those before anything plays
// would keep the listener waiting for the whole chunk. So the first chunk
// is the first sentence alone, and each later one holds at most twice the
// phonemes of the one before (whole sentences, still within Phonemize's
// chunk and so within 510 and its line breaks). Audio lasts in proportion
// to phonemes, so while chunk k plays, chunk k+1, twice as long, is made
// in time whenever synthesis runs at least twice real time; the chunks
// reach the full 510 after a few sentences, where the model has the most
// context for its prosody and the fewest forward passes are run. A single
// sentence longer than the budget stays whole (Phonemize already cut it
// to fit the model), so cuts fall only at sentence ends.
type chunker struct {
	budget int // the next chunk's most phonemes; 0: the first, one sentence
}

// chunks recuts the next of Phonemize's chunks, in the text's order.
func (ck *chunker) chunks(chunks []Chunk) []Chunk {
	var out []Chunk
	for _, c := range chunks {
		sentences := sentenceSpans(c)
		for a := 0; a < len(sentences); {
			b := a + 1
			if ck.budget > 0 {
				for b < len(sentences) && phonemeSpan(c, sentences[a][0], sentences[b][1]) <= ck.budget {
					b++
				}
			}
			sub := subChunk(c, sentences[a][0], sentences[b-1][1])
			out = append(out, sub)
			ck.budget = 2 * utf8.RuneCountInString(sub.Phonemes)
			a = b
		}
	}
	return out
}

// sentenceSpans splits c's words into sentences, [first, end) word
// indices: a sentence ends after a mark that ends sentences (. ! ? …) and
// any marks and closing quotes or brackets right after it. A piece with
// no spoken word (trailing punctuation) joins the sentence before it.
func sentenceSpans(c Chunk) [][2]int {
	var spans [][2]int
	start, spoken := 0, false
	for i := 0; i < len(c.Words); i++ {
		w := c.Words[i]
		if !w.Punct && w.Phonemes != "" {
			spoken = true
		}
		if !(w.Punct && endsSentenceText(w.Text)) {
			continue
		}
		for i+1 < len(c.Words) && c.Words[i+1].Punct && (endsSentenceText(c.Words[i+1].Text) || isCloser(c.Words[i+1].Text)) {
			i++
		}
		if spoken {
			spans = append(spans, [2]int{start, i + 1})
			start, spoken = i+1, false
		}
	}
	if start < len(c.Words) {
		if spoken || len(spans) == 0 {
			spans = append(spans, [2]int{start, len(c.Words)})
		} else {
			spans[len(spans)-1][1] = len(c.Words)
		}
	}
	return spans
}

// endsSentenceText reports whether a punctuation word as written ends a
// sentence: ".", "!", "?", "…" or "...".
func endsSentenceText(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return strings.ContainsRune(".!?…", r)
}

// phonemeSpan is how many symbols words [a, b) of c take, spaces between
// them included.
func phonemeSpan(c Chunk, a, b int) int { return c.Words[b-1].End - c.Words[a].Start }

// subChunk is words [a, b) of c as a chunk of their own: their phonemes
// (and the spaces between them), those symbols' tokens between two pads,
// the word spans moved to start at 0, and their text as c has it.
func subChunk(c Chunk, a, b int) Chunk {
	if a == 0 && b == len(c.Words) {
		return c
	}
	lo, hi := c.Words[a].Start, c.Words[b-1].End
	ps := []rune(c.Phonemes)
	sub := Chunk{Phonemes: string(ps[lo:hi])}
	sub.Tokens = make([]int, 0, hi-lo+2)
	sub.Tokens = append(sub.Tokens, 0)
	sub.Tokens = append(sub.Tokens, c.Tokens[lo+1:hi+1]...)
	sub.Tokens = append(sub.Tokens, 0)
	for _, w := range c.Words[a:b] {
		w.Start -= lo
		w.End -= lo
		sub.Words = append(sub.Words, w)
	}
	// makeChunk wrote the text as the words joined by nothing or one
	// space: find each word's place in it in order.
	from, to := wordOffsets(c, a, b)
	sub.Text = c.Text[from:to]
	return sub
}

// wordOffsets are where word a starts and word b-1 ends in c.Text, in
// bytes.
func wordOffsets(c Chunk, a, b int) (from, to int) {
	off := 0
	for i, w := range c.Words[:b] {
		at := off // where it is not found (not for makeChunk's text), go on from here
		if k := strings.Index(c.Text[off:], w.Text); k >= 0 {
			at += k
		}
		if i == a {
			from = at
		}
		off = min(at+len(w.Text), len(c.Text))
	}
	return from, off
}
