package ops

import (
	"math"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
	"github.com/hearthstudio/hearth/gguf"
)

// embedTypes are the table types ops.Embed supports, in test order.
var embedTypes = []gguf.Type{
	gguf.TypeF32, gguf.TypeF16, gguf.TypeBF16,
	gguf.TypeQ4_0, gguf.TypeQ4_1, gguf.TypeQ5_0, gguf.TypeQ5_1, gguf.TypeQ8_0,
	gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K,
}

func TestEmbedMatchesReference(t *testing.T) {
	const rows = 37
	// Ids in order and out of order, repeated, the first and last row, and
	// two past the table (clamped to row 36).
	ids := []uint32{0, 36, 5, 5, 1000, 17, 0xffffffff, 2}
	for _, typ := range embedTypes {
		cols := map[int]int{1: 517, 32: 160, 256: 768}[typ.BlockSize()]
		q, deq := remix(t, typ, rows, cols)
		rowBytes, _ := typ.RowSize(int64(cols))
		// Scale 1, and Gemma's sqrt(2304) = 48 (exact in f32, so scaled
		// values round once, identically on both sides).
		for _, scale := range []float32{1, 48} {
			for _, chunkRows := range []int{0, 15} { // one buffer; 15+15+7 rows
				name := typ.String()
				if scale != 1 {
					name += "/scaled"
				}
				if chunkRows > 0 {
					name += "/chunked"
				}
				t.Run(name, func(t *testing.T) {
					want, err := ref.Embed(typ, rows, cols, q, ids, scale)
					if err != nil {
						t.Fatal(err)
					}
					// ref.Embed against ggml's own dequantization: bit for bit.
					for i, id := range ids {
						r := min(int(id), rows-1)
						for j := range cols {
							if w, g := deq[r*cols+j]*scale, want[i*cols+j]; math.Float32bits(w) != math.Float32bits(g) {
								t.Fatalf("ref.Embed token %d [%d] = %v, ggml says %v", i, j, g, w)
							}
						}
					}
					w := newTensor(t, "table", typ, rows, cols, q, uint64(chunkRows)*uint64(rowBytes))
					bids, err := dev.NewBufferFrom("ids", gpu.U32Bytes(ids))
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(bids.Release)
					out := scratch(t, "out", len(ids)*cols)
					run(t, "embed", func(c *gpu.Chain) error { return EmbedScaled(c, w, bids, len(ids), out, scale) })
					// Exact: every product in the decoders is exact in f32 (an
					// 11-bit f16 mantissa times integers of at most 7 and 6 bits
					// fits in 24 bits), so the only roundings are the min or
					// offset addition and the scale multiply, one IEEE operation
					// each. A GPU compiler's fused multiply-add or reassociation
					// therefore cannot change a bit; subnormal f16 scales (ggml
					// row 4) must survive unpack2x16float.
					assertClose(t, "embed", download(t, out, len(ids)*cols), want, 0, 0)
				})
			}
		}
	}
}

func TestEmbedManyTokensWrapGrid(t *testing.T) {
	// 70000 tokens is past 65535 workgroups, so the grid wraps into y.
	const rows, cols, n = 3, 32, 70000
	typ := gguf.TypeQ8_0
	q, _ := remix(t, typ, rows, cols)
	ids := make([]uint32, n)
	for i := range ids {
		ids[i] = uint32(i*7) % (rows + 1) // includes the out-of-range id 3
	}
	want, err := ref.Embed(typ, rows, cols, q, ids, 1)
	if err != nil {
		t.Fatal(err)
	}
	w := newTensor(t, "table", typ, rows, cols, q, 0)
	bids, err := dev.NewBufferFrom("ids", gpu.U32Bytes(ids))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bids.Release)
	out := scratch(t, "out", n*cols)
	run(t, "embed wrap", func(c *gpu.Chain) error { return Embed(c, w, bids, n, out) })
	// Q8_0 values are q*d, one rounding on both sides: exact.
	assertClose(t, "embed", download(t, out, n*cols), want, 0, 0)
}

func TestEmbedRejectsBadShapes(t *testing.T) {
	q, _ := remix(t, gguf.TypeQ4_0, 4, 64)
	w := newTensor(t, "table", gguf.TypeQ4_0, 4, 64, q, 0)
	q2k := newTensor(t, "q2k", gguf.TypeQ2_K, 1, 256, make([]byte, 84), 0)
	ids, err := dev.NewBufferFrom("ids", gpu.U32Bytes([]uint32{0, 1, 2}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ids.Release)
	out := scratch(t, "out", 3*64)
	for _, c := range []struct {
		what, wantErr string
		call          func(c *gpu.Chain) error
	}{
		{"unsupported type", "Q2_K", func(c *gpu.Chain) error { return Embed(c, q2k, ids, 1, out) }},
		{"more tokens than ids", "ids", func(c *gpu.Chain) error { return Embed(c, w, ids, 4, out) }},
		{"short out", "out buffer", func(c *gpu.Chain) error { return Embed(c, w, ids, 3, scratch(t, "o", 3*64-1)) }},
		{"nan scale", "scale", func(c *gpu.Chain) error { return EmbedScaled(c, w, ids, 3, out, float32(math.NaN())) }},
		{"negative n", "n = -1", func(c *gpu.Chain) error { return Embed(c, w, ids, -1, out) }},
	} {
		t.Run(c.what, func(t *testing.T) {
			ch, err := dev.NewChain("bad embed")
			if err != nil {
				t.Fatal(err)
			}
			defer ch.Discard()
			if err := c.call(ch); err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("got error %v, want one mentioning %q", err, c.wantErr)
			}
		})
	}
	if err := CheckTokenIDs(w, []uint32{0, 3, 4}); err == nil || !strings.Contains(err.Error(), "id 4") {
		t.Fatalf("CheckTokenIDs: got %v, want an error naming id 4", err)
	}
	if err := CheckTokenIDs(w, []uint32{0, 3}); err != nil {
		t.Fatal(err)
	}
}
