//go:build amd64 && !purego

#include "textflag.h"

// Micro-kernels: C[0:MR, 0:NR] = alpha*(Ap·Bp) + beta*C over kc packed steps.
// Ap holds MR values of a column of op(A) per step, Bp NR values of a row of op(B) per step.
// Each accumulator sums its k terms in order with one FMA per term, so a result depends only
// on the packed panels, never on which goroutine runs the kernel.
// beta == 0 never reads C (it may hold NaN). C rows are ldc elements apart.

// func sgemmKernAVX2(kc int, a, b, c *float32, ldc int, alpha, beta float32)
// MR = 6, NR = 16.
TEXT ·sgemmKernAVX2(SB), NOSPLIT, $0-48
	MOVQ kc+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ c+24(FP), DX
	MOVQ ldc+32(FP), R8
	SHLQ $2, R8
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VXORPS Y14, Y14, Y14
	VXORPS Y15, Y15, Y15
	TESTQ CX, CX
	JEQ   s2tail

s2loop:
	VMOVUPS      (DI), Y0
	VMOVUPS      32(DI), Y1
	VBROADCASTSS (SI), Y2
	VBROADCASTSS 4(SI), Y3
	VFMADD231PS  Y0, Y2, Y4
	VFMADD231PS  Y1, Y2, Y5
	VFMADD231PS  Y0, Y3, Y6
	VFMADD231PS  Y1, Y3, Y7
	VBROADCASTSS 8(SI), Y2
	VBROADCASTSS 12(SI), Y3
	VFMADD231PS  Y0, Y2, Y8
	VFMADD231PS  Y1, Y2, Y9
	VFMADD231PS  Y0, Y3, Y10
	VFMADD231PS  Y1, Y3, Y11
	VBROADCASTSS 16(SI), Y2
	VBROADCASTSS 20(SI), Y3
	VFMADD231PS  Y0, Y2, Y12
	VFMADD231PS  Y1, Y2, Y13
	VFMADD231PS  Y0, Y3, Y14
	VFMADD231PS  Y1, Y3, Y15
	ADDQ         $24, SI
	ADDQ         $64, DI
	DECQ         CX
	JNZ          s2loop

s2tail:
	VBROADCASTSS alpha+40(FP), Y0
	VMULPS       Y0, Y4, Y4
	VMULPS       Y0, Y5, Y5
	VMULPS       Y0, Y6, Y6
	VMULPS       Y0, Y7, Y7
	VMULPS       Y0, Y8, Y8
	VMULPS       Y0, Y9, Y9
	VMULPS       Y0, Y10, Y10
	VMULPS       Y0, Y11, Y11
	VMULPS       Y0, Y12, Y12
	VMULPS       Y0, Y13, Y13
	VMULPS       Y0, Y14, Y14
	VMULPS       Y0, Y15, Y15
	MOVL         beta+44(FP), AX
	SHLL         $1, AX        // drop the sign: -0 counts as 0
	JNE          s2beta
	VMOVUPS      Y4, (DX)
	VMOVUPS      Y5, 32(DX)
	ADDQ         R8, DX
	VMOVUPS      Y6, (DX)
	VMOVUPS      Y7, 32(DX)
	ADDQ         R8, DX
	VMOVUPS      Y8, (DX)
	VMOVUPS      Y9, 32(DX)
	ADDQ         R8, DX
	VMOVUPS      Y10, (DX)
	VMOVUPS      Y11, 32(DX)
	ADDQ         R8, DX
	VMOVUPS      Y12, (DX)
	VMOVUPS      Y13, 32(DX)
	ADDQ         R8, DX
	VMOVUPS      Y14, (DX)
	VMOVUPS      Y15, 32(DX)
	VZEROUPPER
	RET

s2beta:
	VBROADCASTSS beta+44(FP), Y1
	VFMADD231PS  (DX), Y1, Y4
	VFMADD231PS  32(DX), Y1, Y5
	VMOVUPS      Y4, (DX)
	VMOVUPS      Y5, 32(DX)
	ADDQ         R8, DX
	VFMADD231PS  (DX), Y1, Y6
	VFMADD231PS  32(DX), Y1, Y7
	VMOVUPS      Y6, (DX)
	VMOVUPS      Y7, 32(DX)
	ADDQ         R8, DX
	VFMADD231PS  (DX), Y1, Y8
	VFMADD231PS  32(DX), Y1, Y9
	VMOVUPS      Y8, (DX)
	VMOVUPS      Y9, 32(DX)
	ADDQ         R8, DX
	VFMADD231PS  (DX), Y1, Y10
	VFMADD231PS  32(DX), Y1, Y11
	VMOVUPS      Y10, (DX)
	VMOVUPS      Y11, 32(DX)
	ADDQ         R8, DX
	VFMADD231PS  (DX), Y1, Y12
	VFMADD231PS  32(DX), Y1, Y13
	VMOVUPS      Y12, (DX)
	VMOVUPS      Y13, 32(DX)
	ADDQ         R8, DX
	VFMADD231PS  (DX), Y1, Y14
	VFMADD231PS  32(DX), Y1, Y15
	VMOVUPS      Y14, (DX)
	VMOVUPS      Y15, 32(DX)
	VZEROUPPER
	RET

// func dgemmKernAVX2(kc int, a, b, c *float64, ldc int, alpha, beta float64)
// MR = 6, NR = 8.
TEXT ·dgemmKernAVX2(SB), NOSPLIT, $0-56
	MOVQ kc+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ c+24(FP), DX
	MOVQ ldc+32(FP), R8
	SHLQ $3, R8
	VXORPD Y4, Y4, Y4
	VXORPD Y5, Y5, Y5
	VXORPD Y6, Y6, Y6
	VXORPD Y7, Y7, Y7
	VXORPD Y8, Y8, Y8
	VXORPD Y9, Y9, Y9
	VXORPD Y10, Y10, Y10
	VXORPD Y11, Y11, Y11
	VXORPD Y12, Y12, Y12
	VXORPD Y13, Y13, Y13
	VXORPD Y14, Y14, Y14
	VXORPD Y15, Y15, Y15
	TESTQ CX, CX
	JEQ   d2tail

d2loop:
	VMOVUPD      (DI), Y0
	VMOVUPD      32(DI), Y1
	VBROADCASTSD (SI), Y2
	VBROADCASTSD 8(SI), Y3
	VFMADD231PD  Y0, Y2, Y4
	VFMADD231PD  Y1, Y2, Y5
	VFMADD231PD  Y0, Y3, Y6
	VFMADD231PD  Y1, Y3, Y7
	VBROADCASTSD 16(SI), Y2
	VBROADCASTSD 24(SI), Y3
	VFMADD231PD  Y0, Y2, Y8
	VFMADD231PD  Y1, Y2, Y9
	VFMADD231PD  Y0, Y3, Y10
	VFMADD231PD  Y1, Y3, Y11
	VBROADCASTSD 32(SI), Y2
	VBROADCASTSD 40(SI), Y3
	VFMADD231PD  Y0, Y2, Y12
	VFMADD231PD  Y1, Y2, Y13
	VFMADD231PD  Y0, Y3, Y14
	VFMADD231PD  Y1, Y3, Y15
	ADDQ         $48, SI
	ADDQ         $64, DI
	DECQ         CX
	JNZ          d2loop

d2tail:
	VBROADCASTSD alpha+40(FP), Y0
	VMULPD       Y0, Y4, Y4
	VMULPD       Y0, Y5, Y5
	VMULPD       Y0, Y6, Y6
	VMULPD       Y0, Y7, Y7
	VMULPD       Y0, Y8, Y8
	VMULPD       Y0, Y9, Y9
	VMULPD       Y0, Y10, Y10
	VMULPD       Y0, Y11, Y11
	VMULPD       Y0, Y12, Y12
	VMULPD       Y0, Y13, Y13
	VMULPD       Y0, Y14, Y14
	VMULPD       Y0, Y15, Y15
	MOVQ         beta+48(FP), AX
	SHLQ         $1, AX
	JNE          d2beta
	VMOVUPD      Y4, (DX)
	VMOVUPD      Y5, 32(DX)
	ADDQ         R8, DX
	VMOVUPD      Y6, (DX)
	VMOVUPD      Y7, 32(DX)
	ADDQ         R8, DX
	VMOVUPD      Y8, (DX)
	VMOVUPD      Y9, 32(DX)
	ADDQ         R8, DX
	VMOVUPD      Y10, (DX)
	VMOVUPD      Y11, 32(DX)
	ADDQ         R8, DX
	VMOVUPD      Y12, (DX)
	VMOVUPD      Y13, 32(DX)
	ADDQ         R8, DX
	VMOVUPD      Y14, (DX)
	VMOVUPD      Y15, 32(DX)
	VZEROUPPER
	RET

d2beta:
	VBROADCASTSD beta+48(FP), Y1
	VFMADD231PD  (DX), Y1, Y4
	VFMADD231PD  32(DX), Y1, Y5
	VMOVUPD      Y4, (DX)
	VMOVUPD      Y5, 32(DX)
	ADDQ         R8, DX
	VFMADD231PD  (DX), Y1, Y6
	VFMADD231PD  32(DX), Y1, Y7
	VMOVUPD      Y6, (DX)
	VMOVUPD      Y7, 32(DX)
	ADDQ         R8, DX
	VFMADD231PD  (DX), Y1, Y8
	VFMADD231PD  32(DX), Y1, Y9
	VMOVUPD      Y8, (DX)
	VMOVUPD      Y9, 32(DX)
	ADDQ         R8, DX
	VFMADD231PD  (DX), Y1, Y10
	VFMADD231PD  32(DX), Y1, Y11
	VMOVUPD      Y10, (DX)
	VMOVUPD      Y11, 32(DX)
	ADDQ         R8, DX
	VFMADD231PD  (DX), Y1, Y12
	VFMADD231PD  32(DX), Y1, Y13
	VMOVUPD      Y12, (DX)
	VMOVUPD      Y13, 32(DX)
	ADDQ         R8, DX
	VFMADD231PD  (DX), Y1, Y14
	VFMADD231PD  32(DX), Y1, Y15
	VMOVUPD      Y14, (DX)
	VMOVUPD      Y15, 32(DX)
	VZEROUPPER
	RET
