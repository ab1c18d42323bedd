package ops

import (
	"fmt"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/gguf"
)

// BenchmarkMatMulBackwardLaunch compares launch shapes of the backward
// kernel (ct×rt invocations a slice, ks slices, bn rows a stage) on the
// training shapes that dominate a step, at m = 512: gate/up (8192×2048)
// and q/o (2048²) in Q4_K. Shapes needing more workgroup memory than the
// device grants are skipped.
func BenchmarkMatMulBackwardLaunch(b *testing.B) {
	const m = 512
	for _, s := range []struct{ n, k int }{{8192, 2048}, {2048, 2048}} {
		for _, l := range backwardLaunchShapes {
			if l.sharedBytes() > int(dev.Limits.MaxComputeWorkgroupStorageSize) || l.wg() > int(dev.Limits.MaxComputeInvocationsPerWorkgroup) {
				continue
			}
			name := fmt.Sprintf("%dx%d/ct%d_rt%d_ks%d_bn%d", s.n, s.k, l.ct, l.rt, l.ks, l.bn)
			b.Run(name, func(b *testing.B) {
				w := benchWeight(b, gguf.TypeQ4_K, s.n, s.k)
				dy, dx := upload(b, "dy", randVec(2, m*s.n, 1)), scratch(b, "dx", m*s.k)
				op := func(c *gpu.Chain) error {
					return matmulBackwardWith(c, w, dy, dx, m, MatmulBackwardOptions{}, l)
				}
				benchChain(b, 1, op)
				b.ResetTimer()
				benchChain(b, b.N, op)
				b.StopTimer()
				b.ReportMetric(2*float64(m)*float64(s.n)*float64(s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// backwardLaunchShapes are the shapes BenchmarkMatMulBackwardLaunch
// compares.
var backwardLaunchShapes = []backwardLaunch{
	{8, 8, 4, 32}, {8, 8, 2, 32}, {8, 4, 8, 32}, {4, 8, 8, 32},
	{8, 16, 2, 32}, {16, 8, 2, 32}, {8, 8, 4, 64}, {8, 16, 4, 64},
}

func TestMatMulBackwardLaunchShapes(t *testing.T) {
	// Every launch shape the benchmark tries computes the same dX: ragged
	// tiles in both directions, rows over several stages and splits.
	for _, l := range backwardLaunchShapes {
		if l.sharedBytes() > int(dev.Limits.MaxComputeWorkgroupStorageSize) || l.wg() > int(dev.Limits.MaxComputeInvocationsPerWorkgroup) {
			continue
		}
		for _, c := range []struct {
			typ        gguf.Type
			rows, cols int
			m          int
		}{{gguf.TypeQ4_K, 150, 512, 70}, {gguf.TypeF16, 97, 200, 41}} {
			t.Run(fmt.Sprintf("ct%d_rt%d_ks%d_bn%d/%v", l.ct, l.rt, l.ks, l.bn, c.typ), func(t *testing.T) {
				q, deq := remix(t, c.typ, c.rows, c.cols)
				dy := randVec(31, c.m*c.rows, 1)
				want, bound := matmulBackwardOracle(deq, c.rows, c.cols, dy, c.m)
				w := newTensor(t, "w", c.typ, c.rows, c.cols, q, 0)
				bdy := upload(t, "dy", dy)
				for _, parts := range []*gpu.Buffer{nil, scratch(t, "partials", 3*c.m*c.cols)} {
					bdx := upload(t, "dx", randVec(5, c.m*c.cols, 100))
					run(t, "matmul backward launch", func(ch *gpu.Chain) error {
						return matmulBackwardWith(ch, w, bdy, bdx, c.m, MatmulBackwardOptions{Partials: parts}, l)
					})
					assertMatmulBackward(t, "gpu", download(t, bdx, c.m*c.cols), want, bound, c.rows)
				}
			})
		}
	}
}
