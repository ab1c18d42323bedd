package ops

import (
	"fmt"
	"math"

	"github.com/hearthstudio/hearth/engine/gpu"
	"github.com/hearthstudio/hearth/gguf"
)

// Decode products on 8-bit activations (shaders/quantize_q8.wgsl and
// shaders/matvec_q8.wgsl): QuantizeQ8 (or its normed and GLU forms) writes
// one token's activations as blocks of 32 levels with a scale, as ggml's
// q8_1 does, and MatVecQ8 multiplies Q4_K, Q6_K or Q8_0 weights with them in
// integer arithmetic, two products to a u32 multiply. The result is ggml's
// quantized-activation product, not the f32 one of MatVec: each activation
// moves by up to half its block's step, max|x|/254.

// Q8Words is the size in u32 words of k activations quantized by
// QuantizeQ8: k/2 words of levels, k/32 scales and k/16 half-block sums.
func Q8Words(k int) int { return k/2 + k/32 + k/16 }

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

// q8Params mirrors Q8Params in shaders/quantize_q8.wgsl.
type q8Params struct {
	K     uint32
	Flags uint32
	Eps   float32
	_     uint32
}

// quantizeQ8WG is the quantizers' workgroup: 8 invocations per block of
// 32, so a 4096-wide row is 4 workgroups.
const quantizeQ8WG = 256

// QuantizeQ8 appends xq = the k floats of x quantized (k a multiple of 32;
// xq holds Q8Words(k) words).
func QuantizeQ8(c *gpu.Chain, x, xq *gpu.Buffer, k int) error {
	if err := checkQ8("quantize q8", x, k, k, xq); err != nil {
		return err
	}
	return dispatchQ8(c, "quantize_q8", quantizeQ8WG, gpu.Grid(k/4, quantizeQ8WG), q8Params{K: uint32(k)}, x, x, xq)
}

// QuantizeQ8Normed appends xq = RMSNorm(x) with gain g quantized: the
// normalised row is never written as floats. a must describe one row.
func QuantizeQ8Normed(c *gpu.Chain, x, g, xq *gpu.Buffer, a NormArgs) error {
	if a.Rows != 1 {
		return fmt.Errorf("ops: quantize q8 normed: %d rows, want 1 (one token)", a.Rows)
	}
	if !(a.Eps >= 0) || math.IsInf(float64(a.Eps), 0) {
		return fmt.Errorf("ops: quantize q8 normed: eps %v must be finite and >= 0", a.Eps)
	}
	if err := checkQ8("quantize q8 normed", x, a.Dim, a.Dim, xq); err != nil {
		return err
	}
	if err := needF32("quantize q8 normed", "gain", g, a.Dim); err != nil {
		return err
	}
	var flags uint32
	if a.OnePlus {
		flags |= matmulOnePlus
	}
	return dispatchQ8(c, "quantize_q8_normed", quantizeQ8WG, gpu.Grid(a.Dim/4, quantizeQ8WG), q8Params{K: uint32(a.Dim), Flags: flags, Eps: a.Eps}, x, g, xq)
}

// QuantizeQ8GLU appends xq = act(gate) ⊙ up quantized, for gateUp =
// [gate | up] of 2·a.FF floats: the activations a down projection reads.
func QuantizeQ8GLU(c *gpu.Chain, gateUp, xq *gpu.Buffer, a GLUArgs) error {
	if err := checkQ8("quantize q8 glu", gateUp, a.FF, 2*a.FF, xq); err != nil {
		return err
	}
	if a.OAI {
		return fmt.Errorf("ops: quantize q8 glu: gpt-oss's gated unit is not fused into the quantizer (apply SwiGLUOAIFused first)")
	}
	var flags uint32
	if a.GELU {
		flags |= matmulGELU
	}
	return dispatchQ8(c, "quantize_q8_glu", quantizeQ8WG, gpu.Grid(a.FF/4, quantizeQ8WG), q8Params{K: uint32(a.FF), Flags: flags}, gateUp, gateUp, xq)
}

func checkQ8(kernel string, x *gpu.Buffer, k, xlen int, xq *gpu.Buffer) error {
	if k <= 0 || k%32 != 0 {
		return fmt.Errorf("ops: %s: k = %d, want a positive multiple of 32 (whole blocks)", kernel, k)
	}
	if err := needF32(kernel, "x", x, xlen); err != nil {
		return err
	}
	if err := needF32(kernel, "xq", xq, Q8Words(k)); err != nil {
		return err
	}
	if x == xq {
		return fmt.Errorf("ops: %s: x and xq are the same buffer %q", kernel, x.Label())
	}
	return nil
}

func dispatchQ8(c *gpu.Chain, entry string, wg int, grid [3]uint32, params q8Params, x, g, xq *gpu.Buffer) error {
	return dispatch(c, gpu.Spec("quantize_q8", entry, "WG", wg), params, grid, x, g, xq)
}

// matvecQ8Params mirrors MatvecQ8Params in shaders/matvec_q8.wgsl.
type matvecQ8Params struct {
	K, N, Row0, YOffset, Flags uint32
	_                          [3]uint32
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
var q8Launch = matvecQ8Launch{wg: 256, rows: 8}

// MatVecQ8 appends y = W·x for Q4_K, Q6_K or Q8_0 weights W (k columns,
// whole blocks) and x quantized by QuantizeQ8 into xq, y placed as o
// says, plus o.Bias when set (o.XStride and o.YStride are unused: one
// token).
func MatVecQ8(c *gpu.Chain, w *gpu.Tensor, xq, y *gpu.Buffer, o MatmulOptions) error {
	return matvecQ8With(c, w, xq, y, o, q8Launch)
}

func matvecQ8With(c *gpu.Chain, w *gpu.Tensor, xq, y *gpu.Buffer, o MatmulOptions, l matvecQ8Launch) error {
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
	if o.YOffset < 0 {
		return fmt.Errorf("ops: matvec q8 %q: y offset %d is negative", w.Name, o.YOffset)
	}
	if err := needF32("matvec q8 "+w.Name, "xq", xq, Q8Words(k)); err != nil {
		return err
	}
	if err := needF32("matvec q8 "+w.Name, "y", y, o.YOffset+n); err != nil {
		return err
	}
	if xq == y {
		return fmt.Errorf("ops: matvec q8 %q: xq and y are the same buffer %q", w.Name, y.Label())
	}
	if uint64(o.YOffset)+uint64(n) > math.MaxUint32 {
		return fmt.Errorf("ops: matvec q8 %q: y offset %d + %d rows overflow 32-bit indexing", w.Name, o.YOffset, n)
	}
	if l.rows < 1 || l.wg%l.rows != 0 {
		return fmt.Errorf("ops: matvec q8 %q: launch of %d invocations does not split into %d rows", w.Name, l.wg, l.rows)
	}
	if err := checkChunks("matvec q8", w); err != nil {
		return err
	}
	k8, err := c.Device().Kernel(gpu.Spec("matvec_q8", entry, "WG", l.wg, "ROWS", l.rows))
	if err != nil {
		return err
	}
	var flags uint32
	if o.Accumulate {
		flags |= matmulAccumulate
	}
	bias := xq // fills binding 4 when there is no bias: the kernel reads nothing there
	if o.Bias != nil {
		if err := checkBias("matvec q8", w, o.Bias, y); err != nil {
			return err
		}
		flags |= matmulBias
		bias = o.Bias
	}
	for _, ch := range w.Chunks {
		params := matvecQ8Params{K: uint32(k), N: uint32(ch.Rows), Row0: uint32(ch.FirstRow), YOffset: uint32(o.YOffset), Flags: flags}
		if err := c.Dispatch(k8, params, gpu.Grid(ch.Rows, l.rows), ch.Buf, xq, y, bias); err != nil {
			return err
		}
	}
	return nil
}
