/* tests/kernels/test_cast_kernels.c: the conversions of kiln_kernels_cast.h
 * (what generated Cast kernels run) against the ones the reference kernel
 * uses (util/half.h, ref/elemwise_common.c), which they copy because
 * generated code cannot include them. The header is compiled with F16C here
 * (as on the avx2/avx512 targets), so both its portable float16 code (the
 * _soft functions) and the hardware path are checked, the latter when the
 * CPU has F16C:
 *  - float16 -> float: all 65,536 halves, bit for bit;
 *  - float -> float16: every float whose low 7 bits are a fixed pattern
 *    (2^25 floats: every exponent, sign, NaN payloads, the rounding bits);
 *  - double -> float16: random doubles and doubles next to the halfway
 *    points between halves (where double rounding would show);
 *  - double -> every integer type (truncate, saturate, NaN -> 0) on edge and
 *    random values. */
#include <math.h>
#include <string.h>

#include "test_support.h"

#include "ref/elemwise_common.h"
#include "util/half.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("f16c")
static bool have_f16c(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("f16c");
}
#else
static bool have_f16c(void)
{
    return true; /* the header's portable code is what it runs */
}
#endif
#include "codegen/c/kernels/kiln_kernels_cast.h"

static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint32_t fbits(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    return x;
}

static void test_half_to_float(void **state)
{
    (void)state;
    bool hw = have_f16c();
    for (uint32_t h = 0; h < 65536; h++) {
        uint32_t a = fbits(kiln_kc_h2f_soft((uint16_t)h)), b = fbits(kiln_f16_to_f32((uint16_t)h));
        if (a != b)
            fail_msg("half 0x%04x: 0x%08x, util/half.h 0x%08x", h, a, b);
        if (!hw)
            continue;
        /* kiln_kc_h2f: the same but for a NaN's quiet bit; the quiet
         * variant: NaN with the quiet bit, everything else as is */
        bool nan = ((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff);
        uint32_t d = fbits(kiln_kc_h2f((uint16_t)h)), q = fbits(kiln_kc_h2f_quiet((uint16_t)h));
        if ((d | (nan ? 0x400000u : 0)) != (nan ? (b | 0x400000u) : b))
            fail_msg("half 0x%04x: kiln_kc_h2f 0x%08x, util/half.h 0x%08x", h, d, b);
        assert_int_equal(q, nan ? (b | 0x400000u) : b);
    }
}

static void test_float_to_half(void **state)
{
    (void)state;
    bool hw = have_f16c();
    for (uint64_t hi = 0; hi < (1ull << 25); hi++) {
        uint32_t x = (uint32_t)(hi << 7) | 0x55u;
        if ((hi & 0xff) == 0)
            x = (uint32_t)(hi << 7); /* exact zeros / low bits clear too */
        float f;
        memcpy(&f, &x, sizeof f);
        uint16_t a = kiln_kc_f2h_soft(f), b = kiln_f32_to_f16(f);
        if (a != b)
            fail_msg("float 0x%08x: half 0x%04x, util/half.h 0x%04x", x, a, b);
        if (hw && (a = kiln_kc_f2h(f)) != b)
            fail_msg("float 0x%08x: half 0x%04x (F16C), util/half.h 0x%04x", x, a, b);
    }
}

static void test_double_to_half(void **state)
{
    (void)state;
    uint64_t s = 1;
    for (int i = 0; i < 2000000; i++) {
        double d;
        if (i % 2) {
            uint64_t bits = next(&s);
            memcpy(&d, &bits, sizeof d);
        } else {
            /* a half, plus half an ulp of it, nudged by a few double ulps */
            uint16_t h = (uint16_t)next(&s);
            double base = (double)kiln_f16_to_f32(h);
            if (!isfinite(base))
                continue;
            double ulp = ldexp(1.0, ilogb(base == 0 ? 6e-8 : base) - 10);
            d = base + ulp / 2;
            d = nextafter(d, (i / 2) % 3 == 0 ? INFINITY : (i / 2) % 3 == 1 ? -INFINITY : d);
        }
        if (!have_f16c())
            break; /* kiln_kc_d2h goes through kiln_kc_f2h */
        uint16_t a = kiln_kc_d2h(d), b = kiln_f64_to_f16(d);
        if (a != b)
            fail_msg("double %a: half 0x%04x, util/half.h 0x%04x", d, a, b);
    }
}

static void test_double_to_int(void **state)
{
    (void)state;
    static const double edges[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0, -0.0, 0.9, -0.9, 127.5,
                                   -128.99, 255.5, 256.0, -1.0, 32767.5, 65535.5, 65536.0,
                                   2147483647.9, -2147483648.9, 4294967295.5, 4294967296.0,
                                   9223372036854775807.0, -9223372036854775808.0, 1.8e19,
                                   1.8446744073709552e19, 1e300, -1e300};
    uint64_t s = 2;
    for (int i = 0; i < 200000; i++) {
        double v;
        int ne = (int)(sizeof edges / sizeof edges[0]);
        if (i < ne) {
            v = edges[i];
        } else {
            uint64_t r = next(&s);
            v = ldexp((double)(int64_t)r / 9.2e18, (int)(r % 70)); /* |v| up to ~2^70 */
        }
        int8_t i8;
        uint8_t u8;
        int16_t i16;
        uint16_t u16;
        int32_t i32;
        uint32_t u32;
        int64_t i64;
        uint64_t u64;
        kiln_ew_store_f64(KILN_DTYPE_INT8, &i8, 0, v);
        kiln_ew_store_f64(KILN_DTYPE_UINT8, &u8, 0, v);
        kiln_ew_store_f64(KILN_DTYPE_INT16, &i16, 0, v);
        kiln_ew_store_f64(KILN_DTYPE_UINT16, &u16, 0, v);
        kiln_ew_store_f64(KILN_DTYPE_INT32, &i32, 0, v);
        kiln_ew_store_f64(KILN_DTYPE_UINT32, &u32, 0, v);
        kiln_ew_store_f64(KILN_DTYPE_INT64, &i64, 0, v);
        kiln_ew_store_f64(KILN_DTYPE_UINT64, &u64, 0, v);
        if (kiln_kc_d2i8(v) != i8 || kiln_kc_d2u8(v) != u8 || kiln_kc_d2i16(v) != i16 ||
            kiln_kc_d2u16(v) != u16 || kiln_kc_d2i32(v) != i32 || kiln_kc_d2u32(v) != u32 ||
            kiln_kc_d2i64(v) != i64 || kiln_kc_d2u64(v) != u64)
            fail_msg("double %a converts differently from ref (%d %u %d %u %d %u %lld %llu)", v,
                     i8, u8, i16, u16, i32, u32, (long long)i64, (unsigned long long)u64);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_half_to_float),
        cmocka_unit_test(test_float_to_half),
        cmocka_unit_test(test_double_to_half),
        cmocka_unit_test(test_double_to_int),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
