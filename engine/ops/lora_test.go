package ops

import (
	"math"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/gguf"
)

// loraMat is a row-major float64 matrix for the LoRA composition below.
type loraMat struct {
	rows, cols int
	v          []float64
}

func newLoRAMat(rows, cols int, v []float32) loraMat {
	m := loraMat{rows, cols, make([]float64, rows*cols)}
	for i, x := range v {
		m.v[i] = float64(x)
	}
	return m
}

// mul is s·a·bᵀ (a m×k, b n×k) when bT, else s·a·b (b k×n); abs takes |·| of
// every factor, which turns the product into the bound Σ|terms| of its
// rounding error.
func (a loraMat) mul(b loraMat, bT bool, s float64, abs bool) loraMat {
	n := b.cols
	if bT {
		n = b.rows
	}
	out := loraMat{a.rows, n, make([]float64, a.rows*n)}
	f := func(x float64) float64 {
		if abs {
			return math.Abs(x)
		}
		return x
	}
	for i := range a.rows {
		for j := range n {
			var sum float64
			for k := range a.cols {
				bv := 0.0
				if bT {
					bv = b.v[j*b.cols+k]
				} else {
					bv = b.v[k*b.cols+j]
				}
				sum += f(a.v[i*a.cols+k]) * f(bv)
			}
			out.v[i*n+j] = f(s) * sum
		}
	}
	return out
}

func (a loraMat) t() loraMat {
	out := loraMat{a.cols, a.rows, make([]float64, len(a.v))}
	for i := range a.rows {
		for j := range a.cols {
			out.v[j*a.rows+i] = a.v[i*a.cols+j]
		}
	}
	return out
}

func (a loraMat) add(b loraMat) loraMat {
	out := loraMat{a.rows, a.cols, append([]float64(nil), a.v...)}
	for i := range out.v {
		out.v[i] += b.v[i]
	}
	return out
}

func (a loraMat) f32() []float32 {
	out := make([]float32, len(a.v))
	for i, x := range a.v {
		out[i] = float32(x)
	}
	return out
}

// TestLoRAForwardBackward runs a LoRA layer on a frozen Q4_K projection
// through the kernels a training step will chain — y = W·x + s·B(A·x)
// forward with ops.MatMul (F32 A and B are ordinary tensors, so x·Aᵀ needs
// no new kernel) and ops.Scale, then dB, dH, dA and dX with MatMulTN and
// MatMulBackwardInput — and checks every result against the float64 chain
// rule: dB = s·dYᵀ·h, dH = s·dY·B, dA = dHᵀ·x, dX = dY·W + dH·A. That
// composition is itself checked against central differences of the float64
// forward (exact for a map linear in each operand).
//
// Tolerance: every output is at most two chained f32 sums of at most
// k = 256 terms, each off by (n+4)·2⁻²⁴ of its Σ|terms| (matmulBackwardTol),
// so 2·260·2⁻²⁴ ≈ 3.1e-5 of the same composition taken over |·| bounds
// them all.
func TestLoRAForwardBackward(t *testing.T) {
	const n, k, r, m = 40, 256, 8, 13
	const s = 2.0 // alpha / rank
	typ := gguf.TypeQ4_K
	q, deq := remix(t, typ, n, k)
	af, bf := randVec(61, r*k, 0.05), randVec(62, n*r, 0.05)
	xf, dyf := randVec(63, m*k, 1), randVec(64, m*n, 1)

	W, A, B := newLoRAMat(n, k, deq), newLoRAMat(r, k, af), newLoRAMat(n, r, bf)
	X, DY := newLoRAMat(m, k, xf), newLoRAMat(m, n, dyf)
	forward := func(X, A, B loraMat, abs bool) (y, h loraMat) {
		h = X.mul(A, true, 1, abs)
		return X.mul(W, true, 1, abs).add(h.mul(B, true, s, abs)), h
	}
	grads := func(abs bool) (y, h, dB, dH, dA, dX loraMat) {
		y, h = forward(X, A, B, abs)
		dB = DY.t().mul(h, false, s, abs)
		dH = DY.mul(B, false, s, abs)
		dA = dH.t().mul(X, false, 1, abs)
		dX = DY.mul(W, false, 1, abs).add(dH.mul(A, false, 1, abs))
		return
	}
	y, h, dB, dH, dA, dX := grads(false)
	yb, hb, dBb, dHb, dAb, dXb := grads(true)

	// The chain rule against central differences of L = Σ dY ⊙ y(X, A, B),
	// a few coordinates of each operand, step 1 (L is linear in each).
	loss := func(X, A, B loraMat) float64 {
		y, _ := forward(X, A, B, false)
		var l float64
		for i, v := range y.v {
			l += DY.v[i] * v
		}
		return l
	}
	for _, c := range []struct {
		name string
		p    *loraMat
		grad loraMat
	}{{"x", &X, dX}, {"A", &A, dA}, {"B", &B, dB}} {
		for _, i := range []int{0, 7, len(c.p.v) / 2, len(c.p.v) - 1} {
			v := c.p.v[i]
			c.p.v[i] = v + 1
			lp := loss(X, A, B)
			c.p.v[i] = v - 1
			lm := loss(X, A, B)
			c.p.v[i] = v
			if fd := (lp - lm) / 2; math.Abs(fd-c.grad.v[i]) > 1e-9*(1+math.Abs(fd)) {
				t.Fatalf("d%s[%d]: finite difference %v, chain rule %v", c.name, i, fd, c.grad.v[i])
			}
		}
	}

	w := newTensor(t, "w", typ, n, k, q, 0)
	ta := newTensor(t, "lora_a", gguf.TypeF32, r, k, gpu.F32Bytes(af), 0)
	tb := newTensor(t, "lora_b", gguf.TypeF32, n, r, gpu.F32Bytes(bf), 0)
	bx, bdy := upload(t, "x", xf), upload(t, "dy", dyf)
	by, bh, bhs := scratch(t, "y", m*n), scratch(t, "h", m*r), scratch(t, "h scaled", m*r)
	bdB, bdH, bdA, bdX := scratch(t, "dB", n*r), scratch(t, "dH", m*r), scratch(t, "dA", r*k), scratch(t, "dX", m*k)
	run(t, "lora step", func(c *gpu.Chain) error {
		steps := []func() error{
			// Forward: h = x·Aᵀ, y = W·x + s·h·Bᵀ.
			func() error { return MatMul(c, ta, bx, bh, m) },
			func() error { return Scale(c, bh, bhs, m*r, s) },
			func() error { return MatMul(c, w, bx, by, m) },
			func() error { return MatMulWith(c, tb, bhs, by, m, MatmulOptions{Accumulate: true}) },
			// Backward.
			func() error { return MatMulTN(c, bdy, bh, bdB, m, n, r, MatMulTNOptions{Alpha: s}) },
			func() error { return MatMulBackwardInputWith(c, tb, bdy, bdH, m, MatmulBackwardOptions{Scale: s}) },
			func() error { return MatMulTN(c, bdH, bx, bdA, m, r, k, MatMulTNOptions{}) },
			func() error { return MatMulBackwardInput(c, w, bdy, bdX, m) },
			func() error {
				return MatMulBackwardInputWith(c, ta, bdH, bdX, m, MatmulBackwardOptions{Accumulate: true})
			},
		}
		for _, f := range steps {
			if err := f(); err != nil {
				return err
			}
		}
		return nil
	})
	const rtol = 2 * 260 * 0x1p-24
	for _, c := range []struct {
		name        string
		buf         *gpu.Buffer
		want, bound loraMat
	}{{"h", bh, h, hb}, {"y", by, y, yb}, {"dB", bdB, dB, dBb}, {"dH", bdH, dH, dHb}, {"dA", bdA, dA, dAb}, {"dX", bdX, dX, dXb}} {
		got := download(t, c.buf, len(c.want.v))
		worst := 0.0
		for i, g := range got {
			tol := rtol*c.bound.v[i] + 1e-30
			e := math.Abs(float64(g)-c.want.v[i]) / tol
			if e > 1 || math.IsNaN(e) {
				t.Fatalf("%s[%d] = %v, want %v (%.3g× the tolerance %.3g)", c.name, i, g, c.want.v[i], e, tol)
			}
			worst = max(worst, e)
		}
		t.Logf("%s: worst error %.3g of the tolerance", c.name, worst)
	}
}
