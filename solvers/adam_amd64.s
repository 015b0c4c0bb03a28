//go:build amd64 && !purego

#include "textflag.h"

// func adamAVX2(n int, w, gr, m, v *float32, k *adamConsts)
// Adam without regularisation, batch scaling or clipping on n (a multiple of 8) elements: the
// Go loop in update, eight lanes at a time, each operation rounded as the scalar code rounds it
// (no fused multiply-add), so the bits are the same.
TEXT ·adamAVX2(SB), NOSPLIT, $0-48
	MOVQ n+0(FP), CX
	MOVQ w+8(FP), DI
	MOVQ gr+16(FP), SI
	MOVQ m+24(FP), R8
	MOVQ v+32(FP), R9
	MOVQ k+40(FP), AX
	VBROADCASTSS 0(AX), Y8   // omb1
	VBROADCASTSS 4(AX), Y9   // omb2
	VBROADCASTSS 8(AX), Y10  // beta1
	VBROADCASTSS 12(AX), Y11 // beta2
	VBROADCASTSS 16(AX), Y12 // cv1
	VBROADCASTSS 20(AX), Y13 // cv2
	VBROADCASTSS 24(AX), Y14 // eps
	VBROADCASTSS 28(AX), Y15 // negEta
	VXORPS       Y7, Y7, Y7
	SHRQ         $3, CX
	JEQ          done

loop:
	VMOVUPS (SI), Y0
	VMULPS  Y8, Y0, Y1  // t1 = g*omb1
	VMULPS  Y0, Y0, Y2  // g2 = g*g
	VMULPS  Y9, Y2, Y2  // g2 *= omb2
	VMULPS  (R8), Y10, Y3
	VADDPS  Y3, Y1, Y1  // t1 += m*beta1
	VMULPS  (R9), Y11, Y4
	VADDPS  Y4, Y2, Y2  // g2 += v*beta2
	VMOVUPS Y1, (R8)
	VMOVUPS Y2, (R9)
	VMULPS  Y12, Y1, Y5 // mh = t1*cv1
	VMULPS  Y13, Y2, Y6 // vh = g2*cv2
	VSQRTPS Y6, Y6
	VADDPS  Y14, Y6, Y6 // vh += eps
	VMULPS  Y15, Y5, Y5 // mh *= negEta
	VDIVPS  Y6, Y5, Y5  // mh /= vh
	VADDPS  (DI), Y5, Y5
	VMOVUPS Y5, (DI)    // w += mh
	VMOVUPS Y7, (SI)    // g = 0
	ADDQ    $32, SI
	ADDQ    $32, DI
	ADDQ    $32, R8
	ADDQ    $32, R9
	DECQ    CX
	JNZ     loop

done:
	VZEROUPPER
	RET
