/* ref/red_num.h: dtype-generic element access for the reduction-family
 * kernels (ref/reduce.c, scan.c, topk.c, einsum.c).
 *
 * Every numeric kiln dtype is read either as a double (float16/32/64) or as an
 * int64 bit pattern (the integer types: signed ones sign-extended, unsigned
 * ones zero-extended, so uint64 keeps its bits). Stores convert back: doubles
 * are rounded to the element type (float16 round-to-nearest-even), integers
 * are truncated to the element width (wrap-around), and a double stored into
 * an integer type is truncated toward zero and saturated (NaN becomes 0). */
#ifndef KILN_REF_RED_NUM_H
#define KILN_REF_RED_NUM_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "kiln/types.h"

static inline bool kiln_red_is_float(kiln_dtype t)
{
    return t == KILN_DTYPE_FLOAT32 || t == KILN_DTYPE_FLOAT64 || t == KILN_DTYPE_FLOAT16;
}
static inline bool kiln_red_is_unsigned(kiln_dtype t)
{
    return t == KILN_DTYPE_UINT8 || t == KILN_DTYPE_UINT16 || t == KILN_DTYPE_UINT32 ||
           t == KILN_DTYPE_UINT64 || t == KILN_DTYPE_BOOL;
}
/* A numeric dtype (not bool, not undefined). */
static inline bool kiln_red_is_numeric(kiln_dtype t)
{
    return t != KILN_DTYPE_UNDEFINED && t != KILN_DTYPE_BOOL && t < KILN_DTYPE_COUNT;
}

static inline float kiln_red_h2f(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: value = man * 2^-24 */
            float f = (float)man * 5.9604644775390625e-8f;
            return sign ? -f : f;
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline uint16_t kiln_red_f2h(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t exp = (x >> 23) & 0xffu, man = x & 0x7fffffu;
    if (exp == 0xff) /* inf, nan */
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0));
    int32_t e = (int32_t)exp - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) { /* subnormal or zero */
        if (e < -10)
            return sign;
        man |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t h = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (h & 1)))
            h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
        h++; /* a carry into the exponent is the right rounding */
    return (uint16_t)(sign | h);
}

/* Element i of a float-typed buffer as a double. */
static inline double kiln_red_ldf(kiln_dtype t, const void *p, int64_t i)
{
    switch (t) {
    case KILN_DTYPE_FLOAT32: return ((const float *)p)[i];
    case KILN_DTYPE_FLOAT64: return ((const double *)p)[i];
    case KILN_DTYPE_FLOAT16: return kiln_red_h2f(((const uint16_t *)p)[i]);
    case KILN_DTYPE_INT8: return ((const int8_t *)p)[i];
    case KILN_DTYPE_UINT8: return ((const uint8_t *)p)[i];
    case KILN_DTYPE_INT16: return ((const int16_t *)p)[i];
    case KILN_DTYPE_UINT16: return ((const uint16_t *)p)[i];
    case KILN_DTYPE_INT32: return ((const int32_t *)p)[i];
    case KILN_DTYPE_UINT32: return ((const uint32_t *)p)[i];
    case KILN_DTYPE_INT64: return (double)((const int64_t *)p)[i];
    case KILN_DTYPE_UINT64: return (double)((const uint64_t *)p)[i];
    case KILN_DTYPE_BOOL: return ((const uint8_t *)p)[i] != 0;
    default: return 0.0;
    }
}

/* Element i of an integer-typed buffer as an int64 bit pattern. */
static inline int64_t kiln_red_ldi(kiln_dtype t, const void *p, int64_t i)
{
    switch (t) {
    case KILN_DTYPE_INT8: return ((const int8_t *)p)[i];
    case KILN_DTYPE_UINT8: return ((const uint8_t *)p)[i];
    case KILN_DTYPE_INT16: return ((const int16_t *)p)[i];
    case KILN_DTYPE_UINT16: return ((const uint16_t *)p)[i];
    case KILN_DTYPE_INT32: return ((const int32_t *)p)[i];
    case KILN_DTYPE_UINT32: return ((const uint32_t *)p)[i];
    case KILN_DTYPE_INT64: return ((const int64_t *)p)[i];
    case KILN_DTYPE_UINT64: return (int64_t)((const uint64_t *)p)[i];
    case KILN_DTYPE_BOOL: return ((const uint8_t *)p)[i] != 0;
    default: return (int64_t)kiln_red_ldf(t, p, i);
    }
}

/* Stores an int64 bit pattern, truncated to the element width. */
static inline void kiln_red_sti(kiln_dtype t, void *p, int64_t i, int64_t v)
{
    uint64_t u = (uint64_t)v;
    switch (t) {
    case KILN_DTYPE_INT8: ((int8_t *)p)[i] = (int8_t)(uint8_t)u; break;
    case KILN_DTYPE_UINT8: ((uint8_t *)p)[i] = (uint8_t)u; break;
    case KILN_DTYPE_INT16: ((int16_t *)p)[i] = (int16_t)(uint16_t)u; break;
    case KILN_DTYPE_UINT16: ((uint16_t *)p)[i] = (uint16_t)u; break;
    case KILN_DTYPE_INT32: ((int32_t *)p)[i] = (int32_t)(uint32_t)u; break;
    case KILN_DTYPE_UINT32: ((uint32_t *)p)[i] = (uint32_t)u; break;
    case KILN_DTYPE_INT64: ((int64_t *)p)[i] = v; break;
    case KILN_DTYPE_UINT64: ((uint64_t *)p)[i] = u; break;
    case KILN_DTYPE_BOOL: ((uint8_t *)p)[i] = u != 0; break;
    case KILN_DTYPE_FLOAT32: ((float *)p)[i] = (float)v; break;
    case KILN_DTYPE_FLOAT64: ((double *)p)[i] = (double)v; break;
    case KILN_DTYPE_FLOAT16: ((uint16_t *)p)[i] = kiln_red_f2h((float)v); break;
    default: break;
    }
}

/* Stores a double: rounded for float types; truncated toward zero and
 * saturated for integer types (NaN stores 0). */
static inline void kiln_red_stf(kiln_dtype t, void *p, int64_t i, double v)
{
    switch (t) {
    case KILN_DTYPE_FLOAT32: ((float *)p)[i] = (float)v; return;
    case KILN_DTYPE_FLOAT64: ((double *)p)[i] = v; return;
    case KILN_DTYPE_FLOAT16: ((uint16_t *)p)[i] = kiln_red_f2h((float)v); return;
    default: break;
    }
    if (isnan(v)) {
        kiln_red_sti(t, p, i, 0);
    } else if (t == KILN_DTYPE_UINT64) {
        uint64_t u = v <= 0 ? 0 : v >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)v;
        kiln_red_sti(t, p, i, (int64_t)u);
    } else {
        int64_t x = v <= -9223372036854775808.0 ? INT64_MIN
                    : v >= 9223372036854775807.0 ? INT64_MAX
                                                 : (int64_t)v;
        kiln_red_sti(t, p, i, x);
    }
}

/* Smallest and largest value of an integer dtype, as int64 bit patterns. */
static inline int64_t kiln_red_int_min(kiln_dtype t)
{
    switch (t) {
    case KILN_DTYPE_INT8: return INT8_MIN;
    case KILN_DTYPE_INT16: return INT16_MIN;
    case KILN_DTYPE_INT32: return INT32_MIN;
    case KILN_DTYPE_INT64: return INT64_MIN;
    default: return 0; /* unsigned */
    }
}
static inline int64_t kiln_red_int_max(kiln_dtype t)
{
    switch (t) {
    case KILN_DTYPE_INT8: return INT8_MAX;
    case KILN_DTYPE_UINT8: return UINT8_MAX;
    case KILN_DTYPE_INT16: return INT16_MAX;
    case KILN_DTYPE_UINT16: return UINT16_MAX;
    case KILN_DTYPE_INT32: return INT32_MAX;
    case KILN_DTYPE_UINT32: return UINT32_MAX;
    case KILN_DTYPE_INT64: return INT64_MAX;
    case KILN_DTYPE_UINT64: return (int64_t)UINT64_MAX; /* all bits set */
    default: return 1;
    }
}

/* a < b for two int64 bit patterns of dtype t. */
static inline bool kiln_red_int_less(kiln_dtype t, int64_t a, int64_t b)
{
    return kiln_red_is_unsigned(t) ? (uint64_t)a < (uint64_t)b : a < b;
}

#endif
