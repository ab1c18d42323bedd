#include "textflag.h"
#include "avx2_amd64.h"

// dotFMA and dot4FMA sum the same way, so a token's products come out bit
// for bit alike whether it is dotted alone (decode) or with three others
// (prefill): two 8-lane accumulators over runs of 16, a last run of 8 into
// the first, the two added, the lanes summed by halves (4+4, 2+2, 1+1),
// then the n%8 tail in order.

// REDUCE(a, b, xa, xb) leaves Σ lanes of Ya+Yb in the low float of Xa.
#define REDUCE(a, b, xa, xb) \
	VADDPS b, a, a; \
	VEXTRACTF128 $1, a, xb; \
	VADDPS xb, xa, xa; \
	VMOVHLPS xa, xa, xb; \
	VADDPS xb, xa, xa; \
	VPSHUFD $1, xa, xb; \
	VADDSS xb, xa, xa

// func dotFMA(a, b *float32, n int) float32
TEXT ·dotFMA(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
loop16:
	CMPQ CX, $16
	JLT loop8
	VMOVUPS (SI), Y8
	VMOVUPS 32(SI), Y9
	VFMADD231PS (DI), Y8, Y0
	VFMADD231PS 32(DI), Y9, Y1
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP loop16
loop8:
	CMPQ CX, $8
	JLT reduce
	VMOVUPS (SI), Y8
	VFMADD231PS (DI), Y8, Y0
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
reduce:
	REDUCE(Y0, Y1, X0, X1)
tail:
	TESTQ CX, CX
	JZ done
	VMOVSS (SI), X1
	VFMADD231SS (DI), X1, X0
	ADDQ $4, SI
	ADDQ $4, DI
	DECQ CX
	JMP tail
done:
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func dot4FMA(w, x *float32, stride, n int, out *[4]float32)
// out[t] = Σ w[i]·x[t·stride+i] for t < 4, i < n.
TEXT ·dot4FMA(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ stride+16(FP), AX
	MOVQ n+24(FP), CX
	SHLQ $2, AX
	LEAQ (DI)(AX*1), R8
	LEAQ (R8)(AX*1), R9
	LEAQ (R9)(AX*1), R10
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
d4loop16:
	CMPQ CX, $16
	JLT d4loop8
	VMOVUPS (SI), Y8
	VMOVUPS 32(SI), Y9
	VFMADD231PS (DI), Y8, Y0
	VFMADD231PS 32(DI), Y9, Y1
	VFMADD231PS (R8), Y8, Y2
	VFMADD231PS 32(R8), Y9, Y3
	VFMADD231PS (R9), Y8, Y4
	VFMADD231PS 32(R9), Y9, Y5
	VFMADD231PS (R10), Y8, Y6
	VFMADD231PS 32(R10), Y9, Y7
	ADDQ $64, SI
	ADDQ $64, DI
	ADDQ $64, R8
	ADDQ $64, R9
	ADDQ $64, R10
	SUBQ $16, CX
	JMP d4loop16
d4loop8:
	CMPQ CX, $8
	JLT d4reduce
	VMOVUPS (SI), Y8
	VFMADD231PS (DI), Y8, Y0
	VFMADD231PS (R8), Y8, Y2
	VFMADD231PS (R9), Y8, Y4
	VFMADD231PS (R10), Y8, Y6
	ADDQ $32, SI
	ADDQ $32, DI
	ADDQ $32, R8
	ADDQ $32, R9
	ADDQ $32, R10
	SUBQ $8, CX
d4reduce:
	REDUCE(Y0, Y1, X0, X1)
	REDUCE(Y2, Y3, X2, X3)
	REDUCE(Y4, Y5, X4, X5)
	REDUCE(Y6, Y7, X6, X7)
d4tail:
	TESTQ CX, CX
	JZ d4done
	VMOVSS (SI), X8
	VFMADD231SS (DI), X8, X0
	VFMADD231SS (R8), X8, X2
	VFMADD231SS (R9), X8, X4
	VFMADD231SS (R10), X8, X6
	ADDQ $4, SI
	ADDQ $4, DI
	ADDQ $4, R8
	ADDQ $4, R9
	ADDQ $4, R10
	DECQ CX
	JMP d4tail
d4done:
	MOVQ out+32(FP), DX
	VMOVSS X0, (DX)
	VMOVSS X2, 4(DX)
	VMOVSS X4, 8(DX)
	VMOVSS X6, 12(DX)
	VZEROUPPER
	RET

// The fused decode kernels below dequantize a row block by block with the
// vector dequantizers' decoding (avx2_amd64.h) and feed each run of 8 weights straight
// into the accumulator dotFMA would use for it (runs alternate between the
// two), so their sum is bit for bit dotFMA of the dequantized row: decode
// skips writing the row and reading it back.

// BLOCKFMA(a, b, c, d) adds a block's four runs of 8 values times x into
// the accumulators Y7, Y8, Y7, Y8 and steps DI past the block's x.
#define BLOCKFMA(a, b, c, d) \
	VFMADD231PS (DI), a, Y7; \
	VFMADD231PS 32(DI), b, Y8; \
	VFMADD231PS 64(DI), c, Y7; \
	VFMADD231PS 96(DI), d, Y8; \
	ADDQ $128, DI

// func dotQ8_0FMA(row *byte, x *float32, blocks int) float32
TEXT ·dotQ8_0FMA(SB), NOSPLIT, $0-28
	MOVQ row+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ blocks+16(FP), CX
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
fq8loop:
	Q8_0DECODE
	BLOCKFMA(Y1, Y2, Y3, Y4)
	ADDQ $34, SI
	DECQ CX
	JNZ fq8loop
	REDUCE(Y7, Y8, X7, X8)
	VMOVSS X7, ret+24(FP)
	VZEROUPPER
	RET

// func dotQ5_0FMA(row *byte, x *float32, blocks int) float32
TEXT ·dotQ5_0FMA(SB), NOSPLIT, $0-28
	MOVQ row+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ blocks+16(FP), CX
	Q5_0SETUP
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
fq5loop:
	Q5_0DECODE
	BLOCKFMA(Y3, Y4, Y1, Y2)
	ADDQ $22, SI
	DECQ CX
	JNZ fq5loop
	REDUCE(Y7, Y8, X7, X8)
	VMOVSS X7, ret+24(FP)
	VZEROUPPER
	RET

// The K-quant kernels take one super-block per call and carry the two
// accumulators in acc between calls; the caller sums their lanes as REDUCE
// does. They multiply out the scales as the dequantizers do (d·scale,
// dmin·min, one rounding each) into sm or s: Q4_K's caller has put its
// unpacked 6-bit scales and mins there as floats, Q6_K's kernel reads its
// int8 scales itself. Values go into the accumulators in index
// order, as dotFMA adds them.

// Q4KLOWDOT(l, acc) and Q4KHIGHDOT(l, acc) add the 8 values Q4KLOW(l) or
// Q4KHIGH(l) decodes, times x, into acc.
#define Q4KLOWDOT(l, acc) \
	Q4KLOW(l); \
	VFMADD231PS (4*l)(DI), Y4, acc

#define Q4KHIGHDOT(l, acc) \
	Q4KHIGH(l); \
	VFMADD231PS (4*l+128)(DI), Y4, acc

// func dotQ4KFMA(b *byte, sm *[16]float32, x *float32, acc *[16]float32)
TEXT ·dotQ4KFMA(SB), NOSPLIT, $0-32
	MOVQ b+0(FP), SI
	MOVQ sm+8(FP), DX
	MOVQ x+16(FP), DI
	MOVQ acc+24(FP), BX
	F16SCALE
	VMULPS (DX), Y0, Y1
	VMOVUPS Y1, (DX)
	VPBROADCASTW 2(SI), X0
	VCVTPH2PS X0, Y0
	VMULPS 32(DX), Y0, Y1
	VMOVUPS Y1, 32(DX)
	ADDQ $16, SI
	VMOVUPS (BX), Y7
	VMOVUPS 32(BX), Y8
	BCAST32(15, X15, Y15)
	MOVQ $4, CX
fq4kloop:
	VBROADCASTSS (DX), Y0
	VBROADCASTSS 32(DX), Y1
	VBROADCASTSS 4(DX), Y2
	VBROADCASTSS 36(DX), Y3
	Q4KLOWDOT(0, Y7)
	Q4KLOWDOT(8, Y8)
	Q4KLOWDOT(16, Y7)
	Q4KLOWDOT(24, Y8)
	Q4KHIGHDOT(0, Y7)
	Q4KHIGHDOT(8, Y8)
	Q4KHIGHDOT(16, Y7)
	Q4KHIGHDOT(24, Y8)
	ADDQ $32, SI
	ADDQ $8, DX
	ADDQ $256, DI
	DECQ CX
	JNZ fq4kloop
	VMOVUPS Y7, (BX)
	VMOVUPS Y8, 32(BX)
	VZEROUPPER
	RET

// Q6KDOT1…Q6KDOT4(l, s, acc) add values l…l+7 of quarter 1…4 of a
// 128-value half, times x, into acc; s is the byte offset of the quarter's
// scale.
#define Q6KDOT1(l, s, acc) \
	Q6KQ1(l, s); \
	VFMADD231PS (4*l)(DI), Y4, acc

#define Q6KDOT2(l, s, acc) \
	Q6KQ2(l, s); \
	VFMADD231PS (4*l+128)(DI), Y4, acc

#define Q6KDOT3(l, s, acc) \
	Q6KQ3(l, s); \
	VFMADD231PS (4*l+256)(DI), Y4, acc

#define Q6KDOT4(l, s, acc) \
	Q6KQ4(l, s); \
	VFMADD231PS (4*l+384)(DI), Y4, acc

// func dotQ6KFMA(b *byte, s *[16]float32, x *float32, acc *[16]float32)
TEXT ·dotQ6KFMA(SB), NOSPLIT, $0-32
	MOVQ b+0(FP), SI
	MOVQ s+8(FP), DX
	MOVQ x+16(FP), DI
	MOVQ acc+24(FP), AX
	VMOVUPS (AX), Y7
	VMOVUPS 32(AX), Y8
	VPBROADCASTW 208(SI), X0
	VCVTPH2PS X0, Y0
	VPMOVSXBD 192(SI), Y1
	VPMOVSXBD 200(SI), Y2
	VCVTDQ2PS Y1, Y1
	VCVTDQ2PS Y2, Y2
	VMULPS Y1, Y0, Y1
	VMULPS Y2, Y0, Y2
	VMOVUPS Y1, (DX)
	VMOVUPS Y2, 32(DX)
	LEAQ 128(SI), BX
	Q6KSETUP
	MOVQ $2, CX
fq6kloop:
	Q6KDOT1(0, 0, Y7)
	Q6KDOT1(8, 0, Y8)
	Q6KDOT1(16, 4, Y7)
	Q6KDOT1(24, 4, Y8)
	Q6KDOT2(0, 8, Y7)
	Q6KDOT2(8, 8, Y8)
	Q6KDOT2(16, 12, Y7)
	Q6KDOT2(24, 12, Y8)
	Q6KDOT3(0, 16, Y7)
	Q6KDOT3(8, 16, Y8)
	Q6KDOT3(16, 20, Y7)
	Q6KDOT3(24, 20, Y8)
	Q6KDOT4(0, 24, Y7)
	Q6KDOT4(8, 24, Y8)
	Q6KDOT4(16, 28, Y7)
	Q6KDOT4(24, 28, Y8)
	ADDQ $64, SI
	ADDQ $32, BX
	ADDQ $32, DX
	ADDQ $512, DI
	DECQ CX
	JNZ fq6kloop
	MOVQ acc+24(FP), AX
	VMOVUPS Y7, (AX)
	VMOVUPS Y8, 32(AX)
	VZEROUPPER
	RET
