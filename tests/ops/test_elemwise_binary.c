/* tests/ops/test_elemwise_binary.c: the broadcasting arithmetic kernels
 * (ref/elemwise.c) beyond float32/int32/int64 Add..Pow (test_elemwise.c):
 * small and unsigned integer types (wraparound), float64 and float16,
 * Mod in both modes and every sign combination, BitShift, PRelu, Pow over
 * mixed types, and the variadic Min/Max/Sum/Mean with broadcasting, all
 * against values worked out by hand. */
#include <math.h>
#include <stdint.h>

#include "test_elemwise_harness.h"

static const kiln_dtype F32 = KILN_DTYPE_FLOAT32;

static void test_small_int_arithmetic(void **state)
{
    (void)state;
    const kiln_dtype U8 = KILN_DTYPE_UINT8, I8 = KILN_DTYPE_INT8, U16 = KILN_DTYPE_UINT16;
    uint8_t yu[3];
    ew_in u[2] = {{U8, ks(1, 3), (const uint8_t[]){250, 3, 10}},
                  {U8, ks(1, 3), (const uint8_t[]){10, 5, 3}}};
    EW_OK(KILN_OP_ADD, 2, u, 0, NULL, U8, yu, 3);
    assert_memory_equal(yu, ((const uint8_t[]){4, 8, 13}), 3); /* 260 wraps to 4 */
    EW_OK(KILN_OP_SUB, 2, u, 0, NULL, U8, yu, 3);
    assert_memory_equal(yu, ((const uint8_t[]){240, 254, 7}), 3); /* 3 - 5 wraps */
    EW_OK(KILN_OP_MUL, 2, u, 0, NULL, U8, yu, 3);
    assert_memory_equal(yu, ((const uint8_t[]){196, 15, 30}), 3); /* 2500 mod 256 = 196 */
    EW_OK(KILN_OP_DIV, 2, u, 0, NULL, U8, yu, 3);
    assert_memory_equal(yu, ((const uint8_t[]){25, 0, 3}), 3);

    /* uint16 * uint16 past INT_MAX must not overflow (it wraps mod 2^16) */
    uint16_t y16[1];
    ew_in m16[2] = {{U16, ks(1, 1), (const uint16_t[]){65535}},
                    {U16, ks(1, 1), (const uint16_t[]){65535}}};
    EW_OK(KILN_OP_MUL, 2, m16, 0, NULL, U16, y16, 2);
    assert_int_equal(y16[0], 1);

    int8_t y8[4];
    ew_in s[2] = {{I8, ks(1, 4), (const int8_t[]){-128, 7, -7, 100}},
                  {I8, ks(1, 4), (const int8_t[]){-1, 2, 2, 100}}};
    EW_OK(KILN_OP_DIV, 2, s, 0, NULL, I8, y8, 4);
    assert_memory_equal(y8, ((const int8_t[]){-128, 3, -3, 1}), 4);
    EW_OK(KILN_OP_ADD, 2, s, 0, NULL, I8, y8, 4);
    assert_memory_equal(y8, ((const int8_t[]){127, 9, -5, -56}), 4); /* 200 wraps to -56 */

    kiln_error err = {0};
    ew_in z[2] = {{U8, ks(1, 2), (const uint8_t[]){1, 2}}, {U8, ks(1, 2), (const uint8_t[]){1, 0}}};
    assert_int_equal(ew_run(KILN_OP_DIV, 2, z, 0, NULL, U8, yu, 2, &err),
                     KILN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "division by zero"));
}

static void test_float64_float16_arithmetic(void **state)
{
    (void)state;
    const kiln_dtype F64 = KILN_DTYPE_FLOAT64, F16 = KILN_DTYPE_FLOAT16;
    double yd[4];
    ew_in d[2] = {{F64, ks(2, 2, 2), (const double[]){1, 2, 3, 4}},
                  {F64, ks(1, 2), (const double[]){0.1, 1e-17}}};
    EW_OK(KILN_OP_ADD, 2, d, 0, NULL, F64, yd, sizeof yd);
    assert_true(yd[0] == 1.1 && yd[1] == 2.0 + 1e-17 && yd[2] == 3.1 && yd[3] == 4.0);
    EW_OK(KILN_OP_DIV, 2, d, 0, NULL, F64, yd, sizeof yd);
    assert_true(yd[0] == 1.0 / 0.1 && yd[1] == 2.0 / 1e-17 && yd[2] == 3.0 / 0.1);

    /* float16: 1.0 + 2.0 = 3.0 (0x4200); 0.5 * 0.5 = 0.25 (0x3400);
     * 2048 + 1 = 2049 rounds to even 2048 (0x6800) */
    uint16_t yh[3];
    ew_in h[2] = {{F16, ks(1, 3), (const uint16_t[]){0x3c00, 0x3800, 0x6800}},
                  {F16, ks(1, 3), (const uint16_t[]){0x4000, 0x3800, 0x3c00}}};
    EW_OK(KILN_OP_ADD, 2, h, 0, NULL, F16, yh, sizeof yh);
    assert_int_equal(yh[0], 0x4200);
    assert_int_equal(yh[2], 0x6800);
    EW_OK(KILN_OP_MUL, 2, h, 0, NULL, F16, yh, sizeof yh);
    assert_int_equal(yh[1], 0x3400);
}

static void test_mod(void **state)
{
    (void)state;
    const kiln_dtype I32 = KILN_DTYPE_INT32, U8 = KILN_DTYPE_UINT8, I64 = KILN_DTYPE_INT64;
    /* every sign combination of 7 and 3 */
    ew_in in[2] = {{I32, ks(1, 5), (const int32_t[]){7, -7, 7, -7, INT32_MIN}},
                   {I32, ks(1, 5), (const int32_t[]){3, 3, -3, -3, -1}}};
    int32_t y[5];
    EW_OK(KILN_OP_MOD, 2, in, 0, NULL, I32, y, sizeof y); /* Python: divisor's sign */
    assert_memory_equal(y, ((const int32_t[]){1, 2, -2, -1, 0}), sizeof y);
    ew_attr fmod1 = EW_I("fmod", 1);
    EW_OK(KILN_OP_MOD, 2, in, 1, &fmod1, I32, y, sizeof y); /* C: dividend's sign */
    assert_memory_equal(y, ((const int32_t[]){1, -1, 1, -1, 0}), sizeof y);

    uint8_t yu[2];
    ew_in u[2] = {{U8, ks(1, 2), (const uint8_t[]){200, 5}}, {U8, ks(0), (const uint8_t[]){7}}};
    u[1].sh = ew_scalar();
    EW_OK(KILN_OP_MOD, 2, u, 0, NULL, U8, yu, 2);
    assert_memory_equal(yu, ((const uint8_t[]){4, 5}), 2);

    float yf[4];
    ew_in f[2] = {{F32, ks(1, 4), (const float[]){5.5f, -5.5f, 5.5f, -5.5f}},
                  {F32, ks(1, 4), (const float[]){2, 2, -2, -2}}};
    EW_OK(KILN_OP_MOD, 2, f, 1, &fmod1, F32, yf, sizeof yf);
    assert_allclose(yf, ((const float[]){1.5f, -1.5f, 1.5f, -1.5f}), 4, 0, 0);
    EW_OK(KILN_OP_MOD, 2, f, 0, NULL, F32, yf, sizeof yf);
    assert_allclose(yf, ((const float[]){1.5f, 0.5f, -0.5f, -1.5f}), 4, 0, 0);

    /* float16 through float32: fmod(-4.0, 3.0) = -1.0 (0xbc00) */
    uint16_t yh[1];
    ew_in h[2] = {{KILN_DTYPE_FLOAT16, ks(1, 1), (const uint16_t[]){0xc400}},
                  {KILN_DTYPE_FLOAT16, ks(1, 1), (const uint16_t[]){0x4200}}};
    EW_OK(KILN_OP_MOD, 2, h, 1, &fmod1, KILN_DTYPE_FLOAT16, yh, 2);
    assert_int_equal(yh[0], 0xbc00);

    kiln_error err = {0};
    int64_t y64[2];
    ew_in z[2] = {{I64, ks(1, 2), (const int64_t[]){1, 2}}, {I64, ks(1, 2), (const int64_t[]){3, 0}}};
    assert_int_equal(ew_run(KILN_OP_MOD, 2, z, 0, NULL, I64, y64, sizeof y64, &err),
                     KILN_ERR_INVALID_ARGUMENT);
    ew_attr bad = EW_I("fmod", 2);
    assert_int_equal(ew_run(KILN_OP_MOD, 2, z, 1, &bad, I64, y64, sizeof y64, &err),
                     KILN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "fmod"));
}

static void test_bitshift(void **state)
{
    (void)state;
    const kiln_dtype U8 = KILN_DTYPE_UINT8, U64 = KILN_DTYPE_UINT64;
    uint8_t y[4];
    ew_in in[2] = {{U8, ks(1, 4), (const uint8_t[]){16, 4, 1, 255}},
                   {U8, ks(1, 4), (const uint8_t[]){1, 2, 8, 4}}};
    ew_attr left = EW_S("direction", "LEFT"), right = EW_S("direction", "RIGHT");
    EW_OK(KILN_OP_BITSHIFT, 2, in, 1, &left, U8, y, 4);
    assert_memory_equal(y, ((const uint8_t[]){32, 16, 0, 240}), 4); /* bits shifted out */
    EW_OK(KILN_OP_BITSHIFT, 2, in, 1, &right, U8, y, 4);
    assert_memory_equal(y, ((const uint8_t[]){8, 1, 0, 15}), 4);
    uint64_t y64[2];
    ew_in w[2] = {{U64, ks(1, 2), (const uint64_t[]){1, UINT64_MAX}},
                  {U64, ks(1, 2), (const uint64_t[]){63, 64}}};
    EW_OK(KILN_OP_BITSHIFT, 2, w, 1, &left, U64, y64, sizeof y64);
    assert_true(y64[0] == (1ULL << 63) && y64[1] == 0);

    kiln_error err = {0};
    assert_int_equal(ew_run(KILN_OP_BITSHIFT, 2, in, 0, NULL, U8, y, 4, &err),
                     KILN_ERR_INVALID_ARGUMENT); /* direction missing */
    ew_attr up = EW_S("direction", "UP");
    assert_int_equal(ew_run(KILN_OP_BITSHIFT, 2, in, 1, &up, U8, y, 4, &err),
                     KILN_ERR_INVALID_ARGUMENT);
    ew_in s[2] = {{KILN_DTYPE_INT8, ks(1, 1), (const int8_t[]){1}},
                  {KILN_DTYPE_INT8, ks(1, 1), (const int8_t[]){1}}};
    assert_int_equal(ew_run(KILN_OP_BITSHIFT, 2, s, 1, &left, KILN_DTYPE_INT8, y, 1, &err),
                     KILN_ERR_TYPE_MISMATCH);
}

static void test_prelu(void **state)
{
    (void)state;
    /* X [2, 3] with a per-column slope [3] */
    float y[6];
    ew_in in[2] = {{F32, ks(2, 2, 3), (const float[]){-1, -2, 3, 4, -5, -6}},
                   {F32, ks(1, 3), (const float[]){0.1f, 0.2f, 0.3f}}};
    EW_OK(KILN_OP_PRELU, 2, in, 0, NULL, F32, y, sizeof y);
    assert_allclose(y, ((const float[]){-0.1f, -0.4f, 3, 4, -1.0f, -1.8f}), 6, 1e-6, 0);
    int32_t yi[3];
    ew_in ii[2] = {{KILN_DTYPE_INT32, ks(1, 3), (const int32_t[]){-3, 0, 5}},
                   {KILN_DTYPE_INT32, ew_scalar(), (const int32_t[]){2}}};
    EW_OK(KILN_OP_PRELU, 2, ii, 0, NULL, KILN_DTYPE_INT32, yi, sizeof yi);
    assert_memory_equal(yi, ((const int32_t[]){-6, 0, 5}), sizeof yi);
    /* the slope must broadcast to X, not the other way round */
    kiln_error err = {0};
    ew_in bad[2] = {{F32, ks(1, 3), (const float[]){1, 2, 3}},
                    {F32, ks(2, 2, 3), (const float[]){1, 2, 3, 4, 5, 6}}};
    assert_int_equal(ew_run(KILN_OP_PRELU, 2, bad, 0, NULL, F32, y, sizeof y, &err),
                     KILN_ERR_SHAPE_MISMATCH);
    assert_non_null(strstr(err.msg, "slope"));
}

static void test_pow_types(void **state)
{
    (void)state;
    const kiln_dtype I32 = KILN_DTYPE_INT32, I64 = KILN_DTYPE_INT64;
    int64_t y64[3];
    ew_in ii[2] = {{I64, ks(1, 3), (const int64_t[]){2, -3, 10}},
                   {I64, ks(1, 3), (const int64_t[]){10, 3, 18}}};
    EW_OK(KILN_OP_POW, 2, ii, 0, NULL, I64, y64, sizeof y64);
    assert_true(y64[0] == 1024 && y64[1] == -27 && y64[2] == 1000000000000000000LL);
    /* int base, float exponent: truncated into the base's type */
    int32_t y32[3];
    ew_in if_[2] = {{I32, ks(1, 3), (const int32_t[]){1, 2, 3}},
                    {F32, ks(1, 3), (const float[]){4, 5, 0.5f}}};
    EW_OK(KILN_OP_POW, 2, if_, 0, NULL, I32, y32, sizeof y32);
    assert_memory_equal(y32, ((const int32_t[]){1, 32, 1}), sizeof y32); /* sqrt(3) -> 1 */
    /* float base, unsigned exponent */
    float yf[3];
    ew_in fu[2] = {{F32, ks(1, 3), (const float[]){1.5f, -2, 3}},
                   {KILN_DTYPE_UINT64, ks(1, 3), (const uint64_t[]){2, 3, 0}}};
    EW_OK(KILN_OP_POW, 2, fu, 0, NULL, F32, yf, sizeof yf);
    assert_allclose(yf, ((const float[]){2.25f, -8, 1}), 3, 0, 0);
    /* float16 base: 3^2 = 9 (0x4880) */
    uint16_t yh[1];
    ew_in h[2] = {{KILN_DTYPE_FLOAT16, ks(1, 1), (const uint16_t[]){0x4200}},
                  {I32, ks(1, 1), (const int32_t[]){2}}};
    EW_OK(KILN_OP_POW, 2, h, 0, NULL, KILN_DTYPE_FLOAT16, yh, 2);
    assert_int_equal(yh[0], 0x4880);
}

static void test_variadic(void **state)
{
    (void)state;
    /* three inputs [2, 1], [3], [] broadcast to [2, 3] */
    const float a[2] = {1, 10}, b[3] = {5, 0, 20}, c[1] = {2};
    ew_in in[3] = {{F32, ks(2, 2, 1), a}, {F32, ks(1, 3), b}, {F32, ew_scalar(), c}};
    float y[6];
    EW_OK(KILN_OP_MAX, 3, in, 0, NULL, F32, y, sizeof y);
    assert_allclose(y, ((const float[]){5, 2, 20, 10, 10, 20}), 6, 0, 0);
    EW_OK(KILN_OP_MIN, 3, in, 0, NULL, F32, y, sizeof y);
    assert_allclose(y, ((const float[]){1, 0, 1, 2, 0, 2}), 6, 0, 0);
    EW_OK(KILN_OP_SUM, 3, in, 0, NULL, F32, y, sizeof y);
    assert_allclose(y, ((const float[]){8, 3, 23, 17, 12, 32}), 6, 0, 0);
    EW_OK(KILN_OP_MEAN, 3, in, 0, NULL, F32, y, sizeof y);
    assert_allclose(y, ((const float[]){8 / 3.0f, 1, 23 / 3.0f, 17 / 3.0f, 4, 32 / 3.0f}), 6,
                    1e-6, 0);
    /* one input: a copy */
    EW_OK(KILN_OP_MAX, 1, &in[1], 0, NULL, F32, y, 3 * sizeof(float));
    assert_allclose(y, b, 3, 0, 0);
    /* NaN wins from either side */
    ew_in nan[2] = {{F32, ks(1, 2), (const float[]){NAN, 1}}, {F32, ks(1, 2), (const float[]){1, NAN}}};
    EW_OK(KILN_OP_MIN, 2, nan, 0, NULL, F32, y, 2 * sizeof(float));
    assert_true(isnan(y[0]) && isnan(y[1]));
    EW_OK(KILN_OP_MAX, 2, nan, 0, NULL, F32, y, 2 * sizeof(float));
    assert_true(isnan(y[0]) && isnan(y[1]));

    /* unsigned 64-bit values above INT64_MAX compare as unsigned */
    uint64_t yu[2];
    ew_in u[2] = {{KILN_DTYPE_UINT64, ks(1, 2), (const uint64_t[]){UINT64_MAX, 1}},
                  {KILN_DTYPE_UINT64, ks(1, 2), (const uint64_t[]){2, 3}}};
    EW_OK(KILN_OP_MAX, 2, u, 0, NULL, KILN_DTYPE_UINT64, yu, sizeof yu);
    assert_true(yu[0] == UINT64_MAX && yu[1] == 3);
    int8_t y8[2];
    ew_in s8[2] = {{KILN_DTYPE_INT8, ks(1, 2), (const int8_t[]){-128, 5}},
                   {KILN_DTYPE_INT8, ks(1, 2), (const int8_t[]){127, -5}}};
    EW_OK(KILN_OP_MIN, 2, s8, 0, NULL, KILN_DTYPE_INT8, y8, 2);
    assert_memory_equal(y8, ((const int8_t[]){-128, -5}), 2);
    /* float16 Max: max(1.0, 2.0) = 2.0 */
    uint16_t yh[1];
    ew_in h[2] = {{KILN_DTYPE_FLOAT16, ks(1, 1), (const uint16_t[]){0x3c00}},
                  {KILN_DTYPE_FLOAT16, ks(1, 1), (const uint16_t[]){0x4000}}};
    EW_OK(KILN_OP_MAX, 2, h, 0, NULL, KILN_DTYPE_FLOAT16, yh, 2);
    assert_int_equal(yh[0], 0x4000);

    /* type and shape errors */
    kiln_error err = {0};
    ew_in mixed[2] = {{F32, ks(1, 2), (const float[]){1, 2}},
                      {KILN_DTYPE_FLOAT64, ks(1, 2), (const double[]){1, 2}}};
    assert_int_equal(ew_run(KILN_OP_SUM, 2, mixed, 0, NULL, F32, y, 8, &err),
                     KILN_ERR_TYPE_MISMATCH);
    ew_in shapes[2] = {{F32, ks(1, 2), (const float[]){1, 2}},
                       {F32, ks(1, 3), (const float[]){1, 2, 3}}};
    assert_int_equal(ew_run(KILN_OP_MIN, 2, shapes, 0, NULL, F32, y, 8, &err),
                     KILN_ERR_SHAPE_MISMATCH);
    ew_in ints[1] = {{KILN_DTYPE_INT32, ks(1, 2), (const int32_t[]){1, 2}}};
    assert_int_equal(ew_run(KILN_OP_MEAN, 1, ints, 0, NULL, KILN_DTYPE_INT32, y, 8, &err),
                     KILN_ERR_TYPE_MISMATCH);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_int_arithmetic), cmocka_unit_test(test_float64_float16_arithmetic),
        cmocka_unit_test(test_mod),                  cmocka_unit_test(test_bitshift),
        cmocka_unit_test(test_prelu),                cmocka_unit_test(test_pow_types),
        cmocka_unit_test(test_variadic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
