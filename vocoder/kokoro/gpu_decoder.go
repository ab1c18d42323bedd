package kokoro

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops"
)

// gpuDecoder is Decoder (decoder.go) and its Generator (generator.go) on
// engine/ops kernels, with the same structure: features, then the
// harmonic source and its STFT, then the upsampling stages and the
// inverse STFT. Its weights are uploaded once, in f32 (the parity the
// tests check); its activations live in the GPUModel's scratch pool under
// "dec." labels.
type gpuDecoder struct {
	g      *GPUModel
	encode *gpuAdainResBlk
	decode []*gpuAdainResBlk
	f0Conv *gpuConv
	nConv  *gpuConv
	asrRes *gpuConv
	gen    *gpuGenerator
	// ones are the weights of nearest upsampling ×2 written as a depthwise
	// ConvTranspose1d (kernel 2, stride 2, every weight 1): exact, and no
	// kernel of its own. Two per channel of the widest block input.
	ones *gpu.Buffer
}

// gpuGenerator is Generator's weights on the device.
type gpuGenerator struct {
	source     *gpuConv // m_source.l_linear: 9 harmonics to 1, a kernel-1 conv
	noiseConvs []*gpuConv
	noiseRes   []*gpuResBlock1
	ups        []*gpuConvT
	resBlocks  []*gpuResBlock1 // stage i's are [i*numKernels, (i+1)*numKernels)
	convPost   *gpuConv
	stft       *ops.STFTPlan

	numKernels, upsample int
}

// gpuConv is a Conv1d (Length filled in per call).
type gpuConv struct {
	w, b *gpu.Buffer // b nil: no bias
	a    ops.Conv1DArgs
}

// gpuConvT is a ConvTranspose1d (Length filled in per call).
type gpuConvT struct {
	w, b *gpu.Buffer
	a    ops.ConvTranspose1DArgs
}

// gpuAdaIN is AdaIN1d: its fc, the style's Linear to [gamma | beta], runs
// as a kernel-1 conv over the timbre seen as [StyleDim][1], into its own
// scratch buffer gb, before each use.
type gpuAdaIN struct {
	fc           *gpuConv
	normW, normB *gpu.Buffer
	channels     int
	gb           string // scratch label of [gamma | beta]
}

type gpuAdainResBlk struct {
	norm1, norm2 *gpuAdaIN
	conv1, conv2 *gpuConv
	conv1x1      *gpuConv  // nil when in == out
	pool         *gpuConvT // nil unless upsampling
	in, out      int
}

type gpuResBlock1 struct {
	convs1, convs2 []*gpuConv
	adain1, adain2 []*gpuAdaIN
	alpha1, alpha2 []*gpu.Buffer
	channels       int
}

// uploader uploads a layer tree's weights, keeping the first error, so the
// constructors read like loadDecoder. f16 packs the conv and transposed
// conv weights as f16 pairs (ops.PackF16); the default is f32, the parity
// the tests hold (BenchmarkGPUDecoder compares the two).
type uploader struct {
	g   *GPUModel
	f16 bool
	err error
}

func (u *uploader) buf(label string, v []float32) *gpu.Buffer {
	if u.err != nil || v == nil {
		return nil
	}
	b, err := u.g.upload(label, v)
	if err != nil {
		u.err = err
	}
	return b
}

// weight uploads a conv weight in the uploader's format.
func (u *uploader) weight(label string, v []float32) *gpu.Buffer {
	if !u.f16 {
		return u.buf(label, v)
	}
	if u.err != nil {
		return nil
	}
	packed, err := ops.PackF16(v)
	if err != nil {
		u.err = fmt.Errorf("%s: %w", label, err)
		return nil
	}
	b, err := u.g.dev.NewBufferFrom(label, packed)
	if err != nil {
		u.err = fmt.Errorf("%s: %w", label, err)
		return nil
	}
	u.g.bufs = append(u.g.bufs, b)
	return b
}

func (u *uploader) conv(name string, c *Conv1d) *gpuConv {
	return &gpuConv{w: u.weight(name+".weight", c.W), b: u.buf(name+".bias", c.B),
		a: ops.Conv1DArgs{InChannels: c.In, OutChannels: c.Out, Kernel: c.Kernel, Stride: c.Stride, Padding: c.Padding, Dilation: c.Dilation, F16: u.f16}}
}

// linear uploads nn.Linear W [Out][In] as a Conv1d weight [Out][In][1].
func (u *uploader) linear(name string, l *Linear) *gpuConv {
	return &gpuConv{w: u.buf(name+".weight", l.W), b: u.buf(name+".bias", l.B),
		a: ops.Conv1DArgs{InChannels: l.In, OutChannels: l.Out, Kernel: 1}}
}

func (u *uploader) convT(name string, c *ConvTranspose1d) *gpuConvT {
	a := c.Args
	return &gpuConvT{w: u.weight(name+".weight", c.W), b: u.buf(name+".bias", c.B),
		a: ops.ConvTranspose1DArgs{InChannels: a.InChannels, OutChannels: a.OutChannels, Kernel: a.Kernel,
			Stride: a.Stride, Padding: a.Padding, OutputPadding: a.OutputPadding, Groups: a.Groups, F16: u.f16}}
}

func (u *uploader) adain(name string, n *AdaIN1d) *gpuAdaIN {
	return &gpuAdaIN{fc: u.linear(name+".fc", n.FC), normW: u.buf(name+".norm.weight", n.NormW),
		normB: u.buf(name+".norm.bias", n.NormB), channels: n.Channels, gb: "dec.style." + name}
}

func (u *uploader) adainResBlk(name string, b *AdainResBlk1d) *gpuAdainResBlk {
	out := &gpuAdainResBlk{norm1: u.adain(name+".norm1", b.Norm1), norm2: u.adain(name+".norm2", b.Norm2),
		conv1: u.conv(name+".conv1", b.Conv1), conv2: u.conv(name+".conv2", b.Conv2), in: b.In, out: b.Out}
	if b.Conv1x1 != nil {
		out.conv1x1 = u.conv(name+".conv1x1", b.Conv1x1)
	}
	if b.Pool != nil {
		out.pool = u.convT(name+".pool", b.Pool)
	}
	return out
}

func (u *uploader) resBlock1(name string, b *AdaINResBlock1) *gpuResBlock1 {
	out := &gpuResBlock1{channels: b.Channels}
	for j := range b.Convs1 {
		out.convs1 = append(out.convs1, u.conv(fmt.Sprintf("%s.convs1.%d", name, j), b.Convs1[j]))
		out.convs2 = append(out.convs2, u.conv(fmt.Sprintf("%s.convs2.%d", name, j), b.Convs2[j]))
		out.adain1 = append(out.adain1, u.adain(fmt.Sprintf("%s.adain1.%d", name, j), b.AdaIN1[j]))
		out.adain2 = append(out.adain2, u.adain(fmt.Sprintf("%s.adain2.%d", name, j), b.AdaIN2[j]))
		out.alpha1 = append(out.alpha1, u.buf(fmt.Sprintf("%s.alpha1.%d", name, j), b.Alpha1[j]))
		out.alpha2 = append(out.alpha2, u.buf(fmt.Sprintf("%s.alpha2.%d", name, j), b.Alpha2[j]))
	}
	return out
}

// newGPUDecoder uploads the decoder's and the generator's weights, named
// as in the checkpoint, in f32.
func newGPUDecoder(g *GPUModel) (*gpuDecoder, error) { return newGPUDecoderWeights(g, false) }

// newGPUDecoderWeights is newGPUDecoder with the convs' weights in f16
// when f16 is set (the AdaIN fcs, biases and Snake alphas stay f32).
func newGPUDecoderWeights(g *GPUModel, f16 bool) (*gpuDecoder, error) {
	m := g.m.Decoder
	u := &uploader{g: g, f16: f16}
	const p = "decoder."
	d := &gpuDecoder{
		g:      g,
		encode: u.adainResBlk(p+"encode", m.Encode),
		f0Conv: u.conv(p+"F0_conv", m.F0Conv),
		nConv:  u.conv(p+"N_conv", m.NConv),
		asrRes: u.conv(p+"asr_res.0", m.ASRRes),
	}
	for i, b := range m.Decode {
		d.decode = append(d.decode, u.adainResBlk(fmt.Sprintf("%sdecode.%d", p, i), b))
	}
	widest := max(m.Encode.In, decoderWidth+2+decoderASRRes)
	ones := make([]float32, 2*widest)
	for i := range ones {
		ones[i] = 1
	}
	d.ones = u.buf(p+"upsample_nearest2.ones", ones)

	gm, gp := m.Generator, p+"generator."
	gen := &gpuGenerator{
		source:     u.linear(gp+"m_source.l_linear", gm.SourceLinear),
		convPost:   u.conv(gp+"conv_post", gm.ConvPost),
		numKernels: gm.NumKernels, upsample: gm.Upsample,
	}
	for i := range gm.Ups {
		gen.ups = append(gen.ups, u.convT(fmt.Sprintf("%sups.%d", gp, i), gm.Ups[i]))
		gen.noiseConvs = append(gen.noiseConvs, u.conv(fmt.Sprintf("%snoise_convs.%d", gp, i), gm.NoiseConvs[i]))
		gen.noiseRes = append(gen.noiseRes, u.resBlock1(fmt.Sprintf("%snoise_res.%d", gp, i), gm.NoiseRes[i]))
	}
	for i, rb := range gm.ResBlocks {
		gen.resBlocks = append(gen.resBlocks, u.resBlock1(fmt.Sprintf("%sresblocks.%d", gp, i), rb))
	}
	if u.err != nil {
		return nil, fmt.Errorf("decoder weights: %w", u.err)
	}
	// TorchSTFT's window is hann_window(n_fft): win_length = n_fft.
	plan, err := ops.NewSTFTPlan(g.dev, gm.NFFT, gm.Hop, gm.NFFT)
	if err != nil {
		return nil, fmt.Errorf("decoder: %w", err)
	}
	gen.stft = plan
	d.gen = gen
	return d, nil
}

// release frees what the GPUModel's pools do not hold: the STFT plan.
func (d *gpuDecoder) release() {
	if d != nil && d.gen != nil && d.gen.stft != nil {
		d.gen.stft.Release()
	}
}

// generate appends the decoder and the generator to ch: asr is
// [HiddenDim][F], f0 and n hold 2F values. It returns the buffer holding
// the audio's samples. With rng nil the harmonic source is deterministic;
// otherwise its initial phases and noise are drawn from rng as
// Generator.forward draws them. The timbre and the draws are written to
// the device now (queue writes), so one chain must not hold two generates.
func (d *gpuDecoder) generate(ch *gpu.Chain, asr, f0, n *gpu.Buffer, F int, timbre []float32, rng *rand.Rand) (audio *gpu.Buffer, samples int, err error) {
	p, err := d.begin(ch, F, timbre)
	if err != nil {
		return nil, 0, err
	}
	// Decoder to [512][2F] features, then the generator to audio.
	feat := p.features(asr, f0, n, F)
	har := p.source(f0, 2*F, rng)
	audio, samples = p.fromHar(feat, har, 2*F)
	if p.err != nil {
		return nil, 0, p.err
	}
	return audio, samples, nil
}

// begin checks the call's shape, uploads the timbre and opens a pass.
func (d *gpuDecoder) begin(ch *gpu.Chain, F int, timbre []float32) (*pass, error) {
	if ch == nil {
		return nil, errors.New("decoder: nil chain")
	}
	if F <= 0 {
		return nil, fmt.Errorf("decoder: %d frames, want at least 1", F)
	}
	// The harmonic source's [9][samples] sines are the largest activation;
	// the kernels index with u32.
	if sines := int64(F) * 2 * int64(d.gen.upsample) * harmonics; sines > math.MaxUint32 {
		return nil, fmt.Errorf("decoder: %d frames make %d source values, over the kernels' 32-bit indices", F, sines)
	}
	if S := d.g.m.Config.StyleDim; len(timbre) != S {
		return nil, fmt.Errorf("decoder: timbre has %d values, want style_dim %d", len(timbre), S)
	}
	p := &pass{d: d, ch: ch, sizes: map[string]int{}}
	p.timbre = p.buf("dec.timbre", len(timbre))
	p.write(p.timbre, timbre)
	// Every block's temporaries fit the widest input at the doubled rate.
	p.blkFloats = (decoderWidth + 2 + decoderASRRes) * 2 * F
	return p, p.err
}

// pass records one forward into a chain. Each method appends its
// dispatches unless an earlier one failed; the first error, wrapped with
// the layer it happened in, is p.err.
type pass struct {
	d         *gpuDecoder
	ch        *gpu.Chain
	err       error
	at        string         // the layer being recorded, for errors
	sizes     map[string]int // floats asked of each scratch label in this pass
	timbre    *gpu.Buffer
	blkFloats int
}

func (p *pass) fail(err error) {
	if p.err == nil && err != nil {
		p.err = fmt.Errorf("%s: %w", p.at, err)
	}
}

// buf is the pool's buffer for label. A label asked for twice in one pass
// must not grow: growing releases the buffer that earlier dispatches of the
// same chain bound.
func (p *pass) buf(label string, floats int) *gpu.Buffer {
	if p.err != nil {
		return nil
	}
	if prev, ok := p.sizes[label]; ok && floats > prev {
		p.fail(fmt.Errorf("scratch %q asked for %d floats after %d in one pass", label, floats, prev))
		return nil
	} else if !ok {
		p.sizes[label] = floats
	}
	b, err := p.d.g.scratch(label, floats)
	p.fail(err)
	return b
}

func (p *pass) write(b *gpu.Buffer, v []float32) {
	if p.err == nil {
		p.fail(b.WriteF32(0, v))
	}
}

// conv appends c over x ([In][length]) into y, returning y's length.
func (p *pass) conv(c *gpuConv, x, y *gpu.Buffer, length int) int {
	a := c.a
	a.Length = length
	if p.err != nil {
		return a.OutLength()
	}
	// The tiled kernel (an implicit GEMM) takes every stride-1, groups-1,
	// zero-padded conv, at any length: the blocks' convs and conv_post,
	// nearly all the work. The strided ones (F0, N, noise convs) are small
	// and run one output per invocation. Both kernels read the f32 weights
	// and the optional packed-f16 ones.
	if ops.Conv1DTiledFits(a) == nil {
		p.fail(ops.Conv1DTiled(p.ch, x, c.w, c.b, y, a))
	} else {
		p.fail(ops.Conv1D(p.ch, x, c.w, c.b, y, a))
	}
	return a.OutLength()
}

func (p *pass) convT(c *gpuConvT, x, y *gpu.Buffer, length int) int {
	a := c.a
	a.Length = length
	if p.err != nil {
		return a.OutLength()
	}
	// The generator's upsamplers (groups 1, 8 and 12 GMAC on a 510-phoneme
	// chunk) run as tiled GEMMs, one per phase of the stride; the decoder's
	// depthwise pool runs one output per invocation.
	if ops.ConvTranspose1DTiledFits(a) == nil {
		p.fail(ops.ConvTranspose1DTiled(p.ch, x, c.w, c.b, y, a))
	} else {
		p.fail(ops.ConvTranspose1D(p.ch, x, c.w, c.b, y, a))
	}
	return a.OutLength()
}

// upsample2 is F.interpolate(scale_factor=2, mode='nearest') of x
// ([channels][length]) into y.
func (p *pass) upsample2(x, y *gpu.Buffer, channels, length int) {
	if p.err == nil {
		p.fail(ops.ConvTranspose1D(p.ch, x, p.d.ones, nil, y, ops.ConvTranspose1DArgs{
			InChannels: channels, OutChannels: channels, Length: length, Kernel: 2, Stride: 2, Groups: channels}))
	}
}

// adain is AdaIN1d: [gamma | beta] = fc(timbre), then the norm of x into y.
func (p *pass) adain(n *gpuAdaIN, x, y *gpu.Buffer, length int) {
	gb := p.buf(n.gb, 2*n.channels)
	p.conv(n.fc, p.timbre, gb, 1)
	if p.err == nil {
		p.fail(ops.AdaIN1D(p.ch, x, gb, n.normW, n.normB, y, ops.AudioNormArgs{Channels: n.channels, Length: length, Eps: instanceNormEps}))
	}
}

func (p *pass) leakyReLU(x, y *gpu.Buffer, n int, slope float32) {
	if p.err == nil {
		p.fail(ops.LeakyReLU(p.ch, x, y, n, slope))
	}
}

func (p *pass) snake(x, alpha, y *gpu.Buffer, channels, length int) {
	if p.err == nil {
		p.fail(ops.Snake(p.ch, x, alpha, y, channels, length, 0))
	}
}

func (p *pass) add(x, y, out *gpu.Buffer, n int) {
	if p.err == nil {
		p.fail(ops.Add(p.ch, x, y, out, n))
	}
}

func (p *pass) scale(x, y *gpu.Buffer, n int, s float32) {
	if p.err == nil {
		p.fail(ops.Scale(p.ch, x, y, n, s))
	}
}

func (p *pass) copy(src *gpu.Buffer, srcOff int, dst *gpu.Buffer, dstOff, n int) {
	if p.err == nil {
		p.fail(ops.CopyF32(p.ch, src, srcOff, dst, dstOff, n))
	}
}

// features is Decoder.features: asr [HiddenDim][F], f0 and n 2F values, to
// [512][2F].
func (p *pass) features(asr, f0, n *gpu.Buffer, F int) *gpu.Buffer {
	d, H := p.d, p.d.g.m.Config.HiddenDim
	const W, R = decoderWidth, decoderASRRes
	in := W + 2 + R

	// F0 and energy brought down to the frame rate by stride-2 convs.
	p.at = "decoder.F0_conv"
	f0d := p.buf("dec.f0d", F)
	p.conv(d.f0Conv, f0, f0d, 2*F)
	p.at = "decoder.N_conv"
	nd := p.buf("dec.nd", F)
	p.conv(d.nConv, n, nd, 2*F)

	// encode([asr | f0d | nd]): channel-major, so each part is one run.
	p.at = "decoder.encode"
	x0 := p.buf("dec.cat.encode", (H+2)*F)
	p.copy(asr, 0, x0, 0, H*F)
	p.copy(f0d, 0, x0, H*F, F)
	p.copy(nd, 0, x0, (H+1)*F, F)

	// The content's 64-channel residual, and two [x | res | f0d | nd]
	// buffers the blocks alternate between: each writes its x into the
	// other's head; the tails, the same for every block, are written once.
	p.at = "decoder.asr_res"
	res := p.buf("dec.asr_res", R*F)
	p.conv(d.asrRes, asr, res, F)
	cat := [2]*gpu.Buffer{p.buf("dec.cat.a", in*F), p.buf("dec.cat.b", in*F)}
	for _, c := range cat {
		p.copy(res, 0, c, W*F, R*F)
		p.copy(f0d, 0, c, (W+R)*F, F)
		p.copy(nd, 0, c, (W+R+1)*F, F)
	}

	p.at = "decoder.encode"
	t := p.adainResBlk(d.encode, x0, cat[0], F)
	for i, b := range d.decode {
		p.at = fmt.Sprintf("decoder.decode.%d", i)
		y := cat[(i+1)%2]
		if i == len(d.decode)-1 {
			// The upsampling block is the last: [512][2F] out.
			y = p.buf("dec.out", decoderOut*2*F)
		}
		t = p.adainResBlk(b, cat[i%2], y, t)
		if i == len(d.decode)-1 {
			return y
		}
	}
	return nil
}

// adainResBlk is AdainResBlk1d.apply: x [in][T] (its first in channels)
// to y [out][T'], returning T' (2T when it upsamples). y must not be x.
func (p *pass) adainResBlk(b *gpuAdainResBlk, x, y *gpu.Buffer, T int) int {
	size := p.blkFloats
	// Residual branch: AdaIN → LeakyReLU 0.2 → (depthwise transposed conv
	// ×2) → conv1 → AdaIN → LeakyReLU 0.2 → conv2.
	r := p.buf("dec.blk.norm1", size)
	p.adain(b.norm1, x, r, T)
	p.leakyReLU(r, r, b.in*T, 0.2)
	t := T
	if b.pool != nil {
		up := p.buf("dec.blk.pool", size)
		t = p.convT(b.pool, r, up, T)
		r = up
	}
	h := p.buf("dec.blk.conv1", size)
	p.conv(b.conv1, r, h, t)
	p.adain(b.norm2, h, h, t)
	p.leakyReLU(h, h, b.out*t, 0.2)
	r = p.buf("dec.blk.conv2", size)
	p.conv(b.conv2, h, r, t)

	// Shortcut: nearest ×2, then the 1x1 conv when the width changes.
	sc := x
	if b.pool != nil {
		up := p.buf("dec.blk.shortcut_up", size)
		p.upsample2(x, up, b.in, T)
		sc = up
	}
	if b.conv1x1 != nil {
		s := p.buf("dec.blk.shortcut", size)
		p.conv(b.conv1x1, sc, s, t)
		sc = s
	}

	// (residual + shortcut) / sqrt 2.
	p.add(r, sc, y, b.out*t)
	p.scale(y, y, b.out*t, invSqrt2)
	return t
}

// source is the harmonic source of Generator.forward: sines at the 2F
// curve f0 (T values) and its overtones, merged by l_linear and tanh, one
// value per sample, then the STFT the stages mix in: [magnitude | phase]
// × frames, ref.STFTMagPhase's layout.
func (p *pass) source(f0 *gpu.Buffer, T int, rng *rand.Rand) *gpu.Buffer {
	g := p.d.gen
	p.at = "decoder.generator.m_source"
	L := T * g.upsample
	args := ops.SineGenArgs{Frames: T, Upsample: g.upsample, Harmonics: harmonics,
		SampleRate: SampleRate, SineAmp: sineAmp, NoiseStd: noiseStd, VoicedThreshold: voicedThreshold}
	var phase0, noise *gpu.Buffer
	if rng != nil {
		// The draws of Generator.forward, in its order: the initial
		// phases, then the noise's key, the noise hashed from it here
		// rather than 9 × samples normals drawn and uploaded.
		ph := make([]float32, harmonics) // the fundamental starts at 0
		for h := 1; h < harmonics; h++ {
			ph[h] = rng.Float32()
		}
		key := rng.Uint32()
		phase0, noise = p.buf("dec.src.phase0", harmonics), p.buf("dec.src.noise", harmonics*L)
		p.write(phase0, ph)
		if p.err == nil {
			p.fail(ops.GaussianNoise(p.ch, noise, harmonics*L, key, 1))
		}
	}
	sines := p.buf("dec.src.sines", harmonics*L)
	scratch := p.buf("dec.src.sine_scratch", args.ScratchFloats())
	if p.err == nil {
		p.fail(ops.SineGen(p.ch, f0, phase0, noise, scratch, sines, args))
	}
	source := p.buf("dec.src.source", L)
	p.conv(g.source, sines, source, L) // Σ_h w_h sine_h + b
	if p.err == nil {
		p.fail(ops.Tanh(p.ch, source, source, L))
	}
	har := p.buf("dec.src.har", 2*g.stft.Bins()*g.stft.Frames(L))
	if p.err == nil {
		p.fail(g.stft.STFT(p.ch, source, har, L))
	}
	return har
}

// fromHar is the rest of Generator.forward: the features x ([512][T]) and
// the source's STFT har to audio. It returns the audio and its length.
func (p *pass) fromHar(x, har *gpu.Buffer, T int) (*gpu.Buffer, int) {
	g := p.d.gen
	frames := g.stft.Frames(T * g.upsample)
	t, ch := T, p.d.g.m.Config.ISTFTNet.UpsampleInitialChannel
	for i, up := range g.ups {
		p.at = fmt.Sprintf("decoder.generator stage %d", i)
		out := up.a.OutChannels
		act := p.buf(fmt.Sprintf("dec.gen%d.act", i), ch*t)
		p.leakyReLU(x, act, ch*t, 0.1)

		// The source at this stage's rate: a strided conv of the STFT,
		// then its residual block.
		nc := g.noiseConvs[i].a
		nc.Length = frames
		srcLen := nc.OutLength()
		n := out * srcLen
		tmp := [2]*gpu.Buffer{p.buf(fmt.Sprintf("dec.gen%d.tmp0", i), n), p.buf(fmt.Sprintf("dec.gen%d.tmp1", i), n)}
		src := p.buf(fmt.Sprintf("dec.gen%d.noise_conv", i), n)
		p.conv(g.noiseConvs[i], har, src, frames)
		srcRes := p.buf(fmt.Sprintf("dec.gen%d.noise_res", i), n)
		p.resBlock1(g.noiseRes[i], src, srcRes, srcLen, tmp)

		// Transposed-conv upsampling, + the source.
		ua := up.a
		ua.Length = t
		last := i == len(g.ups)-1
		if steps := ua.OutLength() + b2i(last); steps != srcLen {
			p.fail(fmt.Errorf("%d steps, the source has %d (upsample kernels and rates do not fit)", steps, srcLen))
			return nil, 0
		}
		xs := p.buf(fmt.Sprintf("dec.gen%d.x", i), n)
		if last {
			// ReflectionPad1d((1, 0)): the last stage is one sample short
			// of the source's frames.
			u := p.buf(fmt.Sprintf("dec.gen%d.up", i), out*(srcLen-1))
			t = p.convT(up, act, u, t)
			if p.err == nil {
				p.fail(ops.Pad1D(p.ch, u, xs, out, t, 1, 0, ops.PadReflect))
			}
			t++
		} else {
			t = p.convT(up, act, xs, t)
		}
		p.add(xs, srcRes, xs, n)

		// Multi-receptive-field fusion: the mean of the stage's blocks.
		sum := p.buf(fmt.Sprintf("dec.gen%d.mrf", i), n)
		for k, rb := range g.resBlocks[i*g.numKernels : (i+1)*g.numKernels] {
			if k == 0 {
				p.resBlock1(rb, xs, sum, t, tmp)
				continue
			}
			y := p.buf(fmt.Sprintf("dec.gen%d.resblock", i), n)
			p.resBlock1(rb, xs, y, t, tmp)
			p.add(sum, y, sum, n)
		}
		p.scale(sum, sum, n, 1/float32(g.numKernels))
		x, ch = sum, out
	}

	// Log-magnitude and phase from conv_post on LeakyReLU 0.01, then the
	// inverse STFT of exp(magnitude)·e^(i sin(phase)).
	p.at = "decoder.generator.conv_post"
	act := p.buf("dec.post.act", ch*t)
	p.leakyReLU(x, act, ch*t, 0.01)
	post := p.buf("dec.post", (g.stft.NFFT+2)*t)
	p.conv(g.convPost, act, post, t)
	samples := g.stft.ISTFTLength(t)
	audio := p.buf("dec.audio", samples)
	if p.err == nil {
		p.fail(g.stft.ISTFT(p.ch, post, post, audio, t, ops.ISTFTOptions{
			MagOffset: 0, PhaseOffset: g.stft.Bins() * t, ExpMag: true, SinPhase: true}))
	}
	return audio, samples
}

// resBlock1 is AdaINResBlock1.apply: x ([channels][t], read only) to y;
// tmp are two scratch buffers of the same size.
func (p *pass) resBlock1(b *gpuResBlock1, x, y *gpu.Buffer, t int, tmp [2]*gpu.Buffer) {
	C, n := b.channels, b.channels*t
	a, h := tmp[0], tmp[1]
	cur := x
	for j := range b.convs1 {
		// x += conv2(Snake(AdaIN(conv1(Snake(AdaIN(x)))))), conv1 dilated.
		p.adain(b.adain1[j], cur, a, t)
		p.snake(a, b.alpha1[j], a, C, t)
		p.conv(b.convs1[j], a, h, t)
		p.adain(b.adain2[j], h, h, t)
		p.snake(h, b.alpha2[j], h, C, t)
		p.conv(b.convs2[j], h, a, t)
		p.add(a, cur, y, n)
		cur = y
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
