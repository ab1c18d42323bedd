package kokoro

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// BenchmarkGPUProfile says where GPUModel.Forward's time goes, for the
// sentence and the chunk of BenchmarkGPUForward (same weights, same
// HEARTH_VOICE_RECIPE): each of the two submits is recorded in full, then
// timed with only its first k dispatches kept (gpu.Chain.KeepFirst) for
// about 40 values of k; a segment's time is the difference of two
// prefixes', logged with the kernels it holds. Prefix 0 is the submit's
// fixed cost (recording every call, the upload, submit and readback).
// The profile goes to standard output.
//
//	go test ./vocoder/kokoro -run '^$' -bench 'GPUProfile' -benchtime 1x
//
// Not a regression benchmark: its ns/op is the whole profiling run.
func BenchmarkGPUProfile(b *testing.B) {
	m, texts := benchModel(b)
	g, err := NewGPUModel(testDevice(b), m)
	if err != nil {
		b.Fatal(err)
	}
	defer g.Release()
	voice, err := LoadVoice(filepath.Join(voicesDir(b), "af_heart.bin"))
	if err != nil {
		b.Fatal(err)
	}
	for _, text := range []benchText{texts[0], texts[2]} {
		tokens, style := benchInput(b, m.Config, voice, text.phonemes)
		prosody := style[m.Config.StyleDim:]
		b.Run(text.name, func(b *testing.B) {
			durations, err := g.text.durations(tokens, prosody, 1)
			if err != nil {
				b.Fatal(err)
			}
			F := 0
			for _, n := range durations {
				F += n
			}
			text := func(ch *gpu.Chain) (*gpu.Readback, error) {
				rb, _, _, err := g.text.record(ch, tokens, prosody, 1)
				return rb, err
			}
			rng := rand.New(rand.NewPCG(1, 2))
			frames := func(ch *gpu.Chain) (*gpu.Readback, error) {
				asr, f0, n, err := g.text.frames(ch, durations, prosody)
				if err != nil {
					return nil, err
				}
				out, samples, err := g.dec.generate(ch, asr, f0, n, F, style[:m.Config.StyleDim], rng)
				if err != nil {
					return nil, err
				}
				return ch.ReadBack(out, 0, uint64(samples)*4)
			}
			for range b.N {
				profileChain(b, g.dev, "durations", text)
				// The text chain's last full run left d and t_en for frames.
				if _, err := g.text.durations(tokens, prosody, 1); err != nil {
					b.Fatal(err)
				}
				profileChain(b, g.dev, "frames", frames)
			}
		})
	}
}

// benchInput is an utterance's token ids (with the boundary pads) and the
// voice's style row for its length.
func benchInput(b *testing.B, cfg *Config, voice *Voice, phonemes string) ([]int, []float32) {
	ps := []rune(phonemes)
	tokens := []int{0}
	for _, p := range ps {
		tokens = append(tokens, cfg.Vocab[string(p)])
	}
	tokens = append(tokens, 0)
	style, err := voice.Style(len(ps))
	if err != nil {
		b.Fatal(err)
	}
	return tokens, style
}

// profileChain times record's chain in prefixes and logs the segments.
func profileChain(b *testing.B, dev *gpu.Device, name string, record func(*gpu.Chain) (*gpu.Readback, error)) {
	run := func(keep int) ([]string, time.Duration) {
		start := time.Now()
		ch, err := dev.NewChain("profile." + name)
		if err != nil {
			b.Fatal(err)
		}
		defer ch.Discard()
		if keep >= 0 {
			ch.KeepFirst(keep)
		}
		rb, err := record(ch)
		if err != nil {
			b.Fatal(err)
		}
		kernels := ch.Kernels()
		if err := ch.Submit(); err != nil {
			b.Fatal(err)
		}
		if _, err := rb.Bytes(); err != nil {
			b.Fatal(err)
		}
		return kernels, time.Since(start)
	}
	all, _ := run(-1)
	const reps = 3
	timed := func(keep int) time.Duration {
		best := time.Duration(1 << 62)
		for range reps {
			_, t := run(keep)
			best = min(best, t)
		}
		return best
	}
	n := len(all)
	step := max(1, n/40)
	var cuts []int
	for k := 0; k < n; k += step {
		cuts = append(cuts, k)
	}
	cuts = append(cuts, n)
	times := make([]time.Duration, len(cuts))
	for i, k := range cuts {
		times[i] = timed(k)
	}
	// Printed, not logged: a benchmark's log keeps only its first lines.
	fmt.Printf("%s: %s: %d dispatches, %v in all (best of %d), %v with none recorded\n", b.Name(), name, n, times[len(times)-1], reps, times[0])
	for i := 1; i < len(cuts); i++ {
		fmt.Printf("  %4d-%4d %8.2f ms  %s\n", cuts[i-1], cuts[i], float64(times[i]-times[i-1])/1e6, kernelCounts(all[cuts[i-1]:cuts[i]]))
	}
}

// kernelCounts is "name×count" for each kernel in ks, most frequent first.
func kernelCounts(ks []string) string {
	count := map[string]int{}
	for _, k := range ks {
		count[k]++
	}
	names := make([]string, 0, len(count))
	for k := range count {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		if count[names[i]] != count[names[j]] {
			return count[names[i]] > count[names[j]]
		}
		return names[i] < names[j]
	})
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s×%d", k, count[k])
	}
	return strings.Join(parts, " ")
}
