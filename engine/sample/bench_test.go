package sample

import "testing"

// benchSample times one Sample over a vocab-sized row. The logits are
// N(0, 3²), a wide distribution: top-p 0.95 keeps 24205 of 262144 tokens,
// near the worst case for the top-p search, where a confident step keeps a
// handful. The 64-token history meets Ollama's repeat penalty 1.1, so every
// case pays for the penalties as a decode step with them on does.
func benchSample(b *testing.B, vocab int, o Options) {
	x := gaussian(1, vocab, 3)
	history := make([]int32, 64)
	for i := range history {
		history[i] = int32(i * 997 % vocab)
	}
	o.RepeatPenalty, o.RepeatLastN = 1.1, 64
	s := mustNew(b, o)
	b.SetBytes(int64(vocab) * 4)
	for b.Loop() {
		s.Sample(x, history)
	}
}

var (
	// greedyOpts is Temperature 0: penalties, then argmax.
	greedyOpts = Options{}
	// topK40Opts are llama.cpp's defaults: top-k 40, top-p 0.95, min-p 0.05.
	topK40Opts = Defaults()
	// topPOpts turn top-k off, so top-p 0.95 searches the whole vocabulary.
	topPOpts = Options{Temperature: 0.8, TopP: 0.95}
)

const (
	llama3Vocab = 128256
	gemma3Vocab = 262144
)

func BenchmarkSampleGreedy128k(b *testing.B) { benchSample(b, llama3Vocab, greedyOpts) }
func BenchmarkSampleGreedy262k(b *testing.B) { benchSample(b, gemma3Vocab, greedyOpts) }
func BenchmarkSampleTopK40128k(b *testing.B) { benchSample(b, llama3Vocab, topK40Opts) }
func BenchmarkSampleTopK40262k(b *testing.B) { benchSample(b, gemma3Vocab, topK40Opts) }
func BenchmarkSampleTopP128k(b *testing.B)   { benchSample(b, llama3Vocab, topPOpts) }
func BenchmarkSampleTopP262k(b *testing.B)   { benchSample(b, gemma3Vocab, topPOpts) }

// BenchmarkSampleCandidates is the GPU path's CPU share: 40 candidates.
func BenchmarkSampleCandidates(b *testing.B) {
	x := gaussian(2, 40, 3)
	ids := make([]uint32, len(x))
	for i := range ids {
		ids[i] = uint32(i * 31)
	}
	s := mustNew(b, Defaults())
	for b.Loop() {
		s.SampleCandidates(ids, x)
	}
}
