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

#include "ref/elemwise_common.h"
#include "util/half.h"
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

/* float16 conversions: util/half.h (round to nearest even). */
static inline float kiln_red_h2f(uint16_t h)
{
    return kiln_f16_to_f32(h);
}

static inline uint16_t kiln_red_f2h(float f)
{
    return kiln_f32_to_f16(f);
}

/* Element i of any numeric buffer as a double, and as an int64 (bit
 * pattern for integers, saturated for floats): ref/elemwise_common.c. */
static inline double kiln_red_ldf(kiln_dtype t, const void *p, int64_t i)
{
    return kiln_ew_load_f64(t, p, i);
}

static inline int64_t kiln_red_ldi(kiln_dtype t, const void *p, int64_t i)
{
    return kiln_ew_load_i64(t, p, i);
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
