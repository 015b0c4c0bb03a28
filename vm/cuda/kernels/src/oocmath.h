/* oocmath.h: the elementary functions the kernels need, in portable C.
 * There is no libdevice in the PTX build, and a call to expf would be left
 * unresolved, so these are ports of Go's pure-Go math package (itself from
 * FreeBSD's msun), operation for operation: where Go's float64 function is
 * pure Go (Log1p, Expm1, Tanh, Sin, Cos below 2^29, Pow, Frexp, Ldexp) the
 * results are Go's bits, since both builds keep IEEE double arithmetic
 * without contraction (-ffp-contract=off).
 *
 * Exp and Log are the exception. Go runs assembly for them on amd64 (another
 * exp algorithm, with FMA where the CPU has it; a log that does not normalise
 * subnormals), within 2 ulps (exp) and 1 ulp (log) of the portable ports.
 * The HOST build on x86-64 therefore calls hostmath.h instead, a port of that
 * assembly with Go's run-time FMA choice: it reproduces Go's amd64 libm bit
 * for bit (TestHostMathIsGos), so that the fake CUDA device, which runs the
 * host build, can be compared with the CPU device bit for bit, and with it
 * every function here built on exp or log (Tanh, Pow, Log2, sigmoid). The PTX
 * keeps the portable ports below (ooc_exp_portable, ooc_log_portable): a real
 * GPU's exp and log differ from the CPU device's in the last bits, and the
 * host tests cover those ports only through TestHostMathIsGos. float32
 * functions evaluate the float64 ones and round, which is at least as accurate
 * as math32's float32 algorithms that gorgonia calls. */
#ifndef OOC_MATH_H
#define OOC_MATH_H

OOC_FN unsigned long long ooc_bits(double x) {
  unsigned long long u;
  __builtin_memcpy(&u, &x, 8);
  return u;
}
OOC_FN double ooc_from_bits(unsigned long long u) {
  double x;
  __builtin_memcpy(&x, &u, 8);
  return x;
}
OOC_FN bool ooc_isnan(double x) { return x != x; }
OOC_FN bool ooc_isinf(double x, int sign) {
  return (sign >= 0 && x > 1.7976931348623157e308) ||
         (sign <= 0 && x < -1.7976931348623157e308);
}
OOC_FN double ooc_inf(int sign) {
  return sign >= 0 ? ooc_from_bits(0x7ff0000000000000ULL)
                   : ooc_from_bits(0xfff0000000000000ULL);
}
OOC_FN double ooc_nan() { return ooc_from_bits(0x7ff8000000000001ULL); }
OOC_FN bool ooc_signbit(double x) { return (ooc_bits(x) >> 63) != 0; }

#if !defined(__CUDA__) && defined(__x86_64__) && !defined(OOC_PORTABLE_MATH)
#include "hostmath.h" /* Go's amd64 Exp and Log, for the host build */
#define OOC_GO_AMD64_MATH 1
#endif

/* Frexp and Ldexp as Go's (normalize handles subnormals). */
OOC_FN double ooc_frexp(double f, int *e) {
  *e = 0;
  if (f == 0 || ooc_isinf(f, 0) || ooc_isnan(f))
    return f;
  if (__builtin_fabs(f) < 2.2250738585072014e-308) {
    f *= 4503599627370496.0; /* 2^52 */
    *e = -52;
  }
  unsigned long long x = ooc_bits(f);
  *e += (int)((x >> 52) & 0x7ff) - 1023 + 1;
  x &= ~(0x7ffULL << 52);
  x |= (unsigned long long)(-1 + 1023) << 52;
  return ooc_from_bits(x);
}

OOC_FN double ooc_ldexp(double frac, int exp) {
  if (frac == 0 || ooc_isinf(frac, 0) || ooc_isnan(frac))
    return frac;
  if (__builtin_fabs(frac) < 2.2250738585072014e-308) {
    frac *= 4503599627370496.0;
    exp -= 52;
  }
  unsigned long long x = ooc_bits(frac);
  exp += (int)((x >> 52) & 0x7ff) - 1023;
  if (exp < -1075)
    return __builtin_copysign(0.0, frac);
  if (exp > 1023)
    return frac < 0 ? ooc_inf(-1) : ooc_inf(1);
  double m = 1;
  if (exp < -1022) {
    exp += 53;
    m = 1.0 / 9007199254740992.0; /* 2^-53 */
  }
  x &= ~(0x7ffULL << 52);
  x |= (unsigned long long)(exp + 1023) << 52;
  return m * ooc_from_bits(x);
}

OOC_FN double ooc_exp_portable(double x) {
  const double Ln2Hi = 6.93147180369123816490e-01,
               Ln2Lo = 1.90821492927058770002e-10,
               Log2e = 1.44269504088896338700e+00;
  if (ooc_isnan(x) || ooc_isinf(x, 1))
    return x;
  if (ooc_isinf(x, -1))
    return 0;
  if (x > 7.09782712893383973096e+02)
    return ooc_inf(1);
  if (x < -7.45133219101941108420e+02)
    return 0;
  if (-1.0 / 268435456.0 < x && x < 1.0 / 268435456.0)
    return 1 + x;
  int k = 0;
  if (x < 0)
    k = (int)(Log2e * x - 0.5);
  else if (x > 0)
    k = (int)(Log2e * x + 0.5);
  double hi = x - (double)k * Ln2Hi;
  double lo = (double)k * Ln2Lo;
  const double P1 = 1.66666666666666657415e-01, P2 = -2.77777777770155933842e-03,
               P3 = 6.61375632143793436117e-05, P4 = -1.65339022054652515390e-06,
               P5 = 4.13813679705723846039e-08;
  double r = hi - lo;
  double t = r * r;
  double c = r - t * (P1 + t * (P2 + t * (P3 + t * (P4 + t * P5))));
  double y = 1 - ((lo - (r * c) / (2 - c)) - hi);
  return ooc_ldexp(y, k);
}

OOC_FN double ooc_log_portable(double x) {
  const double Ln2Hi = 6.93147180369123816490e-01,
               Ln2Lo = 1.90821492927058770002e-10, L1 = 6.666666666666735130e-01,
               L2 = 3.999999999940941908e-01, L3 = 2.857142874366239149e-01,
               L4 = 2.222219843214978396e-01, L5 = 1.818357216161805012e-01,
               L6 = 1.531383769920937332e-01, L7 = 1.479819860511658591e-01;
  if (ooc_isnan(x) || ooc_isinf(x, 1))
    return x;
  if (x < 0)
    return ooc_nan();
  if (x == 0)
    return ooc_inf(-1);
  int ki;
  double f1 = ooc_frexp(x, &ki);
  if (f1 < 1.41421356237309504880168872420969808 / 2) {
    f1 *= 2;
    ki--;
  }
  double f = f1 - 1;
  double k = (double)ki;
  double s = f / (2 + f);
  double s2 = s * s;
  double s4 = s2 * s2;
  double t1 = s2 * (L1 + s4 * (L3 + s4 * (L5 + s4 * L7)));
  double t2 = s4 * (L2 + s4 * (L4 + s4 * L6));
  double R = t1 + t2;
  double hfsq = 0.5 * f * f;
  return k * Ln2Hi - ((hfsq - (s * (hfsq + R) + k * Ln2Lo)) - f);
}

/* exp and log as the kernels call them: on the GPU the portable ports above;
 * in the host build on x86-64, Go's amd64 assembly (hostmath.h), so that the
 * fake device computes what the CPU device does. */
OOC_FN double ooc_exp(double x) {
#ifdef OOC_GO_AMD64_MATH
  return ooc_go_amd64_exp(x);
#else
  return ooc_exp_portable(x);
#endif
}
OOC_FN double ooc_log(double x) {
#ifdef OOC_GO_AMD64_MATH
  return ooc_go_amd64_log(x);
#else
  return ooc_log_portable(x);
#endif
}

OOC_FN double ooc_log2(double x) {
  int e;
  double frac = ooc_frexp(x, &e);
  if (frac == 0.5)
    return (double)(e - 1);
  return ooc_log(frac) * (1 / 0.693147180559945309417232121458176568) +
         (double)e;
}

OOC_FN double ooc_log1p(double x) {
  const double Sqrt2M1 = 4.142135623730950488017e-01,
               Sqrt2HalfM1 = -2.928932188134524755992e-01,
               Small = 1.0 / 536870912.0, Tiny = 1.0 / 18014398509481984.0,
               Two53 = 9007199254740992.0, Ln2Hi = 6.93147180369123816490e-01,
               Ln2Lo = 1.90821492927058770002e-10, Lp1 = 6.666666666666735130e-01,
               Lp2 = 3.999999999940941908e-01, Lp3 = 2.857142874366239149e-01,
               Lp4 = 2.222219843214978396e-01, Lp5 = 1.818357216161805012e-01,
               Lp6 = 1.531383769920937332e-01, Lp7 = 1.479819860511658591e-01;
  if (x < -1 || ooc_isnan(x))
    return ooc_nan();
  if (x == -1)
    return ooc_inf(-1);
  if (ooc_isinf(x, 1))
    return ooc_inf(1);
  double absx = __builtin_fabs(x);
  double f = 0;
  unsigned long long iu = 0;
  int k = 1;
  if (absx < Sqrt2M1) {
    if (absx < Small) {
      if (absx < Tiny)
        return x;
      return x - x * x * 0.5;
    }
    if (x > Sqrt2HalfM1) {
      k = 0;
      f = x;
      iu = 1;
    }
  }
  double c = 0;
  if (k != 0) {
    double u;
    if (absx < Two53) {
      u = 1.0 + x;
      iu = ooc_bits(u);
      k = (int)((iu >> 52) - 1023);
      if (k > 0)
        c = 1.0 - (u - x);
      else
        c = x - (u - 1.0);
      c /= u;
    } else {
      u = x;
      iu = ooc_bits(u);
      k = (int)((iu >> 52) - 1023);
      c = 0;
    }
    iu &= 0x000fffffffffffffULL;
    if (iu < 0x0006a09e667f3bcdULL) {
      u = ooc_from_bits(iu | 0x3ff0000000000000ULL);
    } else {
      k++;
      u = ooc_from_bits(iu | 0x3fe0000000000000ULL);
      iu = (0x0010000000000000ULL - iu) >> 2;
    }
    f = u - 1.0;
  }
  double hfsq = 0.5 * f * f;
  double s, R, z;
  if (iu == 0) {
    if (f == 0) {
      if (k == 0)
        return 0;
      c += (double)k * Ln2Lo;
      return (double)k * Ln2Hi + c;
    }
    R = hfsq * (1.0 - 0.66666666666666666 * f);
    if (k == 0)
      return f - R;
    return (double)k * Ln2Hi - ((R - ((double)k * Ln2Lo + c)) - f);
  }
  s = f / (2.0 + f);
  z = s * s;
  R = z * (Lp1 + z * (Lp2 + z * (Lp3 + z * (Lp4 + z * (Lp5 + z * (Lp6 + z * Lp7))))));
  if (k == 0)
    return f - (hfsq - s * (hfsq + R));
  return (double)k * Ln2Hi -
         ((hfsq - (s * (hfsq + R) + ((double)k * Ln2Lo + c))) - f);
}

OOC_FN double ooc_expm1(double x) {
  const double Othreshold = 7.09782712893383973096e+02,
               Ln2X56 = 3.88162421113569373274e+01,
               Ln2HalfX3 = 1.03972077083991796413e+00,
               Ln2Half = 3.46573590279972654709e-01,
               Ln2Hi = 6.93147180369123816490e-01,
               Ln2Lo = 1.90821492927058770002e-10,
               InvLn2 = 1.44269504088896338700e+00,
               Tiny = 1.0 / 18014398509481984.0,
               Q1 = -3.33333333333331316428e-02, Q2 = 1.58730158725481460165e-03,
               Q3 = -7.93650757867487942473e-05, Q4 = 4.00821782732936239552e-06,
               Q5 = -2.01099218183624371326e-07;
  if (ooc_isinf(x, 1) || ooc_isnan(x))
    return x;
  if (ooc_isinf(x, -1))
    return -1;
  double absx = x;
  bool sign = false;
  if (x < 0) {
    absx = -absx;
    sign = true;
  }
  if (absx >= Ln2X56) {
    if (sign)
      return -1;
    if (absx >= Othreshold)
      return ooc_inf(1);
  }
  double c = 0;
  int k = 0;
  if (absx > Ln2Half) {
    double hi, lo;
    if (absx < Ln2HalfX3) {
      if (!sign) {
        hi = x - Ln2Hi;
        lo = Ln2Lo;
        k = 1;
      } else {
        hi = x + Ln2Hi;
        lo = -Ln2Lo;
        k = -1;
      }
    } else {
      if (!sign)
        k = (int)(InvLn2 * x + 0.5);
      else
        k = (int)(InvLn2 * x - 0.5);
      double t = (double)k;
      hi = x - t * Ln2Hi;
      lo = t * Ln2Lo;
    }
    x = hi - lo;
    c = (hi - x) - lo;
  } else if (absx < Tiny) {
    return x;
  } else {
    k = 0;
  }
  double hfx = 0.5 * x;
  double hxs = x * hfx;
  double r1 = 1 + hxs * (Q1 + hxs * (Q2 + hxs * (Q3 + hxs * (Q4 + hxs * Q5))));
  double t = 3 - r1 * hfx;
  double e = hxs * ((r1 - t) / (6.0 - x * t));
  if (k == 0)
    return x - (x * e - hxs);
  e = (x * (e - c) - c);
  e -= hxs;
  if (k == -1)
    return 0.5 * (x - e) - 0.5;
  if (k == 1) {
    if (x < -0.25)
      return -2 * (e - (x + 0.5));
    return 1 + 2 * (x - e);
  }
  if (k <= -2 || k > 56) {
    double y = 1 - (e - x);
    y = ooc_from_bits(ooc_bits(y) + ((unsigned long long)k << 52));
    return y - 1;
  }
  if (k < 20) {
    double tt = ooc_from_bits(0x3ff0000000000000ULL - (0x20000000000000ULL >> k));
    double y = tt - (e - x);
    return ooc_from_bits(ooc_bits(y) + ((unsigned long long)k << 52));
  }
  t = ooc_from_bits((unsigned long long)(0x3ff - k) << 52);
  double y = x - (e + t);
  y += 1;
  return ooc_from_bits(ooc_bits(y) + ((unsigned long long)k << 52));
}

OOC_FN unsigned ooc_bitsf(float x) {
  unsigned u;
  __builtin_memcpy(&u, &x, 4);
  return u;
}
OOC_FN float ooc_from_bitsf(unsigned u) {
  float x;
  __builtin_memcpy(&x, &u, 4);
  return x;
}

/* math32.Expm1, float32 arithmetic throughout (gorgonia's float32 expm1). It
 * is reproduced with its flaw: between about 88.7 and 89.416 the exponent
 * addition overflows and the result is NaN, not +Inf. */
OOC_FN float ooc_expm1f(float x) {
  const float Othreshold = 89.415985f, Ln2X27 = 1.871497344970703125e+01f,
              Ln2HalfX3 = 1.0397207736968994140625f,
              Ln2Half = 3.465735912322998046875e-01f, Ln2Hi = 6.9313812256e-01f,
              Ln2Lo = 9.0580006145e-06f, InvLn2 = 1.4426950216e+00f,
              Tiny = 1.0f / 18014398509481984.0f, Q1 = -3.3333335072e-02f,
              Q2 = 1.5873016091e-03f, Q3 = -7.9365076090e-05f,
              Q4 = 4.0082177293e-06f, Q5 = -2.0109921195e-07f;
  if (ooc_isinf(x, 1) || x != x)
    return x;
  if (ooc_isinf(x, -1))
    return -1;
  float absx = x;
  bool sign = false;
  if (x < 0) {
    absx = -absx;
    sign = true;
  }
  if (absx >= Ln2X27) {
    if (sign)
      return -1;
    if (absx >= Othreshold)
      return (float)ooc_inf(1);
  }
  float c = 0;
  int k = 0;
  if (absx > Ln2Half) {
    float hi, lo;
    if (absx < Ln2HalfX3) {
      if (!sign) {
        hi = x - Ln2Hi;
        lo = Ln2Lo;
        k = 1;
      } else {
        hi = x + Ln2Hi;
        lo = -Ln2Lo;
        k = -1;
      }
    } else {
      k = !sign ? (int)(InvLn2 * x + 0.5f) : (int)(InvLn2 * x - 0.5f);
      float t = (float)k;
      hi = x - t * Ln2Hi;
      lo = t * Ln2Lo;
    }
    x = hi - lo;
    c = (hi - x) - lo;
  } else if (absx < Tiny) {
    return x;
  }
  float hfx = 0.5f * x;
  float hxs = x * hfx;
  float r1 = 1 + hxs * (Q1 + hxs * (Q2 + hxs * (Q3 + hxs * (Q4 + hxs * Q5))));
  float t = 3 - r1 * hfx;
  float e = hxs * ((r1 - t) / (6.0f - x * t));
  if (k == 0)
    return x - (x * e - hxs);
  e = (x * (e - c) - c);
  e -= hxs;
  if (k == -1)
    return 0.5f * (x - e) - 0.5f;
  if (k == 1) {
    if (x < -0.25f)
      return -2 * (e - (x + 0.5f));
    return 1 + 2 * (x - e);
  }
  if (k <= -2 || k > 56) {
    float y = 1 - (e - x);
    y = ooc_from_bitsf(ooc_bitsf(y) + ((unsigned)k << 23));
    return y - 1;
  }
  if (k < 20) {
    float tt = ooc_from_bitsf(0x3f800000u - (0x1000000u >> k));
    float y = tt - (e - x);
    return ooc_from_bitsf(ooc_bitsf(y) + ((unsigned)k << 23));
  }
  t = ooc_from_bitsf((unsigned)(0x7f - k) << 23);
  float y = x - (e + t);
  y += 1;
  return ooc_from_bitsf(ooc_bitsf(y) + ((unsigned)k << 23));
}

OOC_FN double ooc_tanh(double x) {
  const double MAXLOG = 8.8029691931113054295988e+01;
  double z = __builtin_fabs(x);
  if (z > 0.5 * MAXLOG)
    return x < 0 ? -1 : 1;
  if (z >= 0.625) {
    double s = ooc_exp(2 * z);
    z = 1 - 2 / (s + 1);
    return x < 0 ? -z : z;
  }
  if (x == 0)
    return x;
  double s = x * x;
  return x + x * s *
                 ((-9.64399179425052238628e-1 * s + -9.92877231001918586564e1) * s +
                  -1.61468768441708447952e3) /
                 (((s + 1.12811678491632931402e2) * s + 2.23548839060100448583e3) * s +
                  4.84406305325125486048e3);
}

/* float32 exp as gorgonia gets it from math32.Exp (assembly on amd64),
 * whose range is narrower than float32's: it gives +Inf above 88.37626
 * (0x42b0c0a5, where the true value is still 2.4e38) and 0 at or below
 * -87.68313 (0xc2af5dc3, deep in the subnormals). Inside that range the
 * rounded float64 value is within an ulp of it. */
OOC_FN float ooc_expf(float x) {
  if (x > 0x1.61814ap+6f)
    return (float)ooc_inf(1);
  if (x <= -0x1.5ebb86p+6f)
    return 0;
  return (float)ooc_exp((double)x);
}

/* Sine and cosine with Go's Cody-Waite reduction, generated for double (Go's
 * math.Sin/Cos) and for float in float arithmetic with float constants
 * (math32.Sin/Cos, which gorgonia's float32 ops call: inaccurate for large
 * arguments, e.g. sin(710) is 8.8e-5 there and 6.0e-5 in truth, and
 * reproduced). Go switches to Payne-Hanek at |x| >= 2^29; not ported: there
 * these lose accuracy. */
#define OOC_TRIG(T, S, L)                                                      \
  OOC_FN T ooc_sincos_poly##S(T z, bool sine) {                               \
    T zz = z * z;                                                              \
    if (sine)                                                                  \
      return z + z * zz * ((((((L(1.58962301576546568060e-10) * zz) +          \
                               L(-2.50507477628578072866e-8)) * zz +           \
                              L(2.75573136213857245213e-6)) * zz +             \
                             L(-1.98412698295895385996e-4)) * zz +             \
                            L(8.33333333332211858878e-3)) * zz +               \
                           L(-1.66666666666666307295e-1));                     \
    return L(1.0) - L(0.5) * zz +                                              \
           zz * zz * ((((((L(-1.13585365213876817300e-11) * zz) +              \
                          L(2.08757008419747316778e-9)) * zz +                 \
                         L(-2.75573141792967388112e-7)) * zz +                 \
                        L(2.48015872888517045348e-5)) * zz +                   \
                       L(-1.38888888888730564116e-3)) * zz +                   \
                      L(4.16666666666665929218e-2));                           \
  }                                                                            \
  OOC_FN T ooc_reduce_pi4##S(T x, unsigned long long *octant) {               \
    unsigned long long j =                                                     \
        (unsigned long long)(x * L(1.27323954473516268615107010698011489627)); \
    T y = (T)j;                                                                \
    if (j & 1) {                                                               \
      j++;                                                                     \
      y++;                                                                     \
    }                                                                          \
    *octant = j & 7;                                                           \
    return ((x - y * L(7.85398125648498535156e-1)) -                           \
            y * L(3.77489470793079817668e-8)) -                                \
           y * L(2.69515142907905952645e-15);                                  \
  }                                                                            \
  OOC_FN T ooc_cos##S(T x) {                                                  \
    if (x != x || ooc_isinf((double)x, 0))                                     \
      return (T)ooc_nan();                                                     \
    bool sign = false;                                                         \
    unsigned long long j;                                                      \
    T z = ooc_reduce_pi4##S(x < 0 ? -x : x, &j);                              \
    if (j > 3) {                                                               \
      j -= 4;                                                                  \
      sign = !sign;                                                            \
    }                                                                          \
    if (j > 1)                                                                 \
      sign = !sign;                                                            \
    T y = ooc_sincos_poly##S(z, j == 1 || j == 2);                            \
    return sign ? -y : y;                                                      \
  }                                                                            \
  OOC_FN T ooc_sin##S(T x) {                                                  \
    if (x == 0 || x != x)                                                      \
      return x;                                                                \
    if (ooc_isinf((double)x, 0))                                               \
      return (T)ooc_nan();                                                     \
    bool sign = false;                                                         \
    if (x < 0) {                                                               \
      x = -x;                                                                  \
      sign = true;                                                             \
    }                                                                          \
    unsigned long long j;                                                      \
    T z = ooc_reduce_pi4##S(x, &j);                                           \
    if (j > 3) {                                                               \
      sign = !sign;                                                            \
      j -= 4;                                                                  \
    }                                                                          \
    T y = ooc_sincos_poly##S(z, !(j == 1 || j == 2));                         \
    return sign ? -y : y;                                                      \
  }
#define OOC_LD(x) x
#define OOC_LF(x) x##f
OOC_TRIG(double, , OOC_LD)
OOC_TRIG(float, f, OOC_LF)

OOC_FN bool ooc_is_odd_int(double x) {
  if (__builtin_fabs(x) >= 9007199254740992.0)
    return false;
  double xi = __builtin_trunc(x);
  double xf = __builtin_copysign(x - xi, x);
  return xf == 0 && ((long long)xi & 1) == 1;
}

OOC_FN double ooc_pow(double x, double y) {
  if (y == 0 || x == 1)
    return 1;
  if (y == 1)
    return x;
  if (ooc_isnan(x) || ooc_isnan(y))
    return ooc_nan();
  if (x == 0) {
    if (y < 0)
      return (ooc_signbit(x) && ooc_is_odd_int(y)) ? ooc_inf(-1) : ooc_inf(1);
    if (y > 0)
      return (ooc_signbit(x) && ooc_is_odd_int(y)) ? x : 0;
  }
  if (ooc_isinf(y, 0)) {
    if (x == -1)
      return 1;
    if ((__builtin_fabs(x) < 1) == ooc_isinf(y, 1))
      return 0;
    return ooc_inf(1);
  }
  if (ooc_isinf(x, 0)) {
    if (ooc_isinf(x, -1)) { /* Pow(1/x, -y) = Pow(-0, -y) */
      double nx = 1 / x, ny = -y;
      if (ny < 0)
        return (ooc_signbit(nx) && ooc_is_odd_int(ny)) ? ooc_inf(-1) : ooc_inf(1);
      return (ooc_signbit(nx) && ooc_is_odd_int(ny)) ? nx : 0;
    }
    if (y < 0)
      return 0;
    if (y > 0)
      return ooc_inf(1);
  }
  if (y == 0.5)
    return __builtin_sqrt(x);
  if (y == -0.5)
    return 1 / __builtin_sqrt(x);
  double ay = __builtin_fabs(y);
  double yi = __builtin_trunc(ay);
  double yf = __builtin_copysign(ay - yi, ay);
  if (yf != 0 && x < 0)
    return ooc_nan();
  if (yi >= 9223372036854775808.0) {
    if (x == -1)
      return 1;
    if ((__builtin_fabs(x) < 1) == (y > 0))
      return 0;
    return ooc_inf(1);
  }
  double a1 = 1.0;
  int ae = 0;
  if (yf != 0) {
    if (yf > 0.5) {
      yf--;
      yi++;
    }
    a1 = ooc_exp(yf * ooc_log(x));
  }
  int xe;
  double x1 = ooc_frexp(x, &xe);
  for (long long i = (long long)yi; i != 0; i >>= 1) {
    if (xe < -(1 << 12) || (1 << 12) < xe) {
      ae += xe;
      break;
    }
    if (i & 1) {
      a1 *= x1;
      ae += xe;
    }
    x1 *= x1;
    xe *= 2; /* Go: xe <<= 1; a left shift of a negative int is undefined in C++17 */
    if (x1 < .5) {
      x1 += x1;
      xe--;
    }
  }
  if (y < 0) {
    a1 = 1 / a1;
    ae = -ae;
  }
  return ooc_ldexp(a1, ae);
}

#if !defined(__CUDA__)
/* For the tests (math_test.go): what the host build's kernels compute, and
 * the portable ports the PTX runs. */
extern "C" double ooc_host_exp(double x) { return ooc_exp(x); }
extern "C" double ooc_host_log(double x) { return ooc_log(x); }
extern "C" double ooc_host_exp_portable(double x) { return ooc_exp_portable(x); }
extern "C" double ooc_host_log_portable(double x) { return ooc_log_portable(x); }
/* 1 if exp uses Go's fused multiply-adds, 0 if not, -1 if the host build is
 * not Go's amd64 math (another architecture: the portable ports). */
extern "C" int ooc_host_exp_fma() {
#ifdef OOC_GO_AMD64_MATH
  return ooc_go_use_fma;
#else
  return -1;
#endif
}
#endif

#endif
