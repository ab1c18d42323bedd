package ops

import (
	"math"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

func TestDurationFramesMatchesReference(t *testing.T) {
	cases := []struct {
		rows, n int
		scale   float32 // logits uniform in ±scale
		bias    float32 // added to every logit
		speed   float32
	}{
		{1, 1, 1, 0, 1},
		{13, 50, 4, 0, 1},     // Kokoro's max_dur, a short utterance
		{300, 50, 4, 0, 0.7},  // past one workgroup, slower speech
		{257, 50, 4, 1, 2},    // halved
		{40, 50, 200, 0, 1},   // saturated sigmoids; exp(-x) overflows to inf
		{40, 50, 4, -30, 1},   // every sum near 0: clamped up to 1 frame
		{5, 50, 4, 30, 1e-12}, // absurdly slow: capped at 2^30 frames
	}
	for i, tc := range cases {
		logits := randVec(uint64(60+i), tc.rows*tc.n, tc.scale)
		for j := range logits {
			logits[j] += tc.bias
		}
		bl, bo := upload(t, "logits", logits), scratch(t, "frames", tc.rows)
		run(t, "duration_frames", func(c *gpu.Chain) error { return DurationFrames(c, bl, bo, tc.rows, tc.n, tc.speed) })
		b, err := bo.Read(0, uint64(tc.rows)*4)
		if err != nil {
			t.Fatal(err)
		}
		got := gpu.U32From(b)
		want, raw := ref.DurationFrames(logits, tc.rows, tc.n, tc.speed)
		for r := range want {
			if got[r] == want[r] {
				continue
			}
			// The kernel sums 50 sigmoids in f32 (relative error ~50 ulp,
			// 3e-6 of the sum, so < 2e-4 frames for sums of 50): only a raw
			// value that close to a half-integer may round the other way.
			if d := math.Abs(raw[r] - math.Floor(raw[r]) - 0.5); d < 2e-4*math.Max(1, raw[r]/50) && absDiff(got[r], want[r]) == 1 {
				continue
			}
			t.Errorf("case %d row %d: %d frames, reference %d (raw %.6f)", i, r, got[r], want[r], raw[r])
		}
	}
}

// A NaN logit gives its row DurationFramesNaN (0) frames, on the GPU and
// in the reference; the rows around it, and a row of infinite logits, are
// counted as usual.
func TestDurationFramesMarksNaN(t *testing.T) {
	const rows, n = 4, 50
	logits := randVec(77, rows*n, 4)
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	logits[1*n+17] = nan
	for j := range n {
		logits[2*n+j] = inf // every sigmoid 1: 50 frames
	}
	logits[3*n+n-1] = -nan
	bl, bo := upload(t, "logits", logits), scratch(t, "frames", rows)
	run(t, "duration_frames", func(c *gpu.Chain) error { return DurationFrames(c, bl, bo, rows, n, 1) })
	b, err := bo.Read(0, rows*4)
	if err != nil {
		t.Fatal(err)
	}
	got := gpu.U32From(b)
	want, _ := ref.DurationFrames(logits, rows, n, 1)
	if want[1] != DurationFramesNaN || want[3] != DurationFramesNaN || want[2] != 50 || want[0] < 1 {
		t.Errorf("reference: %v, want the NaN rows 1 and 3 at %d and row 2 at 50", want, DurationFramesNaN)
	}
	for r := range want {
		if got[r] != want[r] {
			t.Errorf("row %d: %d frames, reference %d", r, got[r], want[r])
		}
	}
}

func absDiff(a, b uint32) uint32 {
	if a > b {
		return a - b
	}
	return b - a
}

func TestDurationFramesRejectsBadInput(t *testing.T) {
	a, b := scratch(t, "a", 16), scratch(t, "b", 16)
	c, err := dev.NewChain("bad duration_frames")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	for name, err := range map[string]error{
		"zero speed":     DurationFrames(c, a, b, 2, 8, 0),
		"negative speed": DurationFrames(c, a, b, 2, 8, -1),
		"nan speed":      DurationFrames(c, a, b, 2, 8, float32(math.NaN())),
		"logits short":   DurationFrames(c, a, b, 3, 8, 1),
		"out is logits":  DurationFrames(c, a, a, 2, 8, 1),
		"no rows":        DurationFrames(c, a, b, 0, 8, 1),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
