package ops

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// AudioNormArgs shapes a normalisation of [Channels][Length] activations.
type AudioNormArgs struct {
	Channels, Length int
	// Eps is added to the variance: 1e-5 for InstanceNorm1d and LayerNorm.
	Eps float32
}

// audioNormParams mirrors Params in shaders/audio_norm.wgsl.
type audioNormParams struct {
	Channels, T uint32
	Eps         float32
	Flags       uint32
}

const (
	audioNormWeight = 1
	audioNormBias   = 2
	audioNormStyle  = 4
)

// AdaIN1D appends Kokoro's AdaIN1d on x [Channels][Length]:
// InstanceNorm1d (per channel over time, biased variance, eps), its affine
// w, b if given (Kokoro builds the norm with affine=True; nil for
// affine=False), then (1 + gamma) * . + beta with style = [gamma | beta],
// 2*Channels floats (AdaIN1d's fc(s) before torch.chunk; nil for a plain
// InstanceNorm1d). y may be x.
func AdaIN1D(c *gpu.Chain, x, style, w, b, y *gpu.Buffer, a AudioNormArgs) error {
	if err := audioNormCheck("adain1d", x, style, w, b, y, a); err != nil {
		return err
	}
	return audioNorm(c, "adain1d", gpu.Grid(a.Channels, 1), x, style, w, b, y, a)
}

// ChannelLayerNorm appends a LayerNorm over the channels of each time step
// of x [Channels][Length] (torch's F.layer_norm on x.transpose(1, -1), as
// Kokoro's text-encoder LayerNorm does), with optional w, b, then, if style
// = [gamma | beta] is given, (1 + gamma) * . + beta (Kokoro's AdaLayerNorm,
// which has no w, b). y may be x.
func ChannelLayerNorm(c *gpu.Chain, x, w, b, style, y *gpu.Buffer, a AudioNormArgs) error {
	if err := audioNormCheck("channel_layernorm", x, style, w, b, y, a); err != nil {
		return err
	}
	return audioNorm(c, "channel_layernorm", gpu.Grid(a.Length, wg), x, style, w, b, y, a)
}

func audioNormCheck(kernel string, x, style, w, b, y *gpu.Buffer, a AudioNormArgs) error {
	if a.Channels <= 0 || a.Length <= 0 {
		return fmt.Errorf("ops: %s: shape %dx%d must be positive", kernel, a.Channels, a.Length)
	}
	if !(a.Eps >= 0) || math.IsInf(float64(a.Eps), 0) {
		return fmt.Errorf("ops: %s: eps %v must be finite and >= 0", kernel, a.Eps)
	}
	n := a.Channels * a.Length
	if err := checkSizes(kernel, operand{"x", x, n}, operand{"y", y, n}); err != nil {
		return err
	}
	for _, o := range []operand{{"style", style, 2 * a.Channels}, {"weight", w, a.Channels}, {"bias", b, a.Channels}} {
		if o.buf == nil {
			continue
		}
		if err := needF32(kernel, o.what, o.buf, o.n); err != nil {
			return err
		}
		if o.buf == y {
			return fmt.Errorf("ops: %s: y %q must not be the %s", kernel, y.Label(), o.what)
		}
	}
	return nil
}

func audioNorm(c *gpu.Chain, entry string, grid [3]uint32, x, style, w, b, y *gpu.Buffer, a AudioNormArgs) error {
	var flags uint32
	fill := func(buf *gpu.Buffer, flag uint32) *gpu.Buffer {
		if buf == nil {
			return x
		}
		flags |= flag
		return buf
	}
	w, b, style = fill(w, audioNormWeight), fill(b, audioNormBias), fill(style, audioNormStyle)
	p := audioNormParams{Channels: uint32(a.Channels), T: uint32(a.Length), Eps: a.Eps, Flags: flags}
	return dispatch(c, gpu.Spec("audio_norm", entry, "WG", wg), p, grid, x, w, b, style, y)
}
