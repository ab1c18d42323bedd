package kokoro

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hearthstudio/hearth/vocoder/phonemes"
)

// Real-time factor benchmarks: seconds of audio per second of synthesis,
// of Kokoro-82M's full config with random weights, on three utterances
// (one sentence, four, and a full 510-symbol chunk of the reference
// phonemes in testdata/phonemes/en-us.tsv).
//
// The weights are the "full" fixture's recipe, or HEARTH_VOICE_RECIPE: the
// recipe docs/h200/voice/bench_torch.py wrote in the same run, whose
// duration bias makes ~3 frames a token as real speech does, so Hearth and
// PyTorch synthesise the same frames from the same weights. Run:
//
//	go test ./vocoder/kokoro -run '^$' -bench 'GPUForward' -benchtime 10x
//
// Each utterance runs once untimed first (kernels compiled, pools grown).
func BenchmarkGPUForward(b *testing.B) {
	m, texts := benchModel(b)
	g, err := NewGPUModel(testDevice(b), m)
	if err != nil {
		b.Fatal(err)
	}
	defer g.Release()
	benchUtterances(b, m.Config, texts, g)
}

// BenchmarkCPUForward is the CPU reference on the sentence only: it is the
// oracle, float64 inside, not built for speed; it is here for the ratio.
func BenchmarkCPUForward(b *testing.B) {
	m, texts := benchModel(b)
	benchUtterances(b, m.Config, texts[:1], m)
}

type benchText struct{ name, phonemes string }

func benchModel(b *testing.B) (*Model, []benchText) {
	b.Helper()
	var fx *forwardFixture
	if path := os.Getenv("HEARTH_VOICE_RECIPE"); path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		fx = &forwardFixture{}
		if err := json.Unmarshal(data, fx); err != nil {
			b.Fatalf("%s: %v", path, err)
		}
	} else {
		fx = loadForwardFixture(b, "full")
	}
	m, err := fx.newModel()
	if err != nil {
		b.Fatal(err)
	}
	return m, referenceUtterances(b, m.Config)
}

// referenceUtterances cuts the benchmark's inputs from en-us.tsv as
// bench_torch.py does: row 1, rows 1–4 joined by spaces, and the rows that
// fit one 510-symbol pass, each kept to the vocabulary.
func referenceUtterances(b *testing.B, cfg *Config) []benchText {
	f, err := os.Open(filepath.Join("..", "phonemes", "testdata", "phonemes", "en-us.tsv"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var rows []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		_, ps, ok := strings.Cut(sc.Text(), "\t")
		if !ok {
			b.Fatalf("en-us.tsv: line %q has no tab", sc.Text())
		}
		rows = append(rows, phonemes.FilterVocab(ps, cfg.Vocab))
	}
	if len(rows) < 5 {
		b.Fatalf("en-us.tsv: %d rows, want at least 5", len(rows))
	}
	long := ""
	for _, r := range rows {
		if len([]rune(long))+1+len([]rune(r)) > cfg.MaxPhonemes() {
			break
		}
		long = strings.TrimSpace(long + " " + r)
	}
	return []benchText{
		{"sentence", rows[1]},
		{"paragraph", strings.Join(rows[1:5], " ")},
		{"chunk", long},
	}
}

func benchUtterances(b *testing.B, cfg *Config, texts []benchText, s interface {
	Forward([]int, []float32, float64, bool) ([]float32, []int, error)
}) {
	voice, err := LoadVoice(filepath.Join(voicesDir(b), "af_heart.bin"))
	if err != nil {
		b.Fatal(err)
	}
	for _, text := range texts {
		ps := []rune(text.phonemes)
		tokens, style := benchInput(b, cfg, voice, text.phonemes)
		b.Run(text.name, func(b *testing.B) {
			audio, durations, err := s.Forward(tokens, style, 1, false)
			if err != nil {
				b.Fatal(err)
			}
			frames := 0
			for _, d := range durations {
				frames += d
			}
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				if _, _, err := s.Forward(tokens, style, 1, false); err != nil {
					b.Fatal(err)
				}
			}
			per := time.Since(start).Seconds() / float64(b.N)
			secs := float64(len(audio)) / SampleRate
			b.ReportMetric(secs/per, "rtf")
			b.ReportMetric(secs, "audio-s")
			b.ReportMetric(float64(frames), "frames")
			b.ReportMetric(float64(len(ps)), "phonemes")
		})
	}
}
