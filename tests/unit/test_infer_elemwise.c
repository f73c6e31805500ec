/* tests/unit/test_infer_elemwise.c: shape inference of the unary float ops,
 * the broadcasting binary ops and Identity (through kiln_graph_infer_shapes
 * on one-node graphs), including every error case; and the broadcasting
 * helpers of ir/broadcast.h (output shape, strides, coalesced walk). */
#include <string.h>

#include "ir/broadcast.h"
#include "ir/graph.h"
#include "test_support.h"

/* A graph with inputs x0, x1 (dtype/shape each) and one node `op` named
 * "node" on them; returns the graph, *node receives the node id. */
static kiln_graph *one_node(kiln_op op, int n_in, const kiln_dtype *dt, const kiln_shape *sh,
                            int *node)
{
    kiln_graph *g = NULL;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    int ids[4];
    char name[8] = "x0";
    for (int i = 0; i < n_in; i++) {
        name[1] = (char)('0' + i);
        ids[i] = kiln_graph_add_input(g, name, dt[i], &sh[i]);
        assert_true(ids[i] >= 0);
    }
    *node = kiln_graph_add_node(g, op, "node", ids, n_in, 1);
    assert_true(*node >= 0);
    return g;
}

static const kiln_value *out0(const kiln_graph *g, int node)
{
    return kiln_graph_value(g, kiln_graph_node_output(g, node, 0));
}

static void assert_shape(const kiln_shape *got, kiln_shape want)
{
    char a[96], b[96];
    if (!kiln_shape_equal(got, &want))
        fail_msg("shape %s, expected %s", kiln_shape_str(got, a, sizeof a),
                 kiln_shape_str(&want, b, sizeof b));
}

/* Infers a binary op on (ta, sa), (tb, sb); returns the status, and on
 * success checks nothing (callers read *out). */
static kiln_status infer_binary(kiln_op op, kiln_dtype ta, kiln_shape sa, kiln_dtype tb,
                                kiln_shape sb, kiln_dtype *dt_out, kiln_shape *sh_out,
                                kiln_error *err)
{
    kiln_dtype dts[2] = {ta, tb};
    kiln_shape shs[2] = {sa, sb};
    int node;
    kiln_graph *g = one_node(op, 2, dts, shs, &node);
    kiln_status s = kiln_graph_infer_shapes(g, err);
    if (s == KILN_OK) {
        *dt_out = out0(g, node)->dtype;
        *sh_out = out0(g, node)->shape;
    }
    kiln_graph_destroy(g);
    return s;
}

static void test_unary_ok(void **state)
{
    (void)state;
    static const kiln_op ops[] = {KILN_OP_RELU,        KILN_OP_CLIP,      KILN_OP_SIGMOID,
                                  KILN_OP_HARDSIGMOID, KILN_OP_HARDSWISH, KILN_OP_ERF,
                                  KILN_OP_SQRT};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        kiln_dtype dt = KILN_DTYPE_FLOAT32;
        kiln_shape sh = ks(3, 2, 0, 5);
        int node;
        kiln_graph *g = one_node(ops[i], 1, &dt, &sh, &node);
        kiln_error err = {0};
        assert_int_equal(kiln_graph_infer_shapes(g, &err), KILN_OK);
        assert_int_equal(out0(g, node)->dtype, KILN_DTYPE_FLOAT32);
        assert_shape(&out0(g, node)->shape, ks(3, 2, 0, 5));
        kiln_graph_destroy(g);
    }
    /* a scalar */
    kiln_dtype dt = KILN_DTYPE_FLOAT32;
    kiln_shape sh = {.rank = 0};
    int node;
    kiln_graph *g = one_node(KILN_OP_RELU, 1, &dt, &sh, &node);
    assert_int_equal(kiln_graph_infer_shapes(g, NULL), KILN_OK);
    assert_int_equal(out0(g, node)->shape.rank, 0);
    kiln_graph_destroy(g);
}

static void test_unary_rejects_non_float(void **state)
{
    (void)state;
    kiln_dtype dts[] = {KILN_DTYPE_INT32, KILN_DTYPE_BOOL, KILN_DTYPE_UINT8};
    for (int i = 0; i < 3; i++) {
        kiln_shape sh = ks(1, 4);
        int node;
        kiln_graph *g = one_node(KILN_OP_SIGMOID, 1, &dts[i], &sh, &node);
        kiln_error err = {0};
        assert_int_equal(kiln_graph_infer_shapes(g, &err), KILN_ERR_TYPE_MISMATCH);
        assert_non_null(strstr(err.msg, "node"));
        assert_non_null(strstr(err.msg, "float32"));
        kiln_graph_destroy(g);
    }
}

static void test_unary_attr_types(void **state)
{
    (void)state;
    kiln_dtype dt = KILN_DTYPE_FLOAT32;
    kiln_shape sh = ks(1, 4);
    int node;
    kiln_graph *g = one_node(KILN_OP_CLIP, 1, &dt, &sh, &node);
    kiln_error err = {0};
    assert_int_equal(kiln_node_set_float(g, node, "min", 0.0f), KILN_OK);
    assert_int_equal(kiln_graph_infer_shapes(g, &err), KILN_OK);
    assert_int_equal(kiln_node_set_int(g, node, "max", 6), KILN_OK); /* wrong type */
    assert_int_equal(kiln_graph_infer_shapes(g, &err), KILN_ERR_TYPE_MISMATCH);
    assert_non_null(strstr(err.msg, "'max' is int, expected float"));
    assert_int_equal(kiln_node_attr_check(kiln_graph_node(g, node), "max", KILN_ATTR_FLOAT, NULL),
                     KILN_ERR_TYPE_MISMATCH);
    kiln_graph_destroy(g);

    g = one_node(KILN_OP_HARDSIGMOID, 1, &dt, &sh, &node);
    assert_int_equal(kiln_node_set_string(g, node, "alpha", "0.2"), KILN_OK);
    assert_int_equal(kiln_graph_infer_shapes(g, &err), KILN_ERR_TYPE_MISMATCH);
    assert_non_null(strstr(err.msg, "alpha"));
    kiln_graph_destroy(g);
}

static void test_broadcast_shapes(void **state)
{
    (void)state;
    kiln_dtype dt;
    kiln_shape sh;
    kiln_error err = {0};
    const kiln_dtype F = KILN_DTYPE_FLOAT32;
    /* rank-mismatched */
    assert_int_equal(infer_binary(KILN_OP_ADD, F, ks(3, 2, 3, 4), F, ks(1, 4), &dt, &sh, &err),
                     KILN_OK);
    assert_shape(&sh, ks(3, 2, 3, 4));
    assert_int_equal(dt, F);
    /* both sides broadcast */
    assert_int_equal(infer_binary(KILN_OP_MUL, F, ks(3, 2, 1, 4), F, ks(2, 3, 1), &dt, &sh, &err),
                     KILN_OK);
    assert_shape(&sh, ks(3, 2, 3, 4));
    /* scalar on either side */
    assert_int_equal(infer_binary(KILN_OP_SUB, F, (kiln_shape){.rank = 0}, F, ks(2, 5, 6), &dt,
                                  &sh, &err),
                     KILN_OK);
    assert_shape(&sh, ks(2, 5, 6));
    assert_int_equal(infer_binary(KILN_OP_DIV, F, ks(2, 5, 6), F, (kiln_shape){.rank = 0}, &dt,
                                  &sh, &err),
                     KILN_OK);
    assert_shape(&sh, ks(2, 5, 6));
    /* per-channel bias */
    assert_int_equal(infer_binary(KILN_OP_ADD, F, ks(4, 1, 64, 112, 112), F, ks(4, 1, 64, 1, 1),
                                  &dt, &sh, &err),
                     KILN_OK);
    assert_shape(&sh, ks(4, 1, 64, 112, 112));
    /* zero-size dims broadcast like any other (1 -> 0) */
    assert_int_equal(infer_binary(KILN_OP_ADD, F, ks(2, 0, 3), F, ks(2, 1, 3), &dt, &sh, &err),
                     KILN_OK);
    assert_shape(&sh, ks(2, 0, 3));
}

static void test_broadcast_errors(void **state)
{
    (void)state;
    kiln_dtype dt;
    kiln_shape sh;
    kiln_error err = {0};
    const kiln_dtype F = KILN_DTYPE_FLOAT32;
    assert_int_equal(infer_binary(KILN_OP_ADD, F, ks(2, 2, 3), F, ks(1, 4), &dt, &sh, &err),
                     KILN_ERR_SHAPE_MISMATCH);
    assert_non_null(strstr(err.msg, "[2, 3]"));
    assert_non_null(strstr(err.msg, "[4]"));
    assert_non_null(strstr(err.msg, "node"));
    assert_int_equal(infer_binary(KILN_OP_MUL, F, ks(3, 2, 3, 4), F, ks(3, 2, 2, 4), &dt, &sh,
                                  &err),
                     KILN_ERR_SHAPE_MISMATCH);
    /* dtype mismatch */
    assert_int_equal(infer_binary(KILN_OP_ADD, F, ks(1, 4), KILN_DTYPE_INT32, ks(1, 4), &dt, &sh,
                                  &err),
                     KILN_ERR_TYPE_MISMATCH);
    assert_non_null(strstr(err.msg, "int32"));
    assert_int_equal(infer_binary(KILN_OP_SUB, KILN_DTYPE_INT64, ks(1, 4), KILN_DTYPE_INT32,
                                  ks(1, 4), &dt, &sh, &err),
                     KILN_ERR_TYPE_MISMATCH);
    /* bool is not arithmetic */
    assert_int_equal(infer_binary(KILN_OP_ADD, KILN_DTYPE_BOOL, ks(1, 4), KILN_DTYPE_BOOL,
                                  ks(1, 4), &dt, &sh, &err),
                     KILN_ERR_TYPE_MISMATCH);
    /* Pow: any numeric base and exponent, not bool */
    assert_int_equal(infer_binary(KILN_OP_POW, KILN_DTYPE_BOOL, ks(1, 4), KILN_DTYPE_INT32,
                                  ks(1, 4), &dt, &sh, &err),
                     KILN_ERR_TYPE_MISMATCH);
    assert_non_null(strstr(err.msg, "base"));
    assert_int_equal(infer_binary(KILN_OP_POW, F, ks(1, 4), KILN_DTYPE_BOOL, ks(1, 4), &dt,
                                  &sh, &err),
                     KILN_ERR_TYPE_MISMATCH);
    assert_non_null(strstr(err.msg, "exponent"));
}

static void test_broadcast_dtypes(void **state)
{
    (void)state;
    kiln_dtype dt;
    kiln_shape sh;
    kiln_error err = {0};
    assert_int_equal(infer_binary(KILN_OP_DIV, KILN_DTYPE_INT64, ks(1, 3), KILN_DTYPE_INT64,
                                  ks(2, 2, 1), &dt, &sh, &err),
                     KILN_OK);
    assert_int_equal(dt, KILN_DTYPE_INT64);
    assert_shape(&sh, ks(2, 2, 3));
    assert_int_equal(infer_binary(KILN_OP_MUL, KILN_DTYPE_INT32, ks(1, 3), KILN_DTYPE_INT32,
                                  ks(1, 3), &dt, &sh, &err),
                     KILN_OK);
    assert_int_equal(dt, KILN_DTYPE_INT32);
    /* Pow keeps the base's type whatever the exponent's */
    assert_int_equal(infer_binary(KILN_OP_POW, KILN_DTYPE_FLOAT32, ks(2, 2, 3), KILN_DTYPE_INT64,
                                  (kiln_shape){.rank = 0}, &dt, &sh, &err),
                     KILN_OK);
    assert_int_equal(dt, KILN_DTYPE_FLOAT32);
    assert_shape(&sh, ks(2, 2, 3));
    assert_int_equal(infer_binary(KILN_OP_POW, KILN_DTYPE_FLOAT32, ks(1, 3), KILN_DTYPE_INT32,
                                  ks(1, 1), &dt, &sh, &err),
                     KILN_OK);
    assert_int_equal(dt, KILN_DTYPE_FLOAT32);
}

static void test_identity(void **state)
{
    (void)state;
    kiln_dtype dts[] = {KILN_DTYPE_INT64, KILN_DTYPE_BOOL, KILN_DTYPE_FLOAT16};
    for (int i = 0; i < 3; i++) {
        kiln_shape sh = ks(2, 3, 7);
        int node;
        kiln_graph *g = one_node(KILN_OP_IDENTITY, 1, &dts[i], &sh, &node);
        assert_int_equal(kiln_graph_infer_shapes(g, NULL), KILN_OK);
        assert_int_equal(out0(g, node)->dtype, dts[i]);
        assert_shape(&out0(g, node)->shape, ks(2, 3, 7));
        /* validate agrees with the recorded types */
        assert_int_equal(kiln_graph_validate(g, NULL), KILN_OK);
        kiln_graph_destroy(g);
    }
}

static void test_broadcast_helpers(void **state)
{
    (void)state;
    kiln_shape a = ks(4, 1, 64, 112, 112), b = ks(4, 1, 64, 1, 1), o;
    kiln_error err = {0};
    assert_int_equal(kiln_broadcast_shape(&a, &b, &o, &err), KILN_OK);
    assert_shape(&o, a);
    assert_true(kiln_broadcasts_to(&b, &o));
    assert_false(kiln_broadcasts_to(&o, &b));
    kiln_shape c = ks(2, 3, 4);
    o = ks(1, 99);
    assert_int_equal(kiln_broadcast_shape(&a, &c, &o, &err), KILN_ERR_SHAPE_MISMATCH);
    assert_shape(&o, ks(1, 99)); /* untouched on failure */

    /* strides of [3, 1] viewed in [2, 3, 4] */
    kiln_shape s31 = ks(2, 3, 1), s234 = ks(3, 2, 3, 4);
    int64_t st[KILN_MAX_RANK];
    kiln_broadcast_strides(&s31, &s234, st);
    assert_int_equal(st[0], 0);
    assert_int_equal(st[1], 1);
    assert_int_equal(st[2], 0);

    /* the per-channel bias walk coalesces to rows of 112*112 */
    const kiln_shape *shapes[2] = {&a, &b};
    kiln_bcast bc;
    kiln_bcast_init(&bc, &a, shapes, 2);
    assert_int_equal(bc.rank, 2);
    assert_int_equal(bc.inner, 112 * 112);
    assert_int_equal(bc.rows, 64);
    assert_int_equal(bc.inner_stride[0], 1);
    assert_int_equal(bc.inner_stride[1], 0);
    assert_int_equal(bc.strides[1][0], 1);

    /* a scalar walk is one row of one element */
    kiln_shape sc = {.rank = 0};
    const kiln_shape *ss[2] = {&sc, &sc};
    kiln_bcast_init(&bc, &sc, ss, 2);
    assert_int_equal(bc.rows, 1);
    assert_int_equal(bc.inner, 1);

    /* walking [2,3,4] with [3,1]: the offsets of operand 1 follow j */
    const kiln_shape *s2[2] = {&s234, &s31};
    kiln_bcast_init(&bc, &s234, s2, 2);
    int64_t idx[KILN_MAX_RANK] = {0}, off[KILN_BCAST_MAX_OPS] = {0};
    int64_t pos = 0;
    for (int64_t r = 0; r < bc.rows; r++) {
        for (int64_t i = 0; i < bc.inner; i++, pos++) {
            int64_t j = (pos / 4) % 3;
            assert_int_equal(off[0] + i * bc.inner_stride[0], pos);
            assert_int_equal(off[1] + i * bc.inner_stride[1], j);
        }
        kiln_bcast_next_row(&bc, idx, off);
    }
    assert_int_equal(pos, 24);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unary_ok),
        cmocka_unit_test(test_unary_rejects_non_float),
        cmocka_unit_test(test_unary_attr_types),
        cmocka_unit_test(test_broadcast_shapes),
        cmocka_unit_test(test_broadcast_errors),
        cmocka_unit_test(test_broadcast_dtypes),
        cmocka_unit_test(test_identity),
        cmocka_unit_test(test_broadcast_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
