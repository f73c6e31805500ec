/* tests/compiler/test_conv_transpose.c: 2-D ConvTranspose compiled end to
 * end against the reference executor (rtol 1e-4, atol 1e-5). The
 * lower-conv-transpose pass (src/pass/lower_conv_transpose.c) turns it into
 * a Conv over its stride phases plus an interleave; each case also asserts
 * whether the pass took the node (no ConvTranspose left after the pipeline)
 * or left it to the reference kernel (dilation > 1, a pad that would crop
 * before the first input), so a geometry that silently stops being lowered
 * fails here. Cases: the upsamplers of detection and generative networks
 * (k2 s2 of Mask R-CNN's mask head, k4 s2 p1 of Keypoint R-CNN and DCGAN),
 * k3 s2 with output_padding (zero taps) and without (a cropped phase),
 * stride 1, groups, unequal strides and kernels with asymmetric pads, a
 * stride above the kernel (phases the bias alone reaches), output_shape,
 * SAME_UPPER, batch 2, a blocked input (a conv in front) and a Relu after;
 * and 1-D ones (k4 s2 p1, k3 s3 with output_padding, grouped, output_shape). */
#include "compiler_test.h"

static char *dir;
static int case_no;

typedef struct tcase {
    int n, c, m, h, w;
    int kh, kw, sh, sw;
    int pt, pl, pb, pr;
    int oph, opw;    /* output_padding */
    int group, dil;  /* dil: dilation of both dims */
    int osh, osw;    /* output_shape (0: none) */
    bool same_upper; /* auto_pad SAME_UPPER (pads ignored) */
    bool bias, pre, relu;
    bool lowered; /* the pass must take it */
    bool oned;    /* 1-D: x [n, c, w], the w dim's parameters */
} tcase;

static void check_case(const tcase *c)
{
    kiln_graph *g;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    int sp = c->oned ? 1 : 2; /* spatial dims */
    kiln_shape xs = c->oned ? ks(3, c->n, c->pre ? 16 : c->c, c->w)
                            : ks(4, c->n, c->pre ? 16 : c->c, c->h, c->w);
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &xs);
    if (c->pre && !c->oned) {
        static const int zero[4] = {0, 0, 0, 0};
        int w0 = ct_param(g, "w0", ks(4, c->c, 16, 1, 1), 10 + (uint64_t)case_no, -0.5f, 0.5f);
        x = ct_conv(g, x, w0, -1, 1, 1, zero, 1);
        int id = kiln_graph_add_node(g, KILN_OP_RELU, NULL, &x, 1, 1);
        x = kiln_graph_node_output(g, id, 0);
    }
    kiln_shape wsh = c->oned ? ks(3, c->c, c->m / c->group, c->kw)
                             : ks(4, c->c, c->m / c->group, c->kh, c->kw);
    int w = ct_param(g, "w", wsh, 20 + (uint64_t)case_no, -0.5f, 0.5f);
    int b = c->bias ? ct_param(g, "b", ks(1, c->m), 30 + (uint64_t)case_no, -0.5f, 0.5f) : -1;
    int in[3] = {x, w, b};
    int id = kiln_graph_add_node(g, KILN_OP_CONVTRANSPOSE, "convt", in, b >= 0 ? 3 : 2, 1);
    assert_true(id >= 0);
    /* 2-D: {h, w} and pads {t, l, b, r}; 1-D: {w} and pads {l, r} */
    int64_t st[2] = {c->sh, c->sw}, k[2] = {c->kh, c->kw}, dl[2] = {c->dil, c->dil};
    int64_t pd[4] = {c->pt, c->pl, c->pb, c->pr}, op[2] = {c->oph, c->opw};
    int64_t os[2] = {c->osh, c->osw};
    if (c->oned) {
        st[0] = c->sw, k[0] = c->kw, pd[0] = c->pl, pd[1] = c->pr, op[0] = c->opw, os[0] = c->osw;
    }
    assert_int_equal(kiln_node_set_ints(g, id, "strides", st, sp), KILN_OK);
    assert_int_equal(kiln_node_set_ints(g, id, "kernel_shape", k, sp), KILN_OK);
    assert_int_equal(kiln_node_set_ints(g, id, "dilations", dl, sp), KILN_OK);
    assert_int_equal(kiln_node_set_int(g, id, "group", c->group), KILN_OK);
    if (c->same_upper)
        assert_int_equal(kiln_node_set_string(g, id, "auto_pad", "SAME_UPPER"), KILN_OK);
    else
        assert_int_equal(kiln_node_set_ints(g, id, "pads", pd, 2 * sp), KILN_OK);
    if (c->oph || c->opw)
        assert_int_equal(kiln_node_set_ints(g, id, "output_padding", op, sp), KILN_OK);
    if (c->osh || c->osw)
        assert_int_equal(kiln_node_set_ints(g, id, "output_shape", os, sp), KILN_OK);
    int y = kiln_graph_node_output(g, id, 0);
    if (c->relu) {
        int r = kiln_graph_add_node(g, KILN_OP_RELU, NULL, &y, 1, 1);
        y = kiln_graph_node_output(g, r, 0);
    }
    assert_int_equal(kiln_graph_add_output(g, y), KILN_OK);
    kiln_error err = {0};
    assert_int_equal(kiln_graph_infer_shapes(g, &err), KILN_OK);

    kiln_pass_ctx *ctx;
    kiln_lowered *l;
    ct_lower(g, case_no, &ctx, &l);
    int left = ct_count_op(ctx->g, KILN_OP_CONVTRANSPOSE, -1);
    if (getenv("KT_VERBOSE"))
        printf("case %d: x[%d,%d,%d,%d] k%dx%d s%dx%d pads %d,%d,%d,%d op %d,%d g%d d%d: %s\n",
               case_no, c->n, c->c, c->h, c->w, c->kh, c->kw, c->sh, c->sw, c->pt, c->pl, c->pb,
               c->pr, c->oph, c->opw, c->group, c->dil, left ? "reference" : "lowered");
    if (c->lowered && left)
        fail_msg("case %d: the ConvTranspose was not lowered", case_no);
    if (!c->lowered && !left)
        fail_msg("case %d: a ConvTranspose the pass must leave was lowered", case_no);
    if (c->lowered && ct_count_op(ctx->g, KILN_OP_CONV, -1) < 1 + c->pre)
        fail_msg("case %d: no Conv after lowering", case_no);
    kiln_lowered_destroy(l);
    kiln_pass_ctx_destroy(ctx);

    char tag[32];
    snprintf(tag, sizeof tag, "t%d", case_no);
    ct_check_graph(g, dir, tag, 0, 100 + (uint64_t)case_no, 1e-4, 1e-5);
    case_no++;
    kiln_graph_destroy(g);
}

static void test_conv_transpose(void **state)
{
    (void)state;
    static const tcase cases[] = {
        /* n  c  m  h  w kh kw sh sw pt pl pb pr oph opw g d osh osw same bias pre relu low 1d */
        {2, 8, 8, 5, 6, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, false, true, true, true, true, false},
        {1, 8, 5, 6, 5, 4, 4, 2, 2, 1, 1, 1, 1, 0, 0, 1, 1, 0, 0, false, true, false, false, true, false},
        {1, 6, 7, 5, 7, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, false, true, true, false, true, false},
        {1, 6, 4, 5, 4, 3, 3, 2, 2, 1, 1, 1, 1, 0, 0, 1, 1, 0, 0, false, false, false, true, true, false},
        {1, 5, 6, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, 0, false, true, false, false, true, false},
        {1, 5, 3, 4, 5, 3, 3, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, false, false, false, false, true, false},
        {1, 8, 6, 5, 5, 4, 4, 2, 2, 1, 1, 1, 1, 0, 0, 2, 1, 0, 0, false, true, true, false, true, false},
        {1, 4, 5, 5, 6, 3, 2, 2, 1, 0, 1, 1, 0, 0, 0, 1, 1, 0, 0, false, true, false, true, true, false},
        {1, 4, 3, 4, 4, 2, 2, 3, 3, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, false, true, false, false, true, false},
        {1, 4, 3, 4, 4, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, false, true, false, false, true, false},
        {1, 4, 4, 4, 5, 3, 3, 2, 2, 0, 0, 0, 0, 0, 0, 1, 1, 10, 11, false, true, false, false, true, false},
        {1, 4, 4, 5, 5, 3, 3, 2, 2, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, true, true, false, false, true, false},
        {1, 4, 4, 5, 5, 3, 3, 2, 2, 1, 1, 1, 1, 0, 0, 1, 2, 0, 0, false, true, false, false, false, false},
        {1, 4, 4, 5, 5, 2, 2, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 0, 0, false, true, false, false, false, false},
        /* k1 s3: 9 phases of one tap against one kernel tap: left to the reference */
        {1, 4, 3, 4, 4, 1, 1, 3, 3, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, false, true, false, false, false, false},
        /* 1-D (h, kh, sh, pt, pb, oph, osh unused): a vocoder's k4 s2 p1, k3 s3 with
         * output_padding, grouped k5 s2 p2 with a Relu, output_shape */
        {2, 6, 4, 1, 9, 1, 4, 1, 2, 0, 1, 0, 1, 0, 0, 1, 1, 0, 0, false, true, false, false, true, true},
        {1, 4, 5, 1, 7, 1, 3, 1, 3, 0, 0, 0, 0, 0, 2, 1, 1, 0, 0, false, false, false, false, true, true},
        {1, 8, 6, 1, 8, 1, 5, 1, 2, 0, 2, 0, 2, 0, 1, 2, 1, 0, 0, false, true, false, true, true, true},
        {1, 4, 4, 1, 6, 1, 3, 1, 2, 0, 0, 0, 0, 0, 0, 1, 1, 0, 14, false, true, false, false, true, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(&cases[i]);
}

int main(void)
{
    dir = kt_tempdir();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_transpose),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kt_rmdir(dir);
    free(dir);
    return rc;
}
