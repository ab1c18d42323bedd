package gguf

// TQ2_0, the 2-bit ternary format of BitNet b1.58 and TriLM models:
//
//	TQ2_0  qs[64]; d f16 @64   x = (q−1)·d, q in 0…2 (3 is never written)
//
// Byte qs[j+m] (j = 0 or 32, m < 32) holds values j·4+m+32n in bits 2n…2n+1,
// n = 0…3. TQ1_0 (5 trits per byte) is not implemented.

func dequantizeTQ2_0(src []byte, dst []float32) {
	for i := range len(dst) / qkK {
		b, y := (*[66]byte)(src[66*i:]), (*[qkK]float32)(dst[qkK*i:])
		d := f16At(b[64:])
		for n := range 2 {
			qs, yy := (*[32]byte)(b[32*n:]), (*[128]float32)(y[128*n:])
			for l := range 4 {
				shift, yl := uint(2*l)&7, (*[32]float32)(yy[32*l:])
				for m, q := range qs {
					yl[m] = float32(int32(q>>shift&3)-1) * d
				}
			}
		}
	}
}

// quantizeTQ2_0 mirrors quantize_row_tq2_0_ref: d is the block's largest
// |x| and each value rounds to −1, 0 or +1 of it.
func quantizeTQ2_0(src []float32, dst []byte) {
	for len(src) >= qkK {
		x, b := src[:qkK:qkK], dst[:66:66]
		d := absMax(x)
		id := inv(d)
		putF16(b[64:], d)
		for j := 0; j < 64; j += 32 {
			xs := x[4*j : 4*j+128]
			for m := range 32 {
				var q uint8
				for n := range 4 {
					xi := roundf(xs[m+32*n]*id) + 1 // lroundf
					q += uint8(xi&3) << (2 * n)
				}
				b[j+m] = q
			}
		}
		src, dst = src[qkK:], dst[66:]
	}
}

// TQ1_0 packs 5 trits per byte (1.6875 bits per value):
//
//	TQ1_0  qs[48]; qh[4] @48; d f16 @52   x = (t−1)·d, t in 0…2
//
// A byte holds trits t0…t4 as ⌈(Σ t_n·3^(4−n))·256/243⌉, so that the n-th
// trit is the top "digit" of byte·3^n (mod 256), read back as (b·3)>>8 with
// 8-bit wrap-around in between. qs[0:32] carry values m+32n (n < 5) of the
// first 160, qs[32:48] values 160+m+16n of the next 80, and qh[0:4] values
// 240+j+4n (n < 4, the fifth trit unused) of the last 16.

// pow3 is 3^n for the trit digits of TQ1_0.
var pow3 = [5]uint8{1, 3, 9, 27, 81}

// tritAt is the n-th trit of a TQ1_0 byte, minus one: −1, 0 or +1.
func tritAt(b uint8, n int) int32 {
	q := b * pow3[n] // wraps mod 256, as C's uint8_t does
	return int32(uint16(q)*3>>8) - 1
}

func dequantizeTQ1_0(src []byte, dst []float32) {
	for i := range len(dst) / qkK {
		b, y := (*[54]byte)(src[54*i:]), (*[qkK]float32)(dst[qkK*i:])
		d := f16At(b[52:])
		k := 0
		for _, g := range [...]struct{ off, width, trits int }{{0, 32, 5}, {32, 16, 5}, {48, 4, 4}} {
			for n := range g.trits {
				for _, q := range b[g.off : g.off+g.width] {
					y[k] = float32(tritAt(q, n)) * d
					k++
				}
			}
		}
	}
}

// quantizeTQ1_0 mirrors quantize_row_tq1_0_ref.
func quantizeTQ1_0(src []float32, dst []byte) {
	for i := range len(src) / qkK {
		x, b := (*[qkK]float32)(src[qkK*i:]), (*[54]byte)(dst[54*i:])
		d := absMax(x[:])
		id := inv(d)
		putF16(b[52:], d)
		k := 0 // first value of the current group
		for _, g := range [...]struct{ off, width, trits int }{{0, 32, 5}, {32, 16, 5}, {48, 4, 4}} {
			for m := range g.width {
				var q uint8
				for n := range g.trits {
					q = q*3 + uint8(roundf(x[k+m+g.width*n]*id)+1) // lroundf
				}
				if g.trits == 4 {
					q *= 3 // the first trit goes to the most significant digit
				}
				// ⌈q·256/243⌉ (243 = 3^5)
				b[g.off+m] = uint8((uint16(q)*256 + 242) / 243)
			}
			k += g.width * g.trits
		}
	}
}
