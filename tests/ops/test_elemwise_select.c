/* tests/ops/test_elemwise_select.c: comparisons, logic, Where and Cast
 * (ref/compare.c) against hand-computed values: broadcasting, every compared
 * dtype class (signed, unsigned beyond INT64_MAX, float with NaN, float16,
 * bool), And/Or/Xor truth tables, Where with three-way broadcasting over
 * 1/2/4/8-byte elements, and Cast between float, integer and bool types
 * (truncation toward zero, saturation, modular narrowing, float16 rounding). */
#include <math.h>
#include <stdint.h>

#include "test_elemwise_harness.h"

static const kiln_dtype F32 = KILN_DTYPE_FLOAT32, B = KILN_DTYPE_BOOL;

static void test_compare(void **state)
{
    (void)state;
    /* [2, 1] against [3] -> [2, 3] */
    ew_in in[2] = {{F32, ks(2, 2, 1), (const float[]){1, 5}},
                   {F32, ks(1, 3), (const float[]){0, 1, 5}}};
    uint8_t y[6];
    EW_OK(KILN_OP_EQUAL, 2, in, 0, NULL, B, y, 6);
    assert_memory_equal(y, ((const uint8_t[]){0, 1, 0, 0, 0, 1}), 6);
    EW_OK(KILN_OP_GREATER, 2, in, 0, NULL, B, y, 6);
    assert_memory_equal(y, ((const uint8_t[]){1, 0, 0, 1, 1, 0}), 6);
    EW_OK(KILN_OP_LESS, 2, in, 0, NULL, B, y, 6);
    assert_memory_equal(y, ((const uint8_t[]){0, 0, 1, 0, 0, 0}), 6);
    EW_OK(KILN_OP_GREATEROREQUAL, 2, in, 0, NULL, B, y, 6);
    assert_memory_equal(y, ((const uint8_t[]){1, 1, 0, 1, 1, 1}), 6);
    EW_OK(KILN_OP_LESSOREQUAL, 2, in, 0, NULL, B, y, 6);
    assert_memory_equal(y, ((const uint8_t[]){0, 1, 1, 0, 0, 1}), 6);

    /* NaN compares false, even with itself */
    ew_in nan[2] = {{F32, ks(1, 2), (const float[]){NAN, NAN}},
                    {F32, ks(1, 2), (const float[]){NAN, 1}}};
    EW_OK(KILN_OP_EQUAL, 2, nan, 0, NULL, B, y, 2);
    assert_memory_equal(y, ((const uint8_t[]){0, 0}), 2);
    EW_OK(KILN_OP_GREATEROREQUAL, 2, nan, 0, NULL, B, y, 2);
    assert_memory_equal(y, ((const uint8_t[]){0, 0}), 2);

    /* unsigned above INT64_MAX, negative signed, float16 */
    ew_in u[2] = {{KILN_DTYPE_UINT64, ks(1, 2), (const uint64_t[]){UINT64_MAX, 0}},
                  {KILN_DTYPE_UINT64, ew_scalar(), (const uint64_t[]){1}}};
    EW_OK(KILN_OP_GREATER, 2, u, 0, NULL, B, y, 2);
    assert_memory_equal(y, ((const uint8_t[]){1, 0}), 2);
    ew_in s[2] = {{KILN_DTYPE_INT16, ks(1, 2), (const int16_t[]){-300, 300}},
                  {KILN_DTYPE_INT16, ks(1, 2), (const int16_t[]){-299, 300}}};
    EW_OK(KILN_OP_LESS, 2, s, 0, NULL, B, y, 2);
    assert_memory_equal(y, ((const uint8_t[]){1, 0}), 2);
    EW_OK(KILN_OP_EQUAL, 2, s, 0, NULL, B, y, 2);
    assert_memory_equal(y, ((const uint8_t[]){0, 1}), 2);
    ew_in h[2] = {{KILN_DTYPE_FLOAT16, ks(1, 2), (const uint16_t[]){0x3c00, 0xc000}},  /* 1, -2 */
                  {KILN_DTYPE_FLOAT16, ks(1, 2), (const uint16_t[]){0x3c01, 0xc000}}}; /* 1+, -2 */
    EW_OK(KILN_OP_LESS, 2, h, 0, NULL, B, y, 2);
    assert_memory_equal(y, ((const uint8_t[]){1, 0}), 2);
    ew_in bb[2] = {{B, ks(1, 2), (const uint8_t[]){1, 0}}, {B, ks(1, 2), (const uint8_t[]){1, 1}}};
    EW_OK(KILN_OP_EQUAL, 2, bb, 0, NULL, B, y, 2);
    assert_memory_equal(y, ((const uint8_t[]){1, 0}), 2);

    kiln_error err = {0};
    ew_in mixed[2] = {{F32, ks(1, 2), (const float[]){1, 2}},
                      {KILN_DTYPE_INT32, ks(1, 2), (const int32_t[]){1, 2}}};
    assert_int_equal(ew_run(KILN_OP_EQUAL, 2, mixed, 0, NULL, B, y, 2, &err),
                     KILN_ERR_TYPE_MISMATCH);
}

static void test_logic(void **state)
{
    (void)state;
    /* the truth table as [4] x [4], and broadcast against a scalar */
    ew_in in[2] = {{B, ks(1, 4), (const uint8_t[]){0, 0, 1, 1}},
                   {B, ks(1, 4), (const uint8_t[]){0, 1, 0, 1}}};
    uint8_t y[4];
    EW_OK(KILN_OP_AND, 2, in, 0, NULL, B, y, 4);
    assert_memory_equal(y, ((const uint8_t[]){0, 0, 0, 1}), 4);
    EW_OK(KILN_OP_OR, 2, in, 0, NULL, B, y, 4);
    assert_memory_equal(y, ((const uint8_t[]){0, 1, 1, 1}), 4);
    EW_OK(KILN_OP_XOR, 2, in, 0, NULL, B, y, 4);
    assert_memory_equal(y, ((const uint8_t[]){0, 1, 1, 0}), 4);
    ew_in sc[2] = {{B, ks(1, 4), (const uint8_t[]){0, 1, 0, 1}}, {B, ew_scalar(), (const uint8_t[]){1}}};
    EW_OK(KILN_OP_XOR, 2, sc, 0, NULL, B, y, 4);
    assert_memory_equal(y, ((const uint8_t[]){1, 0, 1, 0}), 4);

    kiln_error err = {0};
    ew_in f[2] = {{F32, ks(1, 1), (const float[]){1}}, {F32, ks(1, 1), (const float[]){1}}};
    assert_int_equal(ew_run(KILN_OP_AND, 2, f, 0, NULL, B, y, 1, &err), KILN_ERR_TYPE_MISMATCH);
    assert_non_null(strstr(err.msg, "bool"));
}

static void test_where(void **state)
{
    (void)state;
    /* cond [2, 1], X [3], Y [] -> [2, 3] */
    const uint8_t c[2] = {1, 0};
    float y[6];
    ew_in in[3] = {{B, ks(2, 2, 1), c},
                   {F32, ks(1, 3), (const float[]){1, 2, 3}},
                   {F32, ew_scalar(), (const float[]){-1}}};
    EW_OK(KILN_OP_WHERE, 3, in, 0, NULL, F32, y, sizeof y);
    assert_allclose(y, ((const float[]){1, 2, 3, -1, -1, -1}), 6, 0, 0);
    /* cond [3] with X [2, 1], Y [2, 3] */
    ew_in in2[3] = {{B, ks(1, 3), (const uint8_t[]){1, 0, 1}},
                    {F32, ks(2, 2, 1), (const float[]){10, 20}},
                    {F32, ks(2, 2, 3), (const float[]){1, 2, 3, 4, 5, 6}}};
    EW_OK(KILN_OP_WHERE, 3, in2, 0, NULL, F32, y, sizeof y);
    assert_allclose(y, ((const float[]){10, 2, 10, 20, 5, 20}), 6, 0, 0);
    /* other element sizes */
    int64_t y64[2];
    ew_in i64[3] = {{B, ks(1, 2), (const uint8_t[]){0, 1}},
                    {KILN_DTYPE_INT64, ks(1, 2), (const int64_t[]){INT64_MAX, 7}},
                    {KILN_DTYPE_INT64, ks(1, 2), (const int64_t[]){INT64_MIN, 8}}};
    EW_OK(KILN_OP_WHERE, 3, i64, 0, NULL, KILN_DTYPE_INT64, y64, sizeof y64);
    assert_true(y64[0] == INT64_MIN && y64[1] == 7);
    uint16_t yh[2];
    ew_in h[3] = {{B, ks(1, 2), (const uint8_t[]){0, 1}},
                  {KILN_DTYPE_FLOAT16, ks(1, 2), (const uint16_t[]){0x3c00, 0x4000}},
                  {KILN_DTYPE_FLOAT16, ks(1, 2), (const uint16_t[]){0x4200, 0x4400}}};
    EW_OK(KILN_OP_WHERE, 3, h, 0, NULL, KILN_DTYPE_FLOAT16, yh, sizeof yh);
    assert_true(yh[0] == 0x4200 && yh[1] == 0x4000);
    uint8_t yb[2];
    ew_in bb[3] = {{B, ks(1, 2), (const uint8_t[]){0, 1}},
                   {B, ks(1, 2), (const uint8_t[]){1, 1}},
                   {B, ks(1, 2), (const uint8_t[]){0, 0}}};
    EW_OK(KILN_OP_WHERE, 3, bb, 0, NULL, B, yb, 2);
    assert_memory_equal(yb, ((const uint8_t[]){0, 1}), 2);

    kiln_error err = {0};
    ew_in notbool[3] = {{F32, ks(1, 1), (const float[]){1}},
                        {F32, ks(1, 1), (const float[]){1}},
                        {F32, ks(1, 1), (const float[]){1}}};
    assert_int_equal(ew_run(KILN_OP_WHERE, 3, notbool, 0, NULL, F32, y, 4, &err),
                     KILN_ERR_TYPE_MISMATCH);
    assert_non_null(strstr(err.msg, "condition"));
    ew_in xy[3] = {{B, ks(1, 1), (const uint8_t[]){1}},
                   {F32, ks(1, 1), (const float[]){1}},
                   {KILN_DTYPE_INT32, ks(1, 1), (const int32_t[]){1}}};
    assert_int_equal(ew_run(KILN_OP_WHERE, 3, xy, 0, NULL, F32, y, 4, &err),
                     KILN_ERR_TYPE_MISMATCH);
    ew_in shp[3] = {{B, ks(1, 2), (const uint8_t[]){1, 1}},
                    {F32, ks(1, 3), (const float[]){1, 2, 3}},
                    {F32, ks(1, 1), (const float[]){1}}};
    assert_int_equal(ew_run(KILN_OP_WHERE, 3, shp, 0, NULL, F32, y, 12, &err),
                     KILN_ERR_SHAPE_MISMATCH);
}

#define CAST_TO(to) ((ew_attr){"to", 'i', 0, (int64_t)(to), NULL})

static void test_cast(void **state)
{
    (void)state;
    /* float -> int32: truncation toward zero, saturation, NaN -> 0 */
    ew_in f = {F32, ks(1, 6), (const float[]){2.9f, -2.9f, 0.5f, 1e20f, -1e20f, NAN}};
    int32_t y32[6];
    ew_attr to_i32 = CAST_TO(KILN_DTYPE_INT32);
    EW_OK(KILN_OP_CAST, 1, &f, 1, &to_i32, KILN_DTYPE_INT32, y32, sizeof y32);
    assert_memory_equal(y32, ((const int32_t[]){2, -2, 0, INT32_MAX, INT32_MIN, 0}), sizeof y32);
    /* float -> bool: x != 0 (NaN is nonzero) */
    uint8_t yb[6];
    ew_attr to_b = CAST_TO(B);
    ew_in fb = {F32, ks(1, 4), (const float[]){0, -0.0f, 0.1f, NAN}};
    EW_OK(KILN_OP_CAST, 1, &fb, 1, &to_b, B, yb, 4);
    assert_memory_equal(yb, ((const uint8_t[]){0, 0, 1, 1}), 4);
    /* int64 -> int8: the low bits; -> uint8 likewise */
    ew_in i = {KILN_DTYPE_INT64, ks(1, 3), (const int64_t[]){300, -1, -129}};
    int8_t y8[3];
    ew_attr to_i8 = CAST_TO(KILN_DTYPE_INT8);
    EW_OK(KILN_OP_CAST, 1, &i, 1, &to_i8, KILN_DTYPE_INT8, y8, 3);
    assert_memory_equal(y8, ((const int8_t[]){44, -1, 127}), 3);
    uint8_t yu[3];
    ew_attr to_u8 = CAST_TO(KILN_DTYPE_UINT8);
    EW_OK(KILN_OP_CAST, 1, &i, 1, &to_u8, KILN_DTYPE_UINT8, yu, 3);
    assert_memory_equal(yu, ((const uint8_t[]){44, 255, 127}), 3);
    /* uint64 above INT64_MAX -> float keeps its magnitude */
    ew_in u = {KILN_DTYPE_UINT64, ks(1, 1), (const uint64_t[]){1ULL << 63}};
    float yf[4];
    ew_attr to_f = CAST_TO(F32);
    EW_OK(KILN_OP_CAST, 1, &u, 1, &to_f, F32, yf, 4);
    assert_true(yf[0] == 9223372036854775808.0f);
    /* int64 / uint64 beyond 2^53 -> float32 round once (through double,
     * 2^60 + 2^36 + 1 would round to 2^60) */
    ew_in big = {KILN_DTYPE_INT64, ks(1, 2),
                 (const int64_t[]){(1LL << 60) + (1LL << 36) + 1, -((1LL << 60) + (1LL << 36) + 1)}};
    EW_OK(KILN_OP_CAST, 1, &big, 1, &to_f, F32, yf, 8);
    assert_true(yf[0] == 0x1.000002p60f && yf[1] == -0x1.000002p60f);
    ew_in ubig = {KILN_DTYPE_UINT64, ks(1, 1), (const uint64_t[]){(1ULL << 60) + (1ULL << 36) + 1}};
    EW_OK(KILN_OP_CAST, 1, &ubig, 1, &to_f, F32, yf, 4);
    assert_true(yf[0] == 0x1.000002p60f);
    /* bool -> float, int -> float */
    ew_in b = {B, ks(1, 2), (const uint8_t[]){1, 0}};
    EW_OK(KILN_OP_CAST, 1, &b, 1, &to_f, F32, yf, 8);
    assert_allclose(yf, ((const float[]){1, 0}), 2, 0, 0);
    ew_in i32 = {KILN_DTYPE_INT32, ks(1, 2), (const int32_t[]){-7, 16777217}};
    EW_OK(KILN_OP_CAST, 1, &i32, 1, &to_f, F32, yf, 8);
    assert_true(yf[0] == -7.0f && yf[1] == 16777216.0f); /* 2^24 + 1 rounds to even */
    /* float32 -> float16 -> float64 */
    uint16_t yh[4];
    ew_attr to_h = CAST_TO(KILN_DTYPE_FLOAT16);
    ew_in fh = {F32, ks(1, 4), (const float[]){1.0f, 65520.0f, 0.1f, -2.0f}};
    EW_OK(KILN_OP_CAST, 1, &fh, 1, &to_h, KILN_DTYPE_FLOAT16, yh, sizeof yh);
    /* 0.1 -> 0x2e66 (0.0999755859375) */
    assert_true(yh[0] == 0x3c00 && yh[1] == 0x7c00 && yh[2] == 0x2e66 && yh[3] == 0xc000);
    double yd[4];
    ew_attr to_d = CAST_TO(KILN_DTYPE_FLOAT64);
    ew_in hd = {KILN_DTYPE_FLOAT16, ks(1, 4), yh};
    EW_OK(KILN_OP_CAST, 1, &hd, 1, &to_d, KILN_DTYPE_FLOAT64, yd, sizeof yd);
    assert_true(yd[0] == 1.0 && isinf(yd[1]) && yd[2] == 0.0999755859375 && yd[3] == -2.0);
    /* float64 -> float32 rounds */
    ew_in d = {KILN_DTYPE_FLOAT64, ks(1, 1), (const double[]){0.1}};
    EW_OK(KILN_OP_CAST, 1, &d, 1, &to_f, F32, yf, 4);
    assert_true(yf[0] == 0.1f);

    kiln_error err = {0};
    ew_attr bad = CAST_TO(99);
    assert_int_equal(ew_run(KILN_OP_CAST, 1, &d, 1, &bad, F32, yf, 4, &err),
                     KILN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "'to'"));
    assert_int_equal(ew_run(KILN_OP_CAST, 1, &d, 0, NULL, F32, yf, 4, &err),
                     KILN_ERR_INVALID_ARGUMENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compare),
        cmocka_unit_test(test_logic),
        cmocka_unit_test(test_where),
        cmocka_unit_test(test_cast),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
