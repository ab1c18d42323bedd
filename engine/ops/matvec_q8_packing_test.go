package ops

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// TestMatVecQ8PackingsAgree runs the quantizer and the products in both
// packings, dot4I8Packed on four i8 levels a word and SWAR's two offset
// levels a u32 multiply, on every q8Cases matrix with three activation
// rows at once and with one row normed and quantized inside the product:
// the levels, scales and sums must decode the same, and every output must
// be the same to the bit, since both sum the same integers exactly and
// share the f32 arithmetic after. The other q8 tests check whichever
// packing the device takes against ref.MatVecQ8; this one carries that
// check over to the other.
func TestMatVecQ8PackingsAgree(t *testing.T) {
	if !dev.Language.PackedDot {
		t.Skipf("the device's compiler takes no dot4I8Packed (it takes %v): only SWAR runs here", dev.Language)
	}
	saved := Q8PackedDot
	t.Cleanup(func() { Q8PackedDot = saved })
	const rows = 3
	for _, typ := range q8Types {
		for si, s := range q8Cases(t, typ) {
			k := s.k
			bx := upload(t, "x", kquantActs(t, k, rows, true, uint64(20+si)))
			bg := upload(t, "g", randVec(uint64(30+si), k, 0.5))
			norm := NormArgs{Rows: 1, Dim: k, Eps: 1e-5}
			var levels [2][rows]ref.Q8
			var batched, fused [2][]float32
			for p, packed := range []bool{false, true} {
				Q8PackedDot = packed
				bq := scratch(t, "xq", int(Q8Bytes(k, rows)/4))
				by, bf := scratch(t, "y", rows*s.rows), scratch(t, "y fused", s.rows)
				run(t, "matvec q8 packings", func(c *gpu.Chain) error {
					if err := QuantizeQ8(c, bx, bq, k, rows); err != nil {
						return err
					}
					if err := MatVecQ8(c, s.w, bq, by, rows, MatmulOptions{}); err != nil {
						return err
					}
					return matvecQ8NormedFused(c, s.w, bx, bg, bf, norm, MatmulOptions{})
				})
				raw, err := bq.Read(0, Q8Bytes(k, rows))
				if err != nil {
					t.Fatal(err)
				}
				for r := range rows {
					words := make([]uint32, Q8Words(k))
					for i := range words {
						words[i] = binary.LittleEndian.Uint32(raw[4*(r*Q8RowWords(k)+i):])
					}
					if levels[p][r], err = ref.DecodeQ8(words, k, packed); err != nil {
						t.Fatal(err)
					}
				}
				batched[p], fused[p] = download(t, by, rows*s.rows), download(t, bf, s.rows)
			}
			what := typ.String() + " " + s.name
			for r := range rows {
				a, b := levels[0][r], levels[1][r]
				if !slices.Equal(a.Q, b.Q) || !slices.Equal(a.D, b.D) || !slices.Equal(a.Sums, b.Sums) {
					t.Fatalf("%s: activation row %d quantizes differently in the two packings", what, r)
				}
			}
			for i := range batched[0] {
				if batched[0][i] != batched[1][i] {
					t.Fatalf("%s: y[%d] (activation row %d) = %v SWAR, %v packed", what, i, i/s.rows, batched[0][i], batched[1][i])
				}
			}
			for i := range fused[0] {
				if fused[0][i] != fused[1][i] {
					t.Fatalf("%s normed in the product: y[%d] = %v SWAR, %v packed", what, i, fused[0][i], fused[1][i])
				}
			}
		}
	}
}
