package gguf

// This file is the public face of the quant formats: Dequantize, Quantize,
// their parallel forms and a reference dot product. The per-format codecs live
// in quant_float.go (F32, F16, BF16, integers), quant_legacy.go (Q4_0…Q8_1),
// kquant.go (Q2_K…Q8_K), iquant.go (IQ4_NL, IQ4_XS), quant_mxfp4.go and
// quant_ternary.go (TQ1_0, TQ2_0). Each mirrors ggml's reference C function,
// named in its comment, and is checked bit for bit against ggml's vectors in
// shared/testdata/ggml. The grid-based IQ types (IQ1_*, IQ2_*, IQ3_*) need
// ggml's lattice tables and are refused.

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
)

// ErrUnsupportedType is wrapped by the errors of Dequantize, Quantize and
// DotF32 for a type that ggml defines but this package cannot convert.
var ErrUnsupportedType = errors.New("type not supported")

// codec is what this package knows about one type. Both functions take whole
// blocks: dequantize decodes len(dst)/BlockSize blocks from src, quantize
// encodes len(src)/BlockSize blocks into dst; the caller has checked the sizes.
type codec struct {
	dequantize func(src []byte, dst []float32)
	quantize   func(src []float32, dst []byte)
	// needsImatrix marks the types ggml refuses to quantize without an
	// importance matrix (ggml_quantize_requires_imatrix).
	needsImatrix bool
}

// codecFor returns the codec of t, with the processor's vector dequantizer
// where it has one; a zero codec for a type with no codec.
func codecFor(t Type) codec {
	c := scalarCodec(t)
	if f := vectorDequantize(t); f != nil {
		c.dequantize = f
	}
	return c
}

// scalarCodec returns the portable Go codec of t.
func scalarCodec(t Type) codec {
	switch t {
	case TypeF32:
		return codec{dequantize: dequantizeF32, quantize: quantizeF32}
	case TypeF16:
		return codec{dequantize: dequantizeF16, quantize: quantizeF16}
	case TypeBF16:
		return codec{dequantize: dequantizeBF16, quantize: quantizeBF16}
	case TypeI8:
		return codec{dequantize: dequantizeI8}
	case TypeI16:
		return codec{dequantize: dequantizeI16}
	case TypeI32:
		return codec{dequantize: dequantizeI32}
	case TypeQ4_0:
		return codec{dequantize: dequantizeQ4_0, quantize: quantizeQ4_0}
	case TypeQ4_1:
		return codec{dequantize: dequantizeQ4_1, quantize: quantizeQ4_1}
	case TypeQ5_0:
		return codec{dequantize: dequantizeQ5_0, quantize: quantizeQ5_0}
	case TypeQ5_1:
		return codec{dequantize: dequantizeQ5_1, quantize: quantizeQ5_1}
	case TypeQ8_0:
		return codec{dequantize: dequantizeQ8_0, quantize: quantizeQ8_0}
	case TypeQ8_1:
		return codec{dequantize: dequantizeQ8_1, quantize: quantizeQ8_1}
	case TypeQ2_K:
		return codec{dequantize: dequantizeQ2_K, quantize: quantizeQ2_K}
	case TypeQ3_K:
		return codec{dequantize: dequantizeQ3_K, quantize: quantizeQ3_K}
	case TypeQ4_K:
		return codec{dequantize: dequantizeQ4_K, quantize: quantizeQ4_K}
	case TypeQ5_K:
		return codec{dequantize: dequantizeQ5_K, quantize: quantizeQ5_K}
	case TypeQ6_K:
		return codec{dequantize: dequantizeQ6_K, quantize: quantizeQ6_K}
	case TypeQ8_K:
		return codec{dequantize: dequantizeQ8_K, quantize: quantizeQ8_K}
	case TypeIQ4_NL:
		return codec{dequantize: dequantizeIQ4_NL, quantize: quantizeIQ4_NL}
	case TypeIQ4_XS:
		return codec{dequantize: dequantizeIQ4_XS, quantize: quantizeIQ4_XS}
	case TypeMXFP4:
		return codec{dequantize: dequantizeMXFP4, quantize: quantizeMXFP4}
	case TypeTQ1_0:
		return codec{dequantize: dequantizeTQ1_0, quantize: quantizeTQ1_0}
	case TypeTQ2_0:
		return codec{dequantize: dequantizeTQ2_0, quantize: quantizeTQ2_0}
	case TypeIQ2_XXS, TypeIQ2_XS, TypeIQ1_S:
		return codec{needsImatrix: true}
	}
	return codec{}
}

// CanDequantize reports whether Dequantize accepts type t.
func CanDequantize(t Type) bool { return codecFor(t).dequantize != nil }

// CanQuantize reports whether Quantize accepts type t: F32, F16, BF16, Q4_0,
// Q4_1, Q5_0, Q5_1, Q8_0, Q2_K…Q6_K, IQ4_NL, IQ4_XS, MXFP4, TQ1_0 and TQ2_0
// (the types ggml quantizes without an importance matrix, less the grid IQ
// types), plus the vec_dot activation encodings Q8_1 and Q8_K.
func CanQuantize(t Type) bool { return codecFor(t).quantize != nil }

// typeList names the types for which ok holds, in id order, for error
// messages ("F32, F16, Q4_0, …").
func typeList(ok func(Type) bool) string {
	var names []string
	for id := Type(0); id < 64; id++ {
		if id.Known() && ok(id) {
			names = append(names, id.String())
		}
	}
	return strings.Join(names, ", ")
}

// checkDequantize validates the arguments of Dequantize and returns t's codec.
func checkDequantize(op string, t Type, src []byte, n int) (codec, error) {
	c, want, err := checkValueCount(op, t, n)
	if err != nil {
		return codec{}, err
	}
	if len(src) != want {
		bs, ts := t.BlockSize(), t.TypeSize()
		return codec{}, fmt.Errorf("gguf: %s %v: src is %d bytes, want %d for %d values (%d bytes per block of %d)", op, t, len(src), want, n, ts, bs)
	}
	return c, nil
}

// checkValueCount checks that n values of t can be decoded and returns t's
// codec and the bytes they take.
func checkValueCount(op string, t Type, n int) (codec, int, error) {
	if !t.Known() {
		return codec{}, 0, fmt.Errorf("gguf: %s %v: unknown type", op, t)
	}
	c := codecFor(t)
	if c.dequantize == nil {
		return codec{}, 0, fmt.Errorf("gguf: %s %v: %w (supported: %s)", op, t, ErrUnsupportedType, typeList(CanDequantize))
	}
	bs, ts := t.BlockSize(), t.TypeSize()
	if n%bs != 0 {
		return codec{}, 0, fmt.Errorf("gguf: %s %v: %d values is not a multiple of the block size %d", op, t, n, bs)
	}
	return c, n / bs * ts, nil
}

// checkQuantize validates the arguments of Quantize and returns t's codec.
func checkQuantize(t Type, src []float32, dst []byte) (codec, error) {
	if !t.Known() {
		return codec{}, fmt.Errorf("gguf: quantize %v: unknown type", t)
	}
	c := codecFor(t)
	if c.needsImatrix {
		return codec{}, fmt.Errorf("gguf: quantize %v: %w: ggml needs an importance matrix for it (quantizable: %s)", t, ErrUnsupportedType, typeList(CanQuantize))
	}
	if c.quantize == nil {
		return codec{}, fmt.Errorf("gguf: quantize %v: %w (quantizable: %s)", t, ErrUnsupportedType, typeList(CanQuantize))
	}
	bs, ts := t.BlockSize(), t.TypeSize()
	if len(src)%bs != 0 {
		return codec{}, fmt.Errorf("gguf: quantize %v: %d values is not a multiple of the block size %d", t, len(src), bs)
	}
	if want := len(src) / bs * ts; len(dst) != want {
		return codec{}, fmt.Errorf("gguf: quantize %v: dst is %d bytes, want %d for %d values (%d bytes per block of %d)", t, len(dst), want, len(src), ts, bs)
	}
	return c, nil
}

// Dequantize decodes src, a whole number of blocks of type t, into dst as
// ggml's to_float does (bit for bit). len(dst) must be a multiple of
// t.BlockSize() and len(src) exactly the bytes of len(dst) values; blocks are
// independent, so a tensor may be decoded row by row or in any block range.
// It runs on the calling goroutine; see DequantizeParallel for big tensors.
func Dequantize(t Type, src []byte, dst []float32) error {
	c, err := checkDequantize("dequantize", t, src, len(dst))
	if err != nil {
		return err
	}
	c.dequantize(src, dst)
	return nil
}

// Dequantizer returns Dequantize for rows of n values of type t with the
// checks made once, for a caller that decodes a tensor row by row in a hot
// loop. The function it returns decodes src[:row bytes] into dst[:n] and
// panics if either is shorter.
func Dequantizer(t Type, n int) (func(src []byte, dst []float32), error) {
	c, size, err := checkValueCount("dequantize", t, n)
	if err != nil {
		return nil, err
	}
	return func(src []byte, dst []float32) { c.dequantize(src[:size], dst[:n]) }, nil
}

// DequantizeParallel is Dequantize split by block ranges across GOMAXPROCS
// goroutines. The output is identical to Dequantize's: each block is decoded
// by the same code, only by another goroutine. Small inputs run serially.
func DequantizeParallel(t Type, src []byte, dst []float32) error {
	c, err := checkDequantize("dequantize", t, src, len(dst))
	if err != nil {
		return err
	}
	bs, ts := t.BlockSize(), t.TypeSize()
	parallelBlocks(len(dst)/bs, bs, func(lo, hi int) {
		c.dequantize(src[lo*ts:hi*ts], dst[lo*bs:hi*bs])
	})
	return nil
}

// Quantize encodes src into dst as whole blocks of type t, byte for byte as
// ggml_quantize_chunk does without an importance matrix (the *_ref quantizers
// for Q4_0…Q6_K, quantize_iq4_nl/quantize_iq4_xs with no weights for the IQ4
// types). len(src) must be a multiple of t.BlockSize() and len(dst) exactly
// the bytes of len(src) values. Every byte of dst is written. Q8_1 and Q8_K
// are accepted as the activation encodings of ggml's vec_dot (the
// quantize_row_q8_1_ref / quantize_row_q8_K_ref).
func Quantize(t Type, src []float32, dst []byte) error {
	c, err := checkQuantize(t, src, dst)
	if err != nil {
		return err
	}
	c.quantize(src, dst)
	return nil
}

// QuantizeParallel is Quantize split by block ranges across GOMAXPROCS
// goroutines, with the same output: every supported quantizer works on one
// block (or super-block) at a time and reads nothing outside it.
func QuantizeParallel(t Type, src []float32, dst []byte) error {
	c, err := checkQuantize(t, src, dst)
	if err != nil {
		return err
	}
	bs, ts := t.BlockSize(), t.TypeSize()
	// Quantizing costs 10–1000× more per value than dequantizing (the K and
	// IQ4 scale searches), so a goroutine is worth it from 8K values on.
	parallelBlocks(len(src)/bs, 8*bs, func(lo, hi int) {
		c.quantize(src[lo*bs:hi*bs], dst[lo*ts:hi*ts])
	})
	return nil
}

// parallelMinValues is the least number of values one goroutine is given:
// 64K f32 outputs are 256 KiB, about 30–100 µs of decoding, which dwarfs the
// microsecond a goroutine costs to start and join.
const parallelMinValues = 1 << 16

// parallelBlocks calls fn over [0, nblocks) split into contiguous ranges, one
// per goroutine, at most GOMAXPROCS of them and each at least
// parallelMinValues/perBlock blocks: perBlock is the cost of one block in
// dequantized values, so that small inputs stay on the calling goroutine.
func parallelBlocks(nblocks, perBlock int, fn func(lo, hi int)) {
	perBlock = max(perBlock, 1)
	workers := min(runtime.GOMAXPROCS(0), nblocks*perBlock/parallelMinValues)
	if workers <= 1 {
		fn(0, nblocks)
		return
	}
	var wg sync.WaitGroup
	for w := range workers - 1 {
		lo, hi := nblocks*w/workers, nblocks*(w+1)/workers
		wg.Go(func() { fn(lo, hi) })
	}
	fn(nblocks*(workers-1)/workers, nblocks) // the last range on this goroutine
	wg.Wait()
}

// DotF32 is the dot product of row, a whole number of blocks of type t, with
// the activations x: the reference for quantized mat-vec kernels. It
// dequantizes each block exactly as Dequantize does and sums the products in
// float64, so its only rounding is the final conversion to float32; ggml's
// vec_dot quantizes x first (to Q8_0, Q8_K, …) and differs from it by that
// quantization error.
func DotF32(t Type, row []byte, x []float32) (float32, error) {
	c, err := checkDequantize("dot", t, row, len(x))
	if err != nil {
		return 0, err
	}
	bs, ts := t.BlockSize(), t.TypeSize()
	// Decode a chunk of blocks at a time into a stack buffer: 256 values is
	// one K-quant super-block, or 256 plain values.
	chunk := max(1, 256/bs)
	var buf [256]float32
	var sum float64
	for b := 0; b < len(x)/bs; b += chunk {
		nb := min(chunk, len(x)/bs-b)
		y := buf[:nb*bs]
		c.dequantize(row[b*ts:(b+nb)*ts], y)
		xs := x[b*bs : (b+nb)*bs]
		for i, v := range y {
			sum += float64(v) * float64(xs[i]) // exact: 24×24 significand bits fit in 53
		}
	}
	return float32(sum), nil
}
