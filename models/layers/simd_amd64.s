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

// The argmax rule of maxPool2x2Plane (takes): v replaces best where v > best or v is the first
// NaN, which is !(v <= best) (true also where either is NaN) and best is not NaN; then
// best = mask ? v : best. t1 is scratch.
#define TAKE(v, best, mask, t1) \
	VCMPPS    $0x16, best, v, mask; \
	VCMPPS    $0x07, best, best, t1; \
	VANDPS    t1, mask, mask; \
	VBLENDVPS mask, v, best, best

// LOADWIN loads 8 windows of 2x2 from rows r0 (SI) and r1 (DX): a, b the left and right
// elements of r0, c, d of r1, each in the window order 0 1 4 5 | 2 3 6 7 that VSHUFPS leaves
// (VPERMPD $0xd8 puts it in order; VUNPCK[LH]PS puts it back in row order).
#define LOADWIN(a, b, c, d, t1, t2) \
	VMOVUPS (SI), t1; \
	VMOVUPS 32(SI), t2; \
	VSHUFPS $0x88, t2, t1, a; \
	VSHUFPS $0xdd, t2, t1, b; \
	VMOVUPS (DX), t1; \
	VMOVUPS 32(DX), t2; \
	VSHUFPS $0x88, t2, t1, c; \
	VSHUFPS $0xdd, t2, t1, d

// func maxPool2F32(n int, y, r0, r1 *float32)
// y[j] = the max of window j (r0[2j], r0[2j+1], r1[2j], r1[2j+1]) by takes, in that order.
TEXT ·maxPool2F32(SB), NOSPLIT, $0-32
	MOVQ n+0(FP), CX
	MOVQ y+8(FP), DI
	MOVQ r0+16(FP), SI
	MOVQ r1+24(FP), DX
	SHRQ $3, CX
	JEQ  mp_done

mp_loop:
	LOADWIN(Y0, Y1, Y2, Y3, Y8, Y9)
	TAKE(Y1, Y0, Y10, Y11)
	TAKE(Y2, Y0, Y10, Y11)
	TAKE(Y3, Y0, Y10, Y11)
	VPERMPD $0xd8, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DX
	ADDQ    $32, DI
	DECQ    CX
	JNZ     mp_loop

mp_done:
	VZEROUPPER
	RET

// func maxPool2GradF32(n int, d0, d1, r0, r1, dy *float32)
// For window j: its argmax by takes gets +0 + dy[j], its other three elements +0, in rows d0 and
// d1 (r0's and r1's places).
TEXT ·maxPool2GradF32(SB), NOSPLIT, $0-48
	MOVQ   n+0(FP), CX
	MOVQ   d0+8(FP), DI
	MOVQ   d1+16(FP), R8
	MOVQ   r0+24(FP), SI
	MOVQ   r1+32(FP), DX
	MOVQ   dy+40(FP), R9
	VXORPS Y15, Y15, Y15 // +0
	SHRQ   $3, CX
	JEQ    mpg_done

mpg_loop:
	LOADWIN(Y0, Y1, Y2, Y3, Y8, Y9)
	// Y4..Y7: the element a, b, c or d is the argmax so far.
	VPCMPEQD Y4, Y4, Y4
	TAKE(Y1, Y0, Y10, Y11)
	VANDNPS  Y4, Y10, Y4  // a loses where b takes
	VMOVAPS  Y10, Y5
	TAKE(Y2, Y0, Y10, Y11)
	VANDNPS  Y4, Y10, Y4
	VANDNPS  Y5, Y10, Y5
	VMOVAPS  Y10, Y6
	TAKE(Y3, Y0, Y10, Y11)
	VANDNPS  Y4, Y10, Y4
	VANDNPS  Y5, Y10, Y5
	VANDNPS  Y6, Y10, Y6
	VMOVAPS  Y10, Y7
	VPERMPD  $0xd8, (R9), Y12 // dy in the windows' order
	VADDPS   Y12, Y15, Y12    // +0 + dy
	VANDPS   Y12, Y4, Y4
	VANDPS   Y12, Y5, Y5
	VANDPS   Y12, Y6, Y6
	VANDPS   Y12, Y7, Y7
	VUNPCKLPS Y5, Y4, Y8
	VUNPCKHPS Y5, Y4, Y9
	VMOVUPS  Y8, (DI)
	VMOVUPS  Y9, 32(DI)
	VUNPCKLPS Y7, Y6, Y8
	VUNPCKHPS Y7, Y6, Y9
	VMOVUPS  Y8, (R8)
	VMOVUPS  Y9, 32(R8)
	ADDQ     $64, SI
	ADDQ     $64, DX
	ADDQ     $64, DI
	ADDQ     $64, R8
	ADDQ     $32, R9
	DECQ     CX
	JNZ      mpg_loop

mpg_done:
	VZEROUPPER
	RET

// LOAD3 loads a row's first, second and third elements of 8 windows of 3 at stride 2 from
// SI: a at SI+2j, b at SI+2j+1, c at SI+2j+2 (window j), in VSHUFPS's order 0 1 4 5 | 2 3 6 7.
#define LOAD3(a, b, c, t1, t2) \
	VMOVUPS (SI), t1; \
	VMOVUPS 32(SI), t2; \
	VSHUFPS $0x88, t2, t1, a; \
	VSHUFPS $0xdd, t2, t1, b; \
	VMOVUPS 8(SI), t1; \
	VMOVUPS 40(SI), t2; \
	VSHUFPS $0x88, t2, t1, c

// STEP visits v, the next element of the windows: where it takes (TAKE), best becomes v and
// the index k the count cur, which goes up by one first.
#define STEP(v) \
	VPADDD    Y3, Y2, Y2; \
	TAKE(v, Y0, Y10, Y11); \
	VBLENDVPS Y10, Y2, Y1, Y1

// POOL3 runs the 9 elements of 8 windows of 3x3, rows from R10, R11, R12 (in that order),
// leaving the max in Y0 and its index in the window (row-major, 0..8) in Y1, window order as
// LOADWIN's.
#define POOL3 \
	MOVQ  R10, SI; \
	LOAD3(Y0, Y4, Y5, Y8, Y9); \
	VPXOR Y1, Y1, Y1; \
	VPXOR Y2, Y2, Y2; \
	STEP(Y4); \
	STEP(Y5); \
	MOVQ  R11, SI; \
	LOAD3(Y4, Y5, Y6, Y8, Y9); \
	STEP(Y4); \
	STEP(Y5); \
	STEP(Y6); \
	MOVQ  R12, SI; \
	LOAD3(Y4, Y5, Y6, Y8, Y9); \
	STEP(Y4); \
	STEP(Y5); \
	STEP(Y6)

// func maxPool3F32(n int, y *float32, idx *int32, r0, r1, r2 *float32)
// For windows j < n (a multiple of 8) of 3x3 at column stride 2 over rows r0, r1, r2 (window j
// reads columns 2j, 2j+1, 2j+2 of each, row by row), y[j] = its max by takes in row-major order
// when y is not nil, and idx[j] = the max's place in the window (0..8) when idx is not nil.
TEXT ·maxPool3F32(SB), NOSPLIT, $0-48
	MOVQ         n+0(FP), CX
	MOVQ         y+8(FP), DI
	MOVQ         idx+16(FP), R8
	MOVQ         r0+24(FP), R10
	MOVQ         r1+32(FP), R11
	MOVQ         r2+40(FP), R12
	VPCMPEQD     Y3, Y3, Y3
	VPSRLD       $31, Y3, Y3 // 1 in each int32
	SHRQ         $3, CX
	JEQ          mp3_done

mp3_loop:
	POOL3
	TESTQ   DI, DI
	JEQ     mp3_noval
	VPERMPD $0xd8, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI

mp3_noval:
	TESTQ   R8, R8
	JEQ     mp3_next
	VPERMPD $0xd8, Y1, Y1
	VMOVDQU Y1, (R8)
	ADDQ    $32, R8

mp3_next:
	ADDQ $64, R10
	ADDQ $64, R11
	ADDQ $64, R12
	DECQ CX
	JNZ  mp3_loop

mp3_done:
	VZEROUPPER
	RET
