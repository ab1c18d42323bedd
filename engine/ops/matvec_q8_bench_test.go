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
//   - quantize+q8: QuantizeQ8 and MatVecQ8, both in the timed chain.
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
	}{{"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}}
	for _, typ := range q8Types {
		for _, sh := range shapes {
			n, k := sh.n/div, sh.k/div
			w := benchWeight(b, typ, n, k)
			x, y := upload(b, "x", randVec(2, k, 1)), scratch(b, "y", n)
			xq := scratch(b, "xq", Q8Words(k))
			benchChain(b, 1, func(c *gpu.Chain) error { return QuantizeQ8(c, x, xq, k, 1) })
			variants := []benchVariant{{"f32", func(c *gpu.Chain) error { return MatVec(c, w, x, y) }}}
			for _, rows := range rowsList {
				l := matvecQ8Launch{wg: 256, rows: rows}
				variants = append(variants,
					benchVariant{fmt.Sprintf("q8-rows%d", rows), func(c *gpu.Chain) error { return matvecQ8With(c, w, xq, y, 1, MatmulOptions{}, l) }},
					benchVariant{fmt.Sprintf("quantize+q8-rows%d", rows), func(c *gpu.Chain) error {
						if err := QuantizeQ8(c, x, xq, k, 1); err != nil {
							return err
						}
						return matvecQ8With(c, w, xq, y, 1, MatmulOptions{}, l)
					}})
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
