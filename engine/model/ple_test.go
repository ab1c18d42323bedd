package model

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
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
		m.Config.PerLayerInput, m.Config.Vocab = 256, rows
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

// TestPLEShortTable: a per-layer table shorter than the vocabulary (Gemma
// 3n's as Ollama converts it) gives the tokens past it row 0, as
// transformers' Gemma3nModel does, and refuses a token past the vocabulary.
func TestPLEShortTable(t *testing.T) {
	const width, rows, vocab = 4, 3, 5
	vals := []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	m := &Model{PLE: &Weight{Name: "per_layer_token_embd.weight", Type: gguf.TypeF32, Rows: rows, Cols: width, Data: gpu.F32Bytes(vals)}}
	m.Config.PerLayerInput, m.Config.Vocab = 4, vocab // scale sqrt(4) = 2
	got, err := m.PLERows([]int32{1, 4, 3})
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{10, 12, 14, 16, 2, 4, 6, 8, 2, 4, 6, 8}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("rows %v, want %v", got, want)
	}
	if _, err := m.PLERows([]int32{5}); err == nil {
		t.Error("a token past the vocabulary: no error")
	}
}
