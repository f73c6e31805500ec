/* tests/compiler/test_crop_taps.c: the crop-taps pass (a Conv's filter rows
 * and columns that only read padding dropped, with their pads) on ASPP-style
 * convs: dilation 12 and 36 on 8x8 maps become 1x1 convs, dilation 6 on an
 * 8x8 map keeps its 3x3 (its outer taps read some rows), a one-sided pad
 * crops one side, a depthwise conv and a dilated 1-D conv crop too; each
 * checks the filter extent the lowered graph holds and the values against
 * the reference executor on the original graph. */
#include "compiler_test.h"

static char *dir;

typedef struct crop_case {
    int rank;        /* 4, or 3 (a 1-D conv) */
    int c, groups;   /* channels in and out, groups */
    int h, w, k, d;  /* input, square kernel (k x 1 for 1-D), dilation */
    int pads[4];     /* t, l, b, r (1-D: begin = pads[1], end = pads[3]) */
    int want_kh, want_kw;
} crop_case;

static void test_crop_taps(void **state)
{
    (void)state;
    static const crop_case cases[] = {
        {4, 32, 1, 8, 8, 3, 12, {12, 12, 12, 12}, 1, 1},  /* ASPP rate 12 on 8x8 */
        {4, 32, 1, 8, 9, 3, 36, {36, 36, 36, 36}, 1, 1},  /* rate 36 */
        {4, 32, 1, 8, 8, 3, 6, {6, 6, 6, 6}, 3, 3},       /* outer taps read rows 6, 7 */
        {4, 16, 1, 2, 7, 5, 1, {4, 2, 0, 2}, 2, 5},       /* top pad only: rows 3..4 */
        {4, 32, 32, 6, 6, 3, 16, {16, 16, 16, 16}, 1, 1}, /* depthwise */
        {3, 16, 1, 1, 10, 3, 20, {0, 20, 0, 20}, 1, 1},   /* 1-D, via lower-to-2d */
    };
    for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++) {
        const crop_case *cc = &cases[c];
        kiln_graph *g;
        assert_int_equal(kiln_graph_create(&g), KILN_OK);
        kiln_shape xs = cc->rank == 4 ? (kiln_shape){4, {1, cc->c, cc->h, cc->w}}
                                      : (kiln_shape){3, {1, cc->c, cc->w}};
        int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &xs);
        kiln_shape wsh = cc->rank == 4 ? (kiln_shape){4, {cc->c, cc->c / cc->groups, cc->k, cc->k}}
                                       : (kiln_shape){3, {cc->c, cc->c / cc->groups, cc->k}};
        int wt = ct_param(g, "w", wsh, 10 + c, -0.3f, 0.3f);
        int b = ct_param(g, "b", (kiln_shape){1, {cc->c}}, 20 + c, -0.5f, 0.5f);
        int in[3] = {x, wt, b};
        int id = kiln_graph_add_node(g, KILN_OP_CONV, "conv", in, 3, 1);
        int r = cc->rank - 2;
        int64_t dil[2] = {cc->d, cc->d}, st[2] = {1, 1};
        int64_t pd4[4] = {cc->pads[0], cc->pads[1], cc->pads[2], cc->pads[3]};
        int64_t pd2[2] = {cc->pads[1], cc->pads[3]};
        assert_int_equal(kiln_node_set_ints(g, id, "dilations", dil, r), KILN_OK);
        assert_int_equal(kiln_node_set_ints(g, id, "strides", st, r), KILN_OK);
        assert_int_equal(kiln_node_set_ints(g, id, "pads", r == 2 ? pd4 : pd2, 2 * r), KILN_OK);
        assert_int_equal(kiln_node_set_int(g, id, "group", cc->groups), KILN_OK);
        int y = kiln_graph_node_output(g, id, 0);
        int a = kiln_graph_add_node(g, KILN_OP_RELU, NULL, &y, 1, 1);
        assert_int_equal(kiln_graph_add_output(g, kiln_graph_node_output(g, a, 0)), KILN_OK);
        kiln_error err = {0};
        if (kiln_graph_infer_shapes(g, &err) != KILN_OK)
            fail_msg("case %d: infer: %s", c, err.msg);
        kiln_pass_ctx *ctx;
        kiln_lowered *l;
        ct_lower(g, c, &ctx, &l);
        int convs = 0;
        for (int i = 0; i < ctx->g->n_nodes; i++) {
            const kiln_node *n = ctx->g->nodes[i];
            if (n->op != KILN_OP_CONV)
                continue;
            convs++;
            const kiln_shape *ws = &ctx->g->values[n->inputs[1]]->shape;
            if (ws->rank != 4 || ws->dims[2] != cc->want_kh || ws->dims[3] != cc->want_kw)
                fail_msg("case %d: the lowered conv's filter is %lldx%lld, want %dx%d", c,
                         (long long)ws->dims[2], (long long)ws->dims[3], cc->want_kh,
                         cc->want_kw);
        }
        assert_int_equal(convs, 1);
        kiln_lowered_destroy(l);
        kiln_pass_ctx_destroy(ctx);
        char tag[32];
        snprintf(tag, sizeof tag, "crop%d", c);
        ct_check_graph(g, dir, tag, 0, 800 + (uint64_t)c, 1e-4, 1e-5);
        kiln_graph_destroy(g);
    }
}

int main(void)
{
    dir = kt_tempdir();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crop_taps),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kt_rmdir(dir);
    free(dir);
    return rc;
}
