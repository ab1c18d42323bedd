package ops

import (
	"fmt"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// pad1dParams mirrors Params in shaders/pad1d.wgsl.
type pad1dParams struct {
	Channels, Tin, Left, Tout uint32
	Reflect                   uint32
	_, _, _                   uint32
}

// Pad1D appends y = F.pad(x, (left, right), mode) for x laid out
// [channels][t] and y [channels][left+t+right]: mode PadZeros is 'constant'
// with 0, PadReflect is nn.ReflectionPad1d((left, right)), which torch
// allows only for pads smaller than t. y must be another buffer than x.
func Pad1D(c *gpu.Chain, x, y *gpu.Buffer, channels, t, left, right int, mode PadMode) error {
	const kernel = "pad1d"
	if channels <= 0 || t <= 0 || left < 0 || right < 0 {
		return fmt.Errorf("ops: %s: shape %dx%d must be positive and pads (%d, %d) not negative", kernel, channels, t, left, right)
	}
	if mode != PadZeros && mode != PadReflect {
		return fmt.Errorf("ops: %s: unknown pad mode %d", kernel, mode)
	}
	if mode == PadReflect && (left >= t || right >= t) {
		return fmt.Errorf("ops: %s: reflect pads (%d, %d) must be smaller than the length %d", kernel, left, right, t)
	}
	tout := t + left + right
	if err := checkSizes(kernel, operand{"x", x, channels * t}, operand{"y", y, channels * tout}); err != nil {
		return err
	}
	if x == y {
		return fmt.Errorf("ops: %s: y %q must be another buffer than x", kernel, y.Label())
	}
	p := pad1dParams{Channels: uint32(channels), Tin: uint32(t), Left: uint32(left), Tout: uint32(tout), Reflect: uint32(b2u(mode == PadReflect))}
	return dispatch(c, gpu.Spec("pad1d", "pad1d", "WG", wg), p, gpu.Grid(channels*tout, wg), x, y)
}
