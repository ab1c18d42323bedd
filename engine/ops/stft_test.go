package ops

import (
	"fmt"
	"math"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// Tolerances of the STFT pair against float64.
//
// stft: each bin sums n_fft windowed products in f32 against twiddles
// rounded to f32: measured within 1.8e-7 of sum |w x| (the bound). The angle
// is compared as an angle, wrapped at +-pi: its error is X's rounding
// divided by |X| (the conditioning of torch.angle itself, which no
// reference removes) plus atan2's own (6e-8 on lavapipe), so it is allowed
// stftMagRel * bound / |X| + stftPhaseATol; bins below 1e-3 of the bound
// are skipped, their angle being mostly rounding in torch as well.
//
// istft: each sample adds n_fft/hop frames of bins terms, a magnitude
// times cos/sin of its phase and of a table angle, then divides by the
// window envelope (1.25..1.5 for hann 20/5): measured 6.5e-8 per unit of
// the largest magnitude.
const (
	stftMagRel     = 1e-6
	stftPhaseATol  = 3e-7 // radians
	stftPhaseFloor = 1e-3
	istftATol      = 5e-7 // per unit of the largest magnitude
)

func newPlan(t testing.TB, nfft, hop, win int) *STFTPlan {
	t.Helper()
	p, err := NewSTFTPlan(dev, nfft, hop, win)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Release)
	return p
}

func checkSTFT(t *testing.T, seed uint64, nfft, hop, win, length int, scale float32) {
	t.Helper()
	p := newPlan(t, nfft, hop, win)
	x := randVec(seed, length, scale)
	window := ref.PadWindow(ref.HannWindow(win), nfft)
	want := ref.STFTMagPhase(x, window, hop)
	bins, frames := p.Bins(), p.Frames(length)
	// The bound of every bin of frame m is sum |w x|: the DC magnitude of
	// the transform of |x| with |w|.
	absDC := ref.STFTMagPhase(absVec(x), absVec(window), hop)[:frames]
	bound := make([]float32, bins*frames)
	for i := range bound {
		bound[i] = absDC[i%frames]
	}
	if len(want) != 2*bins*frames {
		t.Fatalf("reference has %d values, plan says %d bins x %d frames", len(want), bins, frames)
	}
	bx, y := upload(t, "x", x), scratch(t, "y", len(want))
	run(t, "stft", func(c *gpu.Chain) error { return p.STFT(c, bx, y, length) })
	got := download(t, y, len(want))
	plane := bins * frames
	assertWithinBound(t, "stft magnitude", got[:plane], want[:plane], bound[:plane], stftMagRel)
	for i := range plane {
		g, w := float64(got[plane+i]), float64(want[plane+i])
		f := i / frames
		if f == 0 || 2*f == nfft {
			// Real bins: exactly 0 or pi, as torch.angle of an FFT's +0i.
			if g != w && !(math.Abs(w) < 1e-30 && g == 0) {
				t.Fatalf("stft phase of real bin %d frame %d = %v, want %v", f, i%frames, g, w)
			}
			continue
		}
		if float64(want[i]) < stftPhaseFloor*float64(bound[i]) {
			continue
		}
		d := math.Abs(g - w)
		d = math.Min(d, 2*math.Pi-d)
		if d > stftPhaseATol+stftMagRel*float64(bound[i])/float64(want[i]) {
			t.Fatalf("stft phase bin %d frame %d = %v, want %v (|X| %.3g of bound %.3g)", f, i%frames, g, w, want[i], bound[i])
		}
	}
}

func TestSTFTMatchesReference(t *testing.T) {
	for _, tc := range []struct{ nfft, hop, win, length int }{
		{20, 5, 20, 11}, // Kokoro's TorchSTFT, the shortest signal reflect padding allows
		{20, 5, 20, 1001},
		{20, 5, 20, 12000}, // half a second at 24 kHz
		{16, 4, 12, 257},   // a window shorter than n_fft, centred
		{15, 4, 15, 300},   // odd n_fft: no Nyquist bin
		{8, 3, 8, 40},
	} {
		t.Run(fmt.Sprintf("n%d/h%d/w%d/L%d", tc.nfft, tc.hop, tc.win, tc.length), func(t *testing.T) {
			checkSTFT(t, 61, tc.nfft, tc.hop, tc.win, tc.length, 1)
		})
	}
}

func TestSTFTWideMagnitude(t *testing.T) {
	checkSTFT(t, 62, 20, 5, 20, 999, 3e4)
	// A signal with a strong DC offset: the DC bin's real part is large and
	// negative, and its angle must be exactly +pi.
	p := newPlan(t, 20, 5, 20)
	x := randVec(63, 200, 0.1)
	for i := range x {
		x[i] -= 1
	}
	window := ref.HannWindow(20)
	want := ref.STFTMagPhase(x, window, 5)
	bx, y := upload(t, "x", x), scratch(t, "y", len(want))
	run(t, "stft dc", func(c *gpu.Chain) error { return p.STFT(c, bx, y, len(x)) })
	got := download(t, y, len(want))
	frames := p.Frames(len(x))
	for m := range frames {
		if ph := got[p.Bins()*frames+m]; ph != float32(math.Pi) {
			t.Fatalf("DC phase of frame %d = %v, want +pi", m, ph)
		}
	}
}

func checkISTFT(t *testing.T, seed uint64, nfft, hop, win, frames int, magScale float32, kokoro bool) {
	t.Helper()
	p := newPlan(t, nfft, hop, win)
	bins := p.Bins()
	plane := bins * frames
	mag := randVec(seed, plane, magScale)
	phase := randVec(seed+1, plane, math.Pi)
	for i := range mag {
		mag[i] = float32(math.Abs(float64(mag[i])))
	}
	window := ref.PadWindow(ref.HannWindow(win), nfft)
	maxMag := float64(magScale)
	var wantMag, wantPhase []float32
	var gpuIn []float32
	opts := ISTFTOptions{}
	if kokoro {
		// conv_post's output: [log-magnitude | pre-phase] in one buffer;
		// the reference applies exp and sin itself, in float64.
		logMag := randVec(seed+2, plane, 3)
		pre := randVec(seed+3, plane, 4)
		gpuIn = append(append([]float32{}, logMag...), pre...)
		wantMag, wantPhase = ref.Exp(logMag), ref.Sin(pre)
		maxMag = math.Exp(3)
		opts = ISTFTOptions{PhaseOffset: plane, ExpMag: true, SinPhase: true}
	} else {
		wantMag, wantPhase = mag, phase
	}
	want, err := ref.ISTFT(wantMag, wantPhase, window, hop, frames)
	if err != nil {
		t.Fatal(err)
	}
	if n := p.ISTFTLength(frames); n != len(want) {
		t.Fatalf("plan length %d, reference %d", n, len(want))
	}
	y := scratch(t, "y", len(want))
	if kokoro {
		bin := upload(t, "post", gpuIn)
		run(t, "istft", func(c *gpu.Chain) error { return p.ISTFT(c, bin, bin, y, frames, opts) })
	} else {
		bm, bp := upload(t, "mag", mag), upload(t, "phase", phase)
		run(t, "istft", func(c *gpu.Chain) error { return p.ISTFT(c, bm, bp, y, frames, opts) })
	}
	assertClose(t, "istft", download(t, y, len(want)), want, istftATol*maxMag, 0)
}

func TestISTFTMatchesReference(t *testing.T) {
	for _, tc := range []struct{ nfft, hop, win, frames int }{
		{20, 5, 20, 2}, {20, 5, 20, 3}, {20, 5, 20, 77},
		{16, 4, 12, 50}, {15, 4, 15, 31}, {8, 3, 8, 40},
	} {
		t.Run(fmt.Sprintf("n%d/h%d/w%d/F%d", tc.nfft, tc.hop, tc.win, tc.frames), func(t *testing.T) {
			checkISTFT(t, 64, tc.nfft, tc.hop, tc.win, tc.frames, 2, false)
		})
	}
	// Kokoro's generator output over ~10k samples: 2001 frames of hop 5.
	t.Run("kokoro 10k", func(t *testing.T) { checkISTFT(t, 65, 20, 5, 20, 2001, 0, true) })
}

func TestISTFTWideMagnitude(t *testing.T) {
	checkISTFT(t, 66, 20, 5, 20, 300, 3e4, false)
}

func TestSTFTRoundTrip(t *testing.T) {
	// torch.istft inverts torch.stft (center=True, NOLA window): both
	// kernels together must return the signal, which ties their frame
	// counts, padding, window placement and trimming to each other.
	p := newPlan(t, 20, 5, 20)
	x := randVec(67, 1000, 1)
	bx, spec, back := upload(t, "x", x), scratch(t, "spec", 2*p.Bins()*p.Frames(len(x))), scratch(t, "back", len(x))
	frames := p.Frames(len(x))
	if p.ISTFTLength(frames) != len(x) {
		t.Fatalf("istft of %d frames gives %d samples, want %d", frames, p.ISTFTLength(frames), len(x))
	}
	run(t, "round trip", func(c *gpu.Chain) error {
		if err := p.STFT(c, bx, spec, len(x)); err != nil {
			return err
		}
		return p.ISTFT(c, spec, spec, back, frames, ISTFTOptions{PhaseOffset: p.Bins() * frames})
	})
	assertClose(t, "round trip", download(t, back, len(x)), x, 2e-6, 0)
}

func TestSTFTRejectsBadShapes(t *testing.T) {
	if _, err := NewSTFTPlan(dev, 20, 0, 20); err == nil {
		t.Error("hop 0 accepted")
	}
	if _, err := NewSTFTPlan(dev, 20, 5, 21); err == nil {
		t.Error("window longer than n_fft accepted")
	}
	p := newPlan(t, 20, 5, 20)
	// hop == n_fft with a periodic hann: the envelope is 0 where a frame
	// starts, torch.istft refuses it, so must we.
	nola := newPlan(t, 20, 20, 20)
	x, y := scratch(t, "x", 400), scratch(t, "y", 400)
	c, err := dev.NewChain("bad stft")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	for i, err := range []error{
		p.STFT(c, x, y, 10),  // reflect pad 10 needs > 10 samples
		p.STFT(c, x, y, 100), // y holds 400 < 2*11*21
		p.STFT(c, x, x, 20),
		p.ISTFT(c, x, x, y, 40, ISTFTOptions{}), // 11*40 > 400
		p.ISTFT(c, x, x, y, 30, ISTFTOptions{PhaseOffset: 100}),
		p.ISTFT(c, x, x, x, 3, ISTFTOptions{}),
		nola.ISTFT(c, x, x, y, 5, ISTFTOptions{}),
		p.ISTFT(c, x, x, y, 0, ISTFTOptions{}),
		p.ISTFT(c, x, x, y, 1, ISTFTOptions{}), // n_fft + 0*hop - 2*(n_fft/2) = 0 samples
	} {
		if err == nil {
			t.Errorf("case %d: accepted", i)
		}
	}
	if c.Err() != nil {
		t.Errorf("a rejected shape reached the chain: %v", c.Err())
	}
}
