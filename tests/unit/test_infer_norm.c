/* tests/unit/test_infer_norm.c: shape inference of the normalization,
 * softmax and loss families added to ir/infer_norm.c (LogSoftmax, Hardmax,
 * LayerNormalization's Mean/InvStdDev, InstanceNormalization, LRN,
 * MeanVarianceNormalization, LpNormalization, NegativeLogLikelihoodLoss,
 * SoftmaxCrossEntropyLoss) through kiln_graph_infer_shapes on one-node
 * graphs: output dtypes and shapes, and the error cases (dtypes, ranks,
 * parameter shapes, attribute values and types) with the status and the words
 * of the message. */
#include <stdio.h>
#include <string.h>

#include "ir/graph.h"
#include "test_support.h"

typedef struct tg {
    kiln_graph *g;
    int node;
} tg;

/* Inputs of the given dtypes (NULL: all float32) and shapes (rank -1: absent),
 * one node "n1" with n_out outputs. */
static tg mk(kiln_op op, int n_in, const kiln_shape *shapes, const kiln_dtype *dts, int n_out)
{
    tg t;
    assert_int_equal(kiln_graph_create(&t.g), KILN_OK);
    int ids[8];
    for (int i = 0; i < n_in; i++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", i);
        ids[i] = shapes[i].rank < 0 ? -1
                                    : kiln_graph_add_input(t.g, name,
                                                           dts ? dts[i] : KILN_DTYPE_FLOAT32,
                                                           &shapes[i]);
    }
    t.node = kiln_graph_add_node(t.g, op, "n1", ids, n_in, n_out);
    assert_true(t.node >= 0);
    return t;
}

static void check_out(const tg *t, int k, kiln_dtype dt, kiln_shape want)
{
    const kiln_value *o = kiln_graph_value(t->g, kiln_graph_node_output(t->g, t->node, k));
    assert_int_equal(o->dtype, dt);
    if (!kiln_shape_equal(&o->shape, &want)) {
        char a[128], b[128];
        fail_msg("output %d shape %s, expected %s", k, kiln_shape_str(&o->shape, a, sizeof a),
                 kiln_shape_str(&want, b, sizeof b));
    }
}

static void infer_ok(tg *t)
{
    kiln_error err = {0};
    if (kiln_graph_infer_shapes(t->g, &err) != KILN_OK)
        fail_msg("inference failed: %s", err.msg);
}

/* Single-output success with the output of dtype dt and shape want. */
static void expect_ok(tg *t, kiln_dtype dt, kiln_shape want)
{
    infer_ok(t);
    check_out(t, 0, dt, want);
    kiln_graph_destroy(t->g);
}

static void expect_err(tg *t, kiln_status status, const char *words)
{
    kiln_error err = {0};
    kiln_status s = kiln_graph_infer_shapes(t->g, &err);
    if (s != status)
        fail_msg("status %s (%s), expected %s", kiln_status_str(s), err.msg,
                 kiln_status_str(status));
    if (!strstr(err.msg, words) || !strstr(err.msg, "n1"))
        fail_msg("message '%s' lacks '%s' or the node name", err.msg, words);
    kiln_graph_destroy(t->g);
}

static void test_softmax_family(void **state)
{
    (void)state;
    kiln_shape xs = ks(3, 2, 3, 4);
    const kiln_op ops[3] = {KILN_OP_LOGSOFTMAX, KILN_OP_HARDMAX, KILN_OP_SOFTMAX};
    for (int o = 0; o < 3; o++) {
        tg t = mk(ops[o], 1, &xs, NULL, 1);
        kiln_node_set_int(t.g, t.node, "axis", -3);
        expect_ok(&t, KILN_DTYPE_FLOAT32, xs);
        kiln_dtype d64[1] = {KILN_DTYPE_FLOAT64};
        t = mk(ops[o], 1, &xs, d64, 1);
        expect_ok(&t, KILN_DTYPE_FLOAT64, xs);
        t = mk(ops[o], 1, &xs, NULL, 1);
        kiln_node_set_int(t.g, t.node, "axis", 3);
        expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "axis 3 is out of range");
        kiln_dtype di[1] = {KILN_DTYPE_INT32};
        t = mk(ops[o], 1, &xs, di, 1);
        expect_err(&t, KILN_ERR_TYPE_MISMATCH, "input 0 (X) is int32, expected float32 or float64");
    }
}

static void test_layernorm_outputs(void **state)
{
    (void)state;
    kiln_shape sh[3] = {ks(4, 2, 3, 4, 5), ks(2, 4, 5), ks(2, 4, 5)};
    tg t = mk(KILN_OP_LAYERNORM, 3, sh, NULL, 3);
    kiln_node_set_int(t.g, t.node, "axis", -2);
    infer_ok(&t);
    check_out(&t, 0, KILN_DTYPE_FLOAT32, sh[0]);
    check_out(&t, 1, KILN_DTYPE_FLOAT32, ks(4, 2, 3, 1, 1));
    check_out(&t, 2, KILN_DTYPE_FLOAT32, ks(4, 2, 3, 1, 1));
    kiln_graph_destroy(t.g);
    /* float64 X: Y float64, the statistics stay float32 (stash_type 1) */
    kiln_dtype d64[3] = {KILN_DTYPE_FLOAT64, KILN_DTYPE_FLOAT64, KILN_DTYPE_FLOAT64};
    kiln_shape s0[2] = {ks(2, 3, 5), ks(2, 3, 5)};
    t = mk(KILN_OP_LAYERNORM, 2, s0, d64, 2);
    kiln_node_set_int(t.g, t.node, "axis", 0);
    infer_ok(&t);
    check_out(&t, 0, KILN_DTYPE_FLOAT64, ks(2, 3, 5));
    check_out(&t, 1, KILN_DTYPE_FLOAT32, ks(2, 1, 1));
    kiln_graph_destroy(t.g);
    /* Scale of another float dtype than X */
    kiln_dtype dmix[2] = {KILN_DTYPE_FLOAT64, KILN_DTYPE_FLOAT32};
    t = mk(KILN_OP_LAYERNORM, 2, s0, dmix, 1);
    kiln_node_set_int(t.g, t.node, "axis", 0);
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "input 1 (Scale) is float32, expected float64 like X");
    t = mk(KILN_OP_LAYERNORM, 2, sh, NULL, 1);
    kiln_node_set_int(t.g, t.node, "axis", -2);
    kiln_node_set_int(t.g, t.node, "stash_type", 11);
    expect_err(&t, KILN_ERR_UNSUPPORTED, "stash_type 11");
}

static void test_instancenorm(void **state)
{
    (void)state;
    kiln_shape sh[3] = {ks(4, 2, 3, 4, 5), ks(1, 3), ks(1, 3)};
    tg t = mk(KILN_OP_INSTANCENORM, 3, sh, NULL, 1);
    expect_ok(&t, KILN_DTYPE_FLOAT32, sh[0]);
    sh[2] = ks(1, 4);
    t = mk(KILN_OP_INSTANCENORM, 3, sh, NULL, 1);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "input 2 (B) has shape [4], expected [3]");
    sh[2] = ks(1, 3);
    sh[0] = ks(1, 3);
    t = mk(KILN_OP_INSTANCENORM, 3, sh, NULL, 1);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "expected rank >= 2");
    sh[0] = ks(3, 2, 3, 4);
    kiln_dtype d[3] = {KILN_DTYPE_FLOAT32, KILN_DTYPE_FLOAT64, KILN_DTYPE_FLOAT32};
    t = mk(KILN_OP_INSTANCENORM, 3, sh, d, 1);
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "input 1 (scale) is float64");
    t = mk(KILN_OP_INSTANCENORM, 3, sh, NULL, 1);
    kiln_node_set_int(t.g, t.node, "epsilon", 1);
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "'epsilon' is int");
}

static void test_lrn(void **state)
{
    (void)state;
    kiln_shape xs = ks(4, 1, 5, 4, 4);
    tg t = mk(KILN_OP_LRN, 1, &xs, NULL, 1);
    kiln_node_set_int(t.g, t.node, "size", 3);
    expect_ok(&t, KILN_DTYPE_FLOAT32, xs);
    t = mk(KILN_OP_LRN, 1, &xs, NULL, 1);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "'size' is required");
    t = mk(KILN_OP_LRN, 1, &xs, NULL, 1);
    kiln_node_set_int(t.g, t.node, "size", 0);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "'size' is 0, expected >= 1");
    t = mk(KILN_OP_LRN, 1, &xs, NULL, 1);
    kiln_node_set_int(t.g, t.node, "size", 3);
    kiln_node_set_int(t.g, t.node, "alpha", 1);
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "'alpha' is int");
    kiln_shape x1 = ks(1, 5);
    t = mk(KILN_OP_LRN, 1, &x1, NULL, 1);
    kiln_node_set_int(t.g, t.node, "size", 3);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "expected rank >= 2");
}

static void test_mvn(void **state)
{
    (void)state;
    kiln_shape xs = ks(4, 2, 3, 4, 5);
    tg t = mk(KILN_OP_MVN, 1, &xs, NULL, 1);
    expect_ok(&t, KILN_DTYPE_FLOAT32, xs);
    /* the default axes [0, 2, 3] need rank 4 */
    kiln_shape x3 = ks(3, 2, 3, 4);
    t = mk(KILN_OP_MVN, 1, &x3, NULL, 1);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "axes entry 3 is out of range");
    t = mk(KILN_OP_MVN, 1, &x3, NULL, 1);
    const int64_t ax[2] = {-1, 0};
    kiln_node_set_ints(t.g, t.node, "axes", ax, 2);
    expect_ok(&t, KILN_DTYPE_FLOAT32, x3);
    t = mk(KILN_OP_MVN, 1, &x3, NULL, 1);
    const int64_t dup[2] = {2, -1};
    kiln_node_set_ints(t.g, t.node, "axes", dup, 2);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "axes lists dim 2 twice");
}

static void test_lpnorm(void **state)
{
    (void)state;
    kiln_shape xs = ks(2, 3, 4);
    tg t = mk(KILN_OP_LPNORM, 1, &xs, NULL, 1);
    kiln_node_set_int(t.g, t.node, "p", 1);
    kiln_node_set_int(t.g, t.node, "axis", 0);
    expect_ok(&t, KILN_DTYPE_FLOAT32, xs);
    t = mk(KILN_OP_LPNORM, 1, &xs, NULL, 1);
    kiln_node_set_int(t.g, t.node, "p", 3);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "'p' is 3, expected 1 or 2");
    t = mk(KILN_OP_LPNORM, 1, &xs, NULL, 1);
    kiln_node_set_int(t.g, t.node, "axis", 2);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "axis 2 is out of range");
}

static void test_losses(void **state)
{
    (void)state;
    kiln_shape sh[3] = {ks(4, 2, 5, 3, 4), ks(3, 2, 3, 4), ks(1, 5)};
    kiln_dtype dt[3] = {KILN_DTYPE_FLOAT32, KILN_DTYPE_INT64, KILN_DTYPE_FLOAT32};
    tg t = mk(KILN_OP_NLLLOSS, 3, sh, dt, 1);
    kiln_node_set_string(t.g, t.node, "reduction", "none");
    expect_ok(&t, KILN_DTYPE_FLOAT32, sh[1]);
    t = mk(KILN_OP_NLLLOSS, 2, sh, dt, 1);
    expect_ok(&t, KILN_DTYPE_FLOAT32, ks(0)); /* default mean: a scalar */
    t = mk(KILN_OP_SCELOSS, 3, sh, dt, 2);
    kiln_node_set_string(t.g, t.node, "reduction", "sum");
    infer_ok(&t);
    check_out(&t, 0, KILN_DTYPE_FLOAT32, ks(0));
    check_out(&t, 1, KILN_DTYPE_FLOAT32, sh[0]);
    kiln_graph_destroy(t.g);
    /* float64 scores with int32 labels and float64 weights */
    kiln_dtype d64[3] = {KILN_DTYPE_FLOAT64, KILN_DTYPE_INT32, KILN_DTYPE_FLOAT64};
    t = mk(KILN_OP_SCELOSS, 3, sh, d64, 1);
    kiln_node_set_string(t.g, t.node, "reduction", "none");
    expect_ok(&t, KILN_DTYPE_FLOAT64, sh[1]);
    /* errors */
    t = mk(KILN_OP_NLLLOSS, 2, sh, dt, 1);
    kiln_node_set_string(t.g, t.node, "reduction", "max");
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "'reduction' is 'max', expected none, sum or mean");
    kiln_dtype bad[3] = {KILN_DTYPE_FLOAT32, KILN_DTYPE_FLOAT32, KILN_DTYPE_FLOAT32};
    t = mk(KILN_OP_NLLLOSS, 2, sh, bad, 1);
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "input 1 (target) is float32, expected int32 or int64");
    kiln_shape s2[3] = {ks(4, 2, 5, 3, 4), ks(3, 2, 4, 3), ks(1, 4)};
    t = mk(KILN_OP_SCELOSS, 2, s2, dt, 1);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH,
               "input 1 (labels) has shape [2, 4, 3], expected the shape of input 0 [2, 5, 3, 4]");
    s2[1] = sh[1];
    t = mk(KILN_OP_NLLLOSS, 3, s2, dt, 1);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "input 2 (weights) has shape [4], expected [5]");
    kiln_shape s1[2] = {ks(1, 5), ks(0)};
    t = mk(KILN_OP_NLLLOSS, 2, s1, dt, 1);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "expected rank >= 2");
    t = mk(KILN_OP_NLLLOSS, 2, sh, dt, 1);
    kiln_node_set_float(t.g, t.node, "ignore_index", 1.0f);
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "'ignore_index' is float");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_softmax_family), cmocka_unit_test(test_layernorm_outputs),
        cmocka_unit_test(test_instancenorm),   cmocka_unit_test(test_lrn),
        cmocka_unit_test(test_mvn),            cmocka_unit_test(test_lpnorm),
        cmocka_unit_test(test_losses),
    };
    return cmocka_run_group_tests_name("unit/infer_norm", tests, NULL, NULL);
}
