//go:build amd64 && !purego

#include "textflag.h"

// func lanesAddF32(n int, dst *float64, x *float32)
// dst[j] += float64(x[j])
TEXT ·lanesAddF32(SB), NOSPLIT, $0-24
	MOVQ n+0(FP), CX
	MOVQ dst+8(FP), DI
	MOVQ x+16(FP), SI
	SHRQ $2, CX
	JEQ  add_done

add_loop:
	VCVTPS2PD (SI), Y0
	VADDPD    (DI), Y0, Y0
	VMOVUPD   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       add_loop

add_done:
	VZEROUPPER
	RET

// func lanesSqF32(n int, dst *float64, x *float32, mean float64)
// d := float64(x[j]) - mean; dst[j] += d * d
TEXT ·lanesSqF32(SB), NOSPLIT, $0-32
	MOVQ         n+0(FP), CX
	MOVQ         dst+8(FP), DI
	MOVQ         x+16(FP), SI
	VBROADCASTSD mean+24(FP), Y2
	SHRQ         $2, CX
	JEQ          sq_done

sq_loop:
	VCVTPS2PD (SI), Y0
	VSUBPD    Y2, Y0, Y0 // x - mean
	VMULPD    Y0, Y0, Y0 // d*d
	VADDPD    (DI), Y0, Y0
	VMOVUPD   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       sq_loop

sq_done:
	VZEROUPPER
	RET

// func lanesGradF32(n int, da, db *float64, dy, x *float32, mean float64)
// da[j] += float64(dy[j]); db[j] += float64(dy[j]) * (float64(x[j]) - mean)
TEXT ·lanesGradF32(SB), NOSPLIT, $0-48
	MOVQ         n+0(FP), CX
	MOVQ         da+8(FP), DI
	MOVQ         db+16(FP), SI
	MOVQ         dy+24(FP), R8
	MOVQ         x+32(FP), R9
	VBROADCASTSD mean+40(FP), Y2
	SHRQ         $2, CX
	JEQ          grad_done

grad_loop:
	VCVTPS2PD (R8), Y0   // g
	VCVTPS2PD (R9), Y1   // x
	VADDPD    (DI), Y0, Y3
	VMOVUPD   Y3, (DI)   // da += g
	VSUBPD    Y2, Y1, Y1 // x - mean
	VMULPD    Y1, Y0, Y1 // g * (x-mean)
	VADDPD    (SI), Y1, Y1
	VMOVUPD   Y1, (SI)   // db += g*(x-mean)
	ADDQ      $16, R8
	ADDQ      $16, R9
	ADDQ      $32, DI
	ADDQ      $32, SI
	DECQ      CX
	JNZ       grad_loop

grad_done:
	VZEROUPPER
	RET

// func affineF32(n int, y, x *float32, m, a, b float32)
// y[i] = (x[i]-m)*a + b
TEXT ·affineF32(SB), NOSPLIT, $0-36
	MOVQ         n+0(FP), CX
	MOVQ         y+8(FP), DI
	MOVQ         x+16(FP), SI
	VBROADCASTSS m+24(FP), Y5
	VBROADCASTSS a+28(FP), Y6
	VBROADCASTSS b+32(FP), Y7
	SHRQ         $3, CX
	JEQ          aff_done

aff_loop:
	VMOVUPS (SI), Y0
	VSUBPS  Y5, Y0, Y0
	VMULPS  Y6, Y0, Y0
	VADDPS  Y7, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     aff_loop

aff_done:
	VZEROUPPER
	RET

// func bnDxF32(n int, r, x, dy *float32, mdy, mt, k, at float32)
// r[i] = at * (dy[i] - mdy - (x[i]-mt)*k)
TEXT ·bnDxF32(SB), NOSPLIT, $0-48
	MOVQ         n+0(FP), CX
	MOVQ         r+8(FP), DI
	MOVQ         x+16(FP), SI
	MOVQ         dy+24(FP), DX
	VBROADCASTSS mdy+32(FP), Y4
	VBROADCASTSS mt+36(FP), Y5
	VBROADCASTSS k+40(FP), Y6
	VBROADCASTSS at+44(FP), Y7
	SHRQ         $3, CX
	JEQ          dx_done

dx_loop:
	VMOVUPS (SI), Y0
	VSUBPS  Y5, Y0, Y0 // x - mt
	VMULPS  Y6, Y0, Y0 // (x-mt)*k
	VMOVUPS (DX), Y1
	VSUBPS  Y4, Y1, Y1 // g - mdy
	VSUBPS  Y0, Y1, Y1 // (g-mdy) - (x-mt)*k
	VMULPS  Y1, Y7, Y1 // at * (...)
	VMOVUPS Y1, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	DECQ    CX
	JNZ     dx_loop

dx_done:
	VZEROUPPER
	RET

// func reluF32(n int, r, x *float32)
// r[i] = x[i] where x[i] > 0 or x[i] is NaN, else +0: x and-ed with the mask of the two tests,
// as reluMask32 does.
TEXT ·reluF32(SB), NOSPLIT, $0-24
	MOVQ   n+0(FP), CX
	MOVQ   r+8(FP), DI
	MOVQ   x+16(FP), SI
	VXORPS Y7, Y7, Y7
	SHRQ   $3, CX
	JEQ    relu_done

relu_loop:
	VMOVUPS (SI), Y0
	VCMPPS  $0x1e, Y7, Y0, Y1 // x > 0 (ordered, quiet)
	VCMPPS  $0x03, Y0, Y0, Y2 // x unordered: NaN
	VORPS   Y2, Y1, Y1
	VANDPS  Y0, Y1, Y1
	VMOVUPS Y1, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     relu_loop

relu_done:
	VZEROUPPER
	RET

// func reluGradF32(n int, r, y, dy *float32)
// r[i] = dy[i] where y[i] > 0, else +0.
TEXT ·reluGradF32(SB), NOSPLIT, $0-32
	MOVQ   n+0(FP), CX
	MOVQ   r+8(FP), DI
	MOVQ   y+16(FP), SI
	MOVQ   dy+24(FP), DX
	VXORPS Y7, Y7, Y7
	SHRQ   $3, CX
	JEQ    rgrad_done

rgrad_loop:
	VMOVUPS (SI), Y0
	VCMPPS  $0x1e, Y7, Y0, Y1 // y > 0
	VANDPS  (DX), Y1, Y1
	VMOVUPS Y1, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	DECQ    CX
	JNZ     rgrad_loop

rgrad_done:
	VZEROUPPER
	RET

// func foldF64(n int, dst, src *float64)
// dst[t] += src[t]: one level of lanes.totalN's tree.
TEXT ·foldF64(SB), NOSPLIT, $0-24
	MOVQ n+0(FP), CX
	MOVQ dst+8(FP), DI
	MOVQ src+16(FP), SI
	SHRQ $2, CX
	JEQ  fold_done

fold_loop:
	VMOVUPD (DI), Y0
	VADDPD  (SI), Y0, Y0
	VMOVUPD Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     fold_loop

fold_done:
	VZEROUPPER
	RET
