package ops

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// uploadI32 puts int32 values on the device.
func uploadI32(t testing.TB, label string, v []int32) *gpu.Buffer {
	t.Helper()
	u := make([]uint32, len(v))
	for i, x := range v {
		u[i] = uint32(x)
	}
	b, err := dev.NewBufferFrom(label, gpu.U32Bytes(u))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Release)
	return b
}

// ceTargets is one target per row, masking every row where mask(r) holds,
// the others spread over the vocabulary (first and last token included).
func ceTargets(rows, vocab int, mask func(r int) bool) []int32 {
	t := make([]int32, rows)
	for r := range t {
		switch {
		case mask(r):
			t[r] = -1
		case r%5 == 1:
			t[r] = int32(vocab - 1)
		default:
			t[r] = int32((r * 7919) % vocab)
		}
	}
	return t
}

// ceStats is, per row, the float64 max of the (capped) logits and, per
// element, the softmax probability and the cap's derivative: what the
// tolerances below are made of.
func ceStats(logits []float32, rows, vocab int, softcap float32) (rowMax, prob, dcap []float64) {
	rowMax, prob, dcap = make([]float64, rows), make([]float64, rows*vocab), make([]float64, rows*vocab)
	c := float64(softcap)
	for r := range rows {
		z := make([]float64, vocab)
		m := math.Inf(-1)
		for i := range z {
			z[i] = float64(logits[r*vocab+i])
			dcap[r*vocab+i] = 1
			if c > 0 {
				s := 1 / math.Cosh(z[i]/c)
				z[i], dcap[r*vocab+i] = c*math.Tanh(z[i]/c), s*s
			}
			m = math.Max(m, z[i])
		}
		var s float64
		for _, v := range z {
			s += math.Exp(v - m)
		}
		for i, v := range z {
			prob[r*vocab+i] = math.Exp(v-m) / s
		}
		rowMax[r] = m
	}
	return rowMax, prob, dcap
}

const u24 = 0x1p-24 // one f32 rounding

// assertCrossEntropy checks the GPU's losses and, when grad is non-nil, its
// gradient against the float64 reference.
//
// Loss: m + log(s) − z_t. Each lane sums ⌈V/WG⌉ exponentials one after
// another and the lanes join in an 8-level tree, so s carries a relative
// error up to (V/WG + 8)·u (u = 2⁻²⁴), which log turns into the same
// absolute error; m, log s and z_t are each rounded once (and a capped z
// is off by up to ~8 roundings of |z|, from the division, tanh and the
// product): (V/WG + 64 + 8·(|m| + |z_t| + log V))·u. At V = 262144 and
// logits ±80 that is 1.5e-4, against a loss near 100.
//
// Gradient: scale·(p_i − δ)·dcap. p_i = exp(z_i − m)/s is off by the
// argument's rounding (|z_i − m|·u, plus 8(|z_i| + |m|)·u when capped), a
// few ulp of exp (8u), and s's error above; the cap's derivative by ~8u
// relative. So tol_i = scale·dcap·u·(p_i·(|z_i − m| + 8|z_i| + 8|m| + V/WG
// + 32) + 8|p_i − δ|), plus 1e-37 for results a GPU flushes to zero as
// denormals. A wrong scale, cap derivative or target is off by whole
// multiples of p_i or of scale, far above it.
func assertCrossEntropy(t *testing.T, logits []float32, targets []int32, rows, vocab int, scale, softcap float32, gotLoss, gotGrad []float32) {
	t.Helper()
	wantLoss, wantGrad := ref.CrossEntropyBackward(logits, targets, rows, vocab, scale, softcap)
	m, prob, dcap := ceStats(logits, rows, vocab, softcap)
	lanes := float64((vocab + crossEntropyWG - 1) / crossEntropyWG)
	worstL, worstG := 0.0, 0.0
	for r := range rows {
		g, w := float64(gotLoss[r]), float64(wantLoss[r])
		if math.IsNaN(w) {
			if !math.IsNaN(g) {
				t.Fatalf("loss[%d] = %v, want NaN (target %d of %d)", r, g, targets[r], vocab)
			}
			continue
		}
		var zt float64
		if targets[r] >= 0 {
			zt = m[r] + math.Log(prob[r*vocab+int(targets[r])])
		}
		tol := u24 * (lanes + 64 + 8*(math.Abs(m[r])+math.Abs(zt)+math.Log(float64(vocab))))
		if targets[r] < 0 {
			tol = 0 // masked rows are exactly zero
		}
		e := math.Abs(g - w)
		if e > tol || math.IsNaN(g) {
			t.Fatalf("loss[%d] = %v, want %v (|diff| %.3g > %.3g)", r, g, w, e, tol)
		}
		if tol > 0 {
			worstL = max(worstL, e/tol)
		}
	}
	if gotGrad != nil {
		for i := range wantGrad {
			r := i / vocab
			g, w := float64(gotGrad[i]), float64(wantGrad[i])
			if targets[r] < 0 || int(targets[r]) >= vocab {
				if g != 0 {
					t.Fatalf("grad[%d] = %v in a row with target %d, want 0", i, g, targets[r])
				}
				continue
			}
			delta := 0.0
			if i%vocab == int(targets[r]) {
				delta = 1
			}
			z := m[r] + math.Log(prob[i])
			if prob[i] == 0 {
				z = m[r] - 1e4
			}
			tol := float64(scale)*dcap[i]*u24*(prob[i]*(math.Abs(z-m[r])+8*math.Abs(z)+8*math.Abs(m[r])+lanes+32)+8*math.Abs(prob[i]-delta)) + 1e-37
			e := math.Abs(g - w)
			if e > tol || math.IsNaN(g) {
				t.Fatalf("grad[%d] (row %d, token %d, target %d) = %v, want %v (|diff| %.3g > %.3g)", i, r, i%vocab, targets[r], g, w, e, tol)
			}
			worstG = max(worstG, e/tol)
		}
	}
	t.Logf("worst error: loss %.3g, gradient %.3g of the tolerance", worstL, worstG)
}

// runCrossEntropy runs the forward and backward entries on one tile and
// checks both; the forward must leave the logits untouched.
func runCrossEntropy(t *testing.T, logits []float32, targets []int32, rows, vocab int, scale, softcap float32) {
	t.Helper()
	o := CrossEntropyOptions{Scale: scale, Softcap: softcap}
	bl, bt := upload(t, "logits", logits), uploadI32(t, "targets", targets)
	fwd, bwd := upload(t, "loss fwd", make([]float32, rows)), upload(t, "loss bwd", randVec(3, rows, 5))
	run(t, "cross entropy", func(c *gpu.Chain) error {
		return CrossEntropy(c, bl, bt, fwd, rows, vocab, o)
	})
	if got := download(t, bl, rows*vocab); got[rows*vocab-1] != logits[rows*vocab-1] || got[0] != logits[0] {
		t.Fatal("the forward entry changed the logits")
	}
	assertCrossEntropy(t, logits, targets, rows, vocab, scale, softcap, download(t, fwd, rows), nil)
	run(t, "cross entropy backward", func(c *gpu.Chain) error {
		return CrossEntropyBackward(c, bl, bt, bwd, rows, vocab, o)
	})
	assertCrossEntropy(t, logits, targets, rows, vocab, scale, softcap, download(t, bwd, rows), download(t, bl, rows*vocab))
}

func TestCrossEntropyMatchesReference(t *testing.T) {
	// Rows around the 256-wide workgroup (one token, one short, one over, a
	// ragged multi-stride row) and many short rows; every third row masked
	// as a prompt token; with and without Gemma 2's cap of 30.
	for i, tc := range []struct{ rows, vocab int }{{1, 1}, {2, 255}, {3, 257}, {4, 1000}, {9, 5003}, {70, 33}} {
		for _, cap := range []float32{0, 30} {
			t.Run(fmt.Sprintf("%dx%d_cap%g", tc.rows, tc.vocab, cap), func(t *testing.T) {
				logits := randVec(uint64(100+i), tc.rows*tc.vocab, 4)
				targets := ceTargets(tc.rows, tc.vocab, func(r int) bool { return r%3 == 2 })
				runCrossEntropy(t, logits, targets, tc.rows, tc.vocab, 1/float32(tc.rows), cap)
			})
		}
	}
}

func TestCrossEntropyVocab262144(t *testing.T) {
	// Gemma's vocabulary: 1024 floats per lane, the longest per-lane sum the
	// loss tolerance allows for. One row masked, one targeting the last token.
	const rows, vocab = 3, 262144
	for _, cap := range []float32{0, 30} {
		t.Run(fmt.Sprintf("cap%g", cap), func(t *testing.T) {
			logits := randVec(7, rows*vocab, 10)
			targets := []int32{12345, -1, vocab - 1}
			runCrossEntropy(t, logits, targets, rows, vocab, 0.5, cap)
		})
	}
}

// TestCrossEntropyWideMagnitude feeds logits at the extremes a diverging or
// barely trained model produces: spread over ±80, so probabilities span 1
// down to e^-160 (below f32's smallest number), with the target the row's
// largest logit in one row and its smallest in another (a loss near 160).
func TestCrossEntropyWideMagnitude(t *testing.T) {
	for _, vocab := range []int{1001, 32003} {
		for _, cap := range []float32{0, 30} {
			t.Run(fmt.Sprintf("v%d_cap%g", vocab, cap), func(t *testing.T) {
				const rows = 4
				logits := randVec(uint64(vocab), rows*vocab, 80)
				logits[0*vocab+17] = 80
				logits[1*vocab+vocab-1] = -80
				targets := []int32{17, int32(vocab - 1), 3, -1}
				runCrossEntropy(t, logits, targets, rows, vocab, 1.0/3, cap)
			})
		}
	}
}

func TestCrossEntropyRowTiles(t *testing.T) {
	// A 10-row batch in tiles of 4, 4 and 2, as a caller does when T×V
	// logits pass the binding limit: each tile has its own logits buffer,
	// targets and loss are whole-batch buffers addressed by offset, and the
	// scale counts the unmasked tokens of the whole batch.
	const rows, vocab = 10, 700
	logits := randVec(31, rows*vocab, 6)
	targets := ceTargets(rows, vocab, func(r int) bool { return r < 3 }) // a 3-token prompt
	scale := float32(1.0 / 7)
	bt, bloss := uploadI32(t, "targets", targets), upload(t, "loss", make([]float32, rows))
	grad := make([]float32, 0, rows*vocab)
	for r0 := 0; r0 < rows; r0 += 4 {
		n := min(4, rows-r0)
		tile := upload(t, "tile", logits[r0*vocab:(r0+n)*vocab])
		run(t, "tile", func(c *gpu.Chain) error {
			return CrossEntropyBackward(c, tile, bt, bloss, n, vocab, CrossEntropyOptions{Scale: scale, TargetOffset: r0, LossOffset: r0})
		})
		grad = append(grad, download(t, tile, n*vocab)...)
	}
	assertCrossEntropy(t, logits, targets, rows, vocab, scale, 0, download(t, bloss, rows), grad)
}

func TestCrossEntropyTargetPastVocabulary(t *testing.T) {
	// A target ≥ vocab is a caller's bug: NaN loss, so it shows in the mean,
	// and a zero gradient row.
	const rows, vocab = 3, 40
	logits := randVec(41, rows*vocab, 2)
	runCrossEntropy(t, logits, []int32{vocab, 5, -7}, rows, vocab, 1, 0)
}

func TestCrossEntropyRejectsBadShapes(t *testing.T) {
	logits, targets, loss := scratch(t, "logits", 4*10), uploadI32(t, "targets", make([]int32, 4)), scratch(t, "loss", 4)
	for _, c := range []struct {
		what, wantErr string
		call          func(c *gpu.Chain) error
	}{
		{"zero rows", "must be positive", func(c *gpu.Chain) error {
			return CrossEntropyBackward(c, logits, targets, loss, 0, 10, CrossEntropyOptions{})
		}},
		{"short logits", "logits buffer", func(c *gpu.Chain) error {
			return CrossEntropyBackward(c, logits, targets, loss, 4, 11, CrossEntropyOptions{})
		}},
		{"short targets", "targets buffer", func(c *gpu.Chain) error {
			return CrossEntropy(c, logits, targets, loss, 2, 10, CrossEntropyOptions{TargetOffset: 3})
		}},
		{"short loss", "loss buffer", func(c *gpu.Chain) error {
			return CrossEntropy(c, logits, targets, loss, 2, 10, CrossEntropyOptions{LossOffset: 3})
		}},
		{"negative offset", "must not be negative", func(c *gpu.Chain) error {
			return CrossEntropy(c, logits, targets, loss, 2, 10, CrossEntropyOptions{LossOffset: -1})
		}},
		{"negative cap", "soft-cap", func(c *gpu.Chain) error {
			return CrossEntropyBackward(c, logits, targets, loss, 4, 10, CrossEntropyOptions{Softcap: -30})
		}},
		{"aliased buffers", "different buffers", func(c *gpu.Chain) error {
			return CrossEntropyBackward(c, logits, targets, logits, 4, 10, CrossEntropyOptions{})
		}},
	} {
		t.Run(c.what, func(t *testing.T) {
			ch, err := dev.NewChain("bad cross entropy")
			if err != nil {
				t.Fatal(err)
			}
			defer ch.Discard()
			err = c.call(ch)
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("got error %v, want one mentioning %q", err, c.wantErr)
			}
		})
	}
}
