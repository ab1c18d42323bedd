package ops

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// BenchmarkMatVecQ8 sets the integer decode products beside the f32 ones
// on a Llama 3 8B layer's shapes (q|k|v 6144×4096, o 4096×4096, gate|up
// 28672×4096, down 4096×14336), GB/s of weight bytes:
//   - f32: MatVec, the matmul_kquant decode entry, x in f32;
//   - q8: MatVecQ8 on x quantized once beforehand;
//   - quantize+q8: the quantizer and MatVecQ8, both in the timed chain;
//   - fused: MatVecQ8 quantizing its own input (matvec_q8's IN > 0);
//   - quantize+q8-swar: quantize+q8 with two products a u32 multiply,
//     where the others take dot4I8Packed (Q8Packed).
//
// Each shape's input is the one a Llama layer gives it: q|k|v and gate|up
// read the normed stream (QuantizeQ8Normed, IN 2), o the attention's
// output (QuantizeQ8, IN 1), down the GLU of gate|up (QuantizeQ8GLU, IN
// 3). head is a Llama 3 vocabulary's output projection, normed.
//
// HEARTH_BENCH_Q8_ROWS (a comma list, default 16) sweeps the rows per
// 256-invocation workgroup of the q8 kernel. On lavapipe the shapes shrink
// to a quarter.
//
//	go test ./engine/ops -run '^$' -bench MatVecQ8 -benchtime 200x
func BenchmarkMatVecQ8(b *testing.B) {
	type benchVariant struct {
		name string
		op   func(c *gpu.Chain) error
	}
	div := 1
	if dev.Info.Type == "cpu" {
		div = 4
	}
	rowsList := []int{q8Launch.rows}
	if s := os.Getenv("HEARTH_BENCH_Q8_ROWS"); s != "" {
		rowsList = nil
		for _, f := range strings.Split(s, ",") {
			r, err := strconv.Atoi(f)
			if err != nil || r < 1 || 256%r != 0 {
				b.Fatalf("HEARTH_BENCH_Q8_ROWS=%q: want divisors of 256", s)
			}
			rowsList = append(rowsList, r)
		}
	}
	shapes := []struct {
		name string
		n, k int
		in   int // matvec_q8's IN for this input
	}{{"qkv", 6144, 4096, q8InNormed}, {"o", 4096, 4096, q8InPlain}, {"gate_up", 28672, 4096, q8InNormed},
		{"down", 4096, 14336, q8InGLU}, {"head", 128256, 4096, q8InNormed}}
	for _, typ := range q8Types {
		for _, sh := range shapes {
			n, k := sh.n/div, sh.k/div
			w := benchWeight(b, typ, n, k)
			x, g, y := upload(b, "x", randVec(2, 2*k, 1)), upload(b, "g", randVec(3, k, 1)), scratch(b, "y", n)
			xq := scratch(b, "xq", Q8Words(k))
			src := q8Source{in: sh.in, x: x, g: g, eps: 1e-5}
			quantize := func(c *gpu.Chain) error {
				switch sh.in {
				case q8InNormed:
					return QuantizeQ8Normed(c, x, g, xq, NormArgs{Rows: 1, Dim: k, Eps: 1e-5})
				case q8InGLU:
					return QuantizeQ8GLU(c, x, xq, GLUArgs{FF: k}, 1)
				}
				return QuantizeQ8(c, x, xq, k, 1)
			}
			benchChain(b, 1, quantize)
			variants := []benchVariant{{"f32", func(c *gpu.Chain) error { return MatVec(c, w, x, y) }}}
			for _, rows := range rowsList {
				l := matvecQ8Launch{wg: 256, rows: rows}
				variants = append(variants,
					benchVariant{fmt.Sprintf("q8-rows%d", rows), func(c *gpu.Chain) error { return matvecQ8With(c, w, xq, y, 1, MatmulOptions{}, l) }},
					benchVariant{fmt.Sprintf("quantize+q8-rows%d", rows), func(c *gpu.Chain) error {
						if err := quantize(c); err != nil {
							return err
						}
						return matvecQ8With(c, w, xq, y, 1, MatmulOptions{}, l)
					}})
				if Q8Packed(dev) {
					variants = append(variants, benchVariant{fmt.Sprintf("quantize+q8-swar-rows%d", rows), func(c *gpu.Chain) error {
						Q8PackedDot = false
						defer func() { Q8PackedDot = true }()
						if err := quantize(c); err != nil {
							return err
						}
						return matvecQ8With(c, w, xq, y, 1, MatmulOptions{}, l)
					}})
				}
				if q8SharedBytes(k, l) <= uint64(dev.Limits.MaxComputeWorkgroupStorageSize) {
					variants = append(variants, benchVariant{fmt.Sprintf("fused-rows%d", rows), func(c *gpu.Chain) error {
						return matvecQ8Dispatch(c, w, src, y, 1, MatmulOptions{}, l)
					}})
				}
			}
			for _, v := range variants {
				b.Run(fmt.Sprintf("%v/%s/%s", typ, sh.name, v.name), func(b *testing.B) {
					benchChain(b, 1, v.op) // compile outside the timing
					b.SetBytes(w.Bytes())
					b.ResetTimer()
					benchChain(b, b.N, v.op)
					b.StopTimer()
					b.ReportMetric(float64(w.Bytes())*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
				})
			}
		}
	}
}
