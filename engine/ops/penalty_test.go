package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/sample"
)

// uploadU32 puts v on the device as u32 words.
func uploadU32(t testing.TB, label string, v []uint32) *gpu.Buffer {
	t.Helper()
	b, err := dev.NewBufferFrom(label, gpu.U32Bytes(v))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Release)
	return b
}

// penaltyList is n unique ids drawn from [0, vocab+extra), so about
// extra/(vocab+extra) of them fall past the vocabulary and must be skipped,
// with counts in [0, maxCount], zero about one time in maxCount+1.
func penaltyList(seed uint64, vocab, extra, n int, maxCount uint32) (ids, counts []uint32) {
	r := rand.New(rand.NewPCG(seed, 0x9e17))
	perm := r.Perm(vocab + extra)[:n]
	ids, counts = make([]uint32, n), make([]uint32, n)
	for i, id := range perm {
		ids[i] = uint32(id)
		counts[i] = uint32(r.Uint64N(uint64(maxCount) + 1))
	}
	return ids, counts
}

// checkPenalize runs Penalize on logits and compares the whole vector with
// sample.Penalize, the sampler's CPU penalty and so the kernel's reference: logits the kernel must not touch exactly, penalised ones
// within the bound below.
func checkPenalize(t *testing.T, logits []float32, ids, counts []uint32, p PenaltyArgs) {
	t.Helper()
	n := len(ids)
	bl, bi, bc := upload(t, "logits", logits), uploadU32(t, "ids", ids), uploadU32(t, "counts", counts)
	run(t, "penalize", func(c *gpu.Chain) error { return Penalize(c, bl, bi, bc, n, p) })
	got := download(t, bl, len(logits))
	want := append([]float32(nil), logits...)
	sample.Penalize(want[:p.Vocab], ids, counts, p.Repeat, p.Frequency, p.Presence)

	count := make(map[uint32]uint32, n)
	for i, id := range ids {
		if int(id) < p.Vocab {
			count[id] = counts[i]
		}
	}
	repeat := float64(p.Repeat)
	if repeat == 0 {
		repeat = 1
	}
	for i := range want {
		g, w := float64(got[i]), float64(want[i])
		if math.IsNaN(w) || math.IsInf(w, 0) || math.IsNaN(g) || math.IsInf(g, 0) {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(math.IsNaN(g) && math.IsNaN(w)) {
				t.Fatalf("logit %d (%v, count %d) = %v, want %v", i, logits[i], count[uint32(i)], g, w)
			}
			continue
		}
		// The tolerance of one penalised logit v seen c times. WGSL allows
		// f32 division 2.5 ulps of error, rounding u32 -> f32 either way
		// and fusing c*frequency + presence into an FMA; the subtraction
		// then rounds once (half an ulp of the result), and subnormals may
		// be flushed to zero (the smallest normal, 1.18e-38, covers that).
		// One ulp of x is at most 2^-23 |x|. Untouched logits: exact.
		tol := 0.0
		if c, ok := count[uint32(i)]; ok && c > 0 {
			v := math.Abs(float64(logits[i]))
			tol = 0x1p-23*(3*v/repeat+2*float64(c)*math.Abs(float64(p.Frequency))+math.Abs(float64(p.Presence))+math.Abs(w)) + 0x1p-126
		}
		if math.Abs(g-w) > tol {
			t.Fatalf("logit %d (%v, count %d) = %v, want %v (|diff| %.3g > %.3g)", i, logits[i], count[uint32(i)], g, w, math.Abs(g-w), tol)
		}
	}
}

func TestPenalizeMatchesReference(t *testing.T) {
	// n: one id, one short of a workgroup (256), one past it, a few
	// workgroups, and a whole 64k-token history's worth of distinct ids over
	// Gemma's 262144-token vocabulary; ids are scattered, some past vocab.
	cases := []struct{ vocab, n int }{{1, 1}, {300, 255}, {5000, 257}, {32000, 1000}, {262144, 70001}}
	args := []PenaltyArgs{
		{Repeat: 1.1}, // Ollama's default
		{Repeat: 1.3, Frequency: 0.4, Presence: -0.7}, // all three, a negative presence
		{Repeat: 0, Frequency: 1.5, Presence: 2},      // repeat 0 means off
		{Repeat: 0.8, Frequency: -2},                  // below 1: repeats favoured
	}
	for ci, tc := range cases {
		for ai, p := range args {
			t.Run(fmt.Sprintf("vocab%d/n%d/args%d", tc.vocab, tc.n, ai), func(t *testing.T) {
				p.Vocab = tc.vocab
				// Logits within Gemma 2's final softcap (±30), the range of
				// real logits.
				logits := randVec(uint64(400+ci), tc.vocab, 30)
				ids, counts := penaltyList(uint64(500+10*ci+ai), tc.vocab, tc.vocab/8+1, min(tc.n, tc.vocab), 64)
				checkPenalize(t, logits, ids, counts, p)
			})
		}
	}
}

// TestPenalizeWideMagnitude penalises logits at the edges of f32 (up to
// ±1e37, which a penalty of 2 keeps finite; WGSL leaves overflow undefined),
// ±0, subnormals, ±inf and NaN, with counts up to 2^32-1, which f32 does not
// hold exactly.
func TestPenalizeWideMagnitude(t *testing.T) {
	const vocab = 9001
	logits := randVec(8, vocab, 1e37)
	specials := []float32{0, float32(math.Copysign(0, -1)), 1e-45, -1e-45, 1.17549435e-38, -1.17549435e-38,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1e-30, -1e-30, 3e4, -3e4}
	for i := range logits {
		if i%3 == 0 {
			logits[i] = specials[(i/3)%len(specials)]
		}
	}
	ids, counts := penaltyList(9, vocab, 0, vocab, 1)
	r := rand.New(rand.NewPCG(10, 0))
	for i := range counts {
		switch i % 4 {
		case 0:
			counts[i] = math.MaxUint32 - uint32(r.IntN(1000))
		case 1:
			counts[i] = 1<<24 + uint32(r.IntN(1000)) // past f32's exact integers
		default:
			counts[i] = uint32(r.IntN(100))
		}
	}
	for _, p := range []PenaltyArgs{{Repeat: 2, Frequency: 1e-3, Presence: 1e30}, {Repeat: 0.5, Frequency: 2, Presence: -2}} {
		p.Vocab = vocab
		checkPenalize(t, logits, ids, counts, p)
	}
}

// TestPenalizeRowOfLargerBuffer penalises the first row of a two-row buffer:
// ids past Vocab must not reach the second row.
func TestPenalizeRowOfLargerBuffer(t *testing.T) {
	const vocab = 1000
	logits := randVec(11, 2*vocab, 30)
	ids := []uint32{0, 999, 1000, 1500, 1999}
	counts := []uint32{1, 2, 3, 4, 5}
	checkPenalize(t, logits, ids, counts, PenaltyArgs{Vocab: vocab, Repeat: 1.5, Frequency: 1, Presence: 1})
}

func TestPenalizeRejectsBadArgs(t *testing.T) {
	logits := upload(t, "logits", make([]float32, 100))
	ids, counts := uploadU32(t, "ids", make([]uint32, 10)), uploadU32(t, "counts", make([]uint32, 10))
	c, err := dev.NewChain("bad penalize")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	ok := PenaltyArgs{Vocab: 100, Repeat: 1.1}
	with := func(f func(p *PenaltyArgs)) PenaltyArgs { p := ok; f(&p); return p }
	nan := float32(math.NaN())
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"negative n", Penalize(c, logits, ids, counts, -1, ok)},
		{"ids shorter than n", Penalize(c, logits, ids, counts, 11, ok)},
		{"vocab past logits", Penalize(c, logits, ids, counts, 10, with(func(p *PenaltyArgs) { p.Vocab = 101 }))},
		{"zero vocab", Penalize(c, logits, ids, counts, 10, with(func(p *PenaltyArgs) { p.Vocab = 0 }))},
		{"NaN repeat", Penalize(c, logits, ids, counts, 10, with(func(p *PenaltyArgs) { p.Repeat = nan }))},
		{"negative repeat", Penalize(c, logits, ids, counts, 10, with(func(p *PenaltyArgs) { p.Repeat = -1 }))},
		{"infinite frequency", Penalize(c, logits, ids, counts, 10, with(func(p *PenaltyArgs) { p.Frequency = float32(math.Inf(1)) }))},
		{"NaN presence", Penalize(c, logits, ids, counts, 10, with(func(p *PenaltyArgs) { p.Presence = nan }))},
		{"nil counts", Penalize(c, logits, ids, nil, 10, ok)},
		{"logits aliases ids", Penalize(c, ids, ids, counts, 10, with(func(p *PenaltyArgs) { p.Vocab = 10 }))},
	} {
		if tc.err == nil {
			t.Errorf("%s: accepted", tc.name)
		} else {
			t.Logf("%s: %v", tc.name, tc.err)
		}
	}
	if err := Penalize(c, logits, ids, counts, 0, ok); err != nil {
		t.Errorf("n = 0: %v, want nothing appended and no error", err)
	}
}
