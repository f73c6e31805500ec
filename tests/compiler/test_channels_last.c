/* tests/compiler/test_channels_last.c: ConvNeXt's block, channels-last
 * inside a blocked run, compiled end to end against the reference executor
 * (rtol 1e-3, atol 1e-4): a 1x1 Conv, a "LayerNorm2d" (Transpose [0,2,3,1],
 * LayerNormalization over the last axis, Transpose [0,3,1,2]), then the
 * block: depthwise 7x7 Conv, Transpose [0,2,3,1], LayerNormalization,
 * MatMul + Add, Gelu, MatMul + Add, Transpose [0,3,1,2], Mul by a layer
 * scale [C, 1, 1], Add of the residual. Random channel counts that fill
 * whole blocks of 16, 8 and 4, one (6) no block >= 4 divides, batch 1 and
 * 2, odd spatial extents. Asserts the layouts that make it fast when the
 * channels fill blocks: the Transposes read and write NCHW{b}c directly
 * (tpl_transpose.c), so the only layout transform is the one of the graph
 * output, and the layer-scale Mul and the residual Add are the epilogue of
 * the Transpose back to blocks. */
#include "compiler_test.h"
#include "pass/pass.h"
#include "target/target.h"

static char *dir;
static int case_no;

static int param(kiln_graph *g, const char *name, kiln_shape s, uint64_t seed, float lo, float hi)
{
    void *data = NULL;
    int v = kiln_graph_add_const_uninit(g, name, KILN_DTYPE_FLOAT32, &s, true, &data);
    kt_fill_random(data, kiln_shape_numel(&s), seed, lo, hi);
    return v;
}

static int node(kiln_graph *g, kiln_op op, const int *in, int n_in)
{
    int id = kiln_graph_add_node(g, op, NULL, in, n_in, 1);
    assert_true(id >= 0);
    return id;
}

static int out0(kiln_graph *g, int id)
{
    return kiln_graph_node_output(g, id, 0);
}

static int transpose(kiln_graph *g, int x, bool to_nhwc)
{
    static const int64_t nhwc[4] = {0, 2, 3, 1}, nchw[4] = {0, 3, 1, 2};
    int id = node(g, KILN_OP_TRANSPOSE, &x, 1);
    assert_int_equal(kiln_node_set_ints(g, id, "perm", to_nhwc ? nhwc : nchw, 4), KILN_OK);
    return out0(g, id);
}

static int layernorm(kiln_graph *g, int x, int c, uint64_t seed)
{
    int in[3] = {x, param(g, "ln_s", ks(1, c), seed, 0.5f, 1.5f),
                 param(g, "ln_b", ks(1, c), seed + 1, -0.5f, 0.5f)};
    int id = node(g, KILN_OP_LAYERNORM, in, 3);
    kiln_node_set_int(g, id, "axis", -1);
    kiln_node_set_float(g, id, "epsilon", 1e-6f);
    return out0(g, id);
}

static int linear(kiln_graph *g, int x, int k, int n, uint64_t seed)
{
    int mm[2] = {x, param(g, "w", ks(2, k, n), seed, -0.3f, 0.3f)};
    int add[2] = {out0(g, node(g, KILN_OP_MATMUL, mm, 2)), param(g, "b", ks(1, n), seed + 1, -0.3f, 0.3f)};
    return out0(g, node(g, KILN_OP_ADD, add, 2));
}

static void check_block(int n, int c, int h, int w)
{
    kiln_graph *g;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    kiln_shape xs = ks(4, n, 8, h, w);
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &xs);
    /* stem: 1x1 conv, LayerNorm2d */
    int conv_in[3] = {x, param(g, "w0", ks(4, c, 8, 1, 1), 10, -0.5f, 0.5f),
                      param(g, "b0", ks(1, c), 11, -0.5f, 0.5f)};
    int stem = out0(g, node(g, KILN_OP_CONV, conv_in, 3));
    int r = transpose(g, layernorm(g, transpose(g, stem, true), c, 20), false);
    /* the block */
    int dw_in[3] = {r, param(g, "wd", ks(4, c, 1, 7, 7), 30, -0.3f, 0.3f),
                    param(g, "bd", ks(1, c), 31, -0.3f, 0.3f)};
    int dw = node(g, KILN_OP_CONV, dw_in, 3);
    static const int64_t pads[4] = {3, 3, 3, 3}, kern[2] = {7, 7};
    kiln_node_set_int(g, dw, "group", c);
    kiln_node_set_ints(g, dw, "pads", pads, 4);
    kiln_node_set_ints(g, dw, "kernel_shape", kern, 2);
    int t = layernorm(g, transpose(g, out0(g, dw), true), c, 40);
    int gl = t = linear(g, t, c, 4 * c, 50);
    t = out0(g, node(g, KILN_OP_GELU, &gl, 1));
    t = transpose(g, linear(g, t, 4 * c, c, 60), false);
    int mul[2] = {t, param(g, "gamma", ks(3, c, 1, 1), 70, -1.0f, 1.0f)};
    int add[2] = {out0(g, node(g, KILN_OP_MUL, mul, 2)), r};
    int y = out0(g, node(g, KILN_OP_ADD, add, 2));
    assert_int_equal(kiln_graph_add_output(g, y), KILN_OK);
    kiln_error err = {0};
    if (kiln_graph_infer_shapes(g, &err) != KILN_OK)
        fail_msg("case %d: infer shapes: %s", case_no, err.msg);

    kiln_target tg;
    kiln_pass_ctx *ctx = NULL;
    assert_int_equal(kiln_target_resolve(NULL, &tg, &err), KILN_OK);
    assert_int_equal(kiln_pass_ctx_create(g, &tg, &ctx, &err), KILN_OK);
    if (kiln_pass_run_all(ctx, &err) != KILN_OK)
        fail_msg("case %d: passes: %s", case_no, err.msg);
    const kiln_graph *pg = ctx->g;
    int transforms = 0, transposes = 0, blocked_transposes = 0;
    const kiln_node *lmul = NULL;
    for (int i = 0; i < pg->n_nodes; i++) {
        const kiln_node *m = pg->nodes[i];
        transforms += m->op == KILN_OP_IDENTITY;
        if (m->op == KILN_OP_MUL && pg->values[m->inputs[1]]->shape.rank == 3)
            lmul = m;
        if (m->op == KILN_OP_TRANSPOSE) {
            transposes++;
            blocked_transposes += pg->values[m->inputs[0]]->layout.kind == KILN_LAYOUT_NCHWC ||
                                  pg->values[m->outputs[0]]->layout.kind == KILN_LAYOUT_NCHWC;
        }
    }
    assert_int_equal(transposes, 4);
    if (tg.vec >= 4 && c % 4 == 0) {
        if (transforms != 1)
            fail_msg("case %d (c %d): %d layout transforms, want 1 (the output's)", case_no, c,
                     transforms);
        if (blocked_transposes != 4)
            fail_msg("case %d (c %d): %d of 4 transposes read or write blocks", case_no, c,
                     blocked_transposes);
        if (!lmul)
            fail_msg("case %d: the layer-scale Mul is gone", case_no);
        else if (pg->values[lmul->inputs[0]]->layout.kind != KILN_LAYOUT_NCHWC)
            fail_msg("case %d: the layer-scale Mul reads a row-major input", case_no);
        /* the Mul and the residual Add are the last Transpose's epilogue */
        for (int k = 0; k < ctx->n_groups && lmul; k++) {
            const kiln_group *gr = &ctx->groups[k];
            bool has = false;
            for (int j = 0; j < gr->n_nodes; j++)
                has |= pg->nodes[gr->nodes[j]] == lmul;
            if (has && (pg->nodes[gr->anchor]->op != KILN_OP_TRANSPOSE || gr->n_nodes != 3))
                fail_msg("case %d: the layer scale is not fused into the Transpose (%d nodes)",
                         case_no, gr->n_nodes);
        }
    }
    kiln_pass_ctx_destroy(ctx);
    char tag[32];
    snprintf(tag, sizeof tag, "cl%d", case_no);
    ct_check_graph(g, dir, tag, 0, 100 + (uint64_t)case_no, 1e-3, 1e-4);
    case_no++;
    kiln_graph_destroy(g);
}

static void test_convnext_block(void **state)
{
    (void)state;
    check_block(1, 32, 9, 7);  /* blocks of 16 */
    check_block(2, 48, 5, 6);  /* 3 blocks of 16, batch 2 */
    check_block(1, 24, 7, 11); /* blocks of 8 */
    check_block(1, 20, 6, 5);  /* blocks of 4 */
    check_block(1, 6, 5, 5);   /* no block >= 4 on the way back: row-major */
}

int main(void)
{
    dir = kt_tempdir();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_convnext_block),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kt_rmdir(dir);
    free(dir);
    return rc;
}
