package gguf

import (
	"encoding/binary"
	"math"
)

// The K-quants: 256-element super-blocks (QK_K) made of 16 or 32 sub-blocks,
// each with its own 4- or 6-bit scale (and min), under one f16 super-scale.
// Layouts (ggml-common.h, byte offsets):
//
//	Q2_K  scales[16] (lo nibble scale, hi nibble min); qs[64]; d f16 @80; dmin f16 @82
//	Q3_K  hmask[32]; qs[64] @32; scales[12] @96 (16 × 6 bit, signed −32); d f16 @108
//	Q4_K  d f16; dmin f16 @2; scales[12] @4 (8 scales + 8 mins, 6 bit); qs[128] @16
//	Q5_K  d; dmin; scales[12] @4; qh[32] @16; qs[128] @48
//	Q6_K  ql[128]; qh[64] @128; scales int8[16] @192; d f16 @208
//	Q8_K  d f32; qs int8[256] @4; bsums int16[16] @260 (vec_dot activations)
//
// The quantizers mirror quantize_row_q*_K_ref and their helpers
// (make_qx_quants, make_q3_quants, make_qkx2_quants) operation for operation:
// the scale searches compare float32 sums whose last bit decides between two
// candidate scales, so a product must be rounded wherever C rounds it. Every
// "float32(a*b) + c" below is there for that (Go may otherwise fuse it into an
// FMA on arm64 and other targets), not for readability; so is the float32()
// around a product kept in a variable (ml, dm) that a later line subtracts,
// since the compiler fuses across statements too. `GOARCH=arm64 go build
// -gcflags=-S ./gguf | grep -E 'F(N)?M(ADD|SUB)S'` finds none (DotF32's one
// FMADDD fuses an exact float64 product, which changes nothing), and the
// vector tests pass under GOAMD64=v3, where amd64 fuses a*b + c too; a
// missing float32() showed up there as wrong Q2_K/Q4_K/Q5_K bytes.

const (
	qkK = 256 // elements per K-quant super-block (QK_K)

	// groupMaxEps is GROUP_MAX_EPS: a group whose largest |x| is below it is
	// treated as all zeros.
	groupMaxEps = 1e-15
)

// nearestInt is ggml's nearest_int: adding 1.5·2^23 leaves round(f), ties to
// even, in the low mantissa bits. Only |f| ≤ 2^22 rounds correctly; larger
// values give the same wrapped result as in C, which is what the vectors hold.
func nearestInt(f float32) int32 {
	// float32(f): once inlined, f may be a product the compiler would fuse
	// with this addition; C rounds the argument first.
	v := float32(f) + 12582912
	return int32(math.Float32bits(v)&0x007fffff) - 0x00400000
}

func clampInt(v, lo, hi int32) int32 { return max(lo, min(hi, v)) }

// makeQXQuants is make_qx_quants with rmse_type 1 and no importance weights
// (the weights are x²), the only form the no-imatrix quantizers use: it picks
// a signed scale for levels −nmax…nmax−1, stores them offset by nmax in L and
// returns the scale. Starting from −nmax/max it tries 18 nearby scales and
// keeps the one maximising (Σwxl)²/Σwl², the weighted least-squares fit.
func makeQXQuants(nmax int32, x []float32, L []int8) float32 {
	amax, max := absMaxSigned(x)
	if amax < groupMaxEps {
		clear(L[:len(x)])
		return 0
	}
	fnmax := float32(nmax)
	iscale := -fnmax / max
	var sumlx, suml2 float32
	for i, xi := range x {
		l := clampInt(nearestInt(iscale*xi), -nmax, nmax-1)
		L[i] = int8(nmax + l)
		w, fl := xi*xi, float32(l)
		sumlx += float32(w * xi * fl)
		suml2 += float32(w * fl * fl)
	}
	var scale float32
	if suml2 != 0 {
		scale = sumlx / suml2
	}
	best := scale * sumlx
	for is := int32(-9); is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -(fnmax + float32(0.1*float32(is))) / max
		sumlx, suml2 = 0, 0
		for _, xi := range x {
			l := clampInt(nearestInt(iscale*xi), -nmax, nmax-1)
			w, fl := xi*xi, float32(l)
			sumlx += float32(w * xi * fl)
			suml2 += float32(w * fl * fl)
		}
		if suml2 > 0 && sumlx*sumlx > best*suml2 {
			for i, xi := range x {
				L[i] = int8(nmax + clampInt(nearestInt(iscale*xi), -nmax, nmax-1))
			}
			scale = sumlx / suml2
			best = scale * sumlx
		}
	}
	return scale
}

// makeQ3Quants is make_q3_quants with do_rmse: after rounding at −nmax/max
// it moves single levels while that improves the weighted fit (weights x²),
// at most 5 sweeps. L gets the levels offset by nmax.
func makeQ3Quants(nmax int32, x []float32, L []int8) float32 {
	amax, max := absMaxSigned(x)
	if amax < groupMaxEps {
		clear(L[:len(x)])
		return 0
	}
	iscale := -float32(nmax) / max
	var sumlx, suml2 float32
	for i, xi := range x {
		l := clampInt(nearestInt(iscale*xi), -nmax, nmax-1)
		L[i] = int8(l)
		w, fl := xi*xi, float32(l)
		sumlx += float32(w * xi * fl)
		suml2 += float32(w * fl * fl)
	}
	for range 5 {
		changed := 0
		for i, xi := range x {
			w, li := xi*xi, float32(L[i])
			slx := sumlx - float32(w*xi*li)
			if !(slx > 0) { // not slx <= 0: a NaN must skip, as in C
				continue
			}
			sl2 := suml2 - float32(w*li*li)
			newL := clampInt(nearestInt(xi*sl2/slx), -nmax, nmax-1)
			if newL == int32(L[i]) {
				continue
			}
			fl := float32(newL)
			slx += float32(w * xi * fl)
			sl2 += float32(w * fl * fl)
			if sl2 > 0 && slx*slx*suml2 > sumlx*sumlx*sl2 {
				L[i] = int8(newL)
				sumlx, suml2 = slx, sl2
				changed++
			}
		}
		if changed == 0 {
			break
		}
	}
	for i := range x {
		L[i] += int8(nmax)
	}
	if suml2 > 0 {
		return sumlx / suml2
	}
	return 0
}

// makeQKX2Quants is make_qkx2_quants: an asymmetric fit x ≈ scale·l − min
// with l in 0…nmax and min ≥ 0, for the K-quants that carry mins. It starts
// from the range [min(x,0), max(x)] and tries nstep+1 rescalings
// (rmin + rdelta·is + nmax)/(max−min), solving the 2×2 weighted least-squares
// problem for each and keeping the one with the smallest weighted error
// (absolute when useMAD, squared otherwise). It returns the scale and the
// min, the latter as a positive offset ("the_min").
func makeQKX2Quants(nmax int32, x, weights []float32, L, Laux []uint8, rmin, rdelta float32, nstep int, useMAD bool) (scale, theMin float32) {
	n := len(x)
	lo, hi := x[0], x[0]
	sumW := weights[0]
	sumX := sumW * x[0]
	for i := 1; i < n; i++ {
		if x[i] < lo {
			lo = x[i]
		}
		if x[i] > hi {
			hi = x[i]
		}
		w := weights[i]
		sumW += w
		sumX += float32(w * x[i])
	}
	if lo > 0 {
		lo = 0
	}
	if hi == lo {
		clear(L[:n])
		return 0, -lo
	}
	fnmax := float32(nmax)
	iscale := fnmax / (hi - lo)
	scale = 1 / iscale
	var bestError float32
	for i := range n {
		l := clampInt(nearestInt(iscale*(x[i]-lo)), 0, nmax)
		L[i] = uint8(l)
		diff := float32(scale*float32(l)) + lo - x[i]
		if useMAD {
			diff = abs32(diff)
		} else {
			diff *= diff
		}
		bestError += float32(weights[i] * diff)
	}
	if nstep < 1 {
		return scale, -lo
	}
	for is := range nstep + 1 {
		iscale = (rmin + float32(rdelta*float32(is)) + fnmax) / (hi - lo)
		var sumL, sumL2, sumXL float32
		for i := range n {
			l := clampInt(nearestInt(iscale*(x[i]-lo)), 0, nmax)
			Laux[i] = uint8(l)
			w, fl := weights[i], float32(l)
			sumL += float32(w * fl)
			sumL2 += float32(w * fl * fl)
			sumXL += float32(w * fl * x[i])
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if !(D > 0) {
			continue
		}
		thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
		thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
		if thisMin > 0 {
			thisMin = 0
			thisScale = sumXL / sumL2
		}
		var curError float32
		for i := range n {
			diff := float32(thisScale*float32(Laux[i])) + thisMin - x[i]
			if useMAD {
				diff = abs32(diff)
			} else {
				diff *= diff
			}
			curError += float32(weights[i] * diff)
		}
		if curError < bestError {
			copy(L[:n], Laux[:n])
			bestError = curError
			scale, lo = thisScale, thisMin
		}
	}
	return scale, -lo
}

// scaleMinK4 is get_scale_min_k4: the j-th 6-bit scale and min of a Q4_K or
// Q5_K super-block. Scales 0–3 and mins 0–3 fill the low 6 bits of bytes
// 0–3 and 4–7; scales and mins 4–7 have their low nibbles in bytes 8–11 and
// their top 2 bits in the spare top bits of bytes 0–7.
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xf | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// putScaleMinK4 is the inverse packing of the Q4_K and Q5_K quantizers: the
// bytes written for j < 4 are the ones later j OR their top bits into.
func putScaleMinK4(q []byte, j int, ls, lm uint8) {
	if j < 4 {
		q[j] = ls
		q[j+4] = lm
		return
	}
	q[j+4] = ls&0xf | (lm&0xf)<<4
	q[j-4] |= (ls >> 4) << 6
	q[j] |= (lm >> 4) << 6
}

// --- Q2_K -------------------------------------------------------------------

func dequantizeQ2_K(src []byte, dst []float32) {
	for i := range len(dst) / qkK {
		b, y := (*[84]byte)(src[84*i:]), (*[qkK]float32)(dst[qkK*i:])
		d, dmin := f16At(b[80:]), f16At(b[82:])
		// Each half of the super-block (128 values) reads 32 bytes of qs four
		// times, 2 bits deeper each time; each 16 values have a scale byte.
		for n := range 2 {
			q := (*[32]byte)(b[16+32*n:])
			for s := range 4 {
				for half := range 2 {
					sc := b[8*n+2*s+half]
					dl, ml := d*float32(sc&0xf), float32(dmin*float32(sc>>4))
					qq, yy := (*[16]byte)(q[16*half:]), (*[16]float32)(y[128*n+32*s+16*half:])
					shift := uint(2*s) & 7 // "& 7": no Go shift-overflow check
					for l, v := range qq {
						yy[l] = float32(dl*float32(v>>shift&3)) - ml
					}
				}
			}
		}
	}
}

// quantizeQ2_K mirrors quantize_row_q2_K_ref: a 2-bit asymmetric fit per
// 16 values (make_qkx2_quants with |x| weights and absolute error), scales
// and mins quantized to 4 bits against their maxima, then the values
// requantized with the rounded scales.
func quantizeQ2_K(src []float32, dst []byte) {
	var (
		L       [qkK]uint8
		laux    [16]uint8
		weights [16]float32
		mins    [16]float32
		scales  [16]float32
	)
	const q4scale = 15
	for len(src) >= qkK {
		x, b := src[:qkK:qkK], dst[:84:84]
		var maxScale, maxMin float32
		for j := range 16 {
			xs := x[16*j : 16*j+16]
			for l, v := range xs {
				weights[l] = abs32(v)
			}
			scales[j], mins[j] = makeQKX2Quants(3, xs, weights[:], L[16*j:16*j+16], laux[:], -0.5, 0.1, 15, true)
			if scales[j] > maxScale {
				maxScale = scales[j]
			}
			if mins[j] > maxMin {
				maxMin = mins[j]
			}
		}
		sc := b[0:16]
		if maxScale > 0 {
			iscale := q4scale / maxScale
			for j := range 16 {
				sc[j] = uint8(nearestInt(iscale * scales[j]))
			}
			putF16(b[80:], maxScale/q4scale)
		} else {
			clear(sc)
			putF16(b[80:], 0)
		}
		if maxMin > 0 {
			iscale := q4scale / maxMin
			for j := range 16 {
				sc[j] |= uint8(nearestInt(iscale*mins[j]) << 4)
			}
			putF16(b[82:], maxMin/q4scale)
		} else {
			putF16(b[82:], 0)
		}
		d16, dmin16 := f16At(b[80:]), f16At(b[82:])
		for j := range 16 {
			d := d16 * float32(sc[j]&0xf)
			if d == 0 {
				continue
			}
			dm := float32(dmin16 * float32(sc[j]>>4)) // a product C rounds before x + dm
			for ii := range 16 {
				L[16*j+ii] = uint8(clampInt(nearestInt((x[16*j+ii]+dm)/d), 0, 3))
			}
		}
		qs := b[16:80]
		for j := 0; j < qkK; j += 128 {
			for l := range 32 {
				qs[j/4+l] = L[j+l] | L[j+l+32]<<2 | L[j+l+64]<<4 | L[j+l+96]<<6
			}
		}
		src, dst = src[qkK:], dst[84:]
	}
}

// --- Q3_K -------------------------------------------------------------------

// scaleQ3K is the j-th 6-bit scale of a Q3_K block, still offset by 32: low
// nibbles in bytes 0–7 (j and j−8), top 2 bits in bytes 8–11.
func scaleQ3K(sc []byte, j int) int32 {
	lo := sc[j%8] >> (4 * (j / 8)) & 0xf
	hi := sc[8+j%4] >> (2 * (j / 4)) & 3
	return int32(lo | hi<<4)
}

func dequantizeQ3_K(src []byte, dst []float32) {
	for i := range len(dst) / qkK {
		b, y := (*[110]byte)(src[110*i:]), (*[qkK]float32)(dst[qkK*i:])
		dAll := f16At(b[108:])
		hm, sc := (*[32]byte)(b[0:]), b[96:108]
		// As in Q2_K, plus one high bit per value from hmask: bit 4n+s of
		// hmask[l] for pass s of half n. A clear bit means "subtract 4".
		for n := range 2 {
			q := (*[32]byte)(b[32+32*n:])
			for s := range 4 {
				shift, bit := uint(2*s)&7, uint(4*n+s)&7 // "& 7": no Go shift-overflow check
				for half := range 2 {
					dl := dAll * float32(scaleQ3K(sc, 8*n+2*s+half)-32)
					qq, hh := (*[16]byte)(q[16*half:]), (*[16]byte)(hm[16*half:])
					yy := (*[16]float32)(y[128*n+32*s+16*half:])
					for l := range 16 {
						v := int32(qq[l]>>shift&3|(hh[l]>>bit&1)<<2) - 4
						yy[l] = dl * float32(v)
					}
				}
			}
		}
	}
}

// quantizeQ3_K mirrors quantize_row_q3_K_ref: a symmetric 3-bit fit per 16
// values (make_q3_quants), the 16 signed scales quantized to 6 bits against
// the one of largest magnitude, and the values requantized with them.
func quantizeQ3_K(src []float32, dst []byte) {
	var (
		L      [qkK]int8
		scales [16]float32
	)
	for len(src) >= qkK {
		x, b := src[:qkK:qkK], dst[:110:110]
		var maxScale, amax float32
		for j := range 16 {
			scales[j] = makeQ3Quants(4, x[16*j:16*j+16], L[16*j:16*j+16])
			if s := abs32(scales[j]); s > amax {
				amax, maxScale = s, scales[j]
			}
		}
		sc := b[96:108]
		clear(sc)
		if maxScale != 0 {
			iscale := -32 / maxScale
			for j := range 16 {
				// ggml truncates nearest_int to int8_t before clamping.
				l := max(-32, min(31, int8(nearestInt(iscale*scales[j])))) + 32
				if j < 8 {
					sc[j] = uint8(l) & 0xf
				} else {
					sc[j-8] |= (uint8(l) & 0xf) << 4
				}
				sc[j%4+8] |= uint8(l>>4) << (2 * (j / 4))
			}
			putF16(b[108:], 1/iscale)
		} else {
			putF16(b[108:], 0)
		}
		d16 := f16At(b[108:])
		for j := range 16 {
			d := d16 * float32(int8(scaleQ3K(sc, j)-32))
			if d == 0 {
				continue
			}
			for ii := range 16 {
				L[16*j+ii] = int8(clampInt(nearestInt(x[16*j+ii]/d), -4, 3) + 4)
			}
		}
		// The high bit of the first 32 values goes to bit 0 of hmask[0…31],
		// of the next 32 to bit 1, and so on.
		hmask := b[0:32]
		clear(hmask)
		for j := range qkK {
			if L[j] > 3 {
				hmask[j%32] |= 1 << (j / 32)
				L[j] -= 4
			}
		}
		qs := b[32:96]
		for j := 0; j < qkK; j += 128 {
			for l := range 32 {
				qs[j/4+l] = uint8(L[j+l]) | uint8(L[j+l+32])<<2 | uint8(L[j+l+64])<<4 | uint8(L[j+l+96])<<6
			}
		}
		src, dst = src[qkK:], dst[110:]
	}
}

// --- Q4_K and Q5_K ------------------------------------------------------------

func dequantizeQ4_K(src []byte, dst []float32) {
	for i := range len(dst) / qkK {
		b, y := (*[144]byte)(src[144*i:]), (*[qkK]float32)(dst[qkK*i:])
		d, dmin := f16At(b[:]), f16At(b[2:])
		scales := b[4:16]
		// Each 64 values: 32 bytes of qs, low nibbles first, two sub-blocks.
		for n := range 4 {
			sc, m := scaleMinK4(2*n, scales)
			d1, m1 := d*float32(sc), float32(dmin*float32(m))
			sc, m = scaleMinK4(2*n+1, scales)
			d2, m2 := d*float32(sc), float32(dmin*float32(m))
			qq, yy := (*[32]byte)(b[16+32*n:]), (*[64]float32)(y[64*n:])
			for l, q := range qq {
				yy[l] = float32(d1*float32(q&0xf)) - m1
				yy[32+l] = float32(d2*float32(q>>4)) - m2
			}
		}
	}
}

// fitK4 is the first half of quantize_row_q4_K_ref and q5_K_ref: per 32
// values an asymmetric fit (make_qkx2_quants, weights sqrt(mean x²) + |x|),
// then the 8 scales and 8 mins quantized to 6 bits against their maxima and
// packed at scales[0:12]. It returns the f16 super-scale and super-min.
func fitK4(x []float32, nmax int32, rmin, rdelta float32, nstep int, scalesOut []byte, L *[qkK]uint8) (d, dmin float32) {
	var (
		laux    [32]uint8
		weights [32]float32
		mins    [8]float32
		scales  [8]float32
	)
	var maxScale, maxMin float32
	for j := range 8 {
		xs := x[32*j : 32*j+32]
		var sumX2 float32
		for _, v := range xs {
			sumX2 += float32(v * v)
		}
		avX := float32(math.Sqrt(float64(sumX2 / 32)))
		for l, v := range xs {
			weights[l] = avX + abs32(v)
		}
		scales[j], mins[j] = makeQKX2Quants(nmax, xs, weights[:], L[32*j:32*j+32], laux[:], rmin, rdelta, nstep, false)
		if scales[j] > maxScale {
			maxScale = scales[j]
		}
		if mins[j] > maxMin {
			maxMin = mins[j]
		}
	}
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	for j := range 8 {
		// ggml stores nearest_int in a uint8_t, then clamps to 63.
		ls := min(63, uint8(nearestInt(invScale*scales[j])))
		lm := min(63, uint8(nearestInt(invMin*mins[j])))
		putScaleMinK4(scalesOut, j, ls, lm)
	}
	return maxScale / 63, maxMin / 63
}

// quantizeQ4_K mirrors quantize_row_q4_K_ref.
func quantizeQ4_K(src []float32, dst []byte) {
	var L [qkK]uint8
	for len(src) >= qkK {
		x, b := src[:qkK:qkK], dst[:144:144]
		d, dmin := fitK4(x, 15, -1, 0.1, 20, b[4:16], &L)
		putF16(b, d)
		putF16(b[2:], dmin)
		requantizeK4(x, b[4:16], f16At(b), f16At(b[2:]), 15, &L)
		q := b[16:144]
		for j := 0; j < qkK; j += 64 {
			for l := range 32 {
				q[j/2+l] = L[j+l] | L[j+l+32]<<4
			}
		}
		src, dst = src[qkK:], dst[144:]
	}
}

// requantizeK4 rounds every value again against its sub-block's decoded
// scale and min, as the second half of the Q4_K/Q5_K quantizers does; a
// sub-block whose scale decodes to zero keeps its levels from the fit.
func requantizeK4(x []float32, scales []byte, d16, dmin16 float32, nmax int32, L *[qkK]uint8) {
	for j := range 8 {
		sc, m := scaleMinK4(j, scales)
		d := d16 * float32(sc)
		if d == 0 {
			continue
		}
		dm := float32(dmin16 * float32(m))
		for ii := range 32 {
			L[32*j+ii] = uint8(clampInt(nearestInt((x[32*j+ii]+dm)/d), 0, nmax))
		}
	}
}

func dequantizeQ5_K(src []byte, dst []float32) {
	for i := range len(dst) / qkK {
		b, y := (*[176]byte)(src[176*i:]), (*[qkK]float32)(dst[qkK*i:])
		d, dmin := f16At(b[:]), f16At(b[2:])
		scales := b[4:16]
		qh := (*[32]byte)(b[16:])
		// As Q4_K, plus bit 4 of each value from qh: bits 2n and 2n+1 of
		// qh[l] for the low and high nibbles of the n-th 64 values.
		for n := range 4 {
			sc, m := scaleMinK4(2*n, scales)
			d1, m1 := d*float32(sc), float32(dmin*float32(m))
			sc, m = scaleMinK4(2*n+1, scales)
			d2, m2 := d*float32(sc), float32(dmin*float32(m))
			qq, yy := (*[32]byte)(b[48+32*n:]), (*[64]float32)(y[64*n:])
			shift := uint(2*n) & 7
			for l, q := range qq {
				h := qh[l] >> shift
				yy[l] = float32(d1*float32(q&0xf|(h&1)<<4)) - m1
				yy[32+l] = float32(d2*float32(q>>4|(h&2)<<3)) - m2
			}
		}
	}
}

// quantizeQ5_K mirrors quantize_row_q5_K_ref.
func quantizeQ5_K(src []float32, dst []byte) {
	var L [qkK]uint8
	for len(src) >= qkK {
		x, b := src[:qkK:qkK], dst[:176:176]
		d, dmin := fitK4(x, 31, -0.5, 0.1, 15, b[4:16], &L)
		putF16(b, d)
		putF16(b[2:], dmin)
		requantizeK4(x, b[4:16], f16At(b), f16At(b[2:]), 31, &L)
		// Bit 4 of value n+j (n a multiple of 64, j < 64) goes to qh[j%32]
		// bit 2·(n/64) + j/32; the low nibbles pair values j and j+32.
		qh := b[16:48]
		ql := b[48:176]
		clear(qh)
		m1, m2 := uint8(1), uint8(2)
		for n := 0; n < qkK; n += 64 {
			for j := range 32 {
				l1, l2 := L[n+j], L[n+j+32]
				if l1 > 15 {
					l1 -= 16
					qh[j] |= m1
				}
				if l2 > 15 {
					l2 -= 16
					qh[j] |= m2
				}
				ql[n/2+j] = l1 | l2<<4
			}
			m1 <<= 2
			m2 <<= 2
		}
		src, dst = src[qkK:], dst[176:]
	}
}

// --- Q6_K -------------------------------------------------------------------

func dequantizeQ6_K(src []byte, dst []float32) {
	for i := range len(dst) / qkK {
		b, y := (*[210]byte)(src[210*i:]), (*[qkK]float32)(dst[qkK*i:])
		d := f16At(b[208:])
		// Each 128 values: 64 bytes of ql (low nibbles, then high) and 32 of
		// qh (2 bits for each of 4 values), and 8 int8 scales of 16 values.
		for n := range 2 {
			ql, qh := (*[64]byte)(b[64*n:]), (*[32]byte)(b[128+32*n:])
			sc := (*[8]byte)(b[192+8*n:])
			yy := (*[128]float32)(y[128*n:])
			for l := range 32 {
				is := l / 16
				h := qh[l]
				q1 := int32(ql[l]&0xf|(h&3)<<4) - 32
				q2 := int32(ql[l+32]&0xf|(h>>2&3)<<4) - 32
				q3 := int32(ql[l]>>4|(h>>4&3)<<4) - 32
				q4 := int32(ql[l+32]>>4|(h>>6&3)<<4) - 32
				yy[l] = d * float32(int8(sc[is])) * float32(q1)
				yy[l+32] = d * float32(int8(sc[is+2])) * float32(q2)
				yy[l+64] = d * float32(int8(sc[is+4])) * float32(q3)
				yy[l+96] = d * float32(int8(sc[is+6])) * float32(q4)
			}
		}
	}
}

// quantizeQ6_K mirrors quantize_row_q6_K_ref: a symmetric 6-bit fit per 16
// values (make_qx_quants), the 16 scales quantized to int8 against the one
// of largest magnitude, then the values requantized.
func quantizeQ6_K(src []float32, dst []byte) {
	var (
		L      [qkK]int8
		scales [16]float32
	)
	for len(src) >= qkK {
		x, b := src[:qkK:qkK], dst[:210:210]
		var maxScale, maxAbsScale float32
		for ib := range 16 {
			scales[ib] = makeQXQuants(32, x[16*ib:16*ib+16], L[16*ib:16*ib+16])
			if a := abs32(scales[ib]); a > maxAbsScale {
				maxAbsScale, maxScale = a, scales[ib]
			}
		}
		if maxAbsScale < groupMaxEps {
			clear(b) // d = +0 is the zero bytes too
			src, dst = src[qkK:], dst[210:]
			continue
		}
		iscale := -128 / maxScale
		putF16(b[208:], 1/iscale)
		sc := b[192:208]
		for ib := range 16 {
			sc[ib] = uint8(int8(min(127, nearestInt(iscale*scales[ib]))))
		}
		d16 := f16At(b[208:])
		for j := range 16 {
			d := d16 * float32(int8(sc[j]))
			if d == 0 {
				continue
			}
			for ii := range 16 {
				L[16*j+ii] = int8(clampInt(nearestInt(x[16*j+ii]/d), -32, 31) + 32)
			}
		}
		for j := 0; j < qkK; j += 128 {
			ql, qh := b[j/2:j/2+64], b[128+j/4:128+j/4+32]
			for l := range 32 {
				q1, q2 := uint8(L[j+l]), uint8(L[j+l+32])
				q3, q4 := uint8(L[j+l+64]), uint8(L[j+l+96])
				ql[l] = q1&0xf | (q3&0xf)<<4
				ql[l+32] = q2&0xf | (q4&0xf)<<4
				qh[l] = q1>>4 | (q2>>4)<<2 | (q3>>4)<<4 | (q4>>4)<<6
			}
		}
		src, dst = src[qkK:], dst[210:]
	}
}

// --- Q8_K -------------------------------------------------------------------

func dequantizeQ8_K(src []byte, dst []float32) {
	for i := range len(dst) / qkK {
		b, y := (*[292]byte)(src[292*i:]), (*[qkK]float32)(dst[qkK*i:])
		d := math.Float32frombits(binary.LittleEndian.Uint32(b[:]))
		for j, q := range b[4:260] {
			y[j] = d * float32(int8(q))
		}
	}
}

// quantizeQ8_K mirrors quantize_row_q8_K_ref, the activation encoding of the
// K-quant vec_dots: iscale −127/max (not −128, which ggml's AVX IQ2_XXS
// kernel cannot take), levels clamped to 127, bsums the sums of each 16.
// An all-zero block gets d = 0, zero levels and zero bsums (ggml leaves
// bsums as they were).
func quantizeQ8_K(src []float32, dst []byte) {
	for len(src) >= qkK {
		x, b := src[:qkK:qkK], dst[:292:292]
		amax, max := absMaxSigned(x)
		if amax == 0 {
			clear(b)
			src, dst = src[qkK:], dst[292:]
			continue
		}
		iscale := -127 / max
		for j, v := range x {
			b[4+j] = uint8(int8(min(127, nearestInt(iscale*v))))
		}
		for j := range 16 {
			var sum int32
			for _, q := range b[4+16*j : 4+16*j+16] {
				sum += int32(int8(q))
			}
			binary.LittleEndian.PutUint16(b[260+2*j:], uint16(int16(sum)))
		}
		binary.LittleEndian.PutUint32(b, math.Float32bits(1/iscale))
		src, dst = src[qkK:], dst[292:]
	}
}
