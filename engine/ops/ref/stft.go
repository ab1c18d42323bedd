package ref

import (
	"fmt"
	"math"
	"math/cmplx"
)

// HannWindow is torch.hann_window(n, periodic=True) in float32 as torch
// computes it (hamming_window with alpha = beta = 0.5):
// 0.5 - 0.5*cos(i * (2*pi/n)), each step rounded to f32.
func HannWindow(n int) []float32 {
	w := make([]float32, n)
	step := float32(2 * math.Pi / float64(n))
	for i := range w {
		arg := float32(i) * step
		c := float32(math.Cos(float64(arg)))
		w[i] = float32(float32(c*-0.5) + 0.5)
	}
	return w
}

// PadWindow zero-pads w on both sides to n, the left getting
// (n - len(w)) / 2, as torch.stft and torch.istft centre a window shorter
// than n_fft.
func PadWindow(w []float32, n int) []float32 {
	out := make([]float32, n)
	copy(out[(n-len(w))/2:], w)
	return out
}

// STFT is torch.stft(x, n_fft=len(window), hop, window=window, center=True,
// pad_mode='reflect', onesided=True, return_complex=True) of one signal,
// returned as [bins][frames] complex values. The DC and Nyquist bins get an
// exact zero imaginary part, as an FFT of real data returns. In float64.
func STFT(x []float32, window []float32, hop int) [][]complex128 {
	nfft := len(window)
	pad := nfft / 2
	xp := make([]float64, len(x)+2*pad)
	for i := range xp {
		xp[i] = float64(x[reflectIndex(i-pad, len(x))])
	}
	frames := 1 + (len(xp)-nfft)/hop
	bins := nfft/2 + 1
	out := make([][]complex128, bins)
	for f := range bins {
		out[f] = make([]complex128, frames)
		for m := range frames {
			var re, im float64
			for n := range nfft {
				v := float64(window[n]) * xp[m*hop+n]
				s, c := math.Sincos(2 * math.Pi * float64((f*n)%nfft) / float64(nfft))
				re += v * c
				im -= v * s
			}
			if f == 0 || 2*f == nfft {
				im = 0
			}
			out[f][m] = complex(re, im)
		}
	}
	return out
}

// STFTMagPhase is TorchSTFT.transform's torch.abs and torch.angle of STFT,
// concatenated along the bins as Kokoro's torch.cat([spec, phase], dim=1):
// [2*bins][frames]. angle is atan2(im, re), so a real negative bin is +pi.
func STFTMagPhase(x []float32, window []float32, hop int) []float32 {
	s := STFT(x, window, hop)
	bins, frames := len(s), len(s[0])
	y := make([]float32, 2*bins*frames)
	for f := range bins {
		for m, v := range s[f] {
			y[f*frames+m] = float32(cmplx.Abs(v))
			y[(bins+f)*frames+m] = float32(math.Atan2(imag(v), real(v)))
		}
	}
	return y
}

// CheckNOLA returns torch.istft's error when the overlap-added squared
// window of frames frames falls below 1e-11 anywhere in the trimmed output
// (center=True: n_fft/2 trimmed from each end).
//
// Past nolaFrames frames the envelope only repeats: its first and last
// n_fft samples stay as they were, and between them every sample has all
// its frames, a pattern of period hop that nolaFrames frames already hold
// in full. So the check stops there, and costs the same for a 38 s
// utterance (183 000 frames, ~7 ms of the H200 host's time when it walked
// them all) as for a word; its test compares it with the whole envelope.
func CheckNOLA(window []float32, hop, frames int) error {
	if hop > 0 {
		frames = min(frames, nolaFrames(len(window), hop))
	}
	env := envelope(window, hop, frames)
	nfft := len(window)
	for _, v := range env[nfft/2 : len(env)-nfft/2] {
		if math.Abs(v) < 1e-11 {
			return fmt.Errorf("window overlap add min %g below 1e-11 (hop %d, n_fft %d): not invertible", v, hop, nfft)
		}
	}
	return nil
}

// nolaFrames is how many frames hold every value of the envelope's
// interior: the samples with all their frames start at n_fft - 1 and must
// run for a whole period of hop, ceil(n_fft/hop) + 2 frames; twice that
// for margin.
func nolaFrames(nfft, hop int) int {
	return 2*((nfft+hop-1)/hop) + 2
}

func envelope(window []float32, hop, frames int) []float64 {
	nfft := len(window)
	env := make([]float64, nfft+hop*(frames-1))
	for m := range frames {
		for n, w := range window {
			env[m*hop+n] += float64(w) * float64(w)
		}
	}
	return env
}

// ISTFT is torch.istft(mag * exp(1j*phase), n_fft=len(window), hop,
// window=window, center=True, length=None) for mag and phase laid out
// [bins][frames], bins = n_fft/2 + 1: each frame's inverse real DFT
// (irfft, which ignores the imaginary parts of the DC and, for even n_fft,
// Nyquist bins), windowed and overlap-added, divided by the overlap-added
// squared window, n_fft/2 trimmed from both ends. In float64.
func ISTFT(mag, phase []float32, window []float32, hop, frames int) ([]float32, error) {
	nfft := len(window)
	if err := CheckNOLA(window, hop, frames); err != nil {
		return nil, err
	}
	bins := nfft/2 + 1
	full := make([]float64, nfft+hop*(frames-1))
	for m := range frames {
		x := make([]complex128, bins)
		for k := range bins {
			x[k] = cmplx.Rect(float64(mag[k*frames+m]), float64(phase[k*frames+m]))
		}
		for n := range nfft {
			v := real(x[0])
			if nfft%2 == 0 {
				v += real(x[bins-1]) * math.Cos(math.Pi*float64(n))
			}
			for k := 1; k <= (nfft-1)/2; k++ {
				s, c := math.Sincos(2 * math.Pi * float64((k*n)%nfft) / float64(nfft))
				v += 2 * (real(x[k])*c - imag(x[k])*s)
			}
			full[m*hop+n] += v / float64(nfft) * float64(window[n])
		}
	}
	env := envelope(window, hop, frames)
	y := make([]float32, len(full)-2*(nfft/2))
	for j := range y {
		y[j] = float32(full[j+nfft/2] / env[j+nfft/2])
	}
	return y, nil
}
