/* tests/compiler/test_fewout.c: convolutions with few output channels
 * (conv2d_fewout_nchwc, kiln_kernels_convred.h) and Resize inside a run of
 * blocked convs, compiled as a model is and checked against the reference
 * executor:
 *  - the last conv of an image-to-image network after a bilinear upsample
 *    (32 -> 3, 3x3, bias, Tanh): the Resize keeps the blocks of the conv
 *    before it (no transform around it), the conv reduces over them and
 *    writes NCHW (no transform after it);
 *  - a row-major input of a partial block (24 channels), stride 2; a 1x1
 *    head with a residual Add; a dilated 5x5 with Relu; a nearest Resize;
 *  - what stays on the blocked template: an RGB image's 3 input channels,
 *    8 output channels;
 *  - a Resize to the graph output stays row-major (no transform of the
 *    upsampled tensor); its columns run in runs of one tap count. */
#include "compiler_test.h"

static char *dir;

static bool pick_last_conv(const kiln_pass_ctx *ctx, const kiln_task *t)
{
    return ctx->g->nodes[t->anchor]->op == KILN_OP_CONV;
}

typedef struct fewout_case {
    int c_pre;       /* channels of a conv before it (0: the input feeds it) */
    int c_in, c_out; /* the conv's */
    int k, stride, dil, pad;
    const char *resize; /* a Resize x2 between the two convs: its mode, or NULL */
    kiln_op act;        /* after it (KILN_OP_IDENTITY: none) */
    bool residual;      /* an Add of a graph input after it */
    int h, w;
    const char *want;
    bool inner_ok;  /* check that no layout transform is left but of the graph inputs */
} fewout_case;

static void test_fewout(void **state)
{
    (void)state;
    static const fewout_case cases[] = {
        {8, 32, 3, 3, 1, 1, 1, "linear", KILN_OP_TANH, false, 11, 13, "conv2d_fewout_nchwc", true},
        {0, 24, 1, 3, 2, 1, 1, NULL, KILN_OP_SIGMOID, false, 9, 11, "conv2d_fewout_nchwc", true},
        {16, 48, 2, 1, 1, 1, 0, NULL, KILN_OP_IDENTITY, true, 7, 19, "conv2d_fewout_nchwc", true},
        {16, 32, 4, 5, 1, 2, 4, NULL, KILN_OP_RELU, false, 12, 10, "conv2d_fewout_nchwc", true},
        {16, 16, 3, 3, 1, 1, 1, "nearest", KILN_OP_IDENTITY, false, 6, 5, "conv2d_fewout_nchwc",
         true},
        {0, 3, 3, 3, 1, 1, 1, NULL, KILN_OP_IDENTITY, false, 10, 10, "conv2d_nchwc", false},
        {16, 32, 8, 3, 1, 1, 1, NULL, KILN_OP_IDENTITY, false, 10, 10, "conv2d_nchwc", false},
    };
    for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++) {
        const fewout_case *fc = &cases[c];
        kiln_graph *g;
        assert_int_equal(kiln_graph_create(&g), KILN_OK);
        int c0 = fc->c_pre ? fc->c_pre : fc->c_in;
        kiln_shape xs = {4, {1, c0, fc->h, fc->w}};
        int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &xs);
        const int p1[4] = {1, 1, 1, 1};
        int y = x, h = fc->h, w = fc->w;
        if (fc->c_pre) {
            int w0 = ct_param(g, "w0", (kiln_shape){4, {fc->c_in, c0, 3, 3}}, 10 + c, -0.3f, 0.3f);
            int b0 = ct_param(g, "b0", (kiln_shape){1, {fc->c_in}}, 20 + c, -0.1f, 0.1f);
            y = ct_conv(g, y, w0, b0, 3, 1, p1, 1);
            int r = kiln_graph_add_node(g, KILN_OP_RELU, NULL, &y, 1, 1);
            y = kiln_graph_node_output(g, r, 0);
        }
        if (fc->resize) {
            int rs = kiln_graph_add_node(g, KILN_OP_RESIZE, "up", &y, 1, 1);
            float sc[4] = {1, 1, 2, 2};
            assert_int_equal(kiln_node_set_string(g, rs, "mode", fc->resize), KILN_OK);
            assert_int_equal(kiln_node_set_floats(g, rs, "scales", sc, 4), KILN_OK);
            y = kiln_graph_node_output(g, rs, 0);
            h *= 2;
            w *= 2;
        }
        int wt = ct_param(g, "w", (kiln_shape){4, {fc->c_out, fc->c_in, fc->k, fc->k}}, 30 + c,
                          -0.2f, 0.2f);
        int bs = ct_param(g, "b", (kiln_shape){1, {fc->c_out}}, 40 + c, -0.5f, 0.5f);
        const int pd[4] = {fc->pad, fc->pad, fc->pad, fc->pad};
        y = ct_conv(g, y, wt, bs, fc->k, fc->stride, pd, 1);
        int cv = g->n_nodes - 1;
        int64_t dl[2] = {fc->dil, fc->dil};
        assert_int_equal(kiln_node_set_ints(g, cv, "dilations", dl, 2), KILN_OK);
        if (fc->act != KILN_OP_IDENTITY) {
            int a = kiln_graph_add_node(g, fc->act, NULL, &y, 1, 1);
            y = kiln_graph_node_output(g, a, 0);
        }
        if (fc->residual) {
            int oh = (h + 2 * fc->pad - fc->dil * (fc->k - 1) - 1) / fc->stride + 1;
            int ow = (w + 2 * fc->pad - fc->dil * (fc->k - 1) - 1) / fc->stride + 1;
            kiln_shape rs = {4, {1, fc->c_out, oh, ow}};
            int in[2] = {y, kiln_graph_add_input(g, "res", KILN_DTYPE_FLOAT32, &rs)};
            int a = kiln_graph_add_node(g, KILN_OP_ADD, NULL, in, 2, 1);
            y = kiln_graph_node_output(g, a, 0);
        }
        assert_int_equal(kiln_graph_add_output(g, y), KILN_OK);
        kiln_error err = {0};
        if (kiln_graph_infer_shapes(g, &err) != KILN_OK)
            fail_msg("case %d: infer: %s", c, err.msg);
        char name[64], tag[32];
        ct_template_of(g, c, pick_last_conv, name, sizeof name);
        if (strcmp(name, fc->want))
            fail_msg("case %d: the conv ran on '%s', want '%s'", c, name, fc->want);
        if (fc->inner_ok) {
            kiln_pass_ctx *ctx;
            kiln_lowered *l;
            ct_lower(g, c, &ctx, &l);
            const kiln_graph *lg = ctx->g;
            for (int i = 0; i < lg->n_nodes; i++) {
                const kiln_node *n = lg->nodes[i];
                const kiln_value *a = lg->values[n->inputs[0]];
                if (n->op == KILN_OP_IDENTITY && a->kind != KILN_VALUE_INPUT &&
                    !kiln_layout_equal(a->layout, lg->values[n->outputs[0]]->layout))
                    fail_msg("case %d: a layout transform of '%s' is left", c, a->name);
            }
            kiln_lowered_destroy(l);
            kiln_pass_ctx_destroy(ctx);
        }
        snprintf(tag, sizeof tag, "fewout%d", c);
        ct_check_graph(g, dir, tag, 0, 500 + (uint64_t)c, 1e-4, 1e-5);
        kiln_graph_destroy(g);
    }
}

static bool pick_resize(const kiln_pass_ctx *ctx, const kiln_task *t)
{
    return ctx->g->nodes[t->anchor]->op == KILN_OP_RESIZE;
}

/* A segmentation head's upsample to the graph output (DeepLabV3: 21
 * classes, a partial block): the Resize reads the small map transformed to
 * NCHW and writes NCHW, rather than writing blocks that a transform of the
 * large output would then undo; the values right. */
static void test_resize_to_output(void **state)
{
    (void)state;
    kiln_graph *g;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    kiln_shape xs = {4, {1, 32, 6, 7}};
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &xs);
    int w = ct_param(g, "w", (kiln_shape){4, {21, 32, 1, 1}}, 61, -0.3f, 0.3f);
    const int p0[4] = {0, 0, 0, 0};
    int y = ct_conv(g, x, w, -1, 1, 1, p0, 1);
    int rs = kiln_graph_add_node(g, KILN_OP_RESIZE, "up", &y, 1, 1);
    float sc[4] = {1, 1, 8, 8};
    assert_int_equal(kiln_node_set_string(g, rs, "mode", "linear"), KILN_OK);
    assert_int_equal(kiln_node_set_floats(g, rs, "scales", sc, 4), KILN_OK);
    assert_int_equal(kiln_graph_add_output(g, kiln_graph_node_output(g, rs, 0)), KILN_OK);
    kiln_error err = {0};
    assert_int_equal(kiln_graph_infer_shapes(g, &err), KILN_OK);
    kiln_pass_ctx *ctx;
    kiln_lowered *l;
    ct_lower(g, 0, &ctx, &l);
    for (int i = 0; i < ctx->g->n_nodes; i++) {
        const kiln_node *n = ctx->g->nodes[i];
        if (n->op == KILN_OP_RESIZE &&
            ctx->g->values[n->outputs[0]]->layout.kind != KILN_LAYOUT_ROW_MAJOR)
            fail_msg("the Resize to the graph output writes blocks");
    }
    kiln_lowered_destroy(l);
    kiln_pass_ctx_destroy(ctx);
    char name[64];
    ct_template_of(g, 0, pick_resize, name, sizeof name);
    assert_string_equal(name, "resize");
    ct_check_graph(g, dir, "resize_out", 0, 700, 1e-4, 1e-5);
    kiln_graph_destroy(g);
}

/* A row-major Resize's columns run in runs of one tap count, each loop's
 * count a constant (emit_movement.c, resize_runs): linear at scale 3
 * (every third column reads one tap: runs of 1 and 2), at 3 on a wider map
 * (more runs than the table takes: the loop bounded per column), cubic (4
 * taps), nearest (1), linear at 2.5, each with a fused Relu, against the
 * reference. */
static void test_resize_runs(void **state)
{
    (void)state;
    static const struct {
        const char *mode;
        float sh, sw;
        int64_t w;
    } cases[] = {{"linear", 3, 3, 7}, {"linear", 2, 3, 12}, {"cubic", 2, 2, 5},
                 {"nearest", 2, 2, 7}, {"linear", 1, 2.5f, 6}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        kiln_graph *g;
        assert_int_equal(kiln_graph_create(&g), KILN_OK);
        kiln_shape xs = {4, {1, 3, 5, cases[c].w}};
        int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &xs);
        int rs = kiln_graph_add_node(g, KILN_OP_RESIZE, "up", &x, 1, 1);
        float sc[4] = {1, 1, cases[c].sh, cases[c].sw};
        assert_int_equal(kiln_node_set_string(g, rs, "mode", cases[c].mode), KILN_OK);
        assert_int_equal(kiln_node_set_floats(g, rs, "scales", sc, 4), KILN_OK);
        int y = kiln_graph_node_output(g, rs, 0);
        int relu = kiln_graph_add_node(g, KILN_OP_RELU, "relu", &y, 1, 1);
        assert_int_equal(kiln_graph_add_output(g, kiln_graph_node_output(g, relu, 0)), KILN_OK);
        kiln_error err = {0};
        assert_int_equal(kiln_graph_infer_shapes(g, &err), KILN_OK);
        char name[64], tag[32];
        ct_template_of(g, 0, pick_resize, name, sizeof name);
        assert_string_equal(name, "resize");
        snprintf(tag, sizeof tag, "resize_runs%zu", c);
        ct_check_graph(g, dir, tag, 0, 800 + (uint64_t)c, 1e-5, 1e-6);
        kiln_graph_destroy(g);
    }
}

int main(void)
{
    dir = kt_tempdir();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fewout),
        cmocka_unit_test(test_resize_to_output),
        cmocka_unit_test(test_resize_runs),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kt_rmdir(dir);
    free(dir);
    return rc;
}
