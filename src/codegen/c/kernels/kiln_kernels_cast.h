/* kiln_kernels_cast.h: the element conversions of Cast, bit for bit those of
 * the reference kernel (src/ref/compare.c, ref/elemwise_common.c) and of
 * util/half.h, which generated code cannot include (tests/kernels/
 * test_cast_kernels.c checks the two against each other exhaustively for
 * float16 and on edge and random values for the rest):
 *   float16 <-> float: widening exact, narrowing round to nearest even,
 *     overflow to infinity, gradual underflow, NaN quiet with its sign;
 *   double -> float16 through a round-to-odd float (one rounding);
 *   double -> integer: truncation toward zero, saturated at the type's
 *     limits, NaN -> 0 (kiln_kc_d2i8 .. kiln_kc_d2u64).
 * The cast template (codegen/c/tpl_cast.c) composes these into one
 * expression per element; the compare and argreduce templates read float16
 * through kiln_kc_h2f. With F16C (the avx2 and avx512 targets) the float16
 * conversions are the hardware's, which round the same way (the _soft
 * versions are the portable ones; a NaN's quiet bit after kiln_kc_h2f is
 * unspecified, kiln_kc_h2f_quiet sets it). Header-only C11, no kiln
 * includes; KILN_KERNELS_PORTABLE forces the portable code. */
#ifndef KILN_KERNELS_CAST_H
#define KILN_KERNELS_CAST_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__F16C__) && !defined(KILN_KERNELS_PORTABLE)
#include <immintrin.h>
#define KILN_KC_F16C 1
#endif

static inline float kiln_kc_h2f_soft(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: shift the leading 1 into the implicit position */
            exp = 127 - 15 + 1;
            while (!(man & 0x400u)) {
                man <<= 1;
                exp--;
            }
            bits = sign | (exp << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13); /* inf, NaN (payload kept) */
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline float kiln_kc_h2f(uint16_t h)
{
#ifdef KILN_KC_F16C
    return _cvtsh_ss(h);
#else
    return kiln_kc_h2f_soft(h);
#endif
}

/* float16 -> float as the reference's detour through double gives it: a
 * signaling NaN comes back quiet (the hardware conversions set the quiet
 * bit; a compiler may fold (float)(double)f to f, so it is set here). */
static inline float kiln_kc_h2f_quiet(uint16_t h)
{
    float f = kiln_kc_h2f(h);
    if (f != f) {
        uint32_t x;
        memcpy(&x, &f, sizeof x);
        x |= 0x400000u;
        memcpy(&f, &x, sizeof f);
    }
    return f;
}

static inline uint16_t kiln_kc_f2h_soft(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t exp = (x >> 23) & 0xffu, man = x & 0x7fffffu;
    if (exp == 0xff) /* inf or NaN (quiet) */
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0u));
    int32_t e = (int32_t)exp - 127 + 15; /* biased half exponent */
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00u); /* overflow */
    if (e <= 0) {                          /* subnormal half, or zero */
        if (e < -10)
            return sign;
        man |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t h = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (h & 1u)))
            h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
        h++; /* a carry into the exponent is the right result (up to inf) */
    return (uint16_t)(sign | h);
}

static inline uint16_t kiln_kc_f2h(float f)
{
#ifdef KILN_KC_F16C
    return (uint16_t)_cvtss_sh(f, 0); /* round to nearest even */
#else
    return kiln_kc_f2h_soft(f);
#endif
}

static inline uint16_t kiln_kc_d2h(double d)
{
    float f = (float)d;
    if (isfinite(d) && (double)f != d) {
        /* round to odd: truncate toward d's magnitude, then set the last bit */
        uint32_t x;
        memcpy(&x, &f, sizeof x);
        if (fabs((double)f) > fabs(d))
            x--;
        x |= 1u;
        memcpy(&f, &x, sizeof f);
    }
    return kiln_kc_f2h(f);
}

/* v truncated toward zero and clamped to [lo, hi] (both exact in double);
 * NaN -> 0. */
static inline double kiln_kc_trunc_clamp(double v, double lo, double hi)
{
    if (v != v)
        return 0.0;
    v = trunc(v);
    return v < lo ? lo : v > hi ? hi : v;
}

/* double -> each integer type: truncated toward zero, saturated, NaN -> 0. */
static inline int8_t kiln_kc_d2i8(double v) { return (int8_t)kiln_kc_trunc_clamp(v, INT8_MIN, INT8_MAX); }
static inline uint8_t kiln_kc_d2u8(double v) { return (uint8_t)kiln_kc_trunc_clamp(v, 0, UINT8_MAX); }
static inline int16_t kiln_kc_d2i16(double v) { return (int16_t)kiln_kc_trunc_clamp(v, INT16_MIN, INT16_MAX); }
static inline uint16_t kiln_kc_d2u16(double v) { return (uint16_t)kiln_kc_trunc_clamp(v, 0, UINT16_MAX); }
static inline int32_t kiln_kc_d2i32(double v) { return (int32_t)kiln_kc_trunc_clamp(v, INT32_MIN, INT32_MAX); }
static inline uint32_t kiln_kc_d2u32(double v) { return (uint32_t)kiln_kc_trunc_clamp(v, 0, UINT32_MAX); }

static inline int64_t kiln_kc_d2i64(double v)
{
    if (v != v)
        return 0;
    if (v >= 9223372036854775808.0)
        return INT64_MAX;
    if (v <= -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)v;
}

static inline uint64_t kiln_kc_d2u64(double v)
{
    if (v != v || v <= 0.0)
        return 0;
    if (v >= 18446744073709551616.0)
        return UINT64_MAX;
    return (uint64_t)v;
}

#endif /* KILN_KERNELS_CAST_H */
