package ref

import "math"

// Add returns x + y element-wise.
func Add(x, y []float32) []float32 {
	out := make([]float32, len(x))
	for i := range x {
		out[i] = x[i] + y[i]
	}
	return out
}

// AddInPlace adds y into x: the residual stream accumulating a layer's output.
func AddInPlace(x, y []float32) {
	for i := range x {
		x[i] += y[i]
	}
}

// AddBias adds bias to every row of x, rows of len(bias) floats, in place.
func AddBias(x, bias []float32) {
	for i := range x {
		x[i] += bias[i%len(bias)]
	}
}

// Scale returns x * s element-wise.
func Scale(x []float32, s float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = v * s
	}
	return out
}

// Clamp returns min(max(x, lo), hi) element-wise.
func Clamp(x []float32, lo, hi float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = min(max(v, lo), hi)
	}
	return out
}

// ShiftScale returns (x + shift[i]) * scale[i] for every row of x, rows of
// len(shift) floats: in float32, one rounding after each operation, as the
// kernel does.
func ShiftScale(x, shift, scale []float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		c := i % len(shift)
		out[i] = (v + shift[c]) * scale[c]
	}
	return out
}

// Softcap returns limit * tanh(x / limit) element-wise, in float64.
func Softcap(x []float32, limit float32) []float32 {
	out := make([]float32, len(x))
	c := float64(limit)
	for i, v := range x {
		out[i] = float32(c * math.Tanh(float64(v)/c))
	}
	return out
}

// silu is x * sigmoid(x) in float64; math.Exp overflowing to +Inf for
// x < -709 gives x / Inf = -0, the right limit.
func silu(x float64) float64 { return x / (1 + math.Exp(-x)) }

// gelu is GELU's tanh approximation, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
// in float64. It is evaluated as x / (1 + e^-2u), which is the same function
// (0.5 (1 + tanh(u)) = 1 / (1 + e^-2u)) but keeps its relative precision in
// the negative tail: float64's 1 + tanh(u) cancels to 0 once u < -19.
func gelu(x float64) float64 {
	u := math.Sqrt(2/math.Pi) * (x + 0.044715*x*x*x)
	return x / (1 + math.Exp(-2*u))
}

// SiLU returns x * sigmoid(x) element-wise, in float64.
func SiLU(x []float32) []float32 { return apply(x, silu) }

// GELU returns the tanh approximation of GELU element-wise, in float64.
func GELU(x []float32) []float32 { return apply(x, gelu) }

func apply(x []float32, f func(float64) float64) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(f(float64(v)))
	}
	return out
}

// SwiGLU returns silu(gate) * up element-wise, in float64.
func SwiGLU(gate, up []float32) []float32 { return gated(gate, up, silu) }

// GeGLU returns gelu(gate) * up element-wise, in float64.
func GeGLU(gate, up []float32) []float32 { return gated(gate, up, gelu) }

func gated(gate, up []float32, f func(float64) float64) []float32 {
	out := make([]float32, len(gate))
	for i := range gate {
		out[i] = float32(f(float64(gate[i])) * float64(up[i]))
	}
	return out
}

// gluOAI is gpt-oss's gated unit of gate g and up u in float64: g clamped
// above at 7 and u to ±7, then g·sigmoid(1.702·g)·(u + 1).
func gluOAI(g, u float64) float64 {
	g, u = math.Min(g, 7), math.Max(-7, math.Min(u, 7))
	return g / (1 + math.Exp(-1.702*g)) * (u + 1)
}

// SwiGLUOAI returns gpt-oss's gated unit of gate and up element-wise, in
// float64.
func SwiGLUOAI(gate, up []float32) []float32 {
	out := make([]float32, len(gate))
	for i := range gate {
		out[i] = float32(gluOAI(float64(gate[i]), float64(up[i])))
	}
	return out
}

// SwiGLUOAIFused is SwiGLUOAI over rows of [gate | up] (2*ff floats each),
// giving rows x ff.
func SwiGLUOAIFused(gateUp []float32, rows, ff int) []float32 {
	out := make([]float32, rows*ff)
	for r := range rows {
		for j := range ff {
			out[r*ff+j] = float32(gluOAI(float64(gateUp[2*r*ff+j]), float64(gateUp[(2*r+1)*ff+j])))
		}
	}
	return out
}

// SwiGLUFused is SwiGLU over rows of [gate | up] (2*ff floats each), giving
// rows x ff.
func SwiGLUFused(gateUp []float32, rows, ff int) []float32 { return gatedFused(gateUp, rows, ff, silu) }

// GeGLUFused is GeGLU over rows of [gate | up] (2*ff floats each), giving
// rows x ff.
func GeGLUFused(gateUp []float32, rows, ff int) []float32 { return gatedFused(gateUp, rows, ff, gelu) }

func gatedFused(gateUp []float32, rows, ff int, f func(float64) float64) []float32 {
	out := make([]float32, 0, rows*ff)
	for r := range rows {
		row := gateUp[r*2*ff : (r+1)*2*ff]
		out = append(out, gated(row[:ff], row[ff:], f)...)
	}
	return out
}
