/* tests/unit/test_infer_nn.c: shape inference of the nn op family (Conv,
 * BatchNormalization, MaxPool/AveragePool, GlobalAveragePool, Gemm, MatMul,
 * Softmax, LayerNormalization, ReduceMean) through kiln_graph_infer_shapes:
 * output shapes of real-network layers and edge cases, and every error path
 * (ranks, channels, groups, attribute lengths/ranges/types, dtypes, kernels
 * larger than the padded input, incompatible batch dims, bad axes), with the
 * status and the words of the message. */
#include <stdio.h>
#include <string.h>

#include "ir/graph.h"
#include "test_support.h"

typedef struct tg {
    kiln_graph *g;
    int node;
} tg;

/* A graph with inputs of the given shapes (rank -1: absent optional input)
 * and dtypes (NULL: all float32) feeding one node named "n1". */
static tg mk_typed(kiln_op op, int n_in, const kiln_shape *shapes, const kiln_dtype *dts)
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
    t.node = kiln_graph_add_node(t.g, op, "n1", ids, n_in, 1);
    assert_true(t.node >= 0);
    return t;
}

static tg mk(kiln_op op, int n_in, const kiln_shape *shapes)
{
    return mk_typed(op, n_in, shapes, NULL);
}

static void expect_ok(tg *t, const kiln_shape *want)
{
    kiln_error err = {0};
    kiln_status s = kiln_graph_infer_shapes(t->g, &err);
    if (s != KILN_OK)
        fail_msg("inference failed: %s", err.msg);
    const kiln_value *o = kiln_graph_value(t->g, kiln_graph_node_output(t->g, t->node, 0));
    assert_int_equal(o->dtype, KILN_DTYPE_FLOAT32);
    if (!kiln_shape_equal(&o->shape, want)) {
        char a[128], b[128];
        fail_msg("output shape %s, expected %s", kiln_shape_str(&o->shape, a, sizeof a),
                 kiln_shape_str(want, b, sizeof b));
    }
    kiln_graph_destroy(t->g);
}

/* Inference fails with `status` and a message containing `words` (and the
 * node name, added by the driver). */
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

/* ---- Conv ----------------------------------------------------------------- */

static tg conv2d(int c, int h, int w, int m, int cw, int k)
{
    kiln_shape sh[2] = {ks(4, 1, c, h, w), ks(4, m, cw, k, k)};
    return mk(KILN_OP_CONV, 2, sh);
}

static void test_conv_shapes(void **state)
{
    (void)state;
    /* ResNet stem: 7x7/2 pad 3 */
    tg t = conv2d(3, 224, 224, 64, 3, 7);
    SET_INTS(t, "strides", 2, 2);
    SET_INTS(t, "pads", 3, 3, 3, 3);
    SET_INTS(t, "kernel_shape", 7, 7);
    kiln_shape e = ks(4, 1, 64, 112, 112);
    expect_ok(&t, &e);
    /* with bias, 1x1 */
    kiln_shape sh[3] = {ks(4, 2, 256, 56, 56), ks(4, 64, 256, 1, 1), ks(1, 64)};
    t = mk(KILN_OP_CONV, 3, sh);
    e = ks(4, 2, 64, 56, 56);
    expect_ok(&t, &e);
    /* absent optional bias */
    sh[2].rank = -1;
    t = mk(KILN_OP_CONV, 3, sh);
    expect_ok(&t, &e);
    /* depthwise 3x3/2 pad 1 */
    t = conv2d(32, 112, 112, 32, 1, 3);
    kiln_node_set_int(t.g, t.node, "group", 32);
    SET_INTS(t, "strides", 2, 2);
    SET_INTS(t, "pads", 1, 1, 1, 1);
    e = ks(4, 1, 32, 56, 56);
    expect_ok(&t, &e);
    /* asymmetric pads and dilation: H (10+1+2-5)/1+1 = 9, W (10+0+0-5)/1+1 = 6 */
    t = conv2d(2, 10, 10, 4, 2, 3);
    SET_INTS(t, "pads", 1, 0, 2, 0);
    SET_INTS(t, "dilations", 2, 2);
    e = ks(4, 1, 4, 9, 6);
    expect_ok(&t, &e);
    /* SAME_UPPER / SAME_LOWER: ceil(in / stride) */
    t = conv2d(2, 7, 8, 4, 2, 3);
    kiln_node_set_string(t.g, t.node, "auto_pad", "SAME_UPPER");
    SET_INTS(t, "strides", 2, 3);
    e = ks(4, 1, 4, 4, 3);
    expect_ok(&t, &e);
    t = conv2d(2, 7, 8, 4, 2, 3);
    kiln_node_set_string(t.g, t.node, "auto_pad", "SAME_LOWER");
    e = ks(4, 1, 4, 7, 8);
    expect_ok(&t, &e);
    t = conv2d(2, 7, 8, 4, 2, 3);
    kiln_node_set_string(t.g, t.node, "auto_pad", "VALID");
    SET_INTS(t, "strides", 2, 2);
    e = ks(4, 1, 4, 3, 3);
    expect_ok(&t, &e);
    /* 1-D and 3-D */
    kiln_shape s1[2] = {ks(3, 1, 4, 20), ks(3, 8, 4, 5)};
    t = mk(KILN_OP_CONV, 2, s1);
    SET_INTS(t, "strides", 3);
    e = ks(3, 1, 8, 6);
    expect_ok(&t, &e);
    kiln_shape s3[2] = {ks(5, 1, 2, 8, 9, 10), ks(5, 3, 2, 3, 3, 3)};
    t = mk(KILN_OP_CONV, 2, s3);
    SET_INTS(t, "pads", 1, 1, 1, 1, 1, 1);
    SET_INTS(t, "strides", 2, 2, 2);
    e = ks(5, 1, 3, 4, 5, 5);
    expect_ok(&t, &e);
}

static void test_conv_errors(void **state)
{
    (void)state;
    kiln_shape r2[2] = {ks(2, 1, 3), ks(2, 4, 3)};
    tg t = mk(KILN_OP_CONV, 2, r2);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "expected rank 3 to 5");
    kiln_shape r6[2] = {ks(6, 1, 1, 2, 2, 2, 2), ks(6, 1, 1, 1, 1, 1, 1)};
    t = mk(KILN_OP_CONV, 2, r6);
    expect_err(&t, KILN_ERR_UNSUPPORTED, "rank 3 to 5");
    kiln_shape wr[2] = {ks(4, 1, 3, 8, 8), ks(3, 4, 3, 3)};
    t = mk(KILN_OP_CONV, 2, wr);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "expected W of rank 4");
    /* channel mismatch: C 3 vs W.C 4 */
    t = conv2d(3, 8, 8, 8, 4, 3);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "has 3 channels");
    /* C 8 vs W.C 4 * group 1 */
    t = conv2d(8, 8, 8, 8, 4, 3);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "(W.shape[1] * group)");
    /* group not dividing M */
    t = conv2d(4, 8, 8, 5, 2, 3);
    kiln_node_set_int(t.g, t.node, "group", 2);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "not a positive multiple of group 2");
    t = conv2d(4, 8, 8, 4, 4, 3);
    kiln_node_set_int(t.g, t.node, "group", 0);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "'group' is 0");
    /* bad pads length, negative pad, zero stride */
    t = conv2d(3, 8, 8, 4, 3, 3);
    SET_INTS(t, "pads", 1, 1, 1);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "'pads' has 3 entries, expected 4");
    t = conv2d(3, 8, 8, 4, 3, 3);
    SET_INTS(t, "pads", 1, -1, 1, 1);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "'pads'[1] is -1");
    t = conv2d(3, 8, 8, 4, 3, 3);
    SET_INTS(t, "strides", 1, 0);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "'strides'[1] is 0");
    t = conv2d(3, 8, 8, 4, 3, 3);
    SET_INTS(t, "dilations", 1);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "'dilations' has 1 entries");
    /* kernel larger than the padded input */
    t = conv2d(3, 5, 5, 4, 3, 7);
    SET_INTS(t, "pads", 0, 0, 1, 0);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "larger than the padded input 6");
    t = conv2d(3, 5, 5, 4, 3, 3);
    SET_INTS(t, "dilations", 3, 1); /* extent 7 */
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "larger than the padded input");
    /* kernel_shape disagreeing with W */
    t = conv2d(3, 8, 8, 4, 3, 3);
    SET_INTS(t, "kernel_shape", 3, 5);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "kernel_shape");
    /* bias of the wrong length */
    kiln_shape bb[3] = {ks(4, 1, 3, 8, 8), ks(4, 4, 3, 3, 3), ks(1, 5)};
    t = mk(KILN_OP_CONV, 3, bb);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "B has shape [5], expected [4]");
    /* auto_pad */
    t = conv2d(3, 8, 8, 4, 3, 3);
    kiln_node_set_string(t.g, t.node, "auto_pad", "SAME");
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "auto_pad 'SAME'");
    t = conv2d(3, 8, 8, 4, 3, 3);
    kiln_node_set_string(t.g, t.node, "auto_pad", "SAME_UPPER");
    SET_INTS(t, "pads", 1, 1, 1, 1);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "cannot be combined with auto_pad");
    /* dtypes */
    kiln_shape sh[2] = {ks(4, 1, 3, 8, 8), ks(4, 4, 3, 3, 3)};
    kiln_dtype d1[2] = {KILN_DTYPE_INT64, KILN_DTYPE_FLOAT32};
    t = mk_typed(KILN_OP_CONV, 2, sh, d1);
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "input 0 (X) is int64, expected float32");
    kiln_dtype d2[2] = {KILN_DTYPE_FLOAT32, KILN_DTYPE_FLOAT16};
    t = mk_typed(KILN_OP_CONV, 2, sh, d2);
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "input 1 (W) is float16");
    /* wrong-typed attributes */
    t = conv2d(3, 8, 8, 4, 3, 3);
    kiln_node_set_int(t.g, t.node, "strides", 2);
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "'strides' is int, expected ints");
    t = conv2d(3, 8, 8, 4, 3, 3);
    kiln_node_set_float(t.g, t.node, "group", 1.0f);
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "'group' is float, expected int");
    t = conv2d(3, 8, 8, 4, 3, 3);
    kiln_node_set_int(t.g, t.node, "auto_pad", 0);
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "'auto_pad' is int, expected string");
}

/* ---- BatchNormalization ------------------------------------------------------ */

static void test_batchnorm(void **state)
{
    (void)state;
    kiln_shape sh[5] = {ks(4, 2, 16, 7, 7), ks(1, 16), ks(1, 16), ks(1, 16), ks(1, 16)};
    tg t = mk(KILN_OP_BATCHNORM, 5, sh);
    expect_ok(&t, &sh[0]);
    kiln_shape s2[5] = {ks(2, 4, 3), ks(1, 3), ks(1, 3), ks(1, 3), ks(1, 3)};
    t = mk(KILN_OP_BATCHNORM, 5, s2);
    expect_ok(&t, &s2[0]);
    sh[3] = ks(1, 15);
    t = mk(KILN_OP_BATCHNORM, 5, sh);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "input 3 (input_mean) has shape [15], expected [16]");
    sh[3] = ks(2, 1, 16);
    t = mk(KILN_OP_BATCHNORM, 5, sh);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "input_mean");
    kiln_shape s1[5] = {ks(1, 4), ks(1, 4), ks(1, 4), ks(1, 4), ks(1, 4)};
    t = mk(KILN_OP_BATCHNORM, 5, s1);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "expected rank >= 2");
    t = mk(KILN_OP_BATCHNORM, 5, s2);
    kiln_node_set_int(t.g, t.node, "training_mode", 1);
    expect_err(&t, KILN_ERR_UNSUPPORTED, "training_mode");
    t = mk(KILN_OP_BATCHNORM, 5, s2);
    kiln_node_set_int(t.g, t.node, "epsilon", 1);
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "'epsilon' is int, expected float");
    kiln_dtype d[5] = {KILN_DTYPE_FLOAT32, KILN_DTYPE_FLOAT32, KILN_DTYPE_FLOAT32,
                       KILN_DTYPE_FLOAT32, KILN_DTYPE_FLOAT64};
    t = mk_typed(KILN_OP_BATCHNORM, 5, s2, d);
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "input 4 (input_var) is float64");
}

/* ---- pooling ------------------------------------------------------------------ */

static tg pool2d(kiln_op op, int c, int h, int w)
{
    kiln_shape xs = ks(4, 1, c, h, w);
    return mk(op, 1, &xs);
}

static void test_pool_shapes(void **state)
{
    (void)state;
    /* ResNet max pool 3x3/2 pad 1 */
    tg t = pool2d(KILN_OP_MAXPOOL, 64, 112, 112);
    SET_INTS(t, "kernel_shape", 3, 3);
    SET_INTS(t, "strides", 2, 2);
    SET_INTS(t, "pads", 1, 1, 1, 1);
    kiln_shape e = ks(4, 1, 64, 56, 56);
    expect_ok(&t, &e);
    /* VGG 2x2/2 */
    t = pool2d(KILN_OP_MAXPOOL, 512, 14, 14);
    SET_INTS(t, "kernel_shape", 2, 2);
    SET_INTS(t, "strides", 2, 2);
    e = ks(4, 1, 512, 7, 7);
    expect_ok(&t, &e);
    /* ceil_mode: H in 5, k 2, s 2 -> 3 (floor 2); W in 5, pads 1+1, k 2, s 3 ->
     * ceil gives 3 but the last window would start at 6 >= 5 + 1: 2 */
    t = pool2d(KILN_OP_AVERAGEPOOL, 3, 5, 5);
    SET_INTS(t, "kernel_shape", 2, 2);
    SET_INTS(t, "strides", 2, 3);
    SET_INTS(t, "pads", 0, 1, 0, 1);
    kiln_node_set_int(t.g, t.node, "ceil_mode", 1);
    e = ks(4, 1, 3, 3, 2);
    expect_ok(&t, &e);
    t = pool2d(KILN_OP_AVERAGEPOOL, 3, 5, 5);
    SET_INTS(t, "kernel_shape", 2, 2);
    SET_INTS(t, "strides", 2, 3);
    SET_INTS(t, "pads", 0, 1, 0, 1);
    e = ks(4, 1, 3, 2, 2);
    expect_ok(&t, &e);
    /* k 3, s 2, ceil_mode: H 147 -> 73 either way; W 148 -> 74 (floor would give 73) */
    t = pool2d(KILN_OP_MAXPOOL, 1, 147, 148);
    SET_INTS(t, "kernel_shape", 3, 3);
    SET_INTS(t, "strides", 2, 2);
    kiln_node_set_int(t.g, t.node, "ceil_mode", 1);
    e = ks(4, 1, 1, 73, 74);
    expect_ok(&t, &e);
    /* SAME_UPPER ignores ceil_mode: ceil(in / s) */
    t = pool2d(KILN_OP_MAXPOOL, 1, 9, 10);
    SET_INTS(t, "kernel_shape", 3, 3);
    SET_INTS(t, "strides", 2, 2);
    kiln_node_set_string(t.g, t.node, "auto_pad", "SAME_UPPER");
    e = ks(4, 1, 1, 5, 5);
    expect_ok(&t, &e);
    /* 1-D and 3-D */
    kiln_shape x1 = ks(3, 2, 3, 9);
    t = mk(KILN_OP_AVERAGEPOOL, 1, &x1);
    SET_INTS(t, "kernel_shape", 3);
    SET_INTS(t, "strides", 2);
    e = ks(3, 2, 3, 4);
    expect_ok(&t, &e);
    kiln_shape x3 = ks(5, 1, 2, 4, 6, 8);
    t = mk(KILN_OP_MAXPOOL, 1, &x3);
    SET_INTS(t, "kernel_shape", 2, 2, 2);
    SET_INTS(t, "strides", 2, 2, 2);
    e = ks(5, 1, 2, 2, 3, 4);
    expect_ok(&t, &e);
}

static void test_pool_errors(void **state)
{
    (void)state;
    tg t = pool2d(KILN_OP_MAXPOOL, 4, 8, 8);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "'kernel_shape' is required");
    t = pool2d(KILN_OP_MAXPOOL, 4, 8, 8);
    SET_INTS(t, "kernel_shape", 3);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "'kernel_shape' has 1 entries, expected 2");
    t = pool2d(KILN_OP_MAXPOOL, 4, 8, 8);
    SET_INTS(t, "kernel_shape", 3, 0);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "kernel extent 0");
    t = pool2d(KILN_OP_AVERAGEPOOL, 4, 8, 8);
    SET_INTS(t, "kernel_shape", 3, 3);
    SET_INTS(t, "pads", 3, 0, 0, 0);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "smaller than the kernel extent 3");
    t = pool2d(KILN_OP_MAXPOOL, 4, 4, 4);
    SET_INTS(t, "kernel_shape", 5, 5);
    SET_INTS(t, "pads", 0, 0, 0, 0);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "larger than the padded input 4");
    t = pool2d(KILN_OP_MAXPOOL, 4, 8, 8);
    SET_INTS(t, "kernel_shape", 2, 2);
    kiln_node_set_int(t.g, t.node, "ceil_mode", 2);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "'ceil_mode' is 2");
    t = pool2d(KILN_OP_AVERAGEPOOL, 4, 8, 8);
    SET_INTS(t, "kernel_shape", 2, 2);
    kiln_node_set_float(t.g, t.node, "count_include_pad", 1.0f);
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "'count_include_pad' is float");
    t = pool2d(KILN_OP_MAXPOOL, 4, 8, 8);
    kiln_node_set_int(t.g, t.node, "kernel_shape", 2);
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "'kernel_shape' is int, expected ints");
    kiln_shape x2 = ks(2, 4, 8);
    t = mk(KILN_OP_MAXPOOL, 1, &x2);
    SET_INTS(t, "kernel_shape", 2);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "expected 0");
    kiln_shape xs = ks(4, 1, 4, 8, 8);
    kiln_dtype d[1] = {KILN_DTYPE_UINT8}; /* MaxPool takes uint8, AveragePool does not */
    t = mk_typed(KILN_OP_AVERAGEPOOL, 1, &xs, d);
    SET_INTS(t, "kernel_shape", 2, 2);
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "input 0 (X) is uint8");
    kiln_dtype d16[1] = {KILN_DTYPE_INT16};
    t = mk_typed(KILN_OP_MAXPOOL, 1, &xs, d16);
    SET_INTS(t, "kernel_shape", 2, 2);
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "input 0 (X) is int16");
}

static void test_global_pool(void **state)
{
    (void)state;
    kiln_shape xs = ks(4, 1, 2048, 7, 7), e = ks(4, 1, 2048, 1, 1);
    tg t = mk(KILN_OP_GLOBALAVERAGEPOOL, 1, &xs);
    expect_ok(&t, &e);
    kiln_shape x3 = ks(3, 2, 5, 9), e3 = ks(3, 2, 5, 1);
    t = mk(KILN_OP_GLOBALAVERAGEPOOL, 1, &x3);
    expect_ok(&t, &e3);
    kiln_shape x2 = ks(2, 2, 5);
    t = mk(KILN_OP_GLOBALAVERAGEPOOL, 1, &x2);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "expected rank >= 3");
    kiln_dtype d[1] = {KILN_DTYPE_INT32};
    t = mk_typed(KILN_OP_GLOBALAVERAGEPOOL, 1, &xs, d);
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "int32");
}

/* ---- Gemm / MatMul ------------------------------------------------------------- */

static void test_gemm(void **state)
{
    (void)state;
    kiln_shape sh[3] = {ks(2, 1, 2048), ks(2, 1000, 2048), ks(1, 1000)};
    tg t = mk(KILN_OP_GEMM, 3, sh);
    kiln_node_set_int(t.g, t.node, "transB", 1);
    kiln_shape e = ks(2, 1, 1000);
    expect_ok(&t, &e);
    kiln_shape s2[3] = {ks(2, 7, 3), ks(2, 7, 5), ks(2, 3, 1)};
    t = mk(KILN_OP_GEMM, 3, s2);
    kiln_node_set_int(t.g, t.node, "transA", 1);
    e = ks(2, 3, 5);
    expect_ok(&t, &e);
    s2[2] = ks(0);
    t = mk(KILN_OP_GEMM, 3, s2);
    kiln_node_set_int(t.g, t.node, "transA", 1);
    expect_ok(&t, &e);
    /* K mismatch */
    kiln_shape bad[2] = {ks(2, 4, 5), ks(2, 6, 3)};
    t = mk(KILN_OP_GEMM, 2, bad);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "has K=5 but B [6, 3] (transB=0) has K=6");
    /* with transB, B (6, 3) means K = 3 */
    t = mk(KILN_OP_GEMM, 2, bad);
    kiln_node_set_int(t.g, t.node, "transB", 1);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "has K=3");
    /* C not broadcastable */
    kiln_shape c[3] = {ks(2, 4, 5), ks(2, 5, 6), ks(1, 4)};
    t = mk(KILN_OP_GEMM, 3, c);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "C has shape [4], not broadcastable to the output [4, 6]");
    c[2] = ks(3, 1, 4, 6);
    t = mk(KILN_OP_GEMM, 3, c);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "not broadcastable");
    kiln_shape r3[2] = {ks(3, 1, 4, 5), ks(2, 5, 6)};
    t = mk(KILN_OP_GEMM, 2, r3);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "must both have rank 2");
    t = mk(KILN_OP_GEMM, 2, c);
    kiln_node_set_int(t.g, t.node, "transA", 2);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "'transA' is 2");
    t = mk(KILN_OP_GEMM, 2, c);
    kiln_node_set_int(t.g, t.node, "alpha", 2);
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "'alpha' is int, expected float");
    c[2] = ks(1, 6);
    kiln_dtype d[3] = {KILN_DTYPE_FLOAT32, KILN_DTYPE_FLOAT32, KILN_DTYPE_INT64};
    t = mk_typed(KILN_OP_GEMM, 3, c, d);
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "input 2 (C) is int64");
}

static void matmul_ok(kiln_shape a, kiln_shape b, kiln_shape want)
{
    kiln_shape sh[2] = {a, b};
    tg t = mk(KILN_OP_MATMUL, 2, sh);
    expect_ok(&t, &want);
}

static void test_matmul(void **state)
{
    (void)state;
    matmul_ok(ks(2, 3, 4), ks(2, 4, 5), ks(2, 3, 5));
    matmul_ok(ks(1, 4), ks(1, 4), ks(0));
    matmul_ok(ks(1, 4), ks(2, 4, 5), ks(1, 5));
    matmul_ok(ks(2, 3, 4), ks(1, 4), ks(1, 3));
    matmul_ok(ks(1, 4), ks(3, 2, 4, 5), ks(2, 2, 5));
    matmul_ok(ks(4, 2, 3, 4, 5), ks(2, 5, 6), ks(4, 2, 3, 4, 6));
    matmul_ok(ks(4, 2, 1, 4, 5), ks(3, 7, 5, 6), ks(4, 2, 7, 4, 6));
    matmul_ok(ks(3, 1, 4, 5), ks(3, 3, 5, 2), ks(3, 3, 4, 2));
    kiln_shape inc[2] = {ks(3, 2, 4, 5), ks(3, 3, 5, 6)};
    tg t = mk(KILN_OP_MATMUL, 2, inc);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "do not broadcast (2 vs 3)");
    kiln_shape km[2] = {ks(2, 4, 5), ks(2, 4, 5)};
    t = mk(KILN_OP_MATMUL, 2, km);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "has K=5 but B [4, 5] has K=4");
    kiln_shape sc[2] = {ks(0), ks(1, 3)};
    t = mk(KILN_OP_MATMUL, 2, sc);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "rank >= 1");
    kiln_dtype d[2] = {KILN_DTYPE_FLOAT32, KILN_DTYPE_BOOL};
    t = mk_typed(KILN_OP_MATMUL, 2, km, d);
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "input 1 (B) is bool");
}

/* ---- Softmax / LayerNormalization / ReduceMean ----------------------------------- */

static void test_softmax(void **state)
{
    (void)state;
    kiln_shape xs = ks(3, 2, 3, 4);
    for (int axis = -3; axis < 3; axis++) {
        tg t = mk(KILN_OP_SOFTMAX, 1, &xs);
        kiln_node_set_int(t.g, t.node, "axis", axis);
        expect_ok(&t, &xs);
    }
    tg t = mk(KILN_OP_SOFTMAX, 1, &xs);
    kiln_node_set_int(t.g, t.node, "axis", 3);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "axis 3 is out of range for X of shape [2, 3, 4]");
    t = mk(KILN_OP_SOFTMAX, 1, &xs);
    kiln_node_set_int(t.g, t.node, "axis", -4);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "out of range");
    t = mk(KILN_OP_SOFTMAX, 1, &xs);
    kiln_node_set_string(t.g, t.node, "axis", "1");
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "'axis' is string, expected int");
    kiln_shape sc = ks(0);
    t = mk(KILN_OP_SOFTMAX, 1, &sc);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "rank >= 1");
    kiln_dtype d[1] = {KILN_DTYPE_FLOAT16};
    t = mk_typed(KILN_OP_SOFTMAX, 1, &xs, d);
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "float16");
}

static void test_layernorm(void **state)
{
    (void)state;
    kiln_shape sh[3] = {ks(3, 2, 5, 8), ks(1, 8), ks(1, 8)};
    tg t = mk(KILN_OP_LAYERNORM, 3, sh);
    expect_ok(&t, &sh[0]);
    t = mk(KILN_OP_LAYERNORM, 2, sh); /* no B */
    expect_ok(&t, &sh[0]);
    kiln_shape s1[3] = {ks(3, 2, 5, 8), ks(2, 5, 8), ks(2, 5, 8)};
    t = mk(KILN_OP_LAYERNORM, 3, s1);
    kiln_node_set_int(t.g, t.node, "axis", 1);
    expect_ok(&t, &s1[0]);
    s1[1] = ks(3, 1, 5, 8); /* leading 1s are tolerated */
    t = mk(KILN_OP_LAYERNORM, 3, s1);
    kiln_node_set_int(t.g, t.node, "axis", -2);
    expect_ok(&t, &s1[0]);
    /* Scale of the wrong shape for axis 1 */
    t = mk(KILN_OP_LAYERNORM, 3, sh);
    kiln_node_set_int(t.g, t.node, "axis", 1);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "input 1 (Scale) has shape [8], expected the normalized dims [5, 8]");
    sh[2] = ks(1, 7);
    t = mk(KILN_OP_LAYERNORM, 3, sh);
    expect_err(&t, KILN_ERR_SHAPE_MISMATCH, "input 2 (B) has shape [7]");
    t = mk(KILN_OP_LAYERNORM, 2, sh);
    kiln_node_set_int(t.g, t.node, "axis", 3);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "axis 3 is out of range");
    t = mk(KILN_OP_LAYERNORM, 2, sh);
    kiln_node_set_int(t.g, t.node, "epsilon", 0);
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "'epsilon' is int");
    sh[2] = ks(1, 8);
    kiln_dtype d[3] = {KILN_DTYPE_FLOAT32, KILN_DTYPE_FLOAT32, KILN_DTYPE_INT8};
    t = mk_typed(KILN_OP_LAYERNORM, 3, sh, d);
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "input 2 (B) is int8");
}

static void reduce_ok(const int64_t *axes, int n_axes, int keepdims, kiln_shape want)
{
    kiln_shape xs = ks(3, 2, 3, 4);
    tg t = mk(KILN_OP_REDUCEMEAN, 1, &xs);
    if (n_axes >= 0)
        kiln_node_set_ints(t.g, t.node, "axes", axes, n_axes);
    if (keepdims >= 0)
        kiln_node_set_int(t.g, t.node, "keepdims", keepdims);
    expect_ok(&t, &want);
}

static void test_reducemean(void **state)
{
    (void)state;
    const int64_t a1[1] = {1}, am1[1] = {-1}, a02[2] = {0, 2}, a_spatial[2] = {-1, -2};
    reduce_ok(a1, 1, -1, ks(3, 2, 1, 4));
    reduce_ok(a1, 1, 0, ks(2, 2, 4));
    reduce_ok(am1, 1, 1, ks(3, 2, 3, 1));
    reduce_ok(a02, 2, 0, ks(1, 3));
    reduce_ok(a_spatial, 2, 1, ks(3, 2, 1, 1));
    reduce_ok(NULL, -1, 1, ks(3, 1, 1, 1));
    reduce_ok(NULL, -1, 0, ks(0));
    reduce_ok(a1, 0, 0, ks(0)); /* empty axes: all */
    kiln_shape xs = ks(3, 2, 3, 4);
    tg t = mk(KILN_OP_REDUCEMEAN, 1, &xs);
    kiln_node_set_ints(t.g, t.node, "axes", NULL, 0);
    kiln_node_set_int(t.g, t.node, "noop_with_empty_axes", 1);
    expect_ok(&t, &xs);
    t = mk(KILN_OP_REDUCEMEAN, 1, &xs);
    SET_INTS(t, "axes", 1, -2);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "repeats axis 1");
    t = mk(KILN_OP_REDUCEMEAN, 1, &xs);
    SET_INTS(t, "axes", 0, 3);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "axes[1] = 3 is out of range");
    t = mk(KILN_OP_REDUCEMEAN, 1, &xs);
    kiln_node_set_int(t.g, t.node, "axes", 1);
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "'axes' is int, expected ints");
    t = mk(KILN_OP_REDUCEMEAN, 1, &xs);
    kiln_node_set_int(t.g, t.node, "keepdims", 3);
    expect_err(&t, KILN_ERR_INVALID_ARGUMENT, "'keepdims' is 3");
    kiln_dtype d[1] = {KILN_DTYPE_INT64};
    t = mk_typed(KILN_OP_REDUCEMEAN, 1, &xs, d);
    expect_err(&t, KILN_ERR_TYPE_MISMATCH, "input 0 (X) is int64");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_shapes),
        cmocka_unit_test(test_conv_errors),
        cmocka_unit_test(test_batchnorm),
        cmocka_unit_test(test_pool_shapes),
        cmocka_unit_test(test_pool_errors),
        cmocka_unit_test(test_global_pool),
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_reducemean),
    };
    return cmocka_run_group_tests_name("unit/infer_nn", tests, NULL, NULL);
}
