package ops

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/gguf"
)

// PadMode is how a convolution or Pad1D fills positions outside the input.
type PadMode int

const (
	// PadZeros reads zeros outside the input (Conv1d's padding_mode='zeros',
	// F.pad's 'constant' with value 0).
	PadZeros PadMode = iota
	// PadReflect mirrors the input about its edge samples without repeating
	// them, x[-1] = x[1] (nn.ReflectionPad1d, padding_mode='reflect'). torch
	// requires the padding to be smaller than the input length.
	PadReflect
)

// Conv1DArgs shapes a 1-D convolution over [InChannels][Length] activations
// with a torch Conv1d weight of [OutChannels][InChannels/Groups][Kernel].
// Stride, Dilation and Groups of 0 mean 1.
type Conv1DArgs struct {
	InChannels, OutChannels int
	Length                  int // input time steps
	Kernel                  int
	Stride                  int
	Padding                 int // on each side, as Conv1d's padding=int
	Dilation                int
	Groups                  int
	PadMode                 PadMode
	// F16 says the weight buffer holds f16 values packed two to a u32 word,
	// low half first (PackF16). Otherwise it holds f32.
	F16 bool
}

func (a Conv1DArgs) norm() Conv1DArgs {
	a.Stride, a.Dilation, a.Groups = orOne(a.Stride), orOne(a.Dilation), orOne(a.Groups)
	return a
}

func orOne(v int) int {
	if v == 0 {
		return 1
	}
	return v
}

// OutLength is torch's output length,
// floor((Length + 2*Padding - Dilation*(Kernel-1) - 1) / Stride) + 1.
func (a Conv1DArgs) OutLength() int {
	a = a.norm()
	return (a.Length+2*a.Padding-a.Dilation*(a.Kernel-1)-1)/a.Stride + 1
}

// conv1dParams mirrors Params in shaders/conv1d.wgsl.
type conv1dParams struct {
	Cin, Cout, Tin, Tout uint32
	K, Stride, Pad, Dil  uint32
	Groups, Flags        uint32
	_, _                 uint32
}

const (
	convBias    = 1
	convReflect = 2
)

// Conv1D appends y = conv1d(x, w, bias) (torch.nn.functional.conv1d, or
// Conv1d with padding_mode a.PadMode) for x [InChannels][Length] and y
// [OutChannels][OutLength()]. bias is OutChannels floats or nil. A Conv1d
// of kernel 1 is also nn.Linear applied along the channels of every time
// step. y must be another buffer than x, w and bias.
func Conv1D(c *gpu.Chain, x, w, bias, y *gpu.Buffer, a Conv1DArgs) error {
	const kernel = "conv1d"
	a = a.norm()
	if a.InChannels <= 0 || a.OutChannels <= 0 || a.Length <= 0 || a.Kernel <= 0 {
		return fmt.Errorf("ops: %s: channels %d->%d, length %d, kernel %d must be positive", kernel, a.InChannels, a.OutChannels, a.Length, a.Kernel)
	}
	if a.Stride < 0 || a.Dilation < 0 || a.Groups < 0 || a.Padding < 0 {
		return fmt.Errorf("ops: %s: stride %d, dilation %d, groups %d, padding %d must not be negative", kernel, a.Stride, a.Dilation, a.Groups, a.Padding)
	}
	if a.InChannels%a.Groups != 0 || a.OutChannels%a.Groups != 0 {
		return fmt.Errorf("ops: %s: channels %d->%d must be divisible by groups (%d)", kernel, a.InChannels, a.OutChannels, a.Groups)
	}
	if a.PadMode == PadReflect && a.Padding >= a.Length {
		return fmt.Errorf("ops: %s: reflect padding %d must be smaller than the length %d", kernel, a.Padding, a.Length)
	}
	if a.PadMode != PadZeros && a.PadMode != PadReflect {
		return fmt.Errorf("ops: %s: unknown pad mode %d", kernel, a.PadMode)
	}
	tout := a.OutLength()
	if tout <= 0 {
		return fmt.Errorf("ops: %s: length %d with padding %d is shorter than the dilated kernel %d", kernel, a.Length, a.Padding, a.Dilation*(a.Kernel-1)+1)
	}
	nw := a.OutChannels * (a.InChannels / a.Groups) * a.Kernel
	bias, flags, err := convBuffers(kernel, operand{"x", x, a.InChannels * a.Length}, operand{"y", y, a.OutChannels * tout},
		w, nw, a.F16, bias, a.OutChannels)
	if err != nil {
		return err
	}
	if a.PadMode == PadReflect {
		flags |= convReflect
	}
	p := conv1dParams{
		Cin: uint32(a.InChannels), Cout: uint32(a.OutChannels), Tin: uint32(a.Length), Tout: uint32(tout),
		K: uint32(a.Kernel), Stride: uint32(a.Stride), Pad: uint32(a.Padding), Dil: uint32(a.Dilation),
		Groups: uint32(a.Groups), Flags: flags,
	}
	spec := gpu.Spec("conv1d", "conv1d", "WG", wg, "WF16", b2u(a.F16))
	return dispatch(c, spec, p, gpu.Grid(a.OutChannels*tout, wg), x, w, bias, y)
}

func b2u(b bool) int {
	if b {
		return 1
	}
	return 0
}

// convBuffers checks a convolution's buffers: x and y hold their floats,
// w its nw weights (packed f16 with f16), bias, unless nil, cout floats,
// and y is another buffer than x, w and bias. The kernels bind a bias slot
// even without a bias: convBuffers returns the buffer for it (x then,
// which they do not read) and the flags that say whether to read it.
func convBuffers(kernel string, x, y operand, w *gpu.Buffer, nw int, f16 bool, bias *gpu.Buffer, cout int) (*gpu.Buffer, uint32, error) {
	if err := checkSizes(kernel, x, y); err != nil {
		return nil, 0, err
	}
	if err := needWeights(kernel, w, nw, f16); err != nil {
		return nil, 0, err
	}
	var flags uint32
	if bias != nil {
		if err := needF32(kernel, "bias", bias, cout); err != nil {
			return nil, 0, err
		}
		flags |= convBias
	} else {
		bias = x.buf
	}
	if y.buf == x.buf || y.buf == w || y.buf == bias {
		return nil, 0, fmt.Errorf("ops: %s: y %q must be another buffer than x, w and bias", kernel, y.buf.Label())
	}
	return bias, flags, nil
}

// checkSizes checks that every operand holds its floats and that the counts
// fit the kernels' 32-bit indices.
func checkSizes(kernel string, bufs ...operand) error {
	for _, b := range bufs {
		if b.n <= 0 {
			return fmt.Errorf("ops: %s: %s of %d floats must be positive", kernel, b.what, b.n)
		}
		if int64(b.n) > math.MaxUint32 {
			return fmt.Errorf("ops: %s: %s of %d floats overflows the kernel's 32-bit index", kernel, b.what, b.n)
		}
		if err := needF32(kernel, b.what, b.buf, b.n); err != nil {
			return err
		}
	}
	return nil
}

// needWeights checks a weight buffer of n values, f32 or packed f16.
func needWeights(kernel string, w *gpu.Buffer, n int, f16 bool) error {
	if int64(n) > math.MaxUint32 {
		return fmt.Errorf("ops: %s: %d weights overflow the kernel's 32-bit index", kernel, n)
	}
	if !f16 {
		return needF32(kernel, "weight", w, n)
	}
	if w == nil {
		return fmt.Errorf("ops: %s: weight buffer is nil", kernel)
	}
	if words := uint64(n+1) / 2; w.Size() < words*4 {
		return fmt.Errorf("ops: %s: f16 weight buffer %q holds %d words, need %d for %d weights", kernel, w.Label(), w.Size()/4, words, n)
	}
	return nil
}

// PackF16 rounds w to f16 (round to nearest even, as torch's .half()) and
// packs two values to a little-endian u32 word, low half first, padding an
// odd count with a zero: the layout Conv1D and ConvTranspose1D read with F16.
func PackF16(w []float32) ([]byte, error) {
	src := w
	if len(w)%2 == 1 {
		src = append(append(make([]float32, 0, len(w)+1), w...), 0)
	}
	out := make([]byte, 2*len(src))
	if err := gguf.Quantize(gguf.TypeF16, src, out); err != nil {
		return nil, fmt.Errorf("ops: pack f16: %w", err)
	}
	return out, nil
}
