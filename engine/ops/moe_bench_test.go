package ops

import (
	"fmt"
	"slices"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/gguf"
)

// BenchmarkMoEMatVecLaunch sweeps MoEMatVec's launch shapes (its own
// first, then matvecLaunchVariants with a staging chunk) as
// GB/s of the chosen experts' weight bytes, at the decode products of the
// two mixtures the speed target names: gpt-oss-20b's gate-up (32 experts
// of 5760×2880 MXFP4, 4 chosen) and down (2880×2880, GLU fused), and
// Qwen3-30B-A3B's gate-up (128 of 1536×2048 Q4_K, 8 chosen) and down
// (2048×768 Q4_K and Q6_K, GLU fused). HEARTH_BENCH_TYPES keeps only the
// cases of the types it names. On the device:
//
//	go test ./engine/ops -run '^$' -bench MoEMatVecLaunch -benchtime 200x
func BenchmarkMoEMatVecLaunch(b *testing.B) {
	cases := []struct {
		name                   string
		typ                    gguf.Type
		experts, rows, k, used int
		glu                    bool
	}{
		{"gpt-oss/gate_up", gguf.TypeMXFP4, 32, 5760, 2880, 4, false},
		{"gpt-oss/down", gguf.TypeMXFP4, 32, 2880, 2880, 4, true},
		{"qwen3moe/gate_up", gguf.TypeQ4_K, 128, 1536, 2048, 8, false},
		{"qwen3moe/down", gguf.TypeQ4_K, 128, 2048, 768, 8, true},
		{"qwen3moe/down", gguf.TypeQ6_K, 128, 2048, 768, 8, true},
	}
	keep := map[gguf.Type]bool{}
	for _, t := range benchTypes(b, gguf.TypeMXFP4, gguf.TypeQ4_K, gguf.TypeQ6_K) {
		keep[t] = true
	}
	for _, cs := range cases {
		if !keep[cs.typ] {
			continue
		}
		if dev.Info.Type == "cpu" {
			// A software adapter takes minutes over the real stacks: 8
			// experts of 64 rows of the same widths.
			cs.experts, cs.rows = 8, 64
		}
		kern, _ := matmulKernelFor(cs.typ)
		launches := []matmulLaunch{fitVecLaunch(dev, moeVecLaunch(cs.k))}
		for _, l := range matvecLaunchVariants {
			l = fitVecLaunch(dev, stagedLaunch(matmulKernel{vec: l}))
			if checkVecLaunch(dev, "", l) == nil && !slices.Contains(launches, l) {
				launches = append(launches, l)
			}
		}
		// Every expert the same matrix: the kernel cannot tell, and the
		// chosen experts' bytes are still read from distinct addresses.
		rb, _ := cs.typ.RowSize(int64(cs.k))
		oneData := benchWeightBytes(b, cs.typ, cs.rows, cs.k)
		data := make([]byte, 0, cs.experts*len(oneData))
		for range cs.experts {
			data = append(data, oneData...)
		}
		w, err := dev.NewStack("bench.experts", cs.typ, cs.experts, cs.experts*cs.rows, cs.k, data, 0)
		if err != nil {
			b.Fatal(err)
		}
		ids := make([]uint32, cs.used)
		for s := range ids {
			ids[s] = uint32((s*7 + 3) % cs.experts) // distinct experts
		}
		bi := uploadU32(b, "ids", ids)
		a := MoEArgs{Slots: cs.used, XDiv: cs.used}
		xn := cs.k
		if cs.glu {
			a = MoEArgs{Slots: cs.used, XDiv: 1, GLU: &GLUArgs{FF: cs.k, OAI: cs.typ == gguf.TypeMXFP4}}
			xn = cs.used * 2 * cs.k
		}
		x, y := upload(b, "x", randVec(2, xn, 1)), scratch(b, "y", cs.used*cs.rows)
		p, err := moeShape("moe matvec", w, x, y, a)
		if err != nil {
			b.Fatal(err)
		}
		read := float64(cs.used * cs.rows * int(rb))
		for _, l := range launches {
			b.Run(fmt.Sprintf("%s/%v/%v", cs.name, cs.typ, l), func(b *testing.B) {
				op := func(c *gpu.Chain) error { return moeMatVecWith(c, w, kern, l, x, bi, y, a, p) }
				benchChain(b, 1, op)
				b.ResetTimer()
				benchChain(b, b.N, op)
				b.StopTimer()
				b.ReportMetric(read*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
		w.Release()
	}
}
