package ops

import (
	"fmt"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// Conv2DArgs shapes a 2-D convolution over [InChannels][Height][Width]
// activations with a torch Conv2d weight of
// [OutChannels][InChannels/Groups][KernelH][KernelW]. Strides and Groups of
// 0 mean 1; padding is zeros on both sides of each axis.
type Conv2DArgs struct {
	InChannels, OutChannels int
	Height, Width           int
	KernelH, KernelW        int
	StrideH, StrideW        int
	PadH, PadW              int
	Groups                  int
	F16                     bool // weights packed as f16 pairs (PackF16)
}

// OutSize is torch's output height and width,
// floor((in + 2*pad - kernel) / stride) + 1 on each axis.
func (a Conv2DArgs) OutSize() (h, w int) {
	return (a.Height+2*a.PadH-a.KernelH)/orOne(a.StrideH) + 1, (a.Width+2*a.PadW-a.KernelW)/orOne(a.StrideW) + 1
}

// conv2dParams mirrors Params in shaders/conv2d.wgsl.
type conv2dParams struct {
	Cin, Cout, H, W  uint32
	Ho, Wo, Kh, Kw   uint32
	Sh, Sw, Ph, Pw   uint32
	Groups, Flags, _ uint32
	_                uint32
}

// Conv2D appends y = F.conv2d(x, w, bias, stride, padding, groups=Groups)
// for x [InChannels][Height][Width] and y [OutChannels][OutSize()]: the
// StyleTTS2 style encoder's 3x3 and 1x1 convolutions, its depthwise
// learned downsampling (groups = channels, stride 2 or (2, 1)) and its
// final 5x5. bias is OutChannels floats or nil; y must be another buffer
// than x, w and bias.
func Conv2D(c *gpu.Chain, x, w, bias, y *gpu.Buffer, a Conv2DArgs) error {
	const kernel = "conv2d"
	a.StrideH, a.StrideW, a.Groups = orOne(a.StrideH), orOne(a.StrideW), orOne(a.Groups)
	if a.InChannels <= 0 || a.OutChannels <= 0 || a.Height <= 0 || a.Width <= 0 || a.KernelH <= 0 || a.KernelW <= 0 {
		return fmt.Errorf("ops: %s: channels %d->%d, size %dx%d, kernel %dx%d must be positive", kernel, a.InChannels, a.OutChannels, a.Height, a.Width, a.KernelH, a.KernelW)
	}
	if a.StrideH < 0 || a.StrideW < 0 || a.PadH < 0 || a.PadW < 0 || a.Groups < 0 {
		return fmt.Errorf("ops: %s: strides %d,%d, padding %d,%d, groups %d must not be negative", kernel, a.StrideH, a.StrideW, a.PadH, a.PadW, a.Groups)
	}
	if a.InChannels%a.Groups != 0 || a.OutChannels%a.Groups != 0 {
		return fmt.Errorf("ops: %s: channels %d->%d must be divisible by groups (%d)", kernel, a.InChannels, a.OutChannels, a.Groups)
	}
	ho, wo := a.OutSize()
	if ho <= 0 || wo <= 0 {
		return fmt.Errorf("ops: %s: input %dx%d padded by %d,%d is smaller than the kernel %dx%d", kernel, a.Height, a.Width, a.PadH, a.PadW, a.KernelH, a.KernelW)
	}
	bias, flags, err := convBuffers(kernel, operand{"x", x, a.InChannels * a.Height * a.Width}, operand{"y", y, a.OutChannels * ho * wo},
		w, a.OutChannels*(a.InChannels/a.Groups)*a.KernelH*a.KernelW, a.F16, bias, a.OutChannels)
	if err != nil {
		return err
	}
	p := conv2dParams{
		Cin: uint32(a.InChannels), Cout: uint32(a.OutChannels), H: uint32(a.Height), W: uint32(a.Width),
		Ho: uint32(ho), Wo: uint32(wo), Kh: uint32(a.KernelH), Kw: uint32(a.KernelW),
		Sh: uint32(a.StrideH), Sw: uint32(a.StrideW), Ph: uint32(a.PadH), Pw: uint32(a.PadW),
		Groups: uint32(a.Groups), Flags: flags,
	}
	spec := gpu.Spec("conv2d", "conv2d", "WG", wg, "WF16", b2u(a.F16))
	return dispatch(c, spec, p, gpu.Grid(a.OutChannels*ho*wo, wg), x, w, bias, y)
}
