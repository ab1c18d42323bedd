package gguf_test

import (
	"math/rand/v2"
	"testing"

	"github.com/hearthstudio/hearth/gguf"
)

// benchTensor is the size of the dequantize benchmarks: a 4096×4096 weight,
// the shape of a 7–8B model's attention projections (16.8 M values, 64 MiB
// of f32 output).
const benchTensor = 4096 * 4096

// BenchmarkDequantize decodes one 4096×4096 tensor of each type, on one
// goroutine (serial) and split across GOMAXPROCS (parallel). The throughput
// is in bytes of f32 output: SetBytes gives MB/s, and GB/s is reported too.
// The input is quantized gaussian noise, so scales and levels are realistic.
func BenchmarkDequantize(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	// Quantize a 64K-value pattern once per type and tile it: quantizing
	// 16.8 M values with the K-quant searches would take seconds per type.
	const tile = 1 << 16
	pattern := make([]float32, tile)
	for i := range pattern {
		pattern[i] = float32(rng.NormFloat64())
	}
	dst := make([]float32, benchTensor)
	for id := gguf.Type(0); id < 64; id++ {
		if !gguf.CanDequantize(id) {
			continue
		}
		src := benchSource(b, id, pattern, benchTensor)
		for _, mode := range []struct {
			name string
			fn   func(gguf.Type, []byte, []float32) error
		}{{"serial", gguf.Dequantize}, {"parallel", gguf.DequantizeParallel}} {
			b.Run(id.String()+"/"+mode.name, func(b *testing.B) {
				b.SetBytes(4 * benchTensor)
				for b.Loop() {
					if err := mode.fn(id, src, dst); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(4*benchTensor)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
	}
}

// benchSource is n values of type t: the pattern quantized where t can be
// quantized, otherwise (the integer types) random bytes.
func benchSource(b *testing.B, t gguf.Type, pattern []float32, n int) []byte {
	b.Helper()
	size, _ := t.RowSize(int64(n))
	src := make([]byte, size)
	tileBytes, _ := t.RowSize(int64(len(pattern)))
	if gguf.CanQuantize(t) {
		if err := gguf.QuantizeParallel(t, pattern, src[:tileBytes]); err != nil {
			b.Fatal(err)
		}
	} else {
		rng := rand.New(rand.NewPCG(9, 10))
		for i := range src[:tileBytes] {
			src[i] = byte(rng.Uint32())
		}
	}
	for off := tileBytes; off < size; off += tileBytes {
		copy(src[off:], src[:tileBytes])
	}
	return src
}

// BenchmarkQuantize encodes 256 K gaussian values per type, for a feel of
// what `hearth quantize` costs (the K-quant scale searches dominate).
func BenchmarkQuantize(b *testing.B) {
	rng := rand.New(rand.NewPCG(11, 12))
	const n = 1 << 18
	src := make([]float32, n)
	for i := range src {
		src[i] = float32(rng.NormFloat64())
	}
	for id := gguf.Type(0); id < 64; id++ {
		if !gguf.CanQuantize(id) {
			continue
		}
		size, _ := id.RowSize(n)
		dst := make([]byte, size)
		b.Run(id.String(), func(b *testing.B) {
			b.SetBytes(4 * n)
			for b.Loop() {
				if err := gguf.Quantize(id, src, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
