/* tests/ops/test_norm2.c: the reference LogSoftmax, Hardmax,
 * InstanceNormalization, LRN, MeanVarianceNormalization, LpNormalization,
 * NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss, and LayerNormalization's
 * Mean/InvStdDev outputs, against values worked out by hand (in the comments)
 * or against formulas evaluated here in double, written independently of the
 * kernels (e.g. log-softmax as log(exp(x) / sum(exp)) on small inputs, LRN's
 * window from explicit channel lists). float64 data and int32 targets are
 * exercised too, and the run-time error of an out-of-range target.
 *
 * The helper builds a one-node graph whose inputs have any dtype, runs shape
 * inference, allocates every output (pre-filled with a sentinel so unwritten
 * cells show) and calls the op's reference kernel. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/graph.h"
#include "test_support.h"

#define MAX_IO 4
#define SENT 1.2345e30

typedef struct tin {
    kiln_dtype dt;
    kiln_shape sh; /* rank -1: absent optional input */
    const void *data;
} tin;

typedef struct one {
    kiln_graph *g;
    int node;
    int n_in, n_out;
    tin in[MAX_IO];
    kiln_tensor out[MAX_IO];
} one;

static one mk(kiln_op op, int n_in, const tin *ins, int n_out)
{
    one t = {.n_in = n_in, .n_out = n_out};
    assert_int_equal(kiln_graph_create(&t.g), KILN_OK);
    int ids[MAX_IO];
    for (int i = 0; i < n_in; i++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", i);
        t.in[i] = ins[i];
        ids[i] = ins[i].sh.rank < 0 ? -1 : kiln_graph_add_input(t.g, name, ins[i].dt, &ins[i].sh);
    }
    t.node = kiln_graph_add_node(t.g, op, "node", ids, n_in, n_out);
    assert_true(t.node >= 0);
    return t;
}

/* Infers and runs; returns the kernel's status (inference must succeed). */
static kiln_status run(one *t, kiln_error *err)
{
    kiln_status s = kiln_graph_infer_shapes(t->g, err);
    if (s != KILN_OK)
        fail_msg("inference failed: %s", err->msg);
    const kiln_node *n = kiln_graph_node(t->g, t->node);
    kiln_tensor tins[MAX_IO];
    const kiln_tensor *pin[MAX_IO];
    kiln_tensor *pout[MAX_IO];
    for (int i = 0; i < t->n_in; i++) {
        pin[i] = NULL;
        if (t->in[i].sh.rank < 0)
            continue;
        tins[i] = (kiln_tensor){.dtype = t->in[i].dt, .shape = t->in[i].sh,
                                .data = (void *)t->in[i].data};
        pin[i] = &tins[i];
    }
    for (int k = 0; k < t->n_out; k++) {
        const kiln_value *v = kiln_graph_value(t->g, n->outputs[k]);
        assert_int_equal(kiln_tensor_alloc(&t->out[k], v->dtype, &v->shape, NULL), KILN_OK);
        int64_t cnt = kiln_shape_numel(&v->shape);
        for (int64_t i = 0; i < cnt; i++) {
            if (v->dtype == KILN_DTYPE_FLOAT32)
                ((float *)t->out[k].data)[i] = (float)SENT;
            else if (v->dtype == KILN_DTYPE_FLOAT64)
                ((double *)t->out[k].data)[i] = SENT;
        }
        pout[k] = &t->out[k];
    }
    return kiln_op_get(n->op)->ref(n, pin, pout, err);
}

static void run_ok(one *t)
{
    kiln_error err = {0};
    kiln_status s = run(t, &err);
    if (s != KILN_OK)
        fail_msg("kernel failed: %s", err.msg);
}

static void done(one *t)
{
    for (int k = 0; k < t->n_out; k++)
        kiln_tensor_release(&t->out[k]);
    kiln_graph_destroy(t->g);
}

static void expect_shape(const kiln_tensor *o, kiln_shape want)
{
    char a[96], b[96];
    if (!kiln_shape_equal(&o->shape, &want))
        fail_msg("output shape %s, expected %s", kiln_shape_str(&o->shape, a, sizeof a),
                 kiln_shape_str(&want, b, sizeof b));
}

static tin f32(kiln_shape sh, const float *d)
{
    return (tin){KILN_DTYPE_FLOAT32, sh, d};
}

/* ---- LogSoftmax / Hardmax -------------------------------------------------- */

/* log_softmax([1, 2, 3]) = [1, 2, 3] - log(e + e^2 + e^3) = [1, 2, 3] - 3.4076059;
 * the same shifted by 1000 (where exp overflows in float) must give the same. */
static void test_logsoftmax_hand(void **state)
{
    (void)state;
    const float want[3] = {-2.4076059f, -1.4076059f, -0.4076059f};
    const float xs[2][3] = {{1, 2, 3}, {1001, 1002, 1003}};
    for (int c = 0; c < 2; c++) {
        tin in = f32(ks(1, 3), xs[c]);
        one t = mk(KILN_OP_LOGSOFTMAX, 1, &in, 1);
        run_ok(&t);
        assert_allclose(t.out[0].data, want, 3, 1e-5, 1e-6);
        done(&t);
    }
}

/* (2, 3, 4) along each axis vs log(exp(x_i) / sum_j exp(x_j)) in double (inputs
 * small enough that no shift is needed). */
static void test_logsoftmax_axes(void **state)
{
    (void)state;
    float x[24];
    kt_fill_random(x, 24, 77, -2, 2);
    const int64_t dims[3] = {2, 3, 4}, strides[3] = {12, 4, 1};
    for (int axis = -3; axis < 3; axis++) {
        int a = axis < 0 ? axis + 3 : axis;
        tin in = f32(ks(3, 2, 3, 4), x);
        one t = mk(KILN_OP_LOGSOFTMAX, 1, &in, 1);
        kiln_node_set_int(t.g, t.node, "axis", axis);
        run_ok(&t);
        float ref[24];
        for (int i = 0; i < 24; i++) {
            int64_t coord = (i / strides[a]) % dims[a], start = i - coord * strides[a];
            double sum = 0;
            for (int64_t j = 0; j < dims[a]; j++)
                sum += exp((double)x[start + j * strides[a]]);
            ref[i] = (float)log(exp((double)x[i]) / sum);
        }
        assert_allclose(t.out[0].data, ref, 24, 1e-5, 1e-6);
        done(&t);
    }
}

/* float64 in, float64 out: log_softmax([0, ln 3]) = [ln(1/4), ln(3/4)]. */
static void test_logsoftmax_f64(void **state)
{
    (void)state;
    const double x[2] = {0, log(3.0)};
    tin in = {KILN_DTYPE_FLOAT64, ks(1, 2), x};
    one t = mk(KILN_OP_LOGSOFTMAX, 1, &in, 1);
    run_ok(&t);
    assert_int_equal(t.out[0].dtype, KILN_DTYPE_FLOAT64);
    const double *y = t.out[0].data;
    assert_true(fabs(y[0] - log(0.25)) < 1e-12 && fabs(y[1] - log(0.75)) < 1e-12);
    done(&t);
    /* Softmax takes float64 too: [1/4, 3/4] */
    t = mk(KILN_OP_SOFTMAX, 1, &in, 1);
    run_ok(&t);
    y = t.out[0].data;
    assert_true(fabs(y[0] - 0.25) < 1e-12 && fabs(y[1] - 0.75) < 1e-12);
    done(&t);
}

/* [[3, 1, 3], [0, 5, -1]]: along the last axis the first maximum wins (ties
 * at 0 and 2 -> 0); along axis 0 column-wise. */
static void test_hardmax_hand(void **state)
{
    (void)state;
    const float x[6] = {3, 1, 3, 0, 5, -1};
    const float want_last[6] = {1, 0, 0, 0, 1, 0}, want_0[6] = {1, 0, 1, 0, 1, 0};
    tin in = f32(ks(2, 2, 3), x);
    one t = mk(KILN_OP_HARDMAX, 1, &in, 1);
    run_ok(&t);
    assert_allclose(t.out[0].data, want_last, 6, 0, 0);
    done(&t);
    t = mk(KILN_OP_HARDMAX, 1, &in, 1);
    kiln_node_set_int(t.g, t.node, "axis", 0);
    run_ok(&t);
    assert_allclose(t.out[0].data, want_0, 6, 0, 0);
    done(&t);
}

/* ---- LayerNormalization's optional outputs -------------------------------- */

/* X [[1, 3], [2, 6]], axis -1, eps 0: row 0 mean 2, var 1 -> inv 1; row 1 mean
 * 4, var 4 -> inv 0.5; Y = [[-1, 1], [-1, 1]] * Scale [2, 1] + B [0, 10]. */
static void test_layernorm_stats(void **state)
{
    (void)state;
    const float x[4] = {1, 3, 2, 6}, sc[2] = {2, 1}, b[2] = {0, 10};
    tin ins[3] = {f32(ks(2, 2, 2), x), f32(ks(1, 2), sc), f32(ks(1, 2), b)};
    one t = mk(KILN_OP_LAYERNORM, 3, ins, 3);
    kiln_node_set_float(t.g, t.node, "epsilon", 0.0f);
    run_ok(&t);
    const float wy[4] = {-2, 11, -2, 11}, wm[2] = {2, 4}, wi[2] = {1, 0.5f};
    expect_shape(&t.out[1], ks(2, 2, 1));
    expect_shape(&t.out[2], ks(2, 2, 1));
    assert_allclose(t.out[0].data, wy, 4, 1e-6, 1e-6);
    assert_allclose(t.out[1].data, wm, 2, 1e-6, 0);
    assert_allclose(t.out[2].data, wi, 2, 1e-6, 0);
    done(&t);
    /* axis 0 over everything: mean 3, var (4 + 0 + 1 + 9) / 4 = 3.5, shape [1, 1] */
    const float s4[4] = {1, 1, 1, 1};
    tin i2[2] = {f32(ks(2, 2, 2), x), f32(ks(2, 2, 2), s4)};
    t = mk(KILN_OP_LAYERNORM, 2, i2, 2);
    kiln_node_set_int(t.g, t.node, "axis", 0);
    kiln_node_set_float(t.g, t.node, "epsilon", 0.0f);
    run_ok(&t);
    expect_shape(&t.out[1], ks(2, 1, 1));
    const float m3[1] = {3};
    assert_allclose(t.out[1].data, m3, 1, 1e-6, 0);
    float wy2[4];
    for (int i = 0; i < 4; i++)
        wy2[i] = (float)((x[i] - 3.0) / sqrt(3.5));
    assert_allclose(t.out[0].data, wy2, 4, 1e-5, 1e-6);
    done(&t);
}

/* ---- InstanceNormalization -------------------------------------------------- */

/* ONNX's example: x = [[[[-1, 0, 1]], [[2, 3, 4]]]], scale [1, 1.5], B [0, 1],
 * eps 1e-5: each channel has var 2/3, so 1/sqrt(2/3 + 1e-5) = 1.2247357:
 * channel 0 -> [-1.2247357, 0, 1.2247357], channel 1 -> 1.5 * [-1.22, 0, 1.22] + 1. */
static void test_instancenorm_hand(void **state)
{
    (void)state;
    const float x[6] = {-1, 0, 1, 2, 3, 4}, sc[2] = {1, 1.5f}, b[2] = {0, 1};
    tin ins[3] = {f32(ks(4, 1, 2, 1, 3), x), f32(ks(1, 2), sc), f32(ks(1, 2), b)};
    one t = mk(KILN_OP_INSTANCENORM, 3, ins, 1);
    run_ok(&t);
    const float want[6] = {-1.2247357f, 0, 1.2247357f, -0.8371036f, 1, 2.8371036f};
    assert_allclose(t.out[0].data, want, 6, 1e-5, 1e-6);
    done(&t);
}

/* (2, 3, 5) random with eps 0.1 against mean/var per (n, c) computed here. */
static void test_instancenorm_random(void **state)
{
    (void)state;
    float x[30], sc[3], b[3], ref[30];
    kt_fill_random(x, 30, 5, -3, 3);
    kt_fill_random(sc, 3, 6, 0.5f, 2);
    kt_fill_random(b, 3, 7, -1, 1);
    for (int g = 0; g < 6; g++) {
        double s1 = 0, s2 = 0;
        for (int i = 0; i < 5; i++) {
            s1 += x[g * 5 + i];
            s2 += (double)x[g * 5 + i] * x[g * 5 + i];
        }
        double mean = s1 / 5, var = s2 / 5 - mean * mean;
        for (int i = 0; i < 5; i++)
            ref[g * 5 + i] =
                (float)(sc[g % 3] * (x[g * 5 + i] - mean) / sqrt(var + 0.1) + b[g % 3]);
    }
    tin ins[3] = {f32(ks(3, 2, 3, 5), x), f32(ks(1, 3), sc), f32(ks(1, 3), b)};
    one t = mk(KILN_OP_INSTANCENORM, 3, ins, 1);
    kiln_node_set_float(t.g, t.node, "epsilon", 0.1f);
    run_ok(&t);
    assert_allclose(t.out[0].data, ref, 30, 1e-5, 1e-6);
    done(&t);
}

/* ---- LRN --------------------------------------------------------------------- */

/* X (1, 3, 1, 1) = [1, 2, 3].
 * size 3, alpha 3 (alpha/size 1), beta 1, bias 1: windows {0,1}, {0,1,2},
 * {1,2}: sums 5, 14, 13 -> [1/6, 2/15, 3/14].
 * size 2, alpha 2, beta 1, bias 0: windows {0,1}, {1,2}, {2} (floor 0 before,
 * ceil 1 after): sums 5, 13, 9 -> [1/5, 2/13, 3/9]. */
static void test_lrn_hand(void **state)
{
    (void)state;
    const float x[3] = {1, 2, 3};
    tin in = f32(ks(4, 1, 3, 1, 1), x);
    one t = mk(KILN_OP_LRN, 1, &in, 1);
    kiln_node_set_int(t.g, t.node, "size", 3);
    kiln_node_set_float(t.g, t.node, "alpha", 3);
    kiln_node_set_float(t.g, t.node, "beta", 1);
    kiln_node_set_float(t.g, t.node, "bias", 1);
    run_ok(&t);
    const float w3[3] = {1.0f / 6, 2.0f / 15, 3.0f / 14};
    assert_allclose(t.out[0].data, w3, 3, 1e-6, 0);
    done(&t);
    t = mk(KILN_OP_LRN, 1, &in, 1);
    kiln_node_set_int(t.g, t.node, "size", 2);
    kiln_node_set_float(t.g, t.node, "alpha", 2);
    kiln_node_set_float(t.g, t.node, "beta", 1);
    kiln_node_set_float(t.g, t.node, "bias", 0);
    run_ok(&t);
    const float w2[3] = {1.0f / 5, 2.0f / 13, 3.0f / 9};
    assert_allclose(t.out[0].data, w2, 3, 1e-6, 0);
    done(&t);
}

/* (2, 5, 2, 2) random with the defaults (alpha 1e-4, beta 0.75, bias 1) and
 * size 3 (window c-1..c+1), plus a large alpha so the sum matters. */
static void test_lrn_random(void **state)
{
    (void)state;
    enum { N = 2, C = 5, S = 4 };
    float x[N * C * S], ref[N * C * S];
    kt_fill_random(x, N * C * S, 11, -2, 2);
    const float alphas[2] = {1e-4f, 0.9f};
    for (int a = 0; a < 2; a++) {
        for (int nb = 0; nb < N; nb++)
            for (int c = 0; c < C; c++)
                for (int i = 0; i < S; i++) {
                    double sq = 0;
                    const int win[3] = {c - 1, c, c + 1};
                    for (int k = 0; k < 3; k++)
                        if (win[k] >= 0 && win[k] < C) {
                            double v = x[(nb * C + win[k]) * S + i];
                            sq += v * v;
                        }
                    int at = (nb * C + c) * S + i;
                    ref[at] = (float)(x[at] / pow(1.0 + alphas[a] / 3.0 * sq, 0.75));
                }
        tin in = f32(ks(4, N, C, 2, 2), x);
        one t = mk(KILN_OP_LRN, 1, &in, 1);
        kiln_node_set_int(t.g, t.node, "size", 3);
        if (a == 1)
            kiln_node_set_float(t.g, t.node, "alpha", alphas[a]);
        run_ok(&t);
        assert_allclose(t.out[0].data, ref, N * C * S, 1e-5, 1e-6);
        done(&t);
    }
}

/* ---- MeanVarianceNormalization ----------------------------------------------- */

/* (1, 2, 1, 2), default axes [0, 2, 3] (per channel): channel 0 [1, 3] -> mean
 * 2, std 1 -> [-1, 1]; channel 1 [2, 2] -> std 0 -> 0 / 1e-9 = [0, 0].
 * axes [1] on (2, 2) [[1, 3], [5, 9]] -> rows: [-1, 1], [-1, 1]. */
static void test_mvn_hand(void **state)
{
    (void)state;
    const float x[4] = {1, 3, 2, 2};
    tin in = f32(ks(4, 1, 2, 1, 2), x);
    one t = mk(KILN_OP_MVN, 1, &in, 1);
    run_ok(&t);
    const float want[4] = {-1, 1, 0, 0};
    assert_allclose(t.out[0].data, want, 4, 1e-6, 1e-7);
    done(&t);
    const float x2[4] = {1, 3, 5, 9};
    tin in2 = f32(ks(2, 2, 2), x2);
    t = mk(KILN_OP_MVN, 1, &in2, 1);
    const int64_t axes[1] = {-1};
    kiln_node_set_ints(t.g, t.node, "axes", axes, 1);
    run_ok(&t);
    const float want2[4] = {-1, 1, -1, 1};
    assert_allclose(t.out[0].data, want2, 4, 1e-6, 1e-7);
    done(&t);
}

/* (3, 2, 4) over axes [0, 2]: per channel of dim 1, the 12 elements
 * standardized; checked against sums in double. */
static void test_mvn_random(void **state)
{
    (void)state;
    float x[24], ref[24];
    kt_fill_random(x, 24, 21, -1, 3);
    for (int c = 0; c < 2; c++) {
        double s1 = 0, s2 = 0;
        for (int a = 0; a < 3; a++)
            for (int k = 0; k < 4; k++) {
                double v = x[a * 8 + c * 4 + k];
                s1 += v;
                s2 += v * v;
            }
        double mean = s1 / 12, sd = sqrt(s2 / 12 - mean * mean);
        for (int a = 0; a < 3; a++)
            for (int k = 0; k < 4; k++)
                ref[a * 8 + c * 4 + k] = (float)((x[a * 8 + c * 4 + k] - mean) / (sd + 1e-9));
    }
    tin in = f32(ks(3, 3, 2, 4), x);
    one t = mk(KILN_OP_MVN, 1, &in, 1);
    const int64_t axes[2] = {0, 2};
    kiln_node_set_ints(t.g, t.node, "axes", axes, 2);
    run_ok(&t);
    assert_allclose(t.out[0].data, ref, 24, 1e-5, 1e-6);
    done(&t);
}

/* ---- LpNormalization ------------------------------------------------------- */

/* [[3, 4], [0, 0]] with p 2 along the last axis -> [[0.6, 0.8], [0, 0]] (a zero
 * norm gives 0); [[1, -3], [2, 2]] with p 1 along axis 0 -> columns divided by
 * 3 and 5: [[1/3, -3/5], [2/3, 2/5]]. */
static void test_lpnorm_hand(void **state)
{
    (void)state;
    const float x[4] = {3, 4, 0, 0};
    tin in = f32(ks(2, 2, 2), x);
    one t = mk(KILN_OP_LPNORM, 1, &in, 1);
    run_ok(&t);
    const float want[4] = {0.6f, 0.8f, 0, 0};
    assert_allclose(t.out[0].data, want, 4, 1e-6, 0);
    done(&t);
    const float x2[4] = {1, -3, 2, 2};
    tin in2 = f32(ks(2, 2, 2), x2);
    t = mk(KILN_OP_LPNORM, 1, &in2, 1);
    kiln_node_set_int(t.g, t.node, "axis", 0);
    kiln_node_set_int(t.g, t.node, "p", 1);
    run_ok(&t);
    const float want2[4] = {1.0f / 3, -3.0f / 5, 2.0f / 3, 2.0f / 5};
    assert_allclose(t.out[0].data, want2, 4, 1e-6, 0);
    done(&t);
}

/* ---- NegativeLogLikelihoodLoss -------------------------------------------- */

/* input [[-1, -2, -3], [-4, -5, -6]], target [2, 0]: losses [3, 4];
 * sum 7, mean 3.5; weights [0.5, 1, 2]: [6, 2], mean 8 / 2.5 = 3.2;
 * ignore_index 0: [3, 0], mean 3 / 1. */
static const float nll_x[6] = {-1, -2, -3, -4, -5, -6}, nll_w[3] = {0.5f, 1, 2};
static const int64_t nll_t[2] = {2, 0};

static float nll_case(const char *red, bool weights, int64_t ii, int64_t *n_out, float *vals)
{
    tin ins[3] = {f32(ks(2, 2, 3), nll_x), {KILN_DTYPE_INT64, ks(1, 2), nll_t},
                  f32(ks(1, 3), nll_w)};
    one t = mk(KILN_OP_NLLLOSS, weights ? 3 : 2, ins, 1);
    kiln_node_set_string(t.g, t.node, "reduction", red);
    if (ii != 99)
        kiln_node_set_int(t.g, t.node, "ignore_index", ii);
    run_ok(&t);
    *n_out = kiln_shape_numel(&t.out[0].shape);
    memcpy(vals, t.out[0].data, sizeof(float) * (size_t)*n_out);
    float r = vals[0];
    done(&t);
    return r;
}

static void test_nllloss_hand(void **state)
{
    (void)state;
    int64_t cnt;
    float v[4];
    nll_case("none", false, 99, &cnt, v);
    assert_int_equal(cnt, 2);
    assert_true(v[0] == 3 && v[1] == 4);
    assert_true(nll_case("sum", false, 99, &cnt, v) == 7);
    assert_true(fabsf(nll_case("mean", false, 99, &cnt, v) - 3.5f) < 1e-6f);
    nll_case("none", true, 99, &cnt, v);
    assert_true(v[0] == 6 && v[1] == 2);
    assert_true(fabsf(nll_case("mean", true, 99, &cnt, v) - 3.2f) < 1e-6f);
    nll_case("none", false, 0, &cnt, v);
    assert_true(v[0] == 3 && v[1] == 0);
    assert_true(fabsf(nll_case("mean", false, 0, &cnt, v) - 3.0f) < 1e-6f);
    /* weighted and ignored: weights of non-ignored targets only: 6 / 2 */
    assert_true(fabsf(nll_case("mean", true, 0, &cnt, v) - 3.0f) < 1e-6f);
}

/* (N=1, C=2, d1=3) with int32 targets [1, 0, 1], input[0, c, d] = -(10 c + d + 1):
 * losses -input[0, t_d, d] = [11, 2, 13]. */
static void test_nllloss_nd(void **state)
{
    (void)state;
    const float x[6] = {-1, -2, -3, -11, -12, -13};
    const int32_t tg[3] = {1, 0, 1};
    tin ins[2] = {f32(ks(3, 1, 2, 3), x), {KILN_DTYPE_INT32, ks(2, 1, 3), tg}};
    one t = mk(KILN_OP_NLLLOSS, 2, ins, 1);
    kiln_node_set_string(t.g, t.node, "reduction", "none");
    run_ok(&t);
    expect_shape(&t.out[0], ks(2, 1, 3));
    const float want[3] = {11, 2, 13};
    assert_allclose(t.out[0].data, want, 3, 0, 0);
    done(&t);
    /* default reduction mean: (11 + 2 + 13) / 3 */
    t = mk(KILN_OP_NLLLOSS, 2, ins, 1);
    run_ok(&t);
    expect_shape(&t.out[0], ks(0));
    assert_true(fabsf(*(float *)t.out[0].data - 26.0f / 3) < 1e-5f);
    done(&t);
}

/* A target outside [0, C) that is not ignored is a run-time error, not a read
 * out of bounds; the same target equal to ignore_index is fine. */
static void test_nllloss_bad_target(void **state)
{
    (void)state;
    const int64_t bad[2] = {3, 0};
    tin ins[2] = {f32(ks(2, 2, 3), nll_x), {KILN_DTYPE_INT64, ks(1, 2), bad}};
    one t = mk(KILN_OP_NLLLOSS, 2, ins, 1);
    kiln_error err = {0};
    assert_int_equal(run(&t, &err), KILN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "target 3"));
    done(&t);
    t = mk(KILN_OP_NLLLOSS, 2, ins, 1);
    kiln_node_set_int(t.g, t.node, "ignore_index", 3);
    kiln_node_set_string(t.g, t.node, "reduction", "sum");
    run_ok(&t);
    assert_true(*(float *)t.out[0].data == 4); /* only sample 1: -(-4) */
    done(&t);
}

/* ---- SoftmaxCrossEntropyLoss ---------------------------------------------- */

/* scores [[1, 2, 3], [1, 1, 1]] labels [2, 0]: log_prob row 0 =
 * [-2.4076059, -1.4076059, -0.4076059], row 1 = -ln 3 each; losses
 * [0.4076059, 1.0986123]; mean 0.7531091; with weights [2, 1, 1] the
 * mean is (0.4076059 + 2 * 1.0986123) / 3. */
static void test_sce_hand(void **state)
{
    (void)state;
    const float x[6] = {1, 2, 3, 1, 1, 1}, w[3] = {2, 1, 1};
    const int64_t lb[2] = {2, 0};
    tin ins[3] = {f32(ks(2, 2, 3), x), {KILN_DTYPE_INT64, ks(1, 2), lb}, f32(ks(1, 3), w)};
    one t = mk(KILN_OP_SCELOSS, 2, ins, 2);
    kiln_node_set_string(t.g, t.node, "reduction", "none");
    run_ok(&t);
    const float ln3 = 1.0986123f;
    const float wl[2] = {0.4076059f, ln3};
    const float wp[6] = {-2.4076059f, -1.4076059f, -0.4076059f, -ln3, -ln3, -ln3};
    expect_shape(&t.out[0], ks(1, 2));
    expect_shape(&t.out[1], ks(2, 2, 3));
    assert_allclose(t.out[0].data, wl, 2, 1e-5, 0);
    assert_allclose(t.out[1].data, wp, 6, 1e-5, 0);
    done(&t);
    /* one output, mean */
    t = mk(KILN_OP_SCELOSS, 2, ins, 1);
    run_ok(&t);
    assert_true(fabsf(*(float *)t.out[0].data - (0.4076059f + ln3) / 2) < 1e-5f);
    done(&t);
    t = mk(KILN_OP_SCELOSS, 3, ins, 1);
    run_ok(&t);
    assert_true(fabsf(*(float *)t.out[0].data - (0.4076059f + 2 * ln3) / 3) < 1e-5f);
    done(&t);
}

/* float64 scores (N=2, C=4, d1=3), random, labels with one ignored (-1):
 * against -log(exp(x_t) / sum exp(x)) summed here. */
static void test_sce_f64_nd(void **state)
{
    (void)state;
    float xf[24];
    kt_fill_random(xf, 24, 31, -3, 3);
    double x[24];
    for (int i = 0; i < 24; i++)
        x[i] = xf[i];
    const int64_t lb[6] = {0, 3, -1, 2, 1, 1};
    double want = 0;
    for (int b = 0; b < 2; b++)
        for (int d = 0; d < 3; d++) {
            int64_t t = lb[b * 3 + d];
            if (t < 0)
                continue;
            double sum = 0;
            for (int c = 0; c < 4; c++)
                sum += exp(x[b * 12 + c * 3 + d]);
            want += -log(exp(x[b * 12 + t * 3 + d]) / sum);
        }
    tin ins[2] = {{KILN_DTYPE_FLOAT64, ks(3, 2, 4, 3), x}, {KILN_DTYPE_INT64, ks(2, 2, 3), lb}};
    one t = mk(KILN_OP_SCELOSS, 2, ins, 1);
    kiln_node_set_string(t.g, t.node, "reduction", "sum");
    kiln_node_set_int(t.g, t.node, "ignore_index", -1);
    run_ok(&t);
    assert_int_equal(t.out[0].dtype, KILN_DTYPE_FLOAT64);
    assert_true(fabs(*(double *)t.out[0].data - want) < 1e-10);
    done(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_logsoftmax_hand),   cmocka_unit_test(test_logsoftmax_axes),
        cmocka_unit_test(test_logsoftmax_f64),    cmocka_unit_test(test_hardmax_hand),
        cmocka_unit_test(test_layernorm_stats),   cmocka_unit_test(test_instancenorm_hand),
        cmocka_unit_test(test_instancenorm_random), cmocka_unit_test(test_lrn_hand),
        cmocka_unit_test(test_lrn_random),        cmocka_unit_test(test_mvn_hand),
        cmocka_unit_test(test_mvn_random),        cmocka_unit_test(test_lpnorm_hand),
        cmocka_unit_test(test_nllloss_hand),      cmocka_unit_test(test_nllloss_nd),
        cmocka_unit_test(test_nllloss_bad_target), cmocka_unit_test(test_sce_hand),
        cmocka_unit_test(test_sce_f64_nd),
    };
    return cmocka_run_group_tests_name("ops/norm2", tests, NULL, NULL);
}
