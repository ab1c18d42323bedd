package ops

// Quantized matrix products: y = W·x (decode) and Y = X·Wᵀ (prefill) with W a
// GGUF tensor dequantized inside the kernel, never expanded to f32 on the GPU.
//
// Contract every matmul kernel family follows (shaders/matmul_float.wgsl,
// shaders/matmul_legacy.wgsl, shaders/matmul_kquant.wgsl):
//
//   - Bindings: 0 `var<uniform> p: MatmulParams` (mirrors matmulParams below),
//     1 `var<storage, read> w: array<u32>` (one row chunk of the tensor, raw
//     GGUF bytes), 2 `var<storage, read> x: array<f32>`,
//     3 `var<storage, read_write> y: array<f32>`; the quantized families add
//     4, MatVecNormed's gain (x again for their other entries).
//   - Entry points `matvec_<type>` and `matmul_<type>`, type lowercase
//     (matvec_q4_0, matmul_q6_k); the quantized families add
//     `matvec_normed_<type>` (MatVecNormed) and `matvec_glu_<type>`
//     (MatVecGLU).
//   - Constants prepended by gpu.Spec: WG (invocations per workgroup), ROWS
//     (output rows per workgroup), TM (activation rows per workgroup; 1 for
//     matvec entries), XCH and UNROLL (a quantized matvec's x staging chunk
//     and units per lane iteration; shaders/matvec_common.wgsl). How a
//     family splits its threads among rows is its own choice, documented in
//     its WGSL.
//   - Grid: x (wrapped into y past 65535 by gpu.Grid) walks groups of ROWS
//     rows of the chunk; z walks tiles of TM activation rows (always 1 for
//     matvec). A kernel's row group is wid.x + wid.y * nwg.x; it must
//     bounds-check rows against p.n and activation rows against p.m.
//   - Element (j, r) of the result, r in [0, p.n) a row of this chunk, is
//     y[p.y_offset + j*p.y_stride + p.row0 + r]; activation row j starts at
//     x[j*p.x_stride]. With flags&1 (matmulAccumulate) the kernel adds to y
//     instead of overwriting it.
//
// The tiled prefill kernel (shaders/matmul_tiled.wgsl, engine/ops/
// matmul_tiled.go) keeps the bindings, parameters and output placement, with
// its own entries (matmul_tiled_<type>), constants and grid.
//
// The K-quants' launch shapes (Q2_K…Q6_K) are engine/ops/matmul_kquant.go's
// kquantKernel, stateless; matmulKernelFor consults the table here first.

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/gguf"
)

// matmulParams mirrors MatmulParams in the matmul WGSL families.
type matmulParams struct {
	K       uint32 // input features (columns of W)
	N       uint32 // rows of W in this chunk
	M       uint32 // activation rows (1 for matvec)
	Row0    uint32 // first output row of this chunk within the tensor
	XStride uint32 // floats between activation rows
	YStride uint32 // floats between output rows
	YOffset uint32 // float index in y of element (0, 0)
	Flags   uint32 // matmulAccumulate, matmulOnePlus, matmulGELU, matmulGLU
	Eps     float32
	Experts uint32 // moe entries: the experts of this chunk, from expert Row0
	XDiv    uint32 // moe entries: the expert slots that read one row of x
	_       uint32 // uniform blocks are whole 16-byte rows
}

// Flags of MatmulParams.flags: add to y; apply MatVecNormed's gain as 1 + g;
// the GLU's activation is GELU (else SiLU); MoEMatVec reads act(gate)·up;
// the GLU is gpt-oss's; a row's bias is added (MoEMatVec: its expert's).
const (
	matmulAccumulate = 1
	matmulOnePlus    = 2
	matmulGELU       = 4
	matmulGLU        = 8
	matmulOAI        = 16
	matmulBias       = 32
)

// matmulLaunch is the workgroup shape of one entry point.
type matmulLaunch struct {
	wg   int // invocations per workgroup (WG)
	rows int // output rows per workgroup (ROWS)
	tm   int // activation rows per workgroup (TM); 1 for matvec
	xch  int // quantized matvec: floats of x staged per pass (XCH); 0 reads x from global memory
	// unroll is how many units a quantized matvec lane decodes per loop
	// iteration (UNROLL): 2, or 0 or 1 for one.
	unroll int
}

// matmulKernel says where a weight type's kernels live and how to launch them.
type matmulKernel struct {
	family string       // shader family, e.g. "matmul_legacy"
	name   string       // entry suffix, e.g. "q4_0" for matvec_q4_0 / matmul_q4_0
	vec    matmulLaunch // matvec_<name>
	mat    matmulLaunch // matmul_<name>
}

// The float and legacy launch shapes.
//
// Float matvec and every prefill entry: all WG threads of a workgroup stride
// over the row length together and each keeps ROWS×TM partial sums, so WG
// must be a power of two of at least ROWS*TM. Measured on an H200 at
// 4096×4096 (BenchmarkMatmulLaunch): float decode takes 256 threads sharing
// each loaded slice of x among 8 rows (2.9 TB/s F16 against 2.55 with 4).
// Prefill takes an 8-row × 4-activation tile over 64 threads: 7.2 TFLOP/s
// Q4_0 at m=128 against 6.1 for 4×8 and 3.8 for 2×8, with 32 partial sums
// per thread in registers and the shared reduction at 64·32 floats = 8 KiB.
//
// Quantized matvec (vecLaunch, for the legacy types and the K-quants;
// shaders/matvec_common.wgsl): WG/ROWS lanes per row, a multiple of 4, each
// summing whole blocks, unroll of them per iteration; x read from global
// memory (xch 0) or staged in chunks of xch floats. BenchmarkMatVecLaunch
// swept 18 shapes on an H200 (docs/performance.md): 16 rows of 16 lanes
// staging 4096 floats of x at a time took the least time summed over a
// Llama 3 8B layer's projections in Q8_0 and Q4_0 and was within 3-4% of
// the best in Q4_K and Q6_K, against 1.3-2x longer for the same split
// reading x from global memory. fitVecLaunch shrinks the chunk on a device
// with less workgroup memory.
var (
	vecLaunch      = matmulLaunch{wg: 256, rows: 16, tm: 1, xch: 4096}
	floatVecLaunch = matmulLaunch{wg: 256, rows: 8, tm: 1}
	matLaunch      = matmulLaunch{wg: 64, rows: 8, tm: 4}
)

// matmulKernels is the float and legacy-quant table. Read only.
var matmulKernels = map[gguf.Type]matmulKernel{
	gguf.TypeF32:  {"matmul_float", "f32", floatVecLaunch, matLaunch},
	gguf.TypeF16:  {"matmul_float", "f16", floatVecLaunch, matLaunch},
	gguf.TypeBF16: {"matmul_float", "bf16", floatVecLaunch, matLaunch},
	gguf.TypeQ4_0: {"matmul_legacy", "q4_0", vecLaunch, matLaunch},
	gguf.TypeQ4_1: {"matmul_legacy", "q4_1", vecLaunch, matLaunch},
	gguf.TypeQ5_0: {"matmul_legacy", "q5_0", vecLaunch, matLaunch},
	gguf.TypeQ5_1: {"matmul_legacy", "q5_1", vecLaunch, matLaunch},
	gguf.TypeQ8_0: {"matmul_legacy", "q8_0", vecLaunch, matLaunch},
	// MXFP4 is a 32-weight block that reads like Q4_0 (17 bytes: an E8M0
	// scale, then Q4_0's nibbles), so it takes the legacy skeleton and shapes.
	gguf.TypeMXFP4: {"matmul_legacy", "mxfp4", vecLaunch, matLaunch},
}

// matmulKernelFor finds the kernels for weight type t.
func matmulKernelFor(t gguf.Type) (matmulKernel, bool) {
	if k, ok := matmulKernels[t]; ok {
		return k, true
	}
	return kquantKernel(t)
}

// MatmulTypes lists the weight types MatVec and MatMul support, in type id
// order (benchmarks and the model loader use it).
func MatmulTypes() []gguf.Type {
	var out []gguf.Type
	for t := gguf.Type(0); t < 64; t++ {
		if _, ok := matmulKernelFor(t); ok {
			out = append(out, t)
		}
	}
	return out
}

// MatmulOptions place the result of MatMulWith inside a bigger buffer.
// Zero values mean the dense default.
type MatmulOptions struct {
	// Accumulate adds W·x to y instead of overwriting it (residual fusion).
	Accumulate bool
	// YOffset is the float index in y where element (0, 0) goes: a fused
	// QKV output can be split by dispatching three tensors at three offsets.
	YOffset int
	// YStride is the float distance between output rows; 0 means W.Rows.
	YStride int
	// XStride is the float distance between activation rows; 0 means W.Cols.
	XStride int
	// Bias, when set, adds one float a row of W to its output (a
	// projection's bias, added after the row's sum and before Accumulate's
	// add): a decoded token's product (m = 1) on the quantized matvec
	// families and MatVecQ8, one dispatch instead of a product and an
	// AddBias. Other products refuse it.
	Bias *gpu.Buffer
}

// checkBias says why bias cannot be w's bias over y (a projection's, or a
// stack's, one float a row of every expert): it must hold a float for each
// of w's rows and not be y.
func checkBias(kernel string, w *gpu.Tensor, bias, y *gpu.Buffer) error {
	if err := needF32(kernel+" "+w.Name, "bias", bias, w.Rows); err != nil {
		return err
	}
	if bias == y {
		return fmt.Errorf("ops: %s %q: bias and y are the same buffer %q", kernel, w.Name, y.Label())
	}
	return nil
}

// MatVec appends y[0:n] = W·x[0:k] for a k-column, n-row weight W.
func MatVec(c *gpu.Chain, w *gpu.Tensor, x, y *gpu.Buffer) error {
	return MatMulWith(c, w, x, y, 1, MatmulOptions{})
}

// MatMul appends Y[m×n] = X[m×k]·Wᵀ, X and Y row-major and dense.
func MatMul(c *gpu.Chain, w *gpu.Tensor, x, y *gpu.Buffer, m int) error {
	return MatMulWith(c, w, x, y, m, MatmulOptions{})
}

// MatMulWith is MatMul with the output placement of o. m == 1 takes the
// decode (matvec) kernel, m from matmulTiledMinRows the tiled prefill kernel
// (shaders/matmul_tiled.wgsl). x and y must be different buffers.
func MatMulWith(c *gpu.Chain, w *gpu.Tensor, x, y *gpu.Buffer, m int, o MatmulOptions) error {
	if w == nil {
		return fmt.Errorf("ops: matmul: weight tensor is nil")
	}
	kern, ok := matmulKernelFor(w.Type)
	if !ok {
		return fmt.Errorf("ops: matmul %q: weight type %v has no GPU matmul kernel", w.Name, w.Type)
	}
	if _, tiled := matmulTiledTypes[w.Type]; tiled && m >= matmulTiledMinRows {
		if l, ok := matmulTiledLaunchFor(c.Device().Limits, m); ok {
			return matmulTiledWith(c, w, x, y, m, o, l)
		}
	}
	return matmulWith(c, w, kern, x, y, m, o)
}

// MatVecNormed appends y = W·(g ⊙ x / sqrt(mean(x²) + eps)): RMSNorm of the
// k floats of x with gain g (1 + g with a.OnePlus) fused into the decode
// matvec, so a projection after a norm needs no norm dispatch and no
// normalised copy of x. a must describe one row of W.Cols floats. Each
// workgroup recomputes mean(x²) from x and normalises x as it stages it.
// Quantized weight types only; y is placed as o says (o.XStride is unused).
func MatVecNormed(c *gpu.Chain, w *gpu.Tensor, x, g, y *gpu.Buffer, a NormArgs, o MatmulOptions) error {
	if w == nil {
		return fmt.Errorf("ops: matvec normed: weight tensor is nil")
	}
	kern, ok := matmulKernelFor(w.Type)
	if !ok || kern.family == "matmul_float" {
		return fmt.Errorf("ops: matvec normed %q: weight type %v has no fused-norm kernel (quantized types only; use RMSNorm then MatVec)", w.Name, w.Type)
	}
	return matmulDispatch(c, w, kern, x, y, 1, o, &vecFusion{g: g, norm: a, launch: stagedLaunch(kern)})
}

// HasMatVecNormed reports whether MatVecNormed takes weights of type t.
func HasMatVecNormed(t gguf.Type) bool {
	kern, ok := matmulKernelFor(t)
	return ok && kern.family != "matmul_float"
}

// HasMatVecBias reports whether a decoded token's MatMulWith takes
// MatmulOptions.Bias for weights of type t (MatVecQ8 takes it for all of
// its types).
func HasMatVecBias(t gguf.Type) bool { return HasMatVecNormed(t) }

// GLUArgs describe the gated linear unit MatVecGLU applies to its input.
type GLUArgs struct {
	// FF is the width of gate and of up: the input holds [gate | up], 2·FF
	// floats, and the weight has FF columns.
	FF int
	// GELU selects gelu(gate)·up with GELU's tanh approximation (GeGLU,
	// Gemma) instead of silu(gate)·up (SwiGLU, Llama).
	GELU bool
	// OAI selects gpt-oss's gated unit (SwiGLUOAIFused) instead of either.
	OAI bool
}

// MatVecGLU appends y = W·(act(gate) ⊙ up) for gateUp = [gate | up], one
// token's row of a merged gate-up projection: the activation of
// SwiGLUFused/GeGLUFused fused into the decode matvec of the down
// projection, so the feed-forward needs no GLU dispatch and no activated
// copy in memory. Each workgroup applies the activation as it stages x.
// Quantized weight types only; y is placed as o says (o.XStride is unused).
func MatVecGLU(c *gpu.Chain, w *gpu.Tensor, gateUp, y *gpu.Buffer, a GLUArgs, o MatmulOptions) error {
	if w == nil {
		return fmt.Errorf("ops: matvec glu: weight tensor is nil")
	}
	kern, ok := matmulKernelFor(w.Type)
	if !ok || kern.family == "matmul_float" {
		return fmt.Errorf("ops: matvec glu %q: weight type %v has no fused-GLU kernel (quantized types only; use SwiGLUFused or GeGLUFused then MatVec)", w.Name, w.Type)
	}
	if a.FF != w.Cols {
		return fmt.Errorf("ops: matvec glu %q: ff %d, want the weight's %d columns", w.Name, a.FF, w.Cols)
	}
	return matmulDispatch(c, w, kern, gateUp, y, 1, o, &vecFusion{glu: &a, launch: stagedLaunch(kern)})
}

// HasMatVecGLU reports whether MatVecGLU takes weights of type t.
func HasMatVecGLU(t gguf.Type) bool { return HasMatVecNormed(t) }

// stagedLaunch is kern's matvec shape with a staging chunk, which the fused
// entries need: they write the transformed x somewhere.
func stagedLaunch(kern matmulKernel) matmulLaunch {
	l := kern.vec
	if l.xch == 0 {
		l.xch = stagedXCH
	}
	return l
}

// stagedXCH is a fused matvec's staging chunk when the table reads x from
// global memory: 2048 floats (8 KiB) fit WebGPU's guaranteed 16 KiB beside
// the partial sums.
const stagedXCH = 2048

// vecFusion is what a fused matvec computes from x as it stages it: the
// RMSNorm of MatVecNormed (glu nil) or the gated activation of MatVecGLU.
type vecFusion struct {
	g      *gpu.Buffer // the norm's gain
	norm   NormArgs
	glu    *GLUArgs
	launch matmulLaunch // the table's shape with a staging chunk
}

// matmulWith dispatches with an explicit kernel table entry, so tuning
// benchmarks can try other launch shapes.
func matmulWith(c *gpu.Chain, w *gpu.Tensor, kern matmulKernel, x, y *gpu.Buffer, m int, o MatmulOptions) error {
	return matmulDispatch(c, w, kern, x, y, m, o, nil)
}

// matmulDispatch is matmulWith with an optional fused norm or GLU (m = 1
// only).
func matmulDispatch(c *gpu.Chain, w *gpu.Tensor, kern matmulKernel, x, y *gpu.Buffer, m int, o MatmulOptions, fu *vecFusion) error {
	k, n := w.Cols, w.Rows
	if m < 1 {
		return fmt.Errorf("ops: matmul %q: m = %d activation rows, want at least 1", w.Name, m)
	}
	xs, ys := o.XStride, o.YStride
	if xs == 0 {
		xs = k
	}
	if ys == 0 {
		ys = n
	}
	if xs < k || ys < 0 || o.YOffset < 0 {
		return fmt.Errorf("ops: matmul %q: x stride %d (< k=%d?), y stride %d or y offset %d is invalid", w.Name, xs, k, ys, o.YOffset)
	}
	if m > 1 && ys < n {
		return fmt.Errorf("ops: matmul %q: y stride %d is less than n=%d, output rows would overlap", w.Name, ys, n)
	}
	xlen := (m-1)*xs + k
	if fu != nil && fu.glu != nil {
		xlen = 2 * k // [gate | up]
	}
	if err := needF32("matmul "+w.Name, "x", x, xlen); err != nil {
		return err
	}
	if err := needF32("matmul "+w.Name, "y", y, o.YOffset+(m-1)*ys+n); err != nil {
		return err
	}
	if x == y {
		return fmt.Errorf("ops: matmul %q: x and y are the same buffer %q", w.Name, x.Label())
	}
	// Every index the kernel forms must fit in u32.
	if uint64(o.YOffset)+uint64(m-1)*uint64(ys)+uint64(n) > 1<<32-1 || uint64(m-1)*uint64(xs)+uint64(k) > 1<<32-1 {
		return fmt.Errorf("ops: matmul %q: m=%d rows overflow 32-bit indexing", w.Name, m)
	}
	if err := checkChunks("matmul", w); err != nil {
		return err
	}

	entry, launch := "matvec_"+kern.name, kern.vec
	if m > 1 {
		entry, launch = "matmul_"+kern.name, kern.mat
	}
	bufs := []*gpu.Buffer{nil, x, y}
	var flags uint32
	var eps float32
	switch {
	case fu != nil && fu.glu != nil:
		entry, launch = "matvec_glu_"+kern.name, fu.launch
		if launch.xch <= 0 {
			return fmt.Errorf("ops: matvec glu %q: launch must stage x (xch > 0)", w.Name)
		}
		if fu.glu.GELU {
			flags |= matmulGELU
		}
		if fu.glu.OAI {
			flags |= matmulOAI
		}
		bufs = append(bufs, x)
	case fu != nil:
		entry, launch = "matvec_normed_"+kern.name, fu.launch
		a := fu.norm
		if a.Rows != 1 || a.Dim != k {
			return fmt.Errorf("ops: matvec normed %q: norm shape %dx%d, want 1x%d (one row of the weight's columns)", w.Name, a.Rows, a.Dim, k)
		}
		if !(a.Eps >= 0) || math.IsInf(float64(a.Eps), 0) {
			return fmt.Errorf("ops: matvec normed %q: eps %v must be finite and >= 0", w.Name, a.Eps)
		}
		if err := needF32("matvec normed "+w.Name, "gain", fu.g, k); err != nil {
			return err
		}
		if fu.g == y {
			return fmt.Errorf("ops: matvec normed %q: gain and y are the same buffer %q", w.Name, y.Label())
		}
		if launch.xch <= 0 {
			return fmt.Errorf("ops: matvec normed %q: launch must stage x (xch > 0)", w.Name)
		}
		if a.OnePlus {
			flags |= matmulOnePlus
		}
		eps = a.Eps
		bufs = append(bufs, fu.g)
	case kern.family != "matmul_float":
		// The quantized families declare the gain at binding 4 for their
		// matvec_normed_ entries, and a layout spans the whole family: the
		// other entries get x there, which they never read.
		bufs = append(bufs, x)
	}
	if o.Bias != nil {
		if m != 1 || kern.family == "matmul_float" {
			return fmt.Errorf("ops: matmul %q: a fused bias is for a decoded token's quantized product (m = %d, %v weights); add it apart (AddBias)", w.Name, m, w.Type)
		}
		if err := checkBias("matvec", w, o.Bias, y); err != nil {
			return err
		}
		flags |= matmulBias
	}
	if kern.family != "matmul_float" {
		// Binding 5 is the rows' biases (flags bit 5); x fills it when
		// there are none, as the kernel then reads nothing there.
		bias := o.Bias
		if bias == nil {
			bias = x
		}
		bufs = append(bufs, bias)
	}
	if m == 1 && kern.family != "matmul_float" {
		launch = fitVecLaunch(c.Device(), launch)
		if err := checkVecLaunch(c.Device(), w.Name, launch); err != nil {
			return err
		}
	}
	// TM is 1 for the matvec entry so both entries of a family compile with
	// consistent shared-memory sizes.
	spec := gpu.Spec(kern.family, entry, "WG", launch.wg, "ROWS", launch.rows, "TM", launch.tm, "XCH", launch.xch, "UNROLL", max(launch.unroll, 1))
	gk, err := c.Device().Kernel(spec)
	if err != nil {
		return err
	}
	if o.Accumulate {
		flags |= matmulAccumulate
	}
	tiles := (m + launch.tm - 1) / launch.tm
	if tiles > 65535 {
		return fmt.Errorf("ops: matmul %q: m=%d needs %d activation tiles, over the 65535-workgroup grid limit", w.Name, m, tiles)
	}
	for _, ch := range w.Chunks {
		params := matmulParams{
			K: uint32(k), N: uint32(ch.Rows), M: uint32(m), Row0: uint32(ch.FirstRow),
			XStride: uint32(xs), YStride: uint32(ys), YOffset: uint32(o.YOffset), Flags: flags, Eps: eps,
		}
		grid := gpu.Grid(ch.Rows, launch.rows)
		grid[2] = uint32(tiles)
		bufs[0] = ch.Buf
		if err := c.Dispatch(gk, params, grid, bufs...); err != nil {
			return err
		}
	}
	return nil
}

// fitVecLaunch halves l's staging chunk until it fits d's workgroup
// memory: the table's 4096-float chunk needs 17 KiB, a device granting
// only WebGPU's guaranteed 16 KiB runs 2048. A shape that does not stage x
// (xch 0), or whose chunk cannot be halved to a multiple of 256, is
// returned as it is for checkVecLaunch to judge.
func fitVecLaunch(d *gpu.Device, l matmulLaunch) matmulLaunch {
	for l.xch%512 == 0 && l.xch > 0 && checkVecLaunch(d, "", l) != nil {
		l.xch /= 2 // still a multiple of 256, as the kernel needs
	}
	return l
}

// checkVecLaunch rejects a quantized matvec shape the skeleton in
// shaders/matvec_common.wgsl cannot run: the lanes of a row must be a whole
// multiple of 4 (their sums are read back as vec4s), a staged chunk whole
// K-quant super-blocks, and the staging buffer plus the WG partial sums must
// fit the device's workgroup memory.
func checkVecLaunch(d *gpu.Device, name string, l matmulLaunch) error {
	if l.rows < 1 || l.wg%l.rows != 0 || (l.wg/l.rows)%4 != 0 || l.tm != 1 {
		return fmt.Errorf("ops: matvec %q: launch of %d invocations, %d rows, tm %d: want tm 1 and a multiple of 4 lanes per row", name, l.wg, l.rows, l.tm)
	}
	if l.unroll < 0 || l.unroll > 2 {
		return fmt.Errorf("ops: matvec %q: unroll %d, want 1 or 2", name, l.unroll)
	}
	if l.xch < 0 || l.xch%256 != 0 {
		return fmt.Errorf("ops: matvec %q: x chunk of %d floats is not a multiple of 256", name, l.xch)
	}
	if need := 4 * (l.xch + 4 + l.wg); need > int(d.Limits.MaxComputeWorkgroupStorageSize) {
		return fmt.Errorf("ops: matvec %q: x chunk of %d floats needs %d bytes of workgroup memory, the device has %d", name, l.xch, need, d.Limits.MaxComputeWorkgroupStorageSize)
	}
	return nil
}

// checkChunks verifies that a tensor's chunks tile its rows exactly, so a
// hand-built or half-released tensor never reaches a kernel.
func checkChunks(kernel string, w *gpu.Tensor) error {
	rowBytes := w.RowBytes()
	if rowBytes == 0 {
		return fmt.Errorf("ops: %s %q: %v tensor with %d columns has no row size", kernel, w.Name, w.Type, w.Cols)
	}
	next := 0
	for i, ch := range w.Chunks {
		if ch.FirstRow != next || ch.Rows <= 0 || ch.Buf == nil {
			return fmt.Errorf("ops: %s %q: chunk %d (rows %d+%d) does not continue at row %d", kernel, w.Name, i, ch.FirstRow, ch.Rows, next)
		}
		if ch.Buf.Size() < uint64(ch.Rows)*uint64(rowBytes) {
			return fmt.Errorf("ops: %s %q: chunk %d buffer %q holds %d bytes, need %d", kernel, w.Name, i, ch.Buf.Label(), ch.Buf.Size(), ch.Rows*rowBytes)
		}
		next += ch.Rows
	}
	if next != w.Rows {
		return fmt.Errorf("ops: %s %q: chunks cover %d of %d rows (released tensor?)", kernel, w.Name, next, w.Rows)
	}
	return nil
}
