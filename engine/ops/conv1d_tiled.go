package ops

import (
	"fmt"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// The output tile of shaders/conv1d_tiled.wgsl: output channels x steps.
const (
	convTileC = 64
	convTileT = 64
)

// conv1dTiledParams mirrors Params in shaders/conv1d_tiled.wgsl.
type conv1dTiledParams struct {
	Cin, Cout, Tin, Tout uint32
	K, Pad, Dil, Flags   uint32
}

// Conv1DTiledFits says whether Conv1DTiled takes a: stride 1, groups 1,
// zero padding (any kernel and dilation). Every conv of Kokoro's AdaIN
// blocks, residual blocks and conv_post fits; the strided noise convs and
// F0/N convs do not (Conv1D runs those). The error names what does not fit.
func Conv1DTiledFits(a Conv1DArgs) error {
	a = a.norm()
	switch {
	case a.Stride != 1:
		return fmt.Errorf("ops: conv1d_tiled: stride %d: only stride 1 is tiled", a.Stride)
	case a.Groups != 1:
		return fmt.Errorf("ops: conv1d_tiled: groups %d: only groups 1 is tiled", a.Groups)
	case a.PadMode != PadZeros:
		return fmt.Errorf("ops: conv1d_tiled: pad mode %d: only zero padding is tiled", a.PadMode)
	}
	return nil
}

// Conv1DTiled is Conv1D (the same y, summed in the same order) for the
// arguments Conv1DTiledFits accepts, computed as an implicit GEMM (M = out
// channels, N = steps, K = in channels x taps) by tiles of 64 channels x
// 64 steps that stage weights and gathered inputs through workgroup memory
// and keep 4x4 outputs per invocation in registers, instead of one output
// per invocation.
func Conv1DTiled(c *gpu.Chain, x, w, bias, y *gpu.Buffer, a Conv1DArgs) error {
	const kernel = "conv1d_tiled"
	a = a.norm()
	if a.InChannels <= 0 || a.OutChannels <= 0 || a.Length <= 0 || a.Kernel <= 0 || a.Dilation <= 0 || a.Padding < 0 {
		return fmt.Errorf("ops: %s: channels %d->%d, length %d, kernel %d, dilation %d must be positive and padding %d not negative", kernel, a.InChannels, a.OutChannels, a.Length, a.Kernel, a.Dilation, a.Padding)
	}
	if err := Conv1DTiledFits(a); err != nil {
		return err
	}
	tout := a.OutLength()
	if tout <= 0 {
		return fmt.Errorf("ops: %s: length %d with padding %d is shorter than the dilated kernel %d", kernel, a.Length, a.Padding, a.Dilation*(a.Kernel-1)+1)
	}
	gx, gy := (tout+convTileT-1)/convTileT, (a.OutChannels+convTileC-1)/convTileC
	if gx > 65535 || gy > 65535 {
		return fmt.Errorf("ops: %s: %d steps x %d channels need a %dx%d tile grid, over 65535", kernel, tout, a.OutChannels, gx, gy)
	}
	bias, flags, err := convBuffers(kernel, operand{"x", x, a.InChannels * a.Length}, operand{"y", y, a.OutChannels * tout},
		w, a.OutChannels*a.InChannels*a.Kernel, a.F16, bias, a.OutChannels)
	if err != nil {
		return err
	}
	p := conv1dTiledParams{
		Cin: uint32(a.InChannels), Cout: uint32(a.OutChannels), Tin: uint32(a.Length), Tout: uint32(tout),
		K: uint32(a.Kernel), Pad: uint32(a.Padding), Dil: uint32(a.Dilation), Flags: flags,
	}
	spec := gpu.Spec("conv1d_tiled", "conv1d_tiled", "WF16", b2u(a.F16))
	return dispatch(c, spec, p, [3]uint32{uint32(gx), uint32(gy), 1}, x, w, bias, y)
}
