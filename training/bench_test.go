package training

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/engine/synth"
)

// BenchmarkGPUStep times optimizer steps of the GPU step on a synth model:
// zeroing the gradients, one micro-batch of one example forward and
// backward (one chain), and the AdamW step (another), each waited for.
// HEARTH_BENCH_PRESET (tiny-llama), HEARTH_BENCH_QUANT (Q4_K),
// HEARTH_BENCH_TOKENS (64) and HEARTH_BENCH_RANK (16) choose the shape; the
// issue's is llama-3.2-1b, Q4_K, 512, 16. It reports trained tokens/s.
func BenchmarkGPUStep(b *testing.B) {
	env := func(k, def string) string {
		if v := os.Getenv(k); v != "" {
			return v
		}
		return def
	}
	preset, quant := env("HEARTH_BENCH_PRESET", "tiny-llama"), env("HEARTH_BENCH_QUANT", "Q4_K")
	tokens, err := strconv.Atoi(env("HEARTH_BENCH_TOKENS", "64"))
	if err != nil {
		b.Fatal(err)
	}
	rank, err := strconv.Atoi(env("HEARTH_BENCH_RANK", "16"))
	if err != nil {
		b.Fatal(err)
	}
	p, ok := synth.PresetByName(preset)
	if !ok {
		b.Fatalf("no preset %q", preset)
	}
	path := filepath.Join(b.TempDir(), preset+".gguf")
	if err := synth.WriteFile(path, p, synth.Options{Quant: quant, Seed: 7}); err != nil {
		b.Fatal(err)
	}
	m, err := model.Load(path)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	lora, err := NewLoRA(m, LoRAConfig{Rank: rank, Alpha: float32(2 * rank)}, 1)
	if err != nil {
		b.Fatal(err)
	}
	dev := openDevice(b)
	start := time.Now()
	g, err := NewGPU(dev, m, lora, tokens, tokens)
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	b.Logf("%s %s: uploaded in %v", preset, quant, time.Since(start))
	ex := randomExamples(m, 1, tokens, tokens/4, 3)
	step := func(i int) {
		if err := g.ZeroGrads(); err != nil {
			b.Fatal(err)
		}
		_, count, err := g.Backward(ex)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := g.Step(DefaultAdamW, i+1, count, 1e-4); err != nil {
			b.Fatal(err)
		}
	}
	step(0) // pipelines compile on first use
	b.ResetTimer()
	for i := range b.N {
		step(i + 1)
	}
	b.ReportMetric(float64(b.N*tokens)/b.Elapsed().Seconds(), "tokens/s")
}
