package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
	"github.com/hearthstudio/hearth/gguf"
)

// moeIDs are tokens × used chosen experts of experts, distinct within a
// token, drawn with a skew: expert 0 is chosen by most tokens (so its
// slots fill several tiles), the last expert by none.
func moeIDs(seed uint64, tokens, used, experts int) []uint32 {
	r := rand.New(rand.NewPCG(seed, 0x3e5))
	ids := make([]uint32, 0, tokens*used)
	for range tokens {
		perm := r.Perm(experts - 1)
		if r.IntN(4) != 0 {
			// Expert 0 first, the rest after.
			i := slices.Index(perm, 0)
			perm[0], perm[i] = perm[i], perm[0]
		}
		for _, e := range perm[:used] {
			ids = append(ids, uint32(e))
		}
	}
	return ids
}

// runMoEGroup groups ids on the GPU and returns the sorted slots and the
// tiles as the kernel wrote them.
func runMoEGroup(t *testing.T, ids []uint32, experts int) (order []uint32, tiles [][3]uint32) {
	t.Helper()
	slots := len(ids)
	bi := uploadU32(t, "ids", ids)
	words := MoEGroupWords(slots, experts)
	bg := scratch(t, "groups", words)
	run(t, "moe_group", func(c *gpu.Chain) error { return MoEGroup(c, bi, bg, slots, experts) })
	g := downloadU32(t, bg, words)
	n := int(g[0])
	if n > (words-moeOrder-slots)/3 {
		t.Fatalf("%d tiles, past the %d MoEGroupWords allows", n, (words-moeOrder-slots)/3)
	}
	order = g[moeOrder : moeOrder+slots]
	for i := range n {
		o := moeOrder + slots + 3*i
		tiles = append(tiles, [3]uint32{g[o], g[o+1], g[o+2]})
	}
	return order, tiles
}

// TestMoEGroupMatchesReference compares the grouping with ref.MoEGroup: the
// tiles exactly, and within each expert the same slots (the kernel's order
// among them is its atomics'). Shapes: a decoded token's 8 of 128, a 512-
// token prompt's, one slot, 1024 experts, and ids past the experts (left
// out).
func TestMoEGroupMatchesReference(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		tokens, used, experts int
	}{
		{"decode", 1, 8, 128},
		{"prefill 512", 512, 8, 128},
		{"one slot", 1, 1, 4},
		{"gpt-oss 33", 33, 4, 32},
		{"1024 experts", 300, 8, 1024},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids := moeIDs(uint64(tc.tokens), tc.tokens, tc.used, tc.experts)
			checkMoEGroup(t, ids, tc.experts)
		})
	}
	t.Run("ids past the experts", func(t *testing.T) {
		ids := []uint32{3, 9, 1, 3, 1 << 20, 0, 3}
		checkMoEGroup(t, ids, 4)
	})
}

func checkMoEGroup(t *testing.T, ids []uint32, experts int) {
	t.Helper()
	wantOrder, wantTiles := ref.MoEGroup(ids, experts, moeTile)
	order, tiles := runMoEGroup(t, ids, experts)
	if !slices.Equal(tiles, wantTiles) {
		t.Fatalf("tiles\n got %v\nwant %v", tiles, wantTiles)
	}
	for _, tl := range tiles {
		e, lo := tl[0], int(tl[1])
		for _, s := range order[lo : lo+int(tl[2])] {
			if ids[s] != e {
				t.Fatalf("tile %v holds slot %d of expert %d", tl, s, ids[s])
			}
		}
	}
	// Each expert's slots, which its tiles cover one after another, sorted.
	got := slices.Clone(order[:len(wantOrder)])
	for i := 0; i < len(tiles); {
		j := i
		for j < len(tiles) && tiles[j][0] == tiles[i][0] {
			j++
		}
		slices.Sort(got[tiles[i][1] : tiles[j-1][1]+tiles[j-1][2]])
		i = j
	}
	if !slices.Equal(got, wantOrder) {
		t.Fatalf("order\n got %v\nwant %v", order, wantOrder)
	}
}

// moeCase is a stack of experts and a batch of slots over it.
type moeCase struct {
	typ                 gguf.Type
	experts, rows, cols int
	tokens, used        int
	maxChunk            uint64 // 0: the device limit
	q                   []byte
	deq                 []float32
	ids                 []uint32
	w                   *gpu.Tensor
}

func newMoECase(t *testing.T, typ gguf.Type, experts, rows, cols, tokens, used int, maxChunk uint64) *moeCase {
	t.Helper()
	c := &moeCase{typ: typ, experts: experts, rows: rows, cols: cols, tokens: tokens, used: used, maxChunk: maxChunk}
	c.q, c.deq = remix(t, typ, experts*rows, cols)
	w, err := dev.NewStack("experts", typ, experts, experts*rows, cols, c.q, maxChunk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Release)
	c.w = w
	c.ids = moeIDs(uint64(tokens*7+used), tokens, used, experts)
	return c
}

// want is the reference product of x (rows of the experts' columns, xdiv
// slots a row) and each output's Σ|w·x|.
func (c *moeCase) want(t *testing.T, x []float32, xdiv int) (y, bound []float32) {
	t.Helper()
	y, err := ref.MoEMatMul(c.typ, c.rows, c.cols, c.q, c.ids, x, xdiv)
	if err != nil {
		t.Fatal(err)
	}
	for s, e := range c.ids {
		xr := x[(s/xdiv)*c.cols : (s/xdiv+1)*c.cols]
		_, b := denseMatMul(c.deq[int(e)*c.rows*c.cols:(int(e)+1)*c.rows*c.cols], c.rows, c.cols, xr, 1)
		bound = append(bound, b...)
	}
	return y, bound
}

// moeTol is the product's tolerance relative to Σ|w·x|: the matmul
// families' (matmulRTol: the tiled kernel's and the legacy matvec's
// summation; kquantTol for the K-quant matvec, whose parts sum 32
// weights), since a slot's row is summed exactly as a product of W's rows.
func moeTol(typ gguf.Type) float64 {
	if typ.BlockSize() == 256 {
		return kquantTol
	}
	return matmulRTol
}

// checkMoE compares got (y's rows at offset, stride ys) with want.
func checkMoE(t *testing.T, what string, got, want, bound, y0 []float32, rows, offset, ys int, tol float64) {
	t.Helper()
	worst := 0.0
	for s := range len(want) / rows {
		for r := range rows {
			g := float64(got[offset+s*ys+r])
			w, sc := float64(want[s*rows+r]), float64(bound[s*rows+r])
			if y0 != nil {
				w += float64(y0[offset+s*ys+r])
				sc += math.Abs(float64(y0[offset+s*ys+r]))
			}
			lim := tol*sc + 1e-30
			d := math.Abs(g - w)
			if !(d <= lim) {
				t.Fatalf("%s: slot %d row %d = %v, want %v (|diff| %.3g > %.3g)", what, s, r, g, w, d, lim)
			}
			worst = max(worst, d/lim)
		}
	}
	t.Logf("%s: worst %.2f of the tolerance", what, worst)
}

// TestMoEMatMulMatchesReference runs the grouped product for every type of
// the tiled kernel: gate/up (the used slots of a token share its row) and
// down (a row a slot), experts split over chunks, a placed and accumulated
// result, 37 tokens choosing 3 of 5 experts (the popular expert fills
// several tiles, a partial last) with 40-row experts (a partial column
// tile).
func TestMoEMatMulMatchesReference(t *testing.T) {
	types := append([]gguf.Type{gguf.TypeF32, gguf.TypeF16, gguf.TypeBF16}, quantTypes...)
	for i, typ := range types {
		if _, ok := matmulTiledTypes[typ]; !ok {
			continue
		}
		t.Run(typ.String(), func(t *testing.T) {
			const experts, rows, cols, tokens, used = 5, 40, 256, 37, 3
			rb, _ := typ.RowSize(cols)
			// Two experts a chunk: three chunks.
			c := newMoECase(t, typ, experts, rows, cols, tokens, used, uint64(2*rows)*uint64(rb))
			if len(c.w.Chunks) != 3 {
				t.Fatalf("%d chunks, want 3", len(c.w.Chunks))
			}
			slots := tokens * used
			bi := uploadU32(t, "ids", c.ids)
			bg := scratch(t, "groups", MoEGroupWords(slots, experts))
			for _, xdiv := range []int{used, 1} {
				x := randVec(uint64(10+i+xdiv), (slots/xdiv)*cols, 3)
				want, bound := c.want(t, x, xdiv)
				bx := upload(t, "x", x)
				for _, acc := range []bool{false, true} {
					const offset, ys = 3, rows + 5
					y0 := randVec(uint64(20+i), offset+slots*ys, 40)
					by := upload(t, "y", y0)
					a := MoEArgs{Slots: slots, XDiv: xdiv, Options: MatmulOptions{YOffset: offset, YStride: ys, Accumulate: acc}}
					run(t, "moe matmul", func(ch *gpu.Chain) error {
						if err := MoEGroup(ch, bi, bg, slots, experts); err != nil {
							return err
						}
						return MoEMatMul(ch, c.w, bx, bg, by, a)
					})
					var base []float32
					if acc {
						base = y0
					}
					checkMoE(t, fmt.Sprintf("%v xdiv=%d accumulate=%v", typ, xdiv, acc), download(t, by, offset+slots*ys), want, bound, base, rows, offset, ys, moeTol(typ))
				}
			}
		})
	}
}

// TestMoEMatVecMatchesReference runs the per-slot product a decoded token
// takes, for every quantized type: gate/up (the token's 8 slots share its
// row), down (a row a slot), each with and without the experts' biases,
// and down with the GLU fused (SiLU, GELU and gpt-oss's), over 12 experts
// spread across three chunks, at the three launch cases of moeVecLaunch:
// 1280 columns (16 rows a workgroup, one partial staging chunk), 768 (64
// rows of 4 lanes, one partial workgroup of 36 rows) and 2304 (two
// chunks, the second partial).
func TestMoEMatVecMatchesReference(t *testing.T) {
	for i, typ := range quantTypes {
		for _, cols := range []int{1280, 768, 2304} {
			t.Run(fmt.Sprintf("%v/%d", typ, cols), func(t *testing.T) {
				testMoEMatVec(t, i, typ, cols)
			})
		}
	}
}

func testMoEMatVec(t *testing.T, i int, typ gguf.Type, cols int) {
	const experts, rows, used = 12, 36, 8
	rb, _ := typ.RowSize(int64(cols))
	c := newMoECase(t, typ, experts, rows, cols, 1, used, uint64(5*rows)*uint64(rb))
	bi := uploadU32(t, "ids", c.ids)
	tol := moeTol(typ)
	for _, xdiv := range []int{used, 1} {
		x := randVec(uint64(30+i+xdiv), (used/xdiv)*cols, 3)
		want, bound := c.want(t, x, xdiv)
		bx := upload(t, "x", x)
		// The experts' biases, of the products' size (gpt-oss's are
		// tenths of the outputs).
		bias := randVec(uint64(45+i), experts*rows, 3)
		bb := upload(t, "bias", bias)
		for _, biased := range []bool{false, true} {
			for _, acc := range []bool{false, true} {
				const offset, ys = 1, rows + 3
				y0 := randVec(uint64(40+i), offset+used*ys, 40)
				by := upload(t, "y", y0)
				a := MoEArgs{Slots: used, XDiv: xdiv, Options: MatmulOptions{YOffset: offset, YStride: ys, Accumulate: acc}}
				var base []float32
				if acc {
					base = slices.Clone(y0)
				}
				if biased {
					a.Bias = bb
					if base == nil {
						base = make([]float32, len(y0))
					}
					for s, e := range c.ids {
						for r := range rows {
							base[offset+s*ys+r] += bias[int(e)*rows+r]
						}
					}
				}
				run(t, "moe matvec", func(ch *gpu.Chain) error { return MoEMatVec(ch, c.w, bx, bi, by, a) })
				checkMoE(t, fmt.Sprintf("%v xdiv=%d accumulate=%v bias=%v", typ, xdiv, acc, biased), download(t, by, offset+used*ys), want, bound, base, rows, offset, ys, tol)
			}
		}
	}
	for _, act := range []string{"silu", "gelu", "oai"} {
		var gateUp, h []float32
		for s := range used {
			gu := gluGateUp(uint64(50+i+s), cols)
			gateUp = append(gateUp, gu...)
			switch act {
			case "gelu":
				h = append(h, ref.GeGLUFused(gu, 1, cols)...)
			case "oai":
				h = append(h, ref.SwiGLUOAIFused(gu, 1, cols)...)
			default:
				h = append(h, ref.SwiGLUFused(gu, 1, cols)...)
			}
		}
		want, bound := c.want(t, h, 1)
		by := scratch(t, "y", used*rows)
		bx := upload(t, "gate_up", gateUp)
		a := MoEArgs{Slots: used, XDiv: 1, GLU: &GLUArgs{FF: cols, GELU: act == "gelu", OAI: act == "oai"}}
		run(t, "moe matvec glu", func(ch *gpu.Chain) error { return MoEMatVec(ch, c.w, bx, bi, by, a) })
		// The staged act(gate)·up values carry the elementwise
		// GLU's error (TestMatVecGLUMatchesReference); gluATol's
		// absolute part is below 1e-30 of these sums' scale.
		checkMoE(t, fmt.Sprintf("%v glu %s", typ, act), download(t, by, used*rows), want, bound, nil, rows, 0, rows, tol+gluRTol)
	}
}

// TestMoECombineMatchesReference checks the weighted sum of each token's
// slots, stored and added to a residual, with and without a scale.
func TestMoECombineMatchesReference(t *testing.T) {
	const tokens, used, dim = 7, 3, 100
	y := randVec(60, tokens*used*dim, 20)
	w := randVec(61, tokens*used, 1)
	by, bw := upload(t, "y", y), upload(t, "weights", w)
	for _, scale := range []float32{0, 2.5} {
		want := ref.MoECombine(y, w, tokens, used, dim, scale)
		for _, acc := range []bool{false, true} {
			out0 := randVec(62, tokens*dim, 5)
			bo := upload(t, "out", out0)
			run(t, "moe combine", func(c *gpu.Chain) error {
				return MoECombine(c, by, bw, bo, MoECombineArgs{Tokens: tokens, Used: used, Dim: dim, Scale: scale, Accumulate: acc})
			})
			exp := want
			if acc {
				exp = ref.Add(out0, want)
			}
			// Three products and their sum in f32 against float64, the
			// scale and the residual add: 6 roundings of terms up to ~60.
			assertClose(t, fmt.Sprintf("scale %v accumulate %v", scale, acc), download(t, bo, tokens*dim), exp, 1e-4, 1e-6)
		}
	}
}

// TestMoEBadShapes: each bad argument is refused by name.
func TestMoEBadShapes(t *testing.T) {
	c := newMoECase(t, gguf.TypeQ8_0, 4, 32, 64, 2, 2, 0)
	plain := newTensor(t, "plain", gguf.TypeQ8_0, 4*32, 64, c.q, 0)
	ids := uploadU32(t, "ids", c.ids)
	x, y := scratch(t, "x", 4*128), scratch(t, "y", 4*32)
	groups := scratch(t, "groups", MoEGroupWords(4, 4))
	f32 := newMoECase(t, gguf.TypeF32, 4, 32, 64, 2, 2, 0)
	for _, tc := range []struct {
		name, want string
		f          func(ch *gpu.Chain) error
	}{
		{"not a stack", "not a stack", func(ch *gpu.Chain) error {
			return MoEMatVec(ch, plain, x, ids, y, MoEArgs{Slots: 4, XDiv: 2})
		}},
		{"no slots", "must be positive", func(ch *gpu.Chain) error {
			return MoEMatVec(ch, c.w, x, ids, y, MoEArgs{Slots: 0, XDiv: 1})
		}},
		{"bias in the options", "MoEArgs.Bias", func(ch *gpu.Chain) error {
			return MoEMatVec(ch, c.w, x, ids, y, MoEArgs{Slots: 4, XDiv: 2, Options: MatmulOptions{Bias: x}})
		}},
		{"short x", "x buffer", func(ch *gpu.Chain) error {
			return MoEMatVec(ch, c.w, x, ids, y, MoEArgs{Slots: 4, XDiv: 1, Options: MatmulOptions{XStride: 200}})
		}},
		{"short y", "y buffer", func(ch *gpu.Chain) error {
			return MoEMatVec(ch, c.w, x, ids, y, MoEArgs{Slots: 4, XDiv: 1, Options: MatmulOptions{YStride: 40}})
		}},
		{"glu width", "glu ff", func(ch *gpu.Chain) error {
			return MoEMatVec(ch, c.w, x, ids, y, MoEArgs{Slots: 4, XDiv: 1, GLU: &GLUArgs{FF: 32}})
		}},
		{"float matvec", "no expert matvec", func(ch *gpu.Chain) error {
			return MoEMatVec(ch, f32.w, x, ids, y, MoEArgs{Slots: 4, XDiv: 1})
		}},
		{"grouped glu", "no fused GLU", func(ch *gpu.Chain) error {
			return MoEMatMul(ch, c.w, x, groups, y, MoEArgs{Slots: 4, XDiv: 1, GLU: &GLUArgs{FF: 64}})
		}},
		{"grouped bias", "or bias", func(ch *gpu.Chain) error {
			return MoEMatMul(ch, c.w, x, groups, y, MoEArgs{Slots: 4, XDiv: 1, Bias: scratch(t, "bias", 4*32)})
		}},
		{"short bias", "bias buffer", func(ch *gpu.Chain) error {
			return MoEMatVec(ch, c.w, x, ids, y, MoEArgs{Slots: 4, XDiv: 1, Bias: scratch(t, "short bias", 4*32-1)})
		}},
		{"bias is y", "bias and y", func(ch *gpu.Chain) error {
			return MoEMatVec(ch, c.w, x, ids, y, MoEArgs{Slots: 4, XDiv: 1, Bias: y})
		}},
		{"short groups", "groups buffer", func(ch *gpu.Chain) error {
			return MoEMatMul(ch, c.w, x, ids, y, MoEArgs{Slots: 4, XDiv: 1})
		}},
		{"too many experts", "at most", func(ch *gpu.Chain) error { return MoEGroup(ch, ids, groups, 4, 5000) }},
		{"combine shape", "must be positive", func(ch *gpu.Chain) error {
			return MoECombine(ch, y, x, groups, MoECombineArgs{Tokens: 0, Used: 2, Dim: 8})
		}},
		{"combine in place", "must not be an input", func(ch *gpu.Chain) error {
			return MoECombine(ch, y, x, y, MoECombineArgs{Tokens: 1, Used: 2, Dim: 8})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := dev.NewChain("bad shapes")
			if err != nil {
				t.Fatal(err)
			}
			defer ch.Discard()
			err = tc.f(ch)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := dev.NewStack("bad", gguf.TypeQ8_0, 3, 4*32, 64, c.q, 0); err == nil || !strings.Contains(err.Error(), "whole matrices") {
		t.Fatalf("a stack of 3 over 128 rows: %v", err)
	}
}

// TestMoEAddBiasMatchesReference adds the experts' biases to placed slot
// rows ([gate | up] rows at the up half) and checks the gap is untouched.
func TestMoEAddBiasMatchesReference(t *testing.T) {
	const experts, slots, width, stride, offset = 6, 9, 70, 140, 70
	ids := moeIDs(3, 3, 3, experts)
	bias := randVec(80, experts*width, 2)
	y0 := randVec(81, slots*stride, 5)
	want := slices.Clone(y0)
	ref.MoEAddBias(want, bias, ids, width, stride, offset)
	by := upload(t, "y", y0)
	run(t, "moe add bias", func(c *gpu.Chain) error {
		return MoEAddBias(c, upload(t, "bias", bias), uploadU32(t, "ids", ids), by, slots, experts, width, stride, offset)
	})
	// One f32 add each, as the reference's.
	assertClose(t, "y", download(t, by, slots*stride), want, 0, 0)
}
