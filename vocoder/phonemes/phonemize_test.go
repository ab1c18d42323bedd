package phonemes

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// testSymbols are misaki's phoneme symbols and Kokoro's punctuation; the
// ids given to them here are made up (the real vocab comes from the
// model's config.json).
const testSymbols = ";:,.!?—…\"()“” " +
	"abcdefhijklmnopqrstuvwxyz" + "AIOQWYT" +
	"æçðŋɑɒɔəɚɛɜɡɪɹɾʃʊʌʒʤʧθᵊᵻˈˌːʔ"

// testModel is what a Phonemizer takes of a model's config: the
// vocabulary and the most phonemes an utterance may have.
type testModel struct {
	Vocab map[string]int
	max   int
}

func (m *testModel) MaxPhonemes() int { return m.max }

func testConfig(max int) *testModel {
	v := map[string]int{}
	for i, r := range []rune(testSymbols) {
		v[string(r)] = i + 1
	}
	return &testModel{Vocab: v, max: max}
}

func newTestPhonemizer(tb testing.TB, lang string, max int) *Phonemizer {
	tb.Helper()
	p, err := NewPhonemizer(lang, testConfig(max).Vocab, max)
	if err != nil {
		// espeak-ng is part of the test set-up (make deps installs it):
		// fail, do not skip.
		tb.Fatal(err)
	}
	return p
}

// checkChunk verifies a chunk's invariants: every symbol in the
// vocabulary, the tokens the symbols' ids between two pads, each word's
// span holding its phonemes, the limit kept.
func checkChunk(t *testing.T, c Chunk, cfg *testModel) {
	t.Helper()
	rs := []rune(c.Phonemes)
	if len(rs) > cfg.MaxPhonemes() || len(rs) == 0 {
		t.Errorf("chunk of %d symbols (limit %d): %q", len(rs), cfg.MaxPhonemes(), c.Phonemes)
	}
	if len(c.Tokens) != len(rs)+2 || c.Tokens[0] != 0 || c.Tokens[len(c.Tokens)-1] != 0 {
		t.Fatalf("%d tokens for %d symbols: %v", len(c.Tokens), len(rs), c.Tokens)
	}
	for i, r := range rs {
		if id, ok := cfg.Vocab[string(r)]; !ok || c.Tokens[i+1] != id {
			t.Fatalf("symbol %q at %d: token %d, vocab %d (%v)", r, i, c.Tokens[i+1], id, ok)
		}
	}
	end := 0
	for _, w := range c.Words {
		if w.Start < end || w.End < w.Start || w.End > len(rs) {
			t.Fatalf("word %q spans [%d, %d) after %d in %d symbols", w.Text, w.Start, w.End, end, len(rs))
		}
		if got := string(rs[w.Start:w.End]); got != w.Phonemes {
			t.Errorf("word %q: span holds %q, phonemes %q", w.Text, got, w.Phonemes)
		}
		end = w.End
	}
}

// TestPhonemizeReference compares with testdata/phonemes/*.tsv, made by
// make.py from espeak-ng and misaki's mapping rules. espeak joins some
// words in its output (in the → ɪnðə) that the phonemizer gives back to
// each word, so spaces are not compared; a word's own phonemes are
// checked against espeak's output in TestAlign and by checkChunk.
func TestPhonemizeReference(t *testing.T) {
	for _, lang := range []string{"en-us", "en-gb"} {
		t.Run(lang, func(t *testing.T) {
			p := newTestPhonemizer(t, lang, 510)
			f, err := os.Open(filepath.Join("testdata", "phonemes", lang+".tsv"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			sc := bufio.NewScanner(f)
			n := 0
			for sc.Scan() {
				text, want, ok := strings.Cut(sc.Text(), "\t")
				if !ok {
					t.Fatalf("bad line %q", sc.Text())
				}
				n++
				cs, err := p.Phonemize(text)
				if err != nil {
					t.Fatalf("%q: %v", text, err)
				}
				if len(cs) != 1 {
					t.Fatalf("%q: %d chunks", text, len(cs))
				}
				checkChunk(t, cs[0], testConfig(510))
				nospace := func(s string) string { return strings.ReplaceAll(s, " ", "") }
				if nospace(cs[0].Phonemes) != nospace(want) {
					t.Errorf("%q\n got %s\nwant %s", text, cs[0].Phonemes, want)
				}
			}
			if n < 10 {
				t.Fatalf("only %d reference sentences", n)
			}
		})
	}
}

func TestPhonemizeWords(t *testing.T) {
	p := newTestPhonemizer(t, "en-us", 510)
	cs, err := p.Phonemize("Dr. Smith paid $5.50 in the 1990s, didn't he?")
	if err != nil {
		t.Fatal(err)
	}
	c := cs[0]
	checkChunk(t, c, testConfig(510))
	var texts []string
	for _, w := range c.Words {
		texts = append(texts, w.Text)
	}
	if got := strings.Join(texts, "|"); got != "Dr.|Smith|paid|$5.50|in|the|1990s|,|didn't|he|?" {
		t.Errorf("words %s", got)
	}
	if c.Text != "Dr. Smith paid $5.50 in the 1990s, didn't he?" {
		t.Errorf("text %q", c.Text)
	}
	byText := map[string]Word{}
	for _, w := range c.Words {
		byText[w.Text] = w
	}
	for text, want := range map[string]string{"Dr.": "dˈɑktəɹ", "$5.50": "fˈIv dˈɑləɹz ænd fˈɪfti sˈɛnts", "in": "ɪn", "the": "ðə", ",": ",", "?": "?"} {
		if got := byText[text].Phonemes; got != want {
			t.Errorf("%q: %q, want %q", text, got, want)
		}
	}
	if !byText[","].Punct || byText["in"].Punct {
		t.Error("Punct flags wrong")
	}
}

func TestPhonemizeBadInput(t *testing.T) {
	p := newTestPhonemizer(t, "en-us", 510)
	for _, text := range []string{"", "   \n\t ", "...!?;", "你好世界。", "🙂🙂 *** ###", "\x00\x01\x02", "\xff\xfe"} {
		if _, err := p.Phonemize(text); !errors.Is(err, ErrNothingToSay) {
			t.Errorf("Phonemize(%q): %v, want ErrNothingToSay", text, err)
		}
	}
	// Other scripts between English words are kept as silent words.
	cs, err := p.Phonemize("Hello 你好 Привет world\x00!")
	if err != nil {
		t.Fatal(err)
	}
	checkChunk(t, cs[0], testConfig(510))
	var silent []string
	for _, w := range cs[0].Words {
		if w.Start == w.End {
			silent = append(silent, w.Text)
		}
	}
	if strings.Join(silent, ",") != "你好,Привет" {
		t.Errorf("silent words %q in %+v", silent, cs[0].Words)
	}
	if _, err := NewPhonemizer("fr-fr", testConfig(510).Vocab, 510); err == nil {
		t.Error("French: no error")
	}
	if _, err := NewPhonemizer("en-us", nil, 510); err == nil {
		t.Error("no vocabulary: no error")
	}
	if _, err := NewPhonemizer("en-us", testConfig(0).Vocab, 0); err == nil {
		t.Error("no room for phonemes: no error")
	}
}

// A long text splits into chunks within the limit, at sentence ends when
// a sentence fits, and loses no word.
func TestPhonemizeLongText(t *testing.T) {
	const max = 510
	p := newTestPhonemizer(t, "en-us", max)
	var sb strings.Builder
	for i := 0; i < 40; i++ {
		fmt.Fprintf(&sb, "Sentence number %d is about the quick brown fox, which jumps over the lazy dog. ", i+1)
	}
	// One sentence far over the limit, with commas, then one without.
	sb.WriteString(strings.Repeat("and then the fox ran far away, ", 40) + "end. ")
	sb.WriteString(strings.Repeat("very ", 300) + "long.")
	cs, err := p.Phonemize(sb.String())
	if err != nil {
		t.Fatal(err)
	}
	words := 0
	for i, c := range cs {
		checkChunk(t, c, testConfig(max))
		words += len(c.Words)
		last := c.Words[len(c.Words)-1]
		if i < 6 && last.Text != "." {
			t.Errorf("chunk %d ends with %q, want a sentence end", i, last.Text)
		}
	}
	if want := len(tokenize(sb.String())); words != want {
		t.Errorf("%d words in the chunks, %d in the text", words, want)
	}
	if len(cs) < 8 {
		t.Errorf("%d chunks", len(cs))
	}
}

// 100 KB of text goes through in one call. Not a timed assertion (CI
// machines vary); the time is logged. Here: libespeak-ng, 2 cores.
func TestPhonemize100KB(t *testing.T) {
	p := newTestPhonemizer(t, "en-us", 510)
	b, err := os.ReadFile(filepath.Join("testdata", "phonemes", "sentences.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for i := 0; sb.Len() < 100<<10; i++ {
		fmt.Fprintf(&sb, "Part %d, on the %dth of May %d, cost $%d.%02d.\n%s", i, i%28+1, 1900+i%120, i, i%100, b)
	}
	start := time.Now()
	cs, err := p.Phonemize(sb.String())
	if err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	symbols := 0
	for _, c := range cs {
		checkChunk(t, c, testConfig(510))
		symbols += utf8.RuneCountInString(c.Phonemes)
	}
	t.Logf("%d bytes → %d chunks, %d symbols in %v (%s)", sb.Len(), len(cs), symbols, el, p.Backend())
}

func TestFromEspeak(t *testing.T) {
	cases := []struct {
		in      string
		british bool
		want    string
	}{
		{"həlˈo^ʊ", false, "həlˈO"},
		{"həlˈə^ʊ", true, "həlˈQ"},
		{"bˈʌʔn̩", false, "bˈʌtn"},
		{"lˈɪɾə^l", false, "lˈɪTᵊl"},
		{"d^ʒˈʌmps t^ʃˈɜːt^ʃ", false, "ʤˈʌmps ʧˈɜɹʧ"},
		{"ˌo^ʊvɚ", false, "ˌOvəɹ"},
		{"bˈɔ^ɪ ˈa^ʊt nˈa^ɪt", false, "bˈY ˈWt nˈIt"},
		{"lˈe^ɪzi", true, "lˈAzi"},
		{"ɐbˈa^ʊt", false, "əbˈWt"},
		{"nˈɪɹ", false, "nˈɪɹ"},
		{"fˈɪə", false, "fˈiə"},
		{"fˈɪə", true, "fˈɪə"},
		{"wˈɜːld", true, "wˈɜːld"},
		{"lˈɒx", true, "lˈɒk"},
		{"stˈoː^ɹ", false, "stˈɔɹ"},
		{"(fr)kafˈe(en)", false, "kafˈA"},
		{"sˈʌdn̩", false, "sˈʌdᵊn"},
	}
	for _, c := range cases {
		if got := fromEspeak(c.in, c.british); got != c.want {
			t.Errorf("fromEspeak(%q, british=%v) = %q, want %q", c.in, c.british, got, c.want)
		}
	}
}

func TestAlign(t *testing.T) {
	cases := []struct {
		ref, got, want []string
	}{
		{[]string{"ˈɪn", "ðˈə", "mˈɪdəl"}, []string{"ɪnðə", "mˈɪdəl"}, []string{"ɪn", "ðə", "mˈɪdəl"}},
		{[]string{"ˈʌv", "ðˈə", "nˈa^ɪt"}, []string{"ʌvðˈə", "nˈa^ɪt"}, []string{"ʌv", "ðˈə", "nˈa^ɪt"}},
		{[]string{"wˈɛlnˈo^ʊn"}, []string{"wˈɛl", "nˈo^ʊn"}, []string{"wˈɛlnˈo^ʊn"}},
		{[]string{"tˈuː", "ðˈə", "stˈoː^ɹ"}, []string{"tə", "ðə", "stˈoː^ɹ"}, []string{"tə", "ðə", "stˈoː^ɹ"}},
		{[]string{"ˈɪn", "ðˈə", "ˈʌv"}, []string{"ɪnðəʌv"}, []string{"ɪn", "ðə", "ʌv"}},
	}
	for _, c := range cases {
		got := align(c.ref, c.got)
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("align(%q, %q) = %q, want %q", c.ref, c.got, got, c.want)
		}
	}
}

// The espeak-ng command, the fallback without the library, gives one line
// of phonemes per line of words.
func TestEspeakCLI(t *testing.T) {
	path, err := findEspeakCommand()
	if err != nil {
		t.Fatal(err)
	}
	cli := &espeakCLI{path: path}
	out, err := cli.phonemes("en-us", []string{"hello world", "the quick brown fox", "apple"})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 3 || fromEspeak(out[0], false) != "həlˈO wˈɜɹld" || fromEspeak(out[2], false) != "ˈæpᵊl" {
		t.Errorf("got %q", out)
	}
}

// Phonemizers share libespeak-ng's one global state behind a mutex; run
// them concurrently (go test -race checks the rest).
func TestPhonemizeConcurrent(t *testing.T) {
	us, gb := newTestPhonemizer(t, "en-us", 510), newTestPhonemizer(t, "en-gb", 510)
	want := map[*Phonemizer]string{}
	for _, p := range []*Phonemizer{us, gb} {
		cs, err := p.Phonemize("Go to the store over there.")
		if err != nil {
			t.Fatal(err)
		}
		want[p] = cs[0].Phonemes
	}
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		p := us
		if i%2 == 1 {
			p = gb
		}
		go func() {
			cs, err := p.Phonemize("Go to the store over there.")
			if err == nil && cs[0].Phonemes != want[p] {
				err = fmt.Errorf("%s: %q, want %q", p.voice, cs[0].Phonemes, want[p])
			}
			errs <- err
		}()
	}
	for i := 0; i < 16; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// The command-line fallback phonemizes like the library for plain text.
func TestPhonemizeWithCommand(t *testing.T) {
	path, err := findEspeakCommand()
	if err != nil {
		t.Fatal(err)
	}
	lib := newTestPhonemizer(t, "en-us", 510)
	cmd := *lib
	cmd.espeak = &espeakCLI{path: path}
	text := "In the middle of the night, I went to the store and bought an apple."
	a, err1 := lib.Phonemize(text)
	b, err2 := cmd.Phonemize(text)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if a[0].Phonemes != b[0].Phonemes {
		t.Errorf("library %q, command %q", a[0].Phonemes, b[0].Phonemes)
	}
}
