package ops

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// elementwiseParams mirrors Params in shaders/elementwise.wgsl.
type elementwiseParams struct {
	N, FF uint32
	A, B  float32
}

// Activations of the act, glu and glu_fused entries (the ACT constant).
const (
	actSiLU = 0
	actGELU = 1
	actOAI  = 2 // gpt-oss's glu_oai, GLU entries only
)

func elementwiseSpec(entry string, act int) gpu.KernelSpec {
	return gpu.Spec("elementwise", entry, "WG", wg, "ACT", act)
}

// operand is one buffer a dispatcher checks, with the floats it must hold.
type operand struct {
	what string
	buf  *gpu.Buffer
	n    int
}

// checkElementwise validates n and that every operand holds its floats.
func checkElementwise(kernel string, n int, bufs ...operand) error {
	if n <= 0 {
		return fmt.Errorf("ops: %s: length %d must be positive", kernel, n)
	}
	for _, b := range bufs {
		if int64(b.n) > math.MaxUint32 {
			return fmt.Errorf("ops: %s: %s of %d floats overflows the kernel's 32-bit index", kernel, b.what, b.n)
		}
		if err := needF32(kernel, b.what, b.buf, b.n); err != nil {
			return err
		}
	}
	return nil
}

// Add appends out = x + y over n floats (the residual connection). out may be
// x or y (every binding of the family is read_write; see
// shaders/elementwise.wgsl).
func Add(c *gpu.Chain, x, y, out *gpu.Buffer, n int) error {
	if err := checkElementwise("add", n, operand{"x", x, n}, operand{"y", y, n}, operand{"out", out, n}); err != nil {
		return err
	}
	return dispatch(c, elementwiseSpec("add", 0), elementwiseParams{N: uint32(n)}, gpu.Grid(n, wg), x, y, out)
}

// AddInPlace appends x += y over n floats: the residual stream accumulating
// a layer's output.
func AddInPlace(c *gpu.Chain, x, y *gpu.Buffer, n int) error {
	return Add(c, x, y, x, n)
}

// AddBias appends x[r, i] += bias[i] for rows rows of n floats: one bias
// vector added to every row (Qwen 2's q, k and v biases).
func AddBias(c *gpu.Chain, x, bias *gpu.Buffer, rows, n int) error {
	if rows <= 0 || n <= 0 {
		return fmt.Errorf("ops: add_bias: shape %dx%d must be positive", rows, n)
	}
	total := rows * n
	if err := checkElementwise("add_bias", total, operand{"x", x, total}, operand{"bias", bias, n}); err != nil {
		return err
	}
	return dispatch(c, elementwiseSpec("add_bias", 0), elementwiseParams{N: uint32(total), FF: uint32(n)}, gpu.Grid(total, wg), x, bias, x)
}

// Scale appends y = x * s over n floats; y may be x.
func Scale(c *gpu.Chain, x, y *gpu.Buffer, n int, s float32) error {
	if err := checkElementwise("scale", n, operand{"x", x, n}, operand{"y", y, n}); err != nil {
		return err
	}
	return dispatch(c, elementwiseSpec("scale", 0), elementwiseParams{N: uint32(n), A: s}, gpu.Grid(n, wg), x, x, y)
}

// Clamp appends y = min(max(x, lo), hi) over n floats, y may be x: the
// bounds Gemma 4's vision tower puts on its products' inputs and outputs.
// An infinite bound is one the file leaves out; lo must not exceed hi.
func Clamp(c *gpu.Chain, x, y *gpu.Buffer, n int, lo, hi float32) error {
	if lo != lo || hi != hi || lo > hi {
		return fmt.Errorf("ops: clamp: bounds [%v, %v] are not an interval", lo, hi)
	}
	if err := checkElementwise("clamp", n, operand{"x", x, n}, operand{"y", y, n}); err != nil {
		return err
	}
	return dispatch(c, elementwiseSpec("clamp_range", 0), elementwiseParams{N: uint32(n), A: lo, B: hi}, gpu.Grid(n, wg), x, x, y)
}

// ShiftScale appends y[r, i] = (x[r, i] + shiftScale[i]) * shiftScale[n + i]
// for rows rows of n floats, shiftScale holding the n shifts then the n
// scales; y may be x. Gemma 4's vision standardisation, (x - bias) · scale,
// passes the negated bias: the same floats, as negation is exact.
func ShiftScale(c *gpu.Chain, x, shiftScale, y *gpu.Buffer, rows, n int) error {
	if rows <= 0 || n <= 0 {
		return fmt.Errorf("ops: shift_scale: shape %dx%d must be positive", rows, n)
	}
	total := rows * n
	if err := checkElementwise("shift_scale", total, operand{"x", x, total}, operand{"shifts and scales", shiftScale, 2 * n}, operand{"y", y, total}); err != nil {
		return err
	}
	return dispatch(c, elementwiseSpec("shift_scale", 0), elementwiseParams{N: uint32(total), FF: uint32(n)}, gpu.Grid(total, wg), x, shiftScale, y)
}

// Softcap appends y = limit * tanh(x / limit) over n floats (Gemma 2 caps
// its final logits at 30 and attention scores at 50); y may be x. The tanh is
// computed so that it saturates cleanly for any magnitude.
func Softcap(c *gpu.Chain, x, y *gpu.Buffer, n int, limit float32) error {
	if !(limit > 0) || math.IsInf(float64(limit), 0) {
		return fmt.Errorf("ops: softcap: cap %v must be positive and finite", limit)
	}
	if err := checkElementwise("softcap", n, operand{"x", x, n}, operand{"y", y, n}); err != nil {
		return err
	}
	return dispatch(c, elementwiseSpec("softcap", 0), elementwiseParams{N: uint32(n), A: limit, B: 1 / limit}, gpu.Grid(n, wg), x, x, y)
}

// SiLU appends y = x * sigmoid(x) over n floats; y may be x.
func SiLU(c *gpu.Chain, x, y *gpu.Buffer, n int) error {
	return activation(c, "silu", actSiLU, x, y, n)
}

// GELU appends y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) over n
// floats, the tanh approximation Gemma and GPT-2 use; y may be x.
func GELU(c *gpu.Chain, x, y *gpu.Buffer, n int) error {
	return activation(c, "gelu", actGELU, x, y, n)
}

func activation(c *gpu.Chain, kernel string, act int, x, y *gpu.Buffer, n int) error {
	if err := checkElementwise(kernel, n, operand{"x", x, n}, operand{"y", y, n}); err != nil {
		return err
	}
	return dispatch(c, elementwiseSpec("act", act), elementwiseParams{N: uint32(n)}, gpu.Grid(n, wg), x, x, y)
}

// SwiGLU appends out = silu(gate) * up over n floats (Llama, Qwen, Phi-3's
// feed-forward); out may be gate or up.
func SwiGLU(c *gpu.Chain, gate, up, out *gpu.Buffer, n int) error {
	return glu(c, "swiglu", actSiLU, gate, up, out, n)
}

// GeGLU appends out = gelu(gate) * up over n floats (Gemma's feed-forward,
// GELU with the tanh approximation); out may be gate or up.
func GeGLU(c *gpu.Chain, gate, up, out *gpu.Buffer, n int) error {
	return glu(c, "geglu", actGELU, gate, up, out, n)
}

// SwiGLUOAI appends gpt-oss's gated unit over n floats (SwiGLUOAIFused's,
// gate and up apart); out may be gate or up.
func SwiGLUOAI(c *gpu.Chain, gate, up, out *gpu.Buffer, n int) error {
	return glu(c, "swiglu_oai", actOAI, gate, up, out, n)
}

func glu(c *gpu.Chain, kernel string, act int, gate, up, out *gpu.Buffer, n int) error {
	if err := checkElementwise(kernel, n, operand{"gate", gate, n}, operand{"up", up, n}, operand{"out", out, n}); err != nil {
		return err
	}
	return dispatch(c, elementwiseSpec("glu", act), elementwiseParams{N: uint32(n)}, gpu.Grid(n, wg), gate, up, out)
}

// SwiGLUFused appends SwiGLU for gate and up fused in one buffer, rows rows
// of [gate | up] with ff floats each (Phi-3's gate_up projection), into out,
// rows x ff. out must be another buffer than gateUp: output row r would
// overwrite input rows r/2 and after, which other workgroups still read.
func SwiGLUFused(c *gpu.Chain, gateUp, out *gpu.Buffer, rows, ff int) error {
	return gluFused(c, "swiglu_fused", actSiLU, gateUp, out, rows, ff)
}

// GeGLUFused is GeGLU for gate and up fused in one buffer; see SwiGLUFused.
func GeGLUFused(c *gpu.Chain, gateUp, out *gpu.Buffer, rows, ff int) error {
	return gluFused(c, "geglu_fused", actGELU, gateUp, out, rows, ff)
}

// SwiGLUOAIFused is gpt-oss's gated unit over rows of [gate | up]: the gate
// clamped above at 7 and up to ±7, then gate·sigmoid(1.702·gate)·(up + 1);
// see SwiGLUFused.
func SwiGLUOAIFused(c *gpu.Chain, gateUp, out *gpu.Buffer, rows, ff int) error {
	return gluFused(c, "swiglu_oai_fused", actOAI, gateUp, out, rows, ff)
}

func gluFused(c *gpu.Chain, kernel string, act int, gateUp, out *gpu.Buffer, rows, ff int) error {
	if rows <= 0 || ff <= 0 {
		return fmt.Errorf("ops: %s: shape %dx%d must be positive", kernel, rows, ff)
	}
	n := rows * ff
	if err := checkElementwise(kernel, n, operand{"gate_up", gateUp, 2 * n}, operand{"out", out, n}); err != nil {
		return err
	}
	if gateUp == out {
		return fmt.Errorf("ops: %s: out %q must be another buffer than gate_up", kernel, out.Label())
	}
	return dispatch(c, elementwiseSpec("glu_fused", act), elementwiseParams{N: uint32(n), FF: uint32(ff)}, gpu.Grid(n, wg), gateUp, gateUp, out)
}
