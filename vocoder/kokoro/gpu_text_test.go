package kokoro

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops"
)

// newTextFixture builds a fixture's CPU model and its GPU text side on the
// shared test device (the GPUModel holds only what the text side needs).
func newTextFixture(t *testing.T, name string) (*forwardFixture, *Model, *GPUModel) {
	t.Helper()
	m, fx := fixtureModel(t, name)
	g := &GPUModel{m: m, dev: testDevice(t), pool: map[string]*gpu.Buffer{}}
	t.Cleanup(g.Release)
	var err error
	if g.text, err = newGPUText(g); err != nil {
		t.Fatal(err)
	}
	return fx, m, g
}

// cpuTrace runs the CPU forward's text side up to asr, F0 and N, step for
// step as Model.forward does: the whole forward would run the decoder and
// generator too, seconds on the CPU for arrays this test does not read.
// checkGPUText ties it to the reference's own arrays.
func cpuTrace(t *testing.T, m *Model, tokens []int, prosody []float32, speed float64) ([]int, map[string][]float32) {
	t.Helper()
	c := m.Config
	T, H := len(tokens), c.HiddenDim
	bert, err := m.BERT.forward(tokens)
	if err != nil {
		t.Fatal(err)
	}
	dEn := m.BERTEncoder.rows(bert, T)
	d := m.Predictor.TextEncoder.forward(transpose(dEn, T, H), T, prosody)
	durations, _ := m.Predictor.durations(d, T, speed)
	F := 0
	for _, n := range durations {
		F += n
	}
	f0, n, _ := m.Predictor.f0n(expand(d, H+c.StyleDim, durations), F, prosody)
	asr := expand(m.TextEncoder.forward(tokens), H, durations)
	return durations, map[string][]float32{"asr": asr, "F0": f0, "N": n}
}

// gpuFrames runs durations, then frames in a chain of its own, and reads
// back asr, F0 and N.
func gpuFrames(t *testing.T, g *GPUModel, tokens []int, prosody []float32, speed float64) ([]int, map[string][]float32) {
	t.Helper()
	durations, err := g.text.durations(tokens, prosody, speed)
	if err != nil {
		t.Fatal(err)
	}
	F := 0
	for _, n := range durations {
		F += n
	}
	ch, err := g.dev.NewChain("test.frames")
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Discard()
	asr, f0, n, err := g.text.frames(ch, durations, prosody)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Submit(); err != nil {
		t.Fatal(err)
	}
	got := map[string][]float32{}
	for name, b := range map[string]struct {
		buf *gpu.Buffer
		n   int
	}{"asr": {asr, g.m.Config.HiddenDim * F}, "F0": {f0, 2 * F}, "N": {n, 2 * F}} {
		v, err := b.buf.ReadF32(0, b.n)
		if err != nil {
			t.Fatal(err)
		}
		got[name] = v
	}
	return durations, got
}

// gpuTextTolerances bound the GPU's error relative to each array's largest
// value, against the CPU forward (float64 sums rounded to f32 between
// layers; the GPU sums in f32 throughout). An f32 dot product of k terms
// errs by about sqrt(k)·6e-8 relative; PL-BERT's 3..12 post-norm layers
// and the LSTMs' recurrences carry that forward without growing it much
// (the norms rescale, the gates saturate), and the F0/N blocks' instance
// norms divide by a spread of the same size. asr is t_en gathered: the
// text encoder's convs (2560 terms) and LSTM, measured at 1.8e-6. F0 and
// N pass through PL-BERT, three LSTMs and three conv blocks each,
// measured at 5.8e-6 (F0) and 2.2e-5 (N, whose scale is smaller: 1.3
// against F0's 280) on the full fixture. The bounds are ~10× the worst
// measured on lavapipe: tight enough to catch a wrong layout, a missing
// bias or an off-by-one alignment, each an error of order 1.
var gpuTextTolerances = map[string]float64{"asr": 2e-5, "F0": 6e-5, "N": 2e-4}

// checkGPUText compares the GPU's durations exactly and asr, F0 and N
// within gpuTextTolerances with the CPU's for one utterance. Given the
// fixture whose input this is, it first checks the CPU's arrays against
// hexgrad's KModel at model_test.go's tolerances: were cpuTrace to drift
// from Model.forward, the GPU would be checked against the wrong thing.
func checkGPUText(t *testing.T, m *Model, g *GPUModel, tokens []int, prosody []float32, speed float64, fx *forwardFixture) []int {
	t.Helper()
	wantDur, want := cpuTrace(t, m, tokens, prosody, speed)
	if fx != nil {
		if !slices.Equal(wantDur, fx.Durations) {
			t.Fatalf("cpuTrace: durations %v, reference %v", wantDur, fx.Durations)
		}
		for _, arr := range []string{"asr", "F0", "N"} {
			ref, _ := fx.array(t, arr)
			if len(want[arr]) != len(ref) {
				t.Fatalf("cpuTrace: %s has %d values, reference %d", arr, len(want[arr]), len(ref))
			}
			if rel, _ := relErr(want[arr], ref); rel > forwardTolerances[arr] {
				t.Errorf("cpuTrace: %s: error %.3g of its scale against the reference, tolerance %.0e", arr, rel, forwardTolerances[arr])
			}
		}
	}
	gotDur, got := gpuFrames(t, g, tokens, prosody, speed)
	// The fixture's raw durations are at least 0.1 from a rounding
	// boundary (it chose its bias so), far beyond the f32 noise: equal.
	if !slices.Equal(gotDur, wantDur) {
		t.Fatalf("durations %v, CPU %v", gotDur, wantDur)
	}
	for _, arr := range []string{"asr", "F0", "N"} {
		rel, abs := relErr(got[arr], want[arr])
		t.Logf("%-4s %6d values: max |err| %.3g, %.3g of scale (tolerance %.0e)", arr, len(want[arr]), abs, rel, gpuTextTolerances[arr])
		if rel > gpuTextTolerances[arr] {
			t.Errorf("%s: error %.3g of its scale, tolerance %.0e", arr, rel, gpuTextTolerances[arr])
		}
	}
	return gotDur
}

// TestGPUTextMatchesCPUSmall runs the small fixture's utterance, then a
// shorter one through the same pool (buffers sized for the first, holding
// its values past the second's end), then speed 2, which must halve the
// durations as the CPU does, then bad input. One model for all four: building it and
// running the CPU side cost more than the GPU side on lavapipe.
func TestGPUTextMatchesCPUSmall(t *testing.T) {
	fx, m, g := newTextFixture(t, "small")
	prosody := fx.Style[m.Config.StyleDim:]
	var d1 []int
	t.Run("fixture", func(t *testing.T) { d1 = checkGPUText(t, m, g, fx.Tokens, prosody, fx.Speed, fx) })
	t.Run("shorter", func(t *testing.T) {
		short := slices.Clone(fx.Tokens[:6])
		short[5] = 0 // the closing pad
		checkGPUText(t, m, g, short, prosody, 1, nil)
	})
	t.Run("speed 2", func(t *testing.T) {
		d2 := checkGPUText(t, m, g, fx.Tokens, prosody, 2, nil)
		for i := range d1 {
			// The fixture's durations are 2 frames at speed 1: 1 at speed 2.
			if d2[i] != max(1, d1[i]/2) {
				t.Errorf("token %d: %d frames at speed 2, %d at speed 1", i, d2[i], d1[i])
			}
		}
		if sum(d2) >= sum(d1) {
			t.Errorf("speed 2 gave %d frames, speed 1 %d", sum(d2), sum(d1))
		}
	})
	t.Run("bad input", func(t *testing.T) { checkGPUTextRejectsBadInput(t, fx, m, g) })
}

// TestGPUTextMatchesCPUFull is the full-size PL-BERT (768 wide, 12 layers)
// and text encoder (3 blocks) on the full fixture's 6 tokens.
func TestGPUTextMatchesCPUFull(t *testing.T) {
	fx, m, g := newTextFixture(t, "full")
	checkGPUText(t, m, g, fx.Tokens, fx.Style[m.Config.StyleDim:], fx.Speed, fx)
}

func sum(v []int) int {
	s := 0
	for _, x := range v {
		s += x
	}
	return s
}

// The durations read back hold DurationFrames' NaN marker for a token
// whose logits held a NaN: an error naming the token, not 0 frames.
func TestFramesOfNaNMarker(t *testing.T) {
	got, err := framesOf([]uint32{2, 1, 7}, []int{0, 5, 0})
	if err != nil || !slices.Equal(got, []int{2, 1, 7}) {
		t.Errorf("finite durations: %v, %v", got, err)
	}
	_, err = framesOf([]uint32{2, ops.DurationFramesNaN, 7}, []int{0, 43, 0})
	if err == nil || !strings.Contains(err.Error(), "token 1 (id 43)") || !strings.Contains(err.Error(), "NaN") {
		t.Errorf("a NaN duration: error %v, want one naming token 1 (id 43)", err)
	}
}

// checkGPUTextRejectsBadInput: bad tokens, style or speed are errors
// naming the problem, never a panic or a clamped embedding row; frames
// refuses durations that do not belong to the last durations call.
func checkGPUTextRejectsBadInput(t *testing.T, fx *forwardFixture, m *Model, g *GPUModel) {
	c := m.Config
	prosody := fx.Style[c.StyleDim:]
	long := make([]int, c.PLBert.MaxPositionEmbeddings+1)
	for _, tc := range []struct {
		name    string
		tokens  []int
		prosody []float32
		speed   float64
		want    string
	}{
		{"id past n_token", []int{0, c.NToken, 0}, prosody, 1, "n_token"},
		{"negative id", []int{0, -1, 0}, prosody, 1, "n_token"},
		{"past the context", long, prosody, 1, "context"},
		{"no tokens", nil, prosody, 1, "no tokens"},
		{"short style", fx.Tokens, prosody[1:], 1, "style"},
		{"zero speed", fx.Tokens, prosody, 0, "speed"},
		{"NaN speed", fx.Tokens, prosody, nan(), "speed"},
		{"huge speed", fx.Tokens, prosody, 2e6, "speed 2e+06 must be positive and at most 1e6"},
	} {
		_, err := g.text.durations(tc.tokens, tc.prosody, tc.speed)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %q", tc.name, err, tc.want)
		}
	}
	// A label asked for a larger size later in the same pass is an error:
	// growing would release the buffer the pass's earlier dispatches bound.
	// Asking again at the size or smaller is the same buffer.
	probe := &textPass{g: g}
	first := probe.buf("probe", 10)
	if first == nil || probe.buf("probe", 10) != first || probe.buf("probe", 4) != first || probe.err != nil {
		t.Errorf("asking again for %q at its size or smaller: %v", "probe", probe.err)
	}
	if b := probe.buf("probe", 11); b != nil || probe.err == nil || !strings.Contains(probe.err.Error(), `"text.probe" asked for 11 floats after 10`) {
		t.Errorf("asking for %q at a larger size in one pass: buffer %v, error %v", "probe", b, probe.err)
	}
	if b, ok := g.pool["text.probe"]; ok {
		b.Release()
		delete(g.pool, "text.probe")
	}
	// The CPU forward says the same of a speed past the limit.
	if err := m.checkInput(fx.Tokens, fx.Style, 2e6); err == nil || !strings.Contains(err.Error(), "speed 2e+06 must be positive and at most 1e6") {
		t.Errorf("CPU forward, huge speed: error %v, want one naming the limit", err)
	}
	// After the failed calls (an earlier subtest's good one before them),
	// frames has no d to read, even for durations of the right length.
	ch, err := g.dev.NewChain("test.bad frames")
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Discard()
	ones := slices.Repeat([]int{1}, len(fx.Tokens))
	if _, _, _, err := g.text.frames(ch, ones, prosody); err == nil || !strings.Contains(err.Error(), "no durations call") {
		t.Errorf("frames after failed durations calls: error %v, want one saying no durations call left d", err)
	}
	ch.Discard()

	durations, err := g.text.durations(fx.Tokens, prosody, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		dur  []int
	}{
		{"one duration short", durations[1:]},
		{"negative", append([]int{-1}, durations[1:]...)},
		{"all zero", make([]int, len(durations))},
	} {
		ch, err := g.dev.NewChain("test.bad frames " + tc.name)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := g.text.frames(ch, tc.dur, prosody); err == nil {
			t.Errorf("frames with %s durations: accepted", tc.name)
		}
		ch.Discard()
	}
}

func nan() float64 {
	var zero float64
	return zero / zero
}

// BenchmarkGPUText times the text side, on a GPU (lavapipe takes minutes
// for the long utterance), on the full fixture's model (Kokoro
// 82M's shapes, random weights) for a sentence-length and a context-length
// utterance: durations (one submit and its readback) and frames (recorded,
// submitted and waited for by reading back one float). Run:
//
//	go test ./vocoder/kokoro -run '^$' -bench GPUText -benchtime 10x
func BenchmarkGPUText(b *testing.B) {
	m, fx := fixtureModel(b, "full")
	cfg := m.Config
	g := &GPUModel{m: m, dev: testDevice(b), pool: map[string]*gpu.Buffer{}}
	defer g.Release()
	var err error
	if g.text, err = newGPUText(g); err != nil {
		b.Fatal(err)
	}
	prosody := fx.Style[cfg.StyleDim:]
	for _, T := range []int{64, cfg.PLBert.MaxPositionEmbeddings} {
		tokens := make([]int, T)
		for i := 1; i < T-1; i++ {
			tokens[i] = 1 + (i*37)%(cfg.NToken-1) // every phoneme id, no pad inside
		}
		b.Run(fmt.Sprintf("durations/T=%d", T), func(b *testing.B) {
			for b.Loop() {
				if _, err := g.text.durations(tokens, prosody, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
		durations, err := g.text.durations(tokens, prosody, 1)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("frames/T=%d/F=%d", T, sum(durations)), func(b *testing.B) {
			for b.Loop() {
				ch, err := g.dev.NewChain("bench.frames")
				if err != nil {
					b.Fatal(err)
				}
				asr, _, _, err := g.text.frames(ch, durations, prosody)
				if err != nil {
					ch.Discard()
					b.Fatal(err)
				}
				rb, err := ch.ReadBack(asr, 0, 4)
				if err != nil {
					ch.Discard()
					b.Fatal(err)
				}
				if err := ch.Submit(); err != nil {
					b.Fatal(err)
				}
				if _, err := rb.Bytes(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
