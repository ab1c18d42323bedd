package ops

import (
	"fmt"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/gguf"
)

// BenchmarkMatVecGLU compares SwiGLUFused followed by MatVec (two dispatches
// and an activated copy of the row) with MatVecGLU at Llama 3 8B's down
// projection, 4096×14336, in ns per op; HEARTH_BENCH_TYPES and
// HEARTH_BENCH_ROWS as for BenchmarkMatVecLaunch.
func BenchmarkMatVecGLU(b *testing.B) {
	types := benchTypes(b, gguf.TypeQ4_K, gguf.TypeQ6_K, gguf.TypeQ8_0)
	shapes := benchShapes(b, [2]int{4096, 14336})
	for _, typ := range types {
		for _, sh := range shapes {
			n, k := sh[0], sh[1]
			w := benchWeight(b, typ, n, k)
			gu := upload(b, "gate_up", gluGateUp(5, k))
			h, y := scratch(b, "h", k), scratch(b, "y", n)
			ops := map[string]func(c *gpu.Chain) error{
				"glu+matvec": func(c *gpu.Chain) error {
					if err := SwiGLUFused(c, gu, h, 1, k); err != nil {
						return err
					}
					return MatVec(c, w, h, y)
				},
				"fused": func(c *gpu.Chain) error { return MatVecGLU(c, w, gu, y, GLUArgs{FF: k}, MatmulOptions{}) },
			}
			for _, name := range []string{"glu+matvec", "fused"} {
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
