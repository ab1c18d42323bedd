// Block decoding shared by the vector dequantizers (dequant_amd64.s) and
// the fused dot kernels (dot_amd64.s). Both must turn a block into the same
// float32 values with the same operations, one rounding each, so that a
// fused dot is bit for bit the dot of the dequantized row; keeping one
// copy of the decoding is what holds them together.

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

// SCALE4(a, b, c, d) converts the int32 lanes of the four registers to
// float32 (exact below 2^24) and multiplies them by the block scale Y0.
#define SCALE4(a, b, c, d) \
	VCVTDQ2PS a, a; \
	VCVTDQ2PS b, b; \
	VCVTDQ2PS c, c; \
	VCVTDQ2PS d, d; \
	VMULPS Y0, a, a; \
	VMULPS Y0, b, b; \
	VMULPS Y0, c, c; \
	VMULPS Y0, d, d

// Q8_0DECODE decodes the Q8_0 block at SI (d f16, qs int8[32]) to
// float(q)·d: values 0…7 in Y1, 8…15 in Y2, 16…23 in Y3, 24…31 in Y4.
#define Q8_0DECODE \
	F16SCALE; \
	VPMOVSXBD 2(SI), Y1; \
	VPMOVSXBD 10(SI), Y2; \
	VPMOVSXBD 18(SI), Y3; \
	VPMOVSXBD 26(SI), Y4; \
	SCALE4(Y1, Y2, Y3, Y4)

// Q5_0SETUP loads Q5_0DECODE's constants: Y15 = 15, Y14 = 16, Y13 = 1 and
// the lane numbers 0…31 (·q5Lanes) in Y9…Y12.
#define Q5_0SETUP \
	BCAST32(15, X15, Y15); \
	BCAST32(16, X14, Y14); \
	BCAST32(1, X13, Y13); \
	VMOVDQU ·q5Lanes+0(SB), Y9; \
	VMOVDQU ·q5Lanes+32(SB), Y10; \
	VMOVDQU ·q5Lanes+64(SB), Y11; \
	VMOVDQU ·q5Lanes+96(SB), Y12

// Q5HIGH(shifts, q) ORs bit 4 into the 8 nibbles of q: bit k of qh (Y5)
// for lane k of shifts.
#define Q5HIGH(shifts, q) \
	VPSRLVD shifts, Y5, Y6; \
	VPAND Y13, Y6, Y6; \
	VPSLLD $4, Y6, Y6; \
	VPOR Y6, q, q

// Q5_0DECODE decodes the Q5_0 block at SI (d f16, qh u32, qs[16]; bit j
// of qh is bit 4 of value j) to float(q−16)·d: values 0…7 in Y3, 8…15 in
// Y4, 16…23 in Y1, 24…31 in Y2. It needs Q5_0SETUP's constants.
#define Q5_0DECODE \
	F16SCALE; \
	VPBROADCASTD 2(SI), Y5; \
	VPMOVZXBD 6(SI), Y1; \
	VPMOVZXBD 14(SI), Y2; \
	VPAND Y15, Y1, Y3; \
	VPAND Y15, Y2, Y4; \
	VPSRLD $4, Y1, Y1; \
	VPSRLD $4, Y2, Y2; \
	Q5HIGH(Y9, Y3); \
	Q5HIGH(Y10, Y4); \
	Q5HIGH(Y11, Y1); \
	Q5HIGH(Y12, Y2); \
	VPSUBD Y14, Y3, Y3; \
	VPSUBD Y14, Y4, Y4; \
	VPSUBD Y14, Y1, Y1; \
	VPSUBD Y14, Y2, Y2; \
	SCALE4(Y3, Y4, Y1, Y2)

// Q4KLOW(l) and Q4KHIGH(l) decode 8 values of a Q4_K run of 64 (32 bytes
// of qs at SI, Y15 = 15) into Y4: the low nibbles of qs[l:l+8] as
// float(q)·Y0 − Y1 (values l…l+7), or the high ones as float(q)·Y2 − Y3
// (values 32+l…).
#define Q4KLOW(l) \
	VPMOVZXBD l(SI), Y4; \
	VPAND Y15, Y4, Y4; \
	VCVTDQ2PS Y4, Y4; \
	VMULPS Y0, Y4, Y4; \
	VSUBPS Y1, Y4, Y4

#define Q4KHIGH(l) \
	VPMOVZXBD l(SI), Y4; \
	VPSRLD $4, Y4, Y4; \
	VCVTDQ2PS Y4, Y4; \
	VMULPS Y2, Y4, Y4; \
	VSUBPS Y3, Y4, Y4

// Q6KSETUP loads the Q6_K constants: Y15 = 15, Y14 = 3, Y13 = 32.
#define Q6KSETUP \
	BCAST32(15, X15, Y15); \
	BCAST32(3, X14, Y14); \
	BCAST32(32, X13, Y13)

// Q6KVAL(s) finishes 8 values: Y4 holds the low 4 bits, Y5 the top 2
// (already in bits 0–1); Y4 = float((lo | hi<<4) − 32) times the scale at
// s(DX).
#define Q6KVAL(s) \
	VPSLLD $4, Y5, Y5; \
	VPOR Y5, Y4, Y4; \
	VPSUBD Y13, Y4, Y4; \
	VCVTDQ2PS Y4, Y4; \
	VBROADCASTSS s(DX), Y6; \
	VMULPS Y6, Y4, Y4

// Q6KQ1…Q6KQ4(l, s) decode values l…l+7 of quarter 1…4 of a 128-value
// half of a Q6_K block (ql at SI, qh at BX) into Y4; s is the byte offset
// of the quarter's scale at DX.
#define Q6KQ1(l, s) \
	VPMOVZXBD l(SI), Y4; \
	VPMOVZXBD l(BX), Y5; \
	VPAND Y15, Y4, Y4; \
	VPAND Y14, Y5, Y5; \
	Q6KVAL(s)

#define Q6KQ2(l, s) \
	VPMOVZXBD (l+32)(SI), Y4; \
	VPMOVZXBD l(BX), Y5; \
	VPAND Y15, Y4, Y4; \
	VPSRLD $2, Y5, Y5; \
	VPAND Y14, Y5, Y5; \
	Q6KVAL(s)

#define Q6KQ3(l, s) \
	VPMOVZXBD l(SI), Y4; \
	VPMOVZXBD l(BX), Y5; \
	VPSRLD $4, Y4, Y4; \
	VPSRLD $4, Y5, Y5; \
	VPAND Y14, Y5, Y5; \
	Q6KVAL(s)

#define Q6KQ4(l, s) \
	VPMOVZXBD (l+32)(SI), Y4; \
	VPMOVZXBD l(BX), Y5; \
	VPSRLD $4, Y4, Y4; \
	VPSRLD $6, Y5, Y5; \
	Q6KVAL(s)
