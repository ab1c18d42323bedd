package ops

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
	"github.com/hearthstudio/hearth/gguf"
)

// matmulBackwardOracle is dX = dY·W over already dequantized W (rows×cols), summed
// in float64, and bound[i] = Σ_n |dy·w| for each output: the scale a float32
// sum's rounding error is proportional to.
func matmulBackwardOracle(w []float32, rows, cols int, dy []float32, m int) (dx, bound []float32) {
	dx, bound = make([]float32, m*cols), make([]float32, m*cols)
	for j := range m {
		for i := range cols {
			var s, a float64
			for r := range rows {
				p := float64(dy[j*rows+r]) * float64(w[r*cols+i])
				s += p
				a += math.Abs(p)
			}
			dx[j*cols+i], bound[j*cols+i] = float32(s), float32(a)
		}
	}
	return dx, bound
}

// matmulBackwardTol is the GPU's allowed error relative to Σ|dy·w| of an output
// whose sum runs over n rows of W. Each thread adds its n products one after
// another (one row of W per step, no tree), so the textbook bound for a
// recursive f32 sum is n·2⁻²⁴ of Σ|terms|; each product is rounded once more
// (+1), the decoded weight may differ from the CPU's by a rounding of d·q − m
// (+2, the K-quant mins are no larger than the sub-block's largest |w|, see
// kquantTol) and the scale multiplies once (+1). A wrong nibble, bit or
// scale moves a sum by whole quantization steps, ~1e-3 of Σ|dy·w| or more,
// so even the n=200 bound (1.2e-5) is far below a decoder bug. (Measured
// worst on lavapipe, logged by -v: 0.33 of the bound, with n = 8 rows.)
func matmulBackwardTol(n int) float64 { return float64(n+4) * 0x1p-24 }

// assertMatmulBackward compares got with want within matmulBackwardTol(n)·bound,
// bound being Σ|products| of each output (MatMulTN uses it too).
func assertMatmulBackward(t testing.TB, what string, got, want, bound []float32, n int) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d values, want %d", what, len(got), len(want))
	}
	rtol := matmulBackwardTol(n)
	worst, at, seen := 0.0, -1, 0.0
	for i := range want {
		g, w := float64(got[i]), float64(want[i])
		if math.IsNaN(g) || math.IsInf(g, 0) {
			t.Fatalf("%s: [%d] = %v, want %v", what, i, g, w)
		}
		tol := rtol*float64(bound[i]) + 1e-30
		e := math.Abs(g-w) / tol
		seen = max(seen, e)
		if e > 1 && e > worst {
			worst, at = e, i
		}
	}
	if at >= 0 {
		t.Fatalf("%s: [%d] = %v, want %v (|diff| %.3g is %.3g× the tolerance %.3g·Σ|products|)",
			what, at, got[at], want[at], math.Abs(float64(got[at]-want[at])), worst, rtol)
	}
	t.Logf("%s: worst error %.3g of the tolerance (%.3g·Σ|products|)", what, seen, rtol)
}

// matmulBackwardCase is one shape of the backward parity tests: W rows×cols, m
// activation rows, dY values in ±dyScale, chunks of chunkRows rows (0: one).
type matmulBackwardCase struct {
	rows, cols, m int
	dyScale       float32
	chunkRows     int
}

func (c matmulBackwardCase) String() string {
	s := fmt.Sprintf("%dx%d_m%d_dy%g", c.rows, c.cols, c.m, c.dyScale)
	if c.chunkRows > 0 {
		s += fmt.Sprintf("_chunk%d", c.chunkRows)
	}
	return s
}

// runMatmulBackwardCase checks ref.MatMulBackwardInput against ggml's
// dequantization, then the GPU against the reference.
func runMatmulBackwardCase(t *testing.T, typ gguf.Type, c matmulBackwardCase) {
	t.Helper()
	q, deq := remix(t, typ, c.rows, c.cols)
	dy := randVec(uint64(c.rows*977+c.cols*3+c.m), c.m*c.rows, c.dyScale)
	want, err := ref.MatMulBackwardInput(typ, c.rows, c.cols, q, dy, c.m)
	if err != nil {
		t.Fatal(err)
	}
	oracle, bound := matmulBackwardOracle(deq, c.rows, c.cols, dy, c.m)
	// Bit-identical weights, both summed in float64 in the same order.
	assertClose(t, "ref vs ggml dequant", want, oracle, 0, 1e-6)

	w := newChunkedTensor(t, typ, c.rows, c.cols, q, c.chunkRows)
	// dx starts as garbage: the first chunk must overwrite it.
	bdy, bdx := upload(t, "dy", dy), upload(t, "dx", randVec(5, c.m*c.cols, 100))
	run(t, "matmul backward", func(ch *gpu.Chain) error { return MatMulBackwardInput(ch, w, bdy, bdx, c.m) })
	assertMatmulBackward(t, "gpu", download(t, bdx, c.m*c.cols), want, bound, c.rows)

	// Again with room for 4 partials: a chunk of 65..128 rows splits in 2,
	// of 129.. in 3 or 4 (one 64-row staging step at least per split), and
	// the partials start as garbage too.
	parts := upload(t, "partials", randVec(6, 4*c.m*c.cols, 100))
	bdx = upload(t, "dx split", randVec(5, c.m*c.cols, 100))
	run(t, "matmul backward split", func(ch *gpu.Chain) error {
		return MatMulBackwardInputWith(ch, w, bdy, bdx, c.m, MatmulBackwardOptions{Partials: parts})
	})
	assertMatmulBackward(t, "gpu split", download(t, bdx, c.m*c.cols), want, bound, c.rows)
}

func TestMatMulBackwardInputMatchesReference(t *testing.T) {
	// Shapes around the launch: 8-column units, 64-column tiles of 32
	// activation rows, 32 rows of W per stage shared by 4 slices of 8. Rows
	// of W 1, 8, 37, 70 and 130 (under one slice's share, one to five
	// stages, ragged), m 1, 9, 17 and 40 (ragged tiles, a second tile), k
	// past one tile's 64 columns and not a multiple of them.
	legacy := []matmulBackwardCase{{8, 512, 1, 1, 0}, {37, 96, 9, 1, 0}, {70, 1056, 3, 1, 0}, {1, 32, 17, 1, 0}, {130, 64, 40, 1, 0}}
	kquant := []matmulBackwardCase{{8, 512, 1, 1, 0}, {37, 256, 9, 1, 0}, {70, 1280, 3, 1, 0}, {1, 256, 17, 1, 0}, {130, 256, 40, 1, 0}}
	// Float rows have any length: k below one unit, odd k (an F16 row then
	// starts mid-word), a k%8 tail in the second tile; k of 8 and 16 (a
	// LoRA B's rank) take the narrow launches, 16 and 32 slices of 64-row
	// stages, here over several stages and two activation tiles.
	float := append([]matmulBackwardCase{{1, 1, 1, 1, 0}, {3, 13, 2, 1, 0}, {37, 517, 9, 1, 0}, {70, 1023, 3, 1, 0}, {300, 8, 40, 1, 0}, {200, 16, 33, 1, 0}}, legacy...)
	for _, typ := range MatmulBackwardTypes() {
		shapes := legacy
		switch {
		case typ.BlockSize() == 1:
			shapes = float
		case typ.BlockSize() == 256:
			shapes = kquant
		}
		for _, c := range shapes {
			t.Run(typ.String()+"/"+c.String(), func(t *testing.T) { runMatmulBackwardCase(t, typ, c) })
		}
	}
}

func TestMatMulBackwardInputChunkedTensor(t *testing.T) {
	// 37 rows in chunks of 15 (15 + 15 + 7): dX sums over W's rows, so every
	// chunk after the first must add to what the previous ones wrote, and
	// each reads its own columns of dY (row0). 150 rows in chunks of 70
	// (70 + 70 + 10): with partials the first two split in 2 and the last
	// does not, so split and direct chunks mix.
	for _, typ := range []gguf.Type{gguf.TypeF16, gguf.TypeQ8_0, gguf.TypeQ4_K} {
		for _, c := range []matmulBackwardCase{{37, 256, 10, 1, 15}, {150, 256, 3, 1, 70}} {
			t.Run(typ.String()+"/"+c.String(), func(t *testing.T) { runMatmulBackwardCase(t, typ, c) })
		}
	}
}

func TestMatMulBackwardInputWideMagnitude(t *testing.T) {
	// Production magnitudes: gradients into a FFN-down's input reach ±3e4
	// under a loss scale, and the remixed ggml rows carry weight outliers of
	// 2000 and 9000 next to f16-subnormal block scales. Random weights
	// quantized by the gguf package add blocks ggml's rows do not have. The
	// tolerance is relative to Σ|dy·w|, so it stays meaningful at any scale.
	for _, typ := range MatmulBackwardTypes() {
		cols := 1024
		t.Run(typ.String()+"/ggml", func(t *testing.T) { runMatmulBackwardCase(t, typ, matmulBackwardCase{37, cols, 9, 3e4, 0}) })
		t.Run(typ.String()+"/random", func(t *testing.T) {
			const rows, m = 19, 3
			q := quantize(t, typ, randVec(7, rows*cols, 40))
			deq := make([]float32, rows*cols)
			if err := gguf.Dequantize(typ, q, deq); err != nil {
				t.Fatal(err)
			}
			dy := randVec(8, m*rows, 3e4)
			want, err := ref.MatMulBackwardInput(typ, rows, cols, q, dy, m)
			if err != nil {
				t.Fatal(err)
			}
			_, bound := matmulBackwardOracle(deq, rows, cols, dy, m)
			w := newTensor(t, "w", typ, rows, cols, q, 0)
			bdy, bdx := upload(t, "dy", dy), scratch(t, "dx", m*cols)
			run(t, "matmul backward wide", func(c *gpu.Chain) error { return MatMulBackwardInput(c, w, bdy, bdx, m) })
			assertMatmulBackward(t, "gpu", download(t, bdx, m*cols), want, bound, rows)
		})
	}
}

func TestMatMulBackwardInputOptions(t *testing.T) {
	// A row tile of a bigger batch: dY rows padded to a stride of 50 and
	// starting at float 7, dX rows at stride 300 from float 11, scaled by
	// 0.25 and added onto what dX holds (the residual stream's gradient).
	const rows, cols, m, dys, dxs, dyOff, dxOff = 37, 256, 5, 50, 300, 7, 11
	const scale = 0.25
	typ := gguf.TypeQ6_K
	q, deq := remix(t, typ, rows, cols)
	dense := randVec(21, m*rows, 2)
	dyBuf := make([]float32, dyOff+m*dys)
	for j := range m {
		copy(dyBuf[dyOff+j*dys:], dense[j*rows:(j+1)*rows])
	}
	prior := randVec(22, dxOff+m*dxs, 3)
	prod, bound := matmulBackwardOracle(deq, rows, cols, dense, m)
	want := append([]float32(nil), prior...)
	wantBound := make([]float32, len(prior))
	for j := range m {
		for i := range cols {
			k := dxOff + j*dxs + i
			want[k] = float32(float64(prior[k]) + scale*float64(prod[j*cols+i]))
			wantBound[k] = scale*bound[j*cols+i] + float32(math.Abs(float64(prior[k])))
		}
	}
	w := newTensor(t, "w", typ, rows, cols, q, 0)
	bdy, bdx := upload(t, "dy", dyBuf), upload(t, "dx", prior)
	run(t, "matmul backward opts", func(c *gpu.Chain) error {
		return MatMulBackwardInputWith(c, w, bdy, bdx, m, MatmulBackwardOptions{
			Accumulate: true, Scale: scale, DYOffset: dyOff, DXOffset: dxOff, DYStride: dys, DXStride: dxs,
		})
	})
	got := download(t, bdx, len(prior))
	// Floats outside the m rows of cols must be untouched: their bound is 0.
	assertMatmulBackward(t, "gpu", got, want, wantBound, rows)
}

func TestMatMulBackwardInputRejectsBadShapes(t *testing.T) {
	q, _ := remix(t, gguf.TypeQ4_0, 8, 64)
	w := newTensor(t, "w", gguf.TypeQ4_0, 8, 64, q, 0)
	iq := newTensor(t, "iq", gguf.TypeIQ2_XXS, 1, 256, make([]byte, 66), 0)
	dy, dx := scratch(t, "dy", 4*8), scratch(t, "dx", 3*64)
	short := scratch(t, "short", 7)
	for _, c := range []struct {
		what, wantErr string
		call          func(c *gpu.Chain) error
	}{
		{"unsupported type", "IQ2_XXS", func(c *gpu.Chain) error { return MatMulBackwardInput(c, iq, dy, dx, 1) }},
		{"nil tensor", "nil", func(c *gpu.Chain) error { return MatMulBackwardInput(c, nil, dy, dx, 1) }},
		{"short dy", "dy buffer", func(c *gpu.Chain) error { return MatMulBackwardInput(c, w, short, dx, 1) }},
		{"short dx for m=4", "dx buffer", func(c *gpu.Chain) error { return MatMulBackwardInput(c, w, dy, dx, 4) }},
		{"dy is dx", "same buffer", func(c *gpu.Chain) error { return MatMulBackwardInput(c, w, dx, dx, 1) }},
		{"m=0", "m = 0", func(c *gpu.Chain) error { return MatMulBackwardInput(c, w, dy, dx, 0) }},
		{"dy stride < n", "stride", func(c *gpu.Chain) error {
			return MatMulBackwardInputWith(c, w, dy, dx, 2, MatmulBackwardOptions{DYStride: 4})
		}},
		{"dx stride < k", "stride", func(c *gpu.Chain) error {
			return MatMulBackwardInputWith(c, w, dy, dx, 2, MatmulBackwardOptions{DXStride: 10})
		}},
		{"negative offset", "offset", func(c *gpu.Chain) error {
			return MatMulBackwardInputWith(c, w, dy, dx, 1, MatmulBackwardOptions{DXOffset: -1})
		}},
		{"dx offset past dx", "dx buffer", func(c *gpu.Chain) error {
			return MatMulBackwardInputWith(c, w, dy, dx, 1, MatmulBackwardOptions{DXOffset: 3 * 64})
		}},
		{"released tensor", "chunks cover", func(c *gpu.Chain) error {
			gone := newTensor(t, "gone", gguf.TypeQ4_0, 8, 64, q, 0)
			gone.Release()
			return MatMulBackwardInput(c, gone, dy, dx, 1)
		}},
	} {
		t.Run(c.what, func(t *testing.T) {
			ch, err := dev.NewChain("bad matmul backward")
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

func TestMatMulBackwardSplits(t *testing.T) {
	// How the rows of a chunk are split: never below one stage of bn rows,
	// never beyond the partials' room, aiming at 1024 workgroups.
	for _, c := range []struct{ n, groups, tiles, room, bn, splits, rows int }{
		{37, 1, 1, 4, 32, 2, 19},                // two stages' rows: two splits
		{32, 1, 1, 4, 32, 1, 32},                // one stage: no split
		{70, 1, 1, 4, 64, 2, 35},                // two 64-row stages
		{130, 1, 1, 4, 32, 4, 33},               // as many as the room holds
		{1000, 1, 1, 1, 32, 1, 1000},            // room for one partial: no split
		{4096, 64, 16, 1 << 20, 32, 1, 4096},    // 4096², m = 512: 1024 tiles already
		{4096, 64, 4, 1 << 20, 32, 4, 1024},     // 4096², m = 128: 256 tiles × 4
		{128256, 32, 16, 4, 32, 2, 64128},       // the Llama 3 head at m = 512
		{262144, 36, 2, 1 << 20, 32, 15, 17477}, // the Gemma head at m = 64
	} {
		s, r := matmulBackwardSplits(c.n, c.groups, c.tiles, c.room, c.bn)
		if s != c.splits || r != c.rows {
			t.Errorf("n=%d groups=%d tiles=%d room=%d bn=%d: %d splits of %d rows, want %d of %d", c.n, c.groups, c.tiles, c.room, c.bn, s, r, c.splits, c.rows)
		}
	}
}
