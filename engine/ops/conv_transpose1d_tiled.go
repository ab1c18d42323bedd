package ops

import (
	"fmt"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// The tile of shaders/conv_transpose1d_tiled.wgsl: 64 output channels x 64
// steps of one phase a workgroup, 4x4 outputs an invocation (256
// invocations), K staged 16 (input channel, tap) pairs at a time (8 KiB of
// workgroup memory of WebGPU's guaranteed 16 KiB), the first tile
// conv1d_tiled had. On the H200 it runs Kokoro's two upsamplers at
// 12.4-12.9 TFLOP/s (docs/h200/voice/kernels.txt); not swept further.
const (
	convTransposeTileM  = 64
	convTransposeTileN  = 64
	convTransposeTileTM = 4
	convTransposeTileTN = 4
	convTransposeTileKC = 16
)

// convTranspose1dTiledParams mirrors Params in
// shaders/conv_transpose1d_tiled.wgsl.
type convTranspose1dTiledParams struct {
	Cin, Cout, Tin, Tout  uint32
	K, Stride, Pad, Flags uint32
	Taps, QBase           uint32
	_, _                  uint32
}

// ConvTranspose1DTiledFits says whether ConvTranspose1DTiled takes a:
// groups 1 (any kernel, stride, padding and output padding). Kokoro's two
// generator upsamplers fit; the depthwise pool of AdainResBlk1d does not
// (ConvTranspose1D runs it). The error names what does not fit.
func ConvTranspose1DTiledFits(a ConvTranspose1DArgs) error {
	if a = a.norm(); a.Groups != 1 {
		return fmt.Errorf("ops: conv_transpose1d_tiled: groups %d: only groups 1 is tiled", a.Groups)
	}
	return nil
}

// ConvTranspose1DTiled is ConvTranspose1D (the same y, summed in the same
// order) for the arguments ConvTranspose1DTiledFits accepts. Each phase r
// of the stride (outputs t with (t + Padding) % Stride == r) is an
// ordinary GEMM over the taps r, r + Stride, ... (M = out channels, N =
// the phase's steps, K = in channels x ceil(Kernel/Stride)), computed by
// tiles of 64 channels x 64 steps that stage weights and inputs through
// workgroup memory and keep 4x4 outputs per invocation in registers,
// instead of one output per invocation.
func ConvTranspose1DTiled(c *gpu.Chain, x, w, bias, y *gpu.Buffer, a ConvTranspose1DArgs) error {
	const kernel = "conv_transpose1d_tiled"
	a = a.norm()
	tout, err := a.check(kernel)
	if err != nil {
		return err
	}
	if err := ConvTranspose1DTiledFits(a); err != nil {
		return err
	}
	// The phase's q runs from floor(pad/stride) to the last tp = pad +
	// tout - 1 over stride; every phase walks the same range and skips the
	// outputs that fall outside [0, tout).
	qbase := a.Padding / a.Stride
	nq := (a.Padding+tout+a.Stride-1)/a.Stride - qbase
	gx, gy := (nq+convTransposeTileN-1)/convTransposeTileN, (a.OutChannels+convTransposeTileM-1)/convTransposeTileM
	if gx > 65535 || gy > 65535 || a.Stride > 65535 {
		return fmt.Errorf("ops: %s: %d steps of %d phases x %d channels need a %dx%dx%d tile grid, over 65535", kernel, nq, a.Stride, a.OutChannels, gx, gy, a.Stride)
	}
	bias, flags, err := convBuffers(kernel, operand{"x", x, a.InChannels * a.Length}, operand{"y", y, a.OutChannels * tout},
		w, a.InChannels*a.OutChannels*a.Kernel, a.F16, bias, a.OutChannels)
	if err != nil {
		return err
	}
	p := convTranspose1dTiledParams{
		Cin: uint32(a.InChannels), Cout: uint32(a.OutChannels), Tin: uint32(a.Length), Tout: uint32(tout),
		K: uint32(a.Kernel), Stride: uint32(a.Stride), Pad: uint32(a.Padding), Flags: flags,
		Taps: uint32((a.Kernel + a.Stride - 1) / a.Stride), QBase: uint32(qbase),
	}
	// gpu.Spec carries four constants: TM, TN and KC travel packed in TMNK.
	spec := gpu.Spec("conv_transpose1d_tiled", "conv_transpose1d_tiled", "WF16", b2u(a.F16),
		"TILE_M", convTransposeTileM, "TILE_N", convTransposeTileN,
		"TMNK", convTransposeTileTM|convTransposeTileTN<<8|convTransposeTileKC<<16)
	return dispatch(c, spec, p, [3]uint32{uint32(gx), uint32(gy), uint32(a.Stride)}, x, w, bias, y)
}
