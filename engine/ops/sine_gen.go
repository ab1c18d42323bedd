package ops

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// SineGenArgs are the settings of Kokoro's harmonic source: the generator's
// f0_upsamp (nearest, factor Upsample) followed by SineGen(sampling_rate,
// upsample_scale=Upsample, harmonic_num=Harmonics-1, sine_amp, noise_std,
// voiced_threshold). Kokoro: Upsample = prod(upsample_rates) *
// gen_istft_hop_size = 10*6*5 = 300, Harmonics 9, SampleRate 24000, SineAmp
// 0.1, NoiseStd 0.003, VoicedThreshold 10.
type SineGenArgs struct {
	Frames          int // f0 values, before upsampling
	Upsample        int
	Harmonics       int
	SampleRate      float32
	SineAmp         float32
	NoiseStd        float32
	VoicedThreshold float32
}

// Samples is the output length, Frames * Upsample.
func (a SineGenArgs) Samples() int { return a.Frames * a.Upsample }

// downFrames is F.interpolate(scale_factor=1/U)'s output length, computed as
// torch does: the input length times the double 1/U, truncated.
func (a SineGenArgs) downFrames() int {
	return int(float64(a.Samples()) * (1 / float64(a.Upsample)))
}

// ScratchFloats is the size of the scratch buffer SineGen needs: a phase
// and a rate per harmonic and frame.
func (a SineGenArgs) ScratchFloats() int { return 2 * a.Harmonics * a.downFrames() }

// sineGenParams mirrors Params in shaders/sine_gen.wgsl.
type sineGenParams struct {
	Frames, Up, Harmonics, Td uint32
	Samples, Flags            uint32
	SR, SineAmp, NoiseStd     float32
	Threshold                 float32
	RatioDown, RatioUp        float32
	// Zero is 0: the shader xors rounded products with it so no compiler
	// fuses them into multiply-adds (see rounded in sine_gen.wgsl).
	Zero uint32
	_    [3]uint32
}

const (
	sineInit  = 1
	sineNoise = 2
)

// SineGen appends the sine waves of Kokoro's SineGen (forward's
// sine_waves, before SourceModuleHnNSF's l_linear and tanh, which are a
// Conv1D of kernel 1 from Harmonics channels to 1 and Tanh) for the
// frame-rate f0 (Frames floats): y is [Harmonics][Samples].
//
// initPhase is rand_ini, Harmonics floats in [0, 1) with [0] = 0 as torch
// draws it, or nil for zeros; noise is torch.randn_like(sine_waves),
// [Harmonics][Samples] floats, or nil for none. Both nil is the
// deterministic mode the parity tests and the PyTorch comparison use (with
// Kokoro's U = 300 rand_ini does not reach the output anyway: the
// downsampling interpolation never weights sample 0). scratch holds
// a.ScratchFloats() floats. U must be at most 4096 (see sine_gen.wgsl).
func SineGen(c *gpu.Chain, f0, initPhase, noise, scratch, y *gpu.Buffer, a SineGenArgs) error {
	const kernel = "sine_gen"
	if a.Frames <= 0 || a.Upsample <= 0 || a.Harmonics <= 0 {
		return fmt.Errorf("ops: %s: frames %d, upsample %d, harmonics %d must be positive", kernel, a.Frames, a.Upsample, a.Harmonics)
	}
	if a.Upsample > 4096 {
		return fmt.Errorf("ops: %s: upsample %d over 4096 loses the exact phase increment", kernel, a.Upsample)
	}
	for _, v := range []float32{a.SampleRate, a.SineAmp, a.NoiseStd, a.VoicedThreshold} {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("ops: %s: settings %+v must be finite", kernel, a)
		}
	}
	if !(a.SampleRate > 0) {
		return fmt.Errorf("ops: %s: sample rate %v must be positive", kernel, a.SampleRate)
	}
	td := a.downFrames()
	if td <= 0 || td*a.Upsample != a.Samples() {
		// torch would fail the same way: sine_waves * uv needs equal lengths.
		return fmt.Errorf("ops: %s: %d samples downsample to %d frames, which do not upsample back", kernel, a.Samples(), td)
	}
	n := a.Harmonics * a.Samples()
	if err := checkSizes(kernel, operand{"f0", f0, a.Frames}, operand{"scratch", scratch, a.ScratchFloats()}, operand{"y", y, n}); err != nil {
		return err
	}
	var flags uint32
	if initPhase != nil {
		if err := needF32(kernel, "initial phase", initPhase, a.Harmonics); err != nil {
			return err
		}
		flags |= sineInit
	} else {
		initPhase = f0
	}
	if noise != nil {
		if err := needF32(kernel, "noise", noise, n); err != nil {
			return err
		}
		flags |= sineNoise
	} else {
		noise = f0
	}
	for _, b := range []*gpu.Buffer{f0, initPhase, noise} {
		if b == scratch || b == y {
			return fmt.Errorf("ops: %s: inputs must be other buffers than scratch and y", kernel)
		}
	}
	if scratch == y {
		return fmt.Errorf("ops: %s: scratch must be another buffer than y", kernel)
	}
	p := sineGenParams{
		Frames: uint32(a.Frames), Up: uint32(a.Upsample), Harmonics: uint32(a.Harmonics), Td: uint32(td),
		Samples: uint32(a.Samples()), Flags: flags,
		SR: a.SampleRate, SineAmp: a.SineAmp, NoiseStd: a.NoiseStd, Threshold: a.VoicedThreshold,
		// torch's scales: 1/scale_factor in double, then f32.
		RatioDown: float32(1 / (1 / float64(a.Upsample))), RatioUp: float32(1 / float64(a.Upsample)),
	}
	if err := dispatch(c, gpu.Spec("sine_gen", "sine_phase", "WG", wg), p, [3]uint32{uint32(a.Harmonics), 1, 1}, f0, initPhase, noise, scratch, y); err != nil {
		return err
	}
	return dispatch(c, gpu.Spec("sine_gen", "sine_gen", "WG", wg), p, gpu.Grid(n, wg), f0, initPhase, noise, scratch, y)
}
