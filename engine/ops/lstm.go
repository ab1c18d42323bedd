package ops

import (
	"fmt"
	"math"
	"sync"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// LSTMWeights are one direction of a single-layer nn.LSTM, as torch names
// them: weight_ih_l0 [4H][Input], weight_hh_l0 [4H][H], bias_ih_l0 and
// bias_hh_l0 [4H] (the _reverse tensors for the reverse direction), rows in
// gate order i, f, g, o.
type LSTMWeights struct {
	WIH, WHH, BIH, BHH *gpu.Buffer
}

// LSTMArgs shapes an LSTM over Length steps of Input features.
type LSTMArgs struct {
	Input, Hidden, Length int
	// Grid picks the recurrence: 0 or LSTMStream runs
	// shaders/lstm_recur.wgsl (one workgroup per direction, W_hh streamed
	// from memory every step); 1 or more run shaders/lstm_grid.wgsl on
	// Grid workgroups per direction (W_hh held in their registers, h
	// exchanged each step), within lstmGridFits. A grid of several
	// workgroups needs them all running at once, which WebGPU does not
	// promise: ChooseLSTMGrid tries it on the device first.
	Grid int
	// Split is the number of slices (1, 2 or 4) lstm_recur splits each
	// step's dot products over; 0 takes the most the device's workgroup
	// limits allow (lstmSplit). Every split and grid computes the same
	// LSTM; they differ in summation order and speed.
	Split int
}

// lstmMaxSteps keeps the recurrence's time loop under lavapipe's silent
// 65535-iteration cap per shader loop.
const lstmMaxSteps = 65535

// lstmMaxHidden bounds H by the workgroup memory the recurrence keeps h in
// (4 KiB) and the registers of UNITS = H/256 cell states per invocation.
const lstmMaxHidden = 1024

// ScratchFloats is the size of the scratch buffer LSTM needs: the gates, 4H
// per step and direction, then a transposed copy of each direction's W_hh
// (4H x H) that the recurrence reads coalesced.
func (a LSTMArgs) ScratchFloats(bidirectional bool) int {
	d := 1
	if bidirectional {
		d = 2
	}
	return d*a.Length*4*a.Hidden + d*4*a.Hidden*a.Hidden
}

// lstmParams mirrors Params in shaders/lstm_common.wgsl.
type lstmParams struct {
	Input, T, Dirs, _ uint32
}

// LSTM appends nn.LSTM(Input, Hidden, batch_first=True,
// bidirectional=bwd != nil) over x laid out [Input][Length] (Kokoro's
// channels-first activations, which it transposes before the LSTM), with
// zero initial states: y is [D*Hidden][Length] with y[j][t] = h_t[j] of the
// forward direction and y[Hidden+j][t] that of the reverse one, the layout
// of the LSTM output transposed back to channels-first. scratch holds
// a.ScratchFloats(bwd != nil) floats. Three dispatches: every step's input
// projection at once, then the recurrence (a sequential loop over the
// steps; Kokoro's sequences are a few hundred tokens) in one of two ways
// (a.Grid): streaming, a transposed copy of W_hh into the scratch (so the
// recurrence's weight reads are coalesced; the caller's W_hh stays as
// torch lays it out) and one workgroup per direction; or on a grid, y
// filled with a sentinel and G workgroups per direction holding W_hh in
// registers and trading h through y.
func LSTM(c *gpu.Chain, x *gpu.Buffer, fwd LSTMWeights, bwd *LSTMWeights, scratch, y *gpu.Buffer, a LSTMArgs) error {
	const kernel = "lstm"
	if a.Input <= 0 || a.Hidden <= 0 || a.Length <= 0 {
		return fmt.Errorf("ops: %s: input %d, hidden %d, length %d must be positive", kernel, a.Input, a.Hidden, a.Length)
	}
	if a.Hidden > lstmMaxHidden {
		return fmt.Errorf("ops: %s: hidden size %d over the recurrence's %d", kernel, a.Hidden, lstmMaxHidden)
	}
	if a.Length > lstmMaxSteps {
		return fmt.Errorf("ops: %s: %d steps over the %d a shader loop may take on lavapipe", kernel, a.Length, lstmMaxSteps)
	}
	dirs := 1
	if bwd != nil {
		dirs = 2
	}
	h4 := 4 * a.Hidden
	if err := checkSizes(kernel, operand{"x", x, a.Input * a.Length}, operand{"scratch", scratch, a.ScratchFloats(bwd != nil)},
		operand{"y", y, dirs * a.Hidden * a.Length}); err != nil {
		return err
	}
	check := func(dir string, w LSTMWeights) error {
		return checkSizes(kernel, operand{dir + " weight_ih", w.WIH, h4 * a.Input}, operand{dir + " weight_hh", w.WHH, h4 * a.Hidden},
			operand{dir + " bias_ih", w.BIH, h4}, operand{dir + " bias_hh", w.BHH, h4})
	}
	if err := check("forward", fwd); err != nil {
		return err
	}
	back := fwd // fills the reverse slots of a unidirectional LSTM; not read
	if bwd != nil {
		if err := check("reverse", *bwd); err != nil {
			return err
		}
		back = *bwd
	}
	for _, b := range []*gpu.Buffer{x, fwd.WIH, fwd.WHH, fwd.BIH, fwd.BHH, back.WIH, back.WHH, back.BIH, back.BHH} {
		if b == scratch || b == y {
			return fmt.Errorf("ops: %s: scratch and y must be other buffers than x and the weights", kernel)
		}
	}
	if scratch == y {
		return fmt.Errorf("ops: %s: scratch must be another buffer than y", kernel)
	}
	grid := a.Grid
	switch {
	case grid == 0 || grid == LSTMStream:
		grid = LSTMStream
	case grid < 0:
		return fmt.Errorf("ops: %s: grid %d: want 0, LSTMStream or a workgroup count", kernel, grid)
	case grid > 1 && c.Device().Info.Type == "cpu":
		return fmt.Errorf("ops: %s: grid of %d workgroups on a CPU adapter, which runs them one after another (each would wait for the next in vain)", kernel, grid)
	}
	if grid >= 1 {
		if err := lstmGridFits(a.Hidden, dirs, grid); err != nil {
			return err
		}
	}
	units := (a.Hidden + wg - 1) / wg
	split := a.Split
	if grid >= 1 {
		split = 1 // not used
	} else if split == 0 {
		split = lstmSplit(c.Device(), a.Hidden, units)
	} else if err := lstmSplitFits(c.Device().Limits, a.Hidden, units, split); err != nil {
		return err
	}
	p := lstmParams{Input: uint32(a.Input), T: uint32(a.Length), Dirs: uint32(dirs)}
	in := gpu.Spec("lstm", "lstm_input", "WG", wg, "H", a.Hidden)
	if err := dispatch(c, in, p, gpu.Grid(dirs*h4*a.Length, wg), x, fwd.WIH, back.WIH, fwd.BIH, fwd.BHH, back.BIH, back.BHH, scratch); err != nil {
		return err
	}
	if grid >= 1 {
		u := a.Hidden / grid
		init := gpu.Spec("lstm_grid", "lstm_grid_init", "H", a.Hidden, "U", u)
		if err := dispatch(c, init, p, gpu.Grid(dirs*a.Hidden*a.Length, wg), scratch, fwd.WHH, back.WHH, y); err != nil {
			return err
		}
		rec := gpu.Spec("lstm_grid", "lstm_grid", "H", a.Hidden, "U", u)
		return dispatch(c, rec, p, [3]uint32{uint32(grid), uint32(dirs), 1}, scratch, fwd.WHH, back.WHH, y)
	}
	tr := gpu.Spec("lstm_recur", "lstm_whh_t", "WG", wg, "H", a.Hidden, "UNITS", units, "SPLIT", 1)
	if err := dispatch(c, tr, p, gpu.Grid(dirs*a.Hidden*a.Hidden, wg), scratch, fwd.WHH, back.WHH, y); err != nil {
		return err
	}
	rec := gpu.Spec("lstm_recur", "lstm_recur", "WG", wg*split, "H", a.Hidden, "UNITS", units, "SPLIT", split)
	return dispatch(c, rec, p, [3]uint32{uint32(dirs), 1, 1}, scratch, fwd.WHH, back.WHH, y)
}

// lstmSplit is how many slices lstm_recur splits each step's dot products
// over (4, 2 or 1): on a GPU as many as the device's workgroup limits
// allow, since one 1024-invocation workgroup keeps four times the W_hh
// loads in flight of a 256-invocation one; on a CPU adapter (lavapipe),
// whose few threads run the invocations in turn, 1: there slices only add
// work (1.6x slower at Kokoro's size).
func lstmSplit(d *gpu.Device, hidden, units int) int {
	if d.Info.Type == "cpu" {
		return 1
	}
	for _, s := range []int{4, 2} {
		if lstmSplitFits(d.Limits, hidden, units, s) == nil {
			return s
		}
	}
	return 1
}

// lstmSplitFits says whether a split of s slices fits the device: 256
// invocations a slice, and workgroup memory for h and the partial gates of
// the slices past the first (16 bytes a unit slot, plus one).
func lstmSplitFits(l gpu.Limits, hidden, units, s int) error {
	if s != 1 && s != 2 && s != 4 {
		return fmt.Errorf("ops: lstm: split %d: the recurrence splits into 1, 2 or 4 slices", s)
	}
	invocations, shared := s*wg, 4*hidden+16*((s-1)*units*wg+1)
	if uint32(invocations) > l.MaxComputeInvocationsPerWorkgroup || uint32(shared) > l.MaxComputeWorkgroupStorageSize {
		return fmt.Errorf("ops: lstm: split %d at hidden %d needs %d invocations and %d bytes of workgroup memory; the device allows %d and %d",
			s, hidden, invocations, shared, l.MaxComputeInvocationsPerWorkgroup, l.MaxComputeWorkgroupStorageSize)
	}
	return nil
}

// LSTMStream is LSTMArgs.Grid's value for the streaming recurrence.
const LSTMStream = -1

// lstmGridMaxWorkgroups bounds the grid recurrence's workgroups (both
// directions), which must all run at once (ChooseLSTMGrid checks that
// the device does).
const lstmGridMaxWorkgroups = 64

// ChooseLSTMGrid is the Grid for LSTMArgs of this hidden size on d: on a
// discrete GPU the grid that gives each invocation 32 weights of W_hh (G =
// H²/2048: 32 for Kokoro's H = 256, 64 workgroups for a BiLSTM), if it fits
// and if the device, tried once on a short sequence, gives the streaming
// recurrence's h with it; else LSTMStream. The try catches a GPU too small
// to hold every workgroup of the grid at once: there the first workgroups
// wait for h that the others cannot compute until they finish, give up
// after a bounded spin (tens of milliseconds a step) and return NaN, which
// the comparison sees. Integrated GPUs and CPU adapters stream without a
// try. The answer is kept per device and shape.
func ChooseLSTMGrid(d *gpu.Device, hidden int, bidirectional bool) (int, error) {
	if d.Info.Type != "discrete" {
		return LSTMStream, nil
	}
	dirs := 1
	if bidirectional {
		dirs = 2
	}
	g := hidden * hidden / 2048
	if g < 1 || lstmGridFits(hidden, dirs, g) != nil {
		return LSTMStream, nil
	}
	key := lstmGridKey{d, hidden, dirs}
	if v, ok := lstmGridTried.Load(key); ok {
		return v.(int), nil
	}
	ok, err := lstmGridAgrees(d, hidden, bidirectional, g)
	if err != nil {
		return LSTMStream, err
	}
	if !ok {
		g = LSTMStream
	}
	lstmGridTried.Store(key, g)
	return g, nil
}

type lstmGridKey struct {
	d            *gpu.Device
	hidden, dirs int
}

// lstmGridTried holds ChooseLSTMGrid's answers.
var lstmGridTried sync.Map

// lstmGridAgrees runs a four-step LSTM of the given size both ways on d
// (weights and inputs of a fixed hash, torch's init scale) and says
// whether the grid's h is within 1e-4 of the streaming recurrence's: the
// two differ only in summation order (~1e-6), and a grid that could not
// run gives NaN.
func lstmGridAgrees(d *gpu.Device, hidden int, bidirectional bool, grid int) (bool, error) {
	const steps, input = 4, 8
	a := LSTMArgs{Input: input, Hidden: hidden, Length: steps}
	scale := float32(1 / math.Sqrt(float64(hidden)))
	val := func(i int) float32 { // a fixed pseudo-random value in [-scale, scale)
		h := uint32(i)*2654435761 + 0x9e3779b9
		h ^= h >> 15
		h *= 2246822519
		h ^= h >> 13
		return scale * (float32(h>>8)/(1<<23) - 1)
	}
	var bufs []*gpu.Buffer
	defer func() {
		for _, b := range bufs {
			b.Release()
		}
	}()
	seq := 0
	upload := func(n int) (*gpu.Buffer, error) {
		v := make([]float32, n)
		for i := range v {
			v[i] = val(seq + i)
		}
		seq += n
		b, err := d.NewBufferF32("lstm.grid_probe", v)
		if err == nil {
			bufs = append(bufs, b)
		}
		return b, err
	}
	weights := func() (LSTMWeights, error) {
		var w LSTMWeights
		var err error
		for _, f := range []struct {
			b **gpu.Buffer
			n int
		}{{&w.WIH, 4 * hidden * input}, {&w.WHH, 4 * hidden * hidden}, {&w.BIH, 4 * hidden}, {&w.BHH, 4 * hidden}} {
			if *f.b, err = upload(f.n); err != nil {
				return w, err
			}
		}
		return w, nil
	}
	fwd, err := weights()
	if err != nil {
		return false, err
	}
	var bwd *LSTMWeights
	dirs := 1
	if bidirectional {
		b, err := weights()
		if err != nil {
			return false, err
		}
		bwd, dirs = &b, 2
	}
	x, err := upload(input * steps)
	if err != nil {
		return false, err
	}
	scratch, err := upload(a.ScratchFloats(bidirectional))
	if err != nil {
		return false, err
	}
	n := dirs * hidden * steps
	var out [2][]float32
	for i, g := range []int{LSTMStream, grid} {
		y, err := upload(n)
		if err != nil {
			return false, err
		}
		c, err := d.NewChain("lstm.grid_probe")
		if err != nil {
			return false, err
		}
		a.Grid = g
		if err := LSTM(c, x, fwd, bwd, scratch, y, a); err != nil {
			c.Discard()
			return false, err
		}
		if err := c.Submit(); err != nil {
			return false, err
		}
		if out[i], err = y.ReadF32(0, n); err != nil {
			return false, err
		}
	}
	for i := range out[0] {
		if !(math.Abs(float64(out[0][i]-out[1][i])) <= 1e-4) { // NaN fails too
			return false, nil
		}
	}
	return true, nil
}

// lstmGridFits says whether shaders/lstm_grid.wgsl runs hidden size
// hidden on grid workgroups per direction: U = hidden/grid units a
// workgroup, its R = 4U gate rows dividing the 256 invocations into S =
// 256/R slices of k, each a whole number of vec4s up to 16, and at most
// lstmGridMaxWorkgroups workgroups in all.
func lstmGridFits(hidden, dirs, grid int) error {
	bad := func(why string) error {
		return fmt.Errorf("ops: lstm: grid of %d workgroups at hidden %d: %s", grid, hidden, why)
	}
	if grid < 1 || hidden%grid != 0 {
		return bad("the workgroups must divide the hidden units")
	}
	r := 4 * hidden / grid
	if r > wg || wg%r != 0 {
		return bad(fmt.Sprintf("%d gate rows a workgroup must divide its %d invocations", r, wg))
	}
	if hidden%(wg/r) != 0 {
		return bad(fmt.Sprintf("%d slices of k must divide the hidden units", wg/r))
	}
	kpt := hidden * r / wg
	if kpt < 4 || kpt%4 != 0 || kpt > 64 {
		return bad(fmt.Sprintf("%d weights an invocation must be a multiple of 4 up to 64", kpt))
	}
	if dirs*grid > lstmGridMaxWorkgroups {
		return bad(fmt.Sprintf("%d workgroups, over the %d that surely run at once", dirs*grid, lstmGridMaxWorkgroups))
	}
	return nil
}
