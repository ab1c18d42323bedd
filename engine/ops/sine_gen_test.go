package ops

import (
	"math"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// kokoroSine is Kokoro's SourceModuleHnNSF setting.
var kokoroSine = SineGenArgs{Upsample: 300, Harmonics: 9, SampleRate: 24000, SineAmp: 0.1, NoiseStd: 0.003, VoicedThreshold: 10}

// sineGenTol is the allowed |GPU - reference| for td downsampled frames.
// The kernel and the reference share every f32 step up to rad_d (the GPU's
// division is corrected to round to nearest, as torch's), so they differ
// only in the phase, in cycles: the GPU's scan adds at most 1.2e-7 per
// frame (the fract of a sum in [0, 2); measured 6e-8 per frame over 800
// frames of a constant f0, where they add up coherently); the
// interpolation's U * rad_d, lambda * that and the sum with the frame's
// phase each round at up to 57 cycles (1.9e-6 each; measured 6.4e-6 in
// all); the final sin adds 6e-8 of output. Times 2*pi*sine_amp, plus the
// f32 rounding of the noise term.
func sineGenTol(a SineGenArgs, td int) float64 {
	cycles := 8e-6 + 1.2e-7*float64(td)
	return 2*math.Pi*float64(a.SineAmp)*cycles + 1e-7
}

func checkSineGen(t *testing.T, a SineGenArgs, f0, initPhase, noise []float32) {
	t.Helper()
	want, err := ref.SineGen(f0, initPhase, noise, ref.SineGenArgs{Frames: a.Frames, Upsample: a.Upsample, Harmonics: a.Harmonics,
		SampleRate: a.SampleRate, SineAmp: a.SineAmp, NoiseStd: a.NoiseStd, VoicedThreshold: a.VoicedThreshold})
	if err != nil {
		t.Fatal(err)
	}
	bf := upload(t, "f0", f0)
	bi, bn := uploadOrNil(t, "init", initPhase), uploadOrNil(t, "noise", noise)
	sc, y := scratch(t, "scratch", a.ScratchFloats()), scratch(t, "y", len(want))
	run(t, "sine_gen", func(c *gpu.Chain) error { return SineGen(c, bf, bi, bn, sc, y, a) })
	assertClose(t, "sine_gen", download(t, y, len(want)), want, sineGenTol(a, a.downFrames()), 0)
}

// speechF0 is f0 around base Hz with a slow glide, some frames unvoiced
// (0) and some just under and over Kokoro's threshold of 10.
func speechF0(seed uint64, frames int, base float32) []float32 {
	f0 := randVec(seed, frames, 0.3*base)
	for i := range f0 {
		f0[i] += base * (1 + 0.2*float32(math.Sin(float64(i)/7)))
		switch i % 17 {
		case 3, 4:
			f0[i] = 0
		case 9:
			f0[i] = 9.99
		case 10:
			f0[i] = 10.01
		}
	}
	return f0
}

func TestSineGenMatchesReference(t *testing.T) {
	for _, tc := range []struct {
		name             string
		frames, up, harm int
		init, noise      bool
	}{
		{"kokoro deterministic", 34, 300, 9, false, false}, // 10200 samples
		{"kokoro with rand_ini and noise", 7, 300, 9, true, true},
		{"U=1", 300, 1, 3, true, false}, // torch copies when sizes match
		{"U=2", 150, 2, 2, true, true},  // sample 0, with rand_ini, weighs 1/2
		{"U=3", 101, 3, 4, true, false}, // odd factor: lambda 0 downsampling
		{"U=7", 45, 7, 1, false, true},
		{"1 frame", 1, 300, 9, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := kokoroSine
			a.Frames, a.Upsample, a.Harmonics = tc.frames, tc.up, tc.harm
			f0 := speechF0(71, tc.frames, 180)
			var init, noise []float32
			if tc.init {
				init = randVec(72, tc.harm, 0.5)
				for i := range init {
					init[i] += 0.5
				}
				init[0] = 0 // torch zeroes the fundamental's
			}
			if tc.noise {
				noise = randVec(73, tc.harm*a.Samples(), 2)
			}
			checkSineGen(t, a, f0, init, noise)
		})
	}
}

func TestSineGenLongPhase(t *testing.T) {
	// Ten seconds of a constant 480 Hz, 800 frames: the 9th harmonic turns
	// 43200 cycles, where an f32 phase in radians would be off by 0.02 rad
	// and a naive f32 cumsum by more, growing with time. A constant f0 makes
	// every per-frame rounding the same, so errors add up coherently.
	a := kokoroSine
	a.Frames = 800
	f0 := make([]float32, a.Frames)
	for i := range f0 {
		f0[i] = 480
	}
	checkSineGen(t, a, f0, nil, nil)
	// And varying speech-like f0 up to ~500 Hz at full length.
	checkSineGen(t, a, speechF0(74, a.Frames, 350), nil, nil)
}

func TestSineGenRejectsBadShapes(t *testing.T) {
	a := kokoroSine
	a.Frames = 4
	f0, sc, y := scratch(t, "f0", 4), scratch(t, "sc", a.ScratchFloats()), scratch(t, "y", a.Harmonics*a.Samples())
	c, err := dev.NewChain("bad sine_gen")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	with := func(f func(a *SineGenArgs)) SineGenArgs { b := a; f(&b); return b }
	for i, err := range []error{
		SineGen(c, f0, nil, nil, sc, y, with(func(a *SineGenArgs) { a.Frames = 5 })),
		SineGen(c, f0, nil, nil, sc, y, with(func(a *SineGenArgs) { a.Upsample = 5000 })),
		SineGen(c, f0, nil, nil, sc, y, with(func(a *SineGenArgs) { a.SampleRate = 0 })),
		SineGen(c, f0, nil, nil, sc, y, with(func(a *SineGenArgs) { a.NoiseStd = float32(math.NaN()) })),
		SineGen(c, f0, scratch(t, "init", 2), nil, sc, y, a),
		SineGen(c, f0, nil, scratch(t, "noise", 10), sc, y, a),
		SineGen(c, f0, nil, nil, y, y, a),
		SineGen(c, f0, nil, nil, scratch(t, "short", 3), y, a),
	} {
		if err == nil {
			t.Errorf("case %d: accepted", i)
		}
	}
	if c.Err() != nil {
		t.Errorf("a rejected shape reached the chain: %v", c.Err())
	}
}
