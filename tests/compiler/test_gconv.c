/* tests/compiler/test_gconv.c: grouped convolutions against the reference
 * executor, compiled end to end (rtol 1e-3, atol 1e-4): groups 2..64 of
 * widths 1..16 (those narrower than a channel block run on
 * gconv2d_planes_nchwc's input planes or gconv2d_nchwc's block-diagonal
 * weights, the rest on conv2d_nchwc / conv2d_direct / dwconv2d_nchwc), 1x1/3x3/5x5, stride 1 and 2, asymmetric pads, batch 2,
 * bias or not, Relu / residual Add + Relu / Clip epilogues, default and
 * random knobs. Each case also asserts which template the lowering picked,
 * so a narrow-group conv that silently fell back fails here. A blocked conv
 * before the grouped one makes its input arrive in NCHW{vec}c as in a
 * network (resnext: 1x1 conv, then the grouped 3x3). */
#include "codegen/c/kernels/kiln_kernels_gconv.h" /* kiln_gconv_planes_pay */
#include "compiler_test.h"
#include "lower/lower.h"
#include "pass/pass.h"
#include "target/target.h"
#include "util/rng.h"

static char *dir;
static int case_no;

typedef struct gcase {
    int n, gw, groups, h, w, k, s, pt, pl, pb, pr;
    bool bias, pre; /* pre: a 1x1 conv in front (input arrives blocked) */
    int epi;        /* 0 none, 1 relu, 2 residual add + relu, 3 clip 0..6 */
} gcase;

static int unary(kiln_graph *g, kiln_op op, int x)
{
    int id = kiln_graph_add_node(g, op, NULL, &x, 1, 1);
    assert_true(id >= 0);
    return kiln_graph_node_output(g, id, 0);
}

/* The task anchored at the grouped conv. */
static bool grouped(const kiln_pass_ctx *ctx, const kiln_task *t)
{
    const kiln_node *a = ctx->g->nodes[t->anchor];
    return a->op == KILN_OP_CONV && kiln_attr_int(a, "group", 1) > 1;
}

static void check_case(const gcase *c, uint64_t knob_seed)
{
    kiln_graph *g;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    int C = c->gw * c->groups;
    kiln_shape xs = ks(4, c->n, c->pre ? 16 : C, c->h, c->w);
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &xs);
    if (c->pre) {
        static const int zero[4] = {0, 0, 0, 0};
        int w0 = ct_param(g, "w0", ks(4, C, 16, 1, 1), 10 + (uint64_t)case_no, -0.5f, 0.5f);
        x = unary(g, KILN_OP_RELU, ct_conv(g, x, w0, -1, 1, 1, zero, 1));
    }
    int w = ct_param(g, "w", ks(4, C, c->gw, c->k, c->k), 20 + (uint64_t)case_no, -0.5f, 0.5f);
    int b = c->bias ? ct_param(g, "b", ks(1, C), 30 + (uint64_t)case_no, -0.5f, 0.5f) : -1;
    int pads[4] = {c->pt, c->pl, c->pb, c->pr};
    int y = ct_conv(g, x, w, b, c->k, c->s, pads, c->groups);
    kiln_error err = {0};
    assert_int_equal(kiln_graph_infer_shapes(g, &err), KILN_OK);
    if (c->epi == 2) {
        int r = kiln_graph_add_input(g, "r", KILN_DTYPE_FLOAT32, &g->values[y]->shape);
        int a[2] = {y, r};
        int id = kiln_graph_add_node(g, KILN_OP_ADD, NULL, a, 2, 1);
        y = kiln_graph_node_output(g, id, 0);
    }
    if (c->epi == 1 || c->epi == 2)
        y = unary(g, KILN_OP_RELU, y);
    if (c->epi == 3) {
        int id = kiln_graph_add_node(g, KILN_OP_CLIP, NULL, &y, 1, 1);
        kiln_node_set_float(g, id, "min", 0.0f);
        kiln_node_set_float(g, id, "max", 6.0f);
        y = kiln_graph_node_output(g, id, 0);
    }
    assert_int_equal(kiln_graph_add_output(g, y), KILN_OK);
    assert_int_equal(kiln_graph_infer_shapes(g, &err), KILN_OK);

    kiln_target tg;
    assert_int_equal(kiln_target_resolve(NULL, &tg, &err), KILN_OK);
    char tpl[64];
    ct_template_of(g, case_no, grouped, tpl, sizeof tpl);
    bool narrow = c->gw >= 2 && c->gw < tg.vec && tg.vec % c->gw == 0 && C % tg.vec == 0;
    if (getenv("KT_VERBOSE"))
        printf("case %d: n%d %dx%d groups k%d s%d pads %d,%d,%d,%d %dx%d pre%d epi%d -> %s\n",
               case_no, c->n, c->groups, c->gw, c->k, c->s, c->pt, c->pl, c->pb, c->pr, c->h,
               c->w, c->pre, c->epi, tpl);
    /* narrow: the planes where they pay (the kernel header's rule), else
     * block-diagonal weights */
    const char *want = !narrow ? NULL
                       : kiln_gconv_planes_pay(c->k, c->k, c->s, c->s, c->gw, tg.vec)
                           ? "gconv2d_planes_nchwc"
                           : "gconv2d_nchwc";
    if (want && strcmp(tpl, want) != 0)
        fail_msg("case %d: %d groups of %d ran on '%s', not %s", case_no, c->groups, c->gw, tpl,
                 want);
    if (!want && (!strcmp(tpl, "gconv2d_nchwc") || !strcmp(tpl, "gconv2d_planes_nchwc")))
        fail_msg("case %d: %d groups of %d taken by %s", case_no, c->groups, c->gw, tpl);
    char tag[32];
    snprintf(tag, sizeof tag, "g%d", case_no);
    ct_check_graph(g, dir, tag, 0, 100 + (uint64_t)case_no, 1e-3, 1e-4);
    if (knob_seed) {
        snprintf(tag, sizeof tag, "g%d_k", case_no);
        ct_check_graph(g, dir, tag, knob_seed, 200 + (uint64_t)case_no, 1e-3, 1e-4);
    }
    case_no++;
    kiln_graph_destroy(g);
}

/* resnext50_32x4d's grouped 3x3s, reduced spatially, and edge widths. */
static void test_gconv_fixed(void **state)
{
    (void)state;
    static const gcase cases[] = {
        /* n gw grp  h   w  k  s pt pl pb pr bias  pre   epi */
        {1, 4, 32, 9, 10, 3, 1, 1, 1, 1, 1, true, true, 1},   /* layer1: 32x4 */
        {1, 8, 32, 10, 9, 3, 2, 1, 1, 1, 1, true, true, 1},   /* layer2.0: 32x8, s2 */
        {2, 8, 4, 7, 7, 3, 1, 1, 1, 1, 1, false, true, 2},    /* residual, batch 2 */
        {1, 2, 16, 8, 11, 5, 2, 2, 1, 0, 2, true, false, 3},  /* 2 wide, 5x5 s2, asym */
        {1, 4, 4, 6, 6, 1, 1, 0, 0, 0, 0, true, true, 0},     /* 1x1 grouped */
        {1, 16, 4, 7, 7, 3, 1, 1, 1, 1, 1, true, true, 1},    /* whole blocks: conv2d_nchwc */
        {1, 3, 8, 7, 8, 3, 1, 1, 1, 1, 1, true, false, 1},    /* width 3: not narrow */
        {1, 1, 32, 7, 7, 3, 1, 1, 1, 1, 1, true, true, 1},    /* depthwise */
        {1, 4, 2, 7, 7, 3, 1, 1, 1, 1, 1, true, false, 1},    /* C = 8 < block */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(&cases[i], 4000 + i);
}

static void test_gconv_random(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 11);
    static const int widths[] = {1, 2, 4, 8, 16, 2, 4, 8, 3, 5};
    static const int ksz[] = {1, 3, 3, 5};
    for (int i = 0; i < 10; i++) {
        gcase c = {0};
        c.n = 1 + (int)(kiln_rng_next(&r) % 2);
        c.gw = widths[kiln_rng_next(&r) % 10];
        int max_g = c.gw >= 8 ? 8 : 64 / c.gw;
        c.groups = 2 + (int)(kiln_rng_next(&r) % (uint64_t)(max_g - 1));
        if (kiln_rng_next(&r) % 2) /* whole blocks of 16 most of the time */
            c.groups = (c.groups * c.gw + 15) / 16 * 16 / c.gw;
        if (c.groups < 2)
            c.groups = 2;
        c.k = ksz[kiln_rng_next(&r) % 4];
        c.s = 1 + (int)(kiln_rng_next(&r) % 2);
        c.h = c.k + 2 + (int)(kiln_rng_next(&r) % 8);
        c.w = c.k + 2 + (int)(kiln_rng_next(&r) % 8);
        c.pt = (int)(kiln_rng_next(&r) % (uint64_t)c.k);
        c.pl = (int)(kiln_rng_next(&r) % (uint64_t)c.k);
        c.pb = (int)(kiln_rng_next(&r) % (uint64_t)c.k);
        c.pr = (int)(kiln_rng_next(&r) % (uint64_t)c.k);
        c.bias = kiln_rng_next(&r) % 2;
        c.pre = kiln_rng_next(&r) % 3 != 0;
        c.epi = (int)(kiln_rng_next(&r) % 4);
        check_case(&c, 5000 + (uint64_t)i);
    }
}

int main(void)
{
    dir = kt_tempdir();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gconv_fixed),
        cmocka_unit_test(test_gconv_random),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kt_rmdir(dir);
    free(dir);
    return rc;
}
