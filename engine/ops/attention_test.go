package ops

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// attentionCases cover every head width Hearth's models use plus an odd 72,
// MQA (7 heads on 1 KV head) and GQA ratios 2 and 4, KV lengths of 1, one
// workgroup tile ± 1, several tiles with a ragged tail and a long history,
// windows shorter than the history, prefill batches at pos0 0 and 11, and
// calls that take the split-K path (kv300, kv2000, gemma2 scale and the two
// marked split).
var attentionCases = []struct {
	name string
	a    AttentionArgs
}{
	{"decode kv1 hd64", AttentionArgs{HeadDim: 64, Heads: 4, KVHeads: 4, Tokens: 1, Pos0: 0, KVLen: 1}},
	{"decode kv37 hd80 mqa7", AttentionArgs{HeadDim: 80, Heads: 7, KVHeads: 1, Tokens: 1, Pos0: 36, KVLen: 37}},
	{"decode kv63 hd72", AttentionArgs{HeadDim: 72, Heads: 6, KVHeads: 3, Tokens: 1, Pos0: 62, KVLen: 63}},
	{"decode kv65 hd96 gqa4", AttentionArgs{HeadDim: 96, Heads: 8, KVHeads: 2, Tokens: 1, Pos0: 64, KVLen: 65}},
	{"decode kv300 hd128 gqa4", AttentionArgs{HeadDim: 128, Heads: 4, KVHeads: 1, Tokens: 1, Pos0: 299, KVLen: 300}},
	{"decode kv300 hd256 window64", AttentionArgs{HeadDim: 256, Heads: 2, KVHeads: 1, Tokens: 1, Pos0: 299, KVLen: 300, Window: 64}},
	{"decode kv300 window1", AttentionArgs{HeadDim: 64, Heads: 2, KVHeads: 2, Tokens: 1, Pos0: 299, KVLen: 300, Window: 1}},
	{"decode kv2000 hd64", AttentionArgs{HeadDim: 64, Heads: 2, KVHeads: 1, Tokens: 1, Pos0: 1999, KVLen: 2000}},
	{"decode mid-history", AttentionArgs{HeadDim: 64, Heads: 2, KVHeads: 1, Tokens: 1, Pos0: 40, KVLen: 300}},
	{"prefill 5 at pos0 0 gqa4", AttentionArgs{HeadDim: 64, Heads: 8, KVHeads: 2, Tokens: 5, Pos0: 0, KVLen: 5}},
	{"prefill 5 at pos0 11 hd72", AttentionArgs{HeadDim: 72, Heads: 7, KVHeads: 1, Tokens: 5, Pos0: 11, KVLen: 16}},
	{"prefill 5 at pos0 11 window7", AttentionArgs{HeadDim: 80, Heads: 4, KVHeads: 2, Tokens: 5, Pos0: 11, KVLen: 16, Window: 7}},
	{"prefill 70 window 50 softcap", AttentionArgs{HeadDim: 128, Heads: 2, KVHeads: 1, Tokens: 70, Pos0: 30, KVLen: 100, Window: 50, Softcap: 50}},
	// Split-K: a window offsets every split; a prefill batch whose early
	// queries see too few keys to reach the last split leaves it empty.
	{"decode kv2000 window1000 split", AttentionArgs{HeadDim: 96, Heads: 1, KVHeads: 1, Tokens: 1, Pos0: 1999, KVLen: 2000, Window: 1000}},
	{"prefill 200 split", AttentionArgs{HeadDim: 64, Heads: 1, KVHeads: 1, Tokens: 200, Pos0: 0, KVLen: 200}},
	{"decode gemma2 scale", AttentionArgs{HeadDim: 128, Heads: 4, KVHeads: 2, Tokens: 1, Pos0: 130, KVLen: 131, Scale: 1.0 / 12, Softcap: 50}},
	// Bidirectional (ALBERT's encoder): every query sees every key, the
	// first query included; 70 keys cross a tile, 300 with one query
	// takes the split-K path.
	{"bidirectional 13 albert", AttentionArgs{HeadDim: 64, Heads: 12, KVHeads: 12, Tokens: 13, KVLen: 13, Bidirectional: true}},
	{"bidirectional 70 hd16", AttentionArgs{HeadDim: 16, Heads: 4, KVHeads: 4, Tokens: 70, KVLen: 70, Bidirectional: true}},
	{"bidirectional kv300 split", AttentionArgs{HeadDim: 64, Heads: 1, KVHeads: 1, Tokens: 1, KVLen: 300, Bidirectional: true}},
	// EmbeddingGemma's sliding layers: |i - j| < Window, both sides.
	{"bidirectional window 5 T40 gqa", AttentionArgs{HeadDim: 16, Heads: 4, KVHeads: 2, Tokens: 40, KVLen: 40, Bidirectional: true, Window: 5}},
	{"bidirectional window 257 kv300 split", AttentionArgs{HeadDim: 64, Heads: 2, KVHeads: 1, Tokens: 3, KVLen: 300, Bidirectional: true, Window: 257}},
	// Batch (Gemma 3's image tokens): the batch sees its later keys after
	// a causal history; a window shorter than the batch still cuts its
	// past, and keys past the batch stay masked.
	{"batch 16 at pos0 9", AttentionArgs{HeadDim: 16, Heads: 4, KVHeads: 2, Tokens: 16, Pos0: 9, KVLen: 25, Batch: true}},
	{"batch 70 at pos0 30 window 8 kv120", AttentionArgs{HeadDim: 64, Heads: 2, KVHeads: 1, Tokens: 70, Pos0: 30, KVLen: 120, Window: 8, Batch: true}},
	{"batch 3 at pos0 297 split", AttentionArgs{HeadDim: 64, Heads: 1, KVHeads: 1, Tokens: 3, Pos0: 297, KVLen: 300, Batch: true}},
}

// attentionInputs are the magnitudes of a test's random q, k and v: q and k
// uniform in ±QK, v in ±V, and when Spike > 0 every 97th key (slots 50,
// 147, ...) scaled by Spike, an outlier key like the massive activations
// real models grow. Sinks, when not nil, are the heads' sink logits
// (AttentionArgs.Sinks).
type attentionInputs struct {
	QK, V, Spike float32
	Sinks        []float32
}

// refAttentionArgs is a as the reference takes it, with sinks as the values
// of a.Sinks (nil: none).
func refAttentionArgs(a AttentionArgs, sinks []float32) ref.AttentionArgs {
	return ref.AttentionArgs{
		HeadDim: a.HeadDim, Heads: a.Heads, KVHeads: a.KVHeads, Tokens: a.Tokens, Pos0: a.Pos0, KVLen: a.KVLen,
		Scale: a.Scale, Window: a.Window, Softcap: a.Softcap, Bidirectional: a.Bidirectional, Batch: a.Batch, Sinks: sinks,
	}
}

// checkAttention runs Attention on random q, k, v of magnitudes in and
// compares with the reference: the per-query kernel once with the scratch
// split-K asks for (scratchBytes < 0) or the given bytes, once with a 4-byte
// scratch (the single-pass kernel); Attention's own choice with that
// scratch; then the tiled kernel in the tiles of tiledRuns. The KV buffers
// hold 3 slots more than KVLen, filled with NaN, so a read past the history
// poisons the output.
func checkAttention(t *testing.T, seed uint64, a AttentionArgs, scratchBytes int, in attentionInputs, atol, rtol float64) {
	t.Helper()
	if scratchBytes < 0 {
		scratchBytes = int(AttentionScratchBytes(a))
	}
	runs := []attentionRun{
		{fmt.Sprintf("per-query with %d scratch bytes", scratchBytes), scratchBytes, AttentionOptions{Path: AttentionPerQuery}},
		{"per-query with 4 scratch bytes", 4, AttentionOptions{Path: AttentionPerQuery}},
		{"auto", scratchBytes, AttentionOptions{}},
	}
	runs = append(runs, tiledRuns(a)...)
	checkAttentionRuns(t, seed, a, in, atol, rtol, runs)
}

// attentionRun is one way checkAttentionRuns calls AttentionWith.
type attentionRun struct {
	name  string
	bytes int // scratch
	o     AttentionOptions
}

// webGPUDefaultStorage is WebGPU's default maxComputeWorkgroupStorageSize,
// what a device that raises no limits grants.
const webGPUDefaultStorage = 16384

// tiledRuns are the tiled kernel in the tile the dispatcher picks on dev,
// the one it picks on a 16 KiB device and the largest that fits dev (the
// dispatcher takes small tiles for the few workgroups of a test's shapes,
// and only larger ones give an invocation several queries and keys).
func tiledRuns(a AttentionArgs) []attentionRun {
	limit := dev.Limits.MaxComputeWorkgroupStorageSize
	var tiles []AttentionTile
	for _, l := range []uint32{limit, min(limit, webGPUDefaultStorage)} {
		if tile, ok := attentionTileFor(a, l); ok {
			tiles = append(tiles, tile)
		}
	}
	for _, tile := range attentionTiles {
		if tile.fits(a.HeadDim, limit) == nil {
			tiles = append(tiles, tile)
			break
		}
	}
	var runs []attentionRun
	seen := map[AttentionTile]bool{}
	for _, tile := range tiles {
		if !seen[tile] {
			seen[tile] = true
			runs = append(runs, attentionRun{"tiled " + tile.String(), 4, AttentionOptions{Tile: tile}})
		}
	}
	return runs
}

// attentionTiledCases are shapes for the tiled kernel in every tile:
// ALBERT's encoder and a bidirectional call with more keys than queries,
// causal prefills at pos0 0 and later with history past the batch (masked
// by causality), T = 1, T not a multiple of any tile, GQA and MQA, windows
// that start mid-tile and of one key, softcap, head dims 64, 128, 256 and
// odd 37 and 72.
var attentionTiledCases = []struct {
	name string
	a    AttentionArgs
}{
	{"albert T77", AttentionArgs{HeadDim: 64, Heads: 12, KVHeads: 12, Tokens: 77, KVLen: 77, Bidirectional: true}},
	{"bidirectional T19 kv50 hd72", AttentionArgs{HeadDim: 72, Heads: 3, KVHeads: 3, Tokens: 19, KVLen: 50, Bidirectional: true}},
	{"bidirectional window 9 T77 gqa", AttentionArgs{HeadDim: 64, Heads: 4, KVHeads: 2, Tokens: 77, KVLen: 77, Bidirectional: true, Window: 9}},
	{"causal T1", AttentionArgs{HeadDim: 64, Heads: 2, KVHeads: 2, Tokens: 1, KVLen: 1}},
	{"batch T77 at pos0 20 window 9 hd72", AttentionArgs{HeadDim: 72, Heads: 4, KVHeads: 2, Tokens: 77, Pos0: 20, KVLen: 110, Window: 9, Batch: true}},
	{"batch T64 at pos0 5", AttentionArgs{HeadDim: 64, Heads: 2, KVHeads: 2, Tokens: 64, Pos0: 5, KVLen: 69, Batch: true}},
	{"causal T1 at pos0 40", AttentionArgs{HeadDim: 64, Heads: 2, KVHeads: 1, Tokens: 1, Pos0: 40, KVLen: 41}},
	{"causal T100 gqa4 hd37", AttentionArgs{HeadDim: 37, Heads: 8, KVHeads: 2, Tokens: 100, KVLen: 100}},
	{"causal T45 at pos0 20 kv70 hd128", AttentionArgs{HeadDim: 128, Heads: 4, KVHeads: 2, Tokens: 45, Pos0: 20, KVLen: 70}},
	{"window30 softcap T45 at pos0 20", AttentionArgs{HeadDim: 64, Heads: 4, KVHeads: 4, Tokens: 45, Pos0: 20, KVLen: 65, Window: 30, Softcap: 50}},
	{"window1 T40", AttentionArgs{HeadDim: 64, Heads: 2, KVHeads: 2, Tokens: 40, KVLen: 40, Window: 1}},
	{"mqa T33 hd256 scale", AttentionArgs{HeadDim: 256, Heads: 4, KVHeads: 1, Tokens: 33, KVLen: 33, Scale: 1.0 / 12}},
}

// TestAttentionTiledMatchesReference runs the tiled kernel in every tile
// that fits the device on attentionTiledCases, at unit and at wide
// magnitudes (see TestAttentionWideMagnitude).
func TestAttentionTiledMatchesReference(t *testing.T) {
	for i, tc := range attentionTiledCases {
		var runs []attentionRun
		for _, tile := range attentionTiles {
			if tile.fits(tc.a.HeadDim, dev.Limits.MaxComputeWorkgroupStorageSize) == nil {
				runs = append(runs, attentionRun{"tiled " + tile.String(), 4, AttentionOptions{Tile: tile}})
			}
		}
		if len(runs) == 0 {
			t.Run(tc.name, func(t *testing.T) {
				t.Skipf("no tile fits head_dim %d in this device's %d bytes of workgroup memory", tc.a.HeadDim, dev.Limits.MaxComputeWorkgroupStorageSize)
			})
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			// As TestAttentionMatchesReference: f32 dots over <= 256 terms
			// and weighted sums over <= 100 keys, ~1e-6 relative.
			checkAttentionRuns(t, uint64(900+10*i), tc.a, attentionInputs{QK: 1, V: 1}, 3e-6, 0, runs)
		})
		t.Run(tc.name+"/wide", func(t *testing.T) {
			// As TestAttentionWideMagnitude: scores of hundreds and spiked
			// keys; outputs reach 30 and a score's f32 error of ~1e-5
			// relative moves them by ~3e-4.
			checkAttentionRuns(t, uint64(900+10*i), tc.a, attentionInputs{QK: 8, V: 30, Spike: 4}, 1e-3, 0, runs)
		})
	}
}

// TestAttentionPicksPath checks when Attention takes the tiled kernel and
// which tile: prefills of attentionTiledMinTokens or more whose head fits,
// ALBERT's 512 tokens in 16-query tiles (attentionTiledTargetGroups), a
// Llama prefill in 32-query tiles, no tile for a 256-wide head on a 16 KiB
// device (which then runs the per-query kernel).
func TestAttentionPicksPath(t *testing.T) {
	const h200 = 49152 // NVIDIA's Vulkan maxComputeSharedMemorySize
	for _, tc := range []struct {
		a     AttentionArgs
		limit uint32
		want  AttentionTile // zero: the per-query kernel
	}{
		{AttentionArgs{HeadDim: 64, Heads: 12, KVHeads: 12, Tokens: 512, KVLen: 512, Bidirectional: true}, h200, AttentionTile{16, 32}},
		{AttentionArgs{HeadDim: 64, Heads: 12, KVHeads: 12, Tokens: 512, KVLen: 512, Bidirectional: true}, webGPUDefaultStorage, AttentionTile{16, 32}},
		{AttentionArgs{HeadDim: 64, Heads: 12, KVHeads: 12, Tokens: 31, KVLen: 31, Bidirectional: true}, h200, AttentionTile{}},
		{AttentionArgs{HeadDim: 128, Heads: 32, KVHeads: 8, Tokens: 512, KVLen: 512}, h200, AttentionTile{32, 32}},
		{AttentionArgs{HeadDim: 128, Heads: 32, KVHeads: 8, Tokens: 512, KVLen: 512}, webGPUDefaultStorage, AttentionTile{8, 16}},
		{AttentionArgs{HeadDim: 256, Heads: 8, KVHeads: 4, Tokens: 512, KVLen: 512}, webGPUDefaultStorage, AttentionTile{}},
		// 16x32 is over 48 KiB at head_dim 256; 16x16 makes only 256 workgroups.
		{AttentionArgs{HeadDim: 256, Heads: 8, KVHeads: 4, Tokens: 512, KVLen: 512}, h200, AttentionTile{8, 32}},
	} {
		var got AttentionTile
		if tc.a.Tokens >= attentionTiledMinTokens {
			got, _ = attentionTileFor(tc.a, tc.limit)
		}
		if got != tc.want {
			t.Errorf("%+v at %d bytes: tile %v, want %v", tc.a, tc.limit, got, tc.want)
		}
		if got != (AttentionTile{}) && got.sharedBytes(tc.a.HeadDim) > int(tc.limit) {
			t.Errorf("%+v: tile %v takes %d bytes, over %d", tc.a, got, got.sharedBytes(tc.a.HeadDim), tc.limit)
		}
	}
}

// checkAttentionRuns compares every run of Attention on random q, k, v of
// magnitudes in (see checkAttention) with the reference, within atol +
// rtol |want|. With sinks, atol is scaled per row by the weight the row's
// keys keep (sinkMass): an output, and the kernel's error with it, shrinks
// with its keys' share of the softmax, which a large sink makes tiny.
func checkAttentionRuns(t *testing.T, seed uint64, a AttentionArgs, in attentionInputs, atol, rtol float64, runs []attentionRun) {
	t.Helper()
	slots := a.KVLen + 3
	qn, kvn := a.Tokens*a.Heads*a.HeadDim, slots*a.KVHeads*a.HeadDim
	q := randVec(seed, qn, in.QK)
	k := randVec(seed+1, kvn, in.QK)
	v := randVec(seed+2, kvn, in.V)
	if in.Spike > 0 {
		row := a.KVHeads * a.HeadDim
		for j := 50; j < a.KVLen; j += 97 {
			for d := range row {
				k[j*row+d] *= in.Spike
			}
		}
	}
	nan := float32(math.NaN())
	for i := a.KVLen * a.KVHeads * a.HeadDim; i < kvn; i++ {
		k[i], v[i] = nan, nan
	}
	ra := refAttentionArgs(a, in.Sinks)
	want := ref.Attention(q, k, v, ra)
	var tol []float64
	if in.Sinks != nil {
		a.Sinks = upload(t, "sinks", in.Sinks)
		tol = make([]float64, qn)
		for i, mass := range sinkMass(q, k, ra) {
			tol[i] = atol*mass + rtol*math.Abs(float64(want[i])) + sinkUnderflow
		}
	}
	bq, bk, bv := upload(t, "q", q), upload(t, "k", k), upload(t, "v", v)
	for _, r := range runs {
		sc, out := scratch(t, "scratch", (r.bytes+3)/4), scratch(t, "out", qn)
		run(t, "attention", func(c *gpu.Chain) error { return AttentionWith(c, bq, bk, bv, sc, out, a, r.o) })
		if tol != nil {
			assertWithin(t, "attention "+r.name, download(t, out, qn), want, tol)
		} else {
			assertClose(t, "attention "+r.name, download(t, out, qn), want, atol, rtol)
		}
	}
}

func TestAttentionMatchesReference(t *testing.T) {
	for i, tc := range attentionCases {
		t.Run(tc.name, func(t *testing.T) {
			// Unit q, k, v: scores within a few units, outputs convex
			// combinations of values in [-1, 1]. An f32 dot over 256 terms
			// and an f32 weighted sum over 2000 keys each err by about 1e-6
			// relative (lavapipe measured 5e-7 at worst): atol 3e-6.
			checkAttention(t, uint64(100+10*i), tc.a, -1, attentionInputs{QK: 1, V: 1}, 3e-6, 0)
		})
	}
	// Scratch for only 3 of the splits decoding over 2000 keys asks for.
	a := AttentionArgs{HeadDim: 64, Heads: 2, KVHeads: 1, Tokens: 1, Pos0: 1999, KVLen: 2000}
	t.Run("decode kv2000 three splits", func(t *testing.T) {
		checkAttention(t, 99, a, 3*2*(64+2)*4, attentionInputs{QK: 1, V: 1}, 3e-6, 0)
	})
}

// TestAttentionSplits checks that decoding histories longer than a tile takes
// the split-K path and that short, windowed-short or wide calls do not.
func TestAttentionSplits(t *testing.T) {
	for _, tc := range []struct {
		a     AttentionArgs
		split bool
	}{
		{AttentionArgs{HeadDim: 256, Heads: 8, KVHeads: 4, Tokens: 1, Pos0: 4095, KVLen: 4096}, true},
		{AttentionArgs{HeadDim: 64, Heads: 2, KVHeads: 1, Tokens: 1, Pos0: 1999, KVLen: 2000}, true},
		{AttentionArgs{HeadDim: 64, Heads: 8, KVHeads: 1, Tokens: 1, Pos0: 99, KVLen: 100}, true},
		{AttentionArgs{HeadDim: 64, Heads: 8, KVHeads: 1, Tokens: 1, Pos0: 59, KVLen: 60}, false},
		{AttentionArgs{HeadDim: 256, Heads: 8, KVHeads: 4, Tokens: 512, Pos0: 0, KVLen: 512}, false},
		{AttentionArgs{HeadDim: 256, Heads: 8, KVHeads: 4, Tokens: 1, Pos0: 8000, KVLen: 8001, Window: 60}, false},
	} {
		splits, chunk := tc.a.split()
		if (splits > 1) != tc.split || splits*chunk < tc.a.maxVisible() || (splits-1)*chunk >= tc.a.maxVisible() || chunk%attentionTile != 0 && splits > 1 {
			t.Errorf("%+v: %d splits of %d keys", tc.a, splits, chunk)
		}
		// AttentionScratchBytes also covers the decode kernel's splits
		// (TestAttentionDecodeShapes), which split some of these histories
		// the per-query kernel takes in one pass.
		if got := AttentionScratchBytes(tc.a); tc.split && got < tc.a.partialBytes(splits) || !tc.split && !tc.a.decodes() && got != 0 {
			t.Errorf("%+v: AttentionScratchBytes = %d", tc.a, got)
		}
	}
}

// TestAttentionWideMagnitude runs the same shapes with q and k at ±8 and v at
// ±30, as Gemma 2's unnormalised keys produce: raw scores of hundreds, so
// the softmax is nearly one-hot and, with Softcap 50, the tanh saturates. The
// spiked flavour adds outlier keys four times larger, whose scores sit
// hundreds above the rest: exp overflows in any step that skips the max
// (in a tile, across tiles, or across the splits of split-K), and a naive
// tanh, (e^2x-1)/(e^2x+1), returns NaN.
func TestAttentionWideMagnitude(t *testing.T) {
	for i, tc := range attentionCases {
		for _, softcap := range []float32{0, 50} {
			for _, spike := range []float32{0, 4} {
				a := tc.a
				a.Softcap = softcap
				t.Run(fmt.Sprintf("%s/softcap%v/spike%v", tc.name, softcap, spike), func(t *testing.T) {
					// The dot's terms reach 64 (256 when spiked), so its f32
					// rounding is about 64*sqrt(head_dim)*6e-8 = 6e-5 before
					// scaling; an error e in a score moves its weight by e
					// relative, and outputs reach 30: 30 * 1e-5 = 3e-4, as
					// lavapipe measured. atol 1e-3.
					checkAttention(t, uint64(500+10*i), a, -1, attentionInputs{QK: 8, V: 30, Spike: spike}, 1e-3, 0)
				})
			}
		}
	}
}

func TestAttentionRejectsBadShapes(t *testing.T) {
	good := AttentionArgs{HeadDim: 64, Heads: 4, KVHeads: 2, Tokens: 2, Pos0: 3, KVLen: 5}
	qn, kvn := 2*4*64, 5*2*64
	q, k, v, out := upload(t, "q", make([]float32, qn)), upload(t, "k", make([]float32, kvn)), upload(t, "v", make([]float32, kvn)), scratch(t, "out", qn)
	sc := scratch(t, "scratch", 1)
	c, err := dev.NewChain("bad attention")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	if err := Attention(c, q, k, v, sc, out, good); err != nil {
		t.Fatalf("the well-formed call failed: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*AttentionArgs)
	}{
		{"heads not a multiple of kv_heads", func(a *AttentionArgs) { a.Heads, a.KVHeads = 7, 2 }},
		{"head_dim 513", func(a *AttentionArgs) { a.HeadDim = 513 }},
		{"kv_len short of the last query", func(a *AttentionArgs) { a.KVLen = 4 }},
		{"q too short for 3 tokens", func(a *AttentionArgs) { a.Tokens, a.KVLen = 3, 6 }},
		{"k too short for kv_len 6", func(a *AttentionArgs) { a.KVLen = 6 }},
		{"no tokens", func(a *AttentionArgs) { a.Tokens = 0 }},
		{"negative window", func(a *AttentionArgs) { a.Window = -1 }},
		{"negative softcap", func(a *AttentionArgs) { a.Softcap = -50 }},
		{"batch mask on bidirectional", func(a *AttentionArgs) { a.Batch, a.Bidirectional = true, true }},
	} {
		a := good
		tc.edit(&a)
		if err := Attention(c, q, k, v, sc, out, a); err == nil {
			t.Errorf("%s: accepted", tc.name)
		} else {
			t.Logf("%s: %v", tc.name, err)
		}
	}
	if err := Attention(c, q, k, v, sc, q, good); err == nil {
		t.Error("out aliasing q: accepted")
	}
	if err := Attention(c, q, k, v, out, out, good); err == nil {
		t.Error("scratch aliasing out: accepted")
	}
	if err := AttentionWith(c, q, k, v, sc, out, good, AttentionOptions{Path: AttentionDecode + 1}); err == nil {
		t.Error("an unknown path: accepted")
	}
}

// benchDispatches times record, which appends one operation, by recording it
// reps times into one chain per iteration and waiting for the GPU: per-submit
// overhead (a fence and a poll, tens of microseconds) would otherwise swamp
// a decode-sized kernel. It waits by reading 4 bytes of fence, not with
// Device.Wait, whose single poll gives up after wgpu-native's 5 s timeout
// while lavapipe may still be running the chain. It reports µs per
// operation, and GB/s when bytes (the operation's compulsory traffic) is
// given.
func benchDispatches(b *testing.B, reps int, bytes float64, fence *gpu.Buffer, record func(c *gpu.Chain) error) {
	b.Helper()
	once := func() {
		c, err := dev.NewChain("bench")
		if err != nil {
			b.Fatal(err)
		}
		for range reps {
			if err := record(c); err != nil {
				c.Discard()
				b.Fatal(err)
			}
		}
		if err := c.Submit(); err != nil {
			b.Fatal(err)
		}
		if _, err := fence.Read(0, 4); err != nil {
			b.Fatal(err)
		}
	}
	once() // compile the pipelines and build the bind groups outside the timing
	b.ResetTimer()
	for range b.N {
		once()
	}
	per := b.Elapsed().Seconds() / float64(b.N*reps)
	b.ReportMetric(per*1e6, "µs/op")
	if bytes > 0 {
		b.ReportMetric(bytes/per/1e9, "GB/s")
	}
}

// BenchmarkAttention times decode and prefill at real model shapes, with and
// without split-K, and reports the KV cache's bandwidth (each KV head's keys
// and values counted once, though every query head of its group reads them).
func BenchmarkAttention(b *testing.B) {
	for _, bc := range []struct {
		name string
		a    AttentionArgs
	}{
		{"gemma2-2b decode kv4096", AttentionArgs{HeadDim: 256, Heads: 8, KVHeads: 4, Tokens: 1, Pos0: 4095, KVLen: 4096, Softcap: 50}},
		{"llama8b decode kv4096", AttentionArgs{HeadDim: 128, Heads: 32, KVHeads: 8, Tokens: 1, Pos0: 4095, KVLen: 4096}},
		{"llama8b decode kv512", AttentionArgs{HeadDim: 128, Heads: 32, KVHeads: 8, Tokens: 1, Pos0: 511, KVLen: 512}},
		{"llama8b prefill 512", AttentionArgs{HeadDim: 128, Heads: 32, KVHeads: 8, Tokens: 512, Pos0: 0, KVLen: 512}},
		{"gemma4-e2b global decode kv4096", AttentionArgs{HeadDim: 512, Heads: 8, KVHeads: 1, Tokens: 1, Pos0: 4095, KVLen: 4096, Scale: 1}},
		{"gemma4-e2b global prefill 512", AttentionArgs{HeadDim: 512, Heads: 8, KVHeads: 1, Tokens: 512, Pos0: 0, KVLen: 512, Scale: 1}},
	} {
		a := bc.a
		qn, kvn := a.Tokens*a.Heads*a.HeadDim, a.KVLen*a.KVHeads*a.HeadDim
		q, k, v := upload(b, "q", randVec(1, qn, 1)), upload(b, "k", randVec(2, kvn, 1)), upload(b, "v", randVec(3, kvn, 1))
		out := scratch(b, "out", qn)
		kvBytes := float64(2 * kvn * 4)
		for _, split := range []bool{false, true} {
			sc := scratch(b, "scratch", 1)
			if split {
				if AttentionScratchBytes(a) == 0 {
					continue
				}
				sc = scratch(b, "scratch", int(AttentionScratchBytes(a)/4))
			}
			b.Run(fmt.Sprintf("%s/split=%v", bc.name, split), func(b *testing.B) {
				benchDispatches(b, 20, kvBytes, out, func(c *gpu.Chain) error { return Attention(c, q, k, v, sc, out, a) })
			})
		}
	}
}

// attentionWideHeadCases are Gemma 4's global layers, head_dim 512, through
// every kernel that takes them: prefills of 40 tokens (the tiled kernel's
// size, which at 512 fits no tile of a 32 or 48 KiB device and so runs
// per query) and of 5, with and without a sliding window, 8 query heads
// over 1 and 2 KV heads, at pos0 0 and later; 3 tokens and decodes over
// 700 keys (the decode kernel, split-K), Gemma 4's scale of 1 and a window
// over the history.
var attentionWideHeadCases = []struct {
	name string
	a    AttentionArgs
}{
	{"prefill 40 gqa8", AttentionArgs{HeadDim: 512, Heads: 8, KVHeads: 1, Tokens: 40, KVLen: 40}},
	{"prefill 40 at pos0 25 gqa4 window20", AttentionArgs{HeadDim: 512, Heads: 8, KVHeads: 2, Tokens: 40, Pos0: 25, KVLen: 65, Window: 20}},
	{"prefill 5 at pos0 11 gqa8 window7", AttentionArgs{HeadDim: 512, Heads: 8, KVHeads: 1, Tokens: 5, Pos0: 11, KVLen: 16, Window: 7}},
	{"prefill 3 at pos0 30 gqa4", AttentionArgs{HeadDim: 512, Heads: 8, KVHeads: 2, Tokens: 3, Pos0: 30, KVLen: 33}},
	{"decode kv700 gqa8", AttentionArgs{HeadDim: 512, Heads: 8, KVHeads: 1, Tokens: 1, Pos0: 699, KVLen: 700}},
	{"decode kv700 gqa4 scale1 window512", AttentionArgs{HeadDim: 512, Heads: 8, KVHeads: 2, Tokens: 1, Pos0: 699, KVLen: 700, Scale: 1, Window: 512}},
	{"decode kv700 hd320 mid-history", AttentionArgs{HeadDim: 320, Heads: 8, KVHeads: 1, Tokens: 1, Pos0: 400, KVLen: 700}},
}

// TestAttentionWideHeadMatchesReference runs attentionWideHeadCases on the
// per-query kernel (split and single-pass), Attention's own choice, every
// tile that fits the device and, where its workgroup memory holds a shape,
// the decode kernel's runs (decodeRuns), at unit and wide magnitudes.
func TestAttentionWideHeadMatchesReference(t *testing.T) {
	for i, tc := range attentionWideHeadCases {
		full := int(AttentionScratchBytes(tc.a))
		runs := []attentionRun{
			{fmt.Sprintf("per-query with %d scratch bytes", full), full, AttentionOptions{Path: AttentionPerQuery}},
			{"per-query with 4 scratch bytes", 4, AttentionOptions{Path: AttentionPerQuery}},
		}
		runs = append(runs, tiledRuns(tc.a)...)
		if _, err := attentionDecodeShapeFor(tc.a, dev.Limits.MaxComputeWorkgroupStorageSize); err == nil {
			runs = append(runs, decodeRuns(tc.a)...)
		}
		if !tc.a.decodes() {
			runs = append(runs, attentionRun{"auto", full, AttentionOptions{}}) // decodeRuns has it otherwise
		}
		t.Run(tc.name, func(t *testing.T) {
			// Unit q, k, v as TestAttentionMatchesReference, with dots over
			// 512 terms: at Scale 1 (Gemma 4's, whose q and k are normed
			// instead) scores reach tens and their f32 rounding ~1e-6
			// moves the weights by as much relative. lavapipe measured
			// 2e-6 there at worst, 1.8e-7 at 1/sqrt(512): atol 5e-6.
			checkAttentionRuns(t, uint64(1700+10*i), tc.a, attentionInputs{QK: 1, V: 1}, 5e-6, 0, runs)
		})
		t.Run(tc.name+"/wide", func(t *testing.T) {
			// As TestAttentionWideMagnitude: scores of hundreds and spiked
			// keys, outputs up to 30 moved by a score's f32 error of ~1e-5
			// relative; lavapipe measured 4e-4 at worst: atol 1e-3.
			checkAttentionRuns(t, uint64(1700+10*i), tc.a, attentionInputs{QK: 8, V: 30, Spike: 4}, 1e-3, 0, runs)
		})
	}
}

// TestAttentionWideHeadShapes checks what runs head_dim 512 (Gemma 4's
// global layers, 8 heads on 1 KV head) on a 48 KiB device (NVIDIA's
// Vulkan), lavapipe's 32 KiB and WebGPU's default 16 KiB: no query tile
// fits any of them, so prefills run per query; the decode kernel serves all
// 8 heads a workgroup in 8-key tiles at 48 KiB, 4 at 32 KiB, and at 16 KiB
// none fits and decoding runs per query too.
func TestAttentionWideHeadShapes(t *testing.T) {
	const h200, lavapipe = 49152, 32768
	prefill := AttentionArgs{HeadDim: 512, Heads: 8, KVHeads: 1, Tokens: 512, KVLen: 512}
	for _, limit := range []uint32{h200, lavapipe, webGPUDefaultStorage} {
		if tile, ok := attentionTileFor(prefill, limit); ok {
			t.Errorf("%+v at %d bytes: tile %v, want none (the per-query kernel)", prefill, limit, tile)
		}
	}
	decode := AttentionArgs{HeadDim: 512, Heads: 8, KVHeads: 1, Tokens: 1, Pos0: 4095, KVLen: 4096}
	for _, tc := range []struct {
		limit uint32
		want  attentionDecodeShape // zero: none fits
	}{
		{h200, attentionDecodeShape{8, 8, 256}},
		{lavapipe, attentionDecodeShape{4, 8, 256}},
		{webGPUDefaultStorage, attentionDecodeShape{}},
	} {
		s, err := attentionDecodeShapeFor(decode, tc.limit)
		if s != tc.want || (err == nil) != (tc.want != attentionDecodeShape{}) {
			t.Errorf("%+v at %d bytes: shape %+v (%v), want %+v", decode, tc.limit, s, err, tc.want)
		}
		if err == nil && s.sharedBytes(decode.HeadDim) > int(tc.limit) {
			t.Errorf("%+v: shape %+v takes %d bytes, over %d", decode, s, s.sharedBytes(decode.HeadDim), tc.limit)
		}
	}
	// The per-query kernel compiles MAX_HD 512 for wide heads only.
	for hd, want := range map[int]uint32{64: 256, 256: 256, 260: 512, 512: 512} {
		spec := AttentionArgs{HeadDim: hd}.perQuerySpec("attention")
		if spec.Consts[1] != (gpu.Const{Name: "MAX_HD", Value: want}) {
			t.Errorf("head_dim %d: consts %v, want MAX_HD %d", hd, spec.Consts, want)
		}
	}
}

// TestAttentionRejectsWideHeads checks that heads past 512 are refused by
// every path, the backward's included, with an error naming the limit.
func TestAttentionRejectsWideHeads(t *testing.T) {
	buf := scratch(t, "any", 4)
	c, err := dev.NewChain("wide heads")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	for _, hd := range []int{513, 1024} {
		a := AttentionArgs{HeadDim: hd, Heads: 8, KVHeads: 1, Tokens: 1, Pos0: 699, KVLen: 700}
		for _, path := range []AttentionPath{AttentionAuto, AttentionPerQuery, AttentionTiled, AttentionDecode} {
			err := AttentionWith(c, buf, buf, buf, buf, buf, a, AttentionOptions{Path: path})
			if want := fmt.Sprintf("head_dim %d outside 1..512", hd); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("head_dim %d on path %d: %v, want an error saying %q", hd, path, err, want)
			}
		}
	}
	a := AttentionArgs{HeadDim: 513, Heads: 2, KVHeads: 1, Tokens: 2, KVLen: 2}
	if err := AttentionBackward(c, buf, buf, buf, buf, buf, buf, buf, buf, a); err == nil || !strings.Contains(err.Error(), "head_dim 513 outside 1..512 (backward)") {
		t.Errorf("backward at head_dim 513: %v, want an error naming its limit of 512", err)
	}
	if c.Err() != nil {
		t.Errorf("a refused call reached the chain: %v", c.Err())
	}
}
