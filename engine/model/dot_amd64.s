#include "textflag.h"

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

// The fused decode kernels below dequantize a row block by block exactly
// as gguf's vector dequantizers do and feed each run of 8 weights straight
// into the accumulator dotFMA would use for it (runs alternate between the
// two), so their sum is bit for bit dotFMA of the dequantized row: decode
// skips writing the row and reading it back.

#define F16SCALE \
	VPBROADCASTW (SI), X0; \
	VCVTPH2PS X0, Y0

#define BCAST32(v, x, y) \
	MOVL $v, AX; \
	VMOVD AX, x; \
	VPBROADCASTD x, y

// func dotQ8_0FMA(row *byte, x *float32, blocks int) float32
TEXT ·dotQ8_0FMA(SB), NOSPLIT, $0-28
	MOVQ row+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ blocks+16(FP), CX
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
fq8loop:
	F16SCALE
	VPMOVSXBD 2(SI), Y1
	VPMOVSXBD 10(SI), Y2
	VPMOVSXBD 18(SI), Y3
	VPMOVSXBD 26(SI), Y4
	VCVTDQ2PS Y1, Y1
	VCVTDQ2PS Y2, Y2
	VCVTDQ2PS Y3, Y3
	VCVTDQ2PS Y4, Y4
	VMULPS Y0, Y1, Y1
	VMULPS Y0, Y2, Y2
	VMULPS Y0, Y3, Y3
	VMULPS Y0, Y4, Y4
	VFMADD231PS (DI), Y1, Y7
	VFMADD231PS 32(DI), Y2, Y8
	VFMADD231PS 64(DI), Y3, Y7
	VFMADD231PS 96(DI), Y4, Y8
	ADDQ $34, SI
	ADDQ $128, DI
	DECQ CX
	JNZ fq8loop
	REDUCE(Y7, Y8, X7, X8)
	VMOVSS X7, ret+24(FP)
	VZEROUPPER
	RET

DATA lanes<>+0(SB)/4, $0
DATA lanes<>+4(SB)/4, $1
DATA lanes<>+8(SB)/4, $2
DATA lanes<>+12(SB)/4, $3
DATA lanes<>+16(SB)/4, $4
DATA lanes<>+20(SB)/4, $5
DATA lanes<>+24(SB)/4, $6
DATA lanes<>+28(SB)/4, $7
DATA lanes<>+32(SB)/4, $8
DATA lanes<>+36(SB)/4, $9
DATA lanes<>+40(SB)/4, $10
DATA lanes<>+44(SB)/4, $11
DATA lanes<>+48(SB)/4, $12
DATA lanes<>+52(SB)/4, $13
DATA lanes<>+56(SB)/4, $14
DATA lanes<>+60(SB)/4, $15
DATA lanes<>+64(SB)/4, $16
DATA lanes<>+68(SB)/4, $17
DATA lanes<>+72(SB)/4, $18
DATA lanes<>+76(SB)/4, $19
DATA lanes<>+80(SB)/4, $20
DATA lanes<>+84(SB)/4, $21
DATA lanes<>+88(SB)/4, $22
DATA lanes<>+92(SB)/4, $23
DATA lanes<>+96(SB)/4, $24
DATA lanes<>+100(SB)/4, $25
DATA lanes<>+104(SB)/4, $26
DATA lanes<>+108(SB)/4, $27
DATA lanes<>+112(SB)/4, $28
DATA lanes<>+116(SB)/4, $29
DATA lanes<>+120(SB)/4, $30
DATA lanes<>+124(SB)/4, $31
GLOBL lanes<>(SB), RODATA|NOPTR, $128

// Q5HIGH(shifts, q) ORs bit 4 into the 8 nibbles of q: bit k of qh (Y5)
// for lane k of shifts.
#define Q5HIGH(shifts, q) \
	VPSRLVD shifts, Y5, Y6; \
	VPAND Y13, Y6, Y6; \
	VPSLLD $4, Y6, Y6; \
	VPOR Y6, q, q

// func dotQ5_0FMA(row *byte, x *float32, blocks int) float32
TEXT ·dotQ5_0FMA(SB), NOSPLIT, $0-28
	MOVQ row+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ blocks+16(FP), CX
	BCAST32(15, X15, Y15)
	BCAST32(16, X14, Y14)
	BCAST32(1, X13, Y13)
	VMOVDQU lanes<>+0(SB), Y9
	VMOVDQU lanes<>+32(SB), Y10
	VMOVDQU lanes<>+64(SB), Y11
	VMOVDQU lanes<>+96(SB), Y12
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
fq5loop:
	F16SCALE
	VPBROADCASTD 2(SI), Y5
	VPMOVZXBD 6(SI), Y1
	VPMOVZXBD 14(SI), Y2
	VPAND Y15, Y1, Y3
	VPAND Y15, Y2, Y4
	VPSRLD $4, Y1, Y1
	VPSRLD $4, Y2, Y2
	Q5HIGH(Y9, Y3)
	Q5HIGH(Y10, Y4)
	Q5HIGH(Y11, Y1)
	Q5HIGH(Y12, Y2)
	VPSUBD Y14, Y3, Y3
	VPSUBD Y14, Y4, Y4
	VPSUBD Y14, Y1, Y1
	VPSUBD Y14, Y2, Y2
	VCVTDQ2PS Y3, Y3
	VCVTDQ2PS Y4, Y4
	VCVTDQ2PS Y1, Y1
	VCVTDQ2PS Y2, Y2
	VMULPS Y0, Y3, Y3
	VMULPS Y0, Y4, Y4
	VMULPS Y0, Y1, Y1
	VMULPS Y0, Y2, Y2
	VFMADD231PS (DI), Y3, Y7
	VFMADD231PS 32(DI), Y4, Y8
	VFMADD231PS 64(DI), Y1, Y7
	VFMADD231PS 96(DI), Y2, Y8
	ADDQ $22, SI
	ADDQ $128, DI
	DECQ CX
	JNZ fq5loop
	REDUCE(Y7, Y8, X7, X8)
	VMOVSS X7, ret+24(FP)
	VZEROUPPER
	RET

// The K-quant kernels take one super-block per call and carry the two
// accumulators in acc between calls; the caller sums their lanes as REDUCE
// does. They multiply out the scales as gguf's dequantizers do (d·scale,
// dmin·min, one rounding each) into sm or s: Q4_K's caller has put its
// unpacked 6-bit scales and mins there as floats, Q6_K's kernel reads its
// int8 scales itself. Values go into the accumulators in index
// order, as dotFMA adds them.

// Q4KLOW(l, acc) / Q4KHIGH(l, acc): values l…l+7 (low nibbles of qs[l:],
// float(q)·Y0 − Y1) or 32+l… (high nibbles, float(q)·Y2 − Y3) of a run of
// 64, times x.
#define Q4KLOW(l, acc) \
	VPMOVZXBD l(SI), Y4; \
	VPAND Y15, Y4, Y4; \
	VCVTDQ2PS Y4, Y4; \
	VMULPS Y0, Y4, Y4; \
	VSUBPS Y1, Y4, Y4; \
	VFMADD231PS (4*l)(DI), Y4, acc

#define Q4KHIGH(l, acc) \
	VPMOVZXBD l(SI), Y4; \
	VPSRLD $4, Y4, Y4; \
	VCVTDQ2PS Y4, Y4; \
	VMULPS Y2, Y4, Y4; \
	VSUBPS Y3, Y4, Y4; \
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
	Q4KLOW(0, Y7)
	Q4KLOW(8, Y8)
	Q4KLOW(16, Y7)
	Q4KLOW(24, Y8)
	Q4KHIGH(0, Y7)
	Q4KHIGH(8, Y8)
	Q4KHIGH(16, Y7)
	Q4KHIGH(24, Y8)
	ADDQ $32, SI
	ADDQ $8, DX
	ADDQ $256, DI
	DECQ CX
	JNZ fq4kloop
	VMOVUPS Y7, (BX)
	VMOVUPS Y8, 32(BX)
	VZEROUPPER
	RET

// Q6KFMA(lo, hi, s, xoff, acc): q = (lo | hi<<4) − 32 in Ylo, times the
// scale at s(DX), times x at xoff(DI), into acc.
#define Q6KFMA(lo, hi, s, xoff, acc) \
	VPSLLD $4, hi, hi; \
	VPOR hi, lo, lo; \
	VPSUBD Y13, lo, lo; \
	VCVTDQ2PS lo, lo; \
	VBROADCASTSS s(DX), Y6; \
	VMULPS Y6, lo, lo; \
	VFMADD231PS xoff(DI), lo, acc

// Q6KQ1…Q6KQ4(l, s, acc): values l…l+7 of quarter 1…4 of a 128-value
// half (ql at SI, qh at BX); s is the byte offset of the quarter's scale.
#define Q6KQ1(l, s, acc) \
	VPMOVZXBD l(SI), Y4; \
	VPMOVZXBD l(BX), Y5; \
	VPAND Y15, Y4, Y4; \
	VPAND Y14, Y5, Y5; \
	Q6KFMA(Y4, Y5, s, (4*l), acc)

#define Q6KQ2(l, s, acc) \
	VPMOVZXBD (l+32)(SI), Y4; \
	VPMOVZXBD l(BX), Y5; \
	VPAND Y15, Y4, Y4; \
	VPSRLD $2, Y5, Y5; \
	VPAND Y14, Y5, Y5; \
	Q6KFMA(Y4, Y5, s, (4*l+128), acc)

#define Q6KQ3(l, s, acc) \
	VPMOVZXBD l(SI), Y4; \
	VPMOVZXBD l(BX), Y5; \
	VPSRLD $4, Y4, Y4; \
	VPSRLD $4, Y5, Y5; \
	VPAND Y14, Y5, Y5; \
	Q6KFMA(Y4, Y5, s, (4*l+256), acc)

#define Q6KQ4(l, s, acc) \
	VPMOVZXBD (l+32)(SI), Y4; \
	VPMOVZXBD l(BX), Y5; \
	VPSRLD $4, Y4, Y4; \
	VPSRLD $6, Y5, Y5; \
	Q6KFMA(Y4, Y5, s, (4*l+384), acc)

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
	BCAST32(15, X15, Y15)
	BCAST32(3, X14, Y14)
	BCAST32(32, X13, Y13)
	MOVQ $2, CX
fq6kloop:
	Q6KQ1(0, 0, Y7)
	Q6KQ1(8, 0, Y8)
	Q6KQ1(16, 4, Y7)
	Q6KQ1(24, 4, Y8)
	Q6KQ2(0, 8, Y7)
	Q6KQ2(8, 8, Y8)
	Q6KQ2(16, 12, Y7)
	Q6KQ2(24, 12, Y8)
	Q6KQ3(0, 16, Y7)
	Q6KQ3(8, 16, Y8)
	Q6KQ3(16, 20, Y7)
	Q6KQ3(24, 20, Y8)
	Q6KQ4(0, 24, Y7)
	Q6KQ4(8, 24, Y8)
	Q6KQ4(16, 28, Y7)
	Q6KQ4(24, 28, Y8)
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
