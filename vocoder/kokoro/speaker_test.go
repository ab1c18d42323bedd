package kokoro

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hearthstudio/hearth/vocoder/phonemes"
)

// fakeSynth stands in for the model where only the plumbing is tested: a
// duration per token from its id (1 to 3 frames, the pads 1) and that
// many frames of a constant tone, so order and timing can be checked
// without the CPU forward's seconds per utterance.
type fakeSynth struct {
	frame  int
	calls  [][]int // the tokens of every call
	styles []int   // the first style value of every call
}

func (f *fakeSynth) Forward(tokens []int, style []float32, speed float64, deterministic bool) ([]float32, []int, error) {
	f.calls = append(f.calls, tokens)
	f.styles = append(f.styles, int(style[0]))
	if len(tokens) < 3 || tokens[0] != 0 || tokens[len(tokens)-1] != 0 {
		return nil, nil, fmt.Errorf("fake: tokens %v lack the pads", tokens)
	}
	if len(tokens) > 512 {
		return nil, nil, fmt.Errorf("fake: %d tokens, over the context", len(tokens))
	}
	d := make([]int, len(tokens))
	total := 0
	for i, id := range tokens {
		d[i] = 1 + id%3
		if i == 0 || i == len(tokens)-1 {
			d[i] = 1
		}
		d[i] = max(1, int(math.Round(float64(d[i])/speed)))
		total += d[i]
	}
	audio := make([]float32, total*f.frame)
	for i := range audio {
		audio[i] = float32(len(f.calls)) // which call made it
	}
	return audio, d, nil
}

// testSymbols are misaki's phoneme symbols and Kokoro's punctuation, as
// in vocoder/phonemes' tests; the ids given to them here are made up (the
// real vocab comes from the model's config.json).
const testSymbols = ";:,.!?—…\"()“” " +
	"abcdefhijklmnopqrstuvwxyz" + "AIOQWYT" +
	"æçðŋɑɒɔəɚɛɜɡɪɹɾʃʊʌʒʤʧθᵊᵻˈˌːʔ"

// testConfig is a config of testSymbols and room for max phonemes.
func testConfig(max int) *Config {
	v := map[string]int{}
	for i, r := range []rune(testSymbols) {
		v[string(r)] = i + 1
	}
	return &Config{Vocab: v, PLBert: PLBertConfig{MaxPositionEmbeddings: max + 2}}
}

func newTestPhonemizer(tb testing.TB, lang string, max int) *phonemes.Phonemizer {
	tb.Helper()
	c := testConfig(max)
	p, err := phonemes.NewPhonemizer(lang, c.Vocab, c.MaxPhonemes())
	if err != nil {
		// espeak-ng is part of the test set-up (make deps installs it):
		// fail, do not skip.
		tb.Fatal(err)
	}
	return p
}

// speakerConfig is testConfig with Kokoro-82M's frame: 2·10·6·5 = 600
// samples.
func speakerConfig() *Config {
	c := testConfig(510)
	c.StyleDim = VoiceDim / 2
	c.ISTFTNet.UpsampleRates = []int{10, 6}
	c.ISTFTNet.GenISTFTHopSize = 5
	return c
}

// rowVoice is a voice whose row n-1 is all n, so the style a chunk got
// tells its phoneme count.
func rowVoice() *Voice {
	v := &Voice{Name: "rows", Pack: make([]float32, VoiceRows*VoiceDim)}
	for i := range v.Pack {
		v.Pack[i] = float32(i/VoiceDim + 1)
	}
	return v
}

func newFakeSpeaker(t *testing.T) (*Speaker, *fakeSynth) {
	t.Helper()
	cfg := speakerConfig()
	f := &fakeSynth{frame: cfg.FrameSamples()}
	s, err := NewSpeaker(cfg, f, newTestPhonemizer(t, "en-us", 510))
	if err != nil {
		t.Fatal(err)
	}
	return s, f
}

func collect(t *testing.T, s *Speaker, text string, speed float64) ([]Utterance, error) {
	t.Helper()
	var us []Utterance
	err := s.Speak(context.Background(), text, rowVoice(), speed, func(u Utterance) error {
		us = append(us, u)
		return nil
	})
	return us, err
}

func TestSpeakWordTimes(t *testing.T) {
	s, f := newFakeSpeaker(t)
	us, err := collect(t, s, "Hello there, world. How are you?", 1)
	if err != nil {
		t.Fatal(err)
	}
	// The first sentence alone, then the rest.
	if len(us) != 2 || us[0].Text != "Hello there, world." || us[1].Text != "How are you?" {
		t.Fatalf("chunks %q", texts(us))
	}
	frame := time.Second * 600 / SampleRate // 25 ms
	for k, u := range us {
		tokens := f.calls[k]
		// The style row is the chunk's phoneme count's.
		if n := len(tokens) - 2; f.styles[k] != n || utf8.RuneCountInString(u.Phonemes) != n {
			t.Errorf("chunk %d: style row %d, %d phonemes, %d tokens", k, f.styles[k], utf8.RuneCountInString(u.Phonemes), len(tokens))
		}
		// Recompute each word's time by hand from the fake's durations.
		_, d, _ := (&fakeSynth{frame: 600}).Forward(tokens, make([]float32, VoiceDim), 1, true)
		cs, err := s.phon.Phonemize(u.Text)
		if err != nil {
			t.Fatal(err)
		}
		var want []WordTime
		for _, w := range cs[0].Words {
			if w.Punct {
				continue
			}
			start, end := 0, 0
			for i := 0; i < w.End+1; i++ {
				if i < w.Start+1 {
					start += d[i]
				}
				end += d[i]
			}
			want = append(want, WordTime{w.Text, u.Start + time.Duration(start)*frame, u.Start + time.Duration(end)*frame})
		}
		if fmt.Sprint(u.Words) != fmt.Sprint(want) {
			t.Errorf("chunk %d words\n got %v\nwant %v", k, u.Words, want)
		}
	}
	if want := time.Duration(len(us[0].Audio)) * time.Second / SampleRate; us[1].Start != want {
		t.Errorf("second chunk starts at %v, the first lasts %v", us[1].Start, want)
	}
	if w := us[0].Words; len(w) != 3 || w[0].Text != "Hello" || w[0].Start != frame {
		// The leading pad lasts one frame in the fake.
		t.Errorf("first words %v", w)
	}
}

func texts(us []Utterance) []string {
	var out []string
	for _, u := range us {
		out = append(out, u.Text)
	}
	return out
}

// TestSpeakLongText speaks 100 KB: the chunks come in order, every
// word of the text is in one of them once, no chunk exceeds the model's
// context, chunks grow from one sentence, and the timestamps never go
// back.
func TestSpeakLongText(t *testing.T) {
	s, f := newFakeSpeaker(t)
	sentences := []string{
		"The quick brown fox jumps over the lazy dog.",
		"Pack my box with five dozen liquor jugs!",
		"How vexingly quick daft zebras jump?",
		"Sphinx of black quartz, judge my vow; the judges agreed, at length, that it was so.",
	}
	var b strings.Builder
	for i := 0; b.Len() < 100_000; i++ {
		fmt.Fprintf(&b, "%s ", sentences[i%len(sentences)])
		if i%37 == 36 {
			b.WriteString("\n\n")
		}
	}
	text := b.String()
	start := time.Now()
	us, err := collect(t, s, text, 1.3)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d KB in %d chunks, %v", len(text)/1000, len(us), time.Since(start))

	var words []string
	var last time.Duration
	var at int
	for k, u := range us {
		if u.Index != k {
			t.Fatalf("chunk %d has index %d", k, u.Index)
		}
		if int(u.Audio[0]) != k+1 {
			t.Fatalf("chunk %d carries the audio of call %d", k, int(u.Audio[0]))
		}
		if want := time.Duration(at) * time.Second / SampleRate; u.Start != want {
			t.Fatalf("chunk %d starts at %v, after %v of audio", k, u.Start, want)
		}
		at += len(u.Audio)
		if n := len(f.calls[k]); n > 512 {
			t.Fatalf("chunk %d: %d tokens", k, n)
		}
		for _, w := range u.Words {
			if w.Start < last || w.End < w.Start {
				t.Fatalf("chunk %d: word %q at [%v, %v) after %v", k, w.Text, w.Start, w.End, last)
			}
			last = w.End
			words = append(words, w.Text)
		}
		if end := time.Duration(at) * time.Second / SampleRate; last > end {
			t.Fatalf("chunk %d: a word ends at %v, after the audio's end %v", k, last, end)
		}
	}
	var want []string
	for _, w := range strings.Fields(text) {
		want = append(want, strings.TrimRight(w, ".,;!?"))
	}
	if strings.Join(words, " ") != strings.Join(want, " ") {
		t.Fatalf("the words spoken are not the text's: %d words, want %d", len(words), len(want))
	}
	// One sentence first, then growing chunks up to the context.
	if us[0].Text != sentences[0] {
		t.Errorf("first chunk %q, want the first sentence alone", us[0].Text)
	}
	n := func(k int) int { return len(f.calls[k]) - 2 }
	if n(1) > 2*n(0) {
		t.Errorf("second chunk %d phonemes after a first of %d", n(1), n(0))
	}
	biggest := 0
	for k := range us {
		biggest = max(biggest, n(k))
	}
	if biggest < 400 {
		t.Errorf("the largest chunk has %d phonemes: chunks never grew to fill the context", biggest)
	}
}

func TestSpeakNothingToSay(t *testing.T) {
	s, f := newFakeSpeaker(t)
	for _, text := range []string{"", "   \n ", "?!... ,;", "「」"} {
		_, err := collect(t, s, text, 1)
		if !errors.Is(err, phonemes.ErrNothingToSay) {
			t.Errorf("%q: %v, want phonemes.ErrNothingToSay", text, err)
		} else if !strings.Contains(err.Error(), "nothing to speak") {
			t.Errorf("%q: message %q", text, err)
		}
	}
	if len(f.calls) != 0 {
		t.Errorf("the model ran %d times", len(f.calls))
	}
	// Lines with nothing to say between lines that have are skipped.
	us, err := collect(t, s, "Hello.\n\n?!\n\u2028 … \r\nGood bye.", 1)
	if err != nil || strings.Join(texts(us), "|") != "Hello.|Good bye." || us[1].Index != 1 {
		t.Errorf("chunks %q, %v", texts(us), err)
	}
}

func TestSpeakSpeed(t *testing.T) {
	s, f := newFakeSpeaker(t)
	for _, speed := range []float64{0, -1, 0.2, 4.5, math.NaN(), math.Inf(1)} {
		if _, err := collect(t, s, "Hello.", speed); err == nil || !strings.Contains(err.Error(), "speed") {
			t.Errorf("speed %g: %v", speed, err)
		}
	}
	if len(f.calls) != 0 {
		t.Fatalf("the model ran %d times for bad speeds", len(f.calls))
	}
	slow, err := collect(t, s, "Hello there.", MinSpeed)
	if err != nil {
		t.Fatal(err)
	}
	fast, err := collect(t, s, "Hello there.", MaxSpeed)
	if err != nil {
		t.Fatal(err)
	}
	if len(slow[0].Audio) <= 2*len(fast[0].Audio) {
		t.Errorf("at %g %d samples, at %g %d", MinSpeed, len(slow[0].Audio), MaxSpeed, len(fast[0].Audio))
	}
}

func TestSpeakCancelAndEmitError(t *testing.T) {
	s, f := newFakeSpeaker(t)
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	err := s.Speak(ctx, "One. Two. Three. Four.", rowVoice(), 1, func(u Utterance) error {
		n++
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) || n != 1 || len(f.calls) != 1 {
		t.Errorf("cancelled after the first chunk: %v, %d emitted, %d synthesised", err, n, len(f.calls))
	}
	stop := errors.New("listener gone")
	err = s.Speak(context.Background(), "One. Two.", rowVoice(), 1, func(Utterance) error { return stop })
	if !errors.Is(err, stop) {
		t.Errorf("emit's error: %v", err)
	}
}

// smallModel is the small fixture's model, built once for the tests that
// need a real one (drawing its 64M weights takes seconds).
var smallModel struct {
	once sync.Once
	m    *Model
	err  error
}

func smallFixtureModel(t *testing.T) *Model {
	t.Helper()
	fx := loadForwardFixture(t, "small")
	smallModel.once.Do(func() { smallModel.m, smallModel.err = fx.newModel() })
	if smallModel.err != nil {
		t.Fatal(smallModel.err)
	}
	return smallModel.m
}

// recordingSynth notes what a Synthesizer was asked.
type recordingSynth struct {
	Synthesizer
	calls []struct {
		tokens []int
		style  []float32
	}
}

func (r *recordingSynth) Forward(tokens []int, style []float32, speed float64, deterministic bool) ([]float32, []int, error) {
	r.calls = append(r.calls, struct {
		tokens []int
		style  []float32
	}{tokens, style})
	return r.Synthesizer.Forward(tokens, style, speed, deterministic)
}

// TestSpeakRealModel speaks two sentences with the small fixture model on
// the CPU: real audio of whole frames, no NaN, words inside their chunk.
func TestSpeakRealModel(t *testing.T) {
	m := smallFixtureModel(t)
	cfg := m.Config
	ph, err := phonemes.NewPhonemizer("en-us", cfg.Vocab, cfg.MaxPhonemes())
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingSynth{Synthesizer: m}
	s, err := NewSpeaker(cfg, rec, ph)
	if err != nil {
		t.Fatal(err)
	}
	s.Deterministic = true
	v, err := OpenVoice(voicesDir(t), "af_heart")
	if err != nil {
		t.Fatal(err)
	}
	var us []Utterance
	start := time.Now()
	err = s.Speak(context.Background(), "Hi. Go on.", v, 1, func(u Utterance) error {
		us = append(us, u)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d chunks in %v", len(us), time.Since(start))
	if len(us) != 2 {
		t.Fatalf("chunks %q", texts(us))
	}
	frame := cfg.FrameSamples()
	for k, u := range us {
		if len(u.Audio) == 0 || len(u.Audio)%frame != 0 {
			t.Errorf("chunk %d: %d samples, not whole frames of %d", k, len(u.Audio), frame)
		}
		for i, x := range u.Audio {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("chunk %d: sample %d is %g", k, i, x)
			}
		}
		end := u.Start + time.Duration(len(u.Audio))*time.Second/SampleRate
		prev := u.Start
		for _, w := range u.Words {
			if w.Start < prev || w.End <= w.Start || w.End > end {
				t.Errorf("chunk %d: word %q at [%v, %v), chunk [%v, %v)", k, w.Text, w.Start, w.End, u.Start, end)
			}
			prev = w.End
		}
	}
	// The model was given each chunk's tokens and its length's style row.
	for k, call := range rec.calls {
		cs, err := ph.Phonemize(us[k].Text)
		if err != nil {
			t.Fatal(err)
		}
		style, _ := v.Style(len(cs[0].Tokens) - 2)
		if fmt.Sprint(call.tokens) != fmt.Sprint(cs[0].Tokens) || fmt.Sprint(call.style) != fmt.Sprint(style) {
			t.Errorf("chunk %d: the model got tokens %v and another style; the text's are %v", k, call.tokens, cs[0].Tokens)
		}
	}
}
