//go:build amd64 && !purego

#include "textflag.h"

// Edge kernels: the AVX2 micro-kernels of kernel_amd64.s for a tile of C that is short of rows
// (an m not a multiple of 6) or of columns (n not a multiple of 16 float32 or 8 float64),
// writing C in place where the full kernel would need a zero-padded copy of the tile.
//
// Per element they do the full kernel's arithmetic and nothing else, so they give its bits:
// the accumulator starts at +0 and takes one FMA per k step in order (the same packed panels,
// the same lane of the same instruction); then acc*alpha; then C = acc when beta is ±0 (C not
// read) or C = fma(beta, C, acc). Only which accumulators are kept and how they are stored
// differ: at most 2 or 4 rows run a loop of 4 or 8 accumulators (A's packed steps stay 6 values
// apart, the padding rows simply not read), at most half the columns (8 float32, 4 float64) a
// loop on the low half of B's steps only, and a row of fewer columns than the kernel's is
// stored through the frame, a vector at a time then one value at a time (a scalar FMA rounds
// as a lane of the vector one does). No masked stores: AMD's are microcoded and slow.
// rows >= 1 and cols >= 1 (the caller's tiles are never empty).

// func sgemmKernEdgeAVX2(kc int, a, b, c *float32, ldc int, alpha, beta float32, rows, cols int)
// The 6x16 kernel for a tile of rows x cols of C (1 <= rows <= 6, 1 <= cols <= 16).
TEXT ·sgemmKernEdgeAVX2(SB), 0, $384-64
	MOVQ kc+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ c+24(FP), DX
	MOVQ ldc+32(FP), R8
	SHLQ $2, R8
	MOVQ rows+48(FP), R9
	MOVQ cols+56(FP), R10
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
	JEQ   setail
	CMPQ  R10, $8
	JLE   sehalf
	CMPQ  R9, $2
	JLE   seloop2
	CMPQ  R9, $4
	JLE   seloop4
	JMP   seloop6
sehalf:
	CMPQ  R9, $2
	JLE   seloop2h
	CMPQ  R9, $4
	JLE   seloop4h
	JMP   seloop6h

seloop6:
	VMOVUPS      (DI), Y0
	VMOVUPS      32(DI), Y1
	VBROADCASTSS 0(SI), Y2
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
	JNZ          seloop6
	JMP          setail

seloop4:
	VMOVUPS      (DI), Y0
	VMOVUPS      32(DI), Y1
	VBROADCASTSS 0(SI), Y2
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
	ADDQ         $24, SI
	ADDQ         $64, DI
	DECQ         CX
	JNZ          seloop4
	JMP          setail

seloop2:
	VMOVUPS      (DI), Y0
	VMOVUPS      32(DI), Y1
	VBROADCASTSS 0(SI), Y2
	VBROADCASTSS 4(SI), Y3
	VFMADD231PS  Y0, Y2, Y4
	VFMADD231PS  Y1, Y2, Y5
	VFMADD231PS  Y0, Y3, Y6
	VFMADD231PS  Y1, Y3, Y7
	ADDQ         $24, SI
	ADDQ         $64, DI
	DECQ         CX
	JNZ          seloop2
	JMP          setail

seloop6h:
	VMOVUPS      (DI), Y0
	VBROADCASTSS 0(SI), Y2
	VBROADCASTSS 4(SI), Y3
	VFMADD231PS  Y0, Y2, Y4
	VFMADD231PS  Y0, Y3, Y6
	VBROADCASTSS 8(SI), Y2
	VBROADCASTSS 12(SI), Y3
	VFMADD231PS  Y0, Y2, Y8
	VFMADD231PS  Y0, Y3, Y10
	VBROADCASTSS 16(SI), Y2
	VBROADCASTSS 20(SI), Y3
	VFMADD231PS  Y0, Y2, Y12
	VFMADD231PS  Y0, Y3, Y14
	ADDQ         $24, SI
	ADDQ         $64, DI
	DECQ         CX
	JNZ          seloop6h
	JMP          setail

seloop4h:
	VMOVUPS      (DI), Y0
	VBROADCASTSS 0(SI), Y2
	VBROADCASTSS 4(SI), Y3
	VFMADD231PS  Y0, Y2, Y4
	VFMADD231PS  Y0, Y3, Y6
	VBROADCASTSS 8(SI), Y2
	VBROADCASTSS 12(SI), Y3
	VFMADD231PS  Y0, Y2, Y8
	VFMADD231PS  Y0, Y3, Y10
	ADDQ         $24, SI
	ADDQ         $64, DI
	DECQ         CX
	JNZ          seloop4h
	JMP          setail

seloop2h:
	VMOVUPS      (DI), Y0
	VBROADCASTSS 0(SI), Y2
	VBROADCASTSS 4(SI), Y3
	VFMADD231PS  Y0, Y2, Y4
	VFMADD231PS  Y0, Y3, Y6
	ADDQ         $24, SI
	ADDQ         $64, DI
	DECQ         CX
	JNZ          seloop2h

setail:
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
	VBROADCASTSS beta+44(FP), Y1
	MOVL         beta+44(FP), AX
	SHLL         $1, AX        // drop the sign: -0 counts as 0
	CMPQ         R10, $16
	JNE          separt
	TESTQ        AX, AX
	JNE          sebeta
	VMOVUPS      Y4, (DX)
	VMOVUPS      Y5, 32(DX)
	DECQ         R9
	JEQ          sedone
	ADDQ         R8, DX
	VMOVUPS      Y6, (DX)
	VMOVUPS      Y7, 32(DX)
	DECQ         R9
	JEQ          sedone
	ADDQ         R8, DX
	VMOVUPS      Y8, (DX)
	VMOVUPS      Y9, 32(DX)
	DECQ         R9
	JEQ          sedone
	ADDQ         R8, DX
	VMOVUPS      Y10, (DX)
	VMOVUPS      Y11, 32(DX)
	DECQ         R9
	JEQ          sedone
	ADDQ         R8, DX
	VMOVUPS      Y12, (DX)
	VMOVUPS      Y13, 32(DX)
	DECQ         R9
	JEQ          sedone
	ADDQ         R8, DX
	VMOVUPS      Y14, (DX)
	VMOVUPS      Y15, 32(DX)
	JMP          sedone

sebeta:
	VFMADD231PS  (DX), Y1, Y4
	VFMADD231PS  32(DX), Y1, Y5
	VMOVUPS      Y4, (DX)
	VMOVUPS      Y5, 32(DX)
	DECQ         R9
	JEQ          sedone
	ADDQ         R8, DX
	VFMADD231PS  (DX), Y1, Y6
	VFMADD231PS  32(DX), Y1, Y7
	VMOVUPS      Y6, (DX)
	VMOVUPS      Y7, 32(DX)
	DECQ         R9
	JEQ          sedone
	ADDQ         R8, DX
	VFMADD231PS  (DX), Y1, Y8
	VFMADD231PS  32(DX), Y1, Y9
	VMOVUPS      Y8, (DX)
	VMOVUPS      Y9, 32(DX)
	DECQ         R9
	JEQ          sedone
	ADDQ         R8, DX
	VFMADD231PS  (DX), Y1, Y10
	VFMADD231PS  32(DX), Y1, Y11
	VMOVUPS      Y10, (DX)
	VMOVUPS      Y11, 32(DX)
	DECQ         R9
	JEQ          sedone
	ADDQ         R8, DX
	VFMADD231PS  (DX), Y1, Y12
	VFMADD231PS  32(DX), Y1, Y13
	VMOVUPS      Y12, (DX)
	VMOVUPS      Y13, 32(DX)
	DECQ         R9
	JEQ          sedone
	ADDQ         R8, DX
	VFMADD231PS  (DX), Y1, Y14
	VFMADD231PS  32(DX), Y1, Y15
	VMOVUPS      Y14, (DX)
	VMOVUPS      Y15, 32(DX)
	JMP          sedone

// Partial columns: the rows go to the frame, 64 bytes each, and from there to C a
// vector of 8 then one value at a time, each value with the arithmetic of the full path.
separt:
	VMOVUPS      Y4, 0(SP)
	VMOVUPS      Y5, 32(SP)
	VMOVUPS      Y6, 64(SP)
	VMOVUPS      Y7, 96(SP)
	VMOVUPS      Y8, 128(SP)
	VMOVUPS      Y9, 160(SP)
	VMOVUPS      Y10, 192(SP)
	VMOVUPS      Y11, 224(SP)
	VMOVUPS      Y12, 256(SP)
	VMOVUPS      Y13, 288(SP)
	VMOVUPS      Y14, 320(SP)
	VMOVUPS      Y15, 352(SP)
	MOVQ         SP, R11
serow:
	XORQ         BX, BX
sevec:
	LEAQ         8(BX), R12
	CMPQ         R12, R10
	JGT          seone
	VMOVUPS      (R11)(BX*4), Y2
	TESTQ        AX, AX
	JEQ          sevst
	VFMADD231PS  (DX)(BX*4), Y1, Y2
sevst:
	VMOVUPS      Y2, (DX)(BX*4)
	MOVQ         R12, BX
	JMP          sevec
seone:
	CMPQ         BX, R10
	JGE          senext
	VMOVSS       (R11)(BX*4), X2
	TESTQ        AX, AX
	JEQ          seost
	VFMADD231SS  (DX)(BX*4), X1, X2
seost:
	VMOVSS       X2, (DX)(BX*4)
	INCQ         BX
	JMP          seone
senext:
	ADDQ         $64, R11
	ADDQ         R8, DX
	DECQ         R9
	JNZ          serow

sedone:
	VZEROUPPER
	RET

// func dgemmKernEdgeAVX2(kc int, a, b, c *float64, ldc int, alpha, beta float64, rows, cols int)
// The 6x8 kernel for a tile of rows x cols of C (1 <= rows <= 6, 1 <= cols <= 8).
TEXT ·dgemmKernEdgeAVX2(SB), 0, $384-72
	MOVQ kc+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ c+24(FP), DX
	MOVQ ldc+32(FP), R8
	SHLQ $3, R8
	MOVQ rows+56(FP), R9
	MOVQ cols+64(FP), R10
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
	JEQ   detail
	CMPQ  R10, $4
	JLE   dehalf
	CMPQ  R9, $2
	JLE   deloop2
	CMPQ  R9, $4
	JLE   deloop4
	JMP   deloop6
dehalf:
	CMPQ  R9, $2
	JLE   deloop2h
	CMPQ  R9, $4
	JLE   deloop4h
	JMP   deloop6h

deloop6:
	VMOVUPD      (DI), Y0
	VMOVUPD      32(DI), Y1
	VBROADCASTSD 0(SI), Y2
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
	JNZ          deloop6
	JMP          detail

deloop4:
	VMOVUPD      (DI), Y0
	VMOVUPD      32(DI), Y1
	VBROADCASTSD 0(SI), Y2
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
	ADDQ         $48, SI
	ADDQ         $64, DI
	DECQ         CX
	JNZ          deloop4
	JMP          detail

deloop2:
	VMOVUPD      (DI), Y0
	VMOVUPD      32(DI), Y1
	VBROADCASTSD 0(SI), Y2
	VBROADCASTSD 8(SI), Y3
	VFMADD231PD  Y0, Y2, Y4
	VFMADD231PD  Y1, Y2, Y5
	VFMADD231PD  Y0, Y3, Y6
	VFMADD231PD  Y1, Y3, Y7
	ADDQ         $48, SI
	ADDQ         $64, DI
	DECQ         CX
	JNZ          deloop2
	JMP          detail

deloop6h:
	VMOVUPD      (DI), Y0
	VBROADCASTSD 0(SI), Y2
	VBROADCASTSD 8(SI), Y3
	VFMADD231PD  Y0, Y2, Y4
	VFMADD231PD  Y0, Y3, Y6
	VBROADCASTSD 16(SI), Y2
	VBROADCASTSD 24(SI), Y3
	VFMADD231PD  Y0, Y2, Y8
	VFMADD231PD  Y0, Y3, Y10
	VBROADCASTSD 32(SI), Y2
	VBROADCASTSD 40(SI), Y3
	VFMADD231PD  Y0, Y2, Y12
	VFMADD231PD  Y0, Y3, Y14
	ADDQ         $48, SI
	ADDQ         $64, DI
	DECQ         CX
	JNZ          deloop6h
	JMP          detail

deloop4h:
	VMOVUPD      (DI), Y0
	VBROADCASTSD 0(SI), Y2
	VBROADCASTSD 8(SI), Y3
	VFMADD231PD  Y0, Y2, Y4
	VFMADD231PD  Y0, Y3, Y6
	VBROADCASTSD 16(SI), Y2
	VBROADCASTSD 24(SI), Y3
	VFMADD231PD  Y0, Y2, Y8
	VFMADD231PD  Y0, Y3, Y10
	ADDQ         $48, SI
	ADDQ         $64, DI
	DECQ         CX
	JNZ          deloop4h
	JMP          detail

deloop2h:
	VMOVUPD      (DI), Y0
	VBROADCASTSD 0(SI), Y2
	VBROADCASTSD 8(SI), Y3
	VFMADD231PD  Y0, Y2, Y4
	VFMADD231PD  Y0, Y3, Y6
	ADDQ         $48, SI
	ADDQ         $64, DI
	DECQ         CX
	JNZ          deloop2h

detail:
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
	VBROADCASTSD beta+48(FP), Y1
	MOVQ         beta+48(FP), AX
	SHLQ         $1, AX
	CMPQ         R10, $8
	JNE          depart
	TESTQ        AX, AX
	JNE          debeta
	VMOVUPD      Y4, (DX)
	VMOVUPD      Y5, 32(DX)
	DECQ         R9
	JEQ          dedone
	ADDQ         R8, DX
	VMOVUPD      Y6, (DX)
	VMOVUPD      Y7, 32(DX)
	DECQ         R9
	JEQ          dedone
	ADDQ         R8, DX
	VMOVUPD      Y8, (DX)
	VMOVUPD      Y9, 32(DX)
	DECQ         R9
	JEQ          dedone
	ADDQ         R8, DX
	VMOVUPD      Y10, (DX)
	VMOVUPD      Y11, 32(DX)
	DECQ         R9
	JEQ          dedone
	ADDQ         R8, DX
	VMOVUPD      Y12, (DX)
	VMOVUPD      Y13, 32(DX)
	DECQ         R9
	JEQ          dedone
	ADDQ         R8, DX
	VMOVUPD      Y14, (DX)
	VMOVUPD      Y15, 32(DX)
	JMP          dedone

debeta:
	VFMADD231PD  (DX), Y1, Y4
	VFMADD231PD  32(DX), Y1, Y5
	VMOVUPD      Y4, (DX)
	VMOVUPD      Y5, 32(DX)
	DECQ         R9
	JEQ          dedone
	ADDQ         R8, DX
	VFMADD231PD  (DX), Y1, Y6
	VFMADD231PD  32(DX), Y1, Y7
	VMOVUPD      Y6, (DX)
	VMOVUPD      Y7, 32(DX)
	DECQ         R9
	JEQ          dedone
	ADDQ         R8, DX
	VFMADD231PD  (DX), Y1, Y8
	VFMADD231PD  32(DX), Y1, Y9
	VMOVUPD      Y8, (DX)
	VMOVUPD      Y9, 32(DX)
	DECQ         R9
	JEQ          dedone
	ADDQ         R8, DX
	VFMADD231PD  (DX), Y1, Y10
	VFMADD231PD  32(DX), Y1, Y11
	VMOVUPD      Y10, (DX)
	VMOVUPD      Y11, 32(DX)
	DECQ         R9
	JEQ          dedone
	ADDQ         R8, DX
	VFMADD231PD  (DX), Y1, Y12
	VFMADD231PD  32(DX), Y1, Y13
	VMOVUPD      Y12, (DX)
	VMOVUPD      Y13, 32(DX)
	DECQ         R9
	JEQ          dedone
	ADDQ         R8, DX
	VFMADD231PD  (DX), Y1, Y14
	VFMADD231PD  32(DX), Y1, Y15
	VMOVUPD      Y14, (DX)
	VMOVUPD      Y15, 32(DX)
	JMP          dedone

// Partial columns: the rows go to the frame, 64 bytes each, and from there to C a
// vector of 4 then one value at a time, each value with the arithmetic of the full path.
depart:
	VMOVUPD      Y4, 0(SP)
	VMOVUPD      Y5, 32(SP)
	VMOVUPD      Y6, 64(SP)
	VMOVUPD      Y7, 96(SP)
	VMOVUPD      Y8, 128(SP)
	VMOVUPD      Y9, 160(SP)
	VMOVUPD      Y10, 192(SP)
	VMOVUPD      Y11, 224(SP)
	VMOVUPD      Y12, 256(SP)
	VMOVUPD      Y13, 288(SP)
	VMOVUPD      Y14, 320(SP)
	VMOVUPD      Y15, 352(SP)
	MOVQ         SP, R11
derow:
	XORQ         BX, BX
devec:
	LEAQ         4(BX), R12
	CMPQ         R12, R10
	JGT          deone
	VMOVUPD      (R11)(BX*8), Y2
	TESTQ        AX, AX
	JEQ          devst
	VFMADD231PD  (DX)(BX*8), Y1, Y2
devst:
	VMOVUPD      Y2, (DX)(BX*8)
	MOVQ         R12, BX
	JMP          devec
deone:
	CMPQ         BX, R10
	JGE          denext
	VMOVSD       (R11)(BX*8), X2
	TESTQ        AX, AX
	JEQ          deost
	VFMADD231SD  (DX)(BX*8), X1, X2
deost:
	VMOVSD       X2, (DX)(BX*8)
	INCQ         BX
	JMP          deone
denext:
	ADDQ         $64, R11
	ADDQ         R8, DX
	DECQ         R9
	JNZ          derow

dedone:
	VZEROUPPER
	RET
