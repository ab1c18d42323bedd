package gguf

import (
	"encoding/binary"
	"math"
)

// The non-linear 4-bit formats: each nibble indexes kvaluesIQ4NL, a fixed
// table of 16 levels denser near zero, scaled per 32 values.
//
//	IQ4_NL  d f16; qs[16]                                   x = d·kvalues[q]
//	IQ4_XS  d f16; scales_h u16 @2; scales_l[4] @4; qs[128] @8
//	        (256 values, 8 sub-blocks with 6-bit scales ls−32)  x = d·(ls−32)·kvalues[q]
//
// Nibbles are laid out as in Q4_0: value j in the low nibble of qs[j], value
// j+16 in the high one, per 32 values. The IQ4 grid needs no lookup tables
// beyond kvaluesIQ4NL, unlike the IQ2/IQ3/IQ1 formats.

// kvaluesIQ4NL is kvalues_iq4nl (ggml-common.h), sorted ascending.
var kvaluesIQ4NL = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

func dequantizeIQ4_NL(src []byte, dst []float32) {
	for i := range len(dst) / 32 {
		b, y := (*[18]byte)(src[18*i:]), (*[32]float32)(dst[32*i:])
		d := f16At(b[:])
		for j, q := range b[2:] {
			y[j] = d * float32(kvaluesIQ4NL[q&0xf])
			y[j+16] = d * float32(kvaluesIQ4NL[q>>4])
		}
	}
}

func dequantizeIQ4_XS(src []byte, dst []float32) {
	for i := range len(dst) / qkK {
		b, y := (*[136]byte)(src[136*i:]), (*[qkK]float32)(dst[qkK*i:])
		d := f16At(b[:])
		scalesH := binary.LittleEndian.Uint16(b[2:])
		for ib := range 8 {
			ls := int32(b[4+ib/2]>>(4*(ib%2))&0xf) | int32(scalesH>>(2*ib)&3)<<4
			dl := d * float32(ls-32)
			qs, yy := (*[16]byte)(b[8+16*ib:]), (*[32]float32)(y[32*ib:])
			for j, q := range qs {
				yy[j] = dl * float32(kvaluesIQ4NL[q&0xf])
				yy[j+16] = dl * float32(kvaluesIQ4NL[q>>4])
			}
		}
	}
}

// bestIndexIQ4 is best_index_int8(16, kvalues_iq4nl, x): the index of the
// level nearest x, the upper one on a tie. ggml finds the bracketing pair
// val[mu−1] ≤ x < val[mu] by binary search and then compares the float32
// differences x−val[mu−1] and val[mu]−x. Here mu is counted instead (the
// levels are sorted, so it is 1 + the number of levels 1…14 that are ≤ x),
// which gives the same pair and the same comparison without the search's
// unpredictable branches; the quantizers call this 16 times per value.
func bestIndexIQ4(x float32) uint8 {
	// Callers pass products (id*x); round before the subtractions below, as
	// a C call does, rather than let an inlined product fuse into them.
	x = float32(x)
	switch {
	case x <= -127:
		return 0
	case x >= 113 || x != x: // ggml's search ends at 15 for a NaN too
		return 15
	}
	// v ≤ x exactly when x−v is not negative (a difference of two floats is
	// zero only if they are equal), so the sign bits do the counting.
	neg := uint32(0)
	for _, v := range kvaluesIQ4NLf[1:15] {
		neg += math.Float32bits(x-v) >> 31
	}
	mu := 15 - int(neg)
	lo, hi := kvaluesIQ4NLf[mu-1], kvaluesIQ4NLf[mu]
	if x-lo < hi-x {
		mu--
	}
	return uint8(mu)
}

// kvaluesIQ4NLf is kvaluesIQ4NL as float32, for bestIndexIQ4.
var kvaluesIQ4NLf = [16]float32{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// iq4FitScale is the per-32 search of quantize_row_iq4_nl_impl with no
// importance weights (the weights are x²) and ntry = 7, the path
// ggml_quantize_chunk takes for IQ4_NL and IQ4_XS: start from d = max/127,
// round, take the least-squares scale, then try 15 scales (itry−127)/max and
// keep the one that maximises (Σwqx)²/Σwq². It returns that scale, 0 for an
// all-zero group.
func iq4FitScale(xb []float32) float32 {
	amax, max := absMaxSigned(xb)
	if amax < groupMaxEps {
		return 0
	}
	const ntry = 7
	v0 := float32(kvaluesIQ4NL[0])
	d := -max / v0
	id := 1 / d
	var sumqx, sumq2 float32
	for _, x := range xb {
		q := float32(kvaluesIQ4NL[bestIndexIQ4(id*x)])
		w := x * x
		sumqx += float32(w * q * x)
		sumq2 += float32(w * q * q)
	}
	d = sumqx / sumq2
	best := d * sumqx
	for itry := -ntry; itry <= ntry; itry++ {
		id = float32(itry+int(kvaluesIQ4NL[0])) / max
		sumqx, sumq2 = 0, 0
		for _, x := range xb {
			q := float32(kvaluesIQ4NL[bestIndexIQ4(id*x)])
			w := x * x
			sumqx += float32(w * q * x)
			sumq2 += float32(w * q * q)
		}
		if sumq2 > 0 && sumqx*sumqx > best*sumq2 {
			d = sumqx / sumq2
			best = d * sumqx
		}
	}
	return d
}

// packNibbles stores 32 levels as Q4_0 does: L[j] low, L[j+16] high.
func packNibbles(qs []byte, L []uint8) {
	for j := range 16 {
		qs[j] = L[j] | L[j+16]<<4
	}
}

// quantizeIQ4_NL mirrors quantize_iq4_nl with no importance matrix: the
// fitted scale is stored as is and the values are rounded against it.
func quantizeIQ4_NL(src []float32, dst []byte) {
	var L [32]uint8
	for len(src) >= 32 {
		x, b := src[:32:32], dst[:18:18]
		d := iq4FitScale(x)
		putF16(b, d)
		id := inv(d)
		for j, v := range x {
			L[j] = bestIndexIQ4(id * v)
		}
		packNibbles(b[2:18], L[:])
		src, dst = src[32:], dst[18:]
	}
}

// quantizeIQ4_XS mirrors quantize_iq4_xs with no importance matrix: the 8
// fitted scales are quantized to 6 bits against d = −max/32 (max the one of
// largest magnitude), and each sub-block is rounded against its quantized
// scale d·l. The super-scale is the f32 d, not its f16 rounding, as in ggml;
// an all-zero super-block gets d = −0.
func quantizeIQ4_XS(src []float32, dst []byte) {
	var (
		L      [32]uint8
		scales [8]float32
	)
	for len(src) >= qkK {
		x, b := src[:qkK:qkK], dst[:136:136]
		var maxScale, amaxScale float32
		for ib := range 8 {
			scales[ib] = iq4FitScale(x[32*ib : 32*ib+32])
			if a := abs32(scales[ib]); a > amaxScale {
				amaxScale, maxScale = a, scales[ib]
			}
		}
		d := -maxScale / 32
		putF16(b, d)
		id := inv(d)
		var scalesH uint16
		scalesL := b[4:8]
		for ib := range 8 {
			l := clampInt(nearestInt(id*scales[ib]), -32, 31)
			idl := inv(d * float32(l))
			for j, v := range x[32*ib : 32*ib+32] {
				L[j] = bestIndexIQ4(idl * v)
			}
			packNibbles(b[8+16*ib:8+16*ib+16], L[:])
			l += 32
			if ib%2 == 0 {
				scalesL[ib/2] = uint8(l & 0xf)
			} else {
				scalesL[ib/2] |= uint8(l&0xf) << 4
			}
			scalesH |= uint16(l>>4) << (2 * ib)
		}
		binary.LittleEndian.PutUint16(b[2:], scalesH)
		src, dst = src[qkK:], dst[136:]
	}
}
