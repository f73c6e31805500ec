/* kiln_kernels_math.h: float32 transcendental functions written so that gcc
 * -O3 auto-vectorizes the loops that call them: static inline, no calls, no
 * data-dependent branches (both sides of every case are computed and one is
 * selected), no float -> int conversions (integers are read from the bits of
 * a float rounded by the 1.5 * 2^23 trick), inputs clamped to the range
 * where the result is still representable. Generated code includes this
 * header in every kernel (codegen/c/expr.c emits calls to it for Sigmoid,
 * Tanh, Exp, Log, Erf, Gelu, Softplus, Mish, Elu, Selu, HardSigmoid,
 * HardSwish); libm's expf/tanhf/erff are scalar calls that keep gcc from
 * vectorizing a loop.
 *
 * Accuracy (checked by tests/kernels/test_math_kernels.c against double libm
 * over dense sweeps of the whole float line and of each function's busy
 * range, compiled both without and with FMA contraction). Error is counted
 * in units of the last place of the correctly rounded float result
 * (denormal results: units of 2^-149):
 *   kiln_m_expf      <= 2 ulp   (0 below x = -103.98, +inf above 88.73)
 *   kiln_m_expf_nonpos  = kiln_m_expf for x <= 0 (its domain), bit for bit
 *   kiln_m_expm1f    <= 2 ulp   for x <= 0 (its domain; see the function)
 *   kiln_m_logf      <= 2 ulp   (-inf at 0, NaN below 0, denormals exact-scaled)
 *   kiln_m_log1pf    <= 2 ulp   for x > -1
 *   kiln_m_tanhf     <= 3 ulp
 *   kiln_m_sigmoidf  <= 3 ulp
 *   kiln_m_erff      <= 3 ulp
 *   kiln_m_softplusf <= 3 ulp
 *   kiln_m_geluf     <= 1.5 (2^-24 |x| + 1 ulp): an absolute bound, as the
 *                    textbook 0.5 x (1 + erf(x / sqrt 2)) has (<= 3 ulp for
 *                    x >= 0)
 * NaN in gives NaN out; +-inf give the limits. The composite ops expr.c
 * builds from these (tanh-form Gelu, Mish, Elu) add the usual float
 * rounding of their formula, as the libm versions did.
 *
 * The polynomial coefficients are near-minimax fits (iteratively reweighted
 * least squares on Chebyshev nodes in double, rounded to float). */
#ifndef KILN_KERNELS_MATH_H
#define KILN_KERNELS_MATH_H

#include <stdint.h>
#include <string.h>

static inline float kiln_m_asf(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t kiln_m_asu(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* |x|, -|x| and copysign as bit operations (gcc vectorizes them either way; these
 * need no <math.h>). */
static inline float kiln_m_absf(float x) { return kiln_m_asf(kiln_m_asu(x) & 0x7fffffffu); }
static inline float kiln_m_negabsf(float x) { return kiln_m_asf(kiln_m_asu(x) | 0x80000000u); }
static inline float kiln_m_copysignf(float mag, float sgn)
{
    return kiln_m_asf((kiln_m_asu(mag) & 0x7fffffffu) | (kiln_m_asu(sgn) & 0x80000000u));
}

/* c ? a : b through a bit mask: gcc if-converts `?:` only when neither
 * side may trap and no earlier pass turned it into a branch (two clamps in a
 * row get jump-threaded), so the functions below never use `?:` on floats. */
static inline float kiln_m_sel(int c, float a, float b)
{
    uint32_t m = 0u - (uint32_t)c;
    return kiln_m_asf((kiln_m_asu(a) & m) | (kiln_m_asu(b) & ~m));
}

/* 2^n for integer n in [-126, 127] as a float's exponent bits. */
static inline float kiln_m_pow2i(int32_t n) { return kiln_m_asf((uint32_t)(n + 127) << 23); }

#define KILN_M_LOG2E 0x1.715476p+0f
#define KILN_M_LN2_HI 0x1.62e4p-1f     /* 15 significant bits: n * hi exact */
#define KILN_M_LN2_LO 0x1.7f7d1cp-20f
#define KILN_M_ROUND 0x1.8p23f        /* adding it rounds |v| < 2^22 to an integer */

/* e^r - 1 for r = x - nf ln2 (nf = x / ln2 rounded to an integer): the
 * reduction in two steps of ln2, then r + r^2 P(r), |r| <= ln2/2 (slightly
 * more after rounding). */
static inline float kiln_m_exp_q(float x, float nf)
{
    float r = x - nf * KILN_M_LN2_HI;
    r = r - nf * KILN_M_LN2_LO;
    float p = 0x1.6a1a6ap-10f;
    p = p * r + 0x1.123fc8p-7f;
    p = p * r + 0x1.555916p-5f;
    p = p * r + 0x1.55548ap-3f;
    p = p * r + 0x1.fffffcp-2f;
    return r + (r * r) * p;
}

/* Range reduction of exp: x = n ln2 + r, |r| <= ln2/2 (slightly more after
 * rounding); returns e^r - 1 as r + r^2 P(r) and n in *n. x must be within
 * [-2^21, 2^21] or NaN (then the result is NaN). */
static inline float kiln_m_exp_reduce(float x, int32_t *n)
{
    float t = x * KILN_M_LOG2E + KILN_M_ROUND;
    float nf = t - KILN_M_ROUND;
    *n = (int32_t)(kiln_m_asu(t) - 0x4b400000u);
    return kiln_m_exp_q(x, nf);
}

/* e^x. Clamped to [-104, 104], where the result is 0 or +inf anyway; 2^n is
 * applied in two halves so that results in the denormal range round once
 * and results past FLT_MAX overflow to +inf. */
static inline float kiln_m_expf(float x)
{
    x = kiln_m_sel(x > 104.0f, 104.0f, x); /* NaN passes both */
    x = kiln_m_sel(x < -104.0f, -104.0f, x);
    int32_t n;
    float q = kiln_m_exp_reduce(x, &n);
    int32_t n1 = n >> 1; /* arithmetic shift (gcc) */
    return ((1.0f + q) * kiln_m_pow2i(n1)) * kiln_m_pow2i(n - n1);
}

/* e^x for x <= 0 (or NaN): the exp of sigmoid and softplus (e^-|x|), erf
 * (e^-x^2) and of softmax and attention (e^(x - max)). No upper clamp, and
 * 2^n applied as 2^(n + 64) then 2^-64, whose product rounds once (n + 64
 * >= -86 keeps the first factor normal), instead of as two halves of n.
 * The rounding constant carries the exponent bias too (1.5 * 2^23 + 191:
 * t's low mantissa bits are n + 191), so 2^(n + 64) is t's bits shifted
 * left by 23 (n <= 0 keeps the sign bit clear), and 2^(n + 64) (1 + q) is
 * one multiply-add (rounded once, as (1 + q) then an exact scale were).
 * Bit for bit kiln_m_expf's result in fewer operations (a SiLU loop,
 * AVX-512, one thread: 0.26 -> 0.21 ns per element with the two-factor
 * scale, 0.195 -> 0.175 with the shifted bits and the multiply-add). */
static inline float kiln_m_expf_nonpos(float x)
{
    x = kiln_m_sel(x < -104.0f, -104.0f, x); /* NaN passes */
    const float round = KILN_M_ROUND + 191.0f;
    float t = x * KILN_M_LOG2E + round;
    float nf = t - round;
    float q = kiln_m_exp_q(x, nf);
    float s = kiln_m_asf(kiln_m_asu(t) << 23); /* 2^(n + 64) */
    return (q * s + s) * 0x1p-64f;
}

/* e^x - 1 for x <= 0 without cancellation near 0 (its domain: positive x
 * are taken as 0, which is what its users, Elu, Selu and tanh, select away
 * or never pass). 2^n q + (2^n - 1): exact subtraction for n >= -24. */
static inline float kiln_m_expm1f(float x)
{
    x = kiln_m_sel(x > 0.0f, 0.0f, x);
    x = kiln_m_sel(x < -87.0f, -87.0f, x);
    int32_t n;
    float q = kiln_m_exp_reduce(x, &n);
    float s = kiln_m_pow2i(n);
    return s * q + (s - 1.0f);
}

/* Natural logarithm. x = 2^e m, m in [sqrt(1/2), sqrt(2)); log(m) = log1p(f)
 * = f - (f^2/2 - s (f^2/2 + R(s^2))) with s = f / (2 + f) (fdlibm's
 * arrangement; f is exact). Denormal x are scaled by 2^23 first. */
static inline float kiln_m_logf(float x)
{
    float xup = x * 0x1p23f; /* computed unconditionally: a select, not a branch */
    float xs = kiln_m_sel(x < 0x1p-126f, xup, x);
    float eadj = kiln_m_sel(x < 0x1p-126f, -23.0f, 0.0f);
    uint32_t ix = kiln_m_asu(xs) - 0x3f3504f3u;
    int32_t e = (int32_t)ix >> 23; /* arithmetic shift (gcc) */
    float m = kiln_m_asf((ix & 0x007fffffu) + 0x3f3504f3u);
    float f = m - 1.0f;
    float s = f / (2.0f + f);
    float z = s * s;
    float r = z * (0x1.55557cp-1f + z * (0x1.995c5ep-2f + z * 0x1.3227c0p-2f));
    float hfsq = 0.5f * f * f;
    float ef = (float)e + eadj;
    float y = ef * KILN_M_LN2_HI + (f - (hfsq - (s * (hfsq + r) + ef * KILN_M_LN2_LO)));
    y = kiln_m_sel(x < 0.0f, __builtin_nanf(""), y);
    y = kiln_m_sel(x == 0.0f, -__builtin_inff(), y);
    y = kiln_m_sel(x == __builtin_inff(), x, y);
    return kiln_m_sel(x != x, x, y);
}

/* log(1 + x): log of the rounded 1 + x, corrected by the rounding error of
 * that sum, (x - (u - 1)) / u. */
static inline float kiln_m_log1pf(float x)
{
    float u = 1.0f + x;
    float c = (x - (u - 1.0f)) / kiln_m_sel(u == 0.0f, 1.0f, u); /* x = -1: -inf + 0 */
    float y = kiln_m_logf(u) + c;
    return kiln_m_sel(x == __builtin_inff(), x, y);
}

/* tanh(|x|) = -e / (e + 2) with e = expm1(-2|x|) in (-1, 0]: no overflow,
 * no cancellation near 0. |x| >= 9.1 rounds to 1. */
static inline float kiln_m_tanhf(float x)
{
    float a = kiln_m_absf(x);
    a = kiln_m_sel(a > 9.1f, 9.1f, a);
    float e = kiln_m_expm1f(-2.0f * a);
    return kiln_m_copysignf(-e / (e + 2.0f), x);
}

/* 1 / (1 + e^-x): e = e^-|x| <= 1; x >= 0: 1 / (1 + e), else e / (1 + e)
 * (accurate for very negative x too, down to denormal results). */
static inline float kiln_m_sigmoidf(float x)
{
    float e = kiln_m_expf_nonpos(kiln_m_negabsf(x));
    float num = kiln_m_sel(x >= 0.0f, 1.0f, e); /* NaN: e, which is NaN */
    return num / (1.0f + e);
}

/* log(1 + e^x) = max(x, 0) + log1p(e^-|x|). */
static inline float kiln_m_softplusf(float x)
{
    float pos = kiln_m_sel(x > 0.0f, x, 0.0f);
    return pos + kiln_m_log1pf(kiln_m_expf_nonpos(kiln_m_negabsf(x)));
}

/* erf: |x| < 0.875: x P(x^2); 0.875 <= |x| < 4: 1 - e^(-x^2) Q(|x| - 2.4375);
 * |x| >= 4 rounds to +-1 (erfc(4) = 1.5e-8 < half an ulp of 1). */
static inline float kiln_m_erff(float x)
{
    float a = kiln_m_absf(x);
    a = kiln_m_sel(a > 4.0f, 4.0f, a);
    float z = a * a;
    float ps = -0x1.453d64p-11f;
    ps = ps * z + 0x1.49cab6p-8f;
    ps = ps * z - 0x1.b6f3aep-6f;
    ps = ps * z + 0x1.ce2122p-4f;
    ps = ps * z - 0x1.81270cp-2f;
    ps = ps * z + 0x1.20dd74p+0f;
    ps = ps * a;
    float t = a - 2.4375f;
    float q = 0x1.2b6cc2p-13f;
    q = q * t + 0x1.6fb696p-12f;
    q = q * t + 0x1.960fc8p-11f;
    q = q * t - 0x1.554f24p-11f;
    q = q * t + 0x1.442d1ep-9f;
    q = q * t - 0x1.2299eap-7f;
    q = q * t + 0x1.b15a30p-6f;
    q = q * t - 0x1.3da90cp-4f;
    q = q * t + 0x1.b974bcp-3f;
    float pl = 1.0f - kiln_m_expf_nonpos(-z) * q;
    return kiln_m_copysignf(kiln_m_sel(a < 0.875f, ps, pl), x);
}

/* GELU, x Phi(x) (Phi the standard normal CDF, 0.5 (1 + erf(x / sqrt 2))),
 * without an exp: two polynomials for Phi, both computed and one selected
 * (~30 vector operations per 16 values against ~60 for 0.5 x (1 + erf(x /
 * sqrt 2)) through kiln_m_erff, whose e^-x^2 and two-sided range handling
 * cost as much as the GEMM epilogue it runs in; vit-b-16's MLP GEMMs spent
 * 6% of their time there):
 *   |x| < 2:  Phi = 1/2 + x P(x^2), P of degree 7;
 *   |x| >= 2: 1 - Phi(|x|) = Q(|x| - 3.8125), Q of degree 10 fitted on
 *             [2, 5.65625], within 1.5 (1 - Phi) near its end so that
 *             1 - Q rounds to 1 there; |x| is clamped to 5.65625 and x
 *             below -5.65625 gives 0 (the exact result is below 4.4e-8).
 * The fits minimize Phi's absolute error, the error the textbook formula
 * has too (1 + erf cancels for negative x): Phi within ~1.3 2^-24 (near 1/2
 * and 1 this is its own rounding), so the result is within 1.5 (2^-24 |x| +
 * 1 ulp): <= 3 ulp for x >= 0, where Phi >= 1/2; for x < 0 the same
 * absolute error on results that shrink to 0. NaN gives NaN; +inf, +inf;
 * -inf, 0. */
static inline float kiln_m_geluf(float x)
{
    float u = kiln_m_absf(x);
    u = kiln_m_sel(u < 5.65625f, u, 5.65625f); /* NaN: 5.65625, the product keeps the NaN */
    float xc = kiln_m_sel(x < -5.65625f, 0.0f, x);
    float s = x * x;
    float p = -0x1.1e53c6p-26f;
    p = p * s + 0x1.183632p-21f;
    p = p * s - 0x1.2c8ceap-17f;
    p = p * s + 0x1.e015dcp-14f;
    p = p * s - 0x1.36f4fap-10f;
    p = p * s + 0x1.46ca76p-7f;
    p = p * s - 0x1.105804p-4f;
    p = p * s + 0x1.988452p-2f;
    float small = x * p + 0.5f;
    float t = u - 3.8125f;
    float q = -0x1.4494f2p-21f;
    q = q * t + 0x1.8103aep-19f;
    q = q * t - 0x1.a484e2p-23f;
    q = q * t - 0x1.037b22p-15f;
    q = q * t + 0x1.007af4p-13f;
    q = q * t - 0x1.340dd2p-12f;
    q = q * t + 0x1.0a2802p-11f;
    q = q * t - 0x1.4976b0p-11f;
    q = q * t + 0x1.169a2ep-11f;
    q = q * t - 0x1.23d8fep-12f;
    q = q * t + 0x1.205b40p-14f;
    float large = kiln_m_sel(x < 0.0f, q, 1.0f - q);
    return xc * kiln_m_sel(u < 2.0f, small, large);
}

/* min(1, max(0, alpha x + beta)) with fmin/fmax's NaN rule of the reference
 * (fmin(1, NaN) = 1). */
static inline float kiln_m_hardsigmoidf(float x, float alpha, float beta)
{
    float v = alpha * x + beta;
    v = kiln_m_sel(v < 1.0f, v, 1.0f);
    return kiln_m_sel(v > 0.0f, v, 0.0f);
}

#endif
