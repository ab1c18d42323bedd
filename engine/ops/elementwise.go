package ops

import (
	"github.com/hearthstudio/hearth/engine/gpu"
)

// elementwiseParams mirrors Params in shaders/elementwise.wgsl.
type elementwiseParams struct {
	N    uint32
	A, B float32
	_    uint32
}

// Add appends out = x + y over n floats (the residual connection). out must
// not alias x or y: WebGPU refuses a buffer bound both read-only and writable
// in one dispatch.
func Add(c *gpu.Chain, x, y, out *gpu.Buffer, n int) error {
	for _, b := range []struct {
		what string
		buf  *gpu.Buffer
	}{{"x", x}, {"y", y}, {"out", out}} {
		if err := needF32("add", b.what, b.buf, n); err != nil {
			return err
		}
	}
	return dispatch(c, gpu.Spec("elementwise", "add", "WG", wg), elementwiseParams{N: uint32(n)}, gpu.Grid(n, wg), x, y, out)
}
