package ops

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// copyParams mirrors Params in shaders/copy.wgsl.
type copyParams struct {
	N, SrcOff, DstOff, _ uint32
}

// CopyF32 appends dst[dstOff+i] = src[srcOff+i] for i < n, offsets and n in
// floats: the KV-cache store and the last-row pick of a prefill, without
// leaving the compute pass. src and dst must be different buffers.
func CopyF32(c *gpu.Chain, src *gpu.Buffer, srcOff int, dst *gpu.Buffer, dstOff, n int) error {
	if n <= 0 || srcOff < 0 || dstOff < 0 {
		return fmt.Errorf("ops: copy_f32: n=%d, offsets %d and %d: n must be positive, offsets not negative", n, srcOff, dstOff)
	}
	if int64(srcOff)+int64(n) > math.MaxUint32 || int64(dstOff)+int64(n) > math.MaxUint32 {
		return fmt.Errorf("ops: copy_f32: range past 2^32 floats")
	}
	if err := needF32("copy_f32", "src", src, srcOff+n); err != nil {
		return err
	}
	if err := needF32("copy_f32", "dst", dst, dstOff+n); err != nil {
		return err
	}
	if src == dst {
		return fmt.Errorf("ops: copy_f32: src and dst are the same buffer %q", src.Label())
	}
	return dispatch(c, gpu.Spec("copy", "copy_f32", "WG", wg), copyParams{N: uint32(n), SrcOff: uint32(srcOff), DstOff: uint32(dstOff)}, gpu.Grid(n, wg), src, dst)
}
