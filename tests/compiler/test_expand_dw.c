/* tests/compiler/test_expand_dw.c: the expand 1x1 + depthwise fusion
 * (tpl_expand_dwconv2d_nchwc.c, kiln_kernels_expdw.h) against the
 * reference executor, compiled end to end (rtol 1e-3, atol 1e-4).
 *
 * Each case is an inverted-residual block as networks have it: a stem conv
 * making the block's input blocked (as in a network), the expand 1x1 conv
 * with bias and an activation, the depthwise 3x3 or 5x5 at stride 1 or 2
 * with an activation, then one of: the graph output, a project 1x1 conv
 * (with the residual Add at stride 1), or a squeeze-excite gate (global
 * pool, sigmoid, channel-wise Mul) reading the depthwise output twice.
 * Activations: Relu, Clip 0..6 (ReLU6), HardSwish, SiLU (x * sigmoid(x)).
 * Channels not multiples of 16 (blocks of 4 and 8, and a block of 16 read
 * from 24 channels padded to 32), odd spatial sizes and padding, batch 2,
 * defaults and random knobs. The images are sized so that the wide tensor
 * overflows this machine's L2, where the cost model fuses; each case asserts
 * the fused template took the pair, and one small case that it did not. */
#include "compiler_test.h"

static int case_no;

enum { ACT_RELU, ACT_RELU6, ACT_HARDSWISH, ACT_SILU };
enum { TAIL_NONE, TAIL_PROJECT, TAIL_SE };

typedef struct ecase {
    int n, c_in, c_wide, k, s, act, tail;
    int hw;     /* image side; 0: large enough that the wide tensor overflows the L2 */
    bool fused; /* expected: the pair runs as expand_dwconv2d_nchwc */
} ecase;

static int node1(kiln_graph *g, kiln_op op, const int *in, int n_in)
{
    int id = kiln_graph_add_node(g, op, NULL, in, n_in, 1);
    assert_true(id >= 0);
    return id;
}

static int conv(kiln_graph *g, int x, int c_in, int c_out, int k, int s, int groups, uint64_t seed)
{
    int w = ct_param(g, "w", ks(4, c_out, c_in / groups, k, k), seed, -0.5f, 0.5f);
    int b = ct_param(g, "b", ks(1, c_out), seed + 1, -0.5f, 0.5f);
    return ct_conv(g, x, w, b, k, s, (int[]){k / 2, k / 2, k / 2, k / 2}, groups);
}

static int unary(kiln_graph *g, kiln_op op, int x)
{
    return kiln_graph_node_output(g, node1(g, op, &x, 1), 0);
}

static int binary(kiln_graph *g, kiln_op op, int a, int b)
{
    return kiln_graph_node_output(g, node1(g, op, (int[]){a, b}, 2), 0);
}

static int act(kiln_graph *g, int kind, int x)
{
    switch (kind) {
    case ACT_RELU:
        return unary(g, KILN_OP_RELU, x);
    case ACT_RELU6: {
        int id = node1(g, KILN_OP_CLIP, &x, 1);
        kiln_node_set_float(g, id, "min", 0.0f);
        kiln_node_set_float(g, id, "max", 6.0f);
        return kiln_graph_node_output(g, id, 0);
    }
    case ACT_HARDSWISH:
        return unary(g, KILN_OP_HARDSWISH, x);
    default:
        return binary(g, KILN_OP_MUL, x, unary(g, KILN_OP_SIGMOID, x));
    }
}

/* The task holding the depthwise conv. */
static bool holds_depthwise(const kiln_pass_ctx *ctx, const kiln_task *t)
{
    const kiln_group *gr = &ctx->groups[t->group];
    for (int j = 0; j < gr->n_nodes; j++) {
        const kiln_node *m = ctx->g->nodes[gr->nodes[j]];
        if (m->op == KILN_OP_CONV && kiln_conv_is_depthwise(ctx->g, m))
            return true;
    }
    return false;
}

/* An odd image side whose wide tensor overflows the L2 (times 1.3). */
static int side_for(const ecase *c)
{
    kiln_target tg;
    kiln_error err = {0};
    assert_int_equal(kiln_target_resolve(NULL, &tg, &err), KILN_OK);
    double px = 1.3 * (double)tg.l2_bytes / (4.0 * c->n * c->c_wide);
    int side = (int)ceil(sqrt(px));
    return side | 1;
}

static void check_case(const ecase *c, uint64_t knob_seed)
{
    kiln_graph *g;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    int hw = c->hw ? c->hw : side_for(c);
    kiln_shape xs = ks(4, c->n, 3, hw, hw);
    uint64_t sd = 100 * (uint64_t)case_no;
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &xs);
    /* the stem: an image conv whose output arrives blocked, as in a network */
    int in = unary(g, KILN_OP_RELU, conv(g, x, 3, c->c_in, 3, 1, 1, sd + 1));
    int e = act(g, c->act, conv(g, in, c->c_in, c->c_wide, 1, 1, 1, sd + 3));
    int d = act(g, c->act, conv(g, e, c->c_wide, c->c_wide, c->k, c->s, c->c_wide, sd + 5));
    int y = d;
    if (c->tail == TAIL_PROJECT) {
        y = conv(g, d, c->c_wide, c->c_in, 1, 1, 1, sd + 7);
        if (c->s == 1)
            y = binary(g, KILN_OP_ADD, y, in);
    } else if (c->tail == TAIL_SE) {
        int gate = unary(g, KILN_OP_SIGMOID, unary(g, KILN_OP_GLOBALAVERAGEPOOL, d));
        y = binary(g, KILN_OP_MUL, d, gate);
    }
    assert_int_equal(kiln_graph_add_output(g, y), KILN_OK);
    kiln_error err = {0};
    assert_int_equal(kiln_graph_infer_shapes(g, &err), KILN_OK);

    char tpl[64];
    ct_template_of(g, case_no, holds_depthwise, tpl, sizeof tpl);
    if (getenv("KT_VERBOSE"))
        printf("case %d: n%d %d->%d k%d s%d act%d tail%d %dx%d knobs %llu -> %s\n", case_no, c->n,
               c->c_in, c->c_wide, c->k, c->s, c->act, c->tail, hw, hw,
               (unsigned long long)knob_seed, tpl);
    bool fused = strcmp(tpl, "expand_dwconv2d_nchwc") == 0;
    if (fused != c->fused)
        fail_msg("case %d: %d->%d k%d s%d on %dx%d ran on '%s' (fusion expected: %d)", case_no,
                 c->c_in, c->c_wide, c->k, c->s, hw, hw, tpl, c->fused);
    char tag[32];
    snprintf(tag, sizeof tag, "e%d_%llu", case_no, (unsigned long long)knob_seed);
    ct_check_graph(g, kt_dir, tag, knob_seed, 7 + (uint64_t)case_no, 1e-3, 1e-4);
    kiln_graph_destroy(g);
}

static void test_expand_dw_fused(void **state)
{
    (void)state;
    kiln_target tg;
    kiln_error err = {0};
    assert_int_equal(kiln_target_resolve(NULL, &tg, &err), KILN_OK);
    /* wide channels that stay unpadded in their block on this target: a
     * multiple of the vector width, or a count no padding suits (AVX-512:
     * 20 in blocks of 4; AVX2 pads 20 to 24, but not 4) */
    int v = tg.vec;
    int odd = v == 16 ? 20 : 4;
    const ecase cases[] = {
        {1, 16, 6 * v, 3, 2, ACT_RELU6, TAIL_NONE, 0, true},
        {1, 24, 4 * v, 3, 1, ACT_RELU6, TAIL_PROJECT, 0, true},
        {1, 20, odd, 3, 1, ACT_RELU, TAIL_PROJECT, 0, true},
        {2, 8, 2 * v, 5, 2, ACT_HARDSWISH, TAIL_SE, 0, true},
        {1, 16, 3 * v, 5, 1, ACT_SILU, TAIL_SE, 0, true},
        {1, 12, 5 * v, 3, 2, ACT_SILU, TAIL_PROJECT, 0, true},
        {1, 24, 3 * v, 5, 2, ACT_RELU6, TAIL_NONE, 0, true},
        {1, 8, v, 3, 1, ACT_HARDSWISH, TAIL_NONE, 0, true},
        /* small: the wide tensor fits in the L2, the convs stay apart */
        {1, 16, 4 * v, 3, 1, ACT_RELU6, TAIL_PROJECT, 15, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        case_no = (int)i;
        check_case(&cases[i], 0);
        if (cases[i].fused)
            check_case(&cases[i], 1000 + i); /* a random knob sample */
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expand_dw_fused),
    };
    return cmocka_run_group_tests(tests, kt_dir_setup, kt_dir_teardown);
}
