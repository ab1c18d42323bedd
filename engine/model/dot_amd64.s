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
