package ops

// The experts of a mixture-of-experts layer. After MoERoute has chosen each
// token's experts (ids, [tokens, used]), every (token, expert) pair is a
// slot, tokens × used of them, and the layer's products run over the slots:
// gate and up read the token's normed row, down the slot's activated row,
// each with the slot's expert's matrix out of one stacked tensor
// (gpu.Tensor.Stack: experts × rows rows, ggml's [cols, rows, experts]).
// MoECombine then sums each token's slots with the router's weights.
//
// Two products, the same arithmetic as MatMulWith per slot:
//   - MoEMatVec (decode, quantized types): a workgroup per row group and
//     slot, reading only the chosen experts' rows (the matvec_moe_ entries
//     of the matvec families, shaders/matvec_common.wgsl).
//   - MoEMatMul (prefill, and every type): MoEGroup sorts the slots by
//     expert into tiles of at most moeTile, and the tiled kernel's
//     matmul_moe_ entries multiply each tile by its expert's matrix, so an
//     expert's weights are read once per tile of its tokens.

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/gguf"
)

// moeOrder is where the sorted slots start in a groups buffer (MOE_ORDER
// and ORDER in the shaders); moeTile is the most slots of a tile, the
// activation rows of the tiled launch MoEMatMul runs (tiledLaunchMain).
var (
	moeOrder = 4
	moeTile  = tiledLaunchMain.rows()
)

// MoEGroupWords is the size in u32 words of MoEGroup's output for slots
// slots of experts experts: the header, the sorted slots and the most
// tiles they can make, each expert's last tile possibly partial.
func MoEGroupWords(slots, experts int) int {
	return moeOrder + slots + 3*(slots/moeTile+min(experts, slots)+1)
}

// moeGroupParams mirrors Params in shaders/moe_group.wgsl.
type moeGroupParams struct {
	Slots, Experts, Tile, _ uint32
}

// moeGroupWG is the grouping kernel's one workgroup.
const moeGroupWG = 256

// MoEGroup appends the grouping of the slots' experts ids (u32 words, one a
// slot, each below experts) into groups (MoEGroupWords words): the slots
// sorted by expert, cut into tiles of at most moeTile, which MoEMatMul
// reads.
func MoEGroup(c *gpu.Chain, ids, groups *gpu.Buffer, slots, experts int) error {
	const kernel = "moe_group"
	switch {
	case slots <= 0 || experts <= 0:
		return fmt.Errorf("ops: %s: %d slots of %d experts must be positive", kernel, slots, experts)
	case experts > moeMaxExperts:
		return fmt.Errorf("ops: %s: %d experts, at most %d", kernel, experts, moeMaxExperts)
	case MoEGroupWords(slots, experts) > math.MaxUint32/4:
		return fmt.Errorf("ops: %s: %d slots overflow the kernel's 32-bit index", kernel, slots)
	}
	if err := needF32(kernel, "ids", ids, slots); err != nil {
		return err
	}
	if err := needF32(kernel, "groups", groups, MoEGroupWords(slots, experts)); err != nil {
		return err
	}
	if ids == groups {
		return fmt.Errorf("ops: %s: ids and groups must be two buffers", kernel)
	}
	p := moeGroupParams{Slots: uint32(slots), Experts: uint32(experts), Tile: uint32(moeTile)}
	spec := gpu.Spec("moe_group", kernel, "WG", moeGroupWG, "MAX_E", moeMaxExperts)
	return dispatch(c, spec, p, gpu.Grid(1, 1), ids, groups)
}

// MoEArgs shape one product over the slots.
type MoEArgs struct {
	// Slots are the (token, expert) pairs: tokens × experts used.
	Slots int
	// XDiv is how many consecutive slots read one row of x: the experts
	// used for gate and up (a token's slots all read its normed row), 1
	// for down (each slot its own activated row).
	XDiv int
	// GLU, MoEMatVec only: x's rows are [gate | up], 2·GLU.FF floats, and
	// the product reads act(gate) ⊙ up, as MatVecGLU does.
	GLU *GLUArgs
	// Options place the result (slot s's row at YOffset + s·YStride,
	// YStride 0 meaning the expert's rows) and space x's rows (XStride 0
	// meaning the columns, or 2·FF with GLU).
	Options MatmulOptions
	// Bias, MoEMatVec only: the experts' biases, a row of the experts'
	// output width per expert (w.Stack rows), each slot's added to its
	// result (gpt-oss's gate-up and down biases, with no MoEAddBias
	// dispatch).
	Bias *gpu.Buffer
}

// moeShape checks a product of the stacked experts w over the slots of a
// and returns its params, N being the rows of one expert.
func moeShape(kernel string, w *gpu.Tensor, x, y *gpu.Buffer, a MoEArgs) (matmulParams, error) {
	if w == nil {
		return matmulParams{}, fmt.Errorf("ops: %s: weight tensor is nil", kernel)
	}
	kernel += " " + w.Name
	if w.Stack <= 0 || w.Rows%w.Stack != 0 {
		return matmulParams{}, fmt.Errorf("ops: %s: not a stack of experts (%d rows, stack %d)", kernel, w.Rows, w.Stack)
	}
	rows, k := w.Rows/w.Stack, w.Cols
	o := a.Options
	if o.Bias != nil {
		return matmulParams{}, fmt.Errorf("ops: %s: the experts' biases go in MoEArgs.Bias, not its options", kernel)
	}
	xw := k
	if a.GLU != nil {
		if a.GLU.FF != k {
			return matmulParams{}, fmt.Errorf("ops: %s: glu ff %d, want the experts' %d columns", kernel, a.GLU.FF, k)
		}
		xw = 2 * k
	}
	xs, ys := o.XStride, o.YStride
	if xs == 0 {
		xs = xw
	}
	if ys == 0 {
		ys = rows
	}
	switch {
	case a.Slots <= 0 || a.XDiv <= 0:
		return matmulParams{}, fmt.Errorf("ops: %s: %d slots, %d a row of x: both must be positive", kernel, a.Slots, a.XDiv)
	case xs < xw || xs%4 != 0 || ys < rows || o.YOffset < 0:
		return matmulParams{}, fmt.Errorf("ops: %s: x stride %d (a multiple of 4, at least %d) or y stride %d (at least %d) or y offset %d is invalid", kernel, xs, xw, ys, rows, o.YOffset)
	}
	xEnd := uint64((a.Slots-1)/a.XDiv)*uint64(xs) + uint64(xw)
	yEnd := uint64(o.YOffset) + uint64(a.Slots-1)*uint64(ys) + uint64(rows)
	if xEnd > math.MaxUint32 || yEnd > math.MaxUint32 {
		return matmulParams{}, fmt.Errorf("ops: %s: %d slots overflow the kernels' 32-bit indexing", kernel, a.Slots)
	}
	if err := needF32(kernel, "x", x, int(xEnd)); err != nil {
		return matmulParams{}, err
	}
	if err := needF32(kernel, "y", y, int(yEnd)); err != nil {
		return matmulParams{}, err
	}
	if x == y {
		return matmulParams{}, fmt.Errorf("ops: %s: x and y are the same buffer %q", kernel, x.Label())
	}
	if err := checkChunks(kernel, w); err != nil {
		return matmulParams{}, err
	}
	var flags uint32
	if o.Accumulate {
		flags |= matmulAccumulate
	}
	if a.GLU != nil {
		flags |= matmulGLU
		if a.GLU.GELU {
			flags |= matmulGELU
		}
		if a.GLU.OAI {
			flags |= matmulOAI
		}
	}
	return matmulParams{K: uint32(k), N: uint32(rows), M: uint32(a.Slots), XStride: uint32(xs),
		YStride: uint32(ys), YOffset: uint32(o.YOffset), Flags: flags, XDiv: uint32(a.XDiv)}, nil
}

// moeChunk sets p's expert range to chunk ch's and checks that the chunk
// holds whole experts.
func moeChunk(kernel string, w *gpu.Tensor, ch gpu.Chunk, p *matmulParams) error {
	rows := int(p.N)
	if ch.FirstRow%rows != 0 || ch.Rows%rows != 0 {
		return fmt.Errorf("ops: %s %q: chunk rows %d+%d split an expert of %d rows", kernel, w.Name, ch.FirstRow, ch.Rows, rows)
	}
	p.Row0, p.Experts = uint32(ch.FirstRow/rows), uint32(ch.Rows/rows)
	return nil
}

// HasMoEMatVec reports whether MoEMatVec takes experts of type t: the
// quantized types of the matvec families.
func HasMoEMatVec(t gguf.Type) bool { return HasMatVecNormed(t) }

// MoEMatVec appends y[s] = W_ids[s] · x[s / a.XDiv] for the a.Slots slots
// (act(gate) ⊙ up of the row with a.GLU), ids holding each slot's expert as
// a u32 word. Quantized experts only (HasMoEMatVec); each slot reads only
// its expert's rows, which suits a few slots (a decoded token's).
func MoEMatVec(c *gpu.Chain, w *gpu.Tensor, x, ids, y *gpu.Buffer, a MoEArgs) error {
	const kernel = "moe matvec"
	p, err := moeShape(kernel, w, x, y, a)
	if err != nil {
		return err
	}
	kern, ok := matmulKernelFor(w.Type)
	if !ok || !HasMoEMatVec(w.Type) {
		return fmt.Errorf("ops: %s %q: weight type %v has no expert matvec (quantized types only; use MoEMatMul)", kernel, w.Name, w.Type)
	}
	if a.Bias != nil {
		if err := checkBias(kernel, w, a.Bias, y); err != nil {
			return err
		}
		p.Flags |= matmulBias
	}
	return moeMatVecWith(c, w, kern, fitVecLaunch(c.Device(), moeVecLaunch(w.Cols)), x, ids, y, a, p)
}

// moeVecLaunch is MoEMatVec's launch shape for experts of k columns,
// from BenchmarkMoEMatVecLaunch on an H100 (docs/performance.md): x
// staged 2048 floats at a time, whose 8 KiB of workgroup memory keep more
// workgroups on an SM than the dense matvec's 4096 (Qwen3-30B-A3B's
// gate-up, k = 2048, 579 GB/s against 503; gpt-oss's, k = 2880 in two
// chunks, 576 against 505), and 64 rows of 4 lanes where a row is at most
// 1024 wide, so that a workgroup's staging serves more rows (Qwen3's
// down, k = 768: 246 GB/s against 147 at the dense matvec's 16 rows).
func moeVecLaunch(k int) matmulLaunch {
	l := matmulLaunch{wg: 256, rows: 16, tm: 1, xch: 2048}
	if k <= 1024 {
		l.rows = 64
	}
	return l
}

// moeMatVecWith is MoEMatVec with an explicit launch shape (a staged one:
// the entries need XCH > 0), so the tuning benchmark can try others; p is
// moeShape's.
func moeMatVecWith(c *gpu.Chain, w *gpu.Tensor, kern matmulKernel, launch matmulLaunch, x, ids, y *gpu.Buffer, a MoEArgs, p matmulParams) error {
	const kernel = "moe matvec"
	if a.Slots > 65535 {
		return fmt.Errorf("ops: %s %q: %d slots, over the 65535-workgroup grid limit of one workgroup row a slot (use MoEMatMul)", kernel, w.Name, a.Slots)
	}
	if err := needF32(kernel, "ids", ids, a.Slots); err != nil {
		return err
	}
	if ids == y {
		return fmt.Errorf("ops: %s %q: ids and y are the same buffer", kernel, w.Name)
	}
	if err := checkVecLaunch(c.Device(), w.Name, launch); err != nil {
		return err
	}
	spec := gpu.Spec(kern.family, "matvec_moe_"+kern.name, "WG", launch.wg, "ROWS", launch.rows, "TM", 1, "XCH", launch.xch, "UNROLL", max(launch.unroll, 1))
	gk, err := c.Device().Kernel(spec)
	if err != nil {
		return err
	}
	for _, ch := range w.Chunks {
		if err := moeChunk(kernel, w, ch, &p); err != nil {
			return err
		}
		grid := gpu.Grid(int(p.N), launch.rows)
		grid[2] = uint32(a.Slots)
		bias := a.Bias
		if bias == nil {
			bias = x // fills the slot; the kernel does not read it
		}
		if err := c.Dispatch(gk, p, grid, ch.Buf, x, y, ids, bias); err != nil {
			return err
		}
	}
	return nil
}

// MoEMatMul appends y[s] = W_e · x[s / a.XDiv] for every slot s of the
// groups MoEGroup made (e its expert), tile by tile, each expert's weights
// read once per tile of its slots. Any type of the tiled kernel; a.GLU and
// a.Bias are not taken (apply SwiGLUFused or GeGLUFused first, MoEAddBias
// after).
func MoEMatMul(c *gpu.Chain, w *gpu.Tensor, x, groups, y *gpu.Buffer, a MoEArgs) error {
	const kernel = "moe matmul"
	if a.GLU != nil || a.Bias != nil {
		return fmt.Errorf("ops: %s: the grouped product takes no fused GLU or bias (apply them apart)", kernel)
	}
	p, err := moeShape(kernel, w, x, y, a)
	if err != nil {
		return err
	}
	name, ok := matmulTiledTypes[w.Type]
	if !ok {
		return fmt.Errorf("ops: %s %q: weight type %v has no tiled kernel", kernel, w.Name, w.Type)
	}
	experts := w.Stack
	words := MoEGroupWords(a.Slots, experts)
	if err := needF32(kernel, "groups", groups, words); err != nil {
		return err
	}
	if groups == y {
		return fmt.Errorf("ops: %s %q: groups and y are the same buffer", kernel, w.Name)
	}
	l := tiledLaunchMain
	if err := l.check(c.Device().Limits); err != nil {
		return fmt.Errorf("ops: %s %q: %w", kernel, w.Name, err)
	}
	gk, err := c.Device().Kernel(gpu.Spec("matmul_tiled", "matmul_moe_"+name, l.consts()...))
	if err != nil {
		return err
	}
	// The most tiles MoEGroup can make; those past its count leave.
	tiles := (words - moeOrder - a.Slots) / 3
	if tiles > 65535 {
		return fmt.Errorf("ops: %s %q: %d slots need %d tiles, over the 65535-workgroup grid limit", kernel, w.Name, a.Slots, tiles)
	}
	for _, ch := range w.Chunks {
		if err := moeChunk(kernel, w, ch, &p); err != nil {
			return err
		}
		grid := gpu.Grid(int(p.N), l.cols())
		grid[2] = uint32(tiles)
		if err := c.Dispatch(gk, p, grid, ch.Buf, x, y, groups); err != nil {
			return err
		}
	}
	return nil
}

// MoECombineArgs shape MoECombine: Tokens rows of Dim floats, each the sum
// of its Used slots' rows weighted by the router, times Scale (0 means 1;
// expert_weights_scale); Accumulate adds the sum to out (the residual).
// Unweighted sums the slots' rows as they are (the weights buffer may be
// nil): a backward's gradients of the slots' shared input.
type MoECombineArgs struct {
	Tokens, Used, Dim      int
	Scale                  float32
	Accumulate, Unweighted bool
}

// moeCombineParams mirrors Params in shaders/moe_combine.wgsl.
type moeCombineParams struct {
	Tokens, Used, Dim, Flags uint32
	Scale                    float32
	_                        [3]uint32
}

// MoECombine appends out[t] (+)= scale · Σ_k weights[t, k] · y[t·Used + k]
// (rows of Dim floats; weights 1 with a.Unweighted), the slots summed in
// order.
func MoECombine(c *gpu.Chain, y, weights, out *gpu.Buffer, a MoECombineArgs) error {
	const kernel = "moe_combine"
	if a.Tokens <= 0 || a.Used <= 0 || a.Dim <= 0 {
		return fmt.Errorf("ops: %s: %d tokens, %d experts used, width %d must be positive", kernel, a.Tokens, a.Used, a.Dim)
	}
	if uint64(a.Tokens)*uint64(a.Used)*uint64(a.Dim) > math.MaxUint32 {
		return fmt.Errorf("ops: %s: %d tokens overflow the kernel's 32-bit index", kernel, a.Tokens)
	}
	if !(a.Scale >= 0) || math.IsInf(float64(a.Scale), 0) {
		return fmt.Errorf("ops: %s: scale %v must be finite and not negative", kernel, a.Scale)
	}
	if a.Unweighted && weights == nil {
		weights = y // fills the slot; the kernel does not read it
	}
	for _, o := range []operand{{"y", y, a.Tokens * a.Used * a.Dim}, {"weights", weights, a.Tokens * a.Used}, {"out", out, a.Tokens * a.Dim}} {
		if err := needF32(kernel, o.what, o.buf, o.n); err != nil {
			return err
		}
	}
	if out == y || out == weights {
		return fmt.Errorf("ops: %s: out %q must not be an input", kernel, out.Label())
	}
	p := moeCombineParams{Tokens: uint32(a.Tokens), Used: uint32(a.Used), Dim: uint32(a.Dim), Scale: a.Scale}
	if p.Scale == 0 {
		p.Scale = 1
	}
	if a.Accumulate {
		p.Flags |= 1
	}
	if a.Unweighted {
		p.Flags |= 2
	}
	return dispatch(c, gpu.Spec("moe_combine", kernel, "WG", wg), p, gpu.Grid(a.Tokens*a.Dim, wg), y, weights, out)
}

// moeBiasParams mirrors Params in shaders/moe_bias.wgsl.
type moeBiasParams struct {
	Slots, Width, Stride, Offset, Experts uint32
	_                                     [3]uint32
}

// MoEAddBias appends y[s·stride + offset + i] += bias[ids[s]·width + i]:
// each of the slots' rows of width floats gains its expert's row of the
// stacked biases (experts rows of width; gpt-oss's gate, up and down
// biases). stride 0 means width.
func MoEAddBias(c *gpu.Chain, bias, ids, y *gpu.Buffer, slots, experts, width, stride, offset int) error {
	const kernel = "moe_add_bias"
	if stride == 0 {
		stride = width
	}
	switch {
	case slots <= 0 || experts <= 0 || width <= 0:
		return fmt.Errorf("ops: %s: %d slots of %d experts' rows of %d must be positive", kernel, slots, experts, width)
	case stride < width || offset < 0:
		return fmt.Errorf("ops: %s: stride %d (at least the width %d) or offset %d is invalid", kernel, stride, width, offset)
	case uint64(slots-1)*uint64(stride)+uint64(offset)+uint64(width) > math.MaxUint32 || uint64(experts)*uint64(width) > math.MaxUint32:
		return fmt.Errorf("ops: %s: %d slots overflow the kernel's 32-bit index", kernel, slots)
	}
	for _, o := range []operand{{"bias", bias, experts * width}, {"ids", ids, slots}, {"y", y, (slots-1)*stride + offset + width}} {
		if err := needF32(kernel, o.what, o.buf, o.n); err != nil {
			return err
		}
	}
	if y == bias || y == ids {
		return fmt.Errorf("ops: %s: y %q must not be an input", kernel, y.Label())
	}
	p := moeBiasParams{Slots: uint32(slots), Width: uint32(width), Stride: uint32(stride), Offset: uint32(offset), Experts: uint32(experts)}
	return dispatch(c, gpu.Spec("moe_bias", kernel, "WG", wg), p, gpu.Grid(slots*width, wg), bias, ids, y)
}
