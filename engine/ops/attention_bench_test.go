package ops

import (
	"fmt"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// BenchmarkAttentionPrefill compares the per-query attention kernel with the
// query-tiled one (the dispatcher's tile, then every tile that fits the
// device: sub-benchmarks per-query, tiled, tiled/<tile>, e.g.
// tiled/bq16bk32) on prefill shapes: Kokoro's PL-BERT (ALBERT: 12 heads of
// 64, bidirectional) at 64 and 512 tokens, a Llama 3 8B prefill of 512
// tokens (32 heads of 128 on 8 KV heads, causal) and a Gemma 2 2B one
// (8 heads of 256 on 4, softcap 50), and Gemma 3's SigLIP tower on an
// 896×896 image (4096 patches, 16 heads of 72, bidirectional) and Gemma
// 4's E2B and 31B towers on one (2304 patches; 12 heads of 64, 16 of 72).
// GFLOP/s counts 4*head_dim per visible
// (query, key) pair and head: a multiply-add each for q·k and p·v.
func BenchmarkAttentionPrefill(b *testing.B) {
	for _, shape := range []struct {
		name string
		a    AttentionArgs
	}{
		{"albert_T64", AttentionArgs{HeadDim: 64, Heads: 12, KVHeads: 12, Tokens: 64, KVLen: 64, Bidirectional: true}},
		{"albert_T512", AttentionArgs{HeadDim: 64, Heads: 12, KVHeads: 12, Tokens: 512, KVLen: 512, Bidirectional: true}},
		{"llama8b_causal_T512", AttentionArgs{HeadDim: 128, Heads: 32, KVHeads: 8, Tokens: 512, KVLen: 512}},
		{"gemma2-2b_causal_T512", AttentionArgs{HeadDim: 256, Heads: 8, KVHeads: 4, Tokens: 512, KVLen: 512, Softcap: 50}},
		{"siglip_T4096", AttentionArgs{HeadDim: 72, Heads: 16, KVHeads: 16, Tokens: 4096, KVLen: 4096, Bidirectional: true}},
		{"gemma4-e2b-vision_T2304", AttentionArgs{HeadDim: 64, Heads: 12, KVHeads: 12, Tokens: 2304, KVLen: 2304, Bidirectional: true, Scale: 1}},
		{"gemma4-31b-vision_T2304", AttentionArgs{HeadDim: 72, Heads: 16, KVHeads: 16, Tokens: 2304, KVLen: 2304, Bidirectional: true, Scale: 1}},
	} {
		a := shape.a
		qn, kvn := a.Tokens*a.Heads*a.HeadDim, a.KVLen*a.KVHeads*a.HeadDim
		q, k, v := upload(b, "q", randVec(1, qn, 1)), upload(b, "k", randVec(2, kvn, 1)), upload(b, "v", randVec(3, kvn, 1))
		out := scratch(b, "out", qn)
		sc := scratch(b, "scratch", max(1, int(AttentionScratchBytes(a)/4)))
		flops := 4 * float64(a.HeadDim*a.Heads) * float64(attentionPairs(a))

		type path struct {
			name string
			o    AttentionOptions
		}
		paths := []path{{"per-query", AttentionOptions{Path: AttentionPerQuery}}}
		limit := dev.Limits.MaxComputeWorkgroupStorageSize
		if _, ok := attentionTileFor(a, limit); ok {
			paths = append(paths, path{"tiled", AttentionOptions{Path: AttentionTiled}})
		}
		for _, tile := range attentionTiles {
			if tile.fits(a.HeadDim, limit) == nil {
				paths = append(paths, path{"tiled/" + tile.String(), AttentionOptions{Tile: tile}})
			}
		}
		for _, p := range paths {
			b.Run(fmt.Sprintf("%s/%s", shape.name, p.name), func(b *testing.B) {
				op := func(c *gpu.Chain) error { return AttentionWith(c, q, k, v, sc, out, a, p.o) }
				benchChain(b, 1, op)
				b.ResetTimer()
				benchChain(b, b.N, op)
				b.StopTimer()
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// attentionPairs counts the (query, key) pairs a's mask leaves visible, per
// head.
func attentionPairs(a AttentionArgs) int {
	if a.Bidirectional {
		return a.Tokens * a.KVLen
	}
	n := 0
	for t := range a.Tokens {
		i := a.Pos0 + t
		lo := 0
		if a.Window > 0 {
			lo = max(0, i+1-a.Window)
		}
		n += min(i+1, a.KVLen) - lo
	}
	return n
}

// BenchmarkAttentionDecode compares the per-query kernel (split-K) with the
// decode kernel that serves a KV head's whole query group (its own splits,
// then forced ones) on decode shapes: Llama 3 8B (32 heads of 128 on 8),
// Llama 3.2 1B (32 of 64 on 8) and Gemma 3 1B (4 of 256 on 1) at 512 and
// 4096 keys. GB/s counts each KV head's keys and values once, the traffic
// the decode kernel is meant to approach.
func BenchmarkAttentionDecode(b *testing.B) {
	for _, shape := range []struct {
		name string
		a    AttentionArgs
	}{
		{"llama8b", AttentionArgs{HeadDim: 128, Heads: 32, KVHeads: 8, Tokens: 1}},
		{"llama1b", AttentionArgs{HeadDim: 64, Heads: 32, KVHeads: 8, Tokens: 1}},
		{"gemma3-1b", AttentionArgs{HeadDim: 256, Heads: 4, KVHeads: 1, Tokens: 1, Scale: 1.0 / 16}},
	} {
		for _, kv := range []int{512, 4096} {
			a := shape.a
			a.Pos0, a.KVLen = kv-1, kv
			qn, kvn := a.Tokens*a.Heads*a.HeadDim, a.KVLen*a.KVHeads*a.HeadDim
			q, k, v := upload(b, "q", randVec(1, qn, 1)), upload(b, "k", randVec(2, kvn, 1)), upload(b, "v", randVec(3, kvn, 1))
			out := scratch(b, "out", qn)
			sc := scratch(b, "scratch", int(a.partialBytes(256)/4))
			paths := []struct {
				name string
				o    AttentionOptions
			}{
				{"per-query", AttentionOptions{Path: AttentionPerQuery}},
				{"decode", AttentionOptions{Path: AttentionDecode}},
			}
			for _, s := range []int{16, 32, 64, 128, 256} {
				paths = append(paths, struct {
					name string
					o    AttentionOptions
				}{fmt.Sprintf("decode/splits%d", s), AttentionOptions{Path: AttentionDecode, Splits: s}})
			}
			for _, p := range paths {
				b.Run(fmt.Sprintf("%s_kv%d/%s", shape.name, kv, p.name), func(b *testing.B) {
					benchDispatches(b, 20, float64(2*kvn*4), out, func(c *gpu.Chain) error { return AttentionWith(c, q, k, v, sc, out, a, p.o) })
				})
			}
		}
	}
}
