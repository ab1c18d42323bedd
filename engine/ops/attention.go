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
// ref.AttentionArgs has the same fields, its Sinks the values where this one
// holds a buffer.
type AttentionArgs struct {
	HeadDim int // elements per head, 1..512
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
	// Window is the sliding window in positions; 0 means none. With
	// Bidirectional it is symmetric: key j is visible from position i
	// iff |i - j| < Window (EmbeddingGemma's, transformers'
	// sliding_window/2 + 1 exclusive bound).
	Window int
	// Softcap, when > 0, caps each scaled score s to Softcap*tanh(s/Softcap)
	// before the mask and softmax (Gemma 2's attn_logit_softcapping, 50).
	Softcap float32
	// Bidirectional drops the causal mask: every query attends to all KVLen
	// keys (within the symmetric Window, if any), as an encoder (ALBERT,
	// BERT, EmbeddingGemma) does over one unpadded sequence.
	Bidirectional bool
	// Batch lifts the causal mask inside the batch: query i sees key j
	// when j <= i or j is one of the batch's later positions (up to
	// Pos0+Tokens-1), and, with a window, i - j < Window. It is how Gemma
	// 3's image tokens attend (transformers joins its token_type_ids mask
	// to the causal one and then applies the sliding window, which bounds
	// only the past; llama.cpp decodes an image as a non-causal batch): the
	// image must be one batch. Not with Bidirectional.
	Batch bool
	// Sinks, when not nil, holds Heads f32 sink logits (gpt-oss's attention
	// sinks, transformers' GptOssAttention.sinks, llama.cpp's attn_sinks):
	// query head h's softmax gets one more term in its denominator,
	// exp(Sinks[h] - m), in the units of the scaled, soft-capped scores (it
	// joins them after the mask, as transformers concatenates it), and the
	// sink has no value, so a head's weights over its keys sum to less than
	// 1. The buffer is read-only, and distinct from every output. nil is no
	// sinks.
	Sinks *gpu.Buffer
}

// attentionParams mirrors Params in shaders/attention.wgsl.
type attentionParams struct {
	HeadDim, Heads, KVHeads, Tokens uint32
	Pos0, KVLen, Window, Group      uint32
	Scale, Softcap                  float32
	NSplit, Chunk                   uint32
	Flags                           uint32 // attentionBidirectional, attentionSinks, attentionBatch
	_, _, _                         uint32
}

// attentionParams.Flags (FLAG_* in shaders/attention_common.wgsl):
// attentionBidirectional drops the causal mask, attentionSinks reads the
// sinks binding, attentionBatch shows the batch's keys to all its queries.
const (
	attentionBidirectional = 1
	attentionSinks         = 2
	attentionBatch         = 4
)

// attentionWG is the attention workgroup size: four invocations per key of a
// 64-key tile while scoring, four key groups of 64 lanes while summing
// values (see shaders/attention.wgsl for why more than one per key).
// attentionTile is TILE there.
const (
	attentionWG   = 256
	attentionTile = 64
)

// attentionMaxHeadDim is the widest head Attention takes: Gemma 4's global
// layers' 512. The decode kernel gives each vec4 of a value row to one of
// its 128 invocations (attentionDecodeWG), which reach no further.
const attentionMaxHeadDim = 512

// attentionNarrowHeadDim is the per-query kernel's MAX_HD for heads up to
// it (Gemma 2 and 3's 256); wider heads compile with MAX_HD =
// attentionMaxHeadDim. MAX_HD sets each invocation's accumulators (MAX_HD/64)
// and the workgroup's 4*MAX_HD-float acc_s, which narrow heads should not pay
// for in registers and occupancy.
const attentionNarrowHeadDim = 256

// perQuerySpec is entry of shaders/attention.wgsl compiled for a's head dim.
func (a AttentionArgs) perQuerySpec(entry string) gpu.KernelSpec {
	maxHD := attentionNarrowHeadDim
	if a.HeadDim > maxHD {
		maxHD = attentionMaxHeadDim
	}
	return gpu.Spec("attention", entry, "WG", attentionWG, "MAX_HD", maxHD)
}

// Attention appends out = softmax(mask(softcap(scale * q·kᵀ))) · v for every
// query token and head (see AttentionArgs for layouts, masks and sinks). The
// softmax is computed online over tiles of keys, so KV histories of any
// length work.
//
// Prefills of at least attentionTiledMinTokens query tokens run the
// query-tiled kernel (AttentionTiled: a workgroup per tile of queries of one
// head, each staged key and value serving the whole tile) when one of its
// tiles fits the device's workgroup memory at a.HeadDim; everything else,
// decoding in particular, runs the per-query kernel (AttentionPerQuery: a
// workgroup per query token and head). Both support every argument.
//
// When few (token, head) pairs face a long history, as in decoding, the
// per-query kernel splits the keys across workgroups (split-K, "flash
// decoding") whose partial results go to scratch and are merged by a second
// dispatch. scratch must be a buffer distinct from the others;
// AttentionScratchBytes(a) bytes allow the full split, a smaller buffer fewer
// splits, down to none (so a 4-byte buffer selects the single-pass kernel). A
// model sizes it once, for decoding at its context length. The tiled kernel
// leaves scratch alone. q, k, v and a.Sinks are read-only and out must be
// another buffer. Every path folds a head's sink in once, where its row's
// softmax is final (split-K's merge, not its partials).
func Attention(c *gpu.Chain, q, k, v, scratch, out *gpu.Buffer, a AttentionArgs) error {
	return AttentionWith(c, q, k, v, scratch, out, a, AttentionOptions{})
}

// AttentionPath selects Attention's kernel.
type AttentionPath int

const (
	// AttentionAuto is Attention's choice (see there).
	AttentionAuto AttentionPath = iota
	// AttentionPerQuery is one workgroup per (head, query token), split-K
	// when scratch allows.
	AttentionPerQuery
	// AttentionTiled is one workgroup per (head, tile of queries); an error
	// when no tile fits the device at the head dim.
	AttentionTiled
	// AttentionDecode is one workgroup per (KV head, query token, split of
	// the keys) serving every query head of the KV head's group (up to 8 a
	// workgroup), split-K when scratch allows; an error when the head dim
	// is not a multiple of 4 or the device's workgroup memory holds no
	// tile of it.
	AttentionDecode
)

// AttentionOptions tune AttentionWith, for tests and benchmarks.
type AttentionOptions struct {
	Path AttentionPath
	// Tile is the tiled kernel's tile; zero is attentionTileFor's choice.
	// A nonzero tile implies AttentionTiled.
	Tile AttentionTile
	// Splits, when > 0, is how many splits the decode kernel divides the
	// keys into (fewer when scratch is short, or when the history has
	// fewer tiles); zero is attentionDecodeSplit's choice. Only with
	// AttentionDecode.
	Splits int
}

// AttentionWith is Attention on a chosen path and tile. Every path computes
// the same out up to f32 rounding (the sums run in different orders).
func AttentionWith(c *gpu.Chain, q, k, v, scratch, out *gpu.Buffer, a AttentionArgs, o AttentionOptions) error {
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
	if err := a.checkSinks("attention", out, scratch); err != nil {
		return err
	}
	sinks := a.sinksOr(q)
	if o.Path < AttentionAuto || o.Path > AttentionDecode {
		return fmt.Errorf("ops: attention: path %d: want AttentionAuto, AttentionPerQuery, AttentionTiled or AttentionDecode", o.Path)
	}
	if o.Splits < 0 || o.Splits > 0 && o.Path != AttentionDecode {
		return fmt.Errorf("ops: attention: %d splits: a split count is an option of AttentionDecode only, and positive", o.Splits)
	}
	limit := c.Device().Limits.MaxComputeWorkgroupStorageSize
	if o.Path == AttentionDecode || o.Path == AttentionAuto && a.decodes() {
		shape, err := attentionDecodeShapeFor(a, limit)
		switch {
		case err == nil:
			return attentionDecode(c, q, k, v, sinks, scratch, out, a, shape, o.Splits)
		case o.Path == AttentionDecode:
			return err
		}
	}
	tile := o.Tile
	switch {
	case tile != (AttentionTile{}):
		if err := tile.fits(a.HeadDim, limit); err != nil {
			return err
		}
	case o.Path == AttentionTiled || o.Path == AttentionAuto && a.Tokens >= attentionTiledMinTokens:
		var ok bool
		if tile, ok = attentionTileFor(a, limit); !ok && o.Path == AttentionTiled {
			return fmt.Errorf("ops: attention: no query tile fits head_dim %d in %d bytes of workgroup memory", a.HeadDim, limit)
		}
	}
	if tile != (AttentionTile{}) {
		params := a.params(1, 0)
		grid := [3]uint32{uint32(a.Heads), uint32((a.Tokens + tile.BQ - 1) / tile.BQ), 1}
		return dispatch(c, gpu.Spec("attention_tiled", "attention_tiled", "HD", a.HeadDim, "BQ", tile.BQ, "BK", tile.BK), params, grid, q, k, v, sinks, out)
	}

	splits, chunk := a.split()
	splits, chunk = a.fitSplits(scratch, splits, chunk)
	params := a.params(splits, chunk)
	grid := [3]uint32{uint32(a.Heads), uint32(a.Tokens), 1}
	if splits == 1 {
		return dispatch(c, a.perQuerySpec("attention"), params, grid, q, k, v, sinks, scratch, out)
	}
	split := grid
	split[2] = uint32(splits)
	if err := dispatch(c, a.perQuerySpec("attention_split"), params, split, q, k, v, sinks, scratch, out); err != nil {
		return err
	}
	return dispatch(c, a.perQuerySpec("attention_combine"), params, grid, q, k, v, sinks, scratch, out)
}

// checkSinks checks a.Sinks, when set: Heads floats, and none of outs (the
// kernel's read-write bindings: WebGPU refuses a buffer bound both
// read-only and read-write in one dispatch).
func (a AttentionArgs) checkSinks(kernel string, outs ...*gpu.Buffer) error {
	if a.Sinks == nil {
		return nil
	}
	if err := needF32(kernel, "sinks", a.Sinks, a.Heads); err != nil {
		return err
	}
	for _, o := range outs {
		if a.Sinks == o {
			return fmt.Errorf("ops: %s: sinks %q is also an output", kernel, o.Label())
		}
	}
	return nil
}

// sinksOr is the buffer bound as the kernels' sinks: a.Sinks, or without
// sinks the stand-in, a read-only input of the same dispatch (every binding
// of a kernel family must be given a buffer; the kernel reads it only under
// FLAG_SINKS).
func (a AttentionArgs) sinksOr(standIn *gpu.Buffer) *gpu.Buffer {
	if a.Sinks != nil {
		return a.Sinks
	}
	return standIn
}

// params are a's kernel parameters, with splits partials of chunk keys for
// the per-query kernel's split-K.
func (a AttentionArgs) params(splits, chunk int) attentionParams {
	params := attentionParams{
		HeadDim: uint32(a.HeadDim), Heads: uint32(a.Heads), KVHeads: uint32(a.KVHeads), Tokens: uint32(a.Tokens),
		Pos0: uint32(a.Pos0), KVLen: uint32(a.KVLen), Window: uint32(a.Window), Group: uint32(a.Heads / a.KVHeads),
		Scale: a.scale(), Softcap: a.Softcap, NSplit: uint32(splits), Chunk: uint32(chunk),
	}
	if a.Bidirectional {
		params.Flags |= attentionBidirectional
	}
	if a.Sinks != nil {
		params.Flags |= attentionSinks
	}
	if a.Batch {
		params.Flags |= attentionBatch
	}
	return params
}

// AttentionTile is the query-tiled kernel's tile: BQ query tokens of one
// head per workgroup, BK keys staged per step (BQ and BK in
// shaders/attention_tiled.wgsl). BQ is a multiple of 8 and BK of 16, the
// kernel's 8 x 16 invocations.
type AttentionTile struct{ BQ, BK int }

// String names t as benchmarks do: bq16bk32.
func (t AttentionTile) String() string { return fmt.Sprintf("bq%dbk%d", t.BQ, t.BK) }

// attentionTiles are the tiles the dispatcher considers, largest BQ first.
// For one BQ the 32-key tile comes before the 64-key one (four keys an
// invocation, fewer shared loads a score, but twice the workgroup memory):
// on the H200 (docs/h200/voice/kernels.txt) ALBERT's 512 tokens ran at
// 7.6 TFLOP/s in 16x32 tiles and 4.2 in 16x64, against 1.1 per query.
var attentionTiles = []AttentionTile{{64, 32}, {32, 32}, {32, 64}, {32, 16}, {16, 32}, {16, 64}, {16, 16}, {8, 32}, {8, 16}}

const (
	// attentionTiledMinTokens is the fewest query tokens Attention runs
	// the tiled kernel for: below it a tile is mostly padding and the
	// per-query kernel's one workgroup per token fills the GPU better.
	attentionTiledMinTokens = 32
	// attentionTiledTargetGroups is how many workgroups attentionTileFor
	// wants before it takes a larger tile: two per compute unit of an
	// H200 (132 SMs). ALBERT's 12 heads x 512 tokens get 384 workgroups of
	// 16 queries rather than 96 of 64.
	attentionTiledTargetGroups = 264
	// attentionTiledMaxAcc caps each invocation's accumulators
	// (AttentionTile.accumulators) at 32 registers, so 128 invocations
	// keep every accumulator in registers.
	attentionTiledMaxAcc = 32
)

// sharedBytes is the kernel's workgroup memory at head dim hd: BQ queries
// and BK keys in rows of ceil(hd/4)+1 vec4s, BQ x BK weights at a row stride
// of BK+1 and BQ x 16 partial maxima. At Gemma 4's global head_dim of 512
// the smallest tile, 8x16, takes 50,592 bytes, over NVIDIA's 48 KiB and
// lavapipe's 32 KiB: there its prefills run per query.
func (t AttentionTile) sharedBytes(hd int) int {
	sv := (hd+3)/4 + 1
	return 4 * (4*sv*(t.BQ+t.BK) + t.BQ*(t.BK+1) + t.BQ*16)
}

// accumulators is the f32 accumulators an invocation of t keeps at head dim
// hd: BQ/8 queries x ceil(ceil(hd/4)/16) vec4s.
func (t AttentionTile) accumulators(hd int) int {
	return t.BQ / 8 * (((hd+3)/4 + 15) / 16) * 4
}

// fits reports why t cannot run at head dim hd within limit bytes of
// workgroup memory, or nil.
func (t AttentionTile) fits(hd int, limit uint32) error {
	switch {
	case t.BQ < 8 || t.BQ%8 != 0 || t.BK < 16 || t.BK%16 != 0:
		return fmt.Errorf("ops: attention: tile %v: BQ must be a positive multiple of 8 and BK of 16", t)
	case t.accumulators(hd) > attentionTiledMaxAcc:
		return fmt.Errorf("ops: attention: tile %v at head_dim %d needs %d accumulators an invocation, over %d", t, hd, t.accumulators(hd), attentionTiledMaxAcc)
	case t.sharedBytes(hd) > int(limit):
		return fmt.Errorf("ops: attention: tile %v at head_dim %d needs %d bytes of workgroup memory, the device grants %d", t, hd, t.sharedBytes(hd), limit)
	}
	return nil
}

// attentionTileFor is the tile the tiled kernel runs a with on a device
// granting limit bytes of workgroup memory: the largest that fits and still
// makes attentionTiledTargetGroups workgroups, else the smallest that fits
// (short prompts want workgroups more than reuse); false when none fits.
func attentionTileFor(a AttentionArgs, limit uint32) (AttentionTile, bool) {
	var last AttentionTile
	for _, t := range attentionTiles {
		if t.fits(a.HeadDim, limit) != nil {
			continue
		}
		last = t
		if a.Heads*((a.Tokens+t.BQ-1)/t.BQ) >= attentionTiledTargetGroups {
			return t, true
		}
	}
	return last, last != (AttentionTile{})
}

// fitSplits returns splits partials of chunk keys, or, when scratch holds
// fewer partials, as many as it holds (one: no split).
func (a AttentionArgs) fitSplits(scratch *gpu.Buffer, splits, chunk int) (int, int) {
	if a.partialBytes(splits) <= scratch.Size() {
		return splits, chunk
	}
	splits = max(1, int(scratch.Size()/a.partialBytes(1)))
	chunk = (a.maxVisible() + splits - 1) / splits
	return (a.maxVisible() + chunk - 1) / chunk, chunk
}

// AttentionScratchBytes is the scratch that lets Attention split a's keys as
// far as it wants to on any device, on whichever kernel it runs; 0 when a
// runs in a single pass anyway.
func AttentionScratchBytes(a AttentionArgs) uint64 {
	if a.check() != nil {
		return 0
	}
	splits, _ := a.split()
	if a.decodes() {
		// The smallest tile the decode kernel takes allows the most splits.
		splits = max(splits, a.decodeSplits(attentionDecodeTiles[len(attentionDecodeTiles)-1]))
	}
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
		if a.Window > 0 {
			return min(a.KVLen, 2*a.Window-1)
		}
		return a.KVLen
	}
	n := a.Pos0 + a.Tokens // the last query's keys 0..Pos0+Tokens-1
	if a.Window > 0 {
		if a.Batch {
			// The first query's window and the rest of the batch.
			return min(n, a.Window+a.Tokens-1)
		}
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
	case a.Batch && a.Bidirectional:
		return fmt.Errorf("ops: attention: a batch mask on bidirectional attention (which sees every key already)")
	case !(a.Softcap >= 0) || math.IsInf(float64(a.Softcap), 0):
		return fmt.Errorf("ops: attention: softcap %v must be finite and >= 0", a.Softcap)
	case math.IsNaN(float64(a.Scale)) || math.IsInf(float64(a.Scale), 0):
		return fmt.Errorf("ops: attention: scale %v is not finite", a.Scale)
	}
	return nil
}
