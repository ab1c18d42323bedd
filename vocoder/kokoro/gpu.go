package kokoro

import (
	"fmt"
	"math/rand/v2"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// GPUModel is Model's forward on engine/ops kernels: the same arithmetic
// as the CPU reference (which it is tested against), in two submits per
// utterance. The first runs PL-BERT, the duration encoder, the duration
// head and the text encoder (which needs no durations) and reads back the
// durations, which fix the frame count; the second runs the alignment
// (of the duration encoder's and the text encoder's outputs), F0/energy,
// the decoder and the generator and reads back the audio.
//
// Weights are uploaded once, by NewGPUModel. Scratch buffers live in a
// pool by label, grown when an utterance needs more and kept for the
// next, so a steady stream of sentences allocates nothing.
//
// A GPUModel is not safe for concurrent use: the caller (the engine
// goroutine) owns the device.
type GPUModel struct {
	m    *Model
	dev  *gpu.Device
	pool map[string]*gpu.Buffer
	bufs []*gpu.Buffer // uploaded weights, released with the model
	text *gpuText      // gpu_text.go: up to asr, F0 and N
	dec  *gpuDecoder   // gpu_decoder.go: the decoder and the generator
}

// NewGPUModel uploads m's weights to dev.
func NewGPUModel(dev *gpu.Device, m *Model) (*GPUModel, error) {
	g := &GPUModel{m: m, dev: dev, pool: map[string]*gpu.Buffer{}}
	var err error
	if g.text, err = newGPUText(g); err != nil {
		g.Release()
		return nil, fmt.Errorf("kokoro: gpu: %w", err)
	}
	if g.dec, err = newGPUDecoder(g); err != nil {
		g.Release()
		return nil, fmt.Errorf("kokoro: gpu: %w", err)
	}
	return g, nil
}

// Release frees the model's buffers; the GPUModel is unusable after.
func (g *GPUModel) Release() {
	for _, b := range g.bufs {
		b.Release()
	}
	for _, b := range g.pool {
		b.Release()
	}
	g.bufs, g.pool = nil, map[string]*gpu.Buffer{}
	g.dec.release() // the STFT plan's table, which is not in bufs
}

// Forward is Model.Forward on the GPU.
func (g *GPUModel) Forward(tokens []int, style []float32, speed float64, deterministic bool) (audio []float32, durations []int, err error) {
	var rng *rand.Rand
	if !deterministic {
		rng = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return g.forward(tokens, style, speed, rng)
}

func (g *GPUModel) forward(tokens []int, style []float32, speed float64, rng *rand.Rand) ([]float32, []int, error) {
	c := g.m.Config
	if err := g.m.checkInput(tokens, style, speed); err != nil {
		return nil, nil, err
	}
	S := c.StyleDim
	timbre, prosody := style[:S], style[S:]

	durations, err := g.text.durations(tokens, prosody, speed)
	if err != nil {
		return nil, nil, fmt.Errorf("kokoro: gpu: durations: %w", err)
	}
	F := 0
	for _, n := range durations {
		F += n
	}
	if F == 0 {
		return nil, nil, fmt.Errorf("kokoro: gpu: every duration rounded to zero frames")
	}

	ch, err := g.dev.NewChain("kokoro.frames")
	if err != nil {
		return nil, nil, fmt.Errorf("kokoro: gpu: %w", err)
	}
	defer ch.Discard()
	asr, f0, n, err := g.text.frames(ch, durations, prosody)
	if err != nil {
		return nil, nil, fmt.Errorf("kokoro: gpu: alignment and F0: %w", err)
	}
	out, samples, err := g.dec.generate(ch, asr, f0, n, F, timbre, rng)
	if err != nil {
		return nil, nil, fmt.Errorf("kokoro: gpu: decoder: %w", err)
	}
	rb, err := ch.ReadBack(out, 0, uint64(samples)*4)
	if err != nil {
		return nil, nil, fmt.Errorf("kokoro: gpu: %w", err)
	}
	if err := ch.Submit(); err != nil {
		return nil, nil, fmt.Errorf("kokoro: gpu: %w", err)
	}
	b, err := rb.Bytes()
	if err != nil {
		return nil, nil, fmt.Errorf("kokoro: gpu: %w", err)
	}
	return gpu.F32From(b), durations, nil
}

// scratch returns the pool's buffer for label holding at least floats
// values, replacing a smaller one. Labels name what a buffer holds
// ("text.bert.x", "dec.gen.stage0"): two live values must never share one.
func (g *GPUModel) scratch(label string, floats int) (*gpu.Buffer, error) {
	need := uint64(max(floats, 1)) * 4
	if b, ok := g.pool[label]; ok {
		if b.Size() >= need {
			return b, nil
		}
		b.Release()
		delete(g.pool, label)
	}
	b, err := g.dev.NewBuffer(label, need)
	if err != nil {
		return nil, err
	}
	g.pool[label] = b
	return b, nil
}

// upload puts a weight on the device for the model's lifetime.
func (g *GPUModel) upload(label string, v []float32) (*gpu.Buffer, error) {
	b, err := g.dev.NewBufferF32(label, v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	g.bufs = append(g.bufs, b)
	return b, nil
}
