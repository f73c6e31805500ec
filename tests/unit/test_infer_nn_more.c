/* tests/unit/test_infer_nn_more.c: shape inference of ConvTranspose, Resize,
 * GridSample, RNN/GRU/LSTM, LpPool, GlobalMaxPool and MaxPool's Indices
 * output through kiln_graph_infer_shapes: output shapes (the conformance
 * suite's configurations and edge cases) and the error paths, with the status
 * and the words of the message. */
#include <stdio.h>
#include <string.h>

#include "ir/graph.h"
#include "test_support.h"

typedef struct tg {
    kiln_graph *g;
    int node;
} tg;

/* Inputs of the given shapes (rank -1: absent) and dtypes (NULL: float32)
 * feeding one node "n1" with n_out outputs. */
static tg mk_full(kiln_op op, int n_in, const kiln_shape *shapes, const kiln_dtype *dts,
                  int n_out)
{
    tg t;
    assert_int_equal(kiln_graph_create(&t.g), KILN_OK);
    int ids[8];
    for (int i = 0; i < n_in; i++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", i);
        ids[i] = shapes[i].rank < 0
                     ? -1
                     : kiln_graph_add_input(t.g, name, dts ? dts[i] : KILN_DTYPE_FLOAT32,
                                            &shapes[i]);
    }
    t.node = kiln_graph_add_node(t.g, op, "n1", ids, n_in, n_out);
    assert_true(t.node >= 0);
    return t;
}

static tg mk(kiln_op op, int n_in, const kiln_shape *shapes)
{
    return mk_full(op, n_in, shapes, NULL, 1);
}

static void check_out(tg *t, int k, kiln_dtype dt, const kiln_shape *want)
{
    const kiln_value *o = kiln_graph_value(t->g, kiln_graph_node_output(t->g, t->node, k));
    assert_int_equal(o->dtype, dt);
    if (!kiln_shape_equal(&o->shape, want)) {
        char a[128], b[128];
        fail_msg("output %d shape %s, expected %s", k, kiln_shape_str(&o->shape, a, sizeof a),
                 kiln_shape_str(want, b, sizeof b));
    }
}

static void infer_ok(tg *t)
{
    kiln_error err = {0};
    kiln_status s = kiln_graph_infer_shapes(t->g, &err);
    if (s != KILN_OK)
        fail_msg("inference failed: %s", err.msg);
}

static void expect_ok(tg *t, const kiln_shape *want)
{
    infer_ok(t);
    check_out(t, 0, KILN_DTYPE_FLOAT32, want);
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
        kiln_node_set_ints((t).g, (t).node, name, v_, (int)(sizeof v_ / sizeof v_[0]));           \
    } while (0)
#define SET_FLOATS(t, name, ...)                                                                  \
    do {                                                                                          \
        const float v_[] = {__VA_ARGS__};                                                         \
        kiln_node_set_floats((t).g, (t).node, name, v_, (int)(sizeof v_ / sizeof v_[0]));         \
    } while (0)

/* ---- ConvTranspose -------------------------------------------------------- */

static void test_conv_transpose_shapes(void **state)
{
    (void)state;
    kiln_shape sh[3] = {ks(4, 1, 1, 3, 3), ks(4, 1, 2, 3, 3), ks(1, 2)};
    kiln_shape e = ks(4, 1, 2, 5, 5);
    tg t = mk(KILN_OP_CONVTRANSPOSE, 3, sh);
    expect_ok(&t, &e);
    t = mk(KILN_OP_CONVTRANSPOSE, 2, sh); /* strides 3,2 + output_padding 1,1 */
    SET_INTS(t, "strides", 3, 2);
    SET_INTS(t, "output_padding", 1, 1);
    e = ks(4, 1, 2, 10, 8);
    expect_ok(&t, &e);
    t = mk(KILN_OP_CONVTRANSPOSE, 2, sh); /* output_shape fixes the extents */
    SET_INTS(t, "strides", 3, 2);
    SET_INTS(t, "output_shape", 10, 8);
    expect_ok(&t, &e);
    t = mk(KILN_OP_CONVTRANSPOSE, 2, sh);
    SET_INTS(t, "strides", 3, 2);
    SET_INTS(t, "pads", 1, 2, 1, 2);
    e = ks(4, 1, 2, 7, 3);
    expect_ok(&t, &e);
    t = mk(KILN_OP_CONVTRANSPOSE, 2, sh);
    SET_INTS(t, "strides", 2, 2);
    kiln_node_set_string(t.g, t.node, "auto_pad", "SAME_UPPER");
    e = ks(4, 1, 2, 6, 6);
    expect_ok(&t, &e);
    /* groups: C = 4, W (4, 3, k) with group 2 -> M = 6; 1-D and 3-D */
    kiln_shape g1[2] = {ks(3, 2, 4, 5), ks(3, 4, 3, 2)};
    t = mk(KILN_OP_CONVTRANSPOSE, 2, g1);
    kiln_node_set_int(t.g, t.node, "group", 2);
    SET_INTS(t, "dilations", 3);
    e = ks(3, 2, 6, 8);
    expect_ok(&t, &e);
    kiln_shape g3[2] = {ks(5, 1, 1, 3, 4, 5), ks(5, 1, 2, 3, 3, 3)};
    t = mk(KILN_OP_CONVTRANSPOSE, 2, g3);
    e = ks(5, 1, 2, 5, 6, 7);
    expect_ok(&t, &e);
}

static void test_conv_transpose_errors(void **state)
{
    (void)state;
    kiln_shape sh[3] = {ks(4, 1, 2, 3, 3), ks(4, 2, 2, 3, 3), ks(1, 5)};
    tg t = mk(KILN_OP_CONVTRANSPOSE, 3, sh);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "B has shape [5], expected [2]");
    kiln_shape bad_w[2] = {ks(4, 1, 2, 3, 3), ks(4, 3, 2, 3, 3)};
    t = mk(KILN_OP_CONVTRANSPOSE, 2, bad_w);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "expects W.shape[0] = C");
    kiln_shape rank_w[2] = {ks(4, 1, 2, 3, 3), ks(3, 2, 2, 3)};
    t = mk(KILN_OP_CONVTRANSPOSE, 2, rank_w);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "expected W of rank 4");
    t = mk(KILN_OP_CONVTRANSPOSE, 2, sh);
    kiln_node_set_int(t.g, t.node, "group", 3);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "group 3");
    t = mk(KILN_OP_CONVTRANSPOSE, 2, sh);
    SET_INTS(t, "output_padding", 1, 0);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "output_padding[0] = 1 must be smaller");
    t = mk(KILN_OP_CONVTRANSPOSE, 2, sh);
    SET_INTS(t, "output_shape", 1, 2, 3);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "'output_shape' has 3 entries");
    t = mk(KILN_OP_CONVTRANSPOSE, 2, sh);
    SET_INTS(t, "pads", 3, 3, 3, 3);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "leave no output");
    t = mk(KILN_OP_CONVTRANSPOSE, 2, sh);
    SET_INTS(t, "kernel_shape", 2, 2);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "'kernel_shape'");
    t = mk(KILN_OP_CONVTRANSPOSE, 2, sh);
    kiln_node_set_string(t.g, t.node, "auto_pad", "FULL");
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "auto_pad 'FULL'");
    t = mk(KILN_OP_CONVTRANSPOSE, 2, sh);
    SET_INTS(t, "strides", 0, 1);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "'strides'[0] is 0");
    kiln_dtype d[2] = {KILN_DTYPE_INT32, KILN_DTYPE_FLOAT32};
    t = mk_full(KILN_OP_CONVTRANSPOSE, 2, sh, d, 1);
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "input 0 (X) is int32");
}

/* ---- Resize / GridSample -------------------------------------------------- */

static void test_resize(void **state)
{
    (void)state;
    kiln_shape xs = ks(4, 1, 1, 4, 4), e = ks(4, 1, 1, 2, 2);
    tg t = mk(KILN_OP_RESIZE, 1, &xs);
    SET_FLOATS(t, "scales", 1, 1, 0.6f, 0.6f); /* floor(2.4) */
    expect_ok(&t, &e);
    t = mk(KILN_OP_RESIZE, 1, &xs);
    SET_INTS(t, "sizes", 1, 2, 9, 10);
    e = ks(4, 1, 2, 9, 10);
    expect_ok(&t, &e);
    t = mk(KILN_OP_RESIZE, 1, &xs);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "exactly one of");
    t = mk(KILN_OP_RESIZE, 1, &xs);
    SET_FLOATS(t, "scales", 1, 1, 2, 2);
    SET_INTS(t, "sizes", 1, 1, 8, 8);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "exactly one of");
    t = mk(KILN_OP_RESIZE, 1, &xs);
    SET_FLOATS(t, "scales", 2, 2);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "'scales' has 2 entries");
    t = mk(KILN_OP_RESIZE, 1, &xs);
    SET_FLOATS(t, "scales", 1, 1, 0, 2);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "scales[2] = 0");
    t = mk(KILN_OP_RESIZE, 1, &xs);
    SET_INTS(t, "sizes", 1, 1, -1, 2);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "sizes[2] = -1");
    t = mk(KILN_OP_RESIZE, 1, &xs);
    SET_INTS(t, "sizes", 1, 1, 8, 8);
    kiln_node_set_string(t.g, t.node, "mode", "area");
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "mode 'area'");
    t = mk(KILN_OP_RESIZE, 1, &xs);
    SET_INTS(t, "sizes", 1, 1, 8, 8);
    kiln_node_set_string(t.g, t.node, "coordinate_transformation_mode", "corners");
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "coordinate_transformation_mode 'corners'");
    t = mk(KILN_OP_RESIZE, 1, &xs);
    SET_INTS(t, "sizes", 1, 1, 8, 8);
    kiln_node_set_string(t.g, t.node, "nearest_mode", "up");
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "nearest_mode 'up'");
    t = mk(KILN_OP_RESIZE, 1, &xs);
    SET_INTS(t, "sizes", 1, 1, 8, 8);
    kiln_node_set_string(t.g, t.node, "coordinate_transformation_mode", "tf_crop_and_resize");
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "needs attribute 'roi' with 8 entries");
    t = mk(KILN_OP_RESIZE, 1, &xs);
    SET_INTS(t, "sizes", 1, 1, 8, 8);
    kiln_node_set_int(t.g, t.node, "exclude_outside", 2);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "'exclude_outside' is 2");
    kiln_dtype d[1] = {KILN_DTYPE_INT64};
    t = mk_full(KILN_OP_RESIZE, 1, &xs, d, 1);
    SET_INTS(t, "sizes", 1, 1, 8, 8);
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "is int64");
}

static void test_grid_sample(void **state)
{
    (void)state;
    kiln_shape sh[2] = {ks(4, 2, 3, 4, 5), ks(4, 2, 6, 7, 2)};
    kiln_shape e = ks(4, 2, 3, 6, 7);
    tg t = mk(KILN_OP_GRIDSAMPLE, 2, sh);
    expect_ok(&t, &e);
    kiln_shape bad[2] = {ks(4, 2, 3, 4, 5), ks(4, 1, 6, 7, 2)};
    t = mk(KILN_OP_GRIDSAMPLE, 2, bad);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "grid has shape [1, 6, 7, 2]");
    kiln_shape bad2[2] = {ks(4, 2, 3, 4, 5), ks(4, 2, 6, 7, 3)};
    t = mk(KILN_OP_GRIDSAMPLE, 2, bad2);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "expected (N, H_out, W_out, 2)");
    kiln_shape vol[2] = {ks(5, 1, 1, 2, 2, 2), ks(5, 1, 2, 2, 2, 3)};
    t = mk(KILN_OP_GRIDSAMPLE, 2, vol);
    expect_err(&t, KILN_ERR_UNSUPPORTED, "expected rank 4");
    t = mk(KILN_OP_GRIDSAMPLE, 2, sh);
    kiln_node_set_string(t.g, t.node, "mode", "area");
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "mode 'area'");
    t = mk(KILN_OP_GRIDSAMPLE, 2, sh);
    kiln_node_set_string(t.g, t.node, "padding_mode", "wrap");
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "padding_mode 'wrap'");
    t = mk(KILN_OP_GRIDSAMPLE, 2, sh);
    kiln_node_set_int(t.g, t.node, "align_corners", 5);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "'align_corners' is 5");
}

/* ---- RNN / GRU / LSTM ----------------------------------------------------- */

static void test_recurrent_shapes(void **state)
{
    (void)state;
    /* LSTM, seq 5, batch 3, input 4, hidden 7, bidirectional, all outputs */
    kiln_shape sh[8] = {ks(3, 5, 3, 4), ks(3, 2, 28, 4), ks(3, 2, 28, 7), ks(2, 2, 56),
                        ks(1, 3),       ks(3, 2, 3, 7),  ks(3, 2, 3, 7),  ks(2, 2, 21)};
    kiln_dtype d[8] = {KILN_DTYPE_FLOAT32, KILN_DTYPE_FLOAT32, KILN_DTYPE_FLOAT32,
                       KILN_DTYPE_FLOAT32, KILN_DTYPE_INT32,   KILN_DTYPE_FLOAT32,
                       KILN_DTYPE_FLOAT32, KILN_DTYPE_FLOAT32};
    tg t = mk_full(KILN_OP_LSTM, 8, sh, d, 3);
    kiln_node_set_int(t.g, t.node, "hidden_size", 7);
    kiln_node_set_string(t.g, t.node, "direction", "bidirectional");
    infer_ok(&t);
    kiln_shape y = ks(4, 5, 2, 3, 7), h = ks(3, 2, 3, 7);
    check_out(&t, 0, KILN_DTYPE_FLOAT32, &y);
    check_out(&t, 1, KILN_DTYPE_FLOAT32, &h);
    check_out(&t, 2, KILN_DTYPE_FLOAT32, &h);
    kiln_graph_destroy(t.g);
    /* GRU layout 1: X (batch 3, seq 1, input 2); hidden from W */
    kiln_shape gs[3] = {ks(3, 3, 1, 2), ks(3, 1, 18, 2), ks(3, 1, 18, 6)};
    t = mk_full(KILN_OP_GRU, 3, gs, NULL, 2);
    kiln_node_set_int(t.g, t.node, "layout", 1);
    infer_ok(&t);
    y = ks(4, 3, 1, 1, 6);
    h = ks(3, 3, 1, 6);
    check_out(&t, 0, KILN_DTYPE_FLOAT32, &y);
    check_out(&t, 1, KILN_DTYPE_FLOAT32, &h);
    kiln_graph_destroy(t.g);
    kiln_shape rs[3] = {ks(3, 2, 3, 3), ks(3, 1, 5, 3), ks(3, 1, 5, 5)};
    t = mk(KILN_OP_RNN, 3, rs);
    kiln_node_set_int(t.g, t.node, "hidden_size", 5);
    y = ks(4, 2, 1, 3, 5);
    expect_ok(&t, &y);
}

static void test_recurrent_errors(void **state)
{
    (void)state;
    kiln_shape rs[6] = {ks(3, 2, 3, 3), ks(3, 1, 5, 3), ks(3, 1, 5, 5),
                        ks(2, 1, 10),   ks(1, 3),       ks(3, 1, 3, 5)};
    tg t = mk(KILN_OP_RNN, 3, rs);
    kiln_node_set_int(t.g, t.node, "hidden_size", 4);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "input 1 (W) has shape [1, 5, 3], expected [1, 4, 3]");
    t = mk(KILN_OP_RNN, 3, rs);
    kiln_node_set_string(t.g, t.node, "direction", "bidirectional");
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "expected [2, 5, 3]");
    t = mk(KILN_OP_RNN, 3, rs);
    kiln_node_set_string(t.g, t.node, "direction", "sideways");
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "direction 'sideways'");
    kiln_shape bad_b[4] = {rs[0], rs[1], rs[2], ks(2, 1, 5)};
    t = mk(KILN_OP_RNN, 4, bad_b);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "input 3 (B) has shape [1, 5], expected [1, 10]");
    kiln_shape bad_h[6] = {rs[0], rs[1], rs[2], rs[3], {.rank = -1}, ks(3, 1, 2, 5)};
    t = mk(KILN_OP_RNN, 6, bad_h);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "input 5 (initial_h)");
    kiln_dtype d[6] = {KILN_DTYPE_FLOAT32, KILN_DTYPE_FLOAT32, KILN_DTYPE_FLOAT32,
                       KILN_DTYPE_FLOAT32, KILN_DTYPE_FLOAT32, KILN_DTYPE_FLOAT32};
    t = mk_full(KILN_OP_RNN, 6, rs, d, 1);
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "sequence_lens) is float32");
    t = mk(KILN_OP_RNN, 3, rs);
    kiln_node_set_string(t.g, t.node, "activations", "Tanh,Relu");
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "has 2 entries, expected 1");
    t = mk(KILN_OP_RNN, 3, rs);
    kiln_node_set_string(t.g, t.node, "activations", "Gelu");
    expect_err(&t, KILN_ERR_UNSUPPORTED, "activation 'Gelu'");
    t = mk(KILN_OP_RNN, 3, rs);
    kiln_node_set_float(t.g, t.node, "clip", -1.0f);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "'clip' is -1");
    kiln_shape x2[3] = {ks(2, 3, 3), rs[1], rs[2]};
    t = mk(KILN_OP_RNN, 3, x2);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "expected rank 3");
    kiln_shape ls[3] = {ks(3, 2, 3, 3), ks(3, 1, 10, 3), ks(3, 1, 10, 5)};
    t = mk(KILN_OP_LSTM, 3, ls); /* 10 is not a multiple of 4 gates */
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "input 1 (W)");
}

/* ---- pooling -------------------------------------------------------------- */

static void test_pool_more(void **state)
{
    (void)state;
    kiln_shape xs = ks(4, 1, 1, 5, 5), e = ks(4, 1, 1, 2, 2);
    tg t = mk_full(KILN_OP_MAXPOOL, 1, &xs, NULL, 2);
    SET_INTS(t, "kernel_shape", 2, 2);
    SET_INTS(t, "strides", 2, 2);
    infer_ok(&t);
    check_out(&t, 0, KILN_DTYPE_FLOAT32, &e);
    check_out(&t, 1, KILN_DTYPE_INT64, &e);
    kiln_graph_destroy(t.g);
    kiln_dtype u8[1] = {KILN_DTYPE_UINT8};
    t = mk_full(KILN_OP_MAXPOOL, 1, &xs, u8, 1);
    SET_INTS(t, "kernel_shape", 5, 5);
    SET_INTS(t, "pads", 2, 2, 2, 2);
    infer_ok(&t);
    check_out(&t, 0, KILN_DTYPE_UINT8, &xs);
    kiln_graph_destroy(t.g);
    t = mk_full(KILN_OP_AVERAGEPOOL, 1, &xs, NULL, 2);
    SET_INTS(t, "kernel_shape", 2, 2);
    expect_err(&t, KILN_ERR_INVALID_GRAPH, "2 outputs");
    t = mk(KILN_OP_LPPOOL, 1, &xs);
    SET_INTS(t, "kernel_shape", 3, 3);
    kiln_node_set_int(t.g, t.node, "p", 3);
    kiln_shape e3 = ks(4, 1, 1, 3, 3);
    expect_ok(&t, &e3);
    t = mk(KILN_OP_LPPOOL, 1, &xs);
    SET_INTS(t, "kernel_shape", 3, 3);
    kiln_node_set_int(t.g, t.node, "p", 0);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "'p' is 0");
    t = mk(KILN_OP_LPPOOL, 1, &xs);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "'kernel_shape' is required");
    kiln_shape g = ks(4, 2, 3, 7, 9), ge = ks(4, 2, 3, 1, 1);
    kiln_dtype f64[1] = {KILN_DTYPE_FLOAT64};
    t = mk_full(KILN_OP_GLOBALMAXPOOL, 1, &g, f64, 1);
    infer_ok(&t);
    check_out(&t, 0, KILN_DTYPE_FLOAT64, &ge);
    kiln_graph_destroy(t.g);
    kiln_shape g2 = ks(2, 2, 3);
    t = mk(KILN_OP_GLOBALMAXPOOL, 1, &g2);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "expected rank >= 3");
    kiln_dtype i8[1] = {KILN_DTYPE_INT8};
    t = mk_full(KILN_OP_GLOBALMAXPOOL, 1, &g, i8, 1);
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "is int8");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_transpose_shapes),
        cmocka_unit_test(test_conv_transpose_errors),
        cmocka_unit_test(test_resize),
        cmocka_unit_test(test_grid_sample),
        cmocka_unit_test(test_recurrent_shapes),
        cmocka_unit_test(test_recurrent_errors),
        cmocka_unit_test(test_pool_more),
    };
    return cmocka_run_group_tests_name("unit/infer_nn_more", tests, NULL, NULL);
}
