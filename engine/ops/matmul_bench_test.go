package ops

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/gguf"
)

// benchSize reads a positive integer from env, else def.
func benchSize(b *testing.B, env string, def int) int {
	s := os.Getenv(env)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		b.Fatalf("%s=%q: want a positive integer", env, s)
	}
	return v
}

// benchRows is the side of the square benchmark weight: HEARTH_BENCH_ROWS,
// else 4096 (a 7B model's attention projection) on a real GPU and 1024 on a
// software adapter such as lavapipe, where 4096² takes seconds per op.
func benchRows(b *testing.B) int {
	def := 4096
	if dev.Info.Type == "cpu" {
		def = 1024
	}
	return benchSize(b, "HEARTH_BENCH_ROWS", def)
}

// benchWeight is an n×k tensor of typ: 16 random rows quantized by the gguf
// package and repeated, so setup stays fast for big shapes while every byte
// is valid data (random bytes would give NaN scales).
func benchWeight(b *testing.B, typ gguf.Type, n, k int) *gpu.Tensor {
	b.Helper()
	w, err := dev.NewTensor("bench."+typ.String(), typ, n, k, benchWeightBytes(b, typ, n, k), 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(w.Release)
	return w
}

// benchWeightBytes is benchWeight's data: n rows of k values of typ, 16
// distinct rows repeated.
func benchWeightBytes(b *testing.B, typ gguf.Type, n, k int) []byte {
	b.Helper()
	const distinct = 16
	src := randVec(1, distinct*k, 1)
	rowBytes, ok := typ.RowSize(int64(k))
	if !ok {
		b.Fatalf("%v: k=%d is not a whole number of blocks", typ, k)
	}
	rows := make([]byte, distinct*int(rowBytes))
	if err := gguf.QuantizeParallel(typ, src, rows); err != nil {
		b.Fatal(err)
	}
	data := make([]byte, n*int(rowBytes))
	for r := range n {
		copy(data[r*int(rowBytes):], rows[(r%distinct)*int(rowBytes):(r%distinct+1)*int(rowBytes)])
	}
	return data
}

// benchChain runs ops dispatches recorded by op, chainLen to a chain and one
// submit each, then waits once: launch and submit overhead are amortised as
// in a decode token, which is one chain of hundreds of dispatches.
func benchChain(b *testing.B, ops int, op func(c *gpu.Chain) error) {
	b.Helper()
	const chainLen = 256
	for done := 0; done < ops; {
		c, err := dev.NewChain("bench")
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < chainLen && done < ops; i, done = i+1, done+1 {
			if err := op(c); err != nil {
				c.Discard()
				b.Fatal(err)
			}
		}
		if err := c.Submit(); err != nil {
			b.Fatal(err)
		}
	}
	if err := dev.Wait(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkMatVec measures decode mat-vec throughput as GB/s of weight bytes
// read, for every type in the matmul table (K-quants appear once
// registered). Decode is bandwidth-bound, so this is the number to compare
// with the GPU's memory bandwidth.
func BenchmarkMatVec(b *testing.B) {
	n := benchRows(b)
	for _, typ := range MatmulTypes() {
		b.Run(typ.String(), func(b *testing.B) {
			w := benchWeight(b, typ, n, n)
			x, y := upload(b, "x", randVec(2, n, 1)), scratch(b, "y", n)
			op := func(c *gpu.Chain) error { return MatVec(c, w, x, y) }
			benchChain(b, 1, op) // compile the pipeline outside the timing
			b.SetBytes(w.Bytes())
			b.ResetTimer()
			benchChain(b, b.N, op)
			b.StopTimer()
			b.ReportMetric(float64(w.Bytes())*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}

// BenchmarkMatMul measures prefill throughput as GFLOP/s (2·m·n·k per op)
// with m = HEARTH_BENCH_M activation rows (default 128).
func BenchmarkMatMul(b *testing.B) {
	n := benchRows(b)
	m := benchSize(b, "HEARTH_BENCH_M", 128)
	for _, typ := range MatmulTypes() {
		b.Run(typ.String(), func(b *testing.B) {
			w := benchWeight(b, typ, n, n)
			x, y := upload(b, "x", randVec(2, m*n, 1)), scratch(b, "y", m*n)
			op := func(c *gpu.Chain) error { return MatMul(c, w, x, y, m) }
			benchChain(b, 1, op)
			b.ResetTimer()
			benchChain(b, b.N, op)
			b.StopTimer()
			b.ReportMetric(2*float64(m)*float64(n)*float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkMatmulLaunch compares launch shapes of the float and legacy
// kernels (the table's shape is the one named first), for tuning on real
// GPUs: float decode shapes at m=1, prefill shapes at m=HEARTH_BENCH_M.
// Quantized decode shapes are BenchmarkMatVecLaunch's.
func BenchmarkMatmulLaunch(b *testing.B) {
	n := benchRows(b)
	m := benchSize(b, "HEARTH_BENCH_M", 128)
	alternatives := []matmulLaunch{{wg: 256, rows: 4, tm: 1}, {wg: 256, rows: 8, tm: 1}, {wg: 256, rows: 16, tm: 1}, {wg: 128, rows: 8, tm: 1}, {wg: 64, rows: 4, tm: 8}, {wg: 64, rows: 8, tm: 4}, {wg: 128, rows: 4, tm: 8}}
	for _, typ := range floatLegacyTypes {
		kern, _ := matmulKernelFor(typ)
		vecShapes, matShapes := []matmulLaunch{kern.vec}, []matmulLaunch{kern.mat}
		for _, l := range alternatives {
			switch {
			case l.tm == 1 && l != kern.vec && typ.BlockSize() == 1:
				vecShapes = append(vecShapes, l)
			case l.tm > 1 && l != kern.mat:
				matShapes = append(matShapes, l)
			}
		}
		w := benchWeight(b, typ, n, n)
		for _, mm := range []int{1, m} {
			shapes := vecShapes
			if mm == 1 && typ.BlockSize() > 1 {
				continue
			}
			if mm > 1 {
				shapes = matShapes
			}
			x, y := upload(b, "x", randVec(2, mm*n, 1)), scratch(b, "y", mm*n)
			for _, l := range shapes {
				b.Run(fmt.Sprintf("%v/m%d/wg%d_rows%d_tm%d", typ, mm, l.wg, l.rows, l.tm), func(b *testing.B) {
					k := kern
					k.vec, k.mat = l, l
					op := func(c *gpu.Chain) error { return matmulWith(c, w, k, x, y, mm, MatmulOptions{}) }
					benchChain(b, 1, op)
					b.ResetTimer()
					benchChain(b, b.N, op)
					b.StopTimer()
					b.ReportMetric(float64(w.Bytes())*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
					b.ReportMetric(2*float64(mm)*float64(n)*float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}

// benchTypes is HEARTH_BENCH_TYPES (comma-separated type names, e.g.
// "Q5_K,Q4_1") or else def.
func benchTypes(b *testing.B, def ...gguf.Type) []gguf.Type {
	s := os.Getenv("HEARTH_BENCH_TYPES")
	if s == "" {
		return def
	}
	var types []gguf.Type
	for _, name := range strings.Split(s, ",") {
		typ, err := gguf.ParseType(strings.TrimSpace(name))
		if err != nil {
			b.Fatalf("HEARTH_BENCH_TYPES: %v", err)
		}
		types = append(types, typ)
	}
	return types
}

// benchShapes is def (n×k weight shapes), or one benchRows square when
// HEARTH_BENCH_ROWS is set or the adapter is a software one.
func benchShapes(b *testing.B, def ...[2]int) [][2]int {
	if os.Getenv("HEARTH_BENCH_ROWS") != "" || dev.Info.Type == "cpu" {
		n := benchRows(b)
		return [][2]int{{n, n}}
	}
	return def
}

// BenchmarkMatVecLaunch sweeps the quantized matvec shapes of
// matvecLaunchVariants (the table's shape first) as GB/s of weight bytes,
// for the types of a Q4_K_M and a Q8_0 model file at Llama-3-8B shapes:
// 1024×4096 (k, v), 4096×4096 (q, o), 14336×4096 (gate, up), 4096×14336
// (down) and 8192×8192, written n×k. HEARTH_BENCH_TYPES (comma-separated, e.g.
// "Q5_K,Q4_1") replaces the types; HEARTH_BENCH_ROWS replaces the shapes by
// one square (small ones for a software adapter). On an H200:
//
//	go test ./engine/ops -run '^$' -bench MatVecLaunch -benchtime 200x
func BenchmarkMatVecLaunch(b *testing.B) {
	types := benchTypes(b, gguf.TypeQ4_K, gguf.TypeQ6_K, gguf.TypeQ8_0, gguf.TypeQ4_0)
	shapes := benchShapes(b, [2]int{1024, 4096}, [2]int{4096, 4096}, [2]int{14336, 4096}, [2]int{4096, 14336}, [2]int{8192, 8192})
	for _, typ := range types {
		kern, ok := matmulKernelFor(typ)
		if !ok || typ.BlockSize() == 1 {
			b.Fatalf("%v has no quantized matvec kernel", typ)
		}
		launches := []matmulLaunch{kern.vec}
		for _, l := range matvecLaunchVariants {
			if l != kern.vec && checkVecLaunch(dev, typ.String(), l) == nil {
				launches = append(launches, l)
			}
		}
		for _, sh := range shapes {
			n, k := sh[0], sh[1]
			w := benchWeight(b, typ, n, k)
			x, y := upload(b, "x", randVec(2, k, 1)), scratch(b, "y", n)
			for _, l := range launches {
				b.Run(fmt.Sprintf("%v/%dx%d/%v", typ, n, k, l), func(b *testing.B) {
					kk := kern
					kk.vec = l
					op := func(c *gpu.Chain) error { return matmulWith(c, w, kk, x, y, 1, MatmulOptions{}) }
					benchChain(b, 1, op)
					b.ResetTimer()
					benchChain(b, b.N, op)
					b.StopTimer()
					b.ReportMetric(float64(w.Bytes())*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
				})
			}
			w.Release()
		}
	}
}

// BenchmarkMatVecNormed compares RMSNorm followed by MatVec (two dispatches
// and a normalised copy of x) with MatVecNormed at the shapes a norm feeds in
// Llama 3 8B: 4096×4096 (q) and 14336×4096 (gate, up), in ns per op;
// HEARTH_BENCH_TYPES and HEARTH_BENCH_ROWS as for BenchmarkMatVecLaunch.
func BenchmarkMatVecNormed(b *testing.B) {
	types := benchTypes(b, gguf.TypeQ4_K, gguf.TypeQ6_K, gguf.TypeQ8_0)
	shapes := benchShapes(b, [2]int{4096, 4096}, [2]int{14336, 4096})
	for _, typ := range types {
		for _, sh := range shapes {
			n, k := sh[0], sh[1]
			w := benchWeight(b, typ, n, k)
			x, g := upload(b, "x", randVec(2, k, 3)), upload(b, "g", randVec(3, k, 1))
			xn, y := scratch(b, "xn", k), scratch(b, "y", n)
			a := NormArgs{Rows: 1, Dim: k, Eps: 1e-5}
			ops := map[string]func(c *gpu.Chain) error{
				"separate": func(c *gpu.Chain) error {
					if err := RMSNorm(c, x, g, xn, a); err != nil {
						return err
					}
					return MatVec(c, w, xn, y)
				},
				"fused": func(c *gpu.Chain) error { return MatVecNormed(c, w, x, g, y, a, MatmulOptions{}) },
			}
			for _, name := range []string{"separate", "fused"} {
				op := ops[name]
				b.Run(fmt.Sprintf("%v/%dx%d/%s", typ, n, k, name), func(b *testing.B) {
					benchChain(b, 1, op)
					b.ResetTimer()
					benchChain(b, b.N, op)
				})
			}
			w.Release()
		}
	}
}
