package kokoro

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// Generator is iSTFTNet's waveform generator with a harmonic-plus-noise
// source (hn-NSF): the F0 curve drives a sine source whose STFT is mixed
// in at every upsampling stage; each stage is LeakyReLU 0.1 → transposed
// conv → + source branch → the mean of multi-receptive-field AdaIN
// residual blocks; conv_post then predicts a log-magnitude and a phase
// whose inverse STFT is the audio.
type Generator struct {
	SourceLinear *Linear // the harmonics merged into one excitation
	NoiseConvs   []*Conv1d
	NoiseRes     []*AdaINResBlock1
	Ups          []*ConvTranspose1d
	ResBlocks    []*AdaINResBlock1 // stage i's are [i*NumKernels, (i+1)*NumKernels)
	ConvPost     *Conv1d
	Window       []float32

	NumKernels, NFFT, Hop int
	// Upsample is how many samples one F0 value spans: the product of the
	// upsample rates and the hop.
	Upsample int
}

// The source module's constants (SourceModuleHnNSF in the reference).
const (
	harmonics       = 9 // the fundamental and 8 overtones
	sineAmp         = 0.1
	noiseStd        = 0.003
	voicedThreshold = 10 // Hz
)

func loadGenerator(l *loader, c *Config) *Generator {
	n, s, p := c.ISTFTNet, c.StyleDim, "decoder.generator."
	g := &Generator{
		SourceLinear: loadLinear(l, p+"m_source.l_linear", harmonics, 1),
		NumKernels:   len(n.ResblockKernelSizes), NFFT: n.GenISTFTNFFT, Hop: n.GenISTFTHopSize,
		Window: ref.HannWindow(n.GenISTFTNFFT),
	}
	g.Upsample = n.GenISTFTHopSize
	for _, r := range n.UpsampleRates {
		g.Upsample *= r
	}
	ch := n.UpsampleInitialChannel
	for i, u := range n.UpsampleRates {
		k, out := n.UpsampleKernelSizes[i], n.UpsampleInitialChannel>>(i+1)
		g.Ups = append(g.Ups, loadConvTranspose1d(l, fmt.Sprintf("%sups.%d", p, i), ref.ConvTranspose1DArgs{
			InChannels: ch, OutChannels: out, Kernel: k, Stride: u, Padding: (k - u) / 2}))
		ch = out
		for j, rk := range n.ResblockKernelSizes {
			g.ResBlocks = append(g.ResBlocks, loadAdaINResBlock1(l, fmt.Sprintf("%sresblocks.%d", p, i*g.NumKernels+j),
				ch, rk, n.ResblockDilationSizes[j], s))
		}
		// The source enters each stage at that stage's rate: a strided
		// conv brings the STFT frames down by the remaining upsampling.
		name := fmt.Sprintf("%snoise_convs.%d", p, i)
		if i+1 < len(n.UpsampleRates) {
			stride := 1
			for _, r := range n.UpsampleRates[i+1:] {
				stride *= r
			}
			g.NoiseConvs = append(g.NoiseConvs, loadConv1d(l, name, g.NFFT+2, ch, 2*stride, stride, (stride+1)/2, 1, true))
			g.NoiseRes = append(g.NoiseRes, loadAdaINResBlock1(l, fmt.Sprintf("%snoise_res.%d", p, i), ch, 7, []int{1, 3, 5}, s))
		} else {
			g.NoiseConvs = append(g.NoiseConvs, loadConv1d(l, name, g.NFFT+2, ch, 1, 1, 0, 1, true))
			g.NoiseRes = append(g.NoiseRes, loadAdaINResBlock1(l, fmt.Sprintf("%snoise_res.%d", p, i), ch, 11, []int{1, 3, 5}, s))
		}
	}
	g.ConvPost = loadConv1d(l, p+"conv_post", ch, g.NFFT+2, 7, 1, 3, 1, true)
	return g
}

// forward makes the audio from the decoder's features x ([C][T], T = 2F)
// and the F0 curve (T values, Hz). rng draws the source's random initial
// phases and noise; nil makes them zero (the deterministic mode the tests
// compare with the reference in).
func (g *Generator) forward(x []float32, T int, style, f0 []float32, rng *rand.Rand, trace tracer) ([]float32, error) {
	// Harmonic source: sines at f0 and its overtones (zero where
	// unvoiced), merged by a linear layer and tanh, one value per sample.
	L := T * g.Upsample
	var phase0, noise []float32
	if rng != nil {
		phase0 = make([]float32, harmonics) // the fundamental starts at 0
		for h := 1; h < harmonics; h++ {
			phase0[h] = rng.Float32()
		}
		// The noise is hashed from one key (ref.GaussianNoise), as the GPU
		// forward makes it where it is used: 9 normals a sample.
		noise = ref.GaussianNoise(harmonics*L, rng.Uint32(), 1)
	}
	sines, err := ref.SineGen(f0, phase0, noise, ref.SineGenArgs{Frames: T, Upsample: g.Upsample, Harmonics: harmonics,
		SampleRate: SampleRate, SineAmp: sineAmp, NoiseStd: noiseStd, VoicedThreshold: voicedThreshold})
	if err != nil {
		return nil, fmt.Errorf("kokoro: generator: %w", err)
	}
	source := make([]float32, L)
	for j := range source {
		acc := float64(g.SourceLinear.B[0])
		for h := range harmonics {
			acc += float64(g.SourceLinear.W[h]) * float64(sines[h*L+j])
		}
		source[j] = float32(math.Tanh(acc))
	}
	trace.add("har_source", source, L, 1)
	// Its STFT, [magnitude | phase] × frames, is what each stage mixes in.
	har := ref.STFTMagPhase(source, g.Window, g.Hop)
	frames := L/g.Hop + 1
	trace.add("har", har, g.NFFT+2, frames)

	t := T
	for i, up := range g.Ups {
		x = ref.LeakyReLU(x, 0.1)
		src := g.NoiseConvs[i].apply(har, frames)
		srcLen := g.NoiseConvs[i].outLength(frames)
		src = g.NoiseRes[i].apply(src, srcLen, style)
		x, t = up.apply(x, t)
		ch := up.Args.OutChannels
		if i == len(g.Ups)-1 {
			// ReflectionPad1d((1, 0)): the last stage is one sample short
			// of the source's frames.
			x, t = ref.Pad1D(x, ch, t, 1, 0, true), t+1
		}
		if t != srcLen {
			return nil, fmt.Errorf("kokoro: generator stage %d: %d steps, the source has %d (upsample kernels and rates do not fit)", i, t, srcLen)
		}
		ref.AddInPlace(x, src)
		if i == 0 {
			trace.add("gen_stage0", x, ch, t)
		}
		// Multi-receptive-field fusion: the mean of the stage's blocks.
		sum := make([]float32, len(x))
		for _, rb := range g.ResBlocks[i*g.NumKernels : (i+1)*g.NumKernels] {
			ref.AddInPlace(sum, rb.apply(x, t, style))
		}
		for j := range sum {
			sum[j] /= float32(g.NumKernels)
		}
		x = sum
	}

	// Log-magnitude and phase, then the inverse STFT.
	x = g.ConvPost.apply(ref.LeakyReLU(x, 0.01), t)
	trace.add("conv_post", x, g.NFFT+2, t)
	bins := g.NFFT/2 + 1
	mag, phase := ref.Exp(x[:bins*t]), ref.Sin(x[bins*t:])
	audio, err := ref.ISTFT(mag, phase, g.Window, g.Hop, t)
	if err != nil {
		return nil, fmt.Errorf("kokoro: generator: %w", err)
	}
	return audio, nil
}

// AdaINResBlock1 is iSTFTNet's residual block with AdaIN: three rounds
// of AdaIN → Snake → dilated conv → AdaIN → Snake → conv, each added to
// the running x.
type AdaINResBlock1 struct {
	Convs1, Convs2 []*Conv1d
	AdaIN1, AdaIN2 []*AdaIN1d
	Alpha1, Alpha2 [][]float32 // Snake's per-channel frequency
	Channels       int
}

func loadAdaINResBlock1(l *loader, name string, ch, k int, dilations []int, styleDim int) *AdaINResBlock1 {
	b := &AdaINResBlock1{Channels: ch}
	for j, d := range dilations {
		// get_padding(k, d) = (k*d - d) / 2: "same" length.
		b.Convs1 = append(b.Convs1, loadConv1d(l, fmt.Sprintf("%s.convs1.%d", name, j), ch, ch, k, 1, (k*d-d)/2, d, true))
		b.Convs2 = append(b.Convs2, loadConv1d(l, fmt.Sprintf("%s.convs2.%d", name, j), ch, ch, k, 1, (k-1)/2, 1, true))
		b.AdaIN1 = append(b.AdaIN1, loadAdaIN1d(l, fmt.Sprintf("%s.adain1.%d", name, j), styleDim, ch))
		b.AdaIN2 = append(b.AdaIN2, loadAdaIN1d(l, fmt.Sprintf("%s.adain2.%d", name, j), styleDim, ch))
		b.Alpha1 = append(b.Alpha1, l.tensor(fmt.Sprintf("%s.alpha1.%d", name, j), 1, ch, 1))
		b.Alpha2 = append(b.Alpha2, l.tensor(fmt.Sprintf("%s.alpha2.%d", name, j), 1, ch, 1))
	}
	return b
}

func (b *AdaINResBlock1) apply(x []float32, T int, style []float32) []float32 {
	for j := range b.Convs1 {
		xt := ref.Snake(b.AdaIN1[j].apply(x, T, style), b.Alpha1[j], T, 0)
		xt = b.Convs1[j].apply(xt, T)
		xt = ref.Snake(b.AdaIN2[j].apply(xt, T, style), b.Alpha2[j], T, 0)
		xt = b.Convs2[j].apply(xt, T)
		x = ref.Add(xt, x)
	}
	return x
}
