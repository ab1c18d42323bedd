package ops

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// noiseParams mirrors Params in shaders/noise.wgsl.
type noiseParams struct {
	N, Key uint32
	Scale  float32
	_      uint32
}

// GaussianNoise appends y[i] = scale·N(0, 1) for i < n, each value a hash
// of (key, i) (ref.GaussianNoise): random per key, reproducible, and made
// where it is used.
func GaussianNoise(c *gpu.Chain, y *gpu.Buffer, n int, key uint32, scale float32) error {
	const kernel = "gaussian_noise"
	// 2i+1 must not wrap u32.
	if n <= 0 || n > math.MaxUint32/2 {
		return fmt.Errorf("ops: %s: %d values: want 1..%d", kernel, n, math.MaxUint32/2)
	}
	if math.IsNaN(float64(scale)) || math.IsInf(float64(scale), 0) {
		return fmt.Errorf("ops: %s: scale %v is not finite", kernel, scale)
	}
	if err := needF32(kernel, "y", y, n); err != nil {
		return err
	}
	return dispatch(c, gpu.Spec("noise", "gaussian_noise", "WG", wg), noiseParams{N: uint32(n), Key: key, Scale: scale}, gpu.Grid(n, wg), y)
}
