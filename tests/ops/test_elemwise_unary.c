/* tests/ops/test_elemwise_unary.c: the unary elementwise kernels (ref/unary.c)
 * against hand-computed values: every float op on float32 (special points of
 * each function, attribute defaults and overrides), float64 and float16
 * variants (float16 bit patterns worked out by hand), integer Abs/Neg/Sign/
 * Relu/Clip incl. the most negative value, IsNaN/IsInf/Not; and the float16
 * conversions of util/half.h (exact values, rounding ties, overflow,
 * subnormals, double rounding). */
#include <math.h>
#include <stdint.h>

#include "test_elemwise_harness.h"
#include "util/half.h"

static const kiln_dtype F32 = KILN_DTYPE_FLOAT32;

/* Runs a float32 unary op on x[n] (shape [n]) with attributes. */
static void unary_f32(kiln_op op, const float *x, int n, float *y, int n_attrs,
                      const ew_attr *attrs)
{
    ew_in in = {F32, ks(1, n), x};
    EW_OK(op, 1, &in, n_attrs, attrs, F32, y, sizeof(float) * (size_t)n);
}

#define CHECK_F32(op, xs, want, tol)                                                              \
    do {                                                                                          \
        const float x_[] = xs;                                                                    \
        const float w_[] = want;                                                                  \
        enum { N_ = sizeof x_ / sizeof x_[0] };                                                   \
        float y_[N_];                                                                             \
        unary_f32((op), x_, N_, y_, 0, NULL);                                                     \
        assert_allclose(y_, w_, N_, (tol), 1e-7);                                                 \
    } while (0)

#define L(...) {__VA_ARGS__}

static void test_transcendental(void **state)
{
    (void)state;
    CHECK_F32(KILN_OP_EXP, L(0, 1, -1), L(1, 2.718281828f, 0.367879441f), 1e-6);
    CHECK_F32(KILN_OP_LOG, L(1, 2.718281828f, 0.5f), L(0, 1, -0.693147181f), 1e-6);
    CHECK_F32(KILN_OP_TANH, L(0, 1, -1), L(0, 0.761594156f, -0.761594156f), 1e-6);
    CHECK_F32(KILN_OP_SIN, L(0, 1.570796327f), L(0, 1), 1e-6);
    CHECK_F32(KILN_OP_COS, L(0, 3.141592654f), L(1, -1), 1e-6);
    CHECK_F32(KILN_OP_TAN, L(0.785398163f), L(1), 1e-6);
    CHECK_F32(KILN_OP_ASIN, L(1, 0), L(1.570796327f, 0), 1e-6);
    CHECK_F32(KILN_OP_ACOS, L(1, 0), L(0, 1.570796327f), 1e-6);
    CHECK_F32(KILN_OP_ATAN, L(1, -1), L(0.785398163f, -0.785398163f), 1e-6);
    CHECK_F32(KILN_OP_SINH, L(1, 0), L(1.175201194f, 0), 1e-6);
    CHECK_F32(KILN_OP_COSH, L(1, 0), L(1.543080635f, 1), 1e-6);
    CHECK_F32(KILN_OP_ASINH, L(1, 0), L(0.881373587f, 0), 1e-6);
    CHECK_F32(KILN_OP_ACOSH, L(2, 1), L(1.316957897f, 0), 1e-6);
    CHECK_F32(KILN_OP_ATANH, L(0.5f, 0), L(0.549306144f, 0), 1e-6);
    CHECK_F32(KILN_OP_RECIPROCAL, L(2, -4), L(0.5f, -0.25f), 0);

    /* outside the domain: -inf and NaN */
    float y[2];
    unary_f32(KILN_OP_LOG, (const float[]){0, -1}, 2, y, 0, NULL);
    assert_true(isinf(y[0]) && y[0] < 0);
    assert_true(isnan(y[1]));
    unary_f32(KILN_OP_ASIN, (const float[]){2, -2}, 2, y, 0, NULL);
    assert_true(isnan(y[0]) && isnan(y[1]));
}

static void test_activations(void **state)
{
    (void)state;
    /* log(1 + e^x): no overflow for large x, no loss for very negative x */
    CHECK_F32(KILN_OP_SOFTPLUS, L(0, 1, 100, -100), L(0.693147181f, 1.313261687f, 100, 0), 1e-6);
    CHECK_F32(KILN_OP_SOFTSIGN, L(1, -3, 0), L(0.5f, -0.75f, 0), 0);
    CHECK_F32(KILN_OP_MISH, L(1, -1, 0), L(0.865098388f, -0.303401461f, 0), 1e-6);
    CHECK_F32(KILN_OP_ELU, L(-1, 2, 0), L(-0.632120559f, 2, 0), 1e-6);
    CHECK_F32(KILN_OP_SELU, L(-1, 0, 2), L(-1.111330741f, 0, 2.101402044f), 1e-6);
    CHECK_F32(KILN_OP_CELU, L(-1, 3), L(-0.632120559f, 3), 1e-6);
    CHECK_F32(KILN_OP_LEAKYRELU, L(-2, 3), L(-0.02f, 3), 1e-6);
    CHECK_F32(KILN_OP_THRESHOLDEDRELU, L(0.5f, 1, 2), L(0, 0, 2), 0);
    CHECK_F32(KILN_OP_SHRINK, L(-1, -0.5f, 0, 0.25f, 1), L(-1, 0, 0, 0, 1), 0);
    CHECK_F32(KILN_OP_GELU, L(1, 0, -1), L(0.841344746f, 0, -0.158655254f), 1e-6);

    float y[5];
    ew_attr a2 = EW_F("alpha", 2.0);
    unary_f32(KILN_OP_ELU, (const float[]){-1, 2}, 2, y, 1, &a2);
    assert_allclose(y, ((const float[]){-1.264241118f, 2}), 2, 1e-6, 0);
    unary_f32(KILN_OP_CELU, (const float[]){-1, 3}, 2, y, 1, &a2);
    assert_allclose(y, ((const float[]){-0.786938681f, 3}), 2, 1e-6, 0);
    unary_f32(KILN_OP_THRESHOLDEDRELU, (const float[]){1.5f, 2.5f}, 2, y, 1, &a2);
    assert_allclose(y, ((const float[]){0, 2.5f}), 2, 0, 0);
    ew_attr a01 = EW_F("alpha", 0.1);
    unary_f32(KILN_OP_LEAKYRELU, (const float[]){-2, 3}, 2, y, 1, &a01);
    assert_allclose(y, ((const float[]){-0.2f, 3}), 2, 1e-6, 0);
    ew_attr selu[2] = {EW_F("alpha", 2.0), EW_F("gamma", 3.0)};
    unary_f32(KILN_OP_SELU, (const float[]){-1, 2}, 2, y, 2, selu);
    assert_allclose(y, ((const float[]){3 * 2 * (0.367879441f - 1), 6}), 2, 1e-6, 0);
    ew_attr shrink[2] = {EW_F("bias", 1.5), EW_F("lambd", 1.5)};
    unary_f32(KILN_OP_SHRINK, (const float[]){-2, -1, 0, 1, 2}, 5, y, 2, shrink);
    assert_allclose(y, ((const float[]){-0.5f, 0, 0, 0, 0.5f}), 5, 0, 0);
    ew_attr tanh_approx = EW_S("approximate", "tanh");
    unary_f32(KILN_OP_GELU, (const float[]){1}, 1, y, 1, &tanh_approx);
    assert_allclose(y, ((const float[]){0.841191991f}), 1, 1e-6, 0);
}

static void test_rounding_and_sign(void **state)
{
    (void)state;
    CHECK_F32(KILN_OP_CEIL, L(1.2f, -1.2f, 3, -0.5f), L(2, -1, 3, -0.0f), 0);
    CHECK_F32(KILN_OP_FLOOR, L(1.2f, -1.2f, 3, -0.5f), L(1, -2, 3, -1), 0);
    /* half to even */
    CHECK_F32(KILN_OP_ROUND, L(0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.4f, 2.6f, -2.6f),
              L(0, 2, 2, -0.0f, -2, 2, 3, -3), 0);
    CHECK_F32(KILN_OP_ABS, L(-2.5f, 0, 3), L(2.5f, 0, 3), 0);
    CHECK_F32(KILN_OP_NEG, L(-2.5f, 0, 3), L(2.5f, 0, -3), 0);
    CHECK_F32(KILN_OP_SIGN, L(-2.5f, 0, 3, -0.0f), L(-1, 0, 1, 0), 0);
}

static void test_float64_float16(void **state)
{
    (void)state;
    const kiln_dtype F64 = KILN_DTYPE_FLOAT64, F16 = KILN_DTYPE_FLOAT16;
    double yd[3];
    ew_in in = {F64, ks(1, 3), (const double[]){1, 0, -1}};
    EW_OK(KILN_OP_EXP, 1, &in, 0, NULL, F64, yd, sizeof yd);
    assert_true(fabs(yd[0] - 2.718281828459045) < 1e-15);
    assert_true(yd[1] == 1.0);
    assert_true(fabs(yd[2] - 0.36787944117144233) < 1e-15);
    EW_OK(KILN_OP_SIGMOID, 1, &in, 0, NULL, F64, yd, sizeof yd);
    assert_true(fabs(yd[0] - 0.7310585786300049) < 1e-15);
    assert_true(yd[1] == 0.5);

    /* float16: 1.0 = 0x3c00, -2.0 = 0xc000, 0.5 = 0x3800; e rounds to
     * 1.359375 * 2 = 0x4170; relu(-2) = +0 */
    uint16_t yh[3];
    ew_in h = {F16, ks(1, 3), (const uint16_t[]){0x3c00, 0xc000, 0x3800}};
    EW_OK(KILN_OP_EXP, 1, &h, 0, NULL, F16, yh, sizeof yh);
    assert_int_equal(yh[0], 0x4170);
    EW_OK(KILN_OP_RELU, 1, &h, 0, NULL, F16, yh, sizeof yh);
    assert_int_equal(yh[0], 0x3c00);
    assert_int_equal(yh[1], 0x0000);
    assert_int_equal(yh[2], 0x3800);
    EW_OK(KILN_OP_ABS, 1, &h, 0, NULL, F16, yh, sizeof yh);
    assert_int_equal(yh[1], 0x4000);
}

static void test_integer_unary(void **state)
{
    (void)state;
    const kiln_dtype I8 = KILN_DTYPE_INT8, U8 = KILN_DTYPE_UINT8, I64 = KILN_DTYPE_INT64;
    int8_t y8[5];
    ew_in s8 = {I8, ks(1, 5), (const int8_t[]){-128, -5, 0, 7, 127}};
    EW_OK(KILN_OP_ABS, 1, &s8, 0, NULL, I8, y8, sizeof y8);
    assert_memory_equal(y8, ((const int8_t[]){-128, 5, 0, 7, 127}), 5); /* -128 wraps */
    EW_OK(KILN_OP_NEG, 1, &s8, 0, NULL, I8, y8, sizeof y8);
    assert_memory_equal(y8, ((const int8_t[]){-128, 5, 0, -7, -127}), 5);
    EW_OK(KILN_OP_SIGN, 1, &s8, 0, NULL, I8, y8, sizeof y8);
    assert_memory_equal(y8, ((const int8_t[]){-1, -1, 0, 1, 1}), 5);
    EW_OK(KILN_OP_RELU, 1, &s8, 0, NULL, I8, y8, sizeof y8);
    assert_memory_equal(y8, ((const int8_t[]){0, 0, 0, 7, 127}), 5);
    ew_attr clip[2] = {EW_F("min", -2), EW_F("max", 3)};
    EW_OK(KILN_OP_CLIP, 1, &s8, 2, clip, I8, y8, sizeof y8);
    assert_memory_equal(y8, ((const int8_t[]){-2, -2, 0, 3, 3}), 5);
    /* bounds beyond the type's range do nothing */
    ew_attr wide[2] = {EW_F("min", -1000), EW_F("max", 1000)};
    EW_OK(KILN_OP_CLIP, 1, &s8, 2, wide, I8, y8, sizeof y8);
    assert_memory_equal(y8, ((const int8_t[]){-128, -5, 0, 7, 127}), 5);

    uint8_t yu[3];
    ew_in u8 = {U8, ks(1, 3), (const uint8_t[]){0, 5, 255}};
    EW_OK(KILN_OP_ABS, 1, &u8, 0, NULL, U8, yu, sizeof yu);
    assert_memory_equal(yu, ((const uint8_t[]){0, 5, 255}), 3);
    EW_OK(KILN_OP_NEG, 1, &u8, 0, NULL, U8, yu, sizeof yu);
    assert_memory_equal(yu, ((const uint8_t[]){0, 251, 1}), 3);
    EW_OK(KILN_OP_SIGN, 1, &u8, 0, NULL, U8, yu, sizeof yu);
    assert_memory_equal(yu, ((const uint8_t[]){0, 1, 1}), 3);
    ew_attr lo10 = EW_F("min", 10);
    EW_OK(KILN_OP_CLIP, 1, &u8, 1, &lo10, U8, yu, sizeof yu);
    assert_memory_equal(yu, ((const uint8_t[]){10, 10, 255}), 3);

    int64_t y64[3];
    ew_in s64 = {I64, ks(1, 3), (const int64_t[]){INT64_MIN, -3000000000LL, 4}};
    EW_OK(KILN_OP_ABS, 1, &s64, 0, NULL, I64, y64, sizeof y64);
    assert_true(y64[0] == INT64_MIN && y64[1] == 3000000000LL && y64[2] == 4);
    EW_OK(KILN_OP_CLIP, 1, &s64, 0, NULL, I64, y64, sizeof y64); /* no bounds */
    assert_true(y64[0] == INT64_MIN && y64[1] == -3000000000LL && y64[2] == 4);
}

static void test_to_bool(void **state)
{
    (void)state;
    const kiln_dtype B = KILN_DTYPE_BOOL;
    uint8_t y[4];
    ew_in x = {F32, ks(1, 4), (const float[]){INFINITY, -INFINITY, 1, NAN}};
    EW_OK(KILN_OP_ISNAN, 1, &x, 0, NULL, B, y, sizeof y);
    assert_memory_equal(y, ((const uint8_t[]){0, 0, 0, 1}), 4);
    EW_OK(KILN_OP_ISINF, 1, &x, 0, NULL, B, y, sizeof y);
    assert_memory_equal(y, ((const uint8_t[]){1, 1, 0, 0}), 4);
    ew_attr no_neg = EW_I("detect_negative", 0), no_pos = EW_I("detect_positive", 0);
    EW_OK(KILN_OP_ISINF, 1, &x, 1, &no_neg, B, y, sizeof y);
    assert_memory_equal(y, ((const uint8_t[]){1, 0, 0, 0}), 4);
    EW_OK(KILN_OP_ISINF, 1, &x, 1, &no_pos, B, y, sizeof y);
    assert_memory_equal(y, ((const uint8_t[]){0, 1, 0, 0}), 4);
    ew_in xd = {KILN_DTYPE_FLOAT64, ks(1, 2), (const double[]){NAN, 1e308 * 10}};
    EW_OK(KILN_OP_ISNAN, 1, &xd, 0, NULL, B, y, 2);
    assert_memory_equal(y, ((const uint8_t[]){1, 0}), 2);
    ew_in h = {KILN_DTYPE_FLOAT16, ks(1, 2), (const uint16_t[]){0x7c00, 0x7e00}}; /* inf, NaN */
    EW_OK(KILN_OP_ISINF, 1, &h, 0, NULL, B, y, 2);
    assert_memory_equal(y, ((const uint8_t[]){1, 0}), 2);

    ew_in b = {B, ks(1, 3), (const uint8_t[]){1, 0, 1}};
    EW_OK(KILN_OP_NOT, 1, &b, 0, NULL, B, y, 3);
    assert_memory_equal(y, ((const uint8_t[]){0, 1, 0}), 3);
}

static void test_type_errors(void **state)
{
    (void)state;
    kiln_error err = {0};
    uint8_t y[2];
    ew_in f = {F32, ks(1, 2), (const float[]){1, 2}};
    assert_int_equal(ew_run(KILN_OP_NOT, 1, &f, 0, NULL, KILN_DTYPE_BOOL, y, 2, &err),
                     KILN_ERR_TYPE_MISMATCH);
    assert_non_null(strstr(err.msg, "bool"));
    ew_in i = {KILN_DTYPE_INT32, ks(1, 2), (const int32_t[]){1, 2}};
    assert_int_equal(ew_run(KILN_OP_EXP, 1, &i, 0, NULL, KILN_DTYPE_INT32, y, 8, &err),
                     KILN_ERR_TYPE_MISMATCH);
    assert_int_equal(ew_run(KILN_OP_ISNAN, 1, &i, 0, NULL, KILN_DTYPE_BOOL, y, 2, &err),
                     KILN_ERR_TYPE_MISMATCH);
    ew_in b = {KILN_DTYPE_BOOL, ks(1, 2), (const uint8_t[]){1, 0}};
    assert_int_equal(ew_run(KILN_OP_ABS, 1, &b, 0, NULL, KILN_DTYPE_BOOL, y, 2, &err),
                     KILN_ERR_TYPE_MISMATCH);
    ew_attr bad = EW_S("approximate", "erf");
    assert_int_equal(ew_run(KILN_OP_GELU, 1, &f, 1, &bad, F32, y, 8, &err),
                     KILN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "approximate"));
}

static void test_half_conversions(void **state)
{
    (void)state;
    /* widening: exact */
    assert_true(kiln_f16_to_f32(0x3c00) == 1.0f);
    assert_true(kiln_f16_to_f32(0xc000) == -2.0f);
    assert_true(kiln_f16_to_f32(0x7bff) == 65504.0f);
    assert_true(kiln_f16_to_f32(0x0001) == ldexpf(1.0f, -24)); /* smallest subnormal */
    assert_true(kiln_f16_to_f32(0x03ff) == ldexpf(1023.0f, -24));
    assert_true(isinf(kiln_f16_to_f32(0xfc00)) && kiln_f16_to_f32(0xfc00) < 0);
    assert_true(isnan(kiln_f16_to_f32(0x7e00)));
    /* narrowing: exact values, ties to even, overflow, underflow */
    assert_int_equal(kiln_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(kiln_f32_to_f16(-0.0f), 0x8000);
    assert_int_equal(kiln_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(kiln_f32_to_f16(65519.0f), 0x7bff); /* below the midpoint to 2^16 */
    assert_int_equal(kiln_f32_to_f16(65520.0f), 0x7c00); /* the midpoint rounds to even: inf */
    assert_int_equal(kiln_f32_to_f16(2049.0f), 0x6800);  /* 2048 | 2050: tie to even 2048 */
    assert_int_equal(kiln_f32_to_f16(2051.0f), 0x6802);  /* 2050 | 2052: tie to even 2052 */
    assert_int_equal(kiln_f32_to_f16(ldexpf(1.0f, -24)), 0x0001);
    assert_int_equal(kiln_f32_to_f16(ldexpf(1.0f, -25)), 0x0000);   /* tie to even: 0 */
    assert_int_equal(kiln_f32_to_f16(ldexpf(1.5f, -25)), 0x0001);   /* above the tie */
    assert_int_equal(kiln_f32_to_f16(ldexpf(3.0f, -25)), 0x0002);   /* 1.5 ulp: tie to even 2 */
    assert_int_equal(kiln_f32_to_f16(ldexpf(1023.5f, -24)), 0x0400); /* up into the normals */
    assert_int_equal(kiln_f32_to_f16(1e-10f), 0x0000);
    assert_int_equal(kiln_f32_to_f16(INFINITY), 0x7c00);
    assert_true((kiln_f32_to_f16(NAN) & 0x7c00) == 0x7c00 && (kiln_f32_to_f16(NAN) & 0x3ff));
    /* double: 2049 + 2^-30 is just above the tie, so it rounds up to 2050;
     * narrowing through float first would land on the tie and go to 2048 */
    assert_int_equal(kiln_f64_to_f16(2049.0 + ldexp(1.0, -30)), 0x6801);
    assert_int_equal(kiln_f64_to_f16(2049.0), 0x6800);
    assert_int_equal(kiln_f64_to_f16(1e300), 0x7c00);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_transcendental),  cmocka_unit_test(test_activations),
        cmocka_unit_test(test_rounding_and_sign), cmocka_unit_test(test_float64_float16),
        cmocka_unit_test(test_integer_unary),   cmocka_unit_test(test_to_bool),
        cmocka_unit_test(test_type_errors),     cmocka_unit_test(test_half_conversions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
