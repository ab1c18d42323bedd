#include "textflag.h"

// Vector dequantizers (AVX2, F16C) for the Go declarations in
// dequant_amd64.go. Each widens 8 quantized values to 8 int32 lanes
// (VPMOVZXBD / VPMOVSXBD), converts them exactly to float32, and applies the
// block's scale with the scalar codec's operations in its order.

// BCAST32(v, x, y) sets every dword of y (x its low half) to the constant
// v, via AX.
#define BCAST32(v, x, y) \
	MOVL $v, AX; \
	VMOVD AX, x; \
	VPBROADCASTD x, y

// F16SCALE broadcasts the binary16 at (SI), widened, to Y0.
#define F16SCALE \
	VPBROADCASTW (SI), X0; \
	VCVTPH2PS X0, Y0

// func dequantQ8_0AVX2(src *byte, dst *float32, blocks int)
// Block: d f16, qs int8[32]; y = float(q)·d.
TEXT ·dequantQ8_0AVX2(SB), NOSPLIT, $0-24
	MOVQ src+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ blocks+16(FP), CX
q8loop:
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
	VMOVUPS Y1, (DI)
	VMOVUPS Y2, 32(DI)
	VMOVUPS Y3, 64(DI)
	VMOVUPS Y4, 96(DI)
	ADDQ $34, SI
	ADDQ $128, DI
	DECQ CX
	JNZ q8loop
	VZEROUPPER
	RET

// func dequantQ4_0AVX2(src *byte, dst *float32, blocks int)
// Block: d f16, qs[16]; value j is the low nibble of qs[j], j+16 the high
// one; y = float(q−8)·d.
TEXT ·dequantQ4_0AVX2(SB), NOSPLIT, $0-24
	MOVQ src+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ blocks+16(FP), CX
	BCAST32(15, X15, Y15)
	BCAST32(8, X14, Y14)
q4loop:
	F16SCALE
	VPMOVZXBD 2(SI), Y1
	VPMOVZXBD 10(SI), Y2
	VPAND Y15, Y1, Y3
	VPAND Y15, Y2, Y4
	VPSRLD $4, Y1, Y1
	VPSRLD $4, Y2, Y2
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
	VMOVUPS Y3, (DI)
	VMOVUPS Y4, 32(DI)
	VMOVUPS Y1, 64(DI)
	VMOVUPS Y2, 96(DI)
	ADDQ $18, SI
	ADDQ $128, DI
	DECQ CX
	JNZ q4loop
	VZEROUPPER
	RET

// lanes<> holds 0…31, the bit of qh that is bit 4 of each value of a Q5_0
// block.
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

// Q5HIGH(shifts, q) ORs bit 4 into the 8 nibbles of Yq: bit k of qh (Y5)
// for lane k of Y<shifts>.
#define Q5HIGH(shifts, q) \
	VPSRLVD shifts, Y5, Y6; \
	VPAND Y13, Y6, Y6; \
	VPSLLD $4, Y6, Y6; \
	VPOR Y6, q, q

// func dequantQ5_0AVX2(src *byte, dst *float32, blocks int)
// Block: d f16, qh u32, qs[16]; bit j of qh is bit 4 of value j;
// y = float(q−16)·d.
TEXT ·dequantQ5_0AVX2(SB), NOSPLIT, $0-24
	MOVQ src+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ blocks+16(FP), CX
	BCAST32(15, X15, Y15)
	BCAST32(16, X14, Y14)
	BCAST32(1, X13, Y13)
	VMOVDQU lanes<>+0(SB), Y9
	VMOVDQU lanes<>+32(SB), Y10
	VMOVDQU lanes<>+64(SB), Y11
	VMOVDQU lanes<>+96(SB), Y12
q5loop:
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
	VMOVUPS Y3, (DI)
	VMOVUPS Y4, 32(DI)
	VMOVUPS Y1, 64(DI)
	VMOVUPS Y2, 96(DI)
	ADDQ $22, SI
	ADDQ $128, DI
	DECQ CX
	JNZ q5loop
	VZEROUPPER
	RET

// func dequantF16AVX2(src *byte, dst *float32, n int)
// n is a positive multiple of 8.
TEXT ·dequantF16AVX2(SB), NOSPLIT, $0-24
	MOVQ src+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ n+16(FP), CX
f16loop:
	VCVTPH2PS (SI), Y0
	VMOVUPS Y0, (DI)
	ADDQ $16, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JNZ f16loop
	VZEROUPPER
	RET

// Q4KCHUNK(l) decodes qs[l:l+8] (SI): low nibbles to y[l:l+8] as
// float(q)·Y0 − Y1, high nibbles to y[32+l:40+l] as float(q)·Y2 − Y3.
#define Q4KCHUNK(l) \
	VPMOVZXBD l(SI), Y4; \
	VPAND Y15, Y4, Y5; \
	VPSRLD $4, Y4, Y4; \
	VCVTDQ2PS Y5, Y5; \
	VCVTDQ2PS Y4, Y4; \
	VMULPS Y0, Y5, Y5; \
	VMULPS Y2, Y4, Y4; \
	VSUBPS Y1, Y5, Y5; \
	VSUBPS Y3, Y4, Y4; \
	VMOVUPS Y5, (4*l)(DI); \
	VMOVUPS Y4, (4*l+128)(DI)

// func dequantQ4KAVX2(qs *byte, sm *[16]float32, dst *float32)
// Four runs of 64 values, each 32 bytes of qs: low nibbles are sub-block
// 2n (scale sm[2n], min sm[8+2n]), high nibbles sub-block 2n+1.
TEXT ·dequantQ4KAVX2(SB), NOSPLIT, $0-24
	MOVQ qs+0(FP), SI
	MOVQ sm+8(FP), DX
	MOVQ dst+16(FP), DI
	BCAST32(15, X15, Y15)
	MOVQ $4, CX
q4kloop:
	VBROADCASTSS (DX), Y0
	VBROADCASTSS 32(DX), Y1
	VBROADCASTSS 4(DX), Y2
	VBROADCASTSS 36(DX), Y3
	Q4KCHUNK(0)
	Q4KCHUNK(8)
	Q4KCHUNK(16)
	Q4KCHUNK(24)
	ADDQ $32, SI
	ADDQ $8, DX
	ADDQ $256, DI
	DECQ CX
	JNZ q4kloop
	VZEROUPPER
	RET

// Q6KPART(lo, hi, s, y) finishes one run of 8 values: Ylo holds the low 4
// bits, Yhi the top 2 (already in bits 0–1); y = float((lo | hi<<4) − 32)·s.
#define Q6KPART(lo, hi, s, y) \
	VPSLLD $4, hi, hi; \
	VPOR hi, lo, lo; \
	VPSUBD Y13, lo, lo; \
	VCVTDQ2PS lo, lo; \
	VBROADCASTSS s(DX), Y7; \
	VMULPS Y7, lo, lo; \
	VMOVUPS lo, y(DI)

// Q6KCHUNK(l, s) decodes the values l…l+7 of each quarter of a 128-value
// half: ql (SI) bytes l and l+32, qh (BX) byte l; s is the byte offset of
// the first quarter's scale (is = l/16).
#define Q6KCHUNK(l, s) \
	VPMOVZXBD l(SI), Y1; \
	VPMOVZXBD (l+32)(SI), Y2; \
	VPMOVZXBD l(BX), Y3; \
	VPAND Y15, Y1, Y4; \
	VPAND Y14, Y3, Y5; \
	Q6KPART(Y4, Y5, s, (4*l)); \
	VPAND Y15, Y2, Y4; \
	VPSRLD $2, Y3, Y5; \
	VPAND Y14, Y5, Y5; \
	Q6KPART(Y4, Y5, (s+8), (4*l+128)); \
	VPSRLD $4, Y1, Y4; \
	VPSRLD $4, Y3, Y5; \
	VPAND Y14, Y5, Y5; \
	Q6KPART(Y4, Y5, (s+16), (4*l+256)); \
	VPSRLD $4, Y2, Y4; \
	VPSRLD $6, Y3, Y5; \
	Q6KPART(Y4, Y5, (s+24), (4*l+384))

// func dequantQ6KAVX2(b *byte, s *[16]float32, dst *float32)
// Two halves of 128 values: ql at b[64n:], qh at b[128+32n:], scales
// s[8n:8n+8] (one per 16 values).
TEXT ·dequantQ6KAVX2(SB), NOSPLIT, $0-24
	MOVQ b+0(FP), SI
	MOVQ s+8(FP), DX
	MOVQ dst+16(FP), DI
	LEAQ 128(SI), BX
	BCAST32(15, X15, Y15)
	BCAST32(3, X14, Y14)
	BCAST32(32, X13, Y13)
	MOVQ $2, CX
q6kloop:
	Q6KCHUNK(0, 0)
	Q6KCHUNK(8, 0)
	Q6KCHUNK(16, 4)
	Q6KCHUNK(24, 4)
	ADDQ $64, SI
	ADDQ $32, BX
	ADDQ $32, DX
	ADDQ $512, DI
	DECQ CX
	JNZ q6kloop
	VZEROUPPER
	RET
