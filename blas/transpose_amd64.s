//go:build amd64 && !purego

#include "textflag.h"

// Transposes for the GEMM's packing: dst[p*ld+r] = src[r*lds+p] for r < rows, p < kc, in
// blocks of 8x8 float32 or 4x4 float64 (one YMM register per row piece and per column).
// rows is 1 to 8 (float32) or 1 to 4 (float64); kc is at least 8 (float32) or 4 (float64):
// past a multiple of the block, the last block is redone ending at kc (rewriting some columns
// with the same values), so there is no scalar tail. Every column is stored whole (8 or 4
// values) in increasing order: below a full block the missing rows are zero, so the lanes past
// rows write zeros into the group's padding or into the next column's values, which that
// column's own store then overwrites. The Go side keeps the last column's store inside dst.
// lds and ld are in bytes. Only AVX (not AVX2) instructions are used.

// func transposeF32AVX(dst, src unsafe.Pointer, lds, ld, kc, rows int)
TEXT ·transposeF32AVX(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ lds+16(FP), R8
	MOVQ ld+24(FP), R11
	MOVQ kc+32(FP), CX
	MOVQ rows+40(FP), BX
	LEAQ (R8)(R8*2), R9    // 3*lds
	LEAQ (R11)(R11*2), R12 // 3*ld
	LEAQ (SI)(R8*4), R10   // row 4
	LEAQ (DI)(R11*4), R13  // column 4

t32loop:
	CMPQ CX, $8
	JLT  t32tail
	CMPQ BX, $8
	JLT  t32part

	// Y(i) = [row i | row i+4] of columns 0-3, Y(4+i) the same of columns 4-7, for i < 4.
	VMOVUPS     (SI), X0
	VMOVUPS     16(SI), X4
	VMOVUPS     (SI)(R8*1), X1
	VMOVUPS     16(SI)(R8*1), X5
	VMOVUPS     (SI)(R8*2), X2
	VMOVUPS     16(SI)(R8*2), X6
	VMOVUPS     (SI)(R9*1), X3
	VMOVUPS     16(SI)(R9*1), X7
	VINSERTF128 $1, (R10), Y0, Y0
	VINSERTF128 $1, 16(R10), Y4, Y4
	VINSERTF128 $1, (R10)(R8*1), Y1, Y1
	VINSERTF128 $1, 16(R10)(R8*1), Y5, Y5
	VINSERTF128 $1, (R10)(R8*2), Y2, Y2
	VINSERTF128 $1, 16(R10)(R8*2), Y6, Y6
	VINSERTF128 $1, (R10)(R9*1), Y3, Y3
	VINSERTF128 $1, 16(R10)(R9*1), Y7, Y7
	JMP         t32shuf

t32part:
	// Fewer than 8 rows: absent rows are zero (a VEX 128-bit load clears the upper half).
	VMOVUPS (SI), X0
	VMOVUPS 16(SI), X4
	CMPQ    BX, $2
	JLT     t32z1
	VMOVUPS (SI)(R8*1), X1
	VMOVUPS 16(SI)(R8*1), X5
	CMPQ    BX, $3
	JLT     t32z2
	VMOVUPS (SI)(R8*2), X2
	VMOVUPS 16(SI)(R8*2), X6
	CMPQ    BX, $4
	JLT     t32z3
	VMOVUPS (SI)(R9*1), X3
	VMOVUPS 16(SI)(R9*1), X7
	CMPQ    BX, $5
	JLT     t32shuf
	VINSERTF128 $1, (R10), Y0, Y0
	VINSERTF128 $1, 16(R10), Y4, Y4
	CMPQ    BX, $6
	JLT     t32shuf
	VINSERTF128 $1, (R10)(R8*1), Y1, Y1
	VINSERTF128 $1, 16(R10)(R8*1), Y5, Y5
	CMPQ    BX, $7
	JLT     t32shuf
	VINSERTF128 $1, (R10)(R8*2), Y2, Y2
	VINSERTF128 $1, 16(R10)(R8*2), Y6, Y6
	JMP     t32shuf

t32z1:
	VXORPS X1, X1, X1
	VXORPS X5, X5, X5

t32z2:
	VXORPS X2, X2, X2
	VXORPS X6, X6, X6

t32z3:
	VXORPS X3, X3, X3
	VXORPS X7, X7, X7

t32shuf:
	// A 4x4 transpose in each 128-bit lane: lane 0 gives rows 0-3, lane 1 rows 4-7 of a column.
	VUNPCKLPS Y1, Y0, Y8
	VUNPCKHPS Y1, Y0, Y9
	VUNPCKLPS Y3, Y2, Y10
	VUNPCKHPS Y3, Y2, Y11
	VSHUFPS   $0x44, Y10, Y8, Y0
	VSHUFPS   $0xEE, Y10, Y8, Y1
	VSHUFPS   $0x44, Y11, Y9, Y2
	VSHUFPS   $0xEE, Y11, Y9, Y3
	VUNPCKLPS Y5, Y4, Y8
	VUNPCKHPS Y5, Y4, Y9
	VUNPCKLPS Y7, Y6, Y10
	VUNPCKHPS Y7, Y6, Y11
	VSHUFPS   $0x44, Y10, Y8, Y4
	VSHUFPS   $0xEE, Y10, Y8, Y5
	VSHUFPS   $0x44, Y11, Y9, Y6
	VSHUFPS   $0xEE, Y11, Y9, Y7
	VMOVUPS   Y0, (DI)
	VMOVUPS   Y1, (DI)(R11*1)
	VMOVUPS   Y2, (DI)(R11*2)
	VMOVUPS   Y3, (DI)(R12*1)
	VMOVUPS   Y4, (R13)
	VMOVUPS   Y5, (R13)(R11*1)
	VMOVUPS   Y6, (R13)(R11*2)
	VMOVUPS   Y7, (R13)(R12*1)
	ADDQ      $32, SI
	ADDQ      $32, R10
	LEAQ      (DI)(R11*8), DI
	LEAQ      (R13)(R11*8), R13
	SUBQ      $8, CX
	JMP       t32loop

t32tail:
	// CX columns (0 to 7) are left: step back 8-CX columns and do one last whole block.
	TESTQ CX, CX
	JEQ   t32done
	MOVQ  $8, AX
	SUBQ  CX, AX
	MOVQ  AX, DX
	SHLQ  $2, DX
	SUBQ  DX, SI
	SUBQ  DX, R10
	IMULQ R11, AX
	SUBQ  AX, DI
	SUBQ  AX, R13
	MOVQ  $8, CX
	JMP   t32loop

t32done:
	VZEROUPPER
	RET

// func transposeF64AVX(dst, src unsafe.Pointer, lds, ld, kc, rows int)
TEXT ·transposeF64AVX(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ lds+16(FP), R8
	MOVQ ld+24(FP), R11
	MOVQ kc+32(FP), CX
	MOVQ rows+40(FP), BX
	LEAQ (R8)(R8*2), R9    // 3*lds
	LEAQ (R11)(R11*2), R12 // 3*ld

t64loop:
	CMPQ CX, $4
	JLT  t64tail
	CMPQ BX, $4
	JLT  t64part

	// Y0 = [row 0 | row 2] and Y1 = [row 1 | row 3] of columns 0-1, Y2 and Y3 of columns 2-3.
	VMOVUPD     (SI), X0
	VMOVUPD     16(SI), X2
	VMOVUPD     (SI)(R8*1), X1
	VMOVUPD     16(SI)(R8*1), X3
	VINSERTF128 $1, (SI)(R8*2), Y0, Y0
	VINSERTF128 $1, 16(SI)(R8*2), Y2, Y2
	VINSERTF128 $1, (SI)(R9*1), Y1, Y1
	VINSERTF128 $1, 16(SI)(R9*1), Y3, Y3
	JMP         t64shuf

t64part:
	VMOVUPD (SI), X0
	VMOVUPD 16(SI), X2
	CMPQ    BX, $2
	JLT     t64z1
	VMOVUPD (SI)(R8*1), X1
	VMOVUPD 16(SI)(R8*1), X3
	CMPQ    BX, $3
	JLT     t64shuf
	VINSERTF128 $1, (SI)(R8*2), Y0, Y0
	VINSERTF128 $1, 16(SI)(R8*2), Y2, Y2
	JMP     t64shuf

t64z1:
	VXORPD X1, X1, X1
	VXORPD X3, X3, X3

t64shuf:
	VUNPCKLPD Y1, Y0, Y4
	VUNPCKHPD Y1, Y0, Y5
	VUNPCKLPD Y3, Y2, Y6
	VUNPCKHPD Y3, Y2, Y7
	VMOVUPD   Y4, (DI)
	VMOVUPD   Y5, (DI)(R11*1)
	VMOVUPD   Y6, (DI)(R11*2)
	VMOVUPD   Y7, (DI)(R12*1)
	ADDQ      $32, SI
	LEAQ      (DI)(R11*4), DI
	SUBQ      $4, CX
	JMP       t64loop

t64tail:
	TESTQ CX, CX
	JEQ   t64done
	MOVQ  $4, AX
	SUBQ  CX, AX
	MOVQ  AX, DX
	SHLQ  $3, DX
	SUBQ  DX, SI
	IMULQ R11, AX
	SUBQ  AX, DI
	MOVQ  $4, CX
	JMP   t64loop

t64done:
	VZEROUPPER
	RET
