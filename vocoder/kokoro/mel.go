package kokoro

import (
	"errors"
	"fmt"
	"math"
	"math/cmplx"

	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// StyleTTS2's reference-recording front end (meldataset.py's preprocess,
// also in its inference notebooks):
//
//	to_mel = torchaudio.transforms.MelSpectrogram(n_mels=80, n_fft=2048, win_length=1200, hop_length=300)
//	mel = (log(1e-5 + to_mel(wave)) - (-4)) / 4
//
// of 24 kHz audio. MelSpectrogram is left at its default sample_rate of
// 16000, so its filterbank spaces 82 HTK-mel points over 0–8000 "Hz" of
// the 1025 bins, which at 24 kHz are 0–12 kHz: the filters are 1.5 times
// wider than their nominal frequencies. That is what the style encoders
// were trained on, so it is what LogMel computes.
const (
	MelRate    = 24000 // the rate LogMel takes
	MelBins    = 80
	melNFFT    = 2048
	melWindow  = 1200
	melHop     = 300
	melFBRate  = 16000 // torchaudio's default sample_rate, which StyleTTS2 never sets
	melLogEps  = 1e-5
	melMean    = -4.0
	melStd     = 4.0
	melPadding = melNFFT / 2 // center=True
)

// MelFrames is the number of frames LogMel makes of n samples: torch.stft
// with center=True pads n_fft/2 on each side, so 1 + n/hop.
func MelFrames(n int) int { return 1 + n/melHop }

// LogMel is StyleTTS2's normalised log-mel spectrogram of 24 kHz mono
// samples, [MelBins][frames] row-major, with frames = MelFrames(len).
// The STFT is in float64 (a radix-2 FFT) and so is the filterbank, which
// torchaudio builds in float32; the fixture test bounds the difference.
// torch's reflect padding needs more than n_fft/2 samples.
func LogMel(samples []float32) ([]float32, int, error) {
	n := len(samples)
	if n <= melPadding {
		return nil, 0, fmt.Errorf("kokoro: mel: %d samples; the STFT's reflect padding needs more than %d", n, melPadding)
	}
	for i, x := range samples {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, 0, fmt.Errorf("kokoro: mel: sample %d is %g", i, x)
		}
	}
	frames := MelFrames(n)
	// torch.hann_window(1200) (periodic, in f32 as torch computes it),
	// centred in n_fft by zeros as torch.stft does for a shorter window.
	window := ref.PadWindow(ref.HannWindow(melWindow), melNFFT)
	fb := melFilterbank()
	fft := newMelFFT(melNFFT)
	out := make([]float32, MelBins*frames)
	buf := make([]complex128, melNFFT)
	power := make([]float64, melNFFT/2+1)
	for t := range frames {
		for i := range buf {
			j := melReflect(t*melHop+i-melPadding, n)
			buf[i] = complex(float64(window[i])*float64(samples[j]), 0)
		}
		fft.transform(buf)
		for f := range power {
			re, im := real(buf[f]), imag(buf[f])
			power[f] = re*re + im*im
		}
		for m, filt := range fb {
			s := 0.0
			for k, w := range filt.w {
				s += w * power[filt.lo+k]
			}
			out[m*frames+t] = float32((math.Log(melLogEps+s) - melMean) / melStd)
		}
	}
	return out, frames, nil
}

// melReflect maps i in [-n+1, 2n-2] onto [0, n) by reflection without
// repeating the edge, as F.pad(mode='reflect').
func melReflect(i, n int) int {
	if i < 0 {
		i = -i
	}
	if i >= n {
		i = 2*(n-1) - i
	}
	return i
}

// A melFilter is one triangle of the filterbank: weights w for the bins
// lo, lo+1, …, the rest zero.
type melFilter struct {
	lo int
	w  []float64
}

// melFilterbank is torchaudio.functional.melscale_fbanks(n_freqs=1025,
// f_min=0, f_max=8000, n_mels=80, sample_rate=16000, norm=None,
// mel_scale='htk'): bin f at f*8000/1024 "Hz", 82 points equally spaced
// in mel (2595 log10(1 + f/700)) from 0 to 8000, each filter the
// triangle max(0, min(down, up)) rising from point m to m+1 and falling
// to m+2, peak 1 (no area norm).
func melFilterbank() []melFilter {
	nFreqs := melNFFT/2 + 1
	top := float64(melFBRate / 2)
	hzToMel := func(f float64) float64 { return 2595 * math.Log10(1+f/700) }
	melToHz := func(m float64) float64 { return 700 * (math.Pow(10, m/2595) - 1) }
	mMax := hzToMel(top)
	pts := make([]float64, MelBins+2)
	for i := range pts {
		pts[i] = melToHz(mMax * float64(i) / float64(MelBins+1))
	}
	fb := make([]melFilter, MelBins)
	for m := range fb {
		var filt melFilter
		for f := range nFreqs {
			hz := top * float64(f) / float64(nFreqs-1)
			down := (hz - pts[m]) / (pts[m+1] - pts[m])
			up := (pts[m+2] - hz) / (pts[m+2] - pts[m+1])
			w := math.Max(0, math.Min(down, up))
			if w == 0 {
				if filt.w != nil {
					break // past the triangle
				}
				continue
			}
			if filt.w == nil {
				filt.lo = f
			}
			filt.w = append(filt.w, w)
		}
		fb[m] = filt
	}
	return fb
}

// melFFT is an in-place iterative radix-2 complex FFT of one power-of-two
// size (LogMel's 2048), in float64.
type melFFT struct {
	n       int
	twiddle []complex128 // e^{-2πik/n}, k < n/2
	rev     []int        // bit reversal permutation
}

func newMelFFT(n int) *melFFT {
	f := &melFFT{n: n, twiddle: make([]complex128, n/2), rev: make([]int, n)}
	for k := range f.twiddle {
		f.twiddle[k] = cmplx.Rect(1, -2*math.Pi*float64(k)/float64(n))
	}
	bits := 0
	for 1<<bits < n {
		bits++
	}
	for i := range f.rev {
		r := 0
		for b := range bits {
			if i&(1<<b) != 0 {
				r |= 1 << (bits - 1 - b)
			}
		}
		f.rev[i] = r
	}
	return f
}

func (f *melFFT) transform(x []complex128) {
	for i, r := range f.rev {
		if i < r {
			x[i], x[r] = x[r], x[i]
		}
	}
	for size := 2; size <= f.n; size <<= 1 {
		half, step := size/2, f.n/size
		for start := 0; start < f.n; start += size {
			for k := range half {
				t := f.twiddle[k*step] * x[start+k+half]
				x[start+k+half] = x[start+k] - t
				x[start+k] += t
			}
		}
	}
}

// Resampling. StyleTTS2's notebook loads a reference with
// librosa.load(path, sr=24000), which resamples with soxr; Resample is a
// windowed-sinc band-limited interpolator of the same kind.
//
// The filter: a sinc cut off at fc, under a Kaiser window of β = 7.857,
// which is Kaiser's formula 0.1102·(A − 8.7) for A = 80 dB of stop-band
// attenuation, spanning resampleZeros zero crossings each side. Kaiser's
// estimate of the transition width for that length, Δf = (A − 8)/(2.285 ·
// 2π · N) with N = 2·resampleZeros/(2fc) taps, is 0.157·fc; fc is put at
// 0.927 of the lower of the two Nyquist frequencies so that fc + Δf/2 lands
// on it: nothing above the output's Nyquist folds back louder than −80 dB
// (below a 16-bit recording's own noise floor of −96 dBFS by little, and
// far below the mel's 1e-5 floor), and the pass band is flat to 0.85 of
// it (10.2 kHz at 24 kHz).
const (
	resampleZeros  = 32
	resampleBeta   = 7.857
	resampleCutoff = 0.927
	// resamplePhases bounds the filter table: a rate whose reduced ratio
	// to 24000 has more phases (44101 Hz) computes each tap as it goes.
	resamplePhases = 4096
)

// Resample converts mono samples from rate `from` to rate `to` Hz. The
// output has ceil(len·to/from) samples; sample n is the input
// band-limited and read at time n·from/to, zeros beyond the ends.
func Resample(x []float32, from, to int) ([]float32, error) {
	if from <= 0 || to <= 0 || from > 1<<20 || to > 1<<20 {
		return nil, fmt.Errorf("kokoro: resample: rates %d → %d Hz must be positive and at most %d", from, to, 1<<20)
	}
	if from == to {
		return append([]float32(nil), x...), nil
	}
	g := resampleGCD(from, to)
	up, down := to/g, from/g // output n reads the input at n·down/up
	outLen := int((int64(len(x))*int64(to) + int64(from) - 1) / int64(from))
	// Cut-off in cycles per input sample.
	fc := resampleCutoff * 0.5 * math.Min(1, float64(to)/float64(from))
	half := float64(resampleZeros) / (2 * fc) // the filter's half-width, input samples
	taps := 2*int(math.Ceil(half)) + 1
	kernel := func(d float64) float64 { // d = input index − read time
		if math.Abs(d) >= half {
			return 0
		}
		r := d / half
		return 2 * fc * resampleSinc(2*fc*d) * kaiserI0(resampleBeta*math.Sqrt(1-r*r)) / kaiserI0(resampleBeta)
	}
	var table [][]float64 // [phase][tap]: the weights of inputs k0-taps/2 … for frac = phase/up
	if up <= resamplePhases {
		table = make([][]float64, up)
		for p := range table {
			frac := float64(p) / float64(up)
			row := make([]float64, taps)
			for j := range row {
				row[j] = kernel(float64(j-taps/2) - frac)
			}
			table[p] = row
		}
	}
	out := make([]float32, outLen)
	row := make([]float64, taps)
	for n := range out {
		pos := int64(n) * int64(down)
		k0, p := int(pos/int64(up)), int(pos%int64(up))
		w := row
		if table != nil {
			w = table[p]
		} else {
			frac := float64(p) / float64(up)
			for j := range row {
				row[j] = kernel(float64(j-taps/2) - frac)
			}
		}
		s := 0.0
		for j, wj := range w {
			k := k0 + j - taps/2
			if k >= 0 && k < len(x) {
				s += wj * float64(x[k])
			}
		}
		out[n] = float32(s)
	}
	return out, nil
}

func resampleGCD(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func resampleSinc(x float64) float64 {
	if x == 0 {
		return 1
	}
	return math.Sin(math.Pi*x) / (math.Pi * x)
}

// kaiserI0 is the modified Bessel function of the first kind, order 0, by
// its power series Σ ((x/2)^k / k!)², which for the window's x ≤ 8 has
// converged to double precision by k = 30.
func kaiserI0(x float64) float64 {
	sum, term := 1.0, 1.0
	q := x * x / 4
	for k := 1; k < 60; k++ {
		term *= q / float64(k*k)
		sum += term
		if term < sum*1e-17 {
			break
		}
	}
	return sum
}

// Trimming. The notebook's compute_style trims the reference with
// librosa.effects.trim(wave, top_db=30) before the mel: the style
// encoders average over every frame, so leading and trailing silence
// would dilute the voice.
const (
	trimTopDB  = 30
	trimFrame  = 2048 // librosa.effects.trim's frame_length
	trimHop    = 512  // and hop_length
	trimAmin   = 1e-5 // amplitude_to_db's floor
	trimMinDBF = -60  // a recording whose peak is below −60 dBFS is silence
)

// TrimSilence is librosa.effects.trim(y, top_db=30): frames of 2048
// samples every 512 (centred, zero padded, as librosa.feature.rms) whose
// RMS is within 30 dB of the loudest frame's are sound; it returns the
// samples from the first sound frame's start to the last one's end
// (frame·512 to (frame+1)·512, at most len), and those bounds.
func TrimSilence(x []float32) (trimmed []float32, start, end int) {
	if len(x) == 0 {
		return x, 0, 0
	}
	frames := 1 + len(x)/trimHop
	rms := make([]float64, frames)
	maxRMS := 0.0
	for t := range frames {
		s := 0.0
		for i := t*trimHop - trimFrame/2; i < t*trimHop+trimFrame/2; i++ {
			if i >= 0 && i < len(x) {
				s += float64(x[i]) * float64(x[i])
			}
		}
		rms[t] = math.Sqrt(s / trimFrame)
		maxRMS = math.Max(maxRMS, rms[t])
	}
	ref := 20 * math.Log10(math.Max(trimAmin, maxRMS))
	first, last := -1, -1
	for t, r := range rms {
		if 20*math.Log10(math.Max(trimAmin, r))-ref > -trimTopDB {
			if first < 0 {
				first = t
			}
			last = t
		}
	}
	if first < 0 {
		return x[:0], 0, 0
	}
	start, end = first*trimHop, min(len(x), (last+1)*trimHop)
	return x[start:end], start, end
}

// ErrSilence is wrapped by the error for a recording with no sound in it.
var ErrSilence = errors.New("the recording is silent")

// PrepareReference turns a recording at any rate into what the style
// encoders take, as the notebook's compute_style does: resampled to 24
// kHz, trimmed of silence (TrimSilence), as its log-mel (LogMel). It
// refuses silence and a recording too short for the encoders, and keeps
// the first 30 s of a longer one (MaxStyleFrames).
func PrepareReference(samples []float32, rate int) (mel []float32, frames int, err error) {
	peak := 0.0
	for i, x := range samples {
		v := math.Abs(float64(x))
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, 0, fmt.Errorf("kokoro: reference: sample %d is %g", i, x)
		}
		peak = math.Max(peak, v)
	}
	if len(samples) == 0 {
		return nil, 0, errors.New("kokoro: reference: no samples")
	}
	if peak < math.Pow(10, trimMinDBF/20.0) {
		return nil, 0, fmt.Errorf("kokoro: reference: %w (peak %.1f dBFS, below %d)", ErrSilence, 20*math.Log10(math.Max(peak, 1e-12)), trimMinDBF)
	}
	x, err := Resample(samples, rate, MelRate)
	if err != nil {
		return nil, 0, err
	}
	x, _, _ = TrimSilence(x)
	if n := (MaxStyleFrames - 1) * melHop; len(x) > n {
		x = x[:n]
	}
	if len(x) < MinStyleSamples {
		return nil, 0, fmt.Errorf("kokoro: reference: %.2f s of sound after trimming silence; the style encoder needs at least %.2f s (%d frames of %d samples at %d Hz)",
			float64(len(x))/MelRate, float64(MinStyleSamples)/MelRate, MinStyleFrames, melHop, MelRate)
	}
	return LogMel(x)
}
