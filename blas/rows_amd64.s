//go:build amd64 && !purego

#include "textflag.h"

// func copyRowsAVX(dst, src unsafe.Pointer, off *int, kc, gb, size int)
TEXT ·copyRowsAVX(SB), NOSPLIT, $0-48
	MOVQ  dst+0(FP), DI
	MOVQ  src+8(FP), SI
	MOVQ  off+16(FP), R9
	MOVQ  kc+24(FP), CX
	MOVQ  gb+32(FP), DX
	MOVQ  size+40(FP), R10
	TESTQ CX, CX
	JEQ   crdone
	CMPQ  DX, $64
	JEQ   cr64
	JGT   cr128

cr32:
	MOVQ    (R9), AX
	IMULQ   R10, AX
	VMOVUPS (SI)(AX*1), Y0
	VMOVUPS Y0, (DI)
	ADDQ    $8, R9
	ADDQ    $32, DI
	DECQ    CX
	JNZ     cr32
	JMP     crdone

cr64:
	MOVQ    (R9), AX
	IMULQ   R10, AX
	VMOVUPS (SI)(AX*1), Y0
	VMOVUPS 32(SI)(AX*1), Y1
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	ADDQ    $8, R9
	ADDQ    $64, DI
	DECQ    CX
	JNZ     cr64
	JMP     crdone

cr128:
	MOVQ    (R9), AX
	IMULQ   R10, AX
	VMOVUPS (SI)(AX*1), Y0
	VMOVUPS 32(SI)(AX*1), Y1
	VMOVUPS 64(SI)(AX*1), Y2
	VMOVUPS 96(SI)(AX*1), Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $8, R9
	ADDQ    $128, DI
	DECQ    CX
	JNZ     cr128

crdone:
	VZEROUPPER
	RET
