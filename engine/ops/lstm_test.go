package ops

import (
	"fmt"
	"math"
	"testing"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/engine/ops/ref"
)

// LSTM tolerances: h is in (-1, 1). Each step's gate pre-activations are
// f32 sums of Input + Hidden products, off by a few ulps of their bound
// sum |w x| + sum |w_hh| + |b| (O(1) with torch's U(-1/sqrt(H), 1/sqrt(H))
// init, hundreds with inputs of 30), then squashed by sigmoid and tanh
// (slopes <= 1); the cell state carries an error forward only as far as
// the forget gates keep it. Measured 1.1e-6 over 600 steps at torch's init
// scale, and 5.2e-6 = 7e-9 of the bound with inputs of 30.
const (
	lstmATol = 5e-6
	lstmRel  = 3e-8 // per unit of the gate bound
)

type lstmHost struct {
	ref  ref.LSTMWeights
	bufs LSTMWeights
}

func lstmWeights(t testing.TB, seed uint64, a LSTMArgs, scale float32) lstmHost {
	h4 := 4 * a.Hidden
	w := ref.LSTMWeights{
		WIH: randVec(seed, h4*a.Input, scale), WHH: randVec(seed+1, h4*a.Hidden, scale),
		BIH: randVec(seed+2, h4, scale), BHH: randVec(seed+3, h4, scale),
	}
	return lstmHost{ref: w, bufs: LSTMWeights{
		WIH: upload(t, "wih", w.WIH), WHH: upload(t, "whh", w.WHH), BIH: upload(t, "bih", w.BIH), BHH: upload(t, "bhh", w.BHH),
	}}
}

func checkLSTM(t *testing.T, seed uint64, a LSTMArgs, bidirectional bool, xScale, wScale float32) {
	t.Helper()
	if wScale == 0 {
		wScale = float32(1 / math.Sqrt(float64(a.Hidden))) // torch's init range
	}
	x := randVec(seed, a.Input*a.Length, xScale)
	fwd := lstmWeights(t, seed+10, a, wScale)
	var refBwd *ref.LSTMWeights
	var gpuBwd *LSTMWeights
	if bidirectional {
		b := lstmWeights(t, seed+20, a, wScale)
		refBwd, gpuBwd = &b.ref, &b.bufs
	}
	want := ref.LSTM(x, fwd.ref, refBwd, ref.LSTMArgs{Input: a.Input, Hidden: a.Hidden, Length: a.Length})
	bx, sc, y := upload(t, "x", x), scratch(t, "gates", a.ScratchFloats(bidirectional)), scratch(t, "y", len(want))
	run(t, "lstm", func(c *gpu.Chain) error { return LSTM(c, bx, fwd.bufs, gpuBwd, sc, y, a) })
	bound := float64(a.Input)*float64(xScale*wScale) + float64(a.Hidden+2)*float64(wScale)
	assertClose(t, "lstm", download(t, y, len(want)), want, lstmATol+lstmRel*bound, 0)
}

func TestLSTMMatchesReference(t *testing.T) {
	for _, tc := range []struct {
		a     LSTMArgs
		bidir bool
	}{
		{LSTMArgs{Input: 5, Hidden: 3, Length: 7}, true},
		{LSTMArgs{Input: 13, Hidden: 37, Length: 50}, true},
		{LSTMArgs{Input: 7, Hidden: 20, Length: 30}, false},
		{LSTMArgs{Input: 1, Hidden: 1, Length: 1}, true},
		// Kokoro's width: hidden 256 per direction (one unit per
		// invocation), and 300 (two units per invocation, the second
		// partly idle).
		{LSTMArgs{Input: 96, Hidden: 256, Length: 12}, true},
		{LSTMArgs{Input: 33, Hidden: 300, Length: 9}, true},
	} {
		// Every split of the recurrence (each step's dot products over 1,
		// 2 or 4 slices of k, summed in workgroup memory) must give the
		// same LSTM; 0 is the device's own choice.
		for _, split := range []int{0, 1, 2, 4} {
			a := tc.a
			a.Split = split
			units := (a.Hidden + 255) / 256
			if split != 0 && lstmSplitFits(dev.Limits, a.Hidden, units, split) != nil {
				continue // four slices of two units a slot need 25 792 bytes of workgroup memory
			}
			t.Run(fmt.Sprintf("%dx%d/T%d/bi=%v/split=%d", a.Input, a.Hidden, a.Length, tc.bidir, a.Split), func(t *testing.T) {
				checkLSTM(t, 81, a, tc.bidir, 1, 0)
			})
		}
	}
}

// TestLSTMGridMatchesReference runs shaders/lstm_grid.wgsl. One workgroup
// a direction runs everywhere (its h goes through y's slots like any
// other's); grids of several, whose workgroups wait on each other's h,
// run only where ChooseLSTMGrid picks them: lavapipe runs a dispatch's
// workgroups one after another, so there the first would wait for the
// second in vain (LSTM refuses). Those cases run on the H200
// (docs/h200/voice), and Kokoro's BiLSTMs (grid 32) in the vocoder's GPU
// parity tests there.
func TestLSTMGridMatchesReference(t *testing.T) {
	cases := []struct {
		a     LSTMArgs
		bidir bool
	}{
		{LSTMArgs{Input: 13, Hidden: 32, Length: 40, Grid: 1}, false},
		{LSTMArgs{Input: 7, Hidden: 64, Length: 25, Grid: 1}, true},
		{LSTMArgs{Input: 9, Hidden: 16, Length: 33, Grid: 1}, true},
		{LSTMArgs{Input: 30, Hidden: 16, Length: 20, Grid: 1}, false},
	}
	g, err := ChooseLSTMGrid(dev, 256, true)
	if err != nil {
		t.Fatal(err)
	}
	if g != LSTMStream {
		cases = append(cases,
			struct {
				a     LSTMArgs
				bidir bool
			}{LSTMArgs{Input: 96, Hidden: 256, Length: 40, Grid: g}, true},
			struct {
				a     LSTMArgs
				bidir bool
			}{LSTMArgs{Input: 13, Hidden: 64, Length: 50, Grid: 2}, false})
	} else {
		t.Logf("%s runs workgroups one after another: grids of several workgroups are not run here", dev.Info.Name)
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%dx%d/T%d/bi=%v/grid=%d", tc.a.Input, tc.a.Hidden, tc.a.Length, tc.bidir, tc.a.Grid), func(t *testing.T) {
			checkLSTM(t, 84, tc.a, tc.bidir, 1, 0)
		})
	}
}

// TestLSTMGridProbe runs ChooseLSTMGrid's comparison itself with a grid of
// one workgroup a direction (which any device runs): it must agree with
// the streaming recurrence. On a CPU adapter ChooseLSTMGrid streams.
func TestLSTMGridProbe(t *testing.T) {
	for _, bidir := range []bool{false, true} {
		ok, err := lstmGridAgrees(dev, 32, bidir, 1)
		if err != nil || !ok {
			t.Errorf("bidirectional %v: probe of grid 1 agrees = %v, %v", bidir, ok, err)
		}
	}
	if dev.Info.Type == "cpu" {
		if g, err := ChooseLSTMGrid(dev, 256, true); g != LSTMStream || err != nil {
			t.Errorf("CPU adapter: ChooseLSTMGrid = %d, %v, want LSTMStream", g, err)
		}
	}
}

// TestLSTMGridFits checks the grid's shape rules, among them that the k
// slices divide the hidden size (hidden 68 on 17 workgroups makes 16
// slices of 4, which would leave k = 64..67 out of every dot product).
func TestLSTMGridFits(t *testing.T) {
	for _, tc := range []struct {
		hidden, dirs, grid int
		ok                 bool
	}{
		{256, 2, 32, true}, {128, 2, 8, true}, {32, 1, 1, true}, {64, 1, 2, true},
		{68, 1, 17, false}, {132, 1, 33, false}, {256, 2, 64, false}, {256, 1, 3, false}, {16, 1, 2, false},
	} {
		if err := lstmGridFits(tc.hidden, tc.dirs, tc.grid); (err == nil) != tc.ok {
			t.Errorf("hidden %d, %d directions, grid %d: %v, want ok = %v", tc.hidden, tc.dirs, tc.grid, err, tc.ok)
		}
	}
}

func TestLSTMKokoroLength(t *testing.T) {
	// 600 steps, past Kokoro's 510-phoneme limit, so errors have the whole
	// sequence to accumulate through the cell state.
	checkLSTM(t, 82, LSTMArgs{Input: 16, Hidden: 32, Length: 600}, true, 1, 0)
}

func TestLSTMWideMagnitude(t *testing.T) {
	// Inputs of +-30 and weights of +-1: gates deep in saturation, where a
	// naive tanh returns NaN and sigmoid's exp overflows.
	checkLSTM(t, 83, LSTMArgs{Input: 24, Hidden: 40, Length: 40}, true, 30, 1)
}

func TestLSTMRejectsBadShapes(t *testing.T) {
	a := LSTMArgs{Input: 2, Hidden: 3, Length: 4}
	w := LSTMWeights{WIH: scratch(t, "wih", 24), WHH: scratch(t, "whh", 36), BIH: scratch(t, "bih", 12), BHH: scratch(t, "bhh", 12)}
	x, sc, y := scratch(t, "x", 8), scratch(t, "sc", a.ScratchFloats(true)), scratch(t, "y", 24)
	short := w
	short.WHH = scratch(t, "short", 35)
	c, err := dev.NewChain("bad lstm")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	for i, err := range []error{
		LSTM(c, x, w, &w, sc, y, LSTMArgs{Input: 2, Hidden: 3, Length: 5}),
		LSTM(c, x, w, &short, sc, y, a),
		LSTM(c, x, short, nil, sc, y, a),
		LSTM(c, x, w, &w, sc, sc, a),
		LSTM(c, x, w, &w, x, y, a),
		LSTM(c, x, w, &w, sc, y, LSTMArgs{Input: 2, Hidden: 2048, Length: 4}),
		LSTM(c, x, w, &w, sc, y, LSTMArgs{Input: 2, Hidden: 3, Length: 70000}),
		LSTM(c, x, w, &w, sc, y, LSTMArgs{Input: 0, Hidden: 3, Length: 4}),
		LSTM(c, x, w, &w, sc, y, LSTMArgs{Input: 2, Hidden: 3, Length: 4, Split: 3}),
		LSTM(c, x, w, &w, sc, y, LSTMArgs{Input: 2, Hidden: 3, Length: 4, Grid: 3}),
		LSTM(c, x, w, &w, sc, y, LSTMArgs{Input: 2, Hidden: 3, Length: 4, Grid: -2}),
	} {
		if err == nil {
			t.Errorf("case %d: accepted", i)
		}
	}
	if c.Err() != nil {
		t.Errorf("a rejected shape reached the chain: %v", c.Err())
	}
}
