/* util/half.h: IEEE 754 binary16 (float16) <-> float / double conversion.
 *
 * float16 values are stored as their uint16_t bit pattern. Widening is exact:
 * the 5-bit exponent and 10-bit mantissa are re-biased into a float (subnormal
 * halves are renormalised). Narrowing rounds to nearest, ties to even, with
 * overflow to infinity and gradual underflow to subnormals; NaN stays NaN
 * (quiet, sign kept). kiln_f64_to_f16 first narrows to float with
 * round-to-odd (the float's last bit records inexactness), which makes the
 * second rounding to half exact: a double rounds the same as it would directly.
 */
#ifndef KILN_UTIL_HALF_H
#define KILN_UTIL_HALF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float kiln_f16_to_f32(uint16_t h)
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

static inline uint16_t kiln_f32_to_f16(float f)
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
            return sign; /* below half the smallest subnormal: rounds to zero */
        man |= 0x800000u; /* implicit bit */
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

static inline uint16_t kiln_f64_to_f16(double d)
{
    float f = (float)d;
    if (isfinite(d) && (double)f != d) {
        /* round to odd: truncate toward d's magnitude, then set the last bit */
        uint32_t x;
        memcpy(&x, &f, sizeof x);
        if (fabs((double)f) > fabs(d))
            x--; /* f was rounded away from zero: step back toward it */
        x |= 1u;
        memcpy(&f, &x, sizeof f);
    }
    return kiln_f32_to_f16(f);
}

static inline double kiln_f16_to_f64(uint16_t h)
{
    return (double)kiln_f16_to_f32(h);
}

#endif
