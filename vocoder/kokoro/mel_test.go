package kokoro

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// tone is amp·sin(2π f t) at rate, n samples, plus phase.
func tone(n, rate int, f, amp, phase float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(amp * math.Sin(2*math.Pi*f*float64(i)/float64(rate)+phase))
	}
	return x
}

// TestLogMelMatchesDirectSTFT checks the FFT, the framing and the
// filterbank against engine/ops/ref's direct-DFT torch.stft on a short
// signal whose length is not a multiple of the hop.
func TestLogMelMatchesDirectSTFT(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, 1700)
	for i := range x {
		x[i] = float32(0.3*math.Sin(float64(i)*0.05) + 0.05*rng.NormFloat64())
	}
	got, frames, err := LogMel(x)
	if err != nil {
		t.Fatal(err)
	}
	if frames != 1+1700/300 || len(got) != MelBins*frames {
		t.Fatalf("%d frames, %d values; want %d frames", frames, len(got), 1+1700/300)
	}
	spec := ref.STFT(x, ref.PadWindow(ref.HannWindow(melWindow), melNFFT), melHop)
	fb := melFilterbank()
	worst := 0.0
	for m, filt := range fb {
		for tt := range frames {
			s := 0.0
			for k, w := range filt.w {
				c := spec[filt.lo+k][tt]
				s += w * (real(c)*real(c) + imag(c)*imag(c))
			}
			want := (math.Log(1e-5+s) + 4) / 4
			worst = math.Max(worst, math.Abs(want-float64(got[m*frames+tt])))
		}
	}
	// Both are float64 transforms of the same f32 window and samples; what
	// is left is the FFT's own rounding against the direct sum (~1e-13
	// relative) and the one rounding of the result to f32 (values up to
	// ~3: 2e-7).
	if worst > 1e-6 {
		t.Errorf("LogMel differs from the direct STFT by %g", worst)
	}
}

// TestMelFilterbank checks torchaudio's melscale_fbanks(1025, 0, 8000, 80,
// 16000) properties: triangles of peak at most 1 tiling the bins, the
// first starting at bin 1, the last ending at the top bin (8000 "Hz").
func TestMelFilterbank(t *testing.T) {
	fb := melFilterbank()
	if len(fb) != MelBins {
		t.Fatalf("%d filters", len(fb))
	}
	for m, f := range fb {
		peak := 0.0
		for _, w := range f.w {
			if w <= 0 || w > 1 {
				t.Fatalf("filter %d: weight %g outside (0, 1]", m, w)
			}
			peak = math.Max(peak, w)
		}
		// The bins are 7.8 "Hz" apart and the narrowest triangle is ~2
		// bins wide at the bottom, so every peak is sampled above 0.5.
		if peak < 0.5 {
			t.Errorf("filter %d: peak %g", m, peak)
		}
		if m > 0 && f.lo < fb[m-1].lo {
			t.Errorf("filter %d starts at bin %d, before filter %d's %d", m, f.lo, m-1, fb[m-1].lo)
		}
	}
	// Filter 0 rises from 0 Hz: bin 0 has weight 0, bin 1 is its first.
	if fb[0].lo != 1 {
		t.Errorf("filter 0 starts at bin %d, want 1", fb[0].lo)
	}
	last := fb[MelBins-1]
	if end := last.lo + len(last.w); end != melNFFT/2 {
		t.Errorf("the last filter ends before bin %d, want %d (the top bin has weight 0)", end, melNFFT/2)
	}
	// Bin 512 is 4000 "Hz" = 2146.1 mel, which is m = 2146.1/2840.0*81 =
	// 61.2 points up the scale: filters 60 (falling) and 61 (rising) hold it.
	var holders []int
	for m, f := range fb {
		if 512 >= f.lo && 512 < f.lo+len(f.w) {
			holders = append(holders, m)
		}
	}
	if len(holders) != 2 || holders[0] != 60 {
		t.Errorf("bin 512 is in filters %v, want [60 61]", holders)
	}
}

func TestLogMelErrors(t *testing.T) {
	if _, _, err := LogMel(make([]float32, 1024)); err == nil {
		t.Error("1024 samples: no error (reflect padding of 1024 needs more)")
	}
	x := make([]float32, 2000)
	x[7] = float32(math.NaN())
	if _, _, err := LogMel(x); err == nil || !strings.Contains(err.Error(), "sample 7") {
		t.Errorf("NaN sample: %v", err)
	}
	// Silence is the log floor: (log(1e-5) + 4) / 4 = -1.878.
	m, _, err := LogMel(make([]float32, 2000))
	if err != nil {
		t.Fatal(err)
	}
	want := float32((math.Log(1e-5) + 4) / 4)
	for i, v := range m {
		if v != want {
			t.Fatalf("silence: value %d is %g, want %g", i, v, want)
		}
	}
}

// TestResampleTone resamples sines between the rates recordings come at
// and compares with the sine sampled at 24 kHz directly, away from the
// ends (where the filter runs into the zeros beyond the signal).
func TestResampleTone(t *testing.T) {
	for _, tc := range []struct {
		from int
		f    float64
	}{
		{44100, 1000}, {48000, 3000}, {16000, 440}, {22050, 5000}, {8000, 300},
		{44101, 1000}, // a reduced ratio of 24000 phases: taps computed as it goes
		{32000, 9000},
	} {
		x := tone(tc.from/4, tc.from, tc.f, 0.5, 0.3)
		y, err := Resample(x, tc.from, MelRate)
		if err != nil {
			t.Fatal(err)
		}
		if want := int(math.Ceil(float64(len(x)) * MelRate / float64(tc.from))); len(y) != want {
			t.Errorf("%d Hz: %d samples, want %d", tc.from, len(y), want)
		}
		ideal := tone(len(y), MelRate, tc.f, 0.5, 0.3)
		worst := 0.0
		for i := 400; i < len(y)-400; i++ {
			worst = math.Max(worst, math.Abs(float64(y[i]-ideal[i])))
		}
		t.Logf("%d Hz → 24 kHz, %g Hz tone: worst error %.3g", tc.from, tc.f, worst)
		// The pass band is flat to 0.85 of the lower Nyquist, with the
		// Kaiser design's ripple of δ = 1e-4 (−80 dB) at most: 5e-5 of a
		// 0.5 sine, doubled for the window's sampling (measured: 1.2e-5).
		if worst > 1e-4 {
			t.Errorf("%d Hz → 24 kHz, %g Hz tone: off by %g", tc.from, tc.f, worst)
		}
	}
}

// TestResampleRejectsAliases: a 20 kHz tone at 48 kHz lies above the 12
// kHz output Nyquist and would fold to 4 kHz; the filter must remove it.
func TestResampleRejectsAliases(t *testing.T) {
	x := tone(12000, 48000, 20000, 0.5, 0)
	y, err := Resample(x, 48000, MelRate)
	if err != nil {
		t.Fatal(err)
	}
	peak := 0.0
	for _, v := range y[300 : len(y)-300] {
		peak = math.Max(peak, math.Abs(float64(v)))
	}
	t.Logf("20 kHz at 48 kHz leaks %.1f dB", 20*math.Log10(peak/0.5))
	// The design's stop band is −80 dB from the output Nyquist up
	// (measured: −113 dB at 20 kHz, deep in it).
	if peak > 0.5*math.Pow(10, -80.0/20) {
		t.Errorf("a 20 kHz tone leaks through at %g (%.1f dB)", peak, 20*math.Log10(peak/0.5))
	}
	same, _ := Resample(x, 24000, 24000)
	if len(same) != len(x) || same[5] != x[5] {
		t.Error("24 kHz → 24 kHz is not a copy")
	}
	for _, r := range [][2]int{{0, 24000}, {24000, -1}, {1 << 21, 24000}} {
		if _, err := Resample(x, r[0], r[1]); err == nil {
			t.Errorf("rates %v: no error", r)
		}
	}
}

func TestTrimSilence(t *testing.T) {
	x := make([]float32, 24000)
	copy(x[8000:16000], tone(8000, 24000, 200, 0.5, 0))
	y, start, end := TrimSilence(x)
	// librosa's frames are 2048 wide every 512, centred: the first frame
	// that reaches the tone within 30 dB is the one centred ~1024 before
	// it (its last 1024 samples overlap), so start is 8000-1024 rounded
	// down to the hop, give or take a frame; likewise end.
	if start < 8000-1536 || start > 8000 || start%512 != 0 {
		t.Errorf("start %d, want a multiple of 512 in [%d, 8000]", start, 8000-1536)
	}
	if end < 16000 || end > 16000+1536 {
		t.Errorf("end %d, want in [16000, %d]", end, 16000+1536)
	}
	if len(y) != end-start {
		t.Errorf("%d samples for [%d, %d)", len(y), start, end)
	}
	if y, s, e := TrimSilence(make([]float32, 5000)); len(y) != 5000 || s != 0 || e != 5000 {
		// librosa: all frames at the amin floor are 0 dB from the max, so
		// all silence is kept whole.
		t.Errorf("all zeros: kept [%d, %d) of 5000", s, e)
	}
}

func TestPrepareReference(t *testing.T) {
	// Exactly MinStyleSamples of steady sound: nothing trimmed (the edge
	// frames are half empty, −3 dB), 65 frames.
	_, frames, err := PrepareReference(tone(MinStyleSamples, MelRate, 220, 0.3, 0), MelRate)
	if err != nil || frames != MinStyleFrames {
		t.Fatalf("%d samples: %d frames, %v; want %d", MinStyleSamples, frames, err, MinStyleFrames)
	}
	if _, _, err := PrepareReference(tone(MinStyleSamples-1, MelRate, 220, 0.3, 0), MelRate); err == nil || !strings.Contains(err.Error(), "at least 0.80 s") {
		t.Errorf("one sample short: %v", err)
	}
	// 0.5 s of a 1 s recording is sound: too short once trimmed.
	x := make([]float32, 44100)
	copy(x[10000:], tone(22050, 44100, 300, 0.5, 0))
	if _, _, err := PrepareReference(x, 44100); err == nil || !strings.Contains(err.Error(), "after trimming") {
		t.Errorf("0.5 s of sound: %v", err)
	}
	if _, _, err := PrepareReference(make([]float32, 48000), 24000); !errors.Is(err, ErrSilence) {
		t.Errorf("silence: %v", err)
	}
	if _, _, err := PrepareReference(tone(48000, 24000, 300, 1e-4, 0), 24000); !errors.Is(err, ErrSilence) {
		t.Errorf("−80 dBFS: %v", err)
	}
	if _, _, err := PrepareReference(nil, 24000); err == nil {
		t.Error("no samples: no error")
	}
	bad := tone(48000, 24000, 300, 0.5, 0)
	bad[100] = float32(math.Inf(1))
	if _, _, err := PrepareReference(bad, 24000); err == nil {
		t.Error("an infinite sample: no error")
	}
	// 40 s is cut to the first 30.
	long := tone(40*16000, 16000, 300, 0.5, 0)
	if _, frames, err := PrepareReference(long, 16000); err != nil || frames != MaxStyleFrames {
		t.Errorf("40 s: %d frames, %v; want %d", frames, err, MaxStyleFrames)
	}
}
