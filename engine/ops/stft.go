package ops

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// STFTPlan is one n_fft / hop / window of iSTFTNet's TorchSTFT on the
// device: the window and a cos/sin table that the stft and istft kernels
// read. torch.stft and torch.istft are called with center=True, onesided,
// unnormalised, as TorchSTFT does. Create it once per model; Release it.
type STFTPlan struct {
	NFFT, Hop int
	window    []float32 // n_fft floats, for the host-side NOLA check
	table     *gpu.Buffer
}

// stftParams mirrors Params in shaders/stft.wgsl.
type stftParams struct {
	NFFT, Hop, Bins, Frames uint32
	Length                  uint32
	MagOff, PhaseOff, Flags uint32
}

const (
	stftExpMag   = 1
	stftSinPhase = 2
)

// NewSTFTPlan uploads torch.hann_window(winLength, periodic=True) (as
// ref.HannWindow computes it), zero-padded on both sides to nfft as
// torch.stft centres a shorter window, and the DFT table. Kokoro: nfft 20,
// hop 5, winLength 20.
func NewSTFTPlan(d *gpu.Device, nfft, hop, winLength int) (*STFTPlan, error) {
	if nfft < 2 || hop <= 0 || winLength <= 0 || winLength > nfft {
		return nil, fmt.Errorf("ops: stft plan: n_fft %d, hop %d, win_length %d: need n_fft >= 2, hop > 0, 0 < win_length <= n_fft", nfft, hop, winLength)
	}
	if hop > nfft {
		return nil, fmt.Errorf("ops: stft plan: hop %d over n_fft %d leaves samples no frame covers", hop, nfft)
	}
	w := ref.PadWindow(ref.HannWindow(winLength), nfft)
	table := make([]float32, 3*nfft)
	copy(table, w)
	for i := range nfft {
		s, c := math.Sincos(2 * math.Pi * float64(i) / float64(nfft))
		table[nfft+i], table[2*nfft+i] = float32(c), float32(s)
	}
	buf, err := d.NewBufferF32(fmt.Sprintf("stft.table.%d.%d", nfft, winLength), table)
	if err != nil {
		return nil, fmt.Errorf("ops: stft plan: %w", err)
	}
	return &STFTPlan{NFFT: nfft, Hop: hop, window: w, table: buf}, nil
}

// Release frees the plan's device buffer.
func (p *STFTPlan) Release() {
	if p.table != nil {
		p.table.Release()
		p.table = nil
	}
}

// Bins is n_fft/2 + 1, the onesided frequency count.
func (p *STFTPlan) Bins() int { return p.NFFT/2 + 1 }

// Frames is the frame count torch.stft(center=True) gives a signal of
// length samples: 1 + length/hop for even n_fft.
func (p *STFTPlan) Frames(length int) int {
	return 1 + (length+2*(p.NFFT/2)-p.NFFT)/p.Hop
}

// ISTFTLength is the sample count torch.istft(center=True, length=None)
// returns for frames frames: n_fft + hop*(frames-1) - 2*(n_fft/2).
func (p *STFTPlan) ISTFTLength(frames int) int {
	return p.NFFT + p.Hop*(frames-1) - 2*(p.NFFT/2)
}

// STFT appends the magnitude and phase of torch.stft(x, n_fft, hop,
// win_length, hann_window, center=True, pad_mode='reflect',
// return_complex=True) for x of length samples: y is [2*Bins][Frames],
// torch.abs in rows 0..Bins-1 and torch.angle (atan2(im, re), in [-pi, pi])
// in rows Bins..2*Bins-1, the layout of Kokoro's
// torch.cat([har_spec, har_phase], dim=1). y must be another buffer than x.
func (p *STFTPlan) STFT(c *gpu.Chain, x, y *gpu.Buffer, length int) error {
	const kernel = "stft"
	if p.table == nil {
		return fmt.Errorf("ops: %s: plan released", kernel)
	}
	if length <= p.NFFT/2 {
		return fmt.Errorf("ops: %s: reflect padding %d needs a signal longer than that, got %d samples", kernel, p.NFFT/2, length)
	}
	frames, bins := p.Frames(length), p.Bins()
	if err := checkSizes(kernel, operand{"x", x, length}, operand{"y", y, 2 * bins * frames}); err != nil {
		return err
	}
	if x == y {
		return fmt.Errorf("ops: %s: y %q must be another buffer than x", kernel, y.Label())
	}
	pr := stftParams{NFFT: uint32(p.NFFT), Hop: uint32(p.Hop), Bins: uint32(bins), Frames: uint32(frames), Length: uint32(length)}
	return dispatch(c, gpu.Spec("stft", "stft", "WG", wg), pr, gpu.Grid(bins*frames, wg), p.table, x, x, y)
}

// ISTFTOptions say where the istft's inputs lie and how they are encoded.
type ISTFTOptions struct {
	// MagOffset and PhaseOffset are float offsets of the [Bins][frames]
	// magnitude and phase planes in their buffers (Kokoro's conv_post output
	// holds both: offsets 0 and Bins*frames).
	MagOffset, PhaseOffset int
	// ExpMag takes exp of the magnitude plane first (Kokoro's
	// spec = torch.exp(x[:, :bins])); SinPhase takes sin of the phase plane
	// (phase = torch.sin(x[:, bins:])).
	ExpMag, SinPhase bool
}

// ISTFT appends y = torch.istft(mag * exp(i*phase), n_fft, hop, win_length,
// hann_window, center=True) (TorchSTFT.inverse without its unsqueeze) for
// mag and phase planes of [Bins][frames]: ISTFTLength(frames) samples. mag
// and phase may be one buffer. It refuses, as torch does, a window whose
// overlap-added square falls below 1e-11 somewhere in the output (NOLA).
func (p *STFTPlan) ISTFT(c *gpu.Chain, mag, phase, y *gpu.Buffer, frames int, o ISTFTOptions) error {
	const kernel = "istft"
	if p.table == nil {
		return fmt.Errorf("ops: %s: plan released", kernel)
	}
	if frames <= 0 || o.MagOffset < 0 || o.PhaseOffset < 0 {
		return fmt.Errorf("ops: %s: frames %d must be positive and offsets %d, %d not negative", kernel, frames, o.MagOffset, o.PhaseOffset)
	}
	n := p.ISTFTLength(frames)
	if n <= 0 {
		return fmt.Errorf("ops: %s: %d frames give no samples", kernel, frames)
	}
	plane := p.Bins() * frames
	if err := checkSizes(kernel, operand{"magnitude", mag, o.MagOffset + plane}, operand{"phase", phase, o.PhaseOffset + plane}, operand{"y", y, n}); err != nil {
		return err
	}
	if y == mag || y == phase {
		return fmt.Errorf("ops: %s: y %q must be another buffer than the inputs", kernel, y.Label())
	}
	if err := ref.CheckNOLA(p.window, p.Hop, frames); err != nil {
		return fmt.Errorf("ops: %s: %w", kernel, err)
	}
	var flags uint32
	if o.ExpMag {
		flags |= stftExpMag
	}
	if o.SinPhase {
		flags |= stftSinPhase
	}
	pr := stftParams{NFFT: uint32(p.NFFT), Hop: uint32(p.Hop), Bins: uint32(p.Bins()), Frames: uint32(frames), Length: uint32(n),
		MagOff: uint32(o.MagOffset), PhaseOff: uint32(o.PhaseOffset), Flags: flags}
	return dispatch(c, gpu.Spec("stft", "istft", "WG", wg), pr, gpu.Grid(n, wg), p.table, mag, phase, y)
}
