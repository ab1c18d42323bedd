package ops

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// TestMoERouteBackwardMatchesReference runs the router's backward for the
// routers TestMoERouteMatchesReference covers (the choice made by the
// forward kernel) against ref.MoERouteBackward.
func TestMoERouteBackwardMatchesReference(t *testing.T) {
	for i, tc := range []struct {
		name   string
		a      MoERouteArgs
		spread float32
		scale  bool
	}{
		{"qwen3-moe", MoERouteArgs{Tokens: 7, Experts: 128, TopK: 8, Renorm: true}, 8, false},
		{"gemma4-26b", MoERouteArgs{Tokens: 5, Experts: 128, TopK: 8, Renorm: true}, 8, true},
		{"gpt-oss", MoERouteArgs{Tokens: 9, Experts: 32, TopK: 4, Renorm: true}, 12, false},
		{"sigmoid-256", MoERouteArgs{Tokens: 3, Experts: 256, TopK: 8, Sigmoid: true, Renorm: true}, 10, false},
		{"sigmoid alone", MoERouteArgs{Tokens: 3, Experts: 20, TopK: 4, Sigmoid: true}, 6, true},
		{"no renorm", MoERouteArgs{Tokens: 4, Experts: 60, TopK: 6}, 6, false},
		{"64 of ninety", MoERouteArgs{Tokens: 2, Experts: 90, TopK: 64, Renorm: true}, 4, true},
		{"1024 experts", MoERouteArgs{Tokens: 2, Experts: 1024, TopK: 8, Renorm: true}, 30, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.a
			logits := moeLogits(uint64(100+i), a.Tokens, a.Experts, tc.spread)
			var scale []float32
			var bs *gpu.Buffer
			if tc.scale {
				scale = randVec(uint64(200+i), a.Experts, 2)
				bs = upload(t, "scale", scale)
			}
			ra := ref.MoERouteArgs{Tokens: a.Tokens, Experts: a.Experts, TopK: a.TopK, Sigmoid: a.Sigmoid, Renorm: a.Renorm}
			ids, _ := ref.MoERoute(logits, scale, ra)
			dw := randVec(uint64(300+i), a.Tokens*a.TopK, 1)
			want := ref.MoERouteBackward(logits, scale, ids, dw, ra)
			bl, bi, bd := upload(t, "logits", logits), uploadU32(t, "ids", ids), upload(t, "dw", dw)
			out := scratch(t, "dlogits", a.Tokens*a.Experts)
			run(t, "moe route backward", func(c *gpu.Chain) error { return MoERouteBackward(c, bl, bs, bi, bd, out, a) })
			// The gate values' f32 rounding (TestMoERouteMatchesReference:
			// 2e-7 to 1.6e-6 relative) times dw's few terms, against
			// gradients of the size of dw·p: 1e-6 absolute on values up to
			// ~1, 2e-5 relative; a missing renormalising term or a
			// softmax step left out is tens of percent.
			assertClose(t, "dlogits", download(t, out, a.Tokens*a.Experts), want, 1e-6, 2e-5)
		})
	}
}

// TestMoECombineBackwardMatchesReference: the slots' and weights'
// gradients of the combine, with and without a scale, and the unweighted
// sum a backward gathers the slots' input gradients with.
func TestMoECombineBackwardMatchesReference(t *testing.T) {
	const tokens, used, dim = 9, 4, 300
	y := randVec(70, tokens*used*dim, 20)
	w := randVec(71, tokens*used, 1)
	g := randVec(72, tokens*dim, 3)
	by, bw, bg := upload(t, "y", y), upload(t, "w", w), upload(t, "dout", g)
	for _, scale := range []float32{0, 1.5} {
		wantY, wantW := ref.MoECombineBackward(y, w, g, tokens, used, dim, scale)
		dY, dW := scratch(t, "dy", tokens*used*dim), scratch(t, "dw", tokens*used)
		run(t, "moe combine backward", func(c *gpu.Chain) error {
			return MoECombineBackward(c, by, bw, bg, dY, dW, MoECombineArgs{Tokens: tokens, Used: used, Dim: dim, Scale: scale})
		})
		// dy: two products rounded (2 ulps); dw: a 300-term dot of terms
		// up to ~200 in a workgroup tree (~9 levels of rounding of sums
		// ~1e3): 1e-4 absolute, far below a missing scale or weight.
		assertClose(t, fmt.Sprintf("scale %v dy", scale), download(t, dY, tokens*used*dim), wantY, 1e-6, 3e-7)
		assertClose(t, fmt.Sprintf("scale %v dw", scale), download(t, dW, tokens*used), wantW, 1e-4, 1e-6)
	}
	sum := scratch(t, "sum", tokens*dim)
	run(t, "moe combine unweighted", func(c *gpu.Chain) error {
		return MoECombine(c, by, nil, sum, MoECombineArgs{Tokens: tokens, Used: used, Dim: dim, Unweighted: true})
	})
	ones := make([]float32, tokens*used)
	for i := range ones {
		ones[i] = 1
	}
	assertClose(t, "unweighted", download(t, sum, tokens*dim), ref.MoECombine(y, ones, tokens, used, dim, 0), 1e-4, 1e-6)
}

// TestMoEBackwardBadShapes: each bad argument is refused by name.
func TestMoEBackwardBadShapes(t *testing.T) {
	b := scratch(t, "b", 1024)
	c2 := scratch(t, "c", 1024)
	for _, tc := range []struct {
		name, want string
		f          func(ch *gpu.Chain) error
	}{
		{"combine accumulate", "written, not accumulated", func(ch *gpu.Chain) error {
			return MoECombineBackward(ch, b, b, b, c2, b, MoECombineArgs{Tokens: 1, Used: 1, Dim: 4, Accumulate: true})
		}},
		{"combine aliasing", "two buffers", func(ch *gpu.Chain) error {
			return MoECombineBackward(ch, b, b, b, c2, c2, MoECombineArgs{Tokens: 1, Used: 1, Dim: 4})
		}},
		{"combine short", "holds", func(ch *gpu.Chain) error {
			return MoECombineBackward(ch, b, b, b, c2, scratch(t, "x", 1), MoECombineArgs{Tokens: 2, Used: 2, Dim: 4})
		}},
		{"route top-k", "top-k 9", func(ch *gpu.Chain) error {
			return MoERouteBackward(ch, b, nil, b, b, c2, MoERouteArgs{Tokens: 1, Experts: 8, TopK: 9})
		}},
		{"route in place", "must not be an input", func(ch *gpu.Chain) error {
			return MoERouteBackward(ch, b, nil, c2, b, b, MoERouteArgs{Tokens: 1, Experts: 8, TopK: 2})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := dev.NewChain("bad shapes")
			if err != nil {
				t.Fatal(err)
			}
			defer ch.Discard()
			if err = tc.f(ch); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestMoEMatMulBackwardInputMatchesReference runs the grouped backward of
// the experts' product for every type of the backward kernel: 37 tokens
// choosing 3 of 5 40-row experts split over three chunks, dY rows placed
// at an offset and stride (as the [gate | up] rows of the fused GLU's
// backward are), dX rows strided, written and accumulated; against
// matmulBackwardOracle per slot on the dequantized expert.
func TestMoEMatMulBackwardInputMatchesReference(t *testing.T) {
	for i, typ := range MatmulBackwardTypes() {
		t.Run(typ.String(), func(t *testing.T) {
			const experts, rows, cols, tokens, used = 5, 40, 256, 37, 3
			rb, _ := typ.RowSize(cols)
			c := newMoECase(t, typ, experts, rows, cols, tokens, used, uint64(2*rows)*uint64(rb))
			slots := tokens * used
			bi := uploadU32(t, "ids", c.ids)
			bg := scratch(t, "groups", MoEGroupWords(slots, experts))
			const dyOff, dys, dxs = 2, rows + 3, cols + 4
			dy := randVec(uint64(400+i), dyOff+slots*dys, 2)
			var want, bound []float32
			for s, e := range c.ids {
				w := c.deq[int(e)*rows*cols : (int(e)+1)*rows*cols]
				dx, b := matmulBackwardOracle(w, rows, cols, dy[dyOff+s*dys:dyOff+s*dys+rows], 1)
				want, bound = append(want, dx...), append(bound, b...)
			}
			bdy := upload(t, "dy", dy)
			for _, acc := range []bool{false, true} {
				dx0 := randVec(uint64(500+i), slots*dxs, 3)
				bdx := upload(t, "dx", dx0)
				a := MoEArgs{Slots: slots, XDiv: 1, Options: MatmulOptions{YOffset: dyOff, YStride: dys, XStride: dxs, Accumulate: acc}}
				run(t, "moe backward", func(ch *gpu.Chain) error {
					if err := MoEGroup(ch, bi, bg, slots, experts); err != nil {
						return err
					}
					return MoEMatMulBackwardInput(ch, c.w, bdy, bg, bdx, a)
				})
				all := download(t, bdx, slots*dxs)
				got, wantAt, boundAt := make([]float32, 0, slots*cols), make([]float32, 0, slots*cols), make([]float32, 0, slots*cols)
				for s := range slots {
					for j := range cols {
						v, w, b := all[s*dxs+j], want[s*cols+j], bound[s*cols+j]
						if acc {
							w += dx0[s*dxs+j]
							b += float32(math.Abs(float64(dx0[s*dxs+j])))
						}
						got, wantAt, boundAt = append(got, v), append(wantAt, w), append(boundAt, b)
					}
					for j := cols; j < dxs; j++ {
						if all[s*dxs+j] != dx0[s*dxs+j] {
							t.Fatalf("slot %d: the stride's gap at %d was written", s, j)
						}
					}
				}
				// The sum runs over the expert's rows, one after
				// another; accumulating adds one rounding, within +4.
				assertMatmulBackward(t, fmt.Sprintf("%v accumulate=%v", typ, acc), got, wantAt, boundAt, rows)
			}
		})
	}
}
