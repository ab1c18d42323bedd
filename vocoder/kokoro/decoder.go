package kokoro

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// Decoder is StyleTTS2's iSTFTNet decoder: AdaIN residual blocks over the
// aligned content (asr) with the F0 and energy curves brought down to the
// frame rate, the content's 64-channel residual and the curves appended
// again before each block until the last, which doubles the frame rate;
// then the Generator makes the waveform. Its widths (1024, 512, 64) are
// fixed by the reference, not by config.json.
type Decoder struct {
	Encode    *AdainResBlk1d
	Decode    []*AdainResBlk1d
	F0Conv    *Conv1d // stride 2: the 2F curves to F frames
	NConv     *Conv1d
	ASRRes    *Conv1d
	Generator *Generator
}

const (
	decoderWidth  = 1024
	decoderOut    = 512
	decoderASRRes = 64
)

func loadDecoder(l *loader, c *Config) *Decoder {
	s, p := c.StyleDim, "decoder."
	in := decoderWidth + 2 + decoderASRRes
	m := &Decoder{
		Encode: loadAdainResBlk1d(l, p+"encode", c.HiddenDim+2, decoderWidth, s, false),
		F0Conv: loadConv1d(l, p+"F0_conv", 1, 1, 3, 2, 1, 1, true),
		NConv:  loadConv1d(l, p+"N_conv", 1, 1, 3, 2, 1, 1, true),
		// Conv1d(512, 64) in the reference whatever hidden_dim is: the
		// content it reads has hidden_dim channels, so they must agree.
		ASRRes:    loadConv1d(l, p+"asr_res.0", c.HiddenDim, decoderASRRes, 1, 1, 0, 1, true),
		Generator: loadGenerator(l, c),
	}
	for i := range 3 {
		m.Decode = append(m.Decode, loadAdainResBlk1d(l, fmt.Sprintf("%sdecode.%d", p, i), in, decoderWidth, s, false))
	}
	m.Decode = append(m.Decode, loadAdainResBlk1d(l, p+"decode.3", in, decoderOut, s, true))
	return m
}

// features runs the decoder up to the generator's input: asr is
// [HiddenDim][F], f0 and n 2F values; it returns [512][2F].
func (m *Decoder) features(asr, f0, n []float32, F int, style []float32, trace tracer) []float32 {
	f0d := m.F0Conv.apply(f0, 2*F)
	nd := m.NConv.apply(n, 2*F)
	x, t := m.Encode.apply(concatChannels(asr, f0d, nd), F, style)
	trace.add("dec_encode", x, decoderWidth, F)
	res := m.ASRRes.apply(asr, F)
	for i, b := range m.Decode {
		// Every block before the upsampling one gets the residuals again;
		// the upsampling block is the last, so all of them do.
		x, t = b.apply(concatChannels(x, res, f0d, nd), t, style)
		if i == 0 {
			trace.add("dec_decode0", x, decoderWidth, t)
		}
	}
	return x
}

// AdainResBlk1d is StyleTTS2's residual block of the predictor and the
// decoder: AdaIN → LeakyReLU 0.2 → (depthwise transposed-conv upsampling)
// → conv3 → AdaIN → LeakyReLU → conv3, added to the shortcut (nearest
// upsampling, then a 1x1 conv when the width changes), over sqrt 2.
type AdainResBlk1d struct {
	Norm1, Norm2 *AdaIN1d
	Conv1, Conv2 *Conv1d
	Conv1x1      *Conv1d          // nil when in == out
	Pool         *ConvTranspose1d // nil unless upsampling
	In, Out      int
}

func loadAdainResBlk1d(l *loader, name string, in, out, styleDim int, upsample bool) *AdainResBlk1d {
	b := &AdainResBlk1d{
		Norm1: loadAdaIN1d(l, name+".norm1", styleDim, in),
		Norm2: loadAdaIN1d(l, name+".norm2", styleDim, out),
		Conv1: loadConv1d(l, name+".conv1", in, out, 3, 1, 1, 1, true),
		Conv2: loadConv1d(l, name+".conv2", out, out, 3, 1, 1, 1, true),
		In:    in, Out: out,
	}
	if in != out {
		b.Conv1x1 = loadConv1d(l, name+".conv1x1", in, out, 1, 1, 0, 1, false)
	}
	if upsample {
		b.Pool = loadConvTranspose1d(l, name+".pool", ref.ConvTranspose1DArgs{InChannels: in, OutChannels: in,
			Kernel: 3, Stride: 2, Padding: 1, OutputPadding: 1, Groups: in})
	}
	return b
}

// invSqrt2 is torch.rsqrt(torch.tensor(2)), an f32.
var invSqrt2 = float32(1 / math.Sqrt2)

// apply runs the block on x ([In][T]), returning [Out][T'] and T' (2T when
// it upsamples).
func (b *AdainResBlk1d) apply(x []float32, T int, style []float32) ([]float32, int) {
	// Residual branch.
	r := ref.LeakyReLU(b.Norm1.apply(x, T, style), 0.2)
	t := T
	if b.Pool != nil {
		r, t = b.Pool.apply(r, T)
	}
	r = b.Conv1.apply(r, t)
	r = ref.LeakyReLU(b.Norm2.apply(r, t, style), 0.2)
	r = b.Conv2.apply(r, t)

	// Shortcut.
	sc := x
	if b.Pool != nil {
		sc = upsampleNearest2(x, b.In, T)
	}
	if b.Conv1x1 != nil {
		sc = b.Conv1x1.apply(sc, t)
	}
	out := make([]float32, len(r))
	for i := range out {
		out[i] = (r[i] + sc[i]) * invSqrt2
	}
	return out, t
}

// upsampleNearest2 is F.interpolate(x, scale_factor=2, mode='nearest').
func upsampleNearest2(x []float32, C, T int) []float32 {
	y := make([]float32, 2*C*T)
	for i, v := range x {
		y[2*i], y[2*i+1] = v, v
	}
	return y
}
