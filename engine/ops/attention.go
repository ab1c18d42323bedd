package ops

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// AttentionArgs describe one attention call. Buffers are f32, row-major:
//
//	q   [Tokens, Heads, HeadDim]               query t sits at position Pos0+t
//	k,v [n_ctx_slots, KVHeads, HeadDim]        the KV cache: position j at slot j
//	out [Tokens, Heads, HeadDim]
//
// A query at position i attends to keys j with j <= i (causal) and, when
// Window > 0, i - j < Window: the query itself and the Window-1 positions
// before it. That is Hugging Face's Gemma 2 sliding window (masking_utils:
// kv_idx > q_idx - sliding_window; older Gemma 2 code masked
// tril(diagonal=-sliding_window), the same set) and llama.cpp's
// (masked when p1 - p0 >= n_swa).
//
// The same type with the same fields is ref.AttentionArgs, so a test converts
// one into the other.
type AttentionArgs struct {
	HeadDim int // elements per head, 1..256
	Heads   int // query heads
	KVHeads int // key/value heads; Heads must be a multiple (GQA: head h reads KV head h/(Heads/KVHeads))
	Tokens  int // query tokens: 1 to decode, the batch to prefill
	Pos0    int // absolute position of the first query token
	// KVLen is how many KV slots hold valid keys; it must cover every query
	// (KVLen >= Pos0+Tokens: the caller writes this batch's keys first).
	// Slots past a query's own position are masked by causality anyway.
	KVLen int
	// Scale multiplies q·k; 0 means 1/sqrt(HeadDim). Gemma 2 passes
	// 1/sqrt(query_pre_attn_scalar).
	Scale float32
	// Window is the sliding window in positions; 0 means none.
	Window int
	// Softcap, when > 0, caps each scaled score s to Softcap*tanh(s/Softcap)
	// before the mask and softmax (Gemma 2's attn_logit_softcapping, 50).
	Softcap float32
	// Bidirectional drops the causal mask: every query attends to all KVLen
	// keys, as an encoder (ALBERT, BERT) does over one unpadded sequence.
	// Window must be 0 with it.
	Bidirectional bool
}

// attentionParams mirrors Params in shaders/attention.wgsl.
type attentionParams struct {
	HeadDim, Heads, KVHeads, Tokens uint32
	Pos0, KVLen, Window, Group      uint32
	Scale, Softcap                  float32
	NSplit, Chunk                   uint32
	Flags                           uint32 // attentionBidirectional
	_, _, _                         uint32
}

// attentionBidirectional in attentionParams.Flags drops the causal mask.
const attentionBidirectional = 1

// attentionWG is the attention workgroup size: four invocations per key of a
// 64-key tile while scoring, four key groups of 64 lanes while summing
// values (see shaders/attention.wgsl for why more than one per key).
// attentionTile is TILE there.
const (
	attentionWG   = 256
	attentionTile = 64
)

// attentionMaxHeadDim is MAX_HD in shaders/attention.wgsl.
const attentionMaxHeadDim = 256

// Attention appends out = softmax(mask(softcap(scale * q·kᵀ))) · v for every
// query token and head (see AttentionArgs for layouts and masks). The softmax
// is computed online over tiles of keys, so KV histories of any length work.
//
// When few (token, head) pairs face a long history, as in decoding, the keys
// are split across workgroups (split-K, "flash decoding") whose partial
// results go to scratch and are merged by a second dispatch. scratch must be
// a buffer distinct from the others; AttentionScratchBytes(a) bytes allow the
// full split, a smaller buffer fewer splits, down to none (so a 4-byte buffer
// selects the single-pass kernel). A model sizes it once, for decoding at its
// context length. q, k and v are read-only and out must be another buffer.
func Attention(c *gpu.Chain, q, k, v, scratch, out *gpu.Buffer, a AttentionArgs) error {
	if err := a.check(); err != nil {
		return err
	}
	qn := a.Tokens * a.Heads * a.HeadDim
	kvn := a.KVLen * a.KVHeads * a.HeadDim
	for _, b := range []struct {
		what string
		buf  *gpu.Buffer
		n    int
	}{{"q", q, qn}, {"k", k, kvn}, {"v", v, kvn}, {"scratch", scratch, 1}, {"out", out, qn}} {
		if err := needF32("attention", b.what, b.buf, b.n); err != nil {
			return err
		}
	}
	if out == q || out == k || out == v || out == scratch || scratch == q || scratch == k || scratch == v {
		return fmt.Errorf("ops: attention: out %q and scratch %q must be distinct from each other and the inputs", out.Label(), scratch.Label())
	}
	splits, chunk := a.split()
	if need := a.partialBytes(splits); need > scratch.Size() {
		splits = int(scratch.Size() / a.partialBytes(1))
		if splits < 2 {
			splits = 1
		}
		chunk = (a.maxVisible() + splits - 1) / splits
		splits = (a.maxVisible() + chunk - 1) / chunk
	}
	params := attentionParams{
		HeadDim: uint32(a.HeadDim), Heads: uint32(a.Heads), KVHeads: uint32(a.KVHeads), Tokens: uint32(a.Tokens),
		Pos0: uint32(a.Pos0), KVLen: uint32(a.KVLen), Window: uint32(a.Window), Group: uint32(a.Heads / a.KVHeads),
		Scale: a.scale(), Softcap: a.Softcap, NSplit: uint32(splits), Chunk: uint32(chunk),
	}
	if a.Bidirectional {
		params.Flags |= attentionBidirectional
	}
	grid := [3]uint32{uint32(a.Heads), uint32(a.Tokens), 1}
	if splits == 1 {
		return dispatch(c, gpu.Spec("attention", "attention", "WG", attentionWG), params, grid, q, k, v, scratch, out)
	}
	split := grid
	split[2] = uint32(splits)
	if err := dispatch(c, gpu.Spec("attention", "attention_split", "WG", attentionWG), params, split, q, k, v, scratch, out); err != nil {
		return err
	}
	return dispatch(c, gpu.Spec("attention", "attention_combine", "WG", attentionWG), params, grid, q, k, v, scratch, out)
}

// AttentionScratchBytes is the scratch that lets Attention split a's keys as
// far as it wants to; 0 when a runs in a single pass anyway.
func AttentionScratchBytes(a AttentionArgs) uint64 {
	if a.check() != nil {
		return 0
	}
	splits, _ := a.split()
	if splits == 1 {
		return 0
	}
	return a.partialBytes(splits)
}

const (
	// attentionTargetGroups is the workgroup count split-K aims for: two
	// per compute unit of a big GPU (132 SMs on an H200), and more than
	// enough for smaller ones, where extra splits only cost the combine.
	attentionTargetGroups = 256
	// attentionMinChunk is the fewest keys a split is given: one tile. On
	// the H200, Llama 3 8B decoding at 512 keys took 28-33 µs with 8 splits
	// of 64 against 37 µs with 4 of 128; Gemma 2 2B at 4096 keys took 44-50
	// µs with the 32 splits this target gives, 51 µs with 64 (runs differed
	// by about 10%).
	attentionMinChunk = attentionTile
)

// maxVisible is the most keys any query of a sees.
func (a AttentionArgs) maxVisible() int {
	if a.Bidirectional {
		return a.KVLen
	}
	n := a.Pos0 + a.Tokens // the last query's keys 0..Pos0+Tokens-1
	if a.Window > 0 {
		n = min(n, a.Window)
	}
	return n
}

// split chooses the number of key splits and the keys per split (a multiple
// of the tile).
func (a AttentionArgs) split() (splits, chunk int) {
	vis := a.maxVisible()
	groups := a.Heads * a.Tokens
	splits = min((attentionTargetGroups+groups-1)/groups, (vis+attentionMinChunk-1)/attentionMinChunk)
	if splits < 2 {
		return 1, vis
	}
	chunk = (vis + splits - 1) / splits
	chunk = (chunk + attentionTile - 1) / attentionTile * attentionTile
	return (vis + chunk - 1) / chunk, chunk
}

// partialBytes is the scratch for splits partials per (token, head).
func (a AttentionArgs) partialBytes(splits int) uint64 {
	return uint64(a.Tokens) * uint64(a.Heads) * uint64(splits) * uint64(a.HeadDim+2) * 4
}

func (a AttentionArgs) scale() float32 {
	if a.Scale == 0 {
		return float32(1 / math.Sqrt(float64(a.HeadDim)))
	}
	return a.Scale
}

func (a AttentionArgs) check() error {
	switch {
	case a.HeadDim < 1 || a.HeadDim > attentionMaxHeadDim:
		return fmt.Errorf("ops: attention: head_dim %d outside 1..%d", a.HeadDim, attentionMaxHeadDim)
	case a.Heads < 1 || a.KVHeads < 1:
		return fmt.Errorf("ops: attention: heads (%d) and kv_heads (%d) must be positive", a.Heads, a.KVHeads)
	case a.Heads%a.KVHeads != 0:
		return fmt.Errorf("ops: attention: heads (%d) must be a multiple of kv_heads (%d)", a.Heads, a.KVHeads)
	case a.Tokens < 1 || a.Tokens > 65535:
		// 65535 is WebGPU's per-dimension workgroup cap; the grid's y is the token.
		return fmt.Errorf("ops: attention: %d query tokens outside 1..65535", a.Tokens)
	case a.Heads > 65535:
		return fmt.Errorf("ops: attention: %d heads exceed 65535", a.Heads)
	case a.Pos0 < 0:
		return fmt.Errorf("ops: attention: pos0 %d is negative", a.Pos0)
	case a.KVLen < a.Pos0+a.Tokens:
		return fmt.Errorf("ops: attention: kv_len %d does not cover query positions %d..%d", a.KVLen, a.Pos0, a.Pos0+a.Tokens-1)
	case int64(a.KVLen)*int64(a.KVHeads)*int64(a.HeadDim) > math.MaxUint32:
		return fmt.Errorf("ops: attention: kv cache of %d slots overflows the kernel's 32-bit index", a.KVLen)
	case a.Window < 0:
		return fmt.Errorf("ops: attention: window %d is negative", a.Window)
	case a.Bidirectional && a.Window > 0:
		return fmt.Errorf("ops: attention: window %d with bidirectional attention: the window is defined for causal attention only", a.Window)
	case !(a.Softcap >= 0) || math.IsInf(float64(a.Softcap), 0):
		return fmt.Errorf("ops: attention: softcap %v must be finite and >= 0", a.Softcap)
	case math.IsNaN(float64(a.Scale)) || math.IsInf(float64(a.Scale), 0):
		return fmt.Errorf("ops: attention: scale %v is not finite", a.Scale)
	}
	return nil
}
