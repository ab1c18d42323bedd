package model

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/hearthstudio/hearth/gguf"
)

// BenchmarkPLERows looks up a batch's rows of a per-layer-embedding table
// of E2B's width (35 layers of 256: 8960 values a token) on the host, as
// every Gemma 4 batch does: a decoded token (1) and a prompt batch (512),
// at the types its files use. The GPU's E2B token takes 4.8 ms and its
// pp512 138 ms (docs/performance.md), against which this is the host's
// share.
func BenchmarkPLERows(b *testing.B) {
	const width, rows = 35 * 256, 1024
	for _, typ := range []gguf.Type{gguf.TypeF16, gguf.TypeQ8_0, gguf.TypeQ4_K} {
		vals := make([]float32, width)
		rng := rand.New(rand.NewPCG(1, 2))
		rowBytes, _ := typ.RowSize(width)
		data := make([]byte, int(rowBytes)*rows)
		for r := range rows {
			for j := range vals {
				vals[j] = float32(rng.NormFloat64())
			}
			if err := gguf.Quantize(typ, vals, data[r*int(rowBytes):(r+1)*int(rowBytes)]); err != nil {
				b.Fatal(err)
			}
		}
		m := &Model{PLE: &Weight{Name: "per_layer_token_embd.weight", Type: typ, Rows: rows, Cols: width, Data: data}}
		m.Config.PerLayerInput = 256
		for _, n := range []int{1, 512} {
			tokens := make([]int32, n)
			for i := range tokens {
				tokens[i] = int32(rng.IntN(rows))
			}
			dst := make([]float32, n*width)
			b.Run(fmt.Sprintf("%v/%d", typ, n), func(b *testing.B) {
				b.SetBytes(int64(n * width * 4))
				for b.Loop() {
					if err := m.pleTokRows(tokens, dst); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
