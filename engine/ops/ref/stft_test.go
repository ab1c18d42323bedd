package ref

import (
	"math"
	"testing"
)

// TestCheckNOLAStopsWithoutChangingTheAnswer compares CheckNOLA, which
// looks at no more than nolaFrames frames, with the minimum of the whole
// trimmed envelope for every frame count up to 80, on windows that pass
// (periodic Hann, as Kokoro's n_fft 20 / hop 5 and others) and windows
// that fail only somewhere (zeros at the edges or in the middle, a hop
// wider than the window's support).
func TestCheckNOLAStopsWithoutChangingTheAnswer(t *testing.T) {
	hann := func(n int) []float32 {
		w := make([]float32, n)
		for i := range w {
			w[i] = float32(0.5 - 0.5*math.Cos(2*math.Pi*float64(i)/float64(n)))
		}
		return w
	}
	holed := hann(16)
	holed[8] = 0 // a zero in the middle: covered only when hop < 8
	edges := []float32{0, 0, 1, 1, 1, 1, 0, 0}
	for _, tc := range []struct {
		name   string
		window []float32
		hop    int
	}{
		{"kokoro", hann(20), 5},
		{"hann16/4", hann(16), 4},
		{"hann16/16", hann(16), 16}, // every frame's ends are zero
		{"hann15/7", hann(15), 7},
		{"holed/8", holed, 8},
		{"holed/3", holed, 3},
		{"edges/4", edges, 4},
		{"edges/5", edges, 5},
		{"edges/2", edges, 2},
	} {
		for frames := 1; frames <= 80; frames++ {
			env := envelope(tc.window, tc.hop, frames)
			nfft := len(tc.window)
			ok := true
			for _, v := range env[nfft/2 : len(env)-nfft/2] {
				if math.Abs(v) < 1e-11 {
					ok = false
				}
			}
			if got := CheckNOLA(tc.window, tc.hop, frames) == nil; got != ok {
				t.Errorf("%s, %d frames: CheckNOLA passes = %v, the whole envelope says %v", tc.name, frames, got, ok)
			}
		}
	}
}
