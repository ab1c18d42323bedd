#include "textflag.h"
#include "avx2_amd64.h"

// Vector dequantizers (AVX2, F16C) for the Go declarations in
// dequant_amd64.go. Each widens 8 quantized values to 8 int32 lanes
// (VPMOVZXBD / VPMOVSXBD), converts them exactly to float32, and applies the
// block's scale with the scalar codec's operations in its order.

// STORE4(a, b, c, d) writes a block's four runs of 8 values to y and
// steps DI past them.
#define STORE4(a, b, c, d) \
	VMOVUPS a, (DI); \
	VMOVUPS b, 32(DI); \
	VMOVUPS c, 64(DI); \
	VMOVUPS d, 96(DI); \
	ADDQ $128, DI

// func dequantQ8_0AVX2(src *byte, dst *float32, blocks int)
// Block: d f16, qs int8[32]; y = float(q)·d.
TEXT ·dequantQ8_0AVX2(SB), NOSPLIT, $0-24
	MOVQ src+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ blocks+16(FP), CX
q8loop:
	Q8_0DECODE
	STORE4(Y1, Y2, Y3, Y4)
	ADDQ $34, SI
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
	SCALE4(Y3, Y4, Y1, Y2)
	STORE4(Y3, Y4, Y1, Y2)
	ADDQ $18, SI
	DECQ CX
	JNZ q4loop
	VZEROUPPER
	RET

// func dequantQ5_0AVX2(src *byte, dst *float32, blocks int)
// Block: d f16, qh u32, qs[16]; bit j of qh is bit 4 of value j;
// y = float(q−16)·d.
TEXT ·dequantQ5_0AVX2(SB), NOSPLIT, $0-24
	MOVQ src+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ blocks+16(FP), CX
	Q5_0SETUP
q5loop:
	Q5_0DECODE
	STORE4(Y3, Y4, Y1, Y2)
	ADDQ $22, SI
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

// Q4KCHUNK(l) writes values l…l+7 and 32+l… of a run of 64.
#define Q4KCHUNK(l) \
	Q4KLOW(l); \
	VMOVUPS Y4, (4*l)(DI); \
	Q4KHIGH(l); \
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

// Q6KCHUNK(l, s) writes the values l…l+7 of each quarter of a 128-value
// half; s is the byte offset of the first quarter's scale (is = l/16).
#define Q6KCHUNK(l, s) \
	Q6KQ1(l, s); \
	VMOVUPS Y4, (4*l)(DI); \
	Q6KQ2(l, (s+8)); \
	VMOVUPS Y4, (4*l+128)(DI); \
	Q6KQ3(l, (s+16)); \
	VMOVUPS Y4, (4*l+256)(DI); \
	Q6KQ4(l, (s+24)); \
	VMOVUPS Y4, (4*l+384)(DI)

// func dequantQ6KAVX2(b *byte, s *[16]float32, dst *float32)
// Two halves of 128 values: ql at b[64n:], qh at b[128+32n:], scales
// s[8n:8n+8] (one per 16 values).
TEXT ·dequantQ6KAVX2(SB), NOSPLIT, $0-24
	MOVQ b+0(FP), SI
	MOVQ s+8(FP), DX
	MOVQ dst+16(FP), DI
	LEAQ 128(SI), BX
	Q6KSETUP
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
