package ops

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
)

// moeBackwardParams mirrors Params in shaders/moe_backward.wgsl.
type moeBackwardParams struct {
	Tokens, Experts, TopK, Flags uint32
	Scale                        float32
	_                            [3]uint32
}

// moeBackwardWG is the backward kernels' workgroup size.
const moeBackwardWG = 64

func moeBackwardSpec(entry string) gpu.KernelSpec {
	return gpu.Spec("moe_backward", entry, "WG", moeBackwardWG, "MAX_E", moeMaxExperts, "MAX_K", moeMaxTopK)
}

// MoECombineBackward appends MoECombine's backward for the gradient dout of
// its output (a.Tokens rows of a.Dim): dY[s] = scale·w[s]·dout[t] (the
// slots' rows) and dW[s] = scale·dout[t]·y[s] (their router weights'), t
// the slot's token. a.Accumulate is not taken: both are written.
func MoECombineBackward(c *gpu.Chain, y, weights, dout, dY, dW *gpu.Buffer, a MoECombineArgs) error {
	const kernel = "moe_combine_backward"
	if a.Tokens <= 0 || a.Used <= 0 || a.Dim <= 0 {
		return fmt.Errorf("ops: %s: %d tokens, %d experts used, width %d must be positive", kernel, a.Tokens, a.Used, a.Dim)
	}
	if a.Accumulate {
		return fmt.Errorf("ops: %s: the gradients are written, not accumulated", kernel)
	}
	slots := a.Tokens * a.Used
	if uint64(slots)*uint64(a.Dim) > math.MaxUint32 {
		return fmt.Errorf("ops: %s: %d slots overflow the kernel's 32-bit index", kernel, slots)
	}
	for _, o := range []operand{{"y", y, slots * a.Dim}, {"weights", weights, slots}, {"dout", dout, a.Tokens * a.Dim}, {"dy", dY, slots * a.Dim}, {"dw", dW, slots}} {
		if err := needF32(kernel, o.what, o.buf, o.n); err != nil {
			return err
		}
	}
	if dY == dW || dY == y || dY == weights || dY == dout || dW == y || dW == weights || dW == dout {
		return fmt.Errorf("ops: %s: dy and dw must be two buffers apart from the inputs", kernel)
	}
	p := moeBackwardParams{Tokens: uint32(a.Tokens), Experts: uint32(a.Dim), TopK: uint32(a.Used), Scale: a.Scale}
	if p.Scale == 0 {
		p.Scale = 1
	}
	return dispatch(c, moeBackwardSpec(kernel), p, gpu.Grid(slots, 1), y, weights, dout, dY, dW)
}

// MoERouteBackward appends MoERoute's backward: the gradient of the router
// logits (a.Tokens rows of a.Experts) for the gradient dweights of the
// chosen weights, the choice (ids) held fixed; scale is the per-expert
// scale MoERoute applied, nil for none.
func MoERouteBackward(c *gpu.Chain, logits, scale, ids, dweights, dlogits *gpu.Buffer, a MoERouteArgs) error {
	const kernel = "moe_route_backward"
	if err := a.check(kernel); err != nil {
		return err
	}
	if a.Bias != nil {
		return fmt.Errorf("ops: %s: takes the biased logits, not a bias", kernel)
	}
	n := a.Tokens * a.TopK
	for _, o := range []operand{{"logits", logits, a.Tokens * a.Experts}, {"ids", ids, n}, {"dweights", dweights, n}, {"dlogits", dlogits, a.Tokens * a.Experts}} {
		if err := needF32(kernel, o.what, o.buf, o.n); err != nil {
			return err
		}
	}
	if dlogits == logits || dlogits == ids || dlogits == dweights {
		return fmt.Errorf("ops: %s: dlogits must not be an input", kernel)
	}
	p := moeBackwardParams{Tokens: uint32(a.Tokens), Experts: uint32(a.Experts), TopK: uint32(a.TopK), Flags: a.flags()}
	// dlogits fills the (writable) slot when there is no scale.
	scale, err := expertVector(kernel, "scale", scale, a.Experts, moeScale, &p.Flags, dlogits, dlogits)
	if err != nil {
		return err
	}
	return dispatch(c, moeBackwardSpec(kernel), p, gpu.Grid(a.Tokens, 1), logits, dweights, ids, dlogits, scale)
}

// MoEMatMulBackwardInput appends the gradient of MoEMatMul's input per
// slot: dX[s] (=, or += with a.Options.Accumulate) W_e^T · dY[s] for every
// slot s of the groups MoEGroup made (e its expert), each slot's own row of
// dX (a.Options.YStride/YOffset place dY's rows, XStride dX's; the
// gradient of a row several slots share is their sum, MoECombine's
// Unweighted). a.XDiv and a.GLU are not taken.
func MoEMatMulBackwardInput(c *gpu.Chain, w *gpu.Tensor, dy, groups, dx *gpu.Buffer, a MoEArgs) error {
	const kernel = "moe matmul backward"
	if w == nil {
		return fmt.Errorf("ops: %s: weight tensor is nil", kernel)
	}
	if a.GLU != nil || a.XDiv > 1 {
		return fmt.Errorf("ops: %s %q: a row of dX a slot, no GLU", kernel, w.Name)
	}
	name, ok := matmulBackwardTypes[w.Type]
	if !ok {
		return fmt.Errorf("ops: %s %q: weight type %v has no backward kernel", kernel, w.Name, w.Type)
	}
	if w.Stack <= 0 || w.Rows%w.Stack != 0 {
		return fmt.Errorf("ops: %s %q: not a stack of experts (%d rows, stack %d)", kernel, w.Name, w.Rows, w.Stack)
	}
	rows, k, o := w.Rows/w.Stack, w.Cols, a.Options
	dys, dxs := o.YStride, o.XStride
	if dys == 0 {
		dys = rows
	}
	if dxs == 0 {
		dxs = k
	}
	if a.Slots <= 0 || dys < rows || dxs < k || o.YOffset < 0 {
		return fmt.Errorf("ops: %s %q: %d slots (positive), dy stride %d (at least %d), dx stride %d (at least %d) or dy offset %d is invalid", kernel, w.Name, a.Slots, dys, rows, dxs, k, o.YOffset)
	}
	dyEnd := uint64(o.YOffset) + uint64(a.Slots-1)*uint64(dys) + uint64(rows)
	dxEnd := uint64(a.Slots-1)*uint64(dxs) + uint64(k)
	if dyEnd > math.MaxUint32 || dxEnd > math.MaxUint32 {
		return fmt.Errorf("ops: %s %q: %d slots overflow the kernel's 32-bit indexing", kernel, w.Name, a.Slots)
	}
	words := MoEGroupWords(a.Slots, w.Stack)
	for _, op := range []operand{{"dy", dy, int(dyEnd)}, {"dx", dx, int(dxEnd)}, {"groups", groups, words}} {
		if err := needF32(kernel+" "+w.Name, op.what, op.buf, op.n); err != nil {
			return err
		}
	}
	if dx == dy || dx == groups {
		return fmt.Errorf("ops: %s %q: dx must not be an input", kernel, w.Name)
	}
	if err := checkChunks(kernel, w); err != nil {
		return err
	}
	l := backwardLaunchFor(k)
	if l.rows() != moeTile {
		return fmt.Errorf("ops: %s %q: the backward's %d-row tiles are not MoEGroup's %d", kernel, w.Name, l.rows(), moeTile)
	}
	lim := c.Device().Limits
	if l.sharedBytes() > int(lim.MaxComputeWorkgroupStorageSize) || l.wg() > int(lim.MaxComputeInvocationsPerWorkgroup) {
		return fmt.Errorf("ops: %s %q: launch %+v does not fit the device", kernel, w.Name, l)
	}
	groupsX := (k + l.cols() - 1) / l.cols()
	tiles := (words - moeOrder - a.Slots) / 3
	if tiles > 65535 || groupsX > 65535 {
		return fmt.Errorf("ops: %s %q: %d slots need %d×%d tiles, over the 65535-workgroup grid limit", kernel, w.Name, a.Slots, tiles, groupsX)
	}
	gk, err := c.Device().Kernel(gpu.Spec("matmul_backward_input", "backward_moe_"+name, "CT", l.ct, "RT", l.rt, "KS", l.ks, "BN", l.bn))
	if err != nil {
		return err
	}
	var flags uint32
	if o.Accumulate {
		flags = matmulAccumulate
	}
	for _, ch := range w.Chunks {
		if ch.FirstRow%rows != 0 || ch.Rows%rows != 0 {
			return fmt.Errorf("ops: %s %q: chunk rows %d+%d split an expert of %d rows", kernel, w.Name, ch.FirstRow, ch.Rows, rows)
		}
		p := matmulBackwardParams{
			K: uint32(k), N: uint32(rows), M: uint32(a.Slots), Row0: uint32(ch.FirstRow / rows),
			DYStride: uint32(dys), DXStride: uint32(dxs), DYOffset: uint32(o.YOffset),
			Flags: flags, Scale: 1, SplitRows: uint32(rows), Splits: 1, Experts: uint32(ch.Rows / rows),
		}
		grid := [3]uint32{uint32(groupsX), 1, uint32(tiles)}
		// partial is dX again (one split: never written).
		if err := c.Dispatch(gk, p, grid, ch.Buf, dy, dx, dx, groups); err != nil {
			return err
		}
	}
	return nil
}
