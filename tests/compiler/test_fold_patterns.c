/* tests/compiler/test_fold_patterns.c: the fold-patterns pass turns the
 * exported GELU chains (torch.onnx's x * (1 + erf(x / sqrt 2)) * 0.5 and the
 * x * 0.5 * (1 + erf(x * 1/sqrt 2)) association, operands in either order)
 * into one Gelu fused into the producing dense layer, and the opset<17
 * LayerNorm chain into LayerNormalization; the compiled graph matches the
 * reference executor on the unfused one (rtol 1e-3, atol 1e-4). A chain whose
 * intermediate is read elsewhere, or with other constants, is left alone.
 * A zero spatial Pad before a Conv or AveragePool goes into the consumer's
 * pads (asymmetric, added to the consumer's own); a Pad with another value,
 * on the batch or channel axis, read twice, or before a pool that does not count its
 * own pads stays. */
#include <math.h>

#include "compiler_test.h"
#include "pass/pass.h"
#include "target/target.h"

static char *dir;
static int case_no;

static int bin(kiln_graph *g, kiln_op op, int a, int b)
{
    int in[2] = {a, b};
    int id = kiln_graph_add_node(g, op, NULL, in, 2, 1);
    assert_true(id >= 0);
    return kiln_graph_node_output(g, id, 0);
}

static int un(kiln_graph *g, kiln_op op, int a)
{
    int id = kiln_graph_add_node(g, op, NULL, &a, 1, 1);
    assert_true(id >= 0);
    return kiln_graph_node_output(g, id, 0);
}

static int scalar(kiln_graph *g, float v)
{
    kiln_shape s = {.rank = 0};
    return kiln_graph_add_const(g, NULL, KILN_DTYPE_FLOAT32, &s, &v);
}

static int param(kiln_graph *g, kiln_shape s, uint64_t seed, float lo, float hi)
{
    void *data = NULL;
    int v = kiln_graph_add_const_uninit(g, NULL, KILN_DTYPE_FLOAT32, &s, true, &data);
    kt_fill_random(data, kiln_shape_numel(&s), seed, lo, hi);
    return v;
}

static int mean_last(kiln_graph *g, int x)
{
    int id = kiln_graph_add_node(g, KILN_OP_REDUCEMEAN, NULL, &x, 1, 1);
    const int64_t ax[1] = {-1};
    assert_int_equal(kiln_node_set_ints(g, id, "axes", ax, 1), KILN_OK);
    return kiln_graph_node_output(g, id, 0);
}

/* Runs the pipeline up to dce, counts nodes of `op`, then checks the graph
 * compiled against the reference executor. */
static void check(kiln_graph *g, int y, kiln_op op, int want)
{
    assert_int_equal(kiln_graph_add_output(g, y), KILN_OK);
    kiln_error err = {0};
    if (kiln_graph_infer_shapes(g, &err) != KILN_OK)
        fail_msg("case %d: %s", case_no, err.msg);
    kiln_target tg;
    assert_int_equal(kiln_target_resolve(NULL, &tg, &err), KILN_OK);
    kiln_pass_ctx *ctx = NULL;
    assert_int_equal(kiln_pass_ctx_create(g, &tg, &ctx, &err), KILN_OK);
    assert_int_equal(kiln_pass_run_until(ctx, "fuse", &err), KILN_OK);
    int n = 0;
    for (int i = 0; i < ctx->g->n_nodes; i++)
        n += ctx->g->nodes[i]->op == op;
    if (n != want)
        fail_msg("case %d: %d %s nodes after the passes, expected %d", case_no, n,
                 kiln_op_name(op), want);
    if (op == KILN_OP_GELU && want) /* one kernel: the dense with its epilogue */
        assert_int_equal(ctx->n_groups, 1);
    kiln_pass_ctx_destroy(ctx);
    char tag[32];
    snprintf(tag, sizeof tag, "fp%d", case_no++);
    ct_check_graph(g, dir, tag, 0, 500 + (uint64_t)case_no, 1e-3, 1e-4);
    kiln_graph_destroy(g);
}

/* dense (MatMul with a constant B + bias) then a GELU chain in form `form`. */
static void gelu_case(int form, bool spoil)
{
    kiln_graph *g;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    kiln_shape xs = {.rank = 2, .dims = {7, 19}}, ws = {.rank = 2, .dims = {19, 37}};
    kiln_shape bs = {.rank = 1, .dims = {37}};
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &xs);
    x = bin(g, KILN_OP_MATMUL, x, param(g, ws, 1, -1.0f, 1.0f));
    x = bin(g, KILN_OP_ADD, param(g, bs, 2, -1.0f, 1.0f), x);
    int d = form == 0 ? bin(g, KILN_OP_DIV, x, scalar(g, (float)sqrt(2.0)))
                      : bin(g, KILN_OP_MUL, scalar(g, (float)(1.0 / sqrt(2.0))), x);
    int e = un(g, KILN_OP_ERF, d);
    int t = bin(g, KILN_OP_ADD, form == 0 ? e : scalar(g, 1.0f), form == 0 ? scalar(g, 1.0f) : e);
    int y;
    if (form == 0) /* torch.onnx: (x * t) * 0.5 */
        y = bin(g, KILN_OP_MUL, bin(g, KILN_OP_MUL, x, t), scalar(g, 0.5f));
    else /* (0.5 * x) * t */
        y = bin(g, KILN_OP_MUL, t, bin(g, KILN_OP_MUL, scalar(g, 0.5f), x));
    if (spoil) /* erf's output read again: not a GELU any more */
        y = bin(g, KILN_OP_ADD, y, e);
    check(g, y, KILN_OP_GELU, spoil ? 0 : 1);
}

static void test_gelu(void **state)
{
    (void)state;
    gelu_case(0, false);
    gelu_case(1, false);
    gelu_case(0, true);
}

static void ln_case(float pow_exp, int want)
{
    kiln_graph *g;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    kiln_shape xs = {.rank = 3, .dims = {2, 5, 33}}, cs = {.rank = 1, .dims = {33}};
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &xs);
    int s = bin(g, KILN_OP_SUB, x, mean_last(g, x));
    int v = mean_last(g, bin(g, KILN_OP_POW, s, scalar(g, pow_exp)));
    int r = un(g, KILN_OP_SQRT, bin(g, KILN_OP_ADD, v, scalar(g, 1e-5f)));
    int y = bin(g, KILN_OP_DIV, s, r);
    y = bin(g, KILN_OP_MUL, y, param(g, cs, 3, 0.5f, 1.5f));
    y = bin(g, KILN_OP_ADD, y, param(g, cs, 4, -0.5f, 0.5f));
    check(g, y, KILN_OP_LAYERNORM, want);
}

/* x [1, 5, 9, 11] -> Pad (pads, value) -> Conv 3x3 (stride 2, own pads 1,0,
 * 0,1) or AveragePool 3x3 (own pads when cip >= 0, count_include_pad cip);
 * `twice`: the Pad's output also read by an Add. */
static void pad_case(bool conv, const int64_t pads[8], float value, int cip, bool twice, int want)
{
    kiln_graph *g;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    kiln_shape xs = {.rank = 4, .dims = {1, 5, 9, 11}};
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &xs);
    int id = kiln_graph_add_node(g, KILN_OP_PAD, NULL, &x, 1, 1);
    assert_int_equal(kiln_node_set_ints(g, id, "pads", pads, 8), KILN_OK);
    if (value != 0.0f)
        assert_int_equal(kiln_node_set_float(g, id, "value", value), KILN_OK);
    int p = kiln_graph_node_output(g, id, 0);
    const int64_t k3[2] = {3, 3}, s2[2] = {2, 2}, own[4] = {1, 0, 0, 1};
    int y;
    if (conv) {
        kiln_shape ws = {.rank = 4, .dims = {6, 5, 3, 3}}, bs = {.rank = 1, .dims = {6}};
        int in[3] = {p, param(g, ws, 5, -0.5f, 0.5f), param(g, bs, 6, -0.5f, 0.5f)};
        id = kiln_graph_add_node(g, KILN_OP_CONV, NULL, in, 3, 1);
        assert_int_equal(kiln_node_set_ints(g, id, "strides", s2, 2), KILN_OK);
        assert_int_equal(kiln_node_set_ints(g, id, "pads", own, 4), KILN_OK);
    } else {
        id = kiln_graph_add_node(g, KILN_OP_AVERAGEPOOL, NULL, &p, 1, 1);
        assert_int_equal(kiln_node_set_ints(g, id, "kernel_shape", k3, 2), KILN_OK);
        if (cip >= 0) {
            assert_int_equal(kiln_node_set_ints(g, id, "pads", own, 4), KILN_OK);
            assert_int_equal(kiln_node_set_int(g, id, "count_include_pad", cip), KILN_OK);
        }
    }
    y = kiln_graph_node_output(g, id, 0);
    if (twice) {
        const int64_t crop[8] = {0}; /* an identity Pad of p, so shapes meet */
        int c = kiln_graph_add_node(g, KILN_OP_PAD, NULL, &p, 1, 1);
        assert_int_equal(kiln_node_set_ints(g, c, "pads", crop, 8), KILN_OK);
        assert_int_equal(kiln_graph_add_output(g, kiln_graph_node_output(g, c, 0)), KILN_OK);
    }
    check(g, y, KILN_OP_PAD, want);
}

static void test_pad(void **state)
{
    (void)state;
    const int64_t sp[8] = {0, 0, 1, 2, 0, 0, 2, 1}, nb[8] = {1, 0, 1, 1, 0, 0, 1, 1};
    pad_case(false, sp, 0.0f, -1, false, 0); /* torch's avg_pool2d(padding) */
    pad_case(false, sp, 0.0f, 1, false, 0);  /* the pool counts its own pads too */
    pad_case(true, sp, 0.0f, -1, false, 0);  /* added to the conv's own pads */
    pad_case(false, sp, 0.0f, 0, false, 1);  /* own pads not counted: stays */
    pad_case(false, sp, 1.0f, -1, false, 1); /* not a zero pad */
    pad_case(true, nb, 0.0f, -1, false, 1);  /* pads the batch axis */
    pad_case(true, sp, 0.0f, -1, true, 2);   /* read twice (plus the identity Pad) */
}

static void test_layernorm(void **state)
{
    (void)state;
    ln_case(2.0f, 1);
    ln_case(3.0f, 0); /* not a variance */
}

int main(void)
{
    dir = kt_tempdir();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gelu),
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_pad),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kt_rmdir(dir);
    free(dir);
    return rc;
}
