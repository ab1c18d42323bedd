package ops

import (
	"fmt"
	"math"
	"os"
	"strconv"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/gguf"
)

// Decode products on 8-bit activations (shaders/quantize_q8.wgsl and
// shaders/matvec_q8.wgsl): QuantizeQ8 (or its normed and GLU forms) writes
// one token's activations as blocks of 32 levels with a scale, as ggml's
// q8_1 does, and MatVecQ8 multiplies Q4_K, Q6_K or Q8_0 weights with them in
// integer arithmetic: four products an instruction with dot4I8Packed where
// the device's compiler takes it (Q8PackedDot), else two to a u32 multiply.
// Both give the same result to the bit. The result is ggml's
// quantized-activation product, not the f32 one of MatVec: each activation
// moves by up to half its block's step, max|x|/254.

// Q8Words is the size in u32 words of k activations quantized by
// QuantizeQ8: k/2 words of levels, k/32 scales and k/16 half-block sums.
func Q8Words(k int) int { return k/2 + k/32 + k/16 }

// Q8RowWords is how far apart, in u32 words, the rows of several tokens'
// quantized activations lie: Q8Words rounded up to whole vec4s, which the
// matvec reads. rows rows take Q8Bytes(k, rows) bytes.
func Q8RowWords(k int) int { return (Q8Words(k) + 3) &^ 3 }

// Q8Bytes is the size in bytes of rows rows of k quantized activations.
func Q8Bytes(k, rows int) uint64 { return 4 * uint64((rows-1)*Q8RowWords(k)+Q8Words(k)) }

// MaxQ8Rows is the most activation rows (a batched decode's tokens) one
// MatVecQ8 multiplies, each weight read once for all of them.
const MaxQ8Rows = 8

// HasMatVecQ8 reports whether MatVecQ8 takes weights of type t.
func HasMatVecQ8(t gguf.Type) bool {
	_, ok := matvecQ8Entries[t]
	return ok
}

var matvecQ8Entries = map[gguf.Type]string{
	gguf.TypeQ4_K: "matvec_q8_q4_k",
	gguf.TypeQ6_K: "matvec_q8_q6_k",
	gguf.TypeQ8_0: "matvec_q8_q8_0",
}

// Q8PackedDot lets the integer products use dot4I8Packed where the
// device's compiler takes it (gpu.ShaderLanguage.PackedDot), with the
// activations packed four to a word; else, or with HEARTH_Q8_DOT=swar,
// they take two products to a u32 multiply (SWAR). A compiler may emulate
// the instruction where the hardware lacks it (Metal's has no such
// instruction), and there SWAR can be the faster; the two agree to the
// bit, so the choice is speed alone. Tests set it directly; it must not
// change between a quantizer and the product that reads its output.
var Q8PackedDot = os.Getenv("HEARTH_Q8_DOT") != "swar"

// Q8Packed reports whether d's integer products take dot4I8Packed (and its
// quantizers pack the activations for it).
func Q8Packed(d *gpu.Device) bool { return Q8PackedDot && d.Language.PackedDot }

// q8Dot is the DOT constant of quantize_q8 and matvec_q8 on d.
func q8Dot(d *gpu.Device) int {
	if Q8Packed(d) {
		return 1
	}
	return 0
}

// q8Params mirrors Q8Params in shaders/quantize_q8.wgsl.
type q8Params struct {
	K     uint32
	Flags uint32
	Eps   float32
	XRow  uint32 // vec4s from one row of x to the next
}

// quantizeQ8WG is the quantizers' workgroup: 8 invocations per block of
// 32, so a 4096-wide row is 4 workgroups.
const quantizeQ8WG = 256

// QuantizeQ8 appends xq = rows rows of k floats of x quantized (k a
// multiple of 32; each row's Q8Words(k) words Q8RowWords(k) apart in xq).
func QuantizeQ8(c *gpu.Chain, x, xq *gpu.Buffer, k, rows int) error {
	if err := checkQ8("quantize q8", x, k, k, rows, xq); err != nil {
		return err
	}
	return dispatchQ8(c, "quantize_q8", rows, q8Params{K: uint32(k), XRow: uint32(k / 4)}, x, x, xq)
}

// QuantizeQ8Normed appends xq = RMSNorm(x) with gain g quantized, for
// a.Rows rows: the normalised rows are never written as floats.
func QuantizeQ8Normed(c *gpu.Chain, x, g, xq *gpu.Buffer, a NormArgs) error {
	flags, err := q8NormFlags("quantize q8 normed", a)
	if err != nil {
		return err
	}
	if err := checkQ8("quantize q8 normed", x, a.Dim, a.Dim, a.Rows, xq); err != nil {
		return err
	}
	if err := needF32("quantize q8 normed", "gain", g, a.Dim); err != nil {
		return err
	}
	return dispatchQ8(c, "quantize_q8_normed", a.Rows, q8Params{K: uint32(a.Dim), Flags: flags, Eps: a.Eps, XRow: uint32(a.Dim / 4)}, x, g, xq)
}

// QuantizeQ8GLU appends xq = act(gate) ⊙ up quantized, for rows rows of
// gateUp = [gate | up] of 2·a.FF floats each: the activations a down
// projection reads.
func QuantizeQ8GLU(c *gpu.Chain, gateUp, xq *gpu.Buffer, a GLUArgs, rows int) error {
	if err := checkQ8("quantize q8 glu", gateUp, a.FF, 2*a.FF, rows, xq); err != nil {
		return err
	}
	flags, err := q8GLUFlags("quantize q8 glu", a)
	if err != nil {
		return err
	}
	return dispatchQ8(c, "quantize_q8_glu", rows, q8Params{K: uint32(a.FF), Flags: flags, XRow: uint32(a.FF / 2)}, gateUp, gateUp, xq)
}

// q8NormFlags checks a norm's eps and gives its gain's flag (1 + g), for
// the normed quantizer and the products that norm and quantize their own
// input alike.
func q8NormFlags(kernel string, a NormArgs) (uint32, error) {
	if !(a.Eps >= 0) || math.IsInf(float64(a.Eps), 0) {
		return 0, fmt.Errorf("ops: %s: eps %v must be finite and >= 0", kernel, a.Eps)
	}
	if a.OnePlus {
		return matmulOnePlus, nil
	}
	return 0, nil
}

// q8GLUFlags refuses gpt-oss's gated unit, which neither the quantizer nor
// a product applies, and gives GELU's flag.
func q8GLUFlags(kernel string, a GLUArgs) (uint32, error) {
	if a.OAI {
		return 0, fmt.Errorf("ops: %s: gpt-oss's gated unit is not fused into the quantizer (apply SwiGLUOAIFused first)", kernel)
	}
	if a.GELU {
		return matmulGELU, nil
	}
	return 0, nil
}

// checkQ8 checks a quantizer's rows of k values, read from rows of xlen
// floats of x.
func checkQ8(kernel string, x *gpu.Buffer, k, xlen, rows int, xq *gpu.Buffer) error {
	if k <= 0 || k%32 != 0 {
		return fmt.Errorf("ops: %s: k = %d, want a positive multiple of 32 (whole blocks)", kernel, k)
	}
	if rows < 1 || rows > 65535 {
		return fmt.Errorf("ops: %s: %d rows, want 1 to 65535 (a grid dimension)", kernel, rows)
	}
	if err := needF32(kernel, "x", x, rows*xlen); err != nil {
		return err
	}
	if err := needF32(kernel, "xq", xq, int(Q8Bytes(k, rows)/4)); err != nil {
		return err
	}
	if x == xq {
		return fmt.Errorf("ops: %s: x and xq are the same buffer %q", kernel, x.Label())
	}
	return nil
}

// dispatchQ8 quantizes rows rows of params.K values: workgroups along each
// row, one z per row.
func dispatchQ8(c *gpu.Chain, entry string, rows int, params q8Params, x, g, xq *gpu.Buffer) error {
	grid := gpu.Grid(int(params.K)/4, quantizeQ8WG)
	grid[2] = uint32(rows)
	return dispatch(c, gpu.Spec("quantize_q8", entry, "WG", quantizeQ8WG, "DOT", q8Dot(c.Device())), params, grid, x, g, xq)
}

// matvecQ8Params mirrors MatvecQ8Params in shaders/matvec_q8.wgsl.
type matvecQ8Params struct {
	K, N, Row0, YOffset, Flags uint32
	YStride, XRow              uint32
	Eps                        float32
}

// The values of matvec_q8's IN: where a dispatch's activations come from.
const (
	q8InQuantized = iota // xq, written by a quantizer beforehand
	q8InPlain            // a row of f32 x, quantized by each workgroup
	q8InNormed           // RMSNorm(x) with a gain, quantized by each workgroup
	q8InGLU              // act(gate) ⊙ up of x = [gate | up], quantized by each workgroup
)

// q8Source is a MatVecQ8 dispatch's activations: xq, or (in > 0) the f32
// row x, with the norm's gain g and eps or the GLU's flags.
type q8Source struct {
	in    int
	xq    *gpu.Buffer
	x, g  *gpu.Buffer
	flags uint32
	eps   float32
}

// matvecQ8Launch is a workgroup of wg invocations serving rows weight rows,
// wg/rows lanes each.
type matvecQ8Launch struct{ wg, rows int }

// q8Launch is MatVecQ8's shape: 32 lanes a row, so a lane of a 4096-wide
// row walks 4 of its 128 parts. On an H200 (BenchmarkMatVecQ8, Llama 3 8B
// shapes) 8 rows a workgroup read Q4_K gate|up at 1252 GB/s, down at 1000,
// q|k|v at 706 and o at 524, against 1178, 794, 653 and 563 for 16 rows
// and less again for 32. Q6_K was mixed: down 1163 against 1006, but
// q|k|v, o and gate|up 5-15% slower than at 16 rows; in a Q4_K_M file
// Q6_K is mostly the down projection of half the layers, hence 8 for all.
// HEARTH_Q8_MATVEC_ROWS=r (1 to 256, a power of two) serves r rows a
// workgroup instead, so that a lease can measure the shape under
// dot4I8Packed in a whole token without a rebuild; a value that does not
// parse is MatVecQ8's error (q8RowsEnvErr).
var q8Launch, q8RowsEnvErr = q8RowsFromEnv(os.Getenv("HEARTH_Q8_MATVEC_ROWS"), matvecQ8Launch{wg: 256, rows: 8})

// q8RowsFromEnv is def with HEARTH_Q8_MATVEC_ROWS's rows s; "" is def.
func q8RowsFromEnv(s string, def matvecQ8Launch) (matvecQ8Launch, error) {
	if s == "" {
		return def, nil
	}
	r, err := strconv.Atoi(s)
	if err != nil || r < 1 || r > def.wg || r&(r-1) != 0 {
		return def, fmt.Errorf("HEARTH_Q8_MATVEC_ROWS=%q: want a power of two from 1 to %d (%d is the default)", s, def.wg, def.rows)
	}
	return matvecQ8Launch{wg: def.wg, rows: r}, nil
}

// MatVecQ8 appends y = W·x for Q4_K, Q6_K or Q8_0 weights W (k columns,
// whole blocks) and m rows of x (1 to MaxQ8Rows: a batched decode's
// tokens) quantized by QuantizeQ8 into xq, row j's outputs placed at
// o.YOffset + j·o.YStride (o.YStride 0: W's rows), plus o.Bias when set.
// Each weight is read once for all m rows, and each row's result is the
// one it gets alone. o.XStride is unused.
func MatVecQ8(c *gpu.Chain, w *gpu.Tensor, xq, y *gpu.Buffer, m int, o MatmulOptions) error {
	return matvecQ8With(c, w, xq, y, m, o, q8Launch)
}

func matvecQ8With(c *gpu.Chain, w *gpu.Tensor, xq, y *gpu.Buffer, m int, o MatmulOptions, l matvecQ8Launch) error {
	return matvecQ8Dispatch(c, w, q8Source{xq: xq}, y, m, o, l)
}

// MatMulQ8Of appends Y = X·Wᵀ for Q4_K, Q6_K or Q8_0 weights W and m rows
// of f32 activations x (W.Cols floats each, dense), quantized as QuantizeQ8
// quantizes them: for one row, by every workgroup of the product into its
// own memory where Q8Fuses allows it (one dispatch instead of two, the
// same result to the bit); else by QuantizeQ8 into xq first (Q8Bytes(W.Cols,
// m) bytes, unused by a fused product), then MatMulQ8. o is MatMulQ8's.
func MatMulQ8Of(c *gpu.Chain, w *gpu.Tensor, x, xq, y *gpu.Buffer, m int, o MatmulOptions) error {
	if w == nil {
		return fmt.Errorf("ops: matmul q8: weight tensor is nil")
	}
	if Q8Fuses(c.Device(), w, m) {
		return matvecQ8OfFused(c, w, x, y, o)
	}
	if err := QuantizeQ8(c, x, xq, w.Cols, m); err != nil {
		return err
	}
	return MatMulQ8(c, w, xq, y, m, o)
}

// MatMulQ8Normed is MatMulQ8Of of RMSNorm(x) with gain g, for a.Rows rows
// of a.Dim = W.Cols floats (QuantizeQ8Normed's arithmetic).
func MatMulQ8Normed(c *gpu.Chain, w *gpu.Tensor, x, g, xq, y *gpu.Buffer, a NormArgs, o MatmulOptions) error {
	if w == nil {
		return fmt.Errorf("ops: matmul q8 normed: weight tensor is nil")
	}
	if a.Dim != w.Cols {
		return fmt.Errorf("ops: matmul q8 normed %q: rows of %d floats, want the weight's %d columns", w.Name, a.Dim, w.Cols)
	}
	if Q8Fuses(c.Device(), w, a.Rows) {
		return matvecQ8NormedFused(c, w, x, g, y, a, o)
	}
	if err := QuantizeQ8Normed(c, x, g, xq, a); err != nil {
		return err
	}
	return MatMulQ8(c, w, xq, y, a.Rows, o)
}

// MatMulQ8GLU is MatMulQ8Of of act(gate) ⊙ up, for m rows of gateUp =
// [gate | up] of 2·a.FF floats (QuantizeQ8GLU's arithmetic); W has a.FF
// columns.
func MatMulQ8GLU(c *gpu.Chain, w *gpu.Tensor, gateUp, xq, y *gpu.Buffer, a GLUArgs, m int, o MatmulOptions) error {
	if w == nil {
		return fmt.Errorf("ops: matmul q8 glu: weight tensor is nil")
	}
	if a.FF != w.Cols {
		return fmt.Errorf("ops: matmul q8 glu %q: gate and up of %d floats, want the weight's %d columns", w.Name, a.FF, w.Cols)
	}
	if Q8Fuses(c.Device(), w, m) {
		return matvecQ8GLUFused(c, w, gateUp, y, a, o)
	}
	if err := QuantizeQ8GLU(c, gateUp, xq, a, m); err != nil {
		return err
	}
	return MatMulQ8(c, w, xq, y, m, o)
}

func matvecQ8OfFused(c *gpu.Chain, w *gpu.Tensor, x, y *gpu.Buffer, o MatmulOptions) error {
	if err := needF32("matvec q8 "+w.Name, "x", x, w.Cols); err != nil {
		return err
	}
	return matvecQ8Dispatch(c, w, q8Source{in: q8InPlain, x: x, g: x}, y, 1, o, q8Launch)
}

func matvecQ8NormedFused(c *gpu.Chain, w *gpu.Tensor, x, g, y *gpu.Buffer, a NormArgs, o MatmulOptions) error {
	flags, err := q8NormFlags(fmt.Sprintf("matvec q8 normed %q", w.Name), a)
	if err != nil {
		return err
	}
	if err := needF32("matvec q8 normed "+w.Name, "x", x, w.Cols); err != nil {
		return err
	}
	if err := needF32("matvec q8 normed "+w.Name, "gain", g, w.Cols); err != nil {
		return err
	}
	return matvecQ8Dispatch(c, w, q8Source{in: q8InNormed, x: x, g: g, flags: flags, eps: a.Eps}, y, 1, o, q8Launch)
}

func matvecQ8GLUFused(c *gpu.Chain, w *gpu.Tensor, gateUp, y *gpu.Buffer, a GLUArgs, o MatmulOptions) error {
	flags, err := q8GLUFlags(fmt.Sprintf("matvec q8 glu %q", w.Name), a)
	if err != nil {
		return err
	}
	if err := needF32("matvec q8 glu "+w.Name, "gate and up", gateUp, 2*w.Cols); err != nil {
		return err
	}
	return matvecQ8Dispatch(c, w, q8Source{in: q8InGLU, x: gateUp, g: gateUp, flags: flags}, y, 1, o, q8Launch)
}

// Q8FuseMaxWorkgroups bounds the products that quantize their own input.
// Every workgroup of such a product reads the whole f32 row and quantizes
// it, work that grows with the workgroups where the dispatch it saves does
// not: a launch of one wave trades a few microseconds of prologue for a
// dispatch and its barrier, one of several waves pays the prologue in
// each. On an H100 fusing up to 4096 workgroups lost (8B Q4_K_M 82
// against 131 tokens/s; docs/performance.md, "Products that quantize
// their own input"), so the default is 0: no product fuses.
// HEARTH_Q8_FUSE_WORKGROUPS=N lets products of up to N workgroups fuse
// (a value that is not a whole number counts as 0), so that one binary
// measures both; tests set it directly.
var Q8FuseMaxWorkgroups = q8FuseFromEnv()

func q8FuseFromEnv() int {
	n, err := strconv.Atoi(os.Getenv("HEARTH_Q8_FUSE_WORKGROUPS"))
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// Q8Fuses reports whether a product of W with m activation rows quantizes
// its own input: one row, W a type MatVecQ8 takes, the quantized row fits
// in workgroup memory beside the kernel's own, and at most
// Q8FuseMaxWorkgroups workgroups.
func Q8Fuses(d *gpu.Device, w *gpu.Tensor, m int) bool {
	if m != 1 || !HasMatVecQ8(w.Type) || w.Cols%32 != 0 {
		return false
	}
	if (w.Rows+q8Launch.rows-1)/q8Launch.rows > Q8FuseMaxWorkgroups {
		return false
	}
	return q8SharedBytes(w.Cols, q8Launch) <= uint64(d.Limits.MaxComputeWorkgroupStorageSize)
}

// q8SharedBytes is the workgroup memory of a matvec_q8 launch that stages
// a row of k activations (one activation row, NX = 1): the staged row, the
// lanes' sums and reduce_common's two arrays.
func q8SharedBytes(k int, l matvecQ8Launch) uint64 {
	return 4*uint64(Q8RowWords(k)) + 4*uint64(l.wg) + 12*uint64(l.wg)
}

// q8OutputFlags are the flags of the integer products' outputs: bit 0 to
// accumulate into y, bit 5 to add o.Bias, which then fills binding 4 (else
// xq does: the kernel reads nothing there).
func q8OutputFlags(kernel string, w *gpu.Tensor, o MatmulOptions, xq, y *gpu.Buffer) (flags uint32, bias *gpu.Buffer, err error) {
	if o.Accumulate {
		flags |= matmulAccumulate
	}
	if o.Bias == nil {
		return flags, xq, nil
	}
	if err := checkBias(kernel, w, o.Bias, y); err != nil {
		return 0, nil, err
	}
	return flags | matmulBias, o.Bias, nil
}

func matvecQ8Dispatch(c *gpu.Chain, w *gpu.Tensor, src q8Source, y *gpu.Buffer, m int, o MatmulOptions, l matvecQ8Launch) error {
	if q8RowsEnvErr != nil {
		return fmt.Errorf("ops: matvec q8: %w", q8RowsEnvErr)
	}
	if w == nil {
		return fmt.Errorf("ops: matvec q8: weight tensor is nil")
	}
	entry, ok := matvecQ8Entries[w.Type]
	if !ok {
		return fmt.Errorf("ops: matvec q8 %q: weight type %v has no integer matvec (Q4_K, Q6_K and Q8_0 only; use MatVec)", w.Name, w.Type)
	}
	k, n := w.Cols, w.Rows
	if bs := w.Type.BlockSize(); k%bs != 0 {
		return fmt.Errorf("ops: matvec q8 %q: %d columns, want a multiple of %v's %d-element block", w.Name, k, w.Type, bs)
	}
	if o.YOffset < 0 || o.YStride < 0 {
		return fmt.Errorf("ops: matvec q8 %q: y offset %d and stride %d must not be negative", w.Name, o.YOffset, o.YStride)
	}
	if m < 1 || m > MaxQ8Rows {
		return fmt.Errorf("ops: matvec q8 %q: %d activation rows, want 1 to %d", w.Name, m, MaxQ8Rows)
	}
	ys := o.YStride
	if ys == 0 {
		ys = n
	}
	if m > 1 && ys < n {
		return fmt.Errorf("ops: matvec q8 %q: y stride %d is under the %d rows of an output", w.Name, ys, n)
	}
	// xs is matvec_q8's XS, the vec4s of its staged row. A product that
	// quantizes its own input reads x and g (bindings 5 and 6) and not xq,
	// which x then fills; else xq fills them.
	xq, g, xs := src.xq, src.xq, 1
	if src.in != q8InQuantized {
		if m != 1 {
			return fmt.Errorf("ops: matvec q8 %q: %d activation rows quantized in the product, want 1", w.Name, m)
		}
		xq, g, xs = src.x, src.g, Q8RowWords(k)/4
		if need := q8SharedBytes(k, l); need > uint64(c.Device().Limits.MaxComputeWorkgroupStorageSize) {
			return fmt.Errorf("ops: matvec q8 %q: a row of %d activations quantized in the product needs %d bytes of workgroup memory, over the device's %d",
				w.Name, k, need, c.Device().Limits.MaxComputeWorkgroupStorageSize)
		}
	} else if err := needF32("matvec q8 "+w.Name, "xq", xq, int(Q8Bytes(k, m)/4)); err != nil {
		return err
	}
	end := uint64(o.YOffset) + uint64(m-1)*uint64(ys) + uint64(n)
	if end > math.MaxUint32 {
		return fmt.Errorf("ops: matvec q8 %q: y offset %d + %d rows of %d overflow 32-bit indexing", w.Name, o.YOffset, m, ys)
	}
	if err := needF32("matvec q8 "+w.Name, "y", y, int(end)); err != nil {
		return err
	}
	if xq == y {
		return fmt.Errorf("ops: matvec q8 %q: xq and y are the same buffer %q", w.Name, y.Label())
	}
	if l.rows < 1 || l.wg%l.rows != 0 {
		return fmt.Errorf("ops: matvec q8 %q: launch of %d invocations does not split into %d rows", w.Name, l.wg, l.rows)
	}
	if err := checkChunks("matvec q8", w); err != nil {
		return err
	}
	k8, err := c.Device().Kernel(gpu.Spec("matvec_q8", entry, "WG", l.wg, "ROWS", l.rows, "NX", m, "IN", src.in, "XS", xs, "DOT", q8Dot(c.Device())))
	if err != nil {
		return err
	}
	flags, bias, err := q8OutputFlags("matvec q8", w, o, xq, y)
	if err != nil {
		return err
	}
	flags |= src.flags
	for _, ch := range w.Chunks {
		params := matvecQ8Params{K: uint32(k), N: uint32(ch.Rows), Row0: uint32(ch.FirstRow), YOffset: uint32(o.YOffset), Flags: flags,
			YStride: uint32(ys), XRow: uint32(Q8RowWords(k) / 4), Eps: src.eps}
		if err := c.Dispatch(k8, params, gpu.Grid(ch.Rows, l.rows), ch.Buf, xq, y, bias, xq, g); err != nil {
			return err
		}
	}
	return nil
}
