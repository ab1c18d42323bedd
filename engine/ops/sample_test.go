package ops

import (
	"fmt"
	"math"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// downloadU32 reads n u32 words back.
func downloadU32(t testing.TB, b *gpu.Buffer, n int) []uint32 {
	t.Helper()
	raw, err := b.Read(0, uint64(n)*4)
	if err != nil {
		t.Fatal(err)
	}
	return gpu.U32From(raw)
}

// sampleScratch is a scratch buffer for Argmax/TopK over n values, k kept.
func sampleScratch(t testing.TB, n, k int) *gpu.Buffer {
	t.Helper()
	b, err := dev.NewBuffer("sample scratch", SampleScratchBytes(n, k))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Release)
	return b
}

// logitFlavours build test vectors of n values that stress the ranking:
// continuous values, heavy ties (values rounded to a handful of levels, so
// ties straddle workgroups and the k-th place), an ascending ramp (every
// element beats the current k-th, so top-k compacts as often as it can), and
// and mostly -inf with a few finite values (a masked vocabulary).
var logitFlavours = []struct {
	name string
	make func(seed uint64, n int) []float32
}{
	{"random", func(seed uint64, n int) []float32 { return randVec(seed, n, 4) }},
	{"ties", func(seed uint64, n int) []float32 {
		x := randVec(seed, n, 2)
		for i := range x {
			x[i] = float32(math.Round(float64(x[i])))
		}
		return x
	}},
	{"ascending", func(seed uint64, n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(i) * 1e-3
		}
		return x
	}},
	{"masked", func(seed uint64, n int) []float32 {
		x := randVec(seed, n, 4)
		for i := range x {
			if i%97 != 13 {
				x[i] = float32(math.Inf(-1))
			}
		}
		return x
	}},
}

// sampleSizes: one element, around one workgroup, around one stage-1 span
// (4096, where the merge stage starts), and many spans with a ragged tail.
var sampleSizes = []int{1, 255, 257, 4096, 4097, 70001}

func checkArgmax(t *testing.T, x []float32) {
	t.Helper()
	n := len(x)
	bx, sc, out := upload(t, "x", x), sampleScratch(t, n, 1), scratch(t, "out", 1)
	run(t, "argmax", func(c *gpu.Chain) error { return Argmax(c, bx, sc, out, n) })
	// Ranking involves no arithmetic: the index must be exact.
	if got, want := downloadU32(t, out, 1)[0], ref.Argmax(x); got != uint32(want) {
		t.Fatalf("argmax over %d = %d (%v), want %d (%v)", n, got, x[min(int(got), n-1)], want, x[want])
	}
}

func checkTopK(t *testing.T, x []float32, k int) {
	t.Helper()
	n := len(x)
	bx, sc, out := upload(t, "x", x), sampleScratch(t, n, k), scratch(t, "out", 2*k)
	run(t, "topk", func(c *gpu.Chain) error { return TopK(c, bx, sc, out, n, k) })
	got := downloadU32(t, out, 2*k)
	ids, vals := ref.TopK(x, k)
	// Ranking involves no arithmetic: indices and value bits must be exact.
	for r := range k {
		if got[r] != ids[r] || got[k+r] != math.Float32bits(vals[r]) {
			t.Fatalf("top-%d over %d: [%d] = (%d, %v), want (%d, %v)", k, n, r, got[r], math.Float32frombits(got[k+r]), ids[r], vals[r])
		}
	}
}

func TestArgmaxMatchesReference(t *testing.T) {
	for _, fl := range logitFlavours {
		for i, n := range sampleSizes {
			t.Run(fmt.Sprintf("%s/%d", fl.name, n), func(t *testing.T) {
				checkArgmax(t, fl.make(uint64(200+i), n))
			})
		}
	}
	t.Run("all equal", func(t *testing.T) { checkArgmax(t, make([]float32, 9000)) })
	t.Run("max last", func(t *testing.T) {
		x := randVec(3, 9000, 1)
		x[8999] = 2
		checkArgmax(t, x)
	})
	t.Run("all -inf", func(t *testing.T) {
		x := make([]float32, 5000)
		for i := range x {
			x[i] = float32(math.Inf(-1))
		}
		checkArgmax(t, x)
	})
}

func TestTopKMatchesReference(t *testing.T) {
	for _, fl := range logitFlavours {
		for i, n := range sampleSizes {
			for _, k := range []int{1, 7, 40, 64, MaxTopK} {
				if k > n {
					continue
				}
				t.Run(fmt.Sprintf("%s/%d/k%d", fl.name, n, k), func(t *testing.T) {
					checkTopK(t, fl.make(uint64(300+i), n), k)
				})
			}
		}
	}
	t.Run("k equals n", func(t *testing.T) { checkTopK(t, randVec(4, 5, 1), 5) })
}

// TestTopKLateEntry puts the k-th best element long after top-k first filled
// up, on a descending ramp where the early elements already hold ranks 0..k-1:
// once just above the early (k-1)-th (it must enter, pushing that one out)
// and once tied with it (it must stay out: the lower index wins). Index 3000
// is met in stage 1 after the first compaction; index 49252 (group 12 of 18)
// is met in the merge after its first compaction. Random logits rarely test
// this, since there the early bar is far below the final one.
func TestTopKLateEntry(t *testing.T) {
	const n = 70001
	for _, k := range []int{7, 64, MaxTopK} {
		for _, at := range []int{3000, 49252} {
			for _, tie := range []bool{false, true} {
				t.Run(fmt.Sprintf("k%d/at%d/tie=%v", k, at, tie), func(t *testing.T) {
					x := make([]float32, n)
					for i := range x {
						x[i] = -float32(i)
					}
					x[at] = -float32(k-1) + 0.5
					if tie {
						x[at] = -float32(k - 1)
					}
					checkTopK(t, x, k)
				})
			}
		}
	}
}

// TestSampleWideMagnitude ranks values at the edges of f32: ±3e38, ±0 (which
// compare equal, so the lower index wins), denormals, ±inf and values one ulp
// apart, across several stage-1 workgroups.
func TestSampleWideMagnitude(t *testing.T) {
	n := 9001
	x := randVec(5, n, 3e38)
	specials := []float32{0, float32(math.Copysign(0, -1)), 1e-45, -1e-45, 1.17549435e-38,
		float32(math.Inf(1)), float32(math.Inf(-1)), math.MaxFloat32, -math.MaxFloat32,
		math.Nextafter32(math.MaxFloat32, 0)}
	for i := range x {
		if i%3 == 0 {
			x[i] = specials[(i/3)%len(specials)]
		}
	}
	checkArgmax(t, x)
	for _, k := range []int{1, 64, MaxTopK} {
		checkTopK(t, x, k)
	}
}

// TestSampleGemmaVocab runs argmax and top-64 in one chain over one vector as
// wide as Gemma's vocabulary (262144, the only vector that long in the suite:
// lavapipe is slow), logits within the final softcap ±30 and the maximum
// tied in four places across workgroups.
func TestSampleGemmaVocab(t *testing.T) {
	const n, k = 262144, 64
	x := randVec(6, n, 30)
	for _, i := range []int{200000, 70001, 70000, 250000} {
		x[i] = 31
	}
	bx := upload(t, "logits", x)
	sc := sampleScratch(t, n, k)
	am, tk := scratch(t, "argmax", 1), scratch(t, "topk", 2*k)
	run(t, "sample", func(c *gpu.Chain) error {
		if err := Argmax(c, bx, sc, am, n); err != nil {
			return err
		}
		return TopK(c, bx, sc, tk, n, k)
	})
	if got := downloadU32(t, am, 1)[0]; got != 70000 {
		t.Fatalf("argmax = %d, want 70000 (the first of the tied maxima)", got)
	}
	got := downloadU32(t, tk, 2*k)
	ids, vals := ref.TopK(x, k)
	for r := range k {
		if got[r] != ids[r] || got[k+r] != math.Float32bits(vals[r]) {
			t.Fatalf("top-%d: [%d] = (%d, %v), want (%d, %v)", k, r, got[r], math.Float32frombits(got[k+r]), ids[r], vals[r])
		}
	}
}

// TestSampleGroups checks the stage-1 split for lengths past Gemma's
// vocabulary without running them: at most 64 groups, spans a multiple of
// the workgroup, every element covered and no group empty.
func TestSampleGroups(t *testing.T) {
	for _, n := range []int{1, 4096, 4097, 262144, 262145, 1 << 20, 1<<20 + 1, 3_000_001} {
		g, span := sampleGroups(n)
		if g < 1 || g > sampleMaxGroups || span%sampleWG != 0 || g*span < n || (g-1)*span >= n {
			t.Errorf("n=%d: %d groups of %d", n, g, span)
		}
	}
}

func TestSampleRejectsBadShapes(t *testing.T) {
	x, sc, out := upload(t, "x", make([]float32, 10000)), sampleScratch(t, 10000, 8), scratch(t, "out", 16)
	c, err := dev.NewChain("bad sample")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"x shorter than n", Argmax(c, x, sc, out, 10001)},
		{"k = 0", TopK(c, x, sc, out, 10000, 0)},
		{"k > n", TopK(c, x, sc, out, 5, 6)},
		{"k > MaxTopK", TopK(c, x, sc, out, 10000, MaxTopK+1)},
		{"out short of 2k words", TopK(c, x, sc, out, 10000, 9)},
		{"scratch short for k", TopK(c, x, out, sc, 10000, 8)},
		{"out aliases x", Argmax(c, x, sc, x, 10000)},
	} {
		if tc.err == nil {
			t.Errorf("%s: accepted", tc.name)
		} else {
			t.Logf("%s: %v", tc.name, tc.err)
		}
	}
}

// BenchmarkSample times argmax, top-40 and softmax over one Gemma-sized
// vocabulary row (262144 logits, 1 MiB read).
func BenchmarkSample(b *testing.B) {
	const n = 262144
	x := upload(b, "logits", randVec(7, n, 30))
	sc := sampleScratch(b, n, MaxTopK)
	out := scratch(b, "out", 2*MaxTopK)
	y := scratch(b, "probs", n)
	b.Run("argmax", func(b *testing.B) {
		benchDispatches(b, 50, n*4, out, func(c *gpu.Chain) error { return Argmax(c, x, sc, out, n) })
	})
	b.Run("topk40", func(b *testing.B) {
		benchDispatches(b, 50, n*4, out, func(c *gpu.Chain) error { return TopK(c, x, sc, out, n, 40) })
	})
	b.Run("topk128", func(b *testing.B) {
		benchDispatches(b, 50, n*4, out, func(c *gpu.Chain) error { return TopK(c, x, sc, out, n, 128) })
	})
	b.Run("softmax in place", func(b *testing.B) {
		benchDispatches(b, 50, 3*n*4, y, func(c *gpu.Chain) error { return Softmax(c, y, y, 1, n) })
	})
}
