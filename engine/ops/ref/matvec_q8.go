package ref

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/x448/float16"

	"github.com/hearthstudio/hearth/gguf"
)

// Q8 is one token's activations quantized as shaders/quantize_q8.wgsl
// writes them: per block of 32, the scale D and the levels Q (-127..127),
// and Σq per half block of 16.
type Q8 struct {
	D    []float32
	Q    []int8
	Sums []int32
}

// QuantizeQ8 quantizes x (a multiple of 32 floats) with quantize_q8's
// arithmetic: d = max|x|·f32(1/127), q = round-half-even(x·f32(1/d)).
func QuantizeQ8(x []float32) (Q8, error) {
	if len(x)%32 != 0 {
		return Q8{}, fmt.Errorf("ref: quantize q8: %d floats, want a multiple of 32", len(x))
	}
	q := Q8{D: make([]float32, len(x)/32), Q: make([]int8, len(x)), Sums: make([]int32, len(x)/16)}
	for b := range q.D {
		blk := x[32*b : 32*b+32]
		var amax float32
		for _, v := range blk {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := amax * float32(1.0/127)
		var id float32
		if d > 0 {
			id = 1 / d
		}
		q.D[b] = d
		for i, v := range blk {
			l := int32(math.RoundToEven(float64(v * id)))
			l = min(max(l, -127), 127)
			q.Q[32*b+i] = int8(l)
			q.Sums[2*b+i/16] += l
		}
	}
	return q, nil
}

// DecodeQ8 reads quantize_q8's output words for k activations, its levels
// packed four to a word as i8 (packed: its DOT = 1) or two to a word
// offset by 128 (SWAR).
func DecodeQ8(words []uint32, k int, packed bool) (Q8, error) {
	if k%32 != 0 || len(words) < k/2+k/32+k/16 {
		return Q8{}, fmt.Errorf("ref: decode q8: %d words for k = %d, want k a multiple of 32 and %d words", len(words), k, k/2+k/32+k/16)
	}
	q := Q8{D: make([]float32, k/32), Q: make([]int8, k), Sums: make([]int32, k/16)}
	for g := 0; g < k/4; g++ {
		if packed {
			// Word g holds q of elements 4g .. 4g+3 in its bytes, lowest first.
			for j := range 4 {
				q.Q[4*g+j] = int8(words[g] >> (8 * j))
			}
			continue
		}
		w0, w1 := words[2*g], words[2*g+1]
		// Word 2g holds u2 | u0 << 16, word 2g+1 u3 | u1 << 16; u = q + 128.
		q.Q[4*g] = int8(int32(w0>>16) - 128)
		q.Q[4*g+1] = int8(int32(w1>>16) - 128)
		q.Q[4*g+2] = int8(int32(w0&0xffff) - 128)
		q.Q[4*g+3] = int8(int32(w1&0xffff) - 128)
	}
	for b := range q.D {
		q.D[b] = math.Float32frombits(words[k/2+b])
	}
	for i := range q.Sums {
		q.Sums[i] = int32(words[k/2+k/32+i])
	}
	return q, nil
}

// MatVecQ8 returns y = W·x for a rows×cols Q4_K, Q6_K or Q8_0 weight (GGUF
// bytes) and x quantized (cols activations): ggml's vec_dot_q4_K_q8_1,
// vec_dot_q6_K_q8_1 and vec_dot_q8_0_q8_1 arithmetic, integer dot products
// of levels per run of 16 (Q8_0: per block of 32), then the scales in f32
// in shaders/matvec_q8.wgsl's order per part;
// the parts of a row are summed in float64, so the GPU's sum differs only
// in the rounding of its f32 operations. scale is, per row, Σ|term| over
// every f32 term the parts add or subtract: what that rounding is relative
// to.
func MatVecQ8(t gguf.Type, rows, cols int, w []byte, x Q8) (y []float32, scale []float64, err error) {
	// A block of bs elements, bb bytes, summed in parts of 32 weights.
	var bs, bb int
	var part func(blk []byte, e0, pt int, x Q8) (float32, float64)
	switch t {
	case gguf.TypeQ4_K:
		bs, bb, part = 256, 144, partQ4K
	case gguf.TypeQ6_K:
		bs, bb, part = 256, 210, partQ6K
	case gguf.TypeQ8_0:
		bs, bb, part = 32, 34, blockQ80
	default:
		return nil, nil, fmt.Errorf("ref: matvec q8: weight type %v, want Q4_K, Q6_K or Q8_0", t)
	}
	if cols%bs != 0 || len(w) != rows*cols/bs*bb || len(x.Q) != cols {
		return nil, nil, fmt.Errorf("ref: matvec q8: %v weight of %d bytes, %d activations, for %dx%d", t, len(w), len(x.Q), rows, cols)
	}
	y, scale = make([]float32, rows), make([]float64, rows)
	for r := range rows {
		var s float64
		for b := range cols / bs {
			blk := w[(r*cols/bs+b)*bb:][:bb]
			for pt := range bs / 32 {
				v, mag := part(blk, bs*b, pt, x)
				s += float64(v)
				scale[r] += mag
			}
		}
		y[r] = float32(s)
	}
	return y, scale, nil
}

func abs32(v float32) float64 { return math.Abs(float64(v)) }

// runDot is Σ level(i)·q over the 16 activations from element e.
func runDot(e int, x Q8, level func(i int) int32) int32 {
	var s int32
	for i := range 16 {
		s += level(i) * int32(x.Q[e+i])
	}
	return s
}

// scaleMinK4 is ggml's get_scale_min_k4 over the 12 scale bytes.
func scaleMinK4(j int, s []byte) (sc, m float32) {
	if j < 4 {
		return float32(s[j] & 63), float32(s[j+4] & 63)
	}
	return float32((s[j+4] & 15) | (s[j-4]>>6)<<4), float32((s[j+4] >> 4) | (s[j]>>6)<<4)
}

func f16(b []byte) float32 { return float16.Frombits(binary.LittleEndian.Uint16(b)).Float32() }

// partQ4K: part pt is sub-blocks 2·(pt/2) (low nibbles) and 2·(pt/2)+1
// (high nibbles) of qs[32·(pt/2) + 16·(pt%2) ..], 16 weights each.
func partQ4K(blk []byte, e0, pt int, x Q8) (v float32, mag float64) {
	pr, lh := pt/2, pt%2
	qs := blk[16+32*pr+16*lh:][:16]
	ea := e0 + 64*pr + 16*lh
	eb := ea + 32
	dotA := runDot(ea, x, func(i int) int32 { return int32(qs[i] & 15) })
	dotB := runDot(eb, x, func(i int) int32 { return int32(qs[i] >> 4) })
	d, dmin := f16(blk[0:]), f16(blk[2:])
	scA, mA := scaleMinK4(2*pr, blk[4:16])
	scB, mB := scaleMinK4(2*pr+1, blk[4:16])
	pa, ma := d*scA*float32(dotA), dmin*mA*float32(x.Sums[ea/16])
	pb, mb := d*scB*float32(dotB), dmin*mB*float32(x.Sums[eb/16])
	mag = abs32(x.D[ea/32])*(abs32(pa)+abs32(ma)) + abs32(x.D[eb/32])*(abs32(pb)+abs32(mb))
	return x.D[ea/32]*(pa-ma) + x.D[eb/32]*(pb-mb), mag
}

// partQ6K: part pt = (h, lh, jl) = (pt/4, pt/2%2, pt%2) is runs j = jl and
// j = jl + 2 of half h, 16 weights each: level = nibble j/2 of
// ql[64h + 32jl + 16lh + i] | bits 2j of qh[32h + 16lh + i] << 4, minus 32.
func partQ6K(blk []byte, e0, pt int, x Q8) (v float32, mag float64) {
	h, lh, jl := pt/4, pt/2%2, pt%2
	ql := blk[64*h+32*jl+16*lh:][:16]
	qh := blk[128+32*h+16*lh:][:16]
	ea := e0 + 128*h + 32*jl + 16*lh
	eb := ea + 64
	dotA := runDot(ea, x, func(i int) int32 { return int32(ql[i]&15|(qh[i]>>(2*jl)&3)<<4) - 32 })
	dotB := runDot(eb, x, func(i int) int32 { return int32(ql[i]>>4|(qh[i]>>(2*jl+4)&3)<<4) - 32 })
	sa := float32(int8(blk[192+8*h+2*jl+lh]))
	sb := float32(int8(blk[196+8*h+2*jl+lh]))
	d := f16(blk[208:])
	ta, tb := x.D[ea/32]*(sa*float32(dotA)), x.D[eb/32]*(sb*float32(dotB))
	return d * (ta + tb), abs32(d) * (abs32(ta) + abs32(tb))
}

// blockQ80: the whole block of 32 signed levels, one scale.
func blockQ80(blk []byte, e0, _ int, x Q8) (v float32, mag float64) {
	dot := runDot(e0, x, func(i int) int32 { return int32(int8(blk[2+i])) }) +
		runDot(e0+16, x, func(i int) int32 { return int32(int8(blk[18+i])) })
	t := f16(blk) * x.D[e0/32]
	return t * float32(dot), abs32(t) * math.Abs(float64(dot))
}
