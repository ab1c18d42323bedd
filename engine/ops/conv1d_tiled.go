package ops

import (
	"fmt"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// Conv1DTile is the tile shape of shaders/conv1d_tiled.wgsl: a workgroup
// computes M output channels x N steps, each invocation a TM x TN block of
// them, staging the GEMM's K (input channel, tap) pairs KC at a time in
// workgroup memory. The zero value stands for Conv1DTileFor's choice.
//
// Limits (checked by Validate): TM and TN multiples of 4 up to 16 (vec4
// registers); M % TM == 0 and N % TN == 0; (M/TM)*(N/TN) <= 256
// invocations; 4*KC*(M+N) <= 16384 bytes of workgroup memory (WebGPU's
// guaranteed minimum, which shaders/conv1d_tiled.wgsl is written to).
//
// Pipelined runs the tile with shaders/conv1d_tiled_pipelined.wgsl
// instead: the same GEMM and summation order, but the next K step's
// global loads are issued into registers before the current step's
// multiply-adds and stored into a second stage after them (one barrier a
// step), the accumulators are named registers rather than arrays indexed
// by loop counters, and the gather walks (input channel, tap) by counters
// instead of a division per element. It narrows the limits: TM and TN 4 or
// 8; M a multiple of 32; KC and N/4 dividing the invocations; and at most
// four staged vec4s of W (M*KC/4) and of B (KC*N/4) per invocation
// (Validate). Its double stage, 8*KC*(M+N) bytes, may use all the
// device's workgroup memory rather than 16 KiB (FitsDevice, checked by
// Conv1DTiledWith against the chain's device): the H200 grants 48 KiB,
// lavapipe 32, and the big tiles need KC 16 (32 KiB for 128x128) to halve
// their barriers per multiply-add.
type Conv1DTile struct {
	M, N, TM, TN, KC int
	Pipelined        bool
}

// DefaultConv1DTile is the first tile, the one every other tile's output
// is checked against bit for bit.
var DefaultConv1DTile = Conv1DTile{M: 64, N: 64, TM: 4, TN: 4, KC: 16}

// Conv1DTileVariants are the tiles offered for sweeping: the default; 8x4
// and 4x8 blocks on 128x64 and 64x128 tiles; 8x8 blocks on a 128x128 tile
// with KC 8 (to fit workgroup memory); the default with KC 32; and a
// 32x64 tile (128 invocations) for more workgroups at short lengths. Then
// the pipelined kernel on the default tile; on the 128x128 8x8 tile; 8x8
// blocks on 64x128 and 128x64 tiles (128 invocations) and a 64x64 tile (64
// invocations); 8x4 blocks on a 128x64 tile; and 4x4 blocks on the 32x64
// tile and a 32x32 one (64 invocations) for the workgroups short lengths
// lack (the 1090->1024 decoder conv at 100 frames is 32 64x64 tiles).
//
// Last, the pipelined tiles with twice their KC, for half the barriers
// per multiply-add, most beyond WebGPU's 16 KiB (the double stage in
// brackets): 8x8 blocks with KC 16 on 128x128 (32 KiB), 128x64 and 64x128
// (24 KiB each) and 64x64 (16 KiB; four staged vec4s of W and of B an
// invocation); 8x4 blocks with KC 16 on 128x64 (24 KiB); and the default
// with KC 32 (32 KiB). The list stays within lavapipe's 32 KiB so that
// every tile runs in the parity tests; the H200's 48 KiB would take KC 32
// on 128x64, eight staged vec4s of W an invocation, over the kernel's
// four. A device without a tile's memory cannot run it (FitsDevice).
var Conv1DTileVariants = []Conv1DTile{
	{M: 64, N: 64, TM: 4, TN: 4, KC: 16},
	{M: 128, N: 64, TM: 8, TN: 4, KC: 16},
	{M: 64, N: 128, TM: 4, TN: 8, KC: 16},
	{M: 128, N: 128, TM: 8, TN: 8, KC: 8},
	{M: 64, N: 64, TM: 4, TN: 4, KC: 32},
	{M: 32, N: 64, TM: 4, TN: 4, KC: 16},
	{M: 64, N: 64, TM: 4, TN: 4, KC: 16, Pipelined: true},
	{M: 128, N: 128, TM: 8, TN: 8, KC: 8, Pipelined: true},
	{M: 64, N: 128, TM: 8, TN: 8, KC: 8, Pipelined: true},
	{M: 128, N: 64, TM: 8, TN: 8, KC: 8, Pipelined: true},
	{M: 64, N: 64, TM: 8, TN: 8, KC: 8, Pipelined: true},
	{M: 128, N: 64, TM: 8, TN: 4, KC: 8, Pipelined: true},
	{M: 32, N: 64, TM: 4, TN: 4, KC: 16, Pipelined: true},
	{M: 32, N: 32, TM: 4, TN: 4, KC: 16, Pipelined: true},
	{M: 128, N: 128, TM: 8, TN: 8, KC: 16, Pipelined: true},
	{M: 128, N: 64, TM: 8, TN: 8, KC: 16, Pipelined: true},
	{M: 64, N: 128, TM: 8, TN: 8, KC: 16, Pipelined: true},
	{M: 64, N: 64, TM: 8, TN: 8, KC: 16, Pipelined: true},
	{M: 128, N: 64, TM: 8, TN: 4, KC: 16, Pipelined: true},
	{M: 64, N: 64, TM: 4, TN: 4, KC: 32, Pipelined: true},
}

// String names the tile as m{M}n{N}t{TM}x{TN}k{KC}, e.g. m128n64t8x4k16,
// with a suffix p when pipelined: m64n64t4x4k16p.
func (t Conv1DTile) String() string {
	s := fmt.Sprintf("m%dn%dt%dx%dk%d", t.M, t.N, t.TM, t.TN, t.KC)
	if t.Pipelined {
		s += "p"
	}
	return s
}

// Invocations is the workgroup size, (M/TM)*(N/TN).
func (t Conv1DTile) Invocations() int { return (t.M / t.TM) * (t.N / t.TN) }

// SharedBytes is the workgroup memory the tile stages, 4*KC*(M+N), twice
// that when pipelined.
func (t Conv1DTile) SharedBytes() int {
	b := 4 * t.KC * (t.M + t.N)
	if t.Pipelined {
		b *= 2
	}
	return b
}

// Validate says whether the kernel can run the tile on some device; the
// error names the limit broken. Whether a given device has the pipelined
// tile's workgroup memory is FitsDevice's to say.
func (t Conv1DTile) Validate() error {
	switch {
	case t.M <= 0 || t.N <= 0 || t.TM <= 0 || t.TN <= 0 || t.KC <= 0:
		return fmt.Errorf("ops: conv1d_tiled: tile %v: every dimension must be positive", t)
	case t.TM%4 != 0 || t.TN%4 != 0 || t.TM > 16 || t.TN > 16:
		return fmt.Errorf("ops: conv1d_tiled: tile %v: the per-invocation block %dx%d must be multiples of 4 up to 16", t, t.TM, t.TN)
	case t.M%t.TM != 0 || t.N%t.TN != 0:
		return fmt.Errorf("ops: conv1d_tiled: tile %v: %dx%d is not a whole number of %dx%d blocks", t, t.M, t.N, t.TM, t.TN)
	case t.KC > 1<<15:
		return fmt.Errorf("ops: conv1d_tiled: tile %v: KC %d too large", t, t.KC)
	case t.Invocations() > 256:
		return fmt.Errorf("ops: conv1d_tiled: tile %v: %d invocations per workgroup, over 256", t, t.Invocations())
	case !t.Pipelined && t.SharedBytes() > 16384:
		return fmt.Errorf("ops: conv1d_tiled: tile %v: %d bytes of workgroup memory, over 16384", t, t.SharedBytes())
	}
	if !t.Pipelined {
		return nil
	}
	// The pipelined kernel's quads are named registers (TM, TN of 4 or 8),
	// its W swizzle XORs a vec4 index's low 3 bits within the row (M/4 a
	// multiple of 8), and an invocation's staged vec4s of W (B), up to
	// four, share a K column (a step column) and are named registers too.
	wg := t.Invocations()
	switch {
	case (t.TM != 4 && t.TM != 8) || (t.TN != 4 && t.TN != 8):
		return fmt.Errorf("ops: conv1d_tiled: tile %v: the pipelined block %dx%d must be 4 or 8 each way", t, t.TM, t.TN)
	case t.M%32 != 0:
		return fmt.Errorf("ops: conv1d_tiled: tile %v: the pipelined tile's M %d must be a multiple of 32", t, t.M)
	case wg%t.KC != 0 || wg%(t.N/4) != 0:
		return fmt.Errorf("ops: conv1d_tiled: tile %v: KC %d and N/4 %d must divide the %d invocations", t, t.KC, t.N/4, wg)
	case t.M*t.KC/4 > 4*wg || t.KC*t.N/4 > 4*wg:
		return fmt.Errorf("ops: conv1d_tiled: tile %v: %d and %d staged vec4s of W and B, over 4 per invocation", t, t.M*t.KC/4, t.KC*t.N/4)
	}
	return nil
}

// FitsDevice says whether d has the workgroup memory the tile stages
// (SharedBytes); the error names both sizes. Tiles beyond WebGPU's 16 KiB
// are pipelined ones only (Validate holds the others to it).
func (t Conv1DTile) FitsDevice(d *gpu.Device) error {
	if have := int(d.Limits.MaxComputeWorkgroupStorageSize); t.SharedBytes() > have {
		return fmt.Errorf("ops: conv1d_tiled: tile %v: %d bytes of workgroup memory, over the device's %d", t, t.SharedBytes(), have)
	}
	return nil
}

// Conv1DTiledOptions tunes Conv1DTiledWith.
type Conv1DTiledOptions struct {
	// Tile is the tile shape; zero is Conv1DTileFor's choice.
	Tile Conv1DTile
}

// Conv1DTileFor is the tile Conv1DTiled runs a with, chosen by the number
// of 64x64 tiles the output makes, from the H200 sweep of
// BenchmarkConv1DKokoro (docs/h200/voice/kernels.txt, summed up in
// docs/performance.md): all pipelined, 4x4 blocks
// on a 32x64 tile below shortConvTiles (a short utterance's frame-rate
// convs: four times the workgroups of a big tile, 4.1 against 1.6 TFLOP/s
// on the decoder's conv at 100 frames), 4x4 on 64x64 below longConvTiles
// (the decoder at 1527 frames, 384 tiles: 22.9 against 16.0 for the big
// tile), and 8x8 blocks on a 128x64 tile past that (the generator's
// convs: 25.5 and 24.8 TFLOP/s on its two stages). Each stages at most
// 16 KiB, so it runs on every WebGPU device.
func Conv1DTileFor(a Conv1DArgs) Conv1DTile {
	tiles := ((a.OutChannels + 63) / 64) * ((a.norm().OutLength() + 63) / 64)
	switch {
	case tiles < shortConvTiles:
		return Conv1DTile{M: 32, N: 64, TM: 4, TN: 4, KC: 16, Pipelined: true}
	case tiles < longConvTiles:
		return Conv1DTile{M: 64, N: 64, TM: 4, TN: 4, KC: 16, Pipelined: true}
	}
	return Conv1DTile{M: 128, N: 64, TM: 8, TN: 8, KC: 8, Pipelined: true}
}

// Where Conv1DTileFor switches tiles, in 64x64 output tiles: about two per
// SM of the H200's 132, and where the sweep's big tiles start to win.
const (
	shortConvTiles = 256
	longConvTiles  = 1024
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
// channels, N = steps, K = in channels x taps) by tiles (Conv1DTileFor's)
// that stage weights and gathered inputs through workgroup memory and keep
// a block of outputs per invocation in registers, instead of one output
// per invocation.
func Conv1DTiled(c *gpu.Chain, x, w, bias, y *gpu.Buffer, a Conv1DArgs) error {
	return Conv1DTiledWith(c, x, w, bias, y, a, Conv1DTiledOptions{})
}

// Conv1DTiledWith is Conv1DTiled with a chosen tile shape (o.Tile; zero is
// Conv1DTileFor's). Every valid tile computes the same y, summed in the
// same order; one whose workgroup memory the chain's device lacks is an
// error (FitsDevice).
func Conv1DTiledWith(c *gpu.Chain, x, w, bias, y *gpu.Buffer, a Conv1DArgs, o Conv1DTiledOptions) error {
	const kernel = "conv1d_tiled"
	tile := o.Tile
	if tile == (Conv1DTile{}) {
		tile = Conv1DTileFor(a)
	}
	if err := tile.Validate(); err != nil {
		return err
	}
	if c == nil {
		return fmt.Errorf("ops: %s: nil chain", kernel)
	}
	if err := tile.FitsDevice(c.Device()); err != nil {
		return err
	}
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
	gx, gy := (tout+tile.N-1)/tile.N, (a.OutChannels+tile.M-1)/tile.M
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
	// gpu.Spec carries four constants: TM, TN and KC travel packed in TMNK.
	family := "conv1d_tiled"
	if tile.Pipelined {
		family = "conv1d_tiled_pipelined"
	}
	spec := gpu.Spec(family, family, "WF16", b2u(a.F16), "TILE_M", tile.M, "TILE_N", tile.N,
		"TMNK", tile.TM|tile.TN<<8|tile.KC<<16)
	return dispatch(c, spec, p, [3]uint32{uint32(gx), uint32(gy), 1}, x, w, bias, y)
}
