/* tests/unit/test_infer_movement.c: shape inference of the index-driven
 * data-movement ops (Tile, Expand, GatherElements, GatherND, ScatterElements,
 * ScatterND, DepthToSpace, SpaceToDepth, Trilu, OneHot, ReverseSequence) on
 * one-node graphs through kiln_graph_infer_shapes: expected shapes and dtypes
 * written out by hand, and the error cases (missing or bad attributes,
 * wrong-typed attributes, mismatched ranks, extents and dtypes), each checked
 * for its status and for a message naming what is wrong. */
#include <string.h>

#include "ir/graph.h"
#include "test_support.h"

typedef struct one {
    kiln_graph *g;
    int node;
    kiln_error err;
} one;

static void one_init(one *o, kiln_op op, int n_in, const kiln_dtype *dt, const kiln_shape *sh)
{
    memset(o, 0, sizeof *o);
    assert_int_equal(kiln_graph_create(&o->g), KILN_OK);
    int ids[8];
    char name[8] = "x0";
    for (int i = 0; i < n_in; i++) {
        name[1] = (char)('0' + i);
        ids[i] = kiln_graph_add_input(o->g, name, dt[i], &sh[i]);
    }
    o->node = kiln_graph_add_node(o->g, op, "node", ids, n_in, 1);
    assert_true(o->node >= 0);
}

static kiln_status infer(one *o)
{
    return kiln_graph_infer_shapes(o->g, &o->err);
}

static const kiln_value *out0(one *o)
{
    return kiln_graph_value(o->g, kiln_graph_node_output(o->g, o->node, 0));
}

static void assert_shape(const kiln_shape *got, kiln_shape want)
{
    char a[96], b[96];
    if (!kiln_shape_equal(got, &want))
        fail_msg("shape %s, expected %s", kiln_shape_str(got, a, sizeof a),
                 kiln_shape_str(&want, b, sizeof b));
}

/* Inference succeeds with output shape `want` and dtype `dt`. */
static void expect_ok(one *o, kiln_shape want, kiln_dtype dt)
{
    kiln_status s = infer(o);
    if (s != KILN_OK)
        fail_msg("inference failed: %s", o->err.msg);
    assert_shape(&out0(o)->shape, want);
    assert_int_equal(out0(o)->dtype, dt);
}

/* Inference fails with `st` and a message containing `needle`. */
static void expect_err(one *o, kiln_status st, const char *needle)
{
    kiln_status s = infer(o);
    if (s != st)
        fail_msg("status %s (%s), expected %s", kiln_status_str(s), o->err.msg,
                 kiln_status_str(st));
    if (!strstr(o->err.msg, needle))
        fail_msg("message '%s' does not mention '%s'", o->err.msg, needle);
}

#define INTS(...) ((const int64_t[]){__VA_ARGS__}), (int)(sizeof((int64_t[]){__VA_ARGS__}) / 8)
#define DT(...) ((const kiln_dtype[]){__VA_ARGS__})
#define SH(...) ((const kiln_shape[]){__VA_ARGS__})

static const kiln_dtype F = KILN_DTYPE_FLOAT32, I64 = KILN_DTYPE_INT64, I32 = KILN_DTYPE_INT32;

static void one_free(one *o)
{
    kiln_graph_destroy(o->g);
}

static void test_tile(void **state)
{
    (void)state;
    one o;
    one_init(&o, KILN_OP_TILE, 1, DT(I64), SH(ks(3, 2, 3, 4)));
    kiln_node_set_ints(o.g, o.node, "repeats", INTS(1, 0, 3));
    expect_ok(&o, ks(3, 2, 0, 12), I64);
    kiln_node_set_ints(o.g, o.node, "repeats", INTS(1, 2));
    expect_err(&o, KILN_ERR_INVALID_ARGUMENT, "repeats");
    kiln_node_set_ints(o.g, o.node, "repeats", INTS(1, -1, 2));
    expect_err(&o, KILN_ERR_INVALID_ARGUMENT, "negative");
    kiln_node_set_int(o.g, o.node, "repeats", 2);
    expect_err(&o, KILN_ERR_TYPE_MISMATCH, "repeats");
    one_free(&o);
    one_init(&o, KILN_OP_TILE, 1, DT(F), SH(ks(1, 3)));
    expect_err(&o, KILN_ERR_INVALID_ARGUMENT, "missing attribute 'repeats'");
    one_free(&o);
}

static void test_expand(void **state)
{
    (void)state;
    one o;
    one_init(&o, KILN_OP_EXPAND, 1, DT(F), SH(ks(2, 3, 1)));
    kiln_node_set_ints(o.g, o.node, "shape", INTS(2, 1, 6));
    expect_ok(&o, ks(3, 2, 3, 6), F);
    kiln_node_set_ints(o.g, o.node, "shape", INTS(1));
    expect_ok(&o, ks(2, 3, 1), F);
    kiln_node_set_ints(o.g, o.node, "shape", INTS(2, 6));
    expect_err(&o, KILN_ERR_SHAPE_MISMATCH, "broadcast");
    kiln_node_set_ints(o.g, o.node, "shape", INTS(-1, 6));
    expect_err(&o, KILN_ERR_INVALID_ARGUMENT, "negative");
    one_free(&o);
}

static void test_gather_elements(void **state)
{
    (void)state;
    one o;
    one_init(&o, KILN_OP_GATHERELEMENTS, 2, DT(KILN_DTYPE_UINT8, I32), SH(ks(2, 3, 4), ks(2, 2, 7)));
    kiln_node_set_int(o.g, o.node, "axis", -1);
    expect_ok(&o, ks(2, 2, 7), KILN_DTYPE_UINT8);
    kiln_node_set_int(o.g, o.node, "axis", 0);
    expect_err(&o, KILN_ERR_SHAPE_MISMATCH, "dimension 1");
    kiln_node_set_int(o.g, o.node, "axis", 2);
    expect_err(&o, KILN_ERR_INVALID_ARGUMENT, "axis");
    one_free(&o);
    one_init(&o, KILN_OP_GATHERELEMENTS, 2, DT(F, I64), SH(ks(2, 3, 4), ks(1, 3)));
    expect_err(&o, KILN_ERR_SHAPE_MISMATCH, "same rank");
    one_free(&o);
    one_init(&o, KILN_OP_GATHERELEMENTS, 2, DT(F, F), SH(ks(2, 3, 4), ks(2, 3, 4)));
    expect_err(&o, KILN_ERR_TYPE_MISMATCH, "indices");
    one_free(&o);
}

static void test_gather_nd(void **state)
{
    (void)state;
    one o;
    one_init(&o, KILN_OP_GATHERND, 2, DT(F, I64), SH(ks(3, 2, 3, 4), ks(3, 5, 6, 2)));
    expect_ok(&o, ks(3, 5, 6, 4), F);
    one_free(&o);
    one_init(&o, KILN_OP_GATHERND, 2, DT(I32, I64), SH(ks(3, 2, 3, 4), ks(3, 2, 7, 1)));
    kiln_node_set_int(o.g, o.node, "batch_dims", 1);
    expect_ok(&o, ks(3, 2, 7, 4), I32);
    kiln_node_set_int(o.g, o.node, "batch_dims", 3);
    expect_err(&o, KILN_ERR_INVALID_ARGUMENT, "batch_dims");
    one_free(&o);
    one_init(&o, KILN_OP_GATHERND, 2, DT(F, I64), SH(ks(3, 2, 3, 4), ks(2, 3, 1)));
    kiln_node_set_int(o.g, o.node, "batch_dims", 1);
    expect_err(&o, KILN_ERR_SHAPE_MISMATCH, "batch dimension 0");
    one_free(&o);
    one_init(&o, KILN_OP_GATHERND, 2, DT(F, I64), SH(ks(2, 2, 3), ks(2, 5, 3)));
    expect_err(&o, KILN_ERR_SHAPE_MISMATCH, "last extent");
    one_free(&o);
}

static void test_scatter(void **state)
{
    (void)state;
    one o;
    one_init(&o, KILN_OP_SCATTERELEMENTS, 3, DT(F, I64, F), SH(ks(2, 3, 3), ks(2, 2, 3), ks(2, 2, 3)));
    kiln_node_set_string(o.g, o.node, "reduction", "max");
    expect_ok(&o, ks(2, 3, 3), F);
    kiln_node_set_string(o.g, o.node, "reduction", "mean");
    expect_err(&o, KILN_ERR_INVALID_ARGUMENT, "reduction");
    one_free(&o);
    one_init(&o, KILN_OP_SCATTERELEMENTS, 3, DT(F, I64, F), SH(ks(2, 3, 3), ks(2, 2, 3), ks(2, 2, 2)));
    expect_err(&o, KILN_ERR_SHAPE_MISMATCH, "same shape");
    one_free(&o);
    one_init(&o, KILN_OP_SCATTERELEMENTS, 3, DT(F, I64, I64), SH(ks(1, 3), ks(1, 2), ks(1, 2)));
    expect_err(&o, KILN_ERR_TYPE_MISMATCH, "updates");
    one_free(&o);
    one_init(&o, KILN_OP_SCATTERND, 3, DT(I64, I64, I64), SH(ks(3, 4, 5, 6), ks(2, 2, 2), ks(2, 2, 6)));
    expect_ok(&o, ks(3, 4, 5, 6), I64);
    one_free(&o);
    one_init(&o, KILN_OP_SCATTERND, 3, DT(F, I64, F), SH(ks(3, 4, 5, 6), ks(2, 2, 2), ks(2, 2, 5)));
    expect_err(&o, KILN_ERR_SHAPE_MISMATCH, "updates");
    one_free(&o);
    one_init(&o, KILN_OP_SCATTERND, 3, DT(KILN_DTYPE_BOOL, I64, KILN_DTYPE_BOOL),
             SH(ks(1, 4), ks(2, 1, 1), ks(1, 1)));
    kiln_node_set_string(o.g, o.node, "reduction", "add");
    expect_err(&o, KILN_ERR_TYPE_MISMATCH, "bool");
    one_free(&o);
}

static void test_depth_space(void **state)
{
    (void)state;
    one o;
    one_init(&o, KILN_OP_DEPTHTOSPACE, 1, DT(F), SH(ks(4, 2, 18, 3, 5)));
    kiln_node_set_int(o.g, o.node, "blocksize", 3);
    kiln_node_set_string(o.g, o.node, "mode", "CRD");
    expect_ok(&o, ks(4, 2, 2, 9, 15), F);
    kiln_node_set_int(o.g, o.node, "blocksize", 2);
    expect_err(&o, KILN_ERR_SHAPE_MISMATCH, "blocksize^2");
    kiln_node_set_int(o.g, o.node, "blocksize", 3);
    kiln_node_set_string(o.g, o.node, "mode", "XYZ");
    expect_err(&o, KILN_ERR_INVALID_ARGUMENT, "mode");
    kiln_node_set_int(o.g, o.node, "blocksize", 0);
    expect_err(&o, KILN_ERR_INVALID_ARGUMENT, "blocksize");
    one_free(&o);
    one_init(&o, KILN_OP_SPACETODEPTH, 1, DT(I64), SH(ks(4, 1, 2, 4, 6)));
    kiln_node_set_int(o.g, o.node, "blocksize", 2);
    expect_ok(&o, ks(4, 1, 8, 2, 3), I64);
    kiln_node_set_int(o.g, o.node, "blocksize", 4);
    expect_err(&o, KILN_ERR_SHAPE_MISMATCH, "multiples");
    one_free(&o);
    one_init(&o, KILN_OP_SPACETODEPTH, 1, DT(F), SH(ks(3, 2, 4, 4)));
    kiln_node_set_int(o.g, o.node, "blocksize", 2);
    expect_err(&o, KILN_ERR_SHAPE_MISMATCH, "rank 4");
    one_free(&o);
}

static void test_trilu(void **state)
{
    (void)state;
    one o;
    one_init(&o, KILN_OP_TRILU, 1, DT(I64), SH(ks(3, 2, 0, 5)));
    kiln_node_set_int(o.g, o.node, "k", -3);
    expect_ok(&o, ks(3, 2, 0, 5), I64);
    kiln_node_set_int(o.g, o.node, "upper", 2);
    expect_err(&o, KILN_ERR_INVALID_ARGUMENT, "upper");
    one_free(&o);
    one_init(&o, KILN_OP_TRILU, 1, DT(F), SH(ks(1, 5)));
    expect_err(&o, KILN_ERR_SHAPE_MISMATCH, "rank >= 2");
    one_free(&o);
}

static void test_onehot(void **state)
{
    (void)state;
    one o;
    one_init(&o, KILN_OP_ONEHOT, 2, DT(F, I32), SH(ks(2, 2, 3), ks(1, 2)));
    kiln_node_set_int(o.g, o.node, "depth", 10);
    expect_ok(&o, ks(3, 2, 3, 10), I32);
    kiln_node_set_int(o.g, o.node, "axis", 0);
    expect_ok(&o, ks(3, 10, 2, 3), I32);
    kiln_node_set_int(o.g, o.node, "axis", -2);
    expect_ok(&o, ks(3, 2, 10, 3), I32);
    kiln_node_set_int(o.g, o.node, "axis", 3);
    expect_err(&o, KILN_ERR_INVALID_ARGUMENT, "axis");
    kiln_node_set_int(o.g, o.node, "axis", 0);
    kiln_node_set_int(o.g, o.node, "depth", 0);
    expect_err(&o, KILN_ERR_INVALID_ARGUMENT, "depth");
    one_free(&o);
    one_init(&o, KILN_OP_ONEHOT, 2, DT(I64, F), SH(ks(1, 3), ks(1, 3)));
    kiln_node_set_int(o.g, o.node, "depth", 4);
    expect_err(&o, KILN_ERR_SHAPE_MISMATCH, "values");
    one_free(&o);
    one_init(&o, KILN_OP_ONEHOT, 2, DT(I64, F), SH(ks(1, 3), ks(1, 2)));
    expect_err(&o, KILN_ERR_INVALID_ARGUMENT, "missing attribute 'depth'");
    one_free(&o);
}

static void test_reverse_sequence(void **state)
{
    (void)state;
    one o;
    one_init(&o, KILN_OP_REVERSESEQUENCE, 2, DT(F, I64), SH(ks(3, 5, 4, 2), ks(1, 4)));
    expect_ok(&o, ks(3, 5, 4, 2), F);
    kiln_node_set_int(o.g, o.node, "batch_axis", 0);
    expect_err(&o, KILN_ERR_INVALID_ARGUMENT, "time_axis");
    kiln_node_set_int(o.g, o.node, "time_axis", 1);
    expect_err(&o, KILN_ERR_SHAPE_MISMATCH, "sequence_lens");
    one_free(&o);
    one_init(&o, KILN_OP_REVERSESEQUENCE, 2, DT(F, F), SH(ks(2, 5, 4), ks(1, 4)));
    expect_err(&o, KILN_ERR_TYPE_MISMATCH, "sequence_lens");
    one_free(&o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tile),         cmocka_unit_test(test_expand),
        cmocka_unit_test(test_gather_elements), cmocka_unit_test(test_gather_nd),
        cmocka_unit_test(test_scatter),      cmocka_unit_test(test_depth_space),
        cmocka_unit_test(test_trilu),        cmocka_unit_test(test_onehot),
        cmocka_unit_test(test_reverse_sequence),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
