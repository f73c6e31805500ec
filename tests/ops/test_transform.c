/* tests/ops/test_transform.c: the reference data-movement kernels (Flatten /
 * Reshape / Identity copy, Transpose, Concat, Split, Slice, Gather, Pad) on
 * one-node graphs run by the reference executor. Expected outputs are written
 * by hand or derived in the test with explicit index arithmetic (Transpose
 * per perm, Slice by loops over the known start/step, Gather per index);
 * several dtypes (float32, int64, uint8, int32, float16) since the kernels
 * move raw elements. Error cases: out-of-range Gather indices. */
#include "op_harness.h"

/* float32 outputs exactly: the kernels move raw elements */
static void assert_f32(const kiln_tensor *t, const float *want, int64_t n)
{
    assert_f32_rtol(t, want, n, 0);
}

/* ---- copies ---------------------------------------------------------------- */

static void test_copy_ops(void **state)
{
    (void)state;
    float x[24];
    for (int i = 0; i < 24; i++)
        x[i] = (float)i * 0.5f;
    harness h;
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(3, 2, 3, 4), x);
    h_node(&h, KILN_OP_RESHAPE);
    set_ints(&h, "shape", INTS(0, -1));
    h_run_ok(&h);
    assert_shape(&h_out(&h, 0)->shape, ks(2, 2, 12));
    assert_f32(h_out(&h, 0), x, 24);
    h_free(&h);

    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(3, 2, 3, 4), x);
    h_node(&h, KILN_OP_FLATTEN);
    set_int(&h, "axis", 2);
    h_run_ok(&h);
    assert_shape(&h_out(&h, 0)->shape, ks(2, 6, 4));
    assert_f32(h_out(&h, 0), x, 24);
    h_free(&h);

    const int64_t xi[3] = {-5, 1LL << 50, 7};
    h_init(&h);
    h_input(&h, KILN_DTYPE_INT64, ks(1, 3), xi);
    h_node(&h, KILN_OP_IDENTITY);
    h_run_ok(&h);
    assert_i64(h_out(&h, 0), xi, 3);
    h_free(&h);
}

/* ---- Transpose ------------------------------------------------------------- */

static void test_transpose(void **state)
{
    (void)state;
    /* x[i][j][k] = 100 i + 10 j + k, shape [2, 3, 4]; perm (2, 0, 1) gives
     * y[k][i][j] = x[i][j][k], shape [4, 2, 3] */
    int64_t x[24];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++)
                x[(i * 3 + j) * 4 + k] = 100 * i + 10 * j + k;
    harness h;
    h_init(&h);
    h_input(&h, KILN_DTYPE_INT64, ks(3, 2, 3, 4), x);
    h_node(&h, KILN_OP_TRANSPOSE);
    set_ints(&h, "perm", INTS(2, 0, 1));
    h_run_ok(&h);
    const kiln_tensor *y = h_out(&h, 0);
    assert_shape(&y->shape, ks(3, 4, 2, 3));
    const int64_t *yd = y->data;
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++)
                assert_true(yd[(k * 2 + i) * 3 + j] == 100 * i + 10 * j + k);
    h_free(&h);

    /* default perm on a 2-D uint8 matrix: the plain transpose */
    const uint8_t m[6] = {1, 2, 3, 4, 5, 6};
    h_init(&h);
    h_input(&h, KILN_DTYPE_UINT8, ks(2, 2, 3), m);
    h_node(&h, KILN_OP_TRANSPOSE);
    h_run_ok(&h);
    y = h_out(&h, 0);
    assert_shape(&y->shape, ks(2, 3, 2));
    assert_memory_equal(y->data, ((const uint8_t[]){1, 4, 2, 5, 3, 6}), 6);
    h_free(&h);

    /* NCHW -> NHWC on float32, checked by index arithmetic */
    float t[2 * 3 * 4 * 5];
    for (int i = 0; i < 120; i++)
        t[i] = (float)i;
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(4, 2, 3, 4, 5), t);
    h_node(&h, KILN_OP_TRANSPOSE);
    set_ints(&h, "perm", INTS(0, 2, 3, 1));
    h_run_ok(&h);
    y = h_out(&h, 0);
    assert_shape(&y->shape, ks(4, 2, 4, 5, 3));
    const float *yf = y->data;
    for (int n = 0; n < 2; n++)
        for (int hh = 0; hh < 4; hh++)
            for (int w = 0; w < 5; w++)
                for (int c = 0; c < 3; c++)
                    assert_true(yf[((n * 4 + hh) * 5 + w) * 3 + c] ==
                                t[((n * 3 + c) * 4 + hh) * 5 + w]);
    h_free(&h);
}

/* ---- Concat / Split -------------------------------------------------------- */

static void test_concat(void **state)
{
    (void)state;
    const float a[2] = {1, 2}, b[4] = {10, 11, 20, 21}, c[6] = {100, 101, 102, 200, 201, 202};
    harness h;
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(2, 2, 1), a);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(2, 2, 2), b);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(2, 2, 3), c);
    h_node(&h, KILN_OP_CONCAT);
    set_int(&h, "axis", -1);
    h_run_ok(&h);
    assert_shape(&h_out(&h, 0)->shape, ks(2, 2, 6));
    assert_f32(h_out(&h, 0), (const float[]){1, 10, 11, 100, 101, 102, 2, 20, 21, 200, 201, 202},
               12);
    h_free(&h);

    const int64_t p[2] = {1, 2}, q[4] = {3, 4, 5, 6};
    h_init(&h);
    h_input(&h, KILN_DTYPE_INT64, ks(2, 1, 2), p);
    h_input(&h, KILN_DTYPE_INT64, ks(2, 2, 2), q);
    h_node(&h, KILN_OP_CONCAT);
    set_int(&h, "axis", 0);
    h_run_ok(&h);
    assert_shape(&h_out(&h, 0)->shape, ks(2, 3, 2));
    assert_i64(h_out(&h, 0), (const int64_t[]){1, 2, 3, 4, 5, 6}, 6);
    h_free(&h);

    /* an empty input contributes nothing */
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(2, 2, 0), a);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(2, 2, 1), a);
    h_node(&h, KILN_OP_CONCAT);
    set_int(&h, "axis", 1);
    h_run_ok(&h);
    assert_f32(h_out(&h, 0), a, 2);
    h_free(&h);
}

static void test_split(void **state)
{
    (void)state;
    const int32_t x[7] = {0, 1, 2, 3, 4, 5, 6};
    harness h;
    h_init(&h);
    h_input(&h, KILN_DTYPE_INT32, ks(1, 7), x);
    h_node_outputs(&h, KILN_OP_SPLIT, 3); /* uneven: 3, 3, 1 */
    h_run_ok(&h);
    assert_shape(&h_out(&h, 0)->shape, ks(1, 3));
    assert_shape(&h_out(&h, 2)->shape, ks(1, 1));
    assert_memory_equal(h_out(&h, 0)->data, ((const int32_t[]){0, 1, 2}), 12);
    assert_memory_equal(h_out(&h, 1)->data, ((const int32_t[]){3, 4, 5}), 12);
    assert_memory_equal(h_out(&h, 2)->data, ((const int32_t[]){6}), 4);
    h_free(&h);

    const float m[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(2, 2, 4), m);
    h_node_outputs(&h, KILN_OP_SPLIT, 2);
    set_int(&h, "axis", 1);
    set_ints(&h, "split", INTS(1, 3));
    h_run_ok(&h);
    assert_shape(&h_out(&h, 0)->shape, ks(2, 2, 1));
    assert_f32(h_out(&h, 0), (const float[]){1, 5}, 2);
    assert_shape(&h_out(&h, 1)->shape, ks(2, 2, 3));
    assert_f32(h_out(&h, 1), (const float[]){2, 3, 4, 6, 7, 8}, 6);
    h_free(&h);
}

/* ---- Slice ----------------------------------------------------------------- */

static void test_slice(void **state)
{
    (void)state;
    float x[30];
    for (int i = 0; i < 30; i++)
        x[i] = (float)i;
    /* x is [5, 6]; rows 1::2 (1, 3), cols 5:0:-2 (5, 3, 1) */
    harness h;
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(2, 5, 6), x);
    h_node(&h, KILN_OP_SLICE);
    set_ints(&h, "starts", INTS(1, 5));
    set_ints(&h, "ends", INTS(INT64_MAX, 0));
    set_ints(&h, "steps", INTS(2, -2));
    h_run_ok(&h);
    const kiln_tensor *y = h_out(&h, 0);
    assert_shape(&y->shape, ks(2, 2, 3));
    float want[6];
    int p = 0;
    for (int r = 1; r < 5; r += 2)
        for (int c = 5; c > 0; c -= 2)
            want[p++] = x[r * 6 + c];
    assert_int_equal(p, 6);
    assert_f32(y, want, 6);
    h_free(&h);

    /* full reverse of one axis through INT64_MIN, on int64 */
    const int64_t v[5] = {10, 20, 30, 40, 50};
    h_init(&h);
    h_input(&h, KILN_DTYPE_INT64, ks(1, 5), v);
    h_node(&h, KILN_OP_SLICE);
    set_ints(&h, "starts", INTS(-1));
    set_ints(&h, "ends", INTS(INT64_MIN));
    set_ints(&h, "steps", INTS(-1));
    h_run_ok(&h);
    assert_i64(h_out(&h, 0), (const int64_t[]){50, 40, 30, 20, 10}, 5);
    h_free(&h);

    /* clamped starts/ends on axis -1 only, with a huge step */
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(2, 5, 6), x);
    h_node(&h, KILN_OP_SLICE);
    set_ints(&h, "starts", INTS(-100, 2));
    set_ints(&h, "ends", INTS(100, 4));
    set_ints(&h, "axes", INTS(-1, 0));
    set_ints(&h, "steps", INTS(INT64_MAX, 1));
    h_run_ok(&h);
    assert_shape(&h_out(&h, 0)->shape, ks(2, 2, 1));
    assert_f32(h_out(&h, 0), (const float[]){12, 18}, 2);
    h_free(&h);

    /* negative step with a start past the end clamps to the last element */
    h_init(&h);
    h_input(&h, KILN_DTYPE_INT64, ks(1, 5), v);
    h_node(&h, KILN_OP_SLICE);
    set_ints(&h, "starts", INTS(INT64_MAX));
    set_ints(&h, "ends", INTS(-4));
    set_ints(&h, "steps", INTS(-2));
    h_run_ok(&h);
    assert_i64(h_out(&h, 0), (const int64_t[]){50, 30}, 2);
    h_free(&h);

    /* an empty result */
    h_init(&h);
    h_input(&h, KILN_DTYPE_INT64, ks(1, 5), v);
    h_node(&h, KILN_OP_SLICE);
    set_ints(&h, "starts", INTS(3));
    set_ints(&h, "ends", INTS(1));
    h_run_ok(&h);
    assert_shape(&h_out(&h, 0)->shape, ks(1, 0));
    h_free(&h);
}

/* ---- Gather ---------------------------------------------------------------- */

static void test_gather(void **state)
{
    (void)state;
    const float d[6] = {1, 2, 3, 4, 5, 6}; /* [3, 2] */
    harness h;
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(2, 3, 2), d);
    h_input(&h, KILN_DTYPE_INT64, ks(1, 3), (const int64_t[]){-1, 0, 2});
    h_node(&h, KILN_OP_GATHER);
    h_run_ok(&h);
    assert_shape(&h_out(&h, 0)->shape, ks(2, 3, 2));
    assert_f32(h_out(&h, 0), (const float[]){5, 6, 1, 2, 5, 6}, 6);
    h_free(&h);

    /* axis 1 with 2-D int32 indices: y[i][a][b] = d[i][idx[a][b]] */
    const int64_t e[6] = {10, 11, 12, 20, 21, 22}; /* [2, 3] */
    const int32_t idx[4] = {2, 0, -2, 1};
    h_init(&h);
    h_input(&h, KILN_DTYPE_INT64, ks(2, 2, 3), e);
    h_input(&h, KILN_DTYPE_INT32, ks(2, 2, 2), idx);
    h_node(&h, KILN_OP_GATHER);
    set_int(&h, "axis", 1);
    h_run_ok(&h);
    assert_shape(&h_out(&h, 0)->shape, ks(3, 2, 2, 2));
    assert_i64(h_out(&h, 0), (const int64_t[]){12, 10, 11, 11, 22, 20, 21, 21}, 8);
    h_free(&h);

    /* scalar index */
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(2, 3, 2), d);
    h_input(&h, KILN_DTYPE_INT64, (kiln_shape){.rank = 0}, (const int64_t[]){1});
    h_node(&h, KILN_OP_GATHER);
    h_run_ok(&h);
    assert_shape(&h_out(&h, 0)->shape, ks(1, 2));
    assert_f32(h_out(&h, 0), (const float[]){3, 4}, 2);
    h_free(&h);
}

static void test_gather_out_of_range(void **state)
{
    (void)state;
    const float d[6] = {1, 2, 3, 4, 5, 6};
    const int64_t bad[3][2] = {{0, 3}, {-4, 0}, {INT64_MIN, 0}};
    for (int i = 0; i < 3; i++) {
        harness h;
        h_init(&h);
        h_input(&h, KILN_DTYPE_FLOAT32, ks(2, 3, 2), d);
        h_input(&h, KILN_DTYPE_INT64, ks(1, 2), bad[i]);
        h_node(&h, KILN_OP_GATHER);
        assert_int_equal(h_run(&h), KILN_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(h.err.msg, "out of range"));
        assert_non_null(strstr(h.err.msg, "node"));
        h_free(&h);
    }
    harness h;
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(2, 3, 2), d);
    h_input(&h, KILN_DTYPE_INT32, ks(1, 1), (const int32_t[]){2});
    h_node(&h, KILN_OP_GATHER);
    set_int(&h, "axis", 1);
    assert_int_equal(h_run(&h), KILN_ERR_INVALID_ARGUMENT);
    h_free(&h);
}

/* ---- Pad ------------------------------------------------------------------- */

static void test_pad_constant(void **state)
{
    (void)state;
    const float x[4] = {1, 2, 3, 4}; /* [2, 2] */
    harness h;
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(2, 2, 2), x);
    h_node(&h, KILN_OP_PAD);
    set_ints(&h, "pads", INTS(1, 0, 0, 2));
    kiln_node_set_float(h.g, h.node, "value", 9.0f);
    h_run_ok(&h);
    assert_shape(&h_out(&h, 0)->shape, ks(2, 3, 4));
    assert_f32(h_out(&h, 0), (const float[]){9, 9, 9, 9, 1, 2, 9, 9, 3, 4, 9, 9}, 12);
    h_free(&h);

    /* default value 0 on int32; crop by negative pads at the same time */
    const int32_t xi[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}; /* [3, 3] */
    h_init(&h);
    h_input(&h, KILN_DTYPE_INT32, ks(2, 3, 3), xi);
    h_node(&h, KILN_OP_PAD);
    set_ints(&h, "pads", INTS(-1, 1, 0, -1));
    h_run_ok(&h);
    assert_shape(&h_out(&h, 0)->shape, ks(2, 2, 3));
    assert_memory_equal(h_out(&h, 0)->data, ((const int32_t[]){0, 4, 5, 0, 7, 8}), 24);
    h_free(&h);

    /* int64 with value 7 cast */
    const int64_t xl[2] = {-1, -2};
    h_init(&h);
    h_input(&h, KILN_DTYPE_INT64, ks(1, 2), xl);
    h_node(&h, KILN_OP_PAD);
    set_ints(&h, "pads", INTS(1, 1));
    kiln_node_set_float(h.g, h.node, "value", 7.0f);
    h_run_ok(&h);
    assert_i64(h_out(&h, 0), (const int64_t[]){7, -1, -2, 7}, 4);
    h_free(&h);

    /* float16 raw: value 1.0 is 0x3c00 */
    const uint16_t xh[1] = {0x4000}; /* 2.0 */
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT16, ks(1, 1), xh);
    h_node(&h, KILN_OP_PAD);
    set_ints(&h, "pads", INTS(1, 1));
    kiln_node_set_float(h.g, h.node, "value", 1.0f);
    h_run_ok(&h);
    assert_memory_equal(h_out(&h, 0)->data, ((const uint16_t[]){0x3c00, 0x4000, 0x3c00}), 6);
    h_free(&h);
}

static void test_pad_reflect_edge(void **state)
{
    (void)state;
    const float v[3] = {1, 2, 3};
    harness h;
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(1, 3), v);
    h_node(&h, KILN_OP_PAD);
    set_ints(&h, "pads", INTS(2, 1));
    set_str(&h, "mode", "reflect");
    h_run_ok(&h);
    assert_f32(h_out(&h, 0), (const float[]){3, 2, 1, 2, 3, 2}, 6);
    kiln_ref_executor_destroy(h.ex);
    h.ex = NULL;
    set_str(&h, "mode", "edge");
    h_run_ok(&h);
    assert_f32(h_out(&h, 0), (const float[]){1, 1, 1, 2, 3, 3}, 6);
    h_free(&h);

    /* 2-D reflect: rows and columns */
    const float m[6] = {1, 2, 3, 4, 5, 6}; /* [2, 3] */
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(2, 2, 3), m);
    h_node(&h, KILN_OP_PAD);
    set_ints(&h, "pads", INTS(1, 1, 0, 1));
    set_str(&h, "mode", "reflect");
    h_run_ok(&h);
    assert_shape(&h_out(&h, 0)->shape, ks(2, 3, 5));
    assert_f32(h_out(&h, 0),
               (const float[]){5, 4, 5, 6, 5, /* row 1 reflected */
                               2, 1, 2, 3, 2, 5, 4, 5, 6, 5},
               15);
    h_free(&h);

    /* 2-D edge on uint8 */
    const uint8_t u[4] = {1, 2, 3, 4}; /* [2, 2] */
    h_init(&h);
    h_input(&h, KILN_DTYPE_UINT8, ks(2, 2, 2), u);
    h_node(&h, KILN_OP_PAD);
    set_ints(&h, "pads", INTS(0, 1, 1, 1));
    set_str(&h, "mode", "edge");
    h_run_ok(&h);
    assert_shape(&h_out(&h, 0)->shape, ks(2, 3, 4));
    assert_memory_equal(h_out(&h, 0)->data,
                        ((const uint8_t[]){1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}), 12);
    h_free(&h);

    /* crop then reflect: [1..5] cropped to [2..5], then 2 reflected at the end */
    const float w[5] = {1, 2, 3, 4, 5};
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(1, 5), w);
    h_node(&h, KILN_OP_PAD);
    set_ints(&h, "pads", INTS(-1, 2));
    set_str(&h, "mode", "reflect");
    h_run_ok(&h);
    assert_f32(h_out(&h, 0), (const float[]){2, 3, 4, 5, 4, 3}, 6);
    h_free(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_copy_ops),     cmocka_unit_test(test_transpose),
        cmocka_unit_test(test_concat),       cmocka_unit_test(test_split),
        cmocka_unit_test(test_slice),        cmocka_unit_test(test_gather),
        cmocka_unit_test(test_gather_out_of_range), cmocka_unit_test(test_pad_constant),
        cmocka_unit_test(test_pad_reflect_edge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
