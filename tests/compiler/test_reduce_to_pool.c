/* tests/compiler/test_reduce_to_pool.c: ReduceMean/ReduceMax over the
 * spatial dims of NCHW (timm's `x.mean((2, 3), keepdim=True)`) run as
 * global pools (src/pass/reduce_to_pool.c), compiled end to end against
 * the reference executor. Cases: a squeeze-excite block after a conv (a
 * blocked producer: no reduce, and no layout transform back to NCHW, is
 * left), axes written (-1, -2), keepdims 0 (a head's [N, C]), ReduceMax,
 * channels that are not a multiple of the block, batch 2. Reductions
 * over other axes stay reductions. */
#include "compiler_test.h"

static char *dir;
static int case_no;

typedef struct rcase {
    kiln_op op;       /* ReduceMean or ReduceMax */
    int64_t a0, a1;   /* the axes */
    int keepdims;
    int n, c, h, w;
    bool se;          /* conv -> reduce -> 1x1 convs -> sigmoid -> * (a squeeze-excite block) */
    bool pooled;      /* the pass applies */
} rcase;

static int unary(kiln_graph *g, kiln_op op, int x)
{
    int id = kiln_graph_add_node(g, op, NULL, &x, 1, 1);
    assert_true(id >= 0);
    return kiln_graph_node_output(g, id, 0);
}

static void check_case(const rcase *c)
{
    kiln_graph *g;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &(kiln_shape){4, {c->n, 8, c->h, c->w}});
    static const int pads[4] = {1, 1, 1, 1};
    int w = ct_param(g, "w", ks(4, c->c, 8, 3, 3), 10 + (uint64_t)case_no, -0.5f, 0.5f);
    x = unary(g, KILN_OP_RELU, ct_conv(g, x, w, -1, 3, 1, pads, 1));
    int rid = kiln_graph_add_node(g, c->op, "reduce", &x, 1, 1);
    assert_true(rid >= 0);
    const int64_t axes[2] = {c->a0, c->a1};
    assert_int_equal(kiln_node_set_ints(g, rid, "axes", axes, 2), KILN_OK);
    assert_int_equal(kiln_node_set_int(g, rid, "keepdims", c->keepdims), KILN_OK);
    int y = kiln_graph_node_output(g, rid, 0);
    if (c->se) {
        static const int zero[4] = {0, 0, 0, 0};
        int w1 = ct_param(g, "w1", ks(4, c->c / 2, c->c, 1, 1), 20, -0.5f, 0.5f);
        int w2 = ct_param(g, "w2", ks(4, c->c, c->c / 2, 1, 1), 21, -0.5f, 0.5f);
        int s = unary(g, KILN_OP_RELU, ct_conv(g, y, w1, -1, 1, 1, zero, 1));
        s = unary(g, KILN_OP_SIGMOID, ct_conv(g, s, w2, -1, 1, 1, zero, 1));
        int mid = kiln_graph_add_node(g, KILN_OP_MUL, "scale", (int[]){x, s}, 2, 1);
        assert_true(mid >= 0);
        y = kiln_graph_node_output(g, mid, 0);
    }
    assert_int_equal(kiln_graph_add_output(g, y), KILN_OK);
    int reduces = ct_ops_left(g, case_no, c->op, -1);
    if (reduces != (c->pooled ? 0 : 1))
        fail_msg("case %d: %d %s left after the pipeline", case_no, reduces, kiln_op_name(c->op));
    if (c->se) { /* the blocked chain stays blocked: at most the output's transform */
        kiln_pass_ctx *ctx;
        kiln_lowered *l;
        ct_lower(g, case_no, &ctx, &l);
        int tr = ct_count_transforms(ctx->g);
        if (getenv("KT_PRINT")) /* the IR, to read it */
            kiln_pass_print(ctx, stderr, "case");
        kiln_lowered_destroy(l);
        kiln_pass_ctx_destroy(ctx);
        if (tr > 1)
            fail_msg("case %d: %d layout transforms around the squeeze-excite block", case_no, tr);
    }
    char tag[32];
    snprintf(tag, sizeof tag, "red%d", case_no);
    ct_check_graph(g, dir, tag, 0, 100 + (uint64_t)case_no, 1e-4, 1e-5);
    case_no++;
    kiln_graph_destroy(g);
}

static void test_reduce_to_pool(void **state)
{
    (void)state;
    static const rcase cases[] = {
        {KILN_OP_REDUCEMEAN, 2, 3, 1, 1, 32, 14, 14, true, true},
        {KILN_OP_REDUCEMEAN, -1, -2, 1, 1, 16, 9, 11, false, true},
        {KILN_OP_REDUCEMEAN, 2, 3, 0, 1, 32, 7, 7, false, true},
        {KILN_OP_REDUCEMAX, 3, 2, 1, 2, 24, 6, 5, false, true},
        {KILN_OP_REDUCEMEAN, 1, 2, 1, 1, 16, 6, 6, false, false}, /* not spatial */
        {KILN_OP_REDUCEMEAN, 2, 3, 1, 2, 48, 5, 8, false, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(&cases[i]);
}

int main(void)
{
    dir = kt_tempdir();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reduce_to_pool),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kt_rmdir(dir);
    free(dir);
    return rc;
}
