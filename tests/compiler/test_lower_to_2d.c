/* tests/compiler/test_lower_to_2d.c: 1-D convolutions and 3-D convolutions
 * and pools compiled end to end against the reference executor (rtol 1e-4,
 * atol 1e-5). The lower-to-2d pass (src/pass/lower_to_2d.c) writes them as
 * 2-D ones; each case also asserts whether the pass took the node (no conv
 * or pool of the original rank left after the pipeline) or left it to the
 * reference kernel, so a geometry that silently stops being lowered fails
 * here. Cases: audio-style 1-D convs (stride, dilation, asymmetric pads,
 * groups, depthwise, a chain with Relu), video-style 3-D convs (3x3x3 with
 * pads, a depth stride, 1x3x3 and 3x1x1 factorized kernels, groups,
 * dilation, asymmetric pads, batch 2, BatchNorm folded in front of a Relu),
 * 3-D max and average pools (pads, ceil_mode, count_include_pad both ways),
 * and what stays on the reference kernel (run-time weights, an AveragePool
 * with ceil_mode). */
#include "compiler_test.h"

static char *dir;
static int case_no;

typedef struct ccase {
    int nsp;                  /* 1 or 3 spatial dims */
    int n, c, m, d, h, w;     /* input [n, c, (d, h,) w]; m output channels */
    int k[3], s[3], dl[3];    /* kernel, strides, dilations (d, h, w; 1-D: [0] only) */
    int pb[3], pe[3];         /* pads begin / end */
    int group;
    bool bias, relu, chain;   /* chain: a second conv of the same geometry after it */
    bool runtime_w;           /* W a graph input: left to the reference kernel */
} ccase;

/* Lowers g as a compile does, asserts whether nodes of `op` at `rank` are
 * left (lowered: none), then compiles and checks it against the reference
 * executor. */
static void finish(kiln_graph *g, int y, kiln_op op, int rank, bool lowered)
{
    assert_int_equal(kiln_graph_add_output(g, y), KILN_OK);
    int left = ct_ops_left(g, case_no, op, rank);
    if (lowered && left)
        fail_msg("case %d: %d rank-%d %s left after the pipeline", case_no, left, rank,
                 kiln_op_name(op));
    if (!lowered && !left)
        fail_msg("case %d: a %s the pass must leave was lowered", case_no, kiln_op_name(op));
    char tag[32];
    snprintf(tag, sizeof tag, "l2d%d", case_no);
    ct_check_graph(g, dir, tag, 0, 100 + (uint64_t)case_no, 1e-4, 1e-5);
    case_no++;
    kiln_graph_destroy(g);
}

static int conv(kiln_graph *g, const ccase *c, int x, int cin, int step)
{
    int r = c->nsp + 2;
    kiln_shape ws = {.rank = r, .dims = {c->m, cin / c->group}};
    for (int i = 0; i < c->nsp; i++)
        ws.dims[2 + i] = c->k[i];
    char name[16];
    snprintf(name, sizeof name, "w%d", step);
    int w;
    if (c->runtime_w)
        w = kiln_graph_add_input(g, name, KILN_DTYPE_FLOAT32, &ws);
    else
        w = ct_param(g, name, ws, 20 + (uint64_t)(case_no * 4 + step), -0.5f, 0.5f);
    snprintf(name, sizeof name, "b%d", step);
    int b = c->bias ? ct_param(g, name, ks(1, c->m), 30 + (uint64_t)(case_no * 4 + step), -0.5f,
                               0.5f)
                    : -1;
    int in[3] = {x, w, b};
    int id = kiln_graph_add_node(g, KILN_OP_CONV, NULL, in, b >= 0 ? 3 : 2, 1);
    assert_true(id >= 0);
    int64_t st[3], dl[3], pads[6];
    for (int i = 0; i < c->nsp; i++) {
        st[i] = c->s[i], dl[i] = c->dl[i];
        pads[i] = c->pb[i], pads[c->nsp + i] = c->pe[i];
    }
    assert_int_equal(kiln_node_set_ints(g, id, "strides", st, c->nsp), KILN_OK);
    assert_int_equal(kiln_node_set_ints(g, id, "dilations", dl, c->nsp), KILN_OK);
    assert_int_equal(kiln_node_set_ints(g, id, "pads", pads, 2 * c->nsp), KILN_OK);
    assert_int_equal(kiln_node_set_int(g, id, "group", c->group), KILN_OK);
    int y = kiln_graph_node_output(g, id, 0);
    if (c->relu) {
        int rl = kiln_graph_add_node(g, KILN_OP_RELU, NULL, &y, 1, 1);
        y = kiln_graph_node_output(g, rl, 0);
    }
    return y;
}

static void check_conv(const ccase *c)
{
    kiln_graph *g;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    kiln_shape xs = c->nsp == 1 ? ks(3, c->n, c->c, c->w) : ks(5, c->n, c->c, c->d, c->h, c->w);
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &xs);
    int y = conv(g, c, x, c->c, 0);
    if (c->chain)
        y = conv(g, c, y, c->m, 1);
    finish(g, y, KILN_OP_CONV, c->nsp + 2, !c->runtime_w);
}

static void test_conv1d(void **state)
{
    (void)state;
    static const ccase cases[] = {
        /* nsp n c m d h w  k        s        dl       pb       pe     grp bias relu chain rtw */
        {1, 1, 8, 16, 0, 0, 40, {3}, {1}, {1}, {1}, {1}, 1, true, true, true, false},
        {1, 2, 6, 5, 0, 0, 33, {10}, {5}, {1}, {0}, {0}, 1, false, false, false, false},
        {1, 1, 8, 8, 0, 0, 30, {3}, {2}, {1}, {1}, {0}, 1, true, false, false, false},
        {1, 1, 6, 12, 0, 0, 50, {3}, {1}, {4}, {8}, {0}, 1, true, true, false, false}, /* causal TCN */
        {1, 1, 8, 8, 0, 0, 29, {5}, {1}, {1}, {2}, {2}, 4, true, false, false, false},
        {1, 1, 16, 16, 0, 0, 37, {7}, {1}, {1}, {3}, {3}, 16, false, true, false, false}, /* dw */
        {1, 1, 4, 6, 0, 0, 20, {3}, {1}, {1}, {1}, {1}, 1, true, false, false, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_conv(&cases[i]);
}

static void test_conv3d(void **state)
{
    (void)state;
    static const ccase cases[] = {
        /* nsp n c m  d  h   w   k          s          dl         pb         pe      grp bias relu chain rtw */
        {3, 1, 3, 8, 6, 10, 12, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1, true, true, true, false},
        {3, 2, 4, 6, 7, 9, 8, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1, true, false, false, false},
        {3, 1, 5, 7, 4, 8, 8, {1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}, {0, 1, 1}, 1, false, true, false, false},
        {3, 1, 6, 6, 8, 5, 5, {3, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 0, 0}, {1, 0, 0}, 1, true, false, false, false},
        {3, 1, 8, 8, 5, 6, 6, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 4, true, true, false, false},
        {3, 1, 4, 4, 9, 7, 7, {3, 3, 3}, {1, 1, 1}, {2, 2, 1}, {2, 2, 1}, {2, 2, 1}, 1, false, false, false, false},
        {3, 1, 3, 5, 6, 7, 9, {2, 3, 4}, {2, 1, 2}, {1, 1, 1}, {0, 1, 2}, {1, 0, 1}, 1, true, false, false, false},
        {3, 1, 3, 4, 4, 6, 6, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1, true, false, false, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_conv(&cases[i]);
}

/* A 3-D conv followed by BatchNormalization and Relu (fold-batchnorm runs
 * before the lowering, on the rank-5 conv). */
static void test_conv3d_bn(void **state)
{
    (void)state;
    kiln_graph *g;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    kiln_shape xs = ks(5, 1, 4, 5, 8, 8);
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &xs);
    ccase c = {3, 1, 4, 8, 5, 8, 8, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1,
               false, false, false, false};
    int y = conv(g, &c, x, 4, 0);
    int in[5] = {y, ct_param(g, "scale", ks(1, 8), 51, 0.5f, 1.5f),
                 ct_param(g, "shift", ks(1, 8), 52, -0.5f, 0.5f),
                 ct_param(g, "mean", ks(1, 8), 53, -0.5f, 0.5f),
                 ct_param(g, "var", ks(1, 8), 54, 0.5f, 1.5f)};
    int bn = kiln_graph_add_node(g, KILN_OP_BATCHNORM, NULL, in, 5, 1);
    y = kiln_graph_node_output(g, bn, 0);
    int rl = kiln_graph_add_node(g, KILN_OP_RELU, NULL, &y, 1, 1);
    finish(g, kiln_graph_node_output(g, rl, 0), KILN_OP_CONV, 5, true);
}

typedef struct pcase {
    bool max;
    int n, c, d, h, w;
    int k[3], s[3], pb[3], pe[3];
    int ceil, incl; /* ceil_mode, count_include_pad */
    bool lowered;
} pcase;

static void test_pool3d(void **state)
{
    (void)state;
    static const pcase cases[] = {
        /* max n c  d  h   w   k          s          pb         pe      ceil incl low */
        {true, 1, 8, 8, 16, 16, {2, 2, 2}, {2, 2, 2}, {0, 0, 0}, {0, 0, 0}, 0, 0, true},
        {true, 2, 3, 7, 9, 9, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}, 0, 0, true},
        {true, 1, 4, 5, 7, 7, {1, 2, 2}, {1, 2, 2}, {0, 0, 0}, {0, 0, 0}, 1, 0, true},
        {true, 1, 4, 7, 6, 9, {3, 2, 3}, {2, 2, 2}, {0, 0, 1}, {1, 0, 0}, 1, 0, true},
        {false, 1, 5, 6, 8, 8, {2, 2, 2}, {2, 2, 2}, {0, 0, 0}, {0, 0, 0}, 0, 0, true},
        {false, 1, 3, 7, 7, 7, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}, 0, 0, true},
        {false, 1, 3, 7, 7, 7, {3, 3, 3}, {1, 2, 2}, {1, 1, 1}, {1, 1, 1}, 0, 1, true},
        {false, 1, 3, 7, 7, 7, {2, 2, 2}, {2, 2, 2}, {0, 0, 0}, {0, 0, 0}, 1, 0, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const pcase *c = &cases[i];
        kiln_graph *g;
        assert_int_equal(kiln_graph_create(&g), KILN_OK);
        kiln_shape xs = ks(5, c->n, c->c, c->d, c->h, c->w);
        int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &xs);
        kiln_op op = c->max ? KILN_OP_MAXPOOL : KILN_OP_AVERAGEPOOL;
        int id = kiln_graph_add_node(g, op, NULL, &x, 1, 1);
        int64_t k[3], s[3], pads[6];
        for (int d = 0; d < 3; d++)
            k[d] = c->k[d], s[d] = c->s[d], pads[d] = c->pb[d], pads[3 + d] = c->pe[d];
        assert_int_equal(kiln_node_set_ints(g, id, "kernel_shape", k, 3), KILN_OK);
        assert_int_equal(kiln_node_set_ints(g, id, "strides", s, 3), KILN_OK);
        assert_int_equal(kiln_node_set_ints(g, id, "pads", pads, 6), KILN_OK);
        assert_int_equal(kiln_node_set_int(g, id, "ceil_mode", c->ceil), KILN_OK);
        if (!c->max)
            assert_int_equal(kiln_node_set_int(g, id, "count_include_pad", c->incl), KILN_OK);
        finish(g, kiln_graph_node_output(g, id, 0), op, 5, c->lowered);
    }
}

int main(void)
{
    dir = kt_tempdir();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv1d),
        cmocka_unit_test(test_conv3d),
        cmocka_unit_test(test_conv3d_bn),
        cmocka_unit_test(test_pool3d),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kt_rmdir(dir);
    free(dir);
    return rc;
}
