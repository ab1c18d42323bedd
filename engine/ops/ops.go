// Package ops holds one Go dispatcher per WGSL kernel. A dispatcher checks
// shapes, then appends one dispatch to the caller's gpu.Chain: it never
// submits, waits or reads back. Each has a CPU reference in package ref with
// the same name, and a parity test that runs both.
package ops

import (
	"fmt"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// wg is the workgroup size of the element-wise kernels: 256 invocations is a
// multiple of every vendor's SIMD width (32 NVIDIA, 64 AMD, 8-32 Intel/Apple)
// and within WebGPU's guaranteed 256 invocations per workgroup.
const wg = 256

// needF32 checks that buffer b holds at least n float32 values.
func needF32(kernel, what string, b *gpu.Buffer, n int) error {
	if b == nil {
		return fmt.Errorf("ops: %s: %s buffer is nil", kernel, what)
	}
	if b.Size() < uint64(n)*4 {
		return fmt.Errorf("ops: %s: %s buffer %q holds %d floats, need %d", kernel, what, b.Label(), b.Size()/4, n)
	}
	return nil
}

func dispatch(c *gpu.Chain, spec gpu.KernelSpec, params any, grid [3]uint32, bufs ...*gpu.Buffer) error {
	k, err := c.Device().Kernel(spec)
	if err != nil {
		return err
	}
	return c.Dispatch(k, params, grid, bufs...)
}
