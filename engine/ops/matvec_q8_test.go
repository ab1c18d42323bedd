package ops

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/x448/float16"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
	"github.com/hearthstudio/hearth/gguf"
)

// q8Types are the weight types MatVecQ8 multiplies.
var q8Types = []gguf.Type{gguf.TypeQ4_K, gguf.TypeQ6_K, gguf.TypeQ8_0}

// q8Weights is one weight matrix of ggml's quantization: its GGUF bytes,
// the f32 weights ggml dequantizes them to, and the device tensor.
type q8Weights struct {
	name    string
	typ     gguf.Type
	rows, k int
	raw     []byte
	wf      []float32
	w       *gpu.Tensor
}

// q8Cases are typ's test matrices: the K-quants in every kquantShapes
// shape (ggml's super-blocks), Q8_0 as ggml's rows remixed into one
// block, a 9×96 matrix, and a 37×1280 one in chunks of 10 rows (a ragged
// last chunk and workgroup).
func q8Cases(t *testing.T, typ gguf.Type) []q8Weights {
	t.Helper()
	var out []q8Weights
	if typ.BlockSize() == 256 {
		q, deq := ggmlKBlocks(t, typ)
		for _, s := range kquantShapes {
			raw, wf := kquantWeights(q, deq, s.rows, s.nb, s.pick)
			out = append(out, q8Weights{s.name, typ, s.rows, 256 * s.nb, raw, wf, s.tensor(t, typ, raw)})
		}
		return out
	}
	for _, s := range []struct{ rows, k, chunk int }{{1, 32, 0}, {9, 96, 0}, {37, 1280, 10}} {
		raw, wf := remix(t, typ, s.rows, s.k)
		w := newTensor(t, "w", typ, s.rows, s.k, raw, 0)
		if s.chunk > 0 {
			w = newChunkedTensor(t, typ, s.rows, s.k, raw, s.chunk)
		}
		out = append(out, q8Weights{fmt.Sprintf("remix %dx%d", s.rows, s.k), typ, s.rows, s.k, raw, wf, w})
	}
	return out
}

// q8Tol bounds |GPU − ref.MatVecQ8| as a fraction of the reference's scale
// (Σ|term| over the f32 terms of every part). The integer sums are exact on
// both sides, so the difference is f32 rounding only: per part ≤ 6
// operations (two or three products, a difference, two scalings, a sum)
// that a driver may also fuse into FMAs, then ≤ 40 parts a lane at
// K=1280 over 16 lanes (3) and the 16 lane sums: ≤ 30 roundings of 2⁻²⁴
// relative to partial sums bounded by the scale, ≈ 1.8e-6. 1e-5 leaves a
// factor 5. A wrong nibble, bit, pairing or scale moves a sum by a whole
// level times an activation step, ≳ 1e-3 of the scale.
const q8Tol = 1e-5

// quantizeQ8On runs QuantizeQ8 over x on the device and decodes its words.
func quantizeQ8On(t *testing.T, x []float32) (*gpu.Buffer, ref.Q8) {
	t.Helper()
	k := len(x)
	bx, bq := upload(t, "x", x), scratch(t, "xq", Q8Words(k))
	run(t, "quantize q8", func(c *gpu.Chain) error { return QuantizeQ8(c, bx, bq, k, 1) })
	return bq, downloadQ8(t, bq, k)
}

func downloadQ8(t *testing.T, bq *gpu.Buffer, k int) ref.Q8 {
	t.Helper()
	raw, err := bq.Read(0, uint64(Q8Words(k))*4)
	if err != nil {
		t.Fatal(err)
	}
	words := make([]uint32, Q8Words(k))
	for i := range words {
		words[i] = uint32(raw[4*i]) | uint32(raw[4*i+1])<<8 | uint32(raw[4*i+2])<<16 | uint32(raw[4*i+3])<<24
	}
	q, err := ref.DecodeQ8(words, k, Q8Packed(dev))
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// assertQ8Quantizes checks the device's quantization q of values v, block
// by block: d is the block's max|v| times f32(1/127) (within rel of it,
// for values the device computed itself), every level is v/d rounded to
// the nearest (a tie either way: WGSL's 1/d may be off by 2.5 ulp) and
// within ±127, and the half-block sums are the sums of those levels.
func assertQ8Quantizes(t *testing.T, what string, q ref.Q8, v []float32, rel float64) {
	t.Helper()
	for b := range q.D {
		var amax float64
		for _, e := range v[32*b : 32*b+32] {
			amax = max(amax, math.Abs(float64(e)))
		}
		want := float64(float32(amax) * float32(1.0/127))
		if d := float64(q.D[b]); math.Abs(d-want) > rel*want {
			t.Fatalf("%s: block %d scale %v, want %v (max|x| %v / 127)", what, b, d, want, amax)
		}
		var sums [2]int32
		for i := 32 * b; i < 32*b+32; i++ {
			l := float64(q.Q[i])
			sums[i%32/16] += int32(q.Q[i])
			if q.D[b] == 0 {
				if l != 0 {
					t.Fatalf("%s: [%d] level %v in a block of zeros", what, i, l)
				}
				continue
			}
			r := float64(v[i]) / float64(q.D[b])
			// Half a level, plus the device's 1/d (2.5 ulp) and product
			// rounding (≤ 4e-7 relative) and the values' own rel, at up to
			// 127 levels.
			if math.Abs(r-l) > 0.5+127*(4e-7+rel) || math.Abs(l) > 127 {
				t.Fatalf("%s: [%d] level %v for x/d = %v", what, i, l, r)
			}
		}
		if sums[0] != q.Sums[2*b] || sums[1] != q.Sums[2*b+1] {
			t.Fatalf("%s: block %d sums %v, want the levels' %v", what, b, q.Sums[2*b:2*b+2], sums)
		}
	}
}

// TestQuantizeQ8MatchesReference checks QuantizeQ8 against
// ref.QuantizeQ8 on production-magnitude activations with a block of
// zeros, a block of one spike and both signs of extremes: scales equal
// bit for bit (a product and a max), levels equal but where x/d sits
// within rounding of a half-integer.
func TestQuantizeQ8MatchesReference(t *testing.T) {
	const k = 1280
	x := kquantActs(t, k, 1, true, 5)
	for i := 64; i < 96; i++ {
		x[i] = 0
	}
	x[100], x[130] = 1e-30, -3.4e37
	_, got := quantizeQ8On(t, x)
	want, err := ref.QuantizeQ8(x)
	if err != nil {
		t.Fatal(err)
	}
	assertQ8Quantizes(t, "quantize q8", got, x, 0)
	ties := 0
	for i := range want.Q {
		if got.Q[i] != want.Q[i] {
			ties++
		}
	}
	// A level off by one needs x/d within ~3 ulp of a half-integer: about
	// 1 in 10^5 of the 1280 values; 3 would say the rounding is wrong.
	if ties > 2 {
		t.Fatalf("quantize q8: %d of %d levels differ from ref.QuantizeQ8", ties, k)
	}
}

// TestQuantizeQ8FusedMatchesReference checks the normed and GLU forms: the
// device's levels must quantize ref.RMSNorm / ref.SwiGLUFused /
// ref.GeGLUFused of the same input, whose values the device computes to
// a few ulp (rel 1e-5 covers the norm's reduction order and the
// activations' exp).
func TestQuantizeQ8FusedMatchesReference(t *testing.T) {
	const k = 1280
	x := kquantActs(t, k, 1, true, 6)
	g := randVec(61, k, 0.5)
	for _, onePlus := range []bool{false, true} {
		a := NormArgs{Rows: 1, Dim: k, Eps: 1e-5, OnePlus: onePlus}
		bx, bg, bq := upload(t, "x", x), upload(t, "g", g), scratch(t, "xq", Q8Words(k))
		run(t, "quantize q8 normed", func(c *gpu.Chain) error { return QuantizeQ8Normed(c, bx, bg, bq, a) })
		xn := ref.RMSNorm(x, g, ref.NormArgs{Rows: 1, Dim: k, Eps: a.Eps, OnePlus: onePlus})
		assertQ8Quantizes(t, "quantize q8 normed", downloadQ8(t, bq, k), xn, 1e-5)
	}
	for _, gelu := range []bool{false, true} {
		gateUp := gluGateUp(71, k)
		h := ref.SwiGLUFused(gateUp, 1, k)
		if gelu {
			h = ref.GeGLUFused(gateUp, 1, k)
		}
		bx, bq := upload(t, "gate_up", gateUp), scratch(t, "xq", Q8Words(k))
		run(t, "quantize q8 glu", func(c *gpu.Chain) error { return QuantizeQ8GLU(c, bx, bq, GLUArgs{FF: k, GELU: gelu}, 1) })
		assertQ8Quantizes(t, "quantize q8 glu", downloadQ8(t, bq, k), h, 1e-5)
	}
}

// TestMatVecQ8MatchesReference checks MatVecQ8 on every q8Cases matrix,
// unit and production activations, overwriting y at an offset and
// accumulating into it, against two oracles: ref.MatVecQ8 on the levels
// the device wrote (q8Tol: the same integers, f32 rounding apart), and
// the f32 product of ggml's dequantized weights with the unquantized x,
// which may differ by the activations' quantization: each activation
// moves by at most half its block's step d/2, so by Σ|w_i|·d_i/2.
func TestMatVecQ8MatchesReference(t *testing.T) {
	for _, typ := range q8Types {
		for si, s := range q8Cases(t, typ) {
			w, raw, wf, k := s.w, s.raw, s.wf, s.k
			for _, production := range []bool{false, true} {
				x := kquantActs(t, k, 1, production, uint64(si))
				bq, xq := quantizeQ8On(t, x)
				want, scale, err := ref.MatVecQ8(typ, s.rows, k, raw, xq)
				if err != nil {
					t.Fatal(err)
				}
				f32, _ := kquantOracle(wf, s.rows, k, x, 1)
				const off = 3
				y0 := randVec(uint64(80+si), s.rows+off, 1e3)
				for _, acc := range []bool{false, true} {
					by := upload(t, "y", y0)
					run(t, "matvec q8", func(c *gpu.Chain) error {
						return MatVecQ8(c, w, bq, by, 1, MatmulOptions{YOffset: off, Accumulate: acc})
					})
					got := download(t, by, s.rows+off)
					for i := range off {
						if got[i] != y0[i] {
							t.Fatalf("%v %s: y[%d] before the offset changed", typ, s.name, i)
						}
					}
					for r := range s.rows {
						g := float64(got[off+r])
						base := 0.0
						if acc {
							base = float64(y0[off+r])
						}
						what := typ.String() + " " + s.name
						if d := math.Abs(g - base - float64(want[r])); !(d <= q8Tol*scale[r]+1e-6*math.Abs(base)) {
							t.Fatalf("%s production=%v acc=%v: [%d] = %v, want %v (|diff| %.3g > %.0e·%.3g)", what, production, acc, r, g-base, want[r], d, q8Tol, scale[r])
						}
						var step float64
						for i := range k {
							step += math.Abs(float64(wf[r*k+i])) * float64(xq.D[i/32]) / 2
						}
						if d := math.Abs(g - base - f32[r]); !(d <= step*(1+1e-3)+q8Tol*scale[r]+1e-6*math.Abs(base)) {
							t.Fatalf("%s production=%v: [%d] = %v, f32 product %v: |diff| %.3g over the activations' quantization bound %.3g", what, production, r, g-base, f32[r], d, step)
						}
					}
				}
			}
		}
	}
}

// TestMatVecQ8LaunchShapes runs other lane counts than q8Launch's on the
// last (37-row) q8Cases matrix: the lanes' split of the parts must not
// change the sum beyond rounding.
func TestMatVecQ8LaunchShapes(t *testing.T) {
	for _, typ := range q8Types {
		cases := q8Cases(t, typ)
		s := cases[len(cases)-1]
		w := s.w
		bq, xq := quantizeQ8On(t, kquantActs(t, s.k, 1, true, 9))
		want, scale, err := ref.MatVecQ8(typ, s.rows, s.k, s.raw, xq)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range []matvecQ8Launch{{wg: 256, rows: 32}, {wg: 256, rows: 8}, {wg: 128, rows: 32}, {wg: 64, rows: 1}} {
			by := scratch(t, "y", s.rows)
			run(t, "matvec q8", func(c *gpu.Chain) error { return matvecQ8With(c, w, bq, by, 1, MatmulOptions{}, l) })
			got := download(t, by, s.rows)
			for r := range want {
				if d := math.Abs(float64(got[r] - want[r])); !(d <= q8Tol*scale[r]) {
					t.Fatalf("%v wg %d rows %d: [%d] = %v, want %v", typ, l.wg, l.rows, r, got[r], want[r])
				}
			}
		}
	}
}

func TestMatVecQ8RejectsBadShapes(t *testing.T) {
	q4, _ := remix(t, gguf.TypeQ4_K, 4, 512)
	w := newTensor(t, "w", gguf.TypeQ4_K, 4, 512, q4, 0)
	q40, _ := remix(t, gguf.TypeQ4_0, 4, 512)
	w8 := newTensor(t, "w8", gguf.TypeQ4_0, 4, 512, q40, 0)
	x := upload(t, "x", randVec(1, 1024, 1))
	xq := scratch(t, "xq", Q8Words(512))
	y := scratch(t, "y", 8)
	checkRejects(t, []rejectCase{
		{"q4_0 weight", "Q4_K, Q6_K and Q8_0 only", func(c *gpu.Chain) error { return MatVecQ8(c, w8, xq, y, 1, MatmulOptions{}) }},
		{"short xq", "xq buffer", func(c *gpu.Chain) error { return MatVecQ8(c, w, scratch(t, "xq", 100), y, 1, MatmulOptions{}) }},
		{"y past the end", "y buffer", func(c *gpu.Chain) error { return MatVecQ8(c, w, xq, y, 1, MatmulOptions{YOffset: 5}) }},
		{"xq is y", "same buffer", func(c *gpu.Chain) error { return MatVecQ8(c, w, xq, xq, 1, MatmulOptions{}) }},
		{"nil weight", "nil", func(c *gpu.Chain) error { return MatVecQ8(c, nil, xq, y, 1, MatmulOptions{}) }},
		{"nine rows", "want 1 to 8", func(c *gpu.Chain) error { return MatVecQ8(c, w, xq, y, 9, MatmulOptions{}) }},
		{"xq short of 2 rows", "xq buffer", func(c *gpu.Chain) error { return MatVecQ8(c, w, xq, y, 2, MatmulOptions{}) }},
		{"y stride under a row", "y stride", func(c *gpu.Chain) error {
			return MatVecQ8(c, w, upload(t, "xq2", make([]float32, int(Q8Bytes(512, 2)/4))), y, 2, MatmulOptions{YStride: 3})
		}},
		{"k not blocks", "multiple of 32", func(c *gpu.Chain) error { return QuantizeQ8(c, x, xq, 48, 1) }},
		{"short x", "x buffer", func(c *gpu.Chain) error { return QuantizeQ8(c, x, xq, 2048, 1) }},
		{"no rows", "0 rows", func(c *gpu.Chain) error { return QuantizeQ8(c, x, xq, 512, 0) }},
		{"normed rows past x", "x buffer", func(c *gpu.Chain) error {
			return QuantizeQ8Normed(c, x, x, xq, NormArgs{Rows: 3, Dim: 512, Eps: 1e-5})
		}},
		{"normed eps", "eps", func(c *gpu.Chain) error {
			return QuantizeQ8Normed(c, x, x, xq, NormArgs{Rows: 1, Dim: 512, Eps: float32(math.NaN())})
		}},
		{"glu short", "x buffer", func(c *gpu.Chain) error { return QuantizeQ8GLU(c, x, xq, GLUArgs{FF: 1024}, 1) }},
	})
}

// rejectCase is a call that must fail with an error containing want.
type rejectCase struct {
	name, want string
	op         func(c *gpu.Chain) error
}

// checkRejects records each case's call into a chain of its own, which it
// then discards.
func checkRejects(t *testing.T, cases []rejectCase) {
	t.Helper()
	for _, tc := range cases {
		c, err := dev.NewChain(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		err = tc.op(c)
		c.Discard()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

// ggmlActQ8 is ggml's own quantization of act.f32 for typ's vec_dot:
// act.Q8_K.bin (blocks of 256: d f32, levels −128..127, sums of 16) for
// the K-quants, act.Q8_0.bin (blocks of 32: d f16, levels) for Q8_0, in
// the form MatVecQ8 reads. Q8_K's one scale per 256 is every 32-block's.
func ggmlActQ8(t *testing.T, typ gguf.Type) ref.Q8 {
	t.Helper()
	const k = 512
	q := ref.Q8{D: make([]float32, k/32), Q: make([]int8, k), Sums: make([]int32, k/16)}
	if typ == gguf.TypeQ8_0 {
		raw := ggmlFile(t, "act.Q8_0.bin")
		if len(raw) != 16*34 {
			t.Fatalf("act.Q8_0.bin: %d bytes, want %d", len(raw), 16*34)
		}
		for b := range 16 {
			q.D[b] = float16.Frombits(binary.LittleEndian.Uint16(raw[34*b:])).Float32()
			for i := range 32 {
				q.Q[32*b+i] = int8(raw[34*b+2+i])
			}
		}
	} else {
		raw := ggmlFile(t, "act.Q8_K.bin")
		if len(raw) != 2*292 {
			t.Fatalf("act.Q8_K.bin: %d bytes, want %d", len(raw), 2*292)
		}
		for b := range 2 {
			blk := raw[292*b:]
			d := math.Float32frombits(binary.LittleEndian.Uint32(blk))
			for i := range 8 {
				q.D[8*b+i] = d
			}
			for i := range 256 {
				q.Q[256*b+i] = int8(blk[4+i])
			}
		}
	}
	for i, l := range q.Q {
		q.Sums[i/16] += int32(l)
	}
	if typ != gguf.TypeQ8_0 {
		// ggml's own bsums must be those sums.
		raw := ggmlFile(t, "act.Q8_K.bin")
		for i := range q.Sums {
			if s := int16(binary.LittleEndian.Uint16(raw[292*(i/16)+260+2*(i%16):])); int32(s) != q.Sums[i] {
				t.Fatalf("act.Q8_K.bin: bsum %d = %d, the levels sum to %d", i, s, q.Sums[i])
			}
		}
	}
	return q
}

// encodeQ8 is quantize_q8's word layout of q on the test device
// (ref.DecodeQ8's inverse).
func encodeQ8(q ref.Q8) []uint32 {
	k := len(q.Q)
	words := make([]uint32, Q8Words(k))
	u := func(i int) uint32 { return uint32(int32(q.Q[i]) + 128) }
	for g := range k / 4 {
		if Q8Packed(dev) {
			for j := range 4 {
				words[g] |= uint32(uint8(q.Q[4*g+j])) << (8 * j)
			}
			continue
		}
		words[2*g] = u(4*g+2) | u(4*g)<<16
		words[2*g+1] = u(4*g+3) | u(4*g+1)<<16
	}
	for b, d := range q.D {
		words[k/2+b] = math.Float32bits(d)
	}
	for i, s := range q.Sums {
		words[k/2+k/32+i] = uint32(s)
	}
	return words
}

// TestMatVecQ8MatchesGGMLVecDot is the external oracle of the integer
// products: ggml's vec_dot of its 8×512 test rows with its own quantized
// activations (<T>.vecdot.f32, ggml's generic C kernels), against
// MatVecQ8 and ref.MatVecQ8 given those very levels and scales (Q8_K's
// levels reach −128: u = 0, inside the kernel's bounds). The integer sums
// are the same; the f32 combination of scales differs in order, so the
// tolerance is q8Tol of the reference's term magnitude, as ggml's README
// advises ~1e-5 for any other order. Row 3 is all zeros: exactly 0.
func TestMatVecQ8MatchesGGMLVecDot(t *testing.T) {
	for _, typ := range q8Types {
		raw := ggmlFile(t, typ.String()+".quant.bin")
		want := gpu.F32From(ggmlFile(t, typ.String()+".vecdot.f32"))
		xq := ggmlActQ8(t, typ)
		refY, scale, err := ref.MatVecQ8(typ, 8, 512, raw, xq)
		if err != nil {
			t.Fatal(err)
		}
		w := newTensor(t, "w", typ, 8, 512, raw, 0)
		words := encodeQ8(xq)
		bq, err := dev.NewBufferFrom("xq", gpu.U32Bytes(words))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(bq.Release)
		by := scratch(t, "y", 8)
		run(t, "matvec q8", func(c *gpu.Chain) error { return MatVecQ8(c, w, bq, by, 1, MatmulOptions{}) })
		got := download(t, by, 8)
		for r := range 8 {
			for _, side := range []struct {
				name string
				v    float32
			}{{"MatVecQ8", got[r]}, {"ref.MatVecQ8", refY[r]}} {
				if d := math.Abs(float64(side.v - want[r])); !(d <= q8Tol*scale[r]) || (want[r] == 0) != (side.v == 0) {
					t.Errorf("%v row %d: %s %v, ggml's vec_dot %v (|diff| %.3g > %.0e·%.3g)", typ, r, side.name, side.v, want[r], d, q8Tol, scale[r])
				}
			}
		}
	}
}

// TestQuantizeQ8MatchesGGMLQ8_1 quantizes act.f32 on the device beside
// ggml's quantize_row_q8_1_ref of it (act.Q8_1.bin: d and s as f16, the
// levels computed with the unrounded d = max|x|/127). The levels must be
// ggml's wherever x/d is not within 1e-4 of a half-integer (ggml rounds
// half away from zero and divides, quantize_q8 rounds half to even and
// multiplies by f32(1/127): they can part only there), and d ggml's d to
// its f16 rounding.
func TestQuantizeQ8MatchesGGMLQ8_1(t *testing.T) {
	x := gpu.F32From(ggmlFile(t, "act.f32"))
	raw := ggmlFile(t, "act.Q8_1.bin")
	if len(x) != 512 || len(raw) != 16*36 {
		t.Fatalf("act.f32 and act.Q8_1.bin: %d floats and %d bytes, want 512 and %d", len(x), len(raw), 16*36)
	}
	_, got := quantizeQ8On(t, x)
	for b := range 16 {
		blk := raw[36*b:]
		d := float64(float16.Frombits(binary.LittleEndian.Uint16(blk)).Float32())
		if math.Abs(float64(got.D[b])-d) > d/2048 {
			t.Errorf("block %d: d %v, ggml's %v (f16)", b, got.D[b], d)
		}
		for i := range 32 {
			want := int8(blk[4+i])
			r := float64(x[32*b+i]) / float64(got.D[b])
			if got.Q[32*b+i] != want && math.Abs(math.Abs(r-math.Trunc(r))-0.5) > 1e-4 {
				t.Errorf("block %d [%d]: level %d, ggml's %d (x/d = %v)", b, i, got.Q[32*b+i], want, r)
			}
		}
	}
}

// TestMatVecQ8Rows: several rows at once (a batched decode's tokens) give
// each row the bits it gets alone. The quantizers write each row's words
// Q8RowWords apart, equal to that row quantized by itself (plain, normed
// with each row's own scale, and the GLU of each row's [gate | up]); then
// MatVecQ8 on m rows, each weight read once for all, writes each row's
// outputs y_stride apart, equal to the single-row product.
func TestMatVecQ8Rows(t *testing.T) {
	const k = 768
	rows := MaxQ8Rows
	x := make([]float32, 0, rows*2*k)
	for r := range rows {
		x = append(x, kquantActs(t, k, 1, r%2 == 1, uint64(300+r))...)
	}
	for range rows { // the GLU's up halves
		x = append(x, randVec(uint64(len(x)), k, 2)...)
	}
	g := randVec(62, k, 0.5)
	bx, bg := upload(t, "x", x), upload(t, "g", g)
	// row is word range of row r of a multi-row xq.
	row := func(all []uint32, r int) []uint32 { return all[r*Q8RowWords(k) : r*Q8RowWords(k)+Q8Words(k)] }
	words := func(b *gpu.Buffer, n int) []uint32 {
		raw, err := b.Read(0, uint64(n)*4)
		if err != nil {
			t.Fatal(err)
		}
		return gpu.U32From(raw)
	}
	quantizers := []struct {
		name string
		xlen int // floats of x a row reads
		all  func(c *gpu.Chain, xq *gpu.Buffer) error
		one  func(c *gpu.Chain, x, xq *gpu.Buffer) error
	}{
		{"plain", k, func(c *gpu.Chain, xq *gpu.Buffer) error { return QuantizeQ8(c, bx, xq, k, rows) },
			func(c *gpu.Chain, x, xq *gpu.Buffer) error { return QuantizeQ8(c, x, xq, k, 1) }},
		{"normed", k, func(c *gpu.Chain, xq *gpu.Buffer) error {
			return QuantizeQ8Normed(c, bx, bg, xq, NormArgs{Rows: rows, Dim: k, Eps: 1e-5, OnePlus: true})
		}, func(c *gpu.Chain, x, xq *gpu.Buffer) error {
			return QuantizeQ8Normed(c, x, bg, xq, NormArgs{Rows: 1, Dim: k, Eps: 1e-5, OnePlus: true})
		}},
		{"glu", 2 * k, func(c *gpu.Chain, xq *gpu.Buffer) error {
			return QuantizeQ8GLU(c, bx, xq, GLUArgs{FF: k, GELU: true}, rows)
		},
			func(c *gpu.Chain, x, xq *gpu.Buffer) error {
				return QuantizeQ8GLU(c, x, xq, GLUArgs{FF: k, GELU: true}, 1)
			}},
	}
	var xqAll *gpu.Buffer
	for _, q := range quantizers {
		all := scratch(t, "xq rows", int(Q8Bytes(k, rows)/4))
		run(t, "quantize q8 rows", func(c *gpu.Chain) error { return q.all(c, all) })
		got := words(all, int(Q8Bytes(k, rows)/4))
		for r := range rows {
			one := scratch(t, "xq", Q8Words(k))
			xr := upload(t, "x row", x[r*q.xlen:(r+1)*q.xlen])
			run(t, "quantize q8", func(c *gpu.Chain) error { return q.one(c, xr, one) })
			if !slices.Equal(row(got, r), words(one, Q8Words(k))) {
				t.Fatalf("%s: row %d of %d quantized together differs from the row alone", q.name, r, rows)
			}
		}
		if q.name == "plain" {
			xqAll = all
		}
	}
	// 37 weight rows in chunks of 10 (a chunked tensor's offsets), the
	// outputs at an offset and a stride past the rows.
	const n, off = 37, 3
	stride := n + 5
	for _, typ := range q8Types {
		raw, _ := remix(t, typ, n, k)
		w := newChunkedTensor(t, typ, n, k, raw, 10)
		for _, m := range []int{2, 3, rows} {
			y := scratch(t, "y", off+(m-1)*stride+n)
			run(t, "matvec q8 rows", func(c *gpu.Chain) error {
				return MatVecQ8(c, w, xqAll, y, m, MatmulOptions{YOffset: off, YStride: stride})
			})
			got := download(t, y, off+(m-1)*stride+n)
			for r := range m {
				xr, err := dev.NewBufferFrom("xq row", gpu.U32Bytes(row(words(xqAll, int(Q8Bytes(k, rows)/4)), r)))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(xr.Release)
				one := scratch(t, "y1", n)
				run(t, "matvec q8", func(c *gpu.Chain) error { return MatVecQ8(c, w, xr, one, 1, MatmulOptions{}) })
				if want := download(t, one, n); !slices.Equal(got[off+r*stride:off+r*stride+n], want) {
					t.Fatalf("%v, %d rows: row %d differs from its product alone", typ, m, r)
				}
			}
		}
	}
}
