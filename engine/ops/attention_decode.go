package ops

import (
	"fmt"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// The decode kernel (shaders/attention_decode.wgsl): a workgroup per (KV
// head, query token, split of the keys) serves up to attentionDecodeMaxGQ
// query heads of the KV head's group, so each K and V row is read once per
// group instead of once per query head.

const (
	// attentionDecodeMaxTokens is the most query tokens Attention sends to
	// the decode kernel: it reads the history once per token, which for a
	// handful of tokens is still less than the per-query kernel's once per
	// query head.
	attentionDecodeMaxTokens = 4
	// attentionDecodeMaxGQ bounds the query heads of one workgroup (GQ):
	// each invocation keeps GQ vec4 accumulators, 32 registers at 8. A
	// larger group is served by several workgroups.
	attentionDecodeMaxGQ = 8
	// attentionDecodeWG is WG in the shader.
	attentionDecodeWG = 128
	// attentionDecodeTargetGroups is the workgroup count the splits aim
	// for: about one per compute unit of an H100/H200 (132 SMs), so Llama 3
	// 8B's 8 KV heads decode 4096 keys in 16 splits of 256. On the H100
	// (BenchmarkAttentionDecode, 2026-12-08, docs/h200/prefill/
	// lease-2026-12-08.txt) fewer splits were faster at 4096 keys: Llama 3
	// 8B 65 µs at 16 splits against 74 at 32 (the former target, 256
	// groups) and 82 at 64; Llama 3.2 1B 44 against 49. Gemma 3 1B (one KV
	// head, whose 4096 keys make at most 128 splits of its 32-key tiles)
	// stays at 128 splits, 56-58 µs; 64 splits gave 48, and the
	// per-query kernel 42.
	attentionDecodeTargetGroups = 128
)

// attentionDecodeTiles are the key tiles (TK) the decode kernel stages,
// largest first: more keys a tile are more loads in flight between
// barriers, as long as the tile fits workgroup memory.
var attentionDecodeTiles = []int{64, 32, 16, 8}

// attentionDecodeBlocks are its score blocks (SC), largest first: a larger
// block rescales the accumulators fewer times.
var attentionDecodeBlocks = []int{256, 128, 64, 32, 16, 8}

// attentionDecodeShape are the decode kernel's compile-time constants
// besides the head dim: query heads a workgroup (GQ), keys a staged tile
// (TK) and keys a score block (SC).
type attentionDecodeShape struct{ GQ, TK, SC int }

// sharedBytes is the kernel's workgroup memory at head dim hd (see the
// shader's header): the GQ queries, a tile of keys at an odd vec4 row
// stride, the block's scores, the softmax partials and per-head maxima and
// sums, and the key parts' accumulators.
func (s attentionDecodeShape) sharedBytes(hd int) int {
	hdv := hd / 4
	return 16*s.GQ*hdv + 16*s.TK*(hdv+1) + 4*s.GQ*s.SC + 20*attentionDecodeWG + 8*s.GQ
}

// decodes reports whether Attention's automatic choice is the decode
// kernel: few query tokens, query heads that share KV heads (with one
// query head per KV head there is nothing to share) and a head dim the
// kernel reads as vec4s.
func (a AttentionArgs) decodes() bool {
	return a.Tokens <= attentionDecodeMaxTokens && a.Heads > a.KVHeads && a.HeadDim%4 == 0
}

// attentionDecodeShapeFor is the shape the decode kernel runs a with on a
// device granting limit bytes of workgroup memory: the group split into
// the fewest workgroups of at most attentionDecodeMaxGQ heads, then the
// largest tile and block that fit; with no fit, the group in halves again.
func attentionDecodeShapeFor(a AttentionArgs, limit uint32) (attentionDecodeShape, error) {
	if a.HeadDim%4 != 0 {
		return attentionDecodeShape{}, fmt.Errorf("ops: attention: the decode kernel reads rows as vec4s and head_dim %d is not a multiple of 4", a.HeadDim)
	}
	group := a.Heads / a.KVHeads
	gq := (group + attentionDecodeMaxGQ - 1) / attentionDecodeMaxGQ
	gq = (group + gq - 1) / gq
	for ; ; gq = (gq + 1) / 2 {
		for _, tk := range attentionDecodeTiles {
			for _, sc := range attentionDecodeBlocks {
				s := attentionDecodeShape{GQ: gq, TK: tk, SC: sc}
				if sc >= tk && s.sharedBytes(a.HeadDim) <= int(limit) {
					return s, nil
				}
			}
		}
		if gq == 1 {
			break
		}
	}
	smallest := attentionDecodeShape{GQ: 1, TK: attentionDecodeTiles[len(attentionDecodeTiles)-1], SC: attentionDecodeBlocks[len(attentionDecodeBlocks)-1]}
	return attentionDecodeShape{}, fmt.Errorf("ops: attention: the decode kernel needs %d bytes of workgroup memory at head_dim %d, the device grants %d", smallest.sharedBytes(a.HeadDim), a.HeadDim, limit)
}

// decodeGroups is the decode kernel's workgroups a split at GQ query heads
// a workgroup: KV heads x the group's pieces x tokens.
func (a AttentionArgs) decodeGroups(gq int) int {
	group := a.Heads / a.KVHeads
	return a.KVHeads * ((group + gq - 1) / gq) * a.Tokens
}

// decodeSplits is how many splits of whole tk-key tiles the decode kernel
// divides a's keys into: enough for attentionDecodeTargetGroups workgroups
// at the fewest workgroups a split any shape makes (GQ at its largest), one
// tile a split at the least, so it bounds the splits of every shape with
// that tile.
func (a AttentionArgs) decodeSplits(tk int) int {
	groups := a.decodeGroups(attentionDecodeMaxGQ)
	return max(1, min((attentionDecodeTargetGroups+groups-1)/groups, (a.maxVisible()+tk-1)/tk))
}

// attentionDecodeSplit is the splits and keys a split the decode kernel
// runs a with in shape s, asking for want splits (0: its own choice): a
// split is whole tiles, and enough splits that the grid reaches
// attentionDecodeTargetGroups.
func attentionDecodeSplit(a AttentionArgs, s attentionDecodeShape, want int) (splits, chunk int) {
	vis := a.maxVisible()
	groups := a.decodeGroups(s.GQ)
	splits = min((attentionDecodeTargetGroups+groups-1)/groups, (vis+s.TK-1)/s.TK)
	if want > 0 {
		splits = min(want, vis, 65535) // 65535: WebGPU's cap on the grid's z
	}
	splits = max(1, splits)
	chunk = (vis + splits - 1) / splits
	if want == 0 {
		chunk = (chunk + s.TK - 1) / s.TK * s.TK
	}
	return (vis + chunk - 1) / chunk, chunk
}

// attentionDecode records the decode kernel in shape s, split-K into want
// splits (0: its own choice) or as many as scratch holds, with
// attention.wgsl's combine merging the partials and folding in the sinks;
// sinks is what the kernels bind as theirs (AttentionArgs.sinksOr).
func attentionDecode(c *gpu.Chain, q, k, v, sinks, scratch, out *gpu.Buffer, a AttentionArgs, s attentionDecodeShape, want int) error {
	splits, chunk := attentionDecodeSplit(a, s, want)
	splits, chunk = a.fitSplits(scratch, splits, chunk)
	params := a.params(splits, chunk)
	spec := gpu.Spec("attention_decode", "attention_decode", "HD", a.HeadDim, "GQ", s.GQ, "TK", s.TK, "SC", s.SC)
	grid := [3]uint32{uint32(a.decodeGroups(s.GQ) / a.Tokens), uint32(a.Tokens), uint32(splits)}
	if err := dispatch(c, spec, params, grid, q, k, v, sinks, scratch, out); err != nil {
		return err
	}
	if splits == 1 {
		return nil
	}
	return dispatch(c, a.perQuerySpec("attention_combine"), params, [3]uint32{uint32(a.Heads), uint32(a.Tokens), 1}, q, k, v, sinks, scratch, out)
}
