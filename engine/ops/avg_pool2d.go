package ops

import (
	"fmt"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// avgPool2dParams mirrors Params in shaders/avg_pool2d.wgsl.
type avgPool2dParams struct {
	Channels, H, W, Ho uint32
	Wo, Kh, Kw, _      uint32
}

// AvgPool2D appends y = F.avg_pool2d(x, (kh, kw)) (stride = kernel, no
// padding, floor mode) for x [channels][height][width] and y
// [channels][height/kh][width/kw]: StyleTTS2's DownSample, 'half' (2, 2)
// and 'timepreserve' (2, 1). Trailing rows and columns that do not fill a
// window are dropped, as torch's floor mode does. y must be another buffer
// than x.
func AvgPool2D(c *gpu.Chain, x, y *gpu.Buffer, channels, height, width, kh, kw int) error {
	const kernel = "avg_pool2d"
	if channels <= 0 || height <= 0 || width <= 0 || kh <= 0 || kw <= 0 {
		return fmt.Errorf("ops: %s: shape %dx%dx%d and kernel %dx%d must be positive", kernel, channels, height, width, kh, kw)
	}
	ho, wo := height/kh, width/kw
	if ho == 0 || wo == 0 {
		return fmt.Errorf("ops: %s: input %dx%d is smaller than the kernel %dx%d", kernel, height, width, kh, kw)
	}
	if err := checkSizes(kernel, operand{"x", x, channels * height * width}, operand{"y", y, channels * ho * wo}); err != nil {
		return err
	}
	if x == y {
		return fmt.Errorf("ops: %s: y %q must be another buffer than x", kernel, y.Label())
	}
	p := avgPool2dParams{Channels: uint32(channels), H: uint32(height), W: uint32(width), Ho: uint32(ho), Wo: uint32(wo), Kh: uint32(kh), Kw: uint32(kw)}
	return dispatch(c, gpu.Spec("avg_pool2d", "avg_pool2d", "WG", wg), p, gpu.Grid(channels*ho*wo, wg), x, y)
}
