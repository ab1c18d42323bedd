package ops

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// elementwiseBackwardParams mirrors Params in shaders/elementwise_backward.wgsl.
type elementwiseBackwardParams struct {
	N, FF uint32
	A     float32
	_     uint32
}

func elementwiseBackwardSpec(entry string, act int) gpu.KernelSpec {
	return gpu.Spec("elementwise_backward", entry, "WG", wg, "ACT", act)
}

// SwiGLUBackward appends the gradients of out = silu(gate) * up over n
// floats: dGate = dy * up * silu'(gate), dUp = dy * silu(gate). dGate may be
// gate or dy and dUp may be up or dy (each element is read before it is
// written, by the invocation that writes it); dGate and dUp must differ.
func SwiGLUBackward(c *gpu.Chain, gate, up, dy, dGate, dUp *gpu.Buffer, n int) error {
	return gluBackward(c, "swiglu_backward", actSiLU, gate, up, dy, dGate, dUp, n)
}

// GeGLUBackward is SwiGLUBackward for out = gelu(gate) * up, GELU's tanh
// approximation as GeGLU.
func GeGLUBackward(c *gpu.Chain, gate, up, dy, dGate, dUp *gpu.Buffer, n int) error {
	return gluBackward(c, "geglu_backward", actGELU, gate, up, dy, dGate, dUp, n)
}

// SwiGLUOAIBackward is SwiGLUBackward for gpt-oss's unit (SwiGLUOAI);
// where a clamp cut the gate or up, its gradient is 0.
func SwiGLUOAIBackward(c *gpu.Chain, gate, up, dy, dGate, dUp *gpu.Buffer, n int) error {
	return gluBackward(c, "swiglu_oai_backward", actOAI, gate, up, dy, dGate, dUp, n)
}

func gluBackward(c *gpu.Chain, kernel string, act int, gate, up, dy, dGate, dUp *gpu.Buffer, n int) error {
	if err := checkElementwise(kernel, n, operand{"gate", gate, n}, operand{"up", up, n}, operand{"dy", dy, n},
		operand{"d_gate", dGate, n}, operand{"d_up", dUp, n}); err != nil {
		return err
	}
	if dGate == dUp {
		return fmt.Errorf("ops: %s: d_gate and d_up are both %q", kernel, dGate.Label())
	}
	return dispatch(c, elementwiseBackwardSpec("glu_backward", act), elementwiseBackwardParams{N: uint32(n)},
		gpu.Grid(n, wg), gate, up, dy, dGate, dUp)
}

// SwiGLUFusedBackward appends the gradient of SwiGLUFused: gateUp is rows
// rows of [gate | up] (2*ff floats), dy rows x ff, and dGateUp receives
// [dGate | dUp] in gateUp's layout, ready for the fused projection's
// backward. dGateUp may be gateUp (in place); it must not be dy.
func SwiGLUFusedBackward(c *gpu.Chain, gateUp, dy, dGateUp *gpu.Buffer, rows, ff int) error {
	return gluFusedBackward(c, "swiglu_fused_backward", actSiLU, gateUp, dy, dGateUp, rows, ff)
}

// GeGLUFusedBackward is SwiGLUFusedBackward for GeGLUFused.
func GeGLUFusedBackward(c *gpu.Chain, gateUp, dy, dGateUp *gpu.Buffer, rows, ff int) error {
	return gluFusedBackward(c, "geglu_fused_backward", actGELU, gateUp, dy, dGateUp, rows, ff)
}

// SwiGLUOAIFusedBackward is SwiGLUFusedBackward for SwiGLUOAIFused.
func SwiGLUOAIFusedBackward(c *gpu.Chain, gateUp, dy, dGateUp *gpu.Buffer, rows, ff int) error {
	return gluFusedBackward(c, "swiglu_oai_fused_backward", actOAI, gateUp, dy, dGateUp, rows, ff)
}

func gluFusedBackward(c *gpu.Chain, kernel string, act int, gateUp, dy, dGateUp *gpu.Buffer, rows, ff int) error {
	if rows <= 0 || ff <= 0 {
		return fmt.Errorf("ops: %s: shape %dx%d must be positive", kernel, rows, ff)
	}
	n := rows * ff
	if err := checkElementwise(kernel, n, operand{"gate_up", gateUp, 2 * n}, operand{"dy", dy, n},
		operand{"d_gate_up", dGateUp, 2 * n}); err != nil {
		return err
	}
	if dy == dGateUp {
		return fmt.Errorf("ops: %s: d_gate_up %q must be another buffer than dy", kernel, dy.Label())
	}
	return dispatch(c, elementwiseBackwardSpec("glu_fused_backward", act), elementwiseBackwardParams{N: uint32(n), FF: uint32(ff)},
		gpu.Grid(n, wg), gateUp, gateUp, dy, dGateUp, dGateUp)
}

// SoftcapBackward appends dx = dy * (1 - (y/limit)^2) over n floats, the
// gradient of y = limit * tanh(x / limit) taken from the forward's output y
// (so a cap applied in place, as Softcap allows, keeps its backward). dx may
// be y or dy.
func SoftcapBackward(c *gpu.Chain, y, dy, dx *gpu.Buffer, n int, limit float32) error {
	if !(limit > 0) || math.IsInf(float64(limit), 0) {
		return fmt.Errorf("ops: softcap_backward: cap %v must be positive and finite", limit)
	}
	if err := checkElementwise("softcap_backward", n, operand{"y", y, n}, operand{"dy", dy, n}, operand{"dx", dx, n}); err != nil {
		return err
	}
	return dispatch(c, elementwiseBackwardSpec("softcap_backward", 0), elementwiseBackwardParams{N: uint32(n), A: 1 / limit},
		gpu.Grid(n, wg), y, y, dy, dx, dx)
}
