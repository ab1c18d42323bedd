package ops

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// audioActivationParams mirrors Params in shaders/audio_activation.wgsl.
type audioActivationParams struct {
	N, T uint32
	A    float32
	_    uint32
}

// OP values of the unary entry, as OP_* in shaders/audio_activation.wgsl.
const (
	opLeakyReLU = 0
	opTanh      = 1
	opSin       = 2
	opExp       = 3
)

// Snake appends y = x + 1/(alpha+eps) * sin(alpha*x)^2 over x laid out
// [channels][t], alpha holding one value per channel: the Snake1D of
// Kokoro's AdaINResBlock1 (which writes 1/alpha, eps = 0; some iSTFTNet
// ports add 1e-9). y may be x.
func Snake(c *gpu.Chain, x, alpha, y *gpu.Buffer, channels, t int, eps float32) error {
	const kernel = "snake"
	if channels <= 0 || t <= 0 {
		return fmt.Errorf("ops: %s: shape %dx%d must be positive", kernel, channels, t)
	}
	if math.IsNaN(float64(eps)) || math.IsInf(float64(eps), 0) {
		return fmt.Errorf("ops: %s: eps %v must be finite", kernel, eps)
	}
	n := channels * t
	if err := checkSizes(kernel, operand{"x", x, n}, operand{"alpha", alpha, channels}, operand{"y", y, n}); err != nil {
		return err
	}
	if alpha == y {
		return fmt.Errorf("ops: %s: y %q must not be alpha", kernel, y.Label())
	}
	p := audioActivationParams{N: uint32(n), T: uint32(t), A: eps}
	return dispatch(c, gpu.Spec("audio_activation", "snake", "WG", wg, "OP", 0), p, gpu.Grid(n, wg), x, alpha, y)
}

// LeakyReLU appends y = x >= 0 ? x : slope*x over n floats
// (F.leaky_relu; Kokoro's generator uses slope 0.1, then the default 0.01
// before conv_post, and the style encoder 0.2). y may be x.
func LeakyReLU(c *gpu.Chain, x, y *gpu.Buffer, n int, slope float32) error {
	if math.IsNaN(float64(slope)) || math.IsInf(float64(slope), 0) {
		return fmt.Errorf("ops: leaky_relu: slope %v must be finite", slope)
	}
	return unary(c, "leaky_relu", opLeakyReLU, x, y, n, slope)
}

// Tanh appends y = tanh(x) over n floats (the harmonic source's merge);
// y may be x.
func Tanh(c *gpu.Chain, x, y *gpu.Buffer, n int) error {
	return unary(c, "tanh", opTanh, x, y, n, 0)
}

// Sin appends y = sin(x) over n floats (the generator's phase head); y may
// be x.
func Sin(c *gpu.Chain, x, y *gpu.Buffer, n int) error {
	return unary(c, "sin", opSin, x, y, n, 0)
}

// Exp appends y = exp(x) over n floats (the generator's magnitude head),
// saturating at e^88 ~ 1.65e38 where torch would return inf; y may be x.
func Exp(c *gpu.Chain, x, y *gpu.Buffer, n int) error {
	return unary(c, "exp", opExp, x, y, n, 0)
}

func unary(c *gpu.Chain, kernel string, op int, x, y *gpu.Buffer, n int, a float32) error {
	if err := checkSizes(kernel, operand{"x", x, n}, operand{"y", y, n}); err != nil {
		return err
	}
	p := audioActivationParams{N: uint32(n), A: a}
	return dispatch(c, gpu.Spec("audio_activation", "unary", "WG", wg, "OP", op), p, gpu.Grid(n, wg), x, x, y)
}
