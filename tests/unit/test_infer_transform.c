/* tests/unit/test_infer_transform.c: shape inference of the data-movement ops
 * (Flatten, Reshape, Transpose, Concat, Split, Slice, Gather, Pad) on one-node
 * graphs through kiln_graph_infer_shapes: expected shapes written out by hand,
 * and every error case (bad attributes, wrong-typed attributes, mismatched
 * shapes and types). */
#include <string.h>

#include "ir/graph.h"
#include "test_support.h"

typedef struct one {
    kiln_graph *g;
    int node;
    kiln_error err;
} one;

/* A graph with inputs x0.. (dtype/shape each) feeding one node named "node"
 * with n_out outputs. */
static void one_init(one *o, kiln_op op, int n_in, const kiln_dtype *dt, const kiln_shape *sh,
                     int n_out)
{
    memset(o, 0, sizeof *o);
    assert_int_equal(kiln_graph_create(&o->g), KILN_OK);
    int ids[8];
    char name[8] = "x0";
    for (int i = 0; i < n_in; i++) {
        name[1] = (char)('0' + i);
        ids[i] = kiln_graph_add_input(o->g, name, dt[i], &sh[i]);
    }
    o->node = kiln_graph_add_node(o->g, op, "node", ids, n_in, n_out);
    assert_true(o->node >= 0);
}

/* Single float32 input of shape `s`. */
static void one_f(one *o, kiln_op op, kiln_shape s, int n_out)
{
    kiln_dtype dt = KILN_DTYPE_FLOAT32;
    one_init(o, op, 1, &dt, &s, n_out);
}

static kiln_status infer(one *o)
{
    return kiln_graph_infer_shapes(o->g, &o->err);
}

static const kiln_shape *oshape(one *o, int k)
{
    return &kiln_graph_value(o->g, kiln_graph_node_output(o->g, o->node, k))->shape;
}

static kiln_dtype odtype(one *o, int k)
{
    return kiln_graph_value(o->g, kiln_graph_node_output(o->g, o->node, k))->dtype;
}

static void assert_shape(const kiln_shape *got, kiln_shape want)
{
    char a[96], b[96];
    if (!kiln_shape_equal(got, &want))
        fail_msg("shape %s, expected %s", kiln_shape_str(got, a, sizeof a),
                 kiln_shape_str(&want, b, sizeof b));
}

static void set_ints(one *o, const char *name, const int64_t *v, int n)
{
    assert_int_equal(kiln_node_set_ints(o->g, o->node, name, v, n), KILN_OK);
}

#define INTS(...) ((const int64_t[]){__VA_ARGS__}), (int)(sizeof((int64_t[]){__VA_ARGS__}) / 8)

static void one_free(one *o)
{
    kiln_graph_destroy(o->g);
}

/* ---- Flatten --------------------------------------------------------------- */

static void test_flatten(void **state)
{
    (void)state;
    static const struct {
        int64_t axis;
        int64_t a, b;
    } cases[] = {{1, 2, 60}, {0, 1, 120}, {-1, 24, 5}, {4, 120, 1}, {-4, 1, 120}, {2, 6, 20}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        one o;
        one_f(&o, KILN_OP_FLATTEN, ks(4, 2, 3, 4, 5), 1);
        if (cases[i].axis != 1) /* 1 is the default */
            kiln_node_set_int(o.g, o.node, "axis", cases[i].axis);
        assert_int_equal(infer(&o), KILN_OK);
        assert_shape(oshape(&o, 0), ks(2, (int)cases[i].a, (int)cases[i].b));
        one_free(&o);
    }
    /* int64 data keeps its type */
    one o;
    kiln_dtype dt = KILN_DTYPE_INT64;
    kiln_shape s = ks(3, 2, 3, 4);
    one_init(&o, KILN_OP_FLATTEN, 1, &dt, &s, 1);
    assert_int_equal(infer(&o), KILN_OK);
    assert_int_equal(odtype(&o, 0), KILN_DTYPE_INT64);
    one_free(&o);
}

static void test_flatten_errors(void **state)
{
    (void)state;
    one o;
    one_f(&o, KILN_OP_FLATTEN, ks(4, 2, 3, 4, 5), 1);
    kiln_node_set_int(o.g, o.node, "axis", 5);
    assert_int_equal(infer(&o), KILN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(o.err.msg, "axis"));
    kiln_node_set_int(o.g, o.node, "axis", -5);
    assert_int_equal(infer(&o), KILN_ERR_INVALID_ARGUMENT);
    kiln_node_set_float(o.g, o.node, "axis", 1.0f);
    assert_int_equal(infer(&o), KILN_ERR_TYPE_MISMATCH);
    one_free(&o);
}

/* ---- Reshape --------------------------------------------------------------- */

static void test_reshape(void **state)
{
    (void)state;
    one o;
    one_f(&o, KILN_OP_RESHAPE, ks(3, 2, 3, 4), 1);
    set_ints(&o, "shape", INTS(0, -1));
    assert_int_equal(infer(&o), KILN_OK);
    assert_shape(oshape(&o, 0), ks(2, 2, 12));
    set_ints(&o, "shape", INTS(4, -1, 2));
    assert_int_equal(infer(&o), KILN_OK);
    assert_shape(oshape(&o, 0), ks(3, 4, 3, 2));
    set_ints(&o, "shape", INTS(0, 0, 2, 2));
    assert_int_equal(infer(&o), KILN_OK);
    assert_shape(oshape(&o, 0), ks(4, 2, 3, 2, 2));
    set_ints(&o, "shape", INTS(24));
    assert_int_equal(infer(&o), KILN_OK);
    assert_shape(oshape(&o, 0), ks(1, 24));
    set_ints(&o, "shape", INTS(-1));
    assert_int_equal(infer(&o), KILN_OK);
    assert_shape(oshape(&o, 0), ks(1, 24));
    one_free(&o);

    /* a one-element tensor to a scalar */
    one_f(&o, KILN_OP_RESHAPE, ks(2, 1, 1), 1);
    set_ints(&o, "shape", NULL, 0);
    assert_int_equal(infer(&o), KILN_OK);
    assert_int_equal(oshape(&o, 0)->rank, 0);
    one_free(&o);

    /* allowzero: 0 is a real zero extent */
    one_f(&o, KILN_OP_RESHAPE, ks(2, 0, 3), 1);
    set_ints(&o, "shape", INTS(3, 0));
    kiln_node_set_int(o.g, o.node, "allowzero", 1);
    assert_int_equal(infer(&o), KILN_OK);
    assert_shape(oshape(&o, 0), ks(2, 3, 0));
    kiln_node_set_int(o.g, o.node, "allowzero", 0); /* now 0 copies dim 1 (3): [3, 3] != 0 elems */
    assert_int_equal(infer(&o), KILN_ERR_SHAPE_MISMATCH);
    one_free(&o);
}

static void test_reshape_errors(void **state)
{
    (void)state;
    one o;
    one_f(&o, KILN_OP_RESHAPE, ks(3, 2, 3, 4), 1);
    assert_int_equal(infer(&o), KILN_ERR_INVALID_ARGUMENT); /* no 'shape' */
    assert_non_null(strstr(o.err.msg, "shape"));
    set_ints(&o, "shape", INTS(5, 5));
    assert_int_equal(infer(&o), KILN_ERR_SHAPE_MISMATCH);
    assert_non_null(strstr(o.err.msg, "24"));
    set_ints(&o, "shape", INTS(5, -1));
    assert_int_equal(infer(&o), KILN_ERR_SHAPE_MISMATCH);
    set_ints(&o, "shape", INTS(-1, -1));
    assert_int_equal(infer(&o), KILN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(o.err.msg, "more than one -1"));
    set_ints(&o, "shape", INTS(-2, -12));
    assert_int_equal(infer(&o), KILN_ERR_INVALID_ARGUMENT);
    set_ints(&o, "shape", INTS(2, 3, 4, 0)); /* 0 beyond the input's rank */
    assert_int_equal(infer(&o), KILN_ERR_SHAPE_MISMATCH);
    kiln_node_set_floats(o.g, o.node, "shape", (const float[]){2, 12}, 2);
    assert_int_equal(infer(&o), KILN_ERR_TYPE_MISMATCH);
    one_free(&o);

    one_f(&o, KILN_OP_RESHAPE, ks(2, 0, 3), 1);
    set_ints(&o, "shape", INTS(0, -1));
    kiln_node_set_int(o.g, o.node, "allowzero", 1);
    assert_int_equal(infer(&o), KILN_ERR_INVALID_ARGUMENT); /* both 0 and -1 */
    one_free(&o);
}

/* ---- Transpose ------------------------------------------------------------- */

static void test_transpose(void **state)
{
    (void)state;
    one o;
    one_f(&o, KILN_OP_TRANSPOSE, ks(3, 2, 3, 4), 1);
    assert_int_equal(infer(&o), KILN_OK);
    assert_shape(oshape(&o, 0), ks(3, 4, 3, 2)); /* default: reversed */
    set_ints(&o, "perm", INTS(0, 2, 1));
    assert_int_equal(infer(&o), KILN_OK);
    assert_shape(oshape(&o, 0), ks(3, 2, 4, 3));
    set_ints(&o, "perm", INTS(2, 0, 1));
    assert_int_equal(infer(&o), KILN_OK);
    assert_shape(oshape(&o, 0), ks(3, 4, 2, 3));

    set_ints(&o, "perm", INTS(0, 0, 1));
    assert_int_equal(infer(&o), KILN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(o.err.msg, "perm"));
    set_ints(&o, "perm", INTS(0, 1));
    assert_int_equal(infer(&o), KILN_ERR_INVALID_ARGUMENT);
    set_ints(&o, "perm", INTS(0, 1, 3));
    assert_int_equal(infer(&o), KILN_ERR_INVALID_ARGUMENT);
    set_ints(&o, "perm", INTS(0, -1, 1));
    assert_int_equal(infer(&o), KILN_ERR_INVALID_ARGUMENT);
    kiln_node_set_int(o.g, o.node, "perm", 0);
    assert_int_equal(infer(&o), KILN_ERR_TYPE_MISMATCH);
    one_free(&o);
}

/* ---- Concat ---------------------------------------------------------------- */

static void test_concat(void **state)
{
    (void)state;
    one o;
    kiln_dtype dt[3] = {KILN_DTYPE_FLOAT32, KILN_DTYPE_FLOAT32, KILN_DTYPE_FLOAT32};
    kiln_shape sh[3] = {ks(3, 2, 5, 3), ks(3, 2, 5, 1), ks(3, 2, 5, 4)};
    one_init(&o, KILN_OP_CONCAT, 3, dt, sh, 1);
    kiln_node_set_int(o.g, o.node, "axis", -1);
    assert_int_equal(infer(&o), KILN_OK);
    assert_shape(oshape(&o, 0), ks(3, 2, 5, 8));
    kiln_node_set_int(o.g, o.node, "axis", 2);
    assert_int_equal(infer(&o), KILN_OK);
    assert_shape(oshape(&o, 0), ks(3, 2, 5, 8));
    kiln_node_set_int(o.g, o.node, "axis", 1); /* dims 2 differ */
    assert_int_equal(infer(&o), KILN_ERR_SHAPE_MISMATCH);
    assert_non_null(strstr(o.err.msg, "input 1"));
    kiln_node_set_int(o.g, o.node, "axis", 3);
    assert_int_equal(infer(&o), KILN_ERR_INVALID_ARGUMENT);
    kiln_node_set_int(o.g, o.node, "axis", -4);
    assert_int_equal(infer(&o), KILN_ERR_INVALID_ARGUMENT);
    one_free(&o);

    /* a single input */
    kiln_dtype i64 = KILN_DTYPE_INT64;
    kiln_shape s1 = ks(1, 7);
    one_init(&o, KILN_OP_CONCAT, 1, &i64, &s1, 1);
    kiln_node_set_int(o.g, o.node, "axis", 0);
    assert_int_equal(infer(&o), KILN_OK);
    assert_shape(oshape(&o, 0), ks(1, 7));
    assert_int_equal(odtype(&o, 0), KILN_DTYPE_INT64);
    one_free(&o);
}

static void test_concat_errors(void **state)
{
    (void)state;
    one o;
    kiln_dtype dt[2] = {KILN_DTYPE_FLOAT32, KILN_DTYPE_FLOAT32};
    kiln_shape sh[2] = {ks(2, 2, 3), ks(2, 3, 3)};
    one_init(&o, KILN_OP_CONCAT, 2, dt, sh, 1);
    assert_int_equal(infer(&o), KILN_ERR_INVALID_ARGUMENT); /* axis is required */
    assert_non_null(strstr(o.err.msg, "axis"));
    kiln_node_set_int(o.g, o.node, "axis", 1);
    assert_int_equal(infer(&o), KILN_ERR_SHAPE_MISMATCH); /* dim 0: 2 vs 3 */
    kiln_node_set_int(o.g, o.node, "axis", 0);
    assert_int_equal(infer(&o), KILN_OK);
    assert_shape(oshape(&o, 0), ks(2, 5, 3));
    one_free(&o);

    kiln_dtype dt2[2] = {KILN_DTYPE_FLOAT32, KILN_DTYPE_INT32};
    kiln_shape sh2[2] = {ks(2, 2, 3), ks(2, 2, 3)};
    one_init(&o, KILN_OP_CONCAT, 2, dt2, sh2, 1);
    kiln_node_set_int(o.g, o.node, "axis", 0);
    assert_int_equal(infer(&o), KILN_ERR_TYPE_MISMATCH);
    one_free(&o);

    kiln_shape sh3[2] = {ks(2, 2, 3), ks(3, 2, 3, 1)};
    one_init(&o, KILN_OP_CONCAT, 2, dt, sh3, 1);
    kiln_node_set_int(o.g, o.node, "axis", 0);
    assert_int_equal(infer(&o), KILN_ERR_SHAPE_MISMATCH); /* ranks differ */
    one_free(&o);
}

/* ---- Split ----------------------------------------------------------------- */

static void test_split(void **state)
{
    (void)state;
    one o;
    one_f(&o, KILN_OP_SPLIT, ks(2, 6, 4), 3);
    set_ints(&o, "split", INTS(1, 2, 3));
    assert_int_equal(infer(&o), KILN_OK);
    assert_shape(oshape(&o, 0), ks(2, 1, 4));
    assert_shape(oshape(&o, 1), ks(2, 2, 4));
    assert_shape(oshape(&o, 2), ks(2, 3, 4));
    one_free(&o);

    /* no 'split': ceil(7/3) = 3, 3, then the remaining 1 */
    one_f(&o, KILN_OP_SPLIT, ks(2, 7, 2), 3);
    assert_int_equal(infer(&o), KILN_OK);
    assert_shape(oshape(&o, 0), ks(2, 3, 2));
    assert_shape(oshape(&o, 1), ks(2, 3, 2));
    assert_shape(oshape(&o, 2), ks(2, 1, 2));
    one_free(&o);

    one_f(&o, KILN_OP_SPLIT, ks(2, 2, 4), 2);
    kiln_node_set_int(o.g, o.node, "axis", -1);
    assert_int_equal(infer(&o), KILN_OK);
    assert_shape(oshape(&o, 0), ks(2, 2, 2));
    assert_shape(oshape(&o, 1), ks(2, 2, 2));
    set_ints(&o, "split", INTS(0, 4)); /* empty parts are allowed */
    assert_int_equal(infer(&o), KILN_OK);
    assert_shape(oshape(&o, 0), ks(2, 2, 0));
    assert_shape(oshape(&o, 1), ks(2, 2, 4));
    one_free(&o);
}

static void test_split_errors(void **state)
{
    (void)state;
    one o;
    one_f(&o, KILN_OP_SPLIT, ks(2, 6, 4), 3);
    set_ints(&o, "split", INTS(1, 2, 2));
    assert_int_equal(infer(&o), KILN_ERR_SHAPE_MISMATCH);
    assert_non_null(strstr(o.err.msg, "sums to 5"));
    set_ints(&o, "split", INTS(3, 3));
    assert_int_equal(infer(&o), KILN_ERR_INVALID_ARGUMENT); /* 2 entries, 3 outputs */
    set_ints(&o, "split", INTS(7, -1, 0));
    assert_int_equal(infer(&o), KILN_ERR_INVALID_ARGUMENT);
    set_ints(&o, "split", INTS(2, 2, 2));
    kiln_node_set_int(o.g, o.node, "axis", 2);
    assert_int_equal(infer(&o), KILN_ERR_INVALID_ARGUMENT);
    kiln_node_set_string(o.g, o.node, "axis", "0");
    assert_int_equal(infer(&o), KILN_ERR_TYPE_MISMATCH);
    one_free(&o);

    /* 5 into 4 parts of ceil(5/4) = 2 leaves nothing for the last two */
    one_f(&o, KILN_OP_SPLIT, ks(1, 5), 4);
    assert_int_equal(infer(&o), KILN_ERR_SHAPE_MISMATCH);
    one_free(&o);
}

/* ---- Slice ----------------------------------------------------------------- */

static void test_slice(void **state)
{
    (void)state;
    one o;
    one_f(&o, KILN_OP_SLICE, ks(2, 10, 8), 1);
    set_ints(&o, "starts", INTS(1, -3));
    set_ints(&o, "ends", INTS(INT64_MAX, -1));
    assert_int_equal(infer(&o), KILN_OK);
    assert_shape(oshape(&o, 0), ks(2, 9, 2));

    /* one axis, negative; the other dim untouched */
    set_ints(&o, "starts", INTS(2));
    set_ints(&o, "ends", INTS(7));
    set_ints(&o, "axes", INTS(-1));
    assert_int_equal(infer(&o), KILN_OK);
    assert_shape(oshape(&o, 0), ks(2, 10, 5));

    /* full reverse with INT64_MIN end */
    set_ints(&o, "starts", INTS(-1));
    set_ints(&o, "ends", INTS(INT64_MIN));
    set_ints(&o, "axes", INTS(0));
    set_ints(&o, "steps", INTS(-1));
    assert_int_equal(infer(&o), KILN_OK);
    assert_shape(oshape(&o, 0), ks(2, 10, 8));

    /* 8, 5, 2 */
    set_ints(&o, "starts", INTS(8));
    set_ints(&o, "ends", INTS(1));
    set_ints(&o, "steps", INTS(-3));
    assert_int_equal(infer(&o), KILN_OK);
    assert_shape(oshape(&o, 0), ks(2, 3, 8));

    /* start clamped to the end: empty */
    set_ints(&o, "starts", INTS(100));
    set_ints(&o, "ends", INTS(200));
    set_ints(&o, "steps", INTS(1));
    assert_int_equal(infer(&o), KILN_OK);
    assert_shape(oshape(&o, 0), ks(2, 0, 8));

    /* huge steps take one element; -100 start clamps to 0 */
    set_ints(&o, "starts", INTS(-100, 0));
    set_ints(&o, "ends", INTS(100, INT64_MIN));
    set_ints(&o, "axes", INTS(0, 1));
    set_ints(&o, "steps", INTS(INT64_MAX, INT64_MIN));
    assert_int_equal(infer(&o), KILN_OK);
    assert_shape(oshape(&o, 0), ks(2, 1, 1));
    /* 0:2 on an end of -1 with step -1 is empty */
    set_ints(&o, "starts", INTS(0, 2));
    set_ints(&o, "ends", INTS(10, -1));
    set_ints(&o, "steps", INTS(1, -1));
    assert_int_equal(infer(&o), KILN_OK);
    assert_shape(oshape(&o, 0), ks(2, 10, 0));
    one_free(&o);
}

static void test_slice_errors(void **state)
{
    (void)state;
    one o;
    one_f(&o, KILN_OP_SLICE, ks(2, 10, 8), 1);
    set_ints(&o, "starts", INTS(0));
    assert_int_equal(infer(&o), KILN_ERR_INVALID_ARGUMENT); /* no ends */
    assert_non_null(strstr(o.err.msg, "ends"));
    set_ints(&o, "ends", INTS(5, 5));
    assert_int_equal(infer(&o), KILN_ERR_INVALID_ARGUMENT); /* lengths differ */
    set_ints(&o, "ends", INTS(5));
    set_ints(&o, "steps", INTS(0));
    assert_int_equal(infer(&o), KILN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(o.err.msg, "steps"));
    set_ints(&o, "steps", INTS(1));
    set_ints(&o, "axes", INTS(2));
    assert_int_equal(infer(&o), KILN_ERR_INVALID_ARGUMENT);
    set_ints(&o, "starts", INTS(0, 0));
    set_ints(&o, "ends", INTS(1, 1));
    set_ints(&o, "steps", INTS(1, 1));
    set_ints(&o, "axes", INTS(1, -1)); /* the same axis twice */
    assert_int_equal(infer(&o), KILN_ERR_INVALID_ARGUMENT);
    set_ints(&o, "axes", INTS(0, 1));
    assert_int_equal(infer(&o), KILN_OK);
    assert_shape(oshape(&o, 0), ks(2, 1, 1));
    kiln_node_set_floats(o.g, o.node, "starts", (const float[]){0, 0}, 2);
    assert_int_equal(infer(&o), KILN_ERR_TYPE_MISMATCH);
    one_free(&o);
}

/* ---- Gather ---------------------------------------------------------------- */

static void test_gather(void **state)
{
    (void)state;
    one o;
    kiln_dtype dt[2] = {KILN_DTYPE_FLOAT32, KILN_DTYPE_INT64};
    kiln_shape sh[2] = {ks(3, 5, 4, 3), ks(2, 2, 2)};
    one_init(&o, KILN_OP_GATHER, 2, dt, sh, 1);
    assert_int_equal(infer(&o), KILN_OK);
    assert_shape(oshape(&o, 0), ks(4, 2, 2, 4, 3));
    kiln_node_set_int(o.g, o.node, "axis", 1);
    assert_int_equal(infer(&o), KILN_OK);
    assert_shape(oshape(&o, 0), ks(4, 5, 2, 2, 3));
    kiln_node_set_int(o.g, o.node, "axis", -1);
    assert_int_equal(infer(&o), KILN_OK);
    assert_shape(oshape(&o, 0), ks(4, 5, 4, 2, 2));
    kiln_node_set_int(o.g, o.node, "axis", 3);
    assert_int_equal(infer(&o), KILN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(o.err.msg, "axis"));
    kiln_node_set_int(o.g, o.node, "axis", -4);
    assert_int_equal(infer(&o), KILN_ERR_INVALID_ARGUMENT);
    one_free(&o);

    /* scalar indices drop the axis; int32 indices, uint8 data */
    kiln_dtype dt2[2] = {KILN_DTYPE_UINT8, KILN_DTYPE_INT32};
    kiln_shape sh2[2] = {ks(2, 6, 7), {.rank = 0}};
    one_init(&o, KILN_OP_GATHER, 2, dt2, sh2, 1);
    assert_int_equal(infer(&o), KILN_OK);
    assert_shape(oshape(&o, 0), ks(1, 7));
    assert_int_equal(odtype(&o, 0), KILN_DTYPE_UINT8);
    one_free(&o);

    /* float indices */
    kiln_dtype dt3[2] = {KILN_DTYPE_FLOAT32, KILN_DTYPE_FLOAT32};
    one_init(&o, KILN_OP_GATHER, 2, dt3, sh, 1);
    assert_int_equal(infer(&o), KILN_ERR_TYPE_MISMATCH);
    assert_non_null(strstr(o.err.msg, "indices"));
    one_free(&o);
}

/* ---- Pad ------------------------------------------------------------------- */

static void test_pad(void **state)
{
    (void)state;
    one o;
    one_f(&o, KILN_OP_PAD, ks(2, 2, 3), 1);
    set_ints(&o, "pads", INTS(1, 0, 1, 2));
    assert_int_equal(infer(&o), KILN_OK);
    assert_shape(oshape(&o, 0), ks(2, 4, 5));
    set_ints(&o, "pads", INTS(0, -1, 0, -1));
    assert_int_equal(infer(&o), KILN_OK);
    assert_shape(oshape(&o, 0), ks(2, 2, 1));
    kiln_node_set_string(o.g, o.node, "mode", "reflect");
    set_ints(&o, "pads", INTS(1, 2, 1, 2));
    assert_int_equal(infer(&o), KILN_OK);
    assert_shape(oshape(&o, 0), ks(2, 4, 7));
    kiln_node_set_string(o.g, o.node, "mode", "edge");
    set_ints(&o, "pads", INTS(5, 0, 0, 9));
    assert_int_equal(infer(&o), KILN_OK);
    assert_shape(oshape(&o, 0), ks(2, 7, 12));
    one_free(&o);
}

static void test_pad_errors(void **state)
{
    (void)state;
    one o;
    one_f(&o, KILN_OP_PAD, ks(2, 2, 3), 1);
    assert_int_equal(infer(&o), KILN_ERR_INVALID_ARGUMENT); /* pads is required */
    set_ints(&o, "pads", INTS(1, 1));
    assert_int_equal(infer(&o), KILN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(o.err.msg, "expected 4"));
    set_ints(&o, "pads", INTS(0, -2, 0, -2)); /* crops 4 of 3 */
    assert_int_equal(infer(&o), KILN_ERR_INVALID_ARGUMENT);
    set_ints(&o, "pads", INTS(0, 3, 0, 0));
    kiln_node_set_string(o.g, o.node, "mode", "reflect"); /* reflect needs dim > pad */
    assert_int_equal(infer(&o), KILN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(o.err.msg, "reflect"));
    set_ints(&o, "pads", INTS(0, 2, 0, 0));
    assert_int_equal(infer(&o), KILN_OK);
    kiln_node_set_string(o.g, o.node, "mode", "wrap");
    assert_int_equal(infer(&o), KILN_ERR_UNSUPPORTED);
    kiln_node_set_string(o.g, o.node, "mode", "constant");
    kiln_node_set_int(o.g, o.node, "value", 1);
    assert_int_equal(infer(&o), KILN_ERR_TYPE_MISMATCH);
    one_free(&o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flatten),   cmocka_unit_test(test_flatten_errors),
        cmocka_unit_test(test_reshape),   cmocka_unit_test(test_reshape_errors),
        cmocka_unit_test(test_transpose), cmocka_unit_test(test_concat),
        cmocka_unit_test(test_concat_errors), cmocka_unit_test(test_split),
        cmocka_unit_test(test_split_errors),  cmocka_unit_test(test_slice),
        cmocka_unit_test(test_slice_errors),  cmocka_unit_test(test_gather),
        cmocka_unit_test(test_pad),           cmocka_unit_test(test_pad_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
