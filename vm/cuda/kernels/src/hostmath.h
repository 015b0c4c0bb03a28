/* hostmath.h: Go's amd64 math.Exp and math.Log, for the host build only.
 *
 * The CPU device is Go on amd64, where math.Exp and math.Log are assembly
 * (src/math/exp_amd64.s, log_amd64.s in Go's tree), not the portable
 * algorithms of oocmath.h: Exp is another algorithm altogether (Shibata's,
 * from SLEEF: a Taylor series of x/16 squared four times) and uses fused
 * multiply-adds when the CPU has AVX and FMA; Log is msun's algorithm but
 * takes the fraction straight from the bits (no normalisation of subnormals)
 * and doubles it when it is at most √2/2 rather than below. The two agree
 * with the portable ones to within an ulp, which a deep model's backward
 * amplifies (densenet121 in float64: 5.8e-11 apart at the gradients).
 *
 * So the host build, which the fake CUDA driver runs, computes exp and log
 * as these instructions do, operation for operation, and makes Go's FMA
 * choice at run time (math.useFMA = cpu.X86.HasAVX && cpu.X86.HasFMA, with
 * GODEBUG's cpu.avx, cpu.fma and cpu.all as internal/cpu reads them). Then
 * the fake device can be compared with the CPU device bit for bit. This is
 * emulation of the CPU's library, not of a GPU: the PTX build keeps
 * oocmath.h's portable functions, and a real GPU's exp and log differ from
 * Go's in the last bits. */
#ifndef OOC_HOSTMATH_H
#define OOC_HOSTMATH_H

#include <cpuid.h>
#include <emmintrin.h>
#include <stdlib.h>
#include <string.h>

/* Included by oocmath.h after ooc_bits, ooc_from_bits, ooc_inf, ooc_nan. */

/* internal/cpu's GODEBUG rule for one feature: the last "cpu.<name>=on|off"
 * or "cpu.all=on|off" field wins; "on" cannot enable what the CPU lacks.
 * (Go ignores cpu.avx and cpu.fma in binaries built for GOAMD64=v3 or above,
 * which require them; the host library cannot know the level, and follows
 * the v1 default.) */
static bool ooc_go_cpu_option(const char *name, bool have) {
  const char *env = getenv("GODEBUG");
  bool v = have;
  size_t nl = strlen(name);
  while (env && *env) {
    const char *end = strchr(env, ',');
    size_t len = end ? (size_t)(end - env) : strlen(env);
    const char *key = env + 4, *eq = (const char *)memchr(env, '=', len);
    if (len > 4 && memcmp(env, "cpu.", 4) == 0 && eq) {
      size_t kl = (size_t)(eq - key), vl = len - (size_t)(eq - env) - 1;
      bool match = (kl == nl && memcmp(key, name, nl) == 0) ||
                   (kl == 3 && memcmp(key, "all", 3) == 0);
      if (match && vl == 3 && memcmp(eq + 1, "off", 3) == 0)
        v = false;
      else if (match && vl == 2 && memcmp(eq + 1, "on", 2) == 0)
        v = have;
    }
    env = end ? end + 1 : 0;
  }
  return v;
}

/* math.useFMA: cpu.X86.HasAVX && cpu.X86.HasFMA, where HasAVX needs the OS to
 * save the YMM state (OSXSAVE, then XCR0 bits 1 and 2). */
static bool ooc_go_detect_fma() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d))
    return false;
  bool osxsave = c & (1u << 27), os_avx = false;
  if (osxsave) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    os_avx = (lo & 6) == 6;
  }
  bool avx = (c & (1u << 28)) && os_avx;
  bool fma = (c & (1u << 12)) && avx && osxsave;
  avx = ooc_go_cpu_option("avx", avx);
  fma = ooc_go_cpu_option("fma", fma);
  return avx && fma;
}

/* Decided once, when the library is loaded (as Go decides at start-up). */
static const bool ooc_go_use_fma = ooc_go_detect_fma();

/* exp_amd64.s's archExp. CVTSD2SL rounds to nearest even (MXCSR's default)
 * and gives INT_MIN for values out of range, as _mm_cvtsd_si32 does. */
static inline double ooc_go_amd64_exp(double x) {
  const double LOG2E = 1.4426950408889634073599246810018920,
               LN2U = 0.69314718055966295651160180568695068359375,
               LN2L = 0.28235290563031577122588448175013436025525412068e-12,
               Overflow = 7.09782712893384e+02;
  const double C[] = {0.5, 1.0, 2.0, 1.6666666666666666667e-1,
                      4.1666666666666666667e-2, 8.3333333333333333333e-3,
                      1.3888888888888888889e-3, 1.9841269841269841270e-4,
                      2.4801587301587301587e-5};
  unsigned long long bx = ooc_bits(x);
  if ((bx & ~(1ULL << 63)) >= 0x7FF0000000000000ULL) /* not finite */
    return bx == 0xFFF0000000000000ULL ? 0 : x;
  if (x > Overflow)
    return ooc_inf(1);
  int e = _mm_cvtsd_si32(_mm_set_sd(LOG2E * x));
  double k = (double)e, r, p;
  if (ooc_go_use_fma) {
    r = __builtin_fma(-LN2U, k, x);
    r = __builtin_fma(-LN2L, k, r);
    r *= 0.0625;
    p = C[8];
    for (int i = 7; i >= 3; i--)
      p = __builtin_fma(p, r, C[i]);
    p = __builtin_fma(p, r, C[0]);
    p = __builtin_fma(p, r, C[1]);
    r *= p;
    for (int i = 0; i < 3; i++)
      r *= r + C[2];
    r = __builtin_fma(r, r + C[2], C[1]);
  } else {
    r = x - k * LN2U;
    r = r - k * LN2L;
    r *= 0.0625;
    p = C[8];
    for (int i = 7; i >= 3; i--)
      p = p * r + C[i];
    p = p * r + C[0];
    p = p * r + C[1];
    r *= p;
    for (int i = 0; i < 4; i++)
      r *= r + C[2];
    r += C[1];
  }
  /* r·2^e: in one multiply when 2^e is normal, else in two. The exponent
   * arithmetic is the assembly's 32-bit arithmetic. */
  int be = (int)((unsigned)e + 0x3FFu);
  if (be <= 0) {
    if (be < -52)
      return 0;
    r *= ooc_from_bits((unsigned long long)(be + 0x3FE) << 52);
    be = 1;
  } else if (be >= 0x7FF) {
    return ooc_inf(1);
  }
  return r * ooc_from_bits((unsigned long long)be << 52);
}

/* log_amd64.s's archLog. */
static inline double ooc_go_amd64_log(double x) {
  const double HSqrt2 = 7.07106781186547524401e-01,
               Ln2Hi = 6.93147180369123816490e-01,
               Ln2Lo = 1.90821492927058770002e-10, L1 = 6.666666666666735130e-01,
               L2 = 3.999999999940941908e-01, L3 = 2.857142874366239149e-01,
               L4 = 2.222219843214978396e-01, L5 = 1.818357216161805012e-01,
               L6 = 1.531383769920937332e-01, L7 = 1.479819860511658591e-01;
  unsigned long long bx = ooc_bits(x);
  if ((bx << 1) == 0) /* ±0 */
    return ooc_inf(-1);
  if (bx >> 63) /* negative, -Inf and NaNs with the sign bit: Go's NaN */
    return ooc_nan();
  if (bx >= 0x7FF0000000000000ULL) /* +Inf, NaN */
    return x;
  /* the fraction from the bits with 0.5's exponent, even for subnormals */
  double f1 = ooc_from_bits((bx & 0x000FFFFFFFFFFFFFULL) | 0x3FE0000000000000ULL);
  double k = (double)((int)(bx >> 52 & 0x7FF) - 0x3FE);
  if (!(HSqrt2 < f1)) { /* CMPSD's not-less-than */
    k -= 1;
    f1 *= 2;
  }
  double f = f1 - 1;
  double s = f / (2 + f);
  double s2 = s * s;
  double s4 = s2 * s2;
  double t1 = s2 * (((L7 * s4 + L5) * s4 + L3) * s4 + L1);
  double t2 = s4 * ((L6 * s4 + L4) * s4 + L2);
  double R = t1 + t2;
  double hfsq = 0.5 * f * f;
  return k * Ln2Hi - ((hfsq - (s * (hfsq + R) + k * Ln2Lo)) - f);
}

#endif
