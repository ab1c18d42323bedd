package ref

import "math"

// sigmoidPair returns sigmoid(z) and sigmoid(z) * (1 - sigmoid(z)) in
// float64 for any z: e^-|z| never overflows, and s (1 - s), even in z, comes
// from it without the cancellation of 1 - s.
func sigmoidPair(z float64) (s, ds float64) {
	e := math.Exp(-math.Abs(z))
	r := 1 / (1 + e)
	s = r
	if z < 0 {
		s = e * r
	}
	return s, e * r * r
}

// siluGrad is silu'(x) = s + x s (1 - s), s = sigmoid(x).
func siluGrad(x float64) float64 {
	s, ds := sigmoidPair(x)
	return s + x*ds
}

// geluGrad is the derivative of the tanh GELU written as x * sigmoid(2u),
// u = sqrt(2/pi) (x + 0.044715 x^3): sigmoid(2u) + x sigmoid'(2u) 2u', with
// u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
func geluGrad(x float64) float64 {
	c := math.Sqrt(2 / math.Pi)
	s, ds := sigmoidPair(2 * c * (x + 0.044715*x*x*x))
	return s + x*ds*2*c*(1+3*0.044715*x*x)
}

// SwiGLUBackward returns dGate = dy * up * silu'(gate) and dUp = dy *
// silu(gate), in float64.
func SwiGLUBackward(gate, up, dy []float32) (dGate, dUp []float32) {
	return gatedBackward(gate, up, dy, silu, siluGrad)
}

// GeGLUBackward returns dGate = dy * up * gelu'(gate) and dUp = dy *
// gelu(gate), in float64.
func GeGLUBackward(gate, up, dy []float32) (dGate, dUp []float32) {
	return gatedBackward(gate, up, dy, gelu, geluGrad)
}

// SwiGLUOAIBackward returns the gradients of gpt-oss's unit (SwiGLUOAI)
// in float64: with x = min(gate, 7), y = clamp(up, -7, 7) and
// s = sigmoid(1.702 x), dGate = dy (y + 1) (s + 1.702 x s (1 - s)) where
// gate <= 7 (else 0) and dUp = dy x s where -7 <= up <= 7 (else 0).
func SwiGLUOAIBackward(gate, up, dy []float32) (dGate, dUp []float32) {
	dGate, dUp = make([]float32, len(gate)), make([]float32, len(gate))
	for i := range gate {
		g, u, d := float64(gate[i]), float64(up[i]), float64(dy[i])
		x, y := math.Min(g, 7), math.Max(-7, math.Min(u, 7))
		s, ds := sigmoidPair(1.702 * x)
		if g <= 7 {
			dGate[i] = float32(d * (y + 1) * (s + 1.702*x*ds))
		}
		if u >= -7 && u <= 7 {
			dUp[i] = float32(d * x * s)
		}
	}
	return dGate, dUp
}

// SwiGLUOAIFusedBackward is SwiGLUOAIBackward in the fused layout; see
// SwiGLUFusedBackward.
func SwiGLUOAIFusedBackward(gateUp, dy []float32, rows, ff int) []float32 {
	out := make([]float32, 0, 2*rows*ff)
	for r := range rows {
		row := gateUp[r*2*ff : (r+1)*2*ff]
		dg, du := SwiGLUOAIBackward(row[:ff], row[ff:], dy[r*ff:(r+1)*ff])
		out = append(append(out, dg...), du...)
	}
	return out
}

func gatedBackward(gate, up, dy []float32, f, df func(float64) float64) (dGate, dUp []float32) {
	dGate, dUp = make([]float32, len(gate)), make([]float32, len(gate))
	for i, g := range gate {
		d := float64(dy[i])
		dGate[i] = float32(d * float64(up[i]) * df(float64(g)))
		dUp[i] = float32(d * f(float64(g)))
	}
	return dGate, dUp
}

// SwiGLUFusedBackward is SwiGLUBackward over rows of [gate | up] (2*ff
// floats each) with dy rows x ff; the gradient comes back in the fused
// layout, rows of [dGate | dUp].
func SwiGLUFusedBackward(gateUp, dy []float32, rows, ff int) []float32 {
	return gatedFusedBackward(gateUp, dy, rows, ff, silu, siluGrad)
}

// GeGLUFusedBackward is GeGLUBackward in the fused layout; see
// SwiGLUFusedBackward.
func GeGLUFusedBackward(gateUp, dy []float32, rows, ff int) []float32 {
	return gatedFusedBackward(gateUp, dy, rows, ff, gelu, geluGrad)
}

func gatedFusedBackward(gateUp, dy []float32, rows, ff int, f, df func(float64) float64) []float32 {
	out := make([]float32, 0, 2*rows*ff)
	for r := range rows {
		row := gateUp[r*2*ff : (r+1)*2*ff]
		dg, du := gatedBackward(row[:ff], row[ff:], dy[r*ff:(r+1)*ff], f, df)
		out = append(append(out, dg...), du...)
	}
	return out
}

// SoftcapBackward returns dx = dy * (1 - (y/limit)^2), the gradient of
// y = limit * tanh(x / limit) from its output y, in float64.
func SoftcapBackward(y, dy []float32, limit float32) []float32 {
	dx := make([]float32, len(y))
	for i, v := range y {
		t := float64(v) / float64(limit)
		dx[i] = float32(float64(dy[i]) * math.Max(1-t*t, 0))
	}
	return dx
}
