package ops

import (
	"fmt"
	"math"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// softmaxCases are row shapes around the 256-wide workgroup: a single
// element, one short of a workgroup, one over, a ragged multi-stride row, and
// many short rows.
var softmaxCases = []struct{ rows, n int }{
	{1, 1}, {1, 255}, {3, 257}, {2, 1000}, {70, 33}, {2, 5003},
}

// checkSoftmax runs Softmax out of place and in place on x and compares both
// with the reference.
func checkSoftmax(t *testing.T, x []float32, rows, n int, atol, rtol float64) {
	t.Helper()
	want := ref.Softmax(x, rows, n)
	bx, by := upload(t, "x", x), scratch(t, "y", rows*n)
	run(t, "softmax", func(c *gpu.Chain) error { return Softmax(c, bx, by, rows, n) })
	assertClose(t, "softmax out of place", download(t, by, rows*n), want, atol, rtol)
	if x0 := download(t, bx, rows*n); x0[0] != x[0] {
		t.Fatalf("softmax out of place changed x[0] from %v to %v", x[0], x0[0])
	}
	run(t, "softmax in place", func(c *gpu.Chain) error { return Softmax(c, bx, bx, rows, n) })
	assertClose(t, "softmax in place", download(t, bx, rows*n), want, atol, rtol)
}

func TestSoftmaxMatchesReference(t *testing.T) {
	for i, tc := range softmaxCases {
		t.Run(fmt.Sprintf("%dx%d", tc.rows, tc.n), func(t *testing.T) {
			x := randVec(uint64(10+i), tc.rows*tc.n, 4)
			// exp's argument is within ±8 of the max, so its f32 rounding
			// costs at most 8*6e-8 = 5e-7 relative, plus a few ulp from the
			// sum and the division (lavapipe measured 4e-7): rtol 2e-6.
			// atol only absorbs denormals a GPU flushes to zero.
			checkSoftmax(t, x, tc.rows, tc.n, 1e-9, 2e-6)
		})
	}
}

// TestSoftmaxWideMagnitude feeds logits at production extremes: spread over
// ±30 (Gemma 2's final softcap range, so probabilities span 1 down to 1e-26),
// every 7th masked to -inf as a grammar or a top-k filter leaves them, and in
// the second flavour every 13th out at ±3e4 as a diverging model produces.
func TestSoftmaxWideMagnitude(t *testing.T) {
	for _, outliers := range []bool{false, true} {
		for i, tc := range softmaxCases {
			t.Run(fmt.Sprintf("%dx%d/outliers=%v", tc.rows, tc.n, outliers), func(t *testing.T) {
				x := randVec(uint64(40+i), tc.rows*tc.n, 30)
				big := randVec(uint64(70+i), tc.rows*tc.n, 3e4)
				for j := range x {
					switch {
					case outliers && j%13 == 5:
						x[j] = big[j]
					case j%7 == 3 && j%tc.n != 0: // keep one live value per row
						x[j] = float32(math.Inf(-1))
					}
				}
				// exp(v - max) gets its argument rounded to f32: at a distance
				// d from the max that is an absolute error of about d*6e-8 in
				// the argument, a relative error of d*6e-8 in the result; the
				// spread here is d <= 60, so 4e-6 plus the sum's rounding:
				// rtol 1e-5 (lavapipe's exp measured under 1e-6, an
				// exp2-based GPU exp comes nearer the bound).
				checkSoftmax(t, x, tc.rows, tc.n, 1e-9, 1e-5)
			})
		}
	}
}

func TestSoftmaxRejectsBadShapes(t *testing.T) {
	x, y := upload(t, "x", make([]float32, 100)), scratch(t, "y", 99)
	c, err := dev.NewChain("bad softmax")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	if err := Softmax(c, x, y, 4, 25); err == nil {
		t.Error("Softmax accepted a 99-float y for 4x25")
	}
	if err := Softmax(c, x, x, 5, 25); err == nil {
		t.Error("Softmax accepted a 100-float x for 5x25")
	}
	if err := Softmax(c, x, x, 0, 25); err == nil {
		t.Error("Softmax accepted zero rows")
	}
}
