//go:build amd64 && !purego

#include "textflag.h"

// func interleave6F32(blocks int, dst, s0, s1, s2, s3, s4, s5 *float32)
// For 8*blocks pixels k: dst[k*6+r] = s_r[k], r < 6. Eight pixels at a time: the six rows are
// transposed as an 8x8 block (rows 6 and 7 copies of 4 and 5), and pixel k's eight lanes stored
// at dst[k*6], each store's last two lanes overwritten by the next; the last pixel's store is
// six lanes wide, so nothing past the 48 values is written.
TEXT ·interleave6F32(SB), NOSPLIT, $0-64
	MOVQ blocks+0(FP), CX
	MOVQ dst+8(FP), DI
	MOVQ s0+16(FP), R8
	MOVQ s1+24(FP), R9
	MOVQ s2+32(FP), R10
	MOVQ s3+40(FP), R11
	MOVQ s4+48(FP), R12
	MOVQ s5+56(FP), R13
	XORQ AX, AX
	TESTQ CX, CX
	JEQ  done

loop:
	VMOVUPS (R8)(AX*1), Y0
	VMOVUPS (R9)(AX*1), Y1
	VMOVUPS (R10)(AX*1), Y2
	VMOVUPS (R11)(AX*1), Y3
	VMOVUPS (R12)(AX*1), Y4
	VMOVUPS (R13)(AX*1), Y5
	VUNPCKLPS Y1, Y0, Y6  // r0[0] r1[0] r0[1] r1[1] | 4, 5
	VUNPCKHPS Y1, Y0, Y7  // pixels 2, 3 | 6, 7
	VUNPCKLPS Y3, Y2, Y8
	VUNPCKHPS Y3, Y2, Y9
	VUNPCKLPS Y5, Y4, Y10
	VUNPCKHPS Y5, Y4, Y11
	VSHUFPS $0x44, Y8, Y6, Y0   // r0..r3 of pixel 0 | 4
	VSHUFPS $0xEE, Y8, Y6, Y1   // pixel 1 | 5
	VSHUFPS $0x44, Y9, Y7, Y2   // pixel 2 | 6
	VSHUFPS $0xEE, Y9, Y7, Y3   // pixel 3 | 7
	VSHUFPS $0x44, Y10, Y10, Y4 // r4 r5 r4 r5 of pixel 0 | 4
	VSHUFPS $0xEE, Y10, Y10, Y5
	VSHUFPS $0x44, Y11, Y11, Y6
	VSHUFPS $0xEE, Y11, Y11, Y7
	VPERM2F128 $0x20, Y4, Y0, Y8  // pixel 0
	VPERM2F128 $0x20, Y5, Y1, Y9  // pixel 1
	VPERM2F128 $0x20, Y6, Y2, Y10 // pixel 2
	VPERM2F128 $0x20, Y7, Y3, Y11 // pixel 3
	VPERM2F128 $0x31, Y4, Y0, Y12 // pixel 4
	VPERM2F128 $0x31, Y5, Y1, Y13 // pixel 5
	VPERM2F128 $0x31, Y6, Y2, Y14 // pixel 6
	VPERM2F128 $0x31, Y7, Y3, Y15 // pixel 7
	VMOVUPS Y8, (DI)
	VMOVUPS Y9, 24(DI)
	VMOVUPS Y10, 48(DI)
	VMOVUPS Y11, 72(DI)
	VMOVUPS Y12, 96(DI)
	VMOVUPS Y13, 120(DI)
	VMOVUPS Y14, 144(DI)
	VMOVUPS X15, 168(DI)
	VEXTRACTF128 $1, Y15, X15
	VMOVQ X15, 184(DI)
	ADDQ $32, AX
	ADDQ $192, DI
	DECQ CX
	JNZ  loop

done:
	VZEROUPPER
	RET

// func interleave8F32(blocks int, dst *float32, stride int, s0, s1, s2, s3, s4, s5, s6, s7 *float32)
// For 8*blocks pixels k: dst[k*stride/4+r] = s_r[k], r < 8 (stride in bytes): an 8x8 transpose
// per eight pixels, each pixel's eight lanes one store.
TEXT ·interleave8F32(SB), NOSPLIT, $0-88
	MOVQ blocks+0(FP), CX
	MOVQ dst+8(FP), DI
	MOVQ stride+16(FP), DX
	MOVQ s0+24(FP), R8
	MOVQ s1+32(FP), R9
	MOVQ s2+40(FP), R10
	MOVQ s3+48(FP), R11
	MOVQ s4+56(FP), R12
	MOVQ s5+64(FP), R13
	MOVQ s6+72(FP), R14
	MOVQ s7+80(FP), R15
	LEAQ (DX)(DX*2), BX // 3*stride
	XORQ AX, AX
	TESTQ CX, CX
	JEQ  done8

loop8:
	VMOVUPS (R8)(AX*1), Y0
	VMOVUPS (R9)(AX*1), Y1
	VMOVUPS (R10)(AX*1), Y2
	VMOVUPS (R11)(AX*1), Y3
	VMOVUPS (R12)(AX*1), Y4
	VMOVUPS (R13)(AX*1), Y5
	VMOVUPS (R14)(AX*1), Y6
	VMOVUPS (R15)(AX*1), Y7
	VUNPCKLPS Y1, Y0, Y8
	VUNPCKHPS Y1, Y0, Y9
	VUNPCKLPS Y3, Y2, Y10
	VUNPCKHPS Y3, Y2, Y11
	VUNPCKLPS Y5, Y4, Y12
	VUNPCKHPS Y5, Y4, Y13
	VUNPCKLPS Y7, Y6, Y14
	VUNPCKHPS Y7, Y6, Y15
	VSHUFPS $0x44, Y10, Y8, Y0  // r0..r3 of pixel 0 | 4
	VSHUFPS $0xEE, Y10, Y8, Y1  // pixel 1 | 5
	VSHUFPS $0x44, Y11, Y9, Y2  // pixel 2 | 6
	VSHUFPS $0xEE, Y11, Y9, Y3  // pixel 3 | 7
	VSHUFPS $0x44, Y14, Y12, Y4 // r4..r7 of pixel 0 | 4
	VSHUFPS $0xEE, Y14, Y12, Y5
	VSHUFPS $0x44, Y15, Y13, Y6
	VSHUFPS $0xEE, Y15, Y13, Y7
	VPERM2F128 $0x20, Y4, Y0, Y8
	VPERM2F128 $0x20, Y5, Y1, Y9
	VPERM2F128 $0x20, Y6, Y2, Y10
	VPERM2F128 $0x20, Y7, Y3, Y11
	VPERM2F128 $0x31, Y4, Y0, Y12
	VPERM2F128 $0x31, Y5, Y1, Y13
	VPERM2F128 $0x31, Y6, Y2, Y14
	VPERM2F128 $0x31, Y7, Y3, Y15
	VMOVUPS Y8, (DI)
	VMOVUPS Y9, (DI)(DX*1)
	VMOVUPS Y10, (DI)(DX*2)
	VMOVUPS Y11, (DI)(BX*1)
	LEAQ (DI)(DX*4), DI
	VMOVUPS Y12, (DI)
	VMOVUPS Y13, (DI)(DX*1)
	VMOVUPS Y14, (DI)(DX*2)
	VMOVUPS Y15, (DI)(BX*1)
	LEAQ (DI)(DX*4), DI
	ADDQ $32, AX
	DECQ CX
	JNZ  loop8

done8:
	VZEROUPPER
	RET
