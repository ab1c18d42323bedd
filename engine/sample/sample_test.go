package sample

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hearthstudio/hearth/engine/ops/ref"
)

var (
	inf = float32(math.Inf(1))
	nan = float32(math.NaN())
)

// mustNew is New for options the test knows are valid.
func mustNew(t testing.TB, o Options) *Sampler {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// gaussian is n logits drawn from N(0, sigma²), reproducible from seed.
func gaussian(seed uint64, n int, sigma float64) []float32 {
	r := rand.New(rand.NewPCG(seed, 0x10617))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * sigma)
	}
	return x
}

// logf is ln of each probability: logits whose softmax is p.
func logf(p ...float64) []float32 {
	x := make([]float32, len(p))
	for i, v := range p {
		x[i] = float32(math.Log(v))
	}
	return x
}

func TestGreedyIsArgmax(t *testing.T) {
	for _, tc := range []struct {
		name    string
		logits  []float32
		history []int32
		o       Options
		want    int32
	}{
		{"plain", []float32{0.1, 2, -3, 1.9}, nil, Options{}, 1},
		{"ties go to the lowest id", []float32{1, 5, 5, 5}, nil, Options{}, 1},
		{"NaN is never the maximum", []float32{nan, -1, nan, -2}, nil, Options{}, 1},
		{"all NaN", []float32{nan, nan}, nil, Options{}, 0},
		{"all -inf", []float32{-inf, -inf, -inf}, nil, Options{}, 0},
		{"+inf wins", []float32{3e38, inf, 1}, nil, Options{}, 1},
		{"one token", []float32{-7}, nil, Options{}, 0},
		// 2 / 1.5 = 1.33 drops below 1.9; the penalties run before greedy.
		{"penalty moves the maximum", []float32{0.1, 2, -3, 1.9}, []int32{1}, Options{RepeatPenalty: 1.5, RepeatLastN: 64}, 3},
		// Presence 0.5 on both leaders: 2 - 0.5 = 1.5 < 1.6.
		{"presence penalty", []float32{1.6, 2, 1.9}, []int32{1, 2}, Options{PresencePenalty: 0.5, RepeatLastN: 64}, 0},
		// Top-k and top-p never drop the best token, so greedy ignores them.
		{"filters do not matter", []float32{0.1, 2, -3, 1.9}, nil, Options{TopK: 2, TopP: 0.1, MinP: 0.9}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mustNew(t, tc.o).Sample(tc.logits, tc.history); got != tc.want {
				t.Fatalf("Sample = %d, want %d", got, tc.want)
			}
		})
	}
	// And against a plain scan, on vocabularies with many ties.
	for seed := range uint64(20) {
		x := gaussian(seed, 1000, 1)
		for i := range x {
			x[i] = float32(math.Round(float64(x[i]) * 2))
		}
		if got, want := mustNew(t, Options{}).Sample(x, nil), int32(ref.Argmax(x)); got != want {
			t.Fatalf("seed %d: Sample = %d, ref.Argmax = %d", seed, got, want)
		}
	}
}

// TestLowTemperatureIsGreedy: as T -> 0, softmax(x/T) puts all its mass on
// the maximum; at T = 1e-3 a logit gap of 0.05 leaves the runner-up e^-50.
// Top-k 1 is greedy at any temperature.
func TestLowTemperatureIsGreedy(t *testing.T) {
	for seed := range uint64(10) {
		x := gaussian(seed, 2000, 2)
		want := argmax(x)
		second := slices.Max(slices.Delete(slices.Clone(x), int(want), int(want)+1))
		if x[want]-second < 0.05 {
			x[want] = second + 0.05
		}
		for _, o := range []Options{
			{Temperature: 1e-3},
			{Temperature: 1e-3, TopK: 40, TopP: 0.95, MinP: 0.05},
			{Temperature: 1.5, TopK: 1},
		} {
			s := mustNew(t, Options{Temperature: o.Temperature, TopK: o.TopK, TopP: o.TopP, MinP: o.MinP, Seed: seed})
			for range 50 {
				if got := s.Sample(x, nil); got != want {
					t.Fatalf("seed %d, %+v: drew %d (%v), want the argmax %d (%v)", seed, o, got, x[got], want, x[want])
				}
			}
		}
	}
}

// keptIDs runs the chain up to the draw and returns the kept ids in ascending order.
func keptIDs(s *Sampler, x []float32) []int32 {
	var ids []int32
	for _, c := range s.candidates(x, nil) {
		ids = append(ids, c.id)
	}
	slices.Sort(ids)
	return ids
}

func TestKeptSet(t *testing.T) {
	// ids 0..3 with probabilities 0.1, 0.4, 0.2, 0.3: by rank 1, 3, 2, 0.
	p4 := logf(0.1, 0.4, 0.2, 0.3)
	flat := make([]float32, 4)
	for _, tc := range []struct {
		name string
		x    []float32
		o    Options
		want []int32
	}{
		{"nothing on", p4, Options{}, []int32{0, 1, 2, 3}},
		{"top-k 2", p4, Options{TopK: 2}, []int32{1, 3}},
		{"top-k past the vocabulary", p4, Options{TopK: 9}, []int32{0, 1, 2, 3}},
		{"top-p below the first", p4, Options{TopP: 0.35}, []int32{1}},
		{"top-p 0.5: 0.4 falls short, 0.7 reaches it", p4, Options{TopP: 0.5}, []int32{1, 3}},
		{"top-p 0.69", p4, Options{TopP: 0.69}, []int32{1, 3}},
		{"top-p 0.71", p4, Options{TopP: 0.71}, []int32{1, 2, 3}},
		{"top-p 0.95 keeps all", p4, Options{TopP: 0.95}, []int32{0, 1, 2, 3}},
		{"min-p 0.8: at least 0.32", p4, Options{MinP: 0.8}, []int32{1}},
		{"min-p 0.6: at least 0.24", p4, Options{MinP: 0.6}, []int32{1, 3}},
		{"min-p 0.2: at least 0.08", p4, Options{MinP: 0.2}, []int32{0, 1, 2, 3}},
		{"min-p 1 keeps the best", p4, Options{MinP: 1}, []int32{1}},
		// After top-k 2 the pair renormalises to 0.57 / 0.43: top-p 0.5
		// then keeps one, where over all four it would keep two.
		{"top-p after top-k", p4, Options{TopK: 2, TopP: 0.5}, []int32{1}},
		{"min-p after top-p", p4, Options{TopP: 0.95, MinP: 0.6}, []int32{1, 3}},
		{"top-p before min-p", p4, Options{TopP: 0.5, MinP: 0.2}, []int32{1, 3}},
		// Temperature comes after the filters: top-p still sees T = 1.
		{"temperature does not move top-p", p4, Options{TopP: 0.5, Temperature: 5}, []int32{1, 3}},
		{"ties: top-k takes the lowest ids", flat, Options{TopK: 2}, []int32{0, 1}},
		{"ties: top-p takes the lowest ids", flat, Options{TopP: 0.6}, []int32{0, 1, 2}},
		{"-inf is never kept", []float32{-inf, 0, -inf, 1}, Options{}, []int32{1, 3}},
		{"NaN is never kept", []float32{nan, 0, nan, 1}, Options{TopP: 0.99}, []int32{1, 3}},
		{"+inf takes everything", []float32{inf, 0, inf, 1}, Options{TopP: 0.5}, []int32{0, 2}},
		{"+inf with top-k", []float32{inf, 0, inf, 1}, Options{TopK: 3}, []int32{0, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Temperature = max(tc.o.Temperature, 1)
			if got := keptIDs(mustNew(t, tc.o), tc.x); !slices.Equal(got, tc.want) {
				t.Fatalf("kept %v, want %v", got, tc.want)
			}
		})
	}
}

// refKept is the chain as llama.cpp writes it, the slow way: sort the whole
// vocabulary (stable, so ties keep the lower id first), cut to top-k, take
// the softmax of what is left for top-p, then min-p. It returns the kept ids
// ascending.
func refKept(x []float32, o Options) []int32 {
	order := make([]int32, len(x))
	for i := range order {
		order[i] = int32(i)
	}
	v := func(i int32) float32 { return notNaN(x[i]) }
	slices.SortStableFunc(order, func(a, b int32) int { return cmp.Compare(v(b), v(a)) })
	if o.TopK > 0 && o.TopK < len(order) {
		order = order[:o.TopK]
	}
	m := float64(v(order[0]))
	if o.TopP > 0 && o.TopP < 1 {
		z := 0.0
		for _, i := range order {
			z += math.Exp(float64(v(i)) - m)
		}
		cum := 0.0
		for n, i := range order {
			cum += math.Exp(float64(v(i)) - m)
			if cum/z >= float64(o.TopP) {
				order = order[:n+1]
				break
			}
		}
	}
	if o.MinP > 0 {
		floor := float32(m) + float32(math.Log(float64(o.MinP)))
		n := 1
		for n < len(order) && v(order[n]) >= floor {
			n++
		}
		order = order[:n]
	}
	// -inf tokens carry no probability: the draw never takes them.
	order = slices.DeleteFunc(order, func(i int32) bool { return v(i) == negInf })
	slices.Sort(order)
	return order
}

// TestKeptSetMatchesFullSort compares truncate with refKept over random
// vocabularies: continuous, heavily tied, flat (top-p then keeps most of
// the vocabulary, so the adaptive search must widen several times), and
// mostly masked.
func TestKeptSetMatchesFullSort(t *testing.T) {
	flavours := []struct {
		name string
		make func(seed uint64, n int) []float32
	}{
		{"gaussian", func(seed uint64, n int) []float32 { return gaussian(seed, n, 3) }},
		{"ties", func(seed uint64, n int) []float32 {
			x := gaussian(seed, n, 2)
			for i := range x {
				x[i] = float32(math.Round(float64(x[i])))
			}
			return x
		}},
		{"flat", func(seed uint64, n int) []float32 { return gaussian(seed, n, 0.01) }},
		{"masked", func(seed uint64, n int) []float32 {
			x := gaussian(seed, n, 3)
			for i := range x {
				if i%7 != 3 {
					x[i] = -inf
				} else if i%21 == 10 {
					x[i] = nan
				}
			}
			return x
		}},
	}
	opts := []Options{
		Defaults(),
		{Temperature: 1, TopK: 0, TopP: 0.9},
		{Temperature: 1, TopK: 0, TopP: 0.95, MinP: 0.05},
		{Temperature: 1, TopK: 0, MinP: 0.1},
		{Temperature: 1, TopK: 100, TopP: 0.5},
		{Temperature: 1, TopK: 3000, TopP: 0.99},
	}
	for _, fl := range flavours {
		for _, n := range []int{1, 7, 300, 5000} {
			for oi, o := range opts {
				for _, penalise := range []bool{false, true} {
					t.Run(fmt.Sprintf("%s/%d/opts%d/penalties=%v", fl.name, n, oi, penalise), func(t *testing.T) {
						x := fl.make(uint64(n+oi), n)
						var history []int32
						px := x
						if penalise {
							// The history holds the best tokens, so the
							// penalties reorder the top, and some others.
							o.RepeatPenalty, o.PresencePenalty, o.RepeatLastN = 1.5, 0.5, -1
							best := refKept(x, Options{TopK: 30})
							history = append(slices.Clone(best), int32(n/2), int32(n-1), int32(n-1))
							s := mustNew(t, o)
							ids, counts := s.Penalties(history)
							px = slices.Clone(x)
							Penalize(px, ids, counts, o.RepeatPenalty, o.FrequencyPenalty, o.PresencePenalty)
						}
						var got []int32
						for _, c := range mustNew(t, o).candidates(x, history) {
							got = append(got, c.id)
						}
						slices.Sort(got)
						want := refKept(px, o)
						if len(want) == 0 { // everything masked: greedy's token 0
							want = []int32{argmax(px)}
						}
						if !slices.Equal(got, want) {
							t.Fatalf("kept %d tokens, full sort keeps %d: %v vs %v", len(got), len(want), head(got), head(want))
						}
					})
				}
			}
		}
	}
}

func head(ids []int32) []int32 { return ids[:min(len(ids), 10)] }

func TestPenalties(t *testing.T) {
	history := []int32{5, 3, 5, 7, -1, 5, 3}
	for _, tc := range []struct {
		name       string
		o          Options
		ids, count []uint32
	}{
		{"last 4", Options{RepeatPenalty: 1.1, RepeatLastN: 4}, []uint32{3, 5, 7}, []uint32{1, 1, 1}},
		{"last 5: the negative id is dropped", Options{RepeatPenalty: 1.1, RepeatLastN: 5}, []uint32{3, 5, 7}, []uint32{1, 2, 1}},
		{"last 6", Options{RepeatPenalty: 1.1, RepeatLastN: 6}, []uint32{3, 5, 7}, []uint32{2, 2, 1}},
		{"whole history", Options{FrequencyPenalty: 0.1, RepeatLastN: -1}, []uint32{3, 5, 7}, []uint32{2, 3, 1}},
		{"window past the history", Options{PresencePenalty: 0.1, RepeatLastN: 100}, []uint32{3, 5, 7}, []uint32{2, 3, 1}},
		{"no window", Options{RepeatPenalty: 1.1, RepeatLastN: 0}, nil, nil},
		{"penalties off", Options{RepeatPenalty: 1, RepeatLastN: 64}, nil, nil},
		{"repeat 0 is off", Options{RepeatPenalty: 0, RepeatLastN: 64}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids, counts := mustNew(t, tc.o).Penalties(history)
			if !slices.Equal(ids, tc.ids) || !slices.Equal(counts, tc.count) {
				t.Fatalf("Penalties = %v %v, want %v %v", ids, counts, tc.ids, tc.count)
			}
		})
	}
}

// TestPenaltyValues checks the penalised logits against llama.cpp's
// definitions worked by hand (repeat 1.5, frequency 0.25, presence 0.5) on
// both of Sample's paths: top-k, which penalises a gathered copy of the
// history's logits, and the whole-vocabulary path, which penalises a copy
// of the row.
func TestPenaltyValues(t *testing.T) {
	logits := []float32{2, -1, 0.5, 0, 3, -inf, -inf}
	history := []int32{0, 1, 3, 0, 3, 3, 5, 9} // 9 is past the vocabulary
	want := []float32{
		2.0/1.5 - (2*0.25 + 0.5), // positive: divided; seen twice
		-1*1.5 - (1*0.25 + 0.5),  // negative: multiplied; seen once
		0.5,                      // not seen
		0*1.5 - (3*0.25 + 0.5),   // zero counts as negative: 0 * 1.5
		3,                        // not seen
		-inf,                     // masked stays masked
	}
	for _, topK := range []int{6, 0} { // 6 drops only the second -inf, the padding
		o := Options{Temperature: 1, TopK: topK, RepeatPenalty: 1.5, FrequencyPenalty: 0.25, PresencePenalty: 0.5, RepeatLastN: -1}
		orig := slices.Clone(logits)
		got := map[int32]float32{}
		for _, c := range mustNew(t, o).candidates(logits, history) {
			got[c.id] = c.v
		}
		for i, w := range want {
			g, ok := got[int32(i)]
			if w == negInf && topK == 0 {
				// The whole-vocabulary path drops -inf tokens outright.
				if ok {
					t.Errorf("top-k %d: -inf token %d kept", topK, i)
				}
				continue
			}
			// The hand values round once, f32 step by step rounds at each
			// operation: 2 ulps.
			if !ok || (g != w && math.Abs(float64(g-w)) > 2*0x1p-23*math.Abs(float64(w))) {
				t.Errorf("top-k %d: logit %d = %v (kept %v), want %v", topK, i, g, ok, w)
			}
		}
		if !slices.Equal(logits, orig) {
			t.Errorf("top-k %d: the caller's logits changed: %v, were %v", topK, logits, orig)
		}
	}
}

// TestSampleLeavesLogits: Sample works on a copy when it penalises.
func TestSampleLeavesLogits(t *testing.T) {
	x := gaussian(1, 5000, 3)
	orig := slices.Clone(x)
	s := mustNew(t, Options{Temperature: 0.8, TopK: 40, RepeatPenalty: 1.3, FrequencyPenalty: 1, RepeatLastN: 64})
	history := make([]int32, 200)
	for i := range history {
		history[i] = int32(i * 7)
	}
	for range 10 {
		s.Sample(x, history)
	}
	if !slices.Equal(x, orig) {
		t.Fatal("Sample modified the caller's logits")
	}
}

// chiSquareBound is the chi-square statistic with df degrees of freedom that
// a correct sampler exceeds with probability about 1e-6, from the
// Wilson-Hilferty approximation (z = 4.75 standard deviations); accurate to
// a few percent for df >= 3, and a wrong distribution misses it by far more.
func chiSquareBound(df int) float64 {
	d := float64(df)
	a := 2 / (9 * d)
	return d * math.Pow(1-a+4.75*math.Sqrt(a), 3)
}

// chiSquare compares counts of draws with the probabilities p (one per
// token); a draw of a token with p = 0 is returned as an error.
func chiSquare(counts []int, p []float64, draws int) (stat float64, df int, err error) {
	for i, c := range counts {
		if p[i] == 0 {
			if c > 0 {
				return 0, 0, fmt.Errorf("token %d drawn %d times, but it is not in the kept set", i, c)
			}
			continue
		}
		e := p[i] * float64(draws)
		stat += (float64(c) - e) * (float64(c) - e) / e
		df++
	}
	return stat, df - 1, nil
}

// softmaxOver is softmax(x / T) restricted to the ids kept.
func softmaxOver(x []float32, kept []int32, T float64) []float64 {
	p := make([]float64, len(x))
	m := math.Inf(-1)
	for _, i := range kept {
		m = max(m, float64(x[i]))
	}
	z := 0.0
	for _, i := range kept {
		p[i] = math.Exp((float64(x[i]) - m) / T)
		z += p[i]
	}
	for _, i := range kept {
		p[i] /= z
	}
	return p
}

// TestDistribution draws 200000 tokens and checks their frequencies against
// softmax(logits/T) over the set refKept keeps, with a chi-square test. The
// smallest expected count is asserted to be at least 500, so the statistic's
// chi-square approximation holds. Each case also checks the test's own
// power: the same draws against the softmax at a temperature 20% off must
// fail it.
func TestDistribution(t *testing.T) {
	const draws = 200_000
	x := gaussian(42, 12, 1.5)
	for _, tc := range []struct {
		name       string
		o          Options
		candidates bool // through SampleCandidates
	}{
		{"top-k path", Options{Temperature: 0.7, TopK: 8, TopP: 0.9, MinP: 0.05}, false},
		{"whole-vocabulary top-p", Options{Temperature: 1.3, TopP: 0.9}, false},
		{"no filter", Options{Temperature: 1}, false},
		{"min-p only", Options{Temperature: 2, MinP: 0.1}, false},
		{"candidates", Options{Temperature: 0.9, TopK: 6, TopP: 0.95}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Seed = 7
			s := mustNew(t, tc.o)
			ids := make([]uint32, len(x))
			for i := range ids {
				ids[i] = uint32(len(x) - 1 - i) // reversed: the order must not matter
			}
			rev := slices.Clone(x)
			slices.Reverse(rev)
			counts := make([]int, len(x))
			for range draws {
				tok := int32(-1)
				if tc.candidates {
					tok = s.SampleCandidates(ids, rev)
				} else {
					tok = s.Sample(x, nil)
				}
				counts[tok]++
			}
			kept := refKept(x, tc.o)
			p := softmaxOver(x, kept, float64(tc.o.Temperature))
			for _, i := range kept {
				if e := p[i] * draws; e < 500 {
					t.Fatalf("token %d expects %.0f draws: the test logits are badly chosen", i, e)
				}
			}
			stat, df, err := chiSquare(counts, p, draws)
			if err != nil {
				t.Fatal(err)
			}
			bound := chiSquareBound(df)
			t.Logf("kept %d tokens: chi-square %.1f, df %d, bound %.1f", len(kept), stat, df, bound)
			if stat > bound {
				t.Fatalf("chi-square %.1f over %d degrees of freedom exceeds %.1f: counts %v, want p %v", stat, df, bound, counts, p)
			}
			if df > 0 {
				off, _, _ := chiSquare(counts, softmaxOver(x, kept, 1.2*float64(tc.o.Temperature)), draws)
				if off <= bound {
					t.Fatalf("a 20%% wrong temperature passes too (chi-square %.1f): the test has no power", off)
				}
			}
		})
	}
}

// TestInfiniteLogits: +inf tokens share the draws equally, nothing else is
// drawn; a vocabulary of -inf and NaN gives token 0.
func TestInfiniteLogits(t *testing.T) {
	x := []float32{1, inf, 3, nan, inf, -inf}
	for _, o := range []Options{Defaults(), {Temperature: 1}, {Temperature: 1, TopP: 0.9}} {
		s := mustNew(t, o)
		seen := map[int32]int{}
		for range 2000 {
			seen[s.Sample(x, nil)]++
		}
		// Binomial(2000, 1/2): 5 standard deviations is ±112.
		if len(seen) != 2 || seen[1] < 1000-112 || seen[4] < 1000-112 {
			t.Errorf("%+v: draws %v, want tokens 1 and 4 about 1000 times each", o, seen)
		}
	}
	for _, o := range []Options{{}, Defaults(), {Temperature: 1}} {
		if got := mustNew(t, o).Sample([]float32{nan, -inf, nan}, nil); got != 0 {
			t.Errorf("%+v: Sample of no finite logit = %d, want 0", o, got)
		}
	}
}

func TestEmptyInput(t *testing.T) {
	s := mustNew(t, Defaults())
	if got := s.Sample(nil, nil); got != -1 {
		t.Errorf("Sample(nil) = %d, want -1", got)
	}
	if got := s.SampleCandidates(nil, nil); got != -1 {
		t.Errorf("SampleCandidates(nil) = %d, want -1", got)
	}
	if got := s.SampleCandidates([]uint32{1, 2}, []float32{1}); got != -1 {
		t.Errorf("SampleCandidates with 2 ids and 1 logit = %d, want -1", got)
	}
}

func TestSeedsReproduce(t *testing.T) {
	x := gaussian(3, 32000, 2)
	run := func(seed uint64) []int32 {
		o := Defaults()
		o.TopK, o.Seed = 0, seed // the widest path: top-p over the whole vocabulary
		s := mustNew(t, o)
		var toks []int32
		for range 100 {
			toks = append(toks, s.Sample(x, toks))
		}
		return toks
	}
	a, b, c := run(1), run(1), run(2)
	if !slices.Equal(a, b) {
		t.Fatalf("seed 1 gave two sequences:\n%v\n%v", a, b)
	}
	if slices.Equal(a, c) {
		t.Fatalf("seeds 1 and 2 gave the same sequence %v", a)
	}
}

// TestCandidatesMatchSample runs the GPU path on the CPU (Penalties, then
// Penalize and ref.TopK, the kernels' references, then SampleCandidates)
// next to Sample with the same seed: with top-k on, the two must draw the
// same tokens, step after step.
func TestCandidatesMatchSample(t *testing.T) {
	x := gaussian(5, 5000, 2.5)
	o := Defaults()
	o.RepeatPenalty, o.FrequencyPenalty, o.PresencePenalty, o.Seed = 1.3, 0.2, 0.3, 11
	cpu, gpu := mustNew(t, o), mustNew(t, o)
	var history []int32
	for step := range 200 {
		want := cpu.Sample(x, history)

		ids, counts := gpu.Penalties(history)
		px := slices.Clone(x)
		Penalize(px, ids, counts, o.RepeatPenalty, o.FrequencyPenalty, o.PresencePenalty)
		cids, cvals := ref.TopK(px, o.CandidateCount(128))
		if got := gpu.SampleCandidates(cids, cvals); got != want {
			t.Fatalf("step %d: candidates drew %d, Sample drew %d", step, got, want)
		}
		history = append(history, want)
	}
}

// TestSampleAllocatesNothing: after the first call, a step reuses the
// sampler's buffers, on every path.
func TestSampleAllocatesNothing(t *testing.T) {
	x := gaussian(9, 32000, 3)
	history := []int32{1, 2, 3, 2, 1, 900, 31999}
	for _, o := range []Options{
		{RepeatPenalty: 1.1, RepeatLastN: 64},
		{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1.1, RepeatLastN: 64},
		{Temperature: 0.8, TopP: 0.95, RepeatPenalty: 1.1, RepeatLastN: 64},
		{Temperature: 0.8},
	} {
		s := mustNew(t, o)
		s.Sample(x, history)
		if n := testing.AllocsPerRun(20, func() { s.Sample(x, history) }); n != 0 {
			t.Errorf("%+v: %v allocations per Sample", o, n)
		}
	}
}
