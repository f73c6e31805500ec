/* tests/ops/test_reduce.c: the reference kernels of the reduction family —
 * ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare, ArgMax/ArgMin,
 * CumSum, TopK and Einsum — on one-node graphs (shapes inferred, kernel called
 * directly on the test's buffers, outputs pre-filled with a byte pattern so
 * that unwritten cells show up). Expected values are computed by hand in the
 * test, or, for Einsum, by loops written out for each equation. Covers
 * float32, float64, float16 and integer dtypes (wrap-around, unsigned order,
 * type limits), empty reductions, noop_with_empty_axes, ties, NaN, LogSumExp
 * with large values, ellipsis broadcasting and diagonals. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/graph.h"
#include "test_support.h"

typedef struct rt {
    kiln_graph *g;
    int node;
    int n_in, n_out;
    kiln_tensor out[2];
} rt;

static rt rt_build(kiln_op op, int n_in, const kiln_dtype *dts, const kiln_shape *shapes,
                   int n_out)
{
    rt t;
    memset(&t, 0, sizeof t);
    t.n_in = n_in;
    t.n_out = n_out;
    assert_int_equal(kiln_graph_create(&t.g), KILN_OK);
    int ids[8];
    for (int i = 0; i < n_in; i++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", i);
        ids[i] = kiln_graph_add_input(t.g, name, dts[i], &shapes[i]);
    }
    t.node = kiln_graph_add_node(t.g, op, "node", ids, n_in, n_out);
    assert_true(t.node >= 0);
    for (int k = 0; k < n_out; k++)
        assert_int_equal(kiln_graph_add_output(t.g, kiln_graph_node_output(t.g, t.node, k)),
                         KILN_OK);
    return t;
}

/* Single-input convenience. */
static rt rt1(kiln_op op, kiln_dtype dt, kiln_shape s, int n_out)
{
    return rt_build(op, 1, &dt, &s, n_out);
}

/* Infers (must succeed), checks output 0's shape against `expect` (if not
 * NULL), runs the kernel on data[i]; outputs land in t->out[k]. */
static void rt_run(rt *t, const void *const *data, const kiln_shape *expect)
{
    kiln_error err = {0};
    kiln_status s = kiln_graph_infer_shapes(t->g, &err);
    if (s != KILN_OK)
        fail_msg("inference failed: %s", err.msg);
    const kiln_node *n = kiln_graph_node(t->g, t->node);
    kiln_tensor tin[8];
    const kiln_tensor *pin[8];
    for (int i = 0; i < t->n_in; i++) {
        const kiln_value *v = kiln_graph_value(t->g, n->inputs[i]);
        tin[i] = (kiln_tensor){.dtype = v->dtype, .shape = v->shape, .data = (void *)data[i]};
        pin[i] = &tin[i];
    }
    kiln_tensor *pout[2];
    for (int k = 0; k < t->n_out; k++) {
        const kiln_value *ov = kiln_graph_value(t->g, n->outputs[k]);
        int64_t bytes = kiln_tensor_nbytes(&(kiln_tensor){.dtype = ov->dtype, .shape = ov->shape});
        t->out[k] = (kiln_tensor){.dtype = ov->dtype, .shape = ov->shape,
                                  .data = malloc((size_t)(bytes > 0 ? bytes : 1))};
        assert_non_null(t->out[k].data);
        memset(t->out[k].data, 0xA5, (size_t)(bytes > 0 ? bytes : 1));
        pout[k] = &t->out[k];
    }
    if (expect && !kiln_shape_equal(&t->out[0].shape, expect)) {
        char a[128], b[128];
        fail_msg("output shape %s, expected %s", kiln_shape_str(&t->out[0].shape, a, sizeof a),
                 kiln_shape_str(expect, b, sizeof b));
    }
    s = kiln_op_get(n->op)->ref(n, pin, pout, &err);
    if (s != KILN_OK)
        fail_msg("kernel failed: %s", err.msg);
}

static void rt_free(rt *t)
{
    for (int k = 0; k < t->n_out; k++)
        free(t->out[k].data);
    kiln_graph_destroy(t->g);
}

static void set_ints(rt *t, const char *name, const int64_t *v, int n)
{
    assert_int_equal(kiln_node_set_ints(t->g, t->node, name, v, n), KILN_OK);
}
static void set_int(rt *t, const char *name, int64_t v)
{
    assert_int_equal(kiln_node_set_int(t->g, t->node, name, v), KILN_OK);
}

static void expect_f64(const double *got, const double *want, int64_t n, double tol)
{
    for (int64_t i = 0; i < n; i++) {
        bool ok = (isnan(want[i]) && isnan(got[i])) || got[i] == want[i] ||
                  fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i]));
        if (!ok)
            fail_msg("element %lld: got %.17g, expected %.17g", (long long)i, got[i], want[i]);
    }
}
static void expect_f32(const float *got, const float *want, int64_t n, double tol)
{
    for (int64_t i = 0; i < n; i++) {
        bool ok = (isnan(want[i]) && isnan(got[i])) || got[i] == want[i] ||
                  fabs((double)got[i] - want[i]) <= tol * (1 + fabs((double)want[i]));
        if (!ok)
            fail_msg("element %lld: got %.9g, expected %.9g", (long long)i, (double)got[i],
                     (double)want[i]);
    }
}
static void expect_i64(const int64_t *got, const int64_t *want, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (got[i] != want[i])
            fail_msg("element %lld: got %lld, expected %lld", (long long)i, (long long)got[i],
                     (long long)want[i]);
}

/* ---- reductions, float32 on [[1, 2, 3], [4, 5, 6]] ----------------------- */

static void red_f32(kiln_op op, const float *x, kiln_shape xs, const int64_t *axes, int n_axes,
                    int keepdims, kiln_shape want_shape, const float *want)
{
    rt t = rt1(op, KILN_DTYPE_FLOAT32, xs, 1);
    if (n_axes >= 0)
        set_ints(&t, "axes", axes, n_axes);
    if (keepdims >= 0)
        set_int(&t, "keepdims", keepdims);
    const void *d[1] = {x};
    rt_run(&t, d, &want_shape);
    expect_f32(t.out[0].data, want, kiln_shape_numel(&want_shape), 1e-6);
    rt_free(&t);
}

static void test_reduce_f32(void **state)
{
    (void)state;
    const float x[6] = {1, 2, 3, 4, 5, 6};
    kiln_shape xs = ks(2, 2, 3);
    const int64_t a0[1] = {0}, a1[1] = {1}, am1[1] = {-1};
    red_f32(KILN_OP_REDUCESUM, x, xs, a1, 1, 0, ks(1, 2), (float[]){6, 15});
    red_f32(KILN_OP_REDUCESUM, x, xs, NULL, -1, 1, ks(2, 1, 1), (float[]){21});
    red_f32(KILN_OP_REDUCESUM, x, xs, a0, 1, 1, ks(2, 1, 3), (float[]){5, 7, 9});
    red_f32(KILN_OP_REDUCEMEAN, x, xs, am1, 1, 0, ks(1, 2), (float[]){2, 5});
    red_f32(KILN_OP_REDUCEMAX, x, xs, a0, 1, 1, ks(2, 1, 3), (float[]){4, 5, 6});
    red_f32(KILN_OP_REDUCEMIN, x, xs, NULL, -1, 0, ks(0), (float[]){1});
    red_f32(KILN_OP_REDUCEPROD, x, xs, a1, 1, 0, ks(1, 2), (float[]){6, 120});
    red_f32(KILN_OP_REDUCELOGSUM, x, xs, a1, 1, 0, ks(1, 2),
            (float[]){(float)log(6.0), (float)log(15.0)});
    red_f32(KILN_OP_REDUCESUMSQUARE, x, xs, a0, 1, 0, ks(1, 3), (float[]){17, 29, 45});
    const float y[4] = {-1, 2, 3, -4}, z[4] = {3, -4, 6, 8};
    kiln_shape ys = ks(2, 2, 2);
    red_f32(KILN_OP_REDUCEL1, y, ys, a1, 1, 0, ks(1, 2), (float[]){3, 7});
    red_f32(KILN_OP_REDUCEL1, y, ys, a0, 1, 0, ks(1, 2), (float[]){4, 6});
    red_f32(KILN_OP_REDUCEL2, z, ys, am1, 1, 1, ks(2, 2, 1), (float[]){5, 10});
    /* (2, 3, 2) over axes {0, 2}: sums of x[i][j][k] = 100 i + 10 j + k */
    float w[12];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 2; k++)
                w[i * 6 + j * 2 + k] = (float)(100 * i + 10 * j + k);
    const int64_t a02[2] = {2, 0};
    red_f32(KILN_OP_REDUCESUM, w, ks(3, 2, 3, 2), a02, 2, 0, ks(1, 3),
            (float[]){202, 242, 282});
    red_f32(KILN_OP_REDUCEMAX, w, ks(3, 2, 3, 2), a02, 2, 1, ks(3, 1, 3, 1),
            (float[]){101, 111, 121});
}

/* NaN propagates through Max/Min; LogSumExp is stable for large inputs. */
static void test_reduce_special(void **state)
{
    (void)state;
    const int64_t a1[1] = {1};
    const float x[4] = {1, NAN, 3, 2};
    red_f32(KILN_OP_REDUCEMAX, x, ks(2, 2, 2), a1, 1, 0, ks(1, 2), (float[]){NAN, 3});
    red_f32(KILN_OP_REDUCEMIN, x, ks(2, 2, 2), a1, 1, 0, ks(1, 2), (float[]){NAN, 2});
    rt t = rt1(KILN_OP_REDUCELOGSUMEXP, KILN_DTYPE_FLOAT64, ks(2, 3, 2), 1);
    set_ints(&t, "axes", a1, 1);
    set_int(&t, "keepdims", 0);
    const double d[6] = {1000, 1000, 0, log(3.0), -INFINITY, -INFINITY};
    const void *in[1] = {d};
    rt_run(&t, in, &(kiln_shape){.rank = 1, .dims = {3}});
    expect_f64(t.out[0].data, (double[]){1000 + log(2.0), log(4.0), -INFINITY}, 3, 1e-14);
    rt_free(&t);
    /* float64 mean and L2 */
    t = rt1(KILN_OP_REDUCEMEAN, KILN_DTYPE_FLOAT64, ks(1, 4), 1);
    const double m[4] = {1, 2, 3, 5};
    in[0] = m;
    rt_run(&t, in, &(kiln_shape){.rank = 1, .dims = {1}});
    expect_f64(t.out[0].data, (double[]){2.75}, 1, 0);
    rt_free(&t);
}

/* Reducing an empty axis gives each operation's identity. */
static void test_reduce_empty(void **state)
{
    (void)state;
    const int64_t a1[1] = {1};
    const struct {
        kiln_op op;
        float want;
    } cases[] = {
        {KILN_OP_REDUCESUM, 0},          {KILN_OP_REDUCEPROD, 1},
        {KILN_OP_REDUCEMAX, -INFINITY},  {KILN_OP_REDUCEMIN, INFINITY},
        {KILN_OP_REDUCEL1, 0},           {KILN_OP_REDUCEL2, 0},
        {KILN_OP_REDUCESUMSQUARE, 0},    {KILN_OP_REDUCELOGSUM, -INFINITY},
        {KILN_OP_REDUCELOGSUMEXP, -INFINITY},
    };
    float dummy = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        float want[3] = {cases[c].want, cases[c].want, cases[c].want};
        red_f32(cases[c].op, &dummy, ks(2, 3, 0), a1, 1, 0, ks(1, 3), want);
    }
    /* integer max over nothing: the type's minimum */
    rt t = rt1(KILN_OP_REDUCEMAX, KILN_DTYPE_INT32, ks(2, 2, 0), 1);
    set_ints(&t, "axes", a1, 1);
    const void *in[1] = {&dummy};
    rt_run(&t, in, NULL);
    assert_int_equal(((int32_t *)t.out[0].data)[0], INT32_MIN);
    assert_int_equal(((int32_t *)t.out[0].data)[1], INT32_MIN);
    rt_free(&t);
}

/* noop_with_empty_axes with no axes copies the input (even for L1). */
static void test_reduce_noop(void **state)
{
    (void)state;
    const float x[4] = {-1, 2, -3, 4};
    rt t = rt1(KILN_OP_REDUCEL1, KILN_DTYPE_FLOAT32, ks(2, 2, 2), 1);
    set_ints(&t, "axes", NULL, 0);
    set_int(&t, "noop_with_empty_axes", 1);
    const void *in[1] = {x};
    rt_run(&t, in, &(kiln_shape){.rank = 2, .dims = {2, 2}});
    expect_f32(t.out[0].data, x, 4, 0);
    rt_free(&t);
    /* empty axes without noop: everything */
    red_f32(KILN_OP_REDUCESUM, x, ks(2, 2, 2), NULL, 0, 0, ks(0), (float[]){2});
}

static void test_reduce_int(void **state)
{
    (void)state;
    const int64_t a1[1] = {1};
    /* int32 sum wraps */
    rt t = rt1(KILN_OP_REDUCESUM, KILN_DTYPE_INT32, ks(2, 2, 2), 1);
    set_ints(&t, "axes", a1, 1);
    set_int(&t, "keepdims", 0);
    const int32_t x32[4] = {100, -7, INT32_MAX, 1};
    const void *in[1] = {x32};
    rt_run(&t, in, NULL);
    assert_int_equal(t.out[0].dtype, KILN_DTYPE_INT32);
    assert_int_equal(((int32_t *)t.out[0].data)[0], 93);
    assert_int_equal(((int32_t *)t.out[0].data)[1], INT32_MIN);
    rt_free(&t);
    /* int8 max/min, L1 */
    const int8_t x8[4] = {-5, -128, 7, 3};
    const struct {
        kiln_op op;
        int8_t w0, w1;
    } c8[] = {{KILN_OP_REDUCEMAX, -5, 7},
              {KILN_OP_REDUCEMIN, -128, 3},
              {KILN_OP_REDUCEL1, (int8_t)133, 10},
              {KILN_OP_REDUCEPROD, (int8_t)640, 21}};
    for (size_t c = 0; c < sizeof c8 / sizeof c8[0]; c++) {
        t = rt1(c8[c].op, KILN_DTYPE_INT8, ks(2, 2, 2), 1);
        set_ints(&t, "axes", a1, 1);
        in[0] = x8;
        rt_run(&t, in, &(kiln_shape){.rank = 2, .dims = {2, 1}});
        assert_int_equal(((int8_t *)t.out[0].data)[0], c8[c].w0);
        assert_int_equal(((int8_t *)t.out[0].data)[1], c8[c].w1);
        rt_free(&t);
    }
    /* uint64: unsigned order */
    const uint64_t xu[3] = {1, UINT64_MAX, 5};
    t = rt1(KILN_OP_REDUCEMAX, KILN_DTYPE_UINT64, ks(1, 3), 1);
    in[0] = xu;
    rt_run(&t, in, NULL);
    assert_true(((uint64_t *)t.out[0].data)[0] == UINT64_MAX);
    rt_free(&t);
    t = rt1(KILN_OP_REDUCEMIN, KILN_DTYPE_UINT64, ks(1, 3), 1);
    rt_run(&t, in, NULL);
    assert_true(((uint64_t *)t.out[0].data)[0] == 1);
    rt_free(&t);
    /* int64 L2 truncates: sqrt(3^2 + 4^2 + 1) = 5.09.. -> 5; sumsquare exact */
    const int64_t x64[3] = {3, -4, 1};
    t = rt1(KILN_OP_REDUCEL2, KILN_DTYPE_INT64, ks(1, 3), 1);
    in[0] = x64;
    rt_run(&t, in, NULL);
    assert_int_equal(((int64_t *)t.out[0].data)[0], 5);
    rt_free(&t);
    t = rt1(KILN_OP_REDUCESUMSQUARE, KILN_DTYPE_INT64, ks(1, 3), 1);
    rt_run(&t, in, NULL);
    assert_int_equal(((int64_t *)t.out[0].data)[0], 26);
    rt_free(&t);
}

/* float16: 1.0 + 2.5 = 3.5 (0x3c00 + 0x4100 = 0x4300), max of -2 and 0.5. */
static void test_reduce_f16(void **state)
{
    (void)state;
    const uint16_t x[2] = {0x3c00, 0x4100};
    rt t = rt1(KILN_OP_REDUCESUM, KILN_DTYPE_FLOAT16, ks(1, 2), 1);
    const void *in[1] = {x};
    rt_run(&t, in, NULL);
    assert_int_equal(((uint16_t *)t.out[0].data)[0], 0x4300);
    rt_free(&t);
    const uint16_t y[2] = {0xc000, 0x3800};
    t = rt1(KILN_OP_REDUCEMAX, KILN_DTYPE_FLOAT16, ks(1, 2), 1);
    in[0] = y;
    rt_run(&t, in, NULL);
    assert_int_equal(((uint16_t *)t.out[0].data)[0], 0x3800);
    rt_free(&t);
}

/* ---- ArgMax / ArgMin ----------------------------------------------------- */

static void arg_case(kiln_op op, kiln_dtype dt, const void *x, kiln_shape xs, int64_t axis,
                     int keepdims, int last, kiln_shape want_shape, const int64_t *want)
{
    rt t = rt1(op, dt, xs, 1);
    set_int(&t, "axis", axis);
    if (keepdims >= 0)
        set_int(&t, "keepdims", keepdims);
    if (last >= 0)
        set_int(&t, "select_last_index", last);
    const void *in[1] = {x};
    rt_run(&t, in, &want_shape);
    assert_int_equal(t.out[0].dtype, KILN_DTYPE_INT64);
    expect_i64(t.out[0].data, want, kiln_shape_numel(&want_shape));
    rt_free(&t);
}

static void test_argreduce(void **state)
{
    (void)state;
    const float x[6] = {1, 5, 5, 7, 2, 7};
    kiln_shape xs = ks(2, 2, 3);
    arg_case(KILN_OP_ARGMAX, KILN_DTYPE_FLOAT32, x, xs, 1, -1, -1, ks(2, 2, 1),
             (int64_t[]){1, 0});
    arg_case(KILN_OP_ARGMAX, KILN_DTYPE_FLOAT32, x, xs, -1, 0, 1, ks(1, 2), (int64_t[]){2, 2});
    arg_case(KILN_OP_ARGMIN, KILN_DTYPE_FLOAT32, x, xs, 1, 0, 0, ks(1, 2), (int64_t[]){0, 1});
    arg_case(KILN_OP_ARGMIN, KILN_DTYPE_FLOAT32, x, xs, 1, 0, 1, ks(1, 2), (int64_t[]){0, 1});
    arg_case(KILN_OP_ARGMAX, KILN_DTYPE_FLOAT32, x, xs, 0, 0, 0, ks(1, 3),
             (int64_t[]){1, 0, 1});
    arg_case(KILN_OP_ARGMIN, KILN_DTYPE_FLOAT32, x, xs, 0, 1, 0, ks(2, 1, 3),
             (int64_t[]){0, 1, 0});
    const int64_t xi[4] = {-3, 9, 9, INT64_MIN};
    arg_case(KILN_OP_ARGMAX, KILN_DTYPE_INT64, xi, ks(1, 4), 0, 0, 0, ks(0), (int64_t[]){1});
    arg_case(KILN_OP_ARGMAX, KILN_DTYPE_INT64, xi, ks(1, 4), 0, 0, 1, ks(0), (int64_t[]){2});
    arg_case(KILN_OP_ARGMIN, KILN_DTYPE_INT64, xi, ks(1, 4), 0, 1, 0, ks(1, 1), (int64_t[]){3});
    const uint8_t xu[3] = {200, 7, 255};
    arg_case(KILN_OP_ARGMAX, KILN_DTYPE_UINT8, xu, ks(1, 3), 0, 0, 0, ks(0), (int64_t[]){2});
    const double xd[3] = {1, NAN, 3};
    arg_case(KILN_OP_ARGMAX, KILN_DTYPE_FLOAT64, xd, ks(1, 3), 0, 0, 0, ks(0), (int64_t[]){1});
}

/* ---- CumSum -------------------------------------------------------------- */

static void cumsum_case(kiln_dtype dt, const void *x, kiln_shape xs, int64_t axis, int excl,
                        int rev, const double *want)
{
    rt t = rt1(KILN_OP_CUMSUM, dt, xs, 1);
    set_int(&t, "axis", axis);
    if (excl >= 0)
        set_int(&t, "exclusive", excl);
    if (rev >= 0)
        set_int(&t, "reverse", rev);
    const void *in[1] = {x};
    rt_run(&t, in, &xs);
    int64_t n = kiln_shape_numel(&xs);
    double got[16] = {0};
    for (int64_t i = 0; i < n; i++) {
        if (dt == KILN_DTYPE_FLOAT64)
            got[i] = ((double *)t.out[0].data)[i];
        else if (dt == KILN_DTYPE_INT32)
            got[i] = ((int32_t *)t.out[0].data)[i];
        else
            got[i] = ((float *)t.out[0].data)[i];
    }
    expect_f64(got, want, n, 0);
    rt_free(&t);
}

static void test_cumsum(void **state)
{
    (void)state;
    const double x[4] = {1, 2, 3, 4};
    kiln_shape s4 = ks(1, 4);
    cumsum_case(KILN_DTYPE_FLOAT64, x, s4, 0, -1, -1, (double[]){1, 3, 6, 10});
    cumsum_case(KILN_DTYPE_FLOAT64, x, s4, 0, 1, 0, (double[]){0, 1, 3, 6});
    cumsum_case(KILN_DTYPE_FLOAT64, x, s4, -1, 0, 1, (double[]){10, 9, 7, 4});
    cumsum_case(KILN_DTYPE_FLOAT64, x, s4, 0, 1, 1, (double[]){9, 7, 4, 0});
    const float y[6] = {1, 2, 3, 4, 5, 6};
    kiln_shape s23 = ks(2, 2, 3);
    cumsum_case(KILN_DTYPE_FLOAT32, y, s23, 0, 0, 0, (double[]){1, 2, 3, 5, 7, 9});
    cumsum_case(KILN_DTYPE_FLOAT32, y, s23, -1, 0, 0, (double[]){1, 3, 6, 4, 9, 15});
    cumsum_case(KILN_DTYPE_FLOAT32, y, s23, 1, 1, 1, (double[]){5, 3, 0, 11, 6, 0});
    const int32_t z[3] = {INT32_MAX, 1, 5};
    cumsum_case(KILN_DTYPE_INT32, z, ks(1, 3), 0, 0, 0,
                (double[]){INT32_MAX, (double)INT32_MIN, (double)INT32_MIN + 5});
}

/* ---- TopK ---------------------------------------------------------------- */

static void topk_case(kiln_dtype dt, const void *x, kiln_shape xs, int64_t k, int64_t axis,
                      int largest, kiln_shape want_shape, const double *want_v,
                      const int64_t *want_i)
{
    rt t = rt1(KILN_OP_TOPK, dt, xs, 2);
    set_int(&t, "k", k);
    set_int(&t, "axis", axis);
    if (largest >= 0)
        set_int(&t, "largest", largest);
    const void *in[1] = {x};
    rt_run(&t, in, &want_shape);
    assert_true(kiln_shape_equal(&t.out[1].shape, &want_shape));
    assert_int_equal(t.out[1].dtype, KILN_DTYPE_INT64);
    int64_t n = kiln_shape_numel(&want_shape);
    double got[16] = {0};
    for (int64_t i = 0; i < n; i++)
        got[i] = dt == KILN_DTYPE_INT64 ? (double)((int64_t *)t.out[0].data)[i]
                                        : ((float *)t.out[0].data)[i];
    expect_f64(got, want_v, n, 0);
    expect_i64(t.out[1].data, want_i, n);
    rt_free(&t);
}

static void test_topk(void **state)
{
    (void)state;
    const float x[8] = {3, 1, 3, 2, 0, 5, 5, 5};
    kiln_shape xs = ks(2, 2, 4);
    topk_case(KILN_DTYPE_FLOAT32, x, xs, 2, -1, -1, ks(2, 2, 2), (double[]){3, 3, 5, 5},
              (int64_t[]){0, 2, 1, 2});
    topk_case(KILN_DTYPE_FLOAT32, x, xs, 3, 1, 0, ks(2, 2, 3), (double[]){1, 2, 3, 0, 5, 5},
              (int64_t[]){1, 3, 0, 0, 1, 2});
    topk_case(KILN_DTYPE_FLOAT32, x, xs, 1, 0, 1, ks(2, 1, 4), (double[]){3, 5, 5, 5},
              (int64_t[]){0, 1, 1, 1});
    topk_case(KILN_DTYPE_FLOAT32, x, xs, 4, 1, 1, ks(2, 2, 4),
              (double[]){3, 3, 2, 1, 5, 5, 5, 0}, (int64_t[]){0, 2, 3, 1, 1, 2, 3, 0});
    const float nanx[3] = {1, NAN, 2};
    rt t = rt1(KILN_OP_TOPK, KILN_DTYPE_FLOAT32, ks(1, 3), 2);
    set_int(&t, "k", 2);
    const void *in[1] = {nanx};
    rt_run(&t, in, NULL);
    assert_true(isnan(((float *)t.out[0].data)[0]));
    assert_int_equal(((int64_t *)t.out[1].data)[0], 1);
    assert_int_equal(((int64_t *)t.out[1].data)[1], 2);
    rt_free(&t);
    const int64_t xi[5] = {-1, 7, INT64_MIN, 7, 0};
    topk_case(KILN_DTYPE_INT64, xi, ks(1, 5), 3, 0, 1, ks(1, 3), (double[]){7, 7, 0},
              (int64_t[]){1, 3, 4});
    topk_case(KILN_DTYPE_INT64, xi, ks(1, 5), 2, 0, 0, ks(1, 2),
              (double[]){(double)INT64_MIN, -1}, (int64_t[]){2, 0});
    topk_case(KILN_DTYPE_INT64, xi, ks(1, 5), 0, 0, 0, ks(1, 0), NULL, NULL);
}

/* A contiguous float32 lane (inner 1) takes topk_lane_f32; a strided one
 * (inner > 1) the general loop: both must give the same values and
 * indices, ties (values from a small set) and NaNs included. */
static void test_topk_lanes(void **state)
{
    (void)state;
    enum { L = 300 };
    float x[2 * L], xt[2 * L];
    uint64_t r = 12345;
    for (int i = 0; i < 2 * L; i++) {
        r = r * 6364136223846793005ULL + 1442695040888963407ULL;
        int v = (int)((r >> 33) % 23);
        x[i] = v == 22 ? NAN : (float)(v - 11) * 0.5f;
    }
    for (int lane = 0; lane < 2; lane++)
        for (int j = 0; j < L; j++)
            xt[j * 2 + lane] = x[lane * L + j];
    static const int64_t kk[] = {1, 7, 150, L};
    for (int largest = 0; largest < 2; largest++) {
        for (int ki = 0; ki < 4; ki++) {
            int64_t k = kk[ki];
            rt a = rt1(KILN_OP_TOPK, KILN_DTYPE_FLOAT32, ks(2, 2, L), 2);
            set_int(&a, "k", k);
            set_int(&a, "axis", 1);
            set_int(&a, "largest", largest);
            const void *ia[1] = {x};
            rt_run(&a, ia, NULL);
            rt b = rt1(KILN_OP_TOPK, KILN_DTYPE_FLOAT32, ks(2, L, 2), 2);
            set_int(&b, "k", k);
            set_int(&b, "axis", 0);
            set_int(&b, "largest", largest);
            const void *ib[1] = {xt};
            rt_run(&b, ib, NULL);
            const float *av = a.out[0].data, *bv = b.out[0].data;
            const int64_t *ai = a.out[1].data, *bi = b.out[1].data;
            for (int lane = 0; lane < 2; lane++)
                for (int64_t q = 0; q < k; q++) {
                    float va = av[lane * k + q], vb = bv[q * 2 + lane];
                    if (ai[lane * k + q] != bi[q * 2 + lane] ||
                        (memcmp(&va, &vb, sizeof va) != 0))
                        fail_msg("TopK largest=%d k=%lld lane %d position %lld: contiguous "
                                 "%g (index %lld), strided %g (index %lld)",
                                 largest, (long long)k, lane, (long long)q, (double)va,
                                 (long long)ai[lane * k + q], (double)vb,
                                 (long long)bi[q * 2 + lane]);
                }
            rt_free(&a);
            rt_free(&b);
        }
    }
}

/* ---- Einsum -------------------------------------------------------------- */

static rt einsum_run(const char *eq, int n, const kiln_shape *shapes, const double *const *data)
{
    kiln_dtype dts[4] = {KILN_DTYPE_FLOAT64, KILN_DTYPE_FLOAT64, KILN_DTYPE_FLOAT64,
                         KILN_DTYPE_FLOAT64};
    rt t = rt_build(KILN_OP_EINSUM, n, dts, shapes, 1);
    assert_int_equal(kiln_node_set_string(t.g, t.node, "equation", eq), KILN_OK);
    const void *in[4];
    for (int i = 0; i < n; i++)
        in[i] = data[i];
    rt_run(&t, in, NULL);
    return t;
}

static void fill_seq(double *p, int n, double scale)
{
    for (int i = 0; i < n; i++)
        p[i] = scale * (i + 1) + (i % 3) * 0.25;
}

static void check_shape(const rt *t, kiln_shape want)
{
    if (!kiln_shape_equal(&t->out[0].shape, &want)) {
        char a[128], b[128];
        fail_msg("shape %s, expected %s", kiln_shape_str(&t->out[0].shape, a, sizeof a),
                 kiln_shape_str(&want, b, sizeof b));
    }
}

static void test_einsum_basic(void **state)
{
    (void)state;
    double a[6], b[12], v[3], w[3];
    fill_seq(a, 6, 1.0);
    fill_seq(b, 12, -0.5);
    fill_seq(v, 3, 2.0);
    fill_seq(w, 3, 0.5);
    /* transpose: (2, 3) -> (3, 2) */
    rt t = einsum_run("ij->ji", 1, (kiln_shape[]){ks(2, 2, 3)}, (const double *[]){a});
    check_shape(&t, ks(2, 3, 2));
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            assert_true(((double *)t.out[0].data)[j * 2 + i] == a[i * 3 + j]);
    rt_free(&t);
    /* row sums */
    t = einsum_run("ij->i", 1, (kiln_shape[]){ks(2, 2, 3)}, (const double *[]){a});
    check_shape(&t, ks(1, 2));
    expect_f64(t.out[0].data, (double[]){a[0] + a[1] + a[2], a[3] + a[4] + a[5]}, 2, 1e-15);
    rt_free(&t);
    /* inner product, implicit scalar output */
    t = einsum_run("i,i", 2, (kiln_shape[]){ks(1, 3), ks(1, 3)}, (const double *[]){v, w});
    check_shape(&t, ks(0));
    expect_f64(t.out[0].data, (double[]){v[0] * w[0] + v[1] * w[1] + v[2] * w[2]}, 1, 1e-15);
    rt_free(&t);
    /* matmul, implicit output "ik"; spaces */
    t = einsum_run(" ij , jk ", 2, (kiln_shape[]){ks(2, 2, 3), ks(2, 3, 4)},
                   (const double *[]){a, b});
    check_shape(&t, ks(2, 2, 4));
    double mm[8];
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 4; k++) {
            mm[i * 4 + k] = 0;
            for (int j = 0; j < 3; j++)
                mm[i * 4 + k] += a[i * 3 + j] * b[j * 4 + k];
        }
    expect_f64(t.out[0].data, mm, 8, 1e-14);
    rt_free(&t);
    /* implicit output order is alphabetical: "ba" -> "ab" is a transpose */
    t = einsum_run("ba", 1, (kiln_shape[]){ks(2, 2, 3)}, (const double *[]){a});
    check_shape(&t, ks(2, 3, 2));
    assert_true(((double *)t.out[0].data)[1] == a[3]);
    rt_free(&t);
    /* trace */
    double sq[9];
    fill_seq(sq, 9, 1.0);
    t = einsum_run("ii", 1, (kiln_shape[]){ks(2, 3, 3)}, (const double *[]){sq});
    check_shape(&t, ks(0));
    expect_f64(t.out[0].data, (double[]){sq[0] + sq[4] + sq[8]}, 1, 1e-15);
    rt_free(&t);
    /* outer product with three operands */
    t = einsum_run("i,j,i->ij", 3, (kiln_shape[]){ks(1, 3), ks(1, 3), ks(1, 3)},
                   (const double *[]){v, w, v});
    check_shape(&t, ks(2, 3, 3));
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            expect_f64(&((double *)t.out[0].data)[i * 3 + j], (double[]){v[i] * w[j] * v[i]}, 1,
                       1e-15);
    rt_free(&t);
}

static void test_einsum_batch(void **state)
{
    (void)state;
    double a[2 * 3 * 3], b[2 * 3 * 2];
    fill_seq(a, 18, 0.75);
    fill_seq(b, 12, -1.25);
    /* batch matmul */
    rt t = einsum_run("bij, bjk -> bik", 2, (kiln_shape[]){ks(3, 2, 3, 3), ks(3, 2, 3, 2)},
                      (const double *[]){a, b});
    check_shape(&t, ks(3, 2, 3, 2));
    double want[12];
    for (int n = 0; n < 2; n++)
        for (int i = 0; i < 3; i++)
            for (int k = 0; k < 2; k++) {
                double s = 0;
                for (int j = 0; j < 3; j++)
                    s += a[n * 9 + i * 3 + j] * b[n * 6 + j * 2 + k];
                want[n * 6 + i * 2 + k] = s;
            }
    expect_f64(t.out[0].data, want, 12, 1e-14);
    rt_free(&t);
    /* batch diagonal with ellipsis */
    t = einsum_run("...ii ->...i", 1, (kiln_shape[]){ks(3, 2, 3, 3)}, (const double *[]){a});
    check_shape(&t, ks(2, 2, 3));
    for (int n = 0; n < 2; n++)
        for (int i = 0; i < 3; i++)
            assert_true(((double *)t.out[0].data)[n * 3 + i] == a[n * 9 + i * 3 + i]);
    rt_free(&t);
    /* ellipsis broadcasting: (2, 1, 2, 3) x (3, 3, 2) -> (2, 3, 2, 2) */
    double p[12], q[18];
    fill_seq(p, 12, 1.5);
    fill_seq(q, 18, 0.25);
    t = einsum_run("...ij,...jk->...ik", 2, (kiln_shape[]){ks(4, 2, 1, 2, 3), ks(3, 3, 3, 2)},
                   (const double *[]){p, q});
    check_shape(&t, ks(4, 2, 3, 2, 2));
    double wb[24];
    for (int x = 0; x < 2; x++)
        for (int y = 0; y < 3; y++)
            for (int i = 0; i < 2; i++)
                for (int k = 0; k < 2; k++) {
                    double s = 0;
                    for (int j = 0; j < 3; j++)
                        s += p[x * 6 + i * 3 + j] * q[y * 6 + j * 2 + k];
                    wb[((x * 3 + y) * 2 + i) * 2 + k] = s;
                }
    expect_f64(t.out[0].data, wb, 24, 1e-14);
    rt_free(&t);
    /* ellipsis summed away when absent from the output */
    t = einsum_run("...i->i", 1, (kiln_shape[]){ks(2, 3, 2)}, (const double *[]){b});
    check_shape(&t, ks(1, 2));
    expect_f64(t.out[0].data, (double[]){b[0] + b[2] + b[4], b[1] + b[3] + b[5]}, 2, 1e-15);
    rt_free(&t);
}

static void test_einsum_int(void **state)
{
    (void)state;
    const int32_t a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
    kiln_dtype dts[2] = {KILN_DTYPE_INT32, KILN_DTYPE_INT32};
    kiln_shape sh[2] = {ks(2, 2, 2), ks(2, 2, 2)};
    rt t = rt_build(KILN_OP_EINSUM, 2, dts, sh, 1);
    assert_int_equal(kiln_node_set_string(t.g, t.node, "equation", "ij,jk->ik"), KILN_OK);
    const void *in[2] = {a, b};
    rt_run(&t, in, NULL);
    const int32_t want[4] = {19, 22, 43, 50};
    for (int i = 0; i < 4; i++)
        assert_int_equal(((int32_t *)t.out[0].data)[i], want[i]);
    rt_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reduce_f32),   cmocka_unit_test(test_reduce_special),
        cmocka_unit_test(test_reduce_empty), cmocka_unit_test(test_reduce_noop),
        cmocka_unit_test(test_reduce_int),   cmocka_unit_test(test_reduce_f16),
        cmocka_unit_test(test_argreduce),    cmocka_unit_test(test_cumsum),
        cmocka_unit_test(test_topk),         cmocka_unit_test(test_topk_lanes),         cmocka_unit_test(test_einsum_basic),
        cmocka_unit_test(test_einsum_batch), cmocka_unit_test(test_einsum_int),
    };
    return cmocka_run_group_tests_name("ops/reduce", tests, NULL, NULL);
}
