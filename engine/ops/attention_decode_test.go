package ops

import (
	"fmt"
	"testing"
)

// attentionDecodeCases cover the decode kernel: GQA ratios 1, 2, 4, 7
// (MQA), 8, 9 (two workgroups of 5 heads, one idle) and 12 (two of 6);
// head dims 64, 80, 96, 128 and 256; histories of 1 and 17 keys, a 4099-key
// one (split into whole 64-key tiles and a 3-key tail) and ragged tiles;
// windows (of 1, and shorter than the history), softcap with Gemma's
// scale, queries before the end of the history, batches of 2 and 3 tokens
// and a bidirectional pair.
var attentionDecodeCases = []struct {
	name string
	a    AttentionArgs
}{
	{"ratio1 hd64 kv17", AttentionArgs{HeadDim: 64, Heads: 4, KVHeads: 4, Tokens: 1, Pos0: 16, KVLen: 17}},
	{"ratio4 hd256 kv1 gemma3 softcap", AttentionArgs{HeadDim: 256, Heads: 4, KVHeads: 1, Tokens: 1, Pos0: 0, KVLen: 1, Scale: 1.0 / 16, Softcap: 50}},
	{"ratio4 hd128 kv4099", AttentionArgs{HeadDim: 128, Heads: 8, KVHeads: 2, Tokens: 1, Pos0: 4098, KVLen: 4099}},
	{"ratio8 hd64 kv17", AttentionArgs{HeadDim: 64, Heads: 16, KVHeads: 2, Tokens: 1, Pos0: 16, KVLen: 17}},
	{"ratio8 hd64 kv300", AttentionArgs{HeadDim: 64, Heads: 8, KVHeads: 1, Tokens: 1, Pos0: 299, KVLen: 300}},
	{"ratio2 hd80 kv300 window64", AttentionArgs{HeadDim: 80, Heads: 4, KVHeads: 2, Tokens: 1, Pos0: 299, KVLen: 300, Window: 64}},
	{"ratio4 hd128 window1", AttentionArgs{HeadDim: 128, Heads: 4, KVHeads: 1, Tokens: 1, Pos0: 99, KVLen: 100, Window: 1}},
	{"mqa7 hd96 kv37", AttentionArgs{HeadDim: 96, Heads: 7, KVHeads: 1, Tokens: 1, Pos0: 36, KVLen: 37}},
	{"ratio9 hd64 kv70", AttentionArgs{HeadDim: 64, Heads: 18, KVHeads: 2, Tokens: 1, Pos0: 69, KVLen: 70}},
	{"ratio12 hd64 kv70", AttentionArgs{HeadDim: 64, Heads: 12, KVHeads: 1, Tokens: 1, Pos0: 69, KVLen: 70}},
	{"mid-history pos0 40 kv300", AttentionArgs{HeadDim: 64, Heads: 4, KVHeads: 1, Tokens: 1, Pos0: 40, KVLen: 300}},
	{"3 tokens at pos0 11 window7", AttentionArgs{HeadDim: 80, Heads: 8, KVHeads: 2, Tokens: 3, Pos0: 11, KVLen: 14, Window: 7}},
	{"2 tokens at pos0 0", AttentionArgs{HeadDim: 128, Heads: 8, KVHeads: 2, Tokens: 2, Pos0: 0, KVLen: 2}},
	{"bidirectional 2 kv90", AttentionArgs{HeadDim: 64, Heads: 4, KVHeads: 2, Tokens: 2, KVLen: 90, Bidirectional: true}},
}

// decodeRuns are the decode kernel with the scratch its splits ask for, in
// a single pass (4 bytes of scratch), in 3 forced splits and in one split
// per key up to 64, and Attention's own choice when that is the decode
// kernel.
func decodeRuns(a AttentionArgs) []attentionRun {
	full := int(AttentionScratchBytes(a))
	vis := a.maxVisible()
	one := int(a.partialBytes(min(vis, 64)))
	runs := []attentionRun{
		{fmt.Sprintf("decode with %d scratch bytes", full), max(full, int(a.partialBytes(3))), AttentionOptions{Path: AttentionDecode}},
		{"decode with 4 scratch bytes", 4, AttentionOptions{Path: AttentionDecode}},
		{"decode in 3 splits", int(a.partialBytes(3)), AttentionOptions{Path: AttentionDecode, Splits: 3}},
		{fmt.Sprintf("decode in %d splits", min(vis, 64)), one, AttentionOptions{Path: AttentionDecode, Splits: min(vis, 64)}},
	}
	if a.decodes() {
		runs = append(runs, attentionRun{"auto", full, AttentionOptions{}})
	}
	return runs
}

// TestAttentionDecodeMatchesReference runs the decode kernel on
// attentionDecodeCases at unit and at wide magnitudes, with and without
// split-K.
func TestAttentionDecodeMatchesReference(t *testing.T) {
	t.Logf("workgroup memory: %d bytes", dev.Limits.MaxComputeWorkgroupStorageSize)
	for i, tc := range attentionDecodeCases {
		runs := decodeRuns(tc.a)
		t.Run(tc.name, func(t *testing.T) {
			// As TestAttentionMatchesReference: f32 dots over <= 256 terms
			// and weighted sums over <= 4099 keys, ~1e-6 relative.
			checkAttentionRuns(t, uint64(1300+10*i), tc.a, attentionInputs{QK: 1, V: 1}, 3e-6, 0, runs)
		})
		t.Run(tc.name+"/wide", func(t *testing.T) {
			// As TestAttentionWideMagnitude: scores of hundreds and spiked
			// keys (every 97th), outputs up to 30 moved by a score's f32
			// error of ~1e-5 relative: ~3e-4.
			checkAttentionRuns(t, uint64(1300+10*i), tc.a, attentionInputs{QK: 8, V: 30, Spike: 4}, 1e-3, 0, runs)
		})
	}
}

// TestAttentionDecodeShapes checks the decode kernel's shape and splits at
// real model shapes on an H200 (48 KiB of workgroup memory) and on a WebGPU
// default device (16 KiB): Llama 3 8B's 4096 keys in 16 splits of 256 on 8
// KV heads (128 workgroups), Gemma 3 1B's one KV head of 256 in splits of
// whole tiles, a 12-head group in two workgroups of 6, and that the scratch
// AttentionScratchBytes asks for holds every split the kernel takes.
func TestAttentionDecodeShapes(t *testing.T) {
	const h200 = 49152
	for _, tc := range []struct {
		a          AttentionArgs
		limit      uint32
		want       attentionDecodeShape
		wantSplits int
	}{
		{AttentionArgs{HeadDim: 128, Heads: 32, KVHeads: 8, Tokens: 1, Pos0: 4095, KVLen: 4096}, h200, attentionDecodeShape{4, 64, 256}, 16},
		{AttentionArgs{HeadDim: 128, Heads: 32, KVHeads: 8, Tokens: 1, Pos0: 511, KVLen: 512}, h200, attentionDecodeShape{4, 64, 256}, 8},
		{AttentionArgs{HeadDim: 128, Heads: 32, KVHeads: 8, Tokens: 1, Pos0: 4095, KVLen: 4096}, webGPUDefaultStorage, attentionDecodeShape{4, 16, 128}, 16},
		{AttentionArgs{HeadDim: 64, Heads: 32, KVHeads: 8, Tokens: 1, Pos0: 4095, KVLen: 4096}, h200, attentionDecodeShape{4, 64, 256}, 16},
		{AttentionArgs{HeadDim: 256, Heads: 4, KVHeads: 1, Tokens: 1, Pos0: 4095, KVLen: 4096}, h200, attentionDecodeShape{4, 32, 256}, 128},
		{AttentionArgs{HeadDim: 256, Heads: 4, KVHeads: 1, Tokens: 1, Pos0: 4095, KVLen: 4096}, webGPUDefaultStorage, attentionDecodeShape{4, 8, 64}, 128},
		{AttentionArgs{HeadDim: 64, Heads: 12, KVHeads: 1, Tokens: 1, Pos0: 69, KVLen: 70}, h200, attentionDecodeShape{6, 64, 256}, 2},
	} {
		s, err := attentionDecodeShapeFor(tc.a, tc.limit)
		if err != nil {
			t.Errorf("%+v at %d bytes: %v", tc.a, tc.limit, err)
			continue
		}
		splits, chunk := attentionDecodeSplit(tc.a, s, 0)
		if s != tc.want || splits != tc.wantSplits {
			t.Errorf("%+v at %d bytes: shape %+v in %d splits of %d, want %+v in %d", tc.a, tc.limit, s, splits, chunk, tc.want, tc.wantSplits)
		}
		if s.sharedBytes(tc.a.HeadDim) > int(tc.limit) {
			t.Errorf("%+v: shape %+v takes %d bytes, over %d", tc.a, s, s.sharedBytes(tc.a.HeadDim), tc.limit)
		}
		if need := tc.a.partialBytes(splits); need > AttentionScratchBytes(tc.a) {
			t.Errorf("%+v: %d splits need %d scratch bytes, AttentionScratchBytes gives %d", tc.a, splits, need, AttentionScratchBytes(tc.a))
		}
		if !tc.a.decodes() {
			t.Errorf("%+v: Attention would not choose the decode kernel", tc.a)
		}
	}
	for _, a := range []AttentionArgs{
		{HeadDim: 128, Heads: 8, KVHeads: 8, Tokens: 1, Pos0: 99, KVLen: 100},  // nothing shared
		{HeadDim: 128, Heads: 32, KVHeads: 8, Tokens: 5, Pos0: 99, KVLen: 104}, // a prefill
		{HeadDim: 72 + 2, Heads: 8, KVHeads: 2, Tokens: 1, Pos0: 99, KVLen: 100},
	} {
		if a.decodes() {
			t.Errorf("%+v: Attention would choose the decode kernel", a)
		}
	}
}

// TestAttentionDecodeRejects checks the decode path's errors: a head dim it
// cannot read as vec4s, a split count on another path or negative.
func TestAttentionDecodeRejects(t *testing.T) {
	a := AttentionArgs{HeadDim: 62, Heads: 4, KVHeads: 2, Tokens: 1, Pos0: 4, KVLen: 5}
	qn, kvn := 4*62, 5*2*62
	q, k, v, out := upload(t, "q", make([]float32, qn)), upload(t, "k", make([]float32, kvn)), upload(t, "v", make([]float32, kvn)), scratch(t, "out", qn)
	sc := scratch(t, "scratch", 1)
	c, err := dev.NewChain("bad decode attention")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	if err := Attention(c, q, k, v, sc, out, a); err != nil {
		t.Fatalf("head_dim 62 on the automatic path (the per-query kernel) failed: %v", err)
	}
	for _, tc := range []struct {
		name string
		o    AttentionOptions
	}{
		{"head_dim 62", AttentionOptions{Path: AttentionDecode}},
		{"splits on the per-query path", AttentionOptions{Path: AttentionPerQuery, Splits: 2}},
		{"splits on the automatic path", AttentionOptions{Splits: 2}},
		{"negative splits", AttentionOptions{Path: AttentionDecode, Splits: -1}},
	} {
		if err := AttentionWith(c, q, k, v, sc, out, a, tc.o); err == nil {
			t.Errorf("%s: accepted", tc.name)
		} else {
			t.Logf("%s: %v", tc.name, err)
		}
	}
}
