package ops

import (
	"fmt"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// ConvTranspose1DArgs shapes a transposed 1-D convolution over
// [InChannels][Length] activations with a torch ConvTranspose1d weight of
// [InChannels][OutChannels/Groups][Kernel]. Stride and Groups of 0 mean 1;
// dilation is 1 (no Kokoro layer dilates a transposed conv).
type ConvTranspose1DArgs struct {
	InChannels, OutChannels int
	Length                  int // input time steps
	Kernel                  int
	Stride                  int
	Padding                 int // trimmed from each side of the full output
	OutputPadding           int // added to the right end; torch requires < Stride
	Groups                  int
	F16                     bool // weights packed as f16 pairs (PackF16)
}

// OutLength is torch's (Length-1)*Stride - 2*Padding + Kernel +
// OutputPadding.
func (a ConvTranspose1DArgs) OutLength() int {
	return (a.Length-1)*orOne(a.Stride) - 2*a.Padding + a.Kernel + a.OutputPadding
}

// norm replaces a Stride and Groups of 0 by 1.
func (a ConvTranspose1DArgs) norm() ConvTranspose1DArgs {
	a.Stride, a.Groups = orOne(a.Stride), orOne(a.Groups)
	return a
}

// check validates the shape of normalized arguments for kernel and returns
// the output length; the error names the kernel and the bad value.
func (a ConvTranspose1DArgs) check(kernel string) (int, error) {
	if a.InChannels <= 0 || a.OutChannels <= 0 || a.Length <= 0 || a.Kernel <= 0 {
		return 0, fmt.Errorf("ops: %s: channels %d->%d, length %d, kernel %d must be positive", kernel, a.InChannels, a.OutChannels, a.Length, a.Kernel)
	}
	if a.Stride < 0 || a.Groups < 0 || a.Padding < 0 || a.OutputPadding < 0 {
		return 0, fmt.Errorf("ops: %s: stride %d, groups %d, padding %d, output padding %d must not be negative", kernel, a.Stride, a.Groups, a.Padding, a.OutputPadding)
	}
	if a.OutputPadding >= a.Stride {
		return 0, fmt.Errorf("ops: %s: output padding %d must be smaller than the stride %d", kernel, a.OutputPadding, a.Stride)
	}
	if a.InChannels%a.Groups != 0 || a.OutChannels%a.Groups != 0 {
		return 0, fmt.Errorf("ops: %s: channels %d->%d must be divisible by groups (%d)", kernel, a.InChannels, a.OutChannels, a.Groups)
	}
	tout := a.OutLength()
	if tout <= 0 {
		return 0, fmt.Errorf("ops: %s: padding %d leaves no output of length %d", kernel, a.Padding, tout)
	}
	return tout, nil
}

// convTranspose1dParams mirrors Params in shaders/conv_transpose1d.wgsl.
type convTranspose1dParams struct {
	Cin, Cout, Tin, Tout  uint32
	K, Stride, Pad, Group uint32
	Flags                 uint32
	_, _, _               uint32
}

// ConvTranspose1D appends y = conv_transpose1d(x, w, bias, stride, padding,
// output_padding, groups) for x [InChannels][Length] and y
// [OutChannels][OutLength()]: Kokoro's weight-normed upsamplers (weight
// folded) and the depthwise ConvTranspose1d(groups=C, k=3, stride=2,
// padding=1, output_padding=1) of AdainResBlk1d's pool. bias is OutChannels
// floats or nil; y must be another buffer than x, w and bias.
func ConvTranspose1D(c *gpu.Chain, x, w, bias, y *gpu.Buffer, a ConvTranspose1DArgs) error {
	const kernel = "conv_transpose1d"
	a = a.norm()
	tout, err := a.check(kernel)
	if err != nil {
		return err
	}
	bias, flags, err := convBuffers(kernel, operand{"x", x, a.InChannels * a.Length}, operand{"y", y, a.OutChannels * tout},
		w, a.InChannels*(a.OutChannels/a.Groups)*a.Kernel, a.F16, bias, a.OutChannels)
	if err != nil {
		return err
	}
	p := convTranspose1dParams{
		Cin: uint32(a.InChannels), Cout: uint32(a.OutChannels), Tin: uint32(a.Length), Tout: uint32(tout),
		K: uint32(a.Kernel), Stride: uint32(a.Stride), Pad: uint32(a.Padding), Group: uint32(a.Groups), Flags: flags,
	}
	spec := gpu.Spec("conv_transpose1d", "conv_transpose1d", "WG", wg, "WF16", b2u(a.F16))
	return dispatch(c, spec, p, gpu.Grid(a.OutChannels*tout, wg), x, w, bias, y)
}
