/* tests/ops/test_elemwise.c: the reference unary and broadcasting binary
 * kernels. Unary ops against hand-computed values; binary ops against
 * hand-computed values and, for broadcasting, against the same operation on
 * explicitly tiled inputs (index arithmetic written out in the test);
 * int32/int64 arithmetic incl. truncating division, wraparound and division
 * by zero; Pow with float and integer exponents. Kernels run through one-node
 * graphs on the reference executor, and some are called directly. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "op_harness.h"

/* Runs unary `op` on float32 x[n] (shape [n]); output into y. The attribute
 * setter (may be NULL) is called with the graph and node. */
static void run_unary(kiln_op op, const float *x, int n, float *y,
                      void (*attrs)(kiln_graph *, int))
{
    harness h;
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(1, n), x);
    int node = h_node(&h, op);
    if (attrs)
        attrs(h.g, node);
    const kiln_tensor *t = h_run_ok(&h);
    assert_int_equal(t->dtype, KILN_DTYPE_FLOAT32);
    assert_int_equal(kiln_shape_numel(&t->shape), n);
    memcpy(y, t->data, sizeof(float) * (size_t)n);
    h_free(&h);
}

/* ---- unary ----------------------------------------------------------------- */

static void clip_min_only(kiln_graph *g, int node)
{
    kiln_node_set_float(g, node, "min", -1.0f);
}

static void clip_0_6(kiln_graph *g, int node)
{
    kiln_node_set_float(g, node, "min", 0.0f);
    kiln_node_set_float(g, node, "max", 6.0f);
}

static void hs_attrs(kiln_graph *g, int node)
{
    kiln_node_set_float(g, node, "alpha", 0.5f);
    kiln_node_set_float(g, node, "beta", 0.25f);
}

static void test_relu_clip(void **state)
{
    (void)state;
    float y[6];
    const float x[6] = {-2.0f, -0.5f, 0.0f, 1.5f, 7.0f, -1e30f};
    run_unary(KILN_OP_RELU, x, 6, y, NULL);
    assert_allclose(y, ((const float[]){0, 0, 0, 1.5f, 7.0f, 0}), 6, 0, 0);

    run_unary(KILN_OP_CLIP, x, 6, y, clip_min_only);
    assert_allclose(y, ((const float[]){-1.0f, -0.5f, 0, 1.5f, 7.0f, -1.0f}), 6, 0, 0);
    run_unary(KILN_OP_CLIP, x, 6, y, clip_0_6);
    assert_allclose(y, ((const float[]){0, 0, 0, 1.5f, 6.0f, 0}), 6, 0, 0);
    run_unary(KILN_OP_CLIP, x, 6, y, NULL); /* no bounds: identity */
    assert_allclose(y, x, 6, 0, 0);

    const float nan_in[1] = {NAN};
    run_unary(KILN_OP_RELU, nan_in, 1, y, NULL);
    assert_true(isnan(y[0]));
}

static void test_sigmoids(void **state)
{
    (void)state;
    float y[5];
    const float x[5] = {0.0f, 2.0f, -2.0f, -100.0f, 100.0f};
    run_unary(KILN_OP_SIGMOID, x, 5, y, NULL);
    assert_allclose(y, ((const float[]){0.5f, 0.880797078f, 0.119202922f, 0.0f, 1.0f}), 5, 1e-6,
                    1e-30);

    const float xh[5] = {-3.0f, 0.0f, 1.0f, 3.0f, -2.4f};
    run_unary(KILN_OP_HARDSIGMOID, xh, 5, y, NULL); /* alpha 0.2, beta 0.5 */
    assert_allclose(y, ((const float[]){0.0f, 0.5f, 0.7f, 1.0f, 0.02f}), 5, 1e-6, 1e-7);
    run_unary(KILN_OP_HARDSIGMOID, xh, 5, y, hs_attrs); /* 0.5 x + 0.25 */
    assert_allclose(y, ((const float[]){0.0f, 0.25f, 0.75f, 1.0f, 0.0f}), 5, 1e-6, 1e-7);

    const float xs[5] = {-4.0f, -1.0f, 0.0f, 1.0f, 4.0f};
    run_unary(KILN_OP_HARDSWISH, xs, 5, y, NULL); /* x * clamp(x/6 + 1/2, 0, 1) */
    assert_allclose(y, ((const float[]){0.0f, -1.0f / 3.0f, 0.0f, 2.0f / 3.0f, 4.0f}), 5, 1e-6,
                    1e-7);
}

static void test_erf_sqrt(void **state)
{
    (void)state;
    float y[5];
    const float x[5] = {0.0f, 0.5f, 1.0f, -1.0f, 3.0f};
    run_unary(KILN_OP_ERF, x, 5, y, NULL);
    assert_allclose(y, ((const float[]){0.0f, 0.520499878f, 0.842700793f, -0.842700793f,
                                        0.999977910f}),
                    5, 1e-6, 1e-7);
    const float xs[4] = {4.0f, 2.0f, 0.0f, -1.0f};
    run_unary(KILN_OP_SQRT, xs, 4, y, NULL);
    assert_allclose(y, ((const float[]){2.0f, 1.41421356f, 0.0f}), 3, 1e-6, 0);
    assert_true(isnan(y[3]));
}

static void test_unary_direct_errors(void **state)
{
    (void)state;
    kiln_graph *g = NULL;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    kiln_shape s = ks(1, 3);
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_INT32, &s);
    int node = kiln_graph_add_node(g, KILN_OP_RELU, "r", &x, 1, 1);
    /* int32 in, float32 out: the kernel refuses a type change */
    int32_t xi[3] = {1, 2, 3};
    float yi[3];
    kiln_tensor a = {KILN_DTYPE_INT32, ks(1, 3), xi}, b = {KILN_DTYPE_FLOAT32, ks(1, 3), yi};
    const kiln_tensor *in[1] = {&a};
    kiln_tensor *out[1] = {&b};
    kiln_error err = {0};
    assert_int_equal(kiln_ref_relu(kiln_graph_node(g, node), in, out, &err),
                     KILN_ERR_TYPE_MISMATCH);
    kiln_graph_destroy(g);
}

/* ---- binary ---------------------------------------------------------------- */

/* Runs binary `op` on (ta, sa, a) and (tb, sb, b); copies the output (nbytes)
 * into y and returns the status. */
static kiln_status run_binary(kiln_op op, kiln_dtype ta, kiln_shape sa, const void *a,
                              kiln_dtype tb, kiln_shape sb, const void *b, void *y, size_t nbytes,
                              kiln_error *err)
{
    harness h;
    h_init(&h);
    h_input(&h, ta, sa, a);
    h_input(&h, tb, sb, b);
    h_node(&h, op);
    kiln_status s = h_run(&h);
    if (s == KILN_OK) {
        const kiln_tensor *t = h_out(&h, 0);
        assert_int_equal(kiln_tensor_nbytes(t), (int64_t)nbytes);
        memcpy(y, t->data, nbytes);
    }
    if (err)
        *err = h.err;
    h_free(&h);
    return s;
}

static void test_binary_float_values(void **state)
{
    (void)state;
    const float a[6] = {1, 2, 3, 4, 5, 6};
    const float b[3] = {10, 20, 40};
    float y[6];
    const kiln_dtype F = KILN_DTYPE_FLOAT32;
    assert_int_equal(run_binary(KILN_OP_ADD, F, ks(2, 2, 3), a, F, ks(1, 3), b, y, sizeof y, NULL),
                     KILN_OK);
    assert_allclose(y, ((const float[]){11, 22, 43, 14, 25, 46}), 6, 0, 0);
    assert_int_equal(run_binary(KILN_OP_SUB, F, ks(1, 3), b, F, ks(2, 2, 3), a, y, sizeof y, NULL),
                     KILN_OK);
    assert_allclose(y, ((const float[]){9, 18, 37, 6, 15, 34}), 6, 0, 0);
    assert_int_equal(run_binary(KILN_OP_MUL, F, ks(2, 2, 3), a, F, ks(2, 2, 1),
                                (const float[]){2, -1}, y, sizeof y, NULL),
                     KILN_OK);
    assert_allclose(y, ((const float[]){2, 4, 6, -4, -5, -6}), 6, 0, 0);
    assert_int_equal(run_binary(KILN_OP_DIV, F, ks(2, 2, 3), a, F, (kiln_shape){.rank = 0},
                                (const float[]){4}, y, sizeof y, NULL),
                     KILN_OK);
    assert_allclose(y, ((const float[]){0.25f, 0.5f, 0.75f, 1, 1.25f, 1.5f}), 6, 0, 0);
    /* scalar on the left, and float division by zero is IEEE (inf) */
    assert_int_equal(run_binary(KILN_OP_DIV, F, (kiln_shape){.rank = 0}, (const float[]){1}, F,
                                ks(1, 2), (const float[]){0, -2}, y, 2 * sizeof(float), NULL),
                     KILN_OK);
    assert_true(isinf(y[0]) && y[0] > 0);
    assert_true(y[1] == -0.5f);
}

/* Broadcasting checked against explicitly tiled operands: for output [A,B,C,D]
 * the operands are tiled into full [A,B,C,D] arrays with index arithmetic
 * (each operand dim of size 1 indexed at 0), then combined elementwise. */
static void check_broadcast_case(kiln_op op, kiln_shape sa, kiln_shape sb, kiln_shape so,
                                 uint64_t seed)
{
    int64_t na = kiln_shape_numel(&sa), nb = kiln_shape_numel(&sb), no = kiln_shape_numel(&so);
    float *a = malloc(sizeof(float) * (size_t)(na + 1));
    float *b = malloc(sizeof(float) * (size_t)(nb + 1));
    float *ta = malloc(sizeof(float) * (size_t)no), *tb = malloc(sizeof(float) * (size_t)no);
    float *want = malloc(sizeof(float) * (size_t)no), *got = malloc(sizeof(float) * (size_t)no);
    kt_fill_random(a, na, seed, 0.5f, 2.0f);
    kt_fill_random(b, nb, seed + 1, 0.5f, 2.0f);
    assert_int_equal(so.rank, 4);
    /* pad operand shapes to rank 4 with leading 1s */
    int64_t da[4], db[4];
    for (int i = 0; i < 4; i++) {
        int ia = i - (4 - sa.rank), ib = i - (4 - sb.rank);
        da[i] = ia >= 0 ? sa.dims[ia] : 1;
        db[i] = ib >= 0 ? sb.dims[ib] : 1;
    }
    int64_t p = 0;
    for (int64_t i0 = 0; i0 < so.dims[0]; i0++)
        for (int64_t i1 = 0; i1 < so.dims[1]; i1++)
            for (int64_t i2 = 0; i2 < so.dims[2]; i2++)
                for (int64_t i3 = 0; i3 < so.dims[3]; i3++, p++) {
                    int64_t j0 = da[0] == 1 ? 0 : i0, j1 = da[1] == 1 ? 0 : i1;
                    int64_t j2 = da[2] == 1 ? 0 : i2, j3 = da[3] == 1 ? 0 : i3;
                    ta[p] = a[((j0 * da[1] + j1) * da[2] + j2) * da[3] + j3];
                    j0 = db[0] == 1 ? 0 : i0, j1 = db[1] == 1 ? 0 : i1;
                    j2 = db[2] == 1 ? 0 : i2, j3 = db[3] == 1 ? 0 : i3;
                    tb[p] = b[((j0 * db[1] + j1) * db[2] + j2) * db[3] + j3];
                }
    for (int64_t i = 0; i < no; i++) {
        switch (op) {
        case KILN_OP_ADD: want[i] = ta[i] + tb[i]; break;
        case KILN_OP_SUB: want[i] = ta[i] - tb[i]; break;
        case KILN_OP_MUL: want[i] = ta[i] * tb[i]; break;
        case KILN_OP_DIV: want[i] = ta[i] / tb[i]; break;
        default: want[i] = powf(ta[i], tb[i]); break;
        }
    }
    const kiln_dtype F = KILN_DTYPE_FLOAT32;
    kiln_error err = {0};
    kiln_status s = run_binary(op, F, sa, a, F, sb, b, got, sizeof(float) * (size_t)no, &err);
    if (s != KILN_OK)
        fail_msg("%s", err.msg);
    assert_allclose(got, want, no, 1e-6, 0);
    free(a);
    free(b);
    free(ta);
    free(tb);
    free(want);
    free(got);
}

static void test_broadcast_against_tiled(void **state)
{
    (void)state;
    /* per-channel bias */
    check_broadcast_case(KILN_OP_ADD, ks(4, 1, 8, 5, 7), ks(4, 1, 8, 1, 1), ks(4, 1, 8, 5, 7), 1);
    check_broadcast_case(KILN_OP_ADD, ks(3, 8, 1, 1), ks(4, 2, 8, 5, 7), ks(4, 2, 8, 5, 7), 2);
    /* both sides broadcast, rank-mismatched */
    check_broadcast_case(KILN_OP_MUL, ks(4, 2, 1, 3, 1), ks(3, 4, 1, 5), ks(4, 2, 4, 3, 5), 3);
    check_broadcast_case(KILN_OP_SUB, ks(2, 3, 1), ks(4, 2, 1, 1, 6), ks(4, 2, 1, 3, 6), 4);
    check_broadcast_case(KILN_OP_DIV, ks(4, 1, 4, 1, 6), ks(4, 3, 1, 5, 1), ks(4, 3, 4, 5, 6), 5);
    /* scalars */
    check_broadcast_case(KILN_OP_POW, ks(4, 2, 3, 4, 5), (kiln_shape){.rank = 0},
                         ks(4, 2, 3, 4, 5), 6);
    check_broadcast_case(KILN_OP_SUB, (kiln_shape){.rank = 0}, ks(1, 9), ks(4, 1, 1, 1, 9), 7);
    /* same shapes */
    check_broadcast_case(KILN_OP_ADD, ks(4, 2, 3, 4, 5), ks(4, 2, 3, 4, 5), ks(4, 2, 3, 4, 5), 8);
    /* last dim broadcast on the left operand */
    check_broadcast_case(KILN_OP_DIV, ks(4, 2, 3, 4, 1), ks(1, 5), ks(4, 2, 3, 4, 5), 9);
}

static void test_broadcast_empty(void **state)
{
    (void)state;
    const kiln_dtype F = KILN_DTYPE_FLOAT32;
    float dummy[1] = {0}, y[1];
    assert_int_equal(run_binary(KILN_OP_ADD, F, ks(2, 0, 3), dummy, F, ks(1, 3),
                                (const float[]){1, 2, 3}, y, 0, NULL),
                     KILN_OK);
}

static void test_int_arithmetic(void **state)
{
    (void)state;
    const kiln_dtype I32 = KILN_DTYPE_INT32, I64 = KILN_DTYPE_INT64;
    int32_t y32[4];
    const int32_t a32[4] = {7, -7, 7, -7}, b32[4] = {2, 2, -2, -2};
    assert_int_equal(run_binary(KILN_OP_DIV, I32, ks(1, 4), a32, I32, ks(1, 4), b32, y32,
                                sizeof y32, NULL),
                     KILN_OK);
    assert_int_equal(y32[0], 3); /* truncation toward zero */
    assert_int_equal(y32[1], -3);
    assert_int_equal(y32[2], -3);
    assert_int_equal(y32[3], 3);
    assert_int_equal(run_binary(KILN_OP_ADD, I32, ks(1, 4), a32, I32, (kiln_shape){.rank = 0},
                                (const int32_t[]){100}, y32, sizeof y32, NULL),
                     KILN_OK);
    assert_int_equal(y32[0], 107);
    assert_int_equal(y32[1], 93);
    assert_int_equal(run_binary(KILN_OP_SUB, I32, ks(2, 2, 2), a32, I32, ks(2, 2, 1),
                                (const int32_t[]){1, 10}, y32, sizeof y32, NULL),
                     KILN_OK);
    assert_int_equal(y32[0], 6);
    assert_int_equal(y32[1], -8);
    assert_int_equal(y32[2], -3);
    assert_int_equal(y32[3], -17);
    assert_int_equal(run_binary(KILN_OP_MUL, I32, ks(1, 4), a32, I32, ks(1, 4), b32, y32,
                                sizeof y32, NULL),
                     KILN_OK);
    assert_int_equal(y32[0], 14);
    assert_int_equal(y32[1], -14);
    assert_int_equal(y32[2], -14);
    assert_int_equal(y32[3], 14);
    /* wraparound instead of undefined behaviour */
    const int32_t big[2] = {INT32_MAX, INT32_MIN};
    assert_int_equal(run_binary(KILN_OP_ADD, I32, ks(1, 2), big, I32, ks(1, 2),
                                (const int32_t[]){1, -1}, y32, 2 * sizeof(int32_t), NULL),
                     KILN_OK);
    assert_int_equal(y32[0], INT32_MIN);
    assert_int_equal(y32[1], INT32_MAX);
    assert_int_equal(run_binary(KILN_OP_DIV, I32, ks(1, 2), big, I32, ks(1, 1),
                                (const int32_t[]){-1}, y32, 2 * sizeof(int32_t), NULL),
                     KILN_OK);
    assert_int_equal(y32[0], -INT32_MAX);
    assert_int_equal(y32[1], INT32_MIN);

    int64_t y64[3];
    const int64_t a64[3] = {3000000000LL, -9, 1LL << 40};
    assert_int_equal(run_binary(KILN_OP_MUL, I64, ks(1, 3), a64, I64, ks(1, 1),
                                (const int64_t[]){3}, y64, sizeof y64, NULL),
                     KILN_OK);
    assert_true(y64[0] == 9000000000LL);
    assert_true(y64[1] == -27);
    assert_true(y64[2] == 3LL << 40);
    assert_int_equal(run_binary(KILN_OP_DIV, I64, ks(1, 3), a64, I64, ks(1, 3),
                                (const int64_t[]){7, 4, -(1LL << 20)}, y64, sizeof y64, NULL),
                     KILN_OK);
    assert_true(y64[0] == 428571428LL);
    assert_true(y64[1] == -2);
    assert_true(y64[2] == -(1LL << 20));
    assert_int_equal(run_binary(KILN_OP_SUB, I64, ks(1, 3), a64, I64, ks(1, 3), a64, y64,
                                sizeof y64, NULL),
                     KILN_OK);
    assert_true(y64[0] == 0 && y64[1] == 0 && y64[2] == 0);
}

static void test_int_div_by_zero(void **state)
{
    (void)state;
    kiln_error err = {0};
    int32_t y32[3];
    assert_int_equal(run_binary(KILN_OP_DIV, KILN_DTYPE_INT32, ks(1, 3),
                                (const int32_t[]){1, 2, 3}, KILN_DTYPE_INT32, ks(1, 3),
                                (const int32_t[]){1, 0, 1}, y32, sizeof y32, &err),
                     KILN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "division by zero"));
    assert_non_null(strstr(err.msg, "node"));
    int64_t y64[2];
    assert_int_equal(run_binary(KILN_OP_DIV, KILN_DTYPE_INT64, ks(1, 2), (const int64_t[]){4, 5},
                                KILN_DTYPE_INT64, (kiln_shape){.rank = 0}, (const int64_t[]){0},
                                y64, sizeof y64, &err),
                     KILN_ERR_INVALID_ARGUMENT);
    /* a zero divisor for an empty output is never used */
    assert_int_equal(run_binary(KILN_OP_DIV, KILN_DTYPE_INT64, ks(1, 0), (const int64_t[]){0},
                                KILN_DTYPE_INT64, ks(1, 1), (const int64_t[]){0}, y64, 0, &err),
                     KILN_OK);
}

static void test_pow(void **state)
{
    (void)state;
    const kiln_dtype F = KILN_DTYPE_FLOAT32;
    float y[3];
    assert_int_equal(run_binary(KILN_OP_POW, F, ks(1, 3), (const float[]){2, 3, 4}, F, ks(1, 3),
                                (const float[]){3, 0.5f, -1}, y, sizeof y, NULL),
                     KILN_OK);
    assert_allclose(y, ((const float[]){8, 1.73205081f, 0.25f}), 3, 1e-6, 0);
    assert_int_equal(run_binary(KILN_OP_POW, F, ks(1, 3), (const float[]){-1, 2, -3},
                                KILN_DTYPE_INT64, (kiln_shape){.rank = 0}, (const int64_t[]){2},
                                y, sizeof y, NULL),
                     KILN_OK);
    assert_allclose(y, ((const float[]){1, 4, 9}), 3, 0, 0);
    assert_int_equal(run_binary(KILN_OP_POW, F, ks(2, 3, 1), (const float[]){-2, 0.5f, 10},
                                KILN_DTYPE_INT32, ks(1, 1), (const int32_t[]){3}, y, sizeof y,
                                NULL),
                     KILN_OK);
    assert_allclose(y, ((const float[]){-8, 0.125f, 1000}), 3, 1e-6, 0);
}

static void test_binary_direct_shape_check(void **state)
{
    (void)state;
    kiln_graph *g = NULL;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    kiln_shape s = ks(1, 3);
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &s);
    int node = kiln_graph_add_node(g, KILN_OP_ADD, "add", (int[]){x, x}, 2, 1);
    float a[3] = {1, 2, 3}, b[2] = {1, 2}, y[4];
    kiln_tensor ta = {KILN_DTYPE_FLOAT32, ks(1, 3), a}, tb = {KILN_DTYPE_FLOAT32, ks(1, 2), b};
    kiln_tensor ty = {KILN_DTYPE_FLOAT32, ks(1, 3), y};
    const kiln_tensor *in[2] = {&ta, &tb};
    kiln_tensor *out[1] = {&ty};
    kiln_error err = {0};
    assert_int_equal(kiln_ref_add(kiln_graph_node(g, node), in, out, &err),
                     KILN_ERR_SHAPE_MISMATCH);
    tb.shape = ks(2, 1, 1);
    b[0] = 5;
    assert_int_equal(kiln_ref_add(kiln_graph_node(g, node), in, out, &err),
                     KILN_ERR_SHAPE_MISMATCH); /* output should be [1, 3] */
    ty.shape = ks(2, 1, 3);
    assert_int_equal(kiln_ref_add(kiln_graph_node(g, node), in, out, &err), KILN_OK);
    assert_allclose(y, ((const float[]){6, 7, 8}), 3, 0, 0);
    kiln_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_relu_clip),
        cmocka_unit_test(test_sigmoids),
        cmocka_unit_test(test_erf_sqrt),
        cmocka_unit_test(test_unary_direct_errors),
        cmocka_unit_test(test_binary_float_values),
        cmocka_unit_test(test_broadcast_against_tiled),
        cmocka_unit_test(test_broadcast_empty),
        cmocka_unit_test(test_int_arithmetic),
        cmocka_unit_test(test_int_div_by_zero),
        cmocka_unit_test(test_pow),
        cmocka_unit_test(test_binary_direct_shape_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
