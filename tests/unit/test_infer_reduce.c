/* tests/unit/test_infer_reduce.c: shape inference of the reduction family
 * (reductions, ArgMax/ArgMin, CumSum, TopK, Einsum) through
 * kiln_graph_infer_shapes: output dtypes and shapes, and every error path
 * (dtypes, axes, missing or out-of-range attributes, empty axes, Einsum
 * equations that do not parse or do not fit the inputs), with the status and
 * the words of the message. */
#include <stdio.h>
#include <string.h>

#include "ir/graph.h"
#include "test_support.h"

typedef struct tg {
    kiln_graph *g;
    int node;
} tg;

static tg mk_n(kiln_op op, int n_in, const kiln_shape *shapes, const kiln_dtype *dts, int n_out)
{
    tg t;
    assert_int_equal(kiln_graph_create(&t.g), KILN_OK);
    int ids[8];
    for (int i = 0; i < n_in; i++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", i);
        ids[i] = kiln_graph_add_input(t.g, name, dts ? dts[i] : KILN_DTYPE_FLOAT32, &shapes[i]);
    }
    t.node = kiln_graph_add_node(t.g, op, "n1", ids, n_in, n_out);
    assert_true(t.node >= 0);
    return t;
}

static tg mk1(kiln_op op, kiln_dtype dt, kiln_shape s)
{
    return mk_n(op, 1, &s, &dt, op == KILN_OP_TOPK ? 2 : 1);
}

static void expect_ok(tg *t, kiln_dtype dt, kiln_shape want)
{
    kiln_error err = {0};
    kiln_status s = kiln_graph_infer_shapes(t->g, &err);
    if (s != KILN_OK)
        fail_msg("inference failed: %s", err.msg);
    const kiln_value *o = kiln_graph_value(t->g, kiln_graph_node_output(t->g, t->node, 0));
    assert_int_equal(o->dtype, dt);
    if (!kiln_shape_equal(&o->shape, &want)) {
        char a[128], b[128];
        fail_msg("output shape %s, expected %s", kiln_shape_str(&o->shape, a, sizeof a),
                 kiln_shape_str(&want, b, sizeof b));
    }
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

#define SET_INTS(t, name, ...)                                                                    \
    do {                                                                                          \
        const int64_t v_[] = {__VA_ARGS__};                                                       \
        assert_int_equal(kiln_node_set_ints((t).g, (t).node, name, v_,                            \
                                            (int)(sizeof v_ / sizeof v_[0])),                     \
                         KILN_OK);                                                                \
    } while (0)
#define SET_INT(t, name, v) assert_int_equal(kiln_node_set_int((t).g, (t).node, name, v), KILN_OK)

static void test_reduce(void **state)
{
    (void)state;
    kiln_shape xs = ks(3, 2, 3, 4);
    tg t = mk1(KILN_OP_REDUCESUM, KILN_DTYPE_INT64, xs);
    SET_INTS(t, "axes", -1, 0);
    SET_INT(t, "keepdims", 0);
    expect_ok(&t, KILN_DTYPE_INT64, ks(1, 3));
    t = mk1(KILN_OP_REDUCEMAX, KILN_DTYPE_UINT8, xs);
    SET_INTS(t, "axes", 1);
    expect_ok(&t, KILN_DTYPE_UINT8, ks(3, 2, 1, 4));
    t = mk1(KILN_OP_REDUCELOGSUMEXP, KILN_DTYPE_FLOAT64, xs);
    expect_ok(&t, KILN_DTYPE_FLOAT64, ks(3, 1, 1, 1));
    t = mk1(KILN_OP_REDUCEMEAN, KILN_DTYPE_FLOAT16, xs);
    SET_INT(t, "keepdims", 0);
    expect_ok(&t, KILN_DTYPE_FLOAT16, ks(0));
    /* an empty reduced axis: fine for Sum, an error for Mean */
    t = mk1(KILN_OP_REDUCESUM, KILN_DTYPE_FLOAT32, ks(2, 3, 0));
    SET_INTS(t, "axes", 1);
    SET_INT(t, "keepdims", 0);
    expect_ok(&t, KILN_DTYPE_FLOAT32, ks(1, 3));
    t = mk1(KILN_OP_REDUCEMEAN, KILN_DTYPE_FLOAT32, ks(2, 3, 0));
    SET_INTS(t, "axes", 1);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "empty axis 1");
    /* noop with empty axes: the input shape */
    t = mk1(KILN_OP_REDUCEPROD, KILN_DTYPE_INT32, xs);
    assert_int_equal(kiln_node_set_ints(t.g, t.node, "axes", NULL, 0), KILN_OK);
    SET_INT(t, "noop_with_empty_axes", 1);
    expect_ok(&t, KILN_DTYPE_INT32, xs);
    /* errors */
    t = mk1(KILN_OP_REDUCEMEAN, KILN_DTYPE_INT32, xs);
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "input 0 (X) is int32");
    t = mk1(KILN_OP_REDUCESUM, KILN_DTYPE_BOOL, xs);
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "input 0 (X) is bool");
    t = mk1(KILN_OP_REDUCEL2, KILN_DTYPE_FLOAT32, xs);
    SET_INTS(t, "axes", 3);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "axes[0] = 3 is out of range");
    t = mk1(KILN_OP_REDUCEL1, KILN_DTYPE_FLOAT32, xs);
    SET_INTS(t, "axes", 0, -3);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "repeats axis 0");
    t = mk1(KILN_OP_REDUCEMIN, KILN_DTYPE_FLOAT32, xs);
    SET_INT(t, "keepdims", 2);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "'keepdims' is 2");
    t = mk1(KILN_OP_REDUCELOGSUM, KILN_DTYPE_FLOAT32, xs);
    SET_INT(t, "axes", 1);
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "'axes' is int");
}

static void test_argreduce(void **state)
{
    (void)state;
    kiln_shape xs = ks(3, 2, 3, 4);
    tg t = mk1(KILN_OP_ARGMAX, KILN_DTYPE_FLOAT32, xs);
    expect_ok(&t, KILN_DTYPE_INT64, ks(3, 1, 3, 4)); /* axis 0, keepdims 1 */
    t = mk1(KILN_OP_ARGMIN, KILN_DTYPE_INT8, xs);
    SET_INT(t, "axis", -2);
    SET_INT(t, "keepdims", 0);
    expect_ok(&t, KILN_DTYPE_INT64, ks(2, 2, 4));
    t = mk1(KILN_OP_ARGMAX, KILN_DTYPE_FLOAT32, xs);
    SET_INT(t, "axis", 3);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "axis 3 is out of range");
    t = mk1(KILN_OP_ARGMAX, KILN_DTYPE_FLOAT32, ks(2, 2, 0));
    SET_INT(t, "axis", 1);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "axis 1 is empty");
    t = mk1(KILN_OP_ARGMIN, KILN_DTYPE_FLOAT32, xs);
    SET_INT(t, "select_last_index", 2);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "'select_last_index' is 2");
    t = mk1(KILN_OP_ARGMIN, KILN_DTYPE_BOOL, xs);
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "input 0 (data) is bool");
    t = mk1(KILN_OP_ARGMIN, KILN_DTYPE_FLOAT32, ks(0));
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "out of range");
}

static void test_cumsum(void **state)
{
    (void)state;
    kiln_shape xs = ks(2, 5, 3);
    tg t = mk1(KILN_OP_CUMSUM, KILN_DTYPE_INT32, xs);
    SET_INT(t, "axis", -1);
    expect_ok(&t, KILN_DTYPE_INT32, xs);
    t = mk1(KILN_OP_CUMSUM, KILN_DTYPE_FLOAT32, xs);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "'axis' is required");
    t = mk1(KILN_OP_CUMSUM, KILN_DTYPE_FLOAT32, xs);
    SET_INT(t, "axis", 2);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "axis 2 is out of range");
    t = mk1(KILN_OP_CUMSUM, KILN_DTYPE_FLOAT32, xs);
    SET_INT(t, "axis", 0);
    SET_INT(t, "reverse", 5);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "'reverse' is 5");
}

static void test_topk(void **state)
{
    (void)state;
    kiln_shape xs = ks(2, 3, 4);
    tg t = mk1(KILN_OP_TOPK, KILN_DTYPE_FLOAT64, xs);
    SET_INT(t, "k", 2);
    kiln_error err = {0};
    assert_int_equal(kiln_graph_infer_shapes(t.g, &err), KILN_OK);
    const kiln_value *v = kiln_graph_value(t.g, kiln_graph_node_output(t.g, t.node, 0));
    const kiln_value *ix = kiln_graph_value(t.g, kiln_graph_node_output(t.g, t.node, 1));
    kiln_shape want = ks(2, 3, 2);
    assert_int_equal(v->dtype, KILN_DTYPE_FLOAT64);
    assert_int_equal(ix->dtype, KILN_DTYPE_INT64);
    assert_true(kiln_shape_equal(&v->shape, &want));
    assert_true(kiln_shape_equal(&ix->shape, &want));
    kiln_graph_destroy(t.g);
    t = mk1(KILN_OP_TOPK, KILN_DTYPE_INT32, xs);
    SET_INT(t, "k", 3);
    SET_INT(t, "axis", 0);
    expect_ok(&t, KILN_DTYPE_INT32, ks(2, 3, 4));
    t = mk1(KILN_OP_TOPK, KILN_DTYPE_FLOAT32, xs);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "'k' is required");
    t = mk1(KILN_OP_TOPK, KILN_DTYPE_FLOAT32, xs);
    SET_INT(t, "k", 5);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "k = 5 is out of range");
    t = mk1(KILN_OP_TOPK, KILN_DTYPE_FLOAT32, xs);
    SET_INT(t, "k", -1);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "k = -1 is out of range");
    t = mk1(KILN_OP_TOPK, KILN_DTYPE_FLOAT32, xs);
    SET_INT(t, "k", 1);
    SET_INT(t, "axis", -3);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "axis -3 is out of range");
    t = mk1(KILN_OP_TOPK, KILN_DTYPE_FLOAT32, xs);
    SET_INT(t, "k", 1);
    SET_INT(t, "largest", 3);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "'largest' is 3");
}

static tg mk_einsum(const char *eq, int n, const kiln_shape *shapes, const kiln_dtype *dts)
{
    tg t = mk_n(KILN_OP_EINSUM, n, shapes, dts, 1);
    if (eq)
        assert_int_equal(kiln_node_set_string(t.g, t.node, "equation", eq), KILN_OK);
    return t;
}

static void test_einsum(void **state)
{
    (void)state;
    kiln_shape mm[2] = {ks(3, 5, 2, 3), ks(3, 5, 3, 4)};
    tg t = mk_einsum("bij,bjk->bik", 2, mm, NULL);
    expect_ok(&t, KILN_DTYPE_FLOAT32, ks(3, 5, 2, 4));
    t = mk_einsum("bij,bjk", 2, mm, NULL); /* implicit: i and k appear once */
    expect_ok(&t, KILN_DTYPE_FLOAT32, ks(2, 2, 4));
    kiln_shape e1[1] = {ks(4, 7, 6, 3, 3)};
    t = mk_einsum("...ii->...i", 1, e1, NULL);
    expect_ok(&t, KILN_DTYPE_FLOAT32, ks(3, 7, 6, 3));
    t = mk_einsum("...ii", 1, e1, NULL); /* implicit: the ellipsis dims */
    expect_ok(&t, KILN_DTYPE_FLOAT32, ks(2, 7, 6));
    kiln_shape bc[2] = {ks(3, 5, 2, 3), ks(4, 9, 1, 3, 4)}; /* ... = (5) with (9, 1) */
    t = mk_einsum("...ij,...jk->...ik", 2, bc, NULL);
    expect_ok(&t, KILN_DTYPE_FLOAT32, ks(4, 9, 5, 2, 4));
}

static void test_einsum_errors(void **state)
{
    (void)state;
    kiln_shape mm[2] = {ks(2, 2, 3), ks(2, 4, 5)};
    tg t = mk_einsum("ij,jk->ik", 2, mm, NULL);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "label 'j' has extent 4 in input 1");
    kiln_shape ok2[2] = {ks(2, 2, 3), ks(2, 3, 5)};
    t = mk_einsum("ij->ij", 2, ok2, NULL);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "1 input terms for 2 inputs");
    t = mk_einsum("ij,jk,kl->il", 2, ok2, NULL);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "more input terms than the 2 inputs");
    t = mk_einsum("i1,jk->ik", 2, ok2, NULL);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "the character '1'");
    t = mk_einsum("ij,jk->iz", 2, ok2, NULL);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "output label 'z' appears in no input");
    t = mk_einsum("ij,jk->ii", 2, ok2, NULL);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "output label 'i' appears twice");
    t = mk_einsum("ijk,jk->ik", 2, ok2, NULL);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "term 0 names 3 dims but input 0 has shape [2, 3]");
    t = mk_einsum("i..j,jk->ik", 2, ok2, NULL);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "malformed or repeated '...'");
    t = mk_einsum(NULL, 2, ok2, NULL);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "'equation' is required");
    kiln_dtype dts[2] = {KILN_DTYPE_FLOAT32, KILN_DTYPE_FLOAT64};
    t = mk_einsum("ij,jk->ik", 2, ok2, dts);
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "input 1 (Inputs) is float64 but input 0 is float32");
    kiln_shape sq[1] = {ks(2, 3, 4)};
    t = mk_einsum("ii->i", 1, sq, NULL);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "label 'i' has extent 4 in input 0");
    kiln_shape be[2] = {ks(3, 2, 3, 3), ks(3, 4, 3, 3)};
    t = mk_einsum("...ij,...jk->...ik", 2, be, NULL);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "'...' dims of input 1");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reduce), cmocka_unit_test(test_argreduce),
        cmocka_unit_test(test_cumsum), cmocka_unit_test(test_topk),
        cmocka_unit_test(test_einsum), cmocka_unit_test(test_einsum_errors),
    };
    return cmocka_run_group_tests_name("unit/infer_reduce", tests, NULL, NULL);
}
