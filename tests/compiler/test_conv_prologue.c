/* tests/compiler/test_conv_prologue.c: a conv's input prologue (fuse.c,
 * template.prologue; tpl_conv2d_nchwc.c, kiln_kernels_conv.h's
 * kiln_conv_run_pro): the elementwise group before a blocked conv, a
 * pre-activation BatchNorm's Mul and Add and a Relu (densenet's), fused into
 * the conv's group and applied as the conv stages its input.
 *
 * Each case: two stem convs concatenated (as in a dense block; the 1x1
 * cases on images whose input overflows half the L2, where the cost model
 * takes the prologue, and one that does not), then
 * the pre-activation (a BatchNormalization that fold-batchnorm turns into
 * Mul + Add, or explicit Mul/Add by per-channel or scalar constants in
 * either order, or one of them alone), optionally Relu or Clip, then a 1x1
 * or 3x3 conv (padded: its padding must be zeros of the activated input,
 * with a clip whose lo > 0 so that the prologue of a zero would show),
 * stride 1 or 2, channels that do and do not fill blocks, and an epilogue
 * (Relu, or a residual Add). Asserts the group structure (one group holds
 * the prologue's nodes and the conv, anchored at the conv, on
 * conv2d_nchwc; no elementwise kernel is left), compares the compiled
 * model with the reference executor (defaults and random knobs), and
 * builds every task with a prologue alone from its workload key (the same
 * key back; checked against the reference and timed). Negative cases: the
 * BN-Relu's output read by a second conv or a graph output, and an op the
 * prologue does not take (Sigmoid), stay separate kernels; with the value
 * before the Relu read twice, the Relu alone becomes the prologue.
 * Squeeze-and-excitation cases: the Mul by a run-time per-channel scale
 * (global pool, two 1x1 convs, Sigmoid) before the conv, taken into its
 * scaled weights where they are small next to the input; kept a kernel for
 * large weights, with a Relu after the Mul, and for a batch of two. */
#include "compiler_test.h"

static int case_no;

enum { PRE_BN, PRE_MUL_ADD, PRE_ADD_MUL, PRE_MUL, PRE_ADD, PRE_NONE, PRE_SIGMOID, PRE_SE };
enum { ACT_NONE, ACT_RELU, ACT_CLIP };
enum { EPI_NONE, EPI_RELU, EPI_RESIDUAL };
/* how the pre-activation's output is shared */
enum { SHARE_NONE, SHARE_OUTPUT, SHARE_CONV, SHARE_INNER };

typedef struct pcase {
    int n, c_in, c_out;
    int hw; /* image side; 0: an input of 1.3x half the L2 (where 1x1s take a prologue) */
    int k, s, pre, act, epi, share;
    bool scalar; /* the Mul's constant a scalar */
    bool fused;  /* expected: the conv has a prologue */
    int elem;    /* expected: elementwise kernels left */
} pcase;

static int node1(kiln_graph *g, kiln_op op, const int *in, int n_in)
{
    int id = kiln_graph_add_node(g, op, NULL, in, n_in, 1);
    assert_true(id >= 0);
    return id;
}

static int out1(kiln_graph *g, kiln_op op, const int *in, int n_in)
{
    return kiln_graph_node_output(g, node1(g, op, in, n_in), 0);
}

static int conv(kiln_graph *g, int x, int c_in, int c_out, int k, int s, uint64_t seed)
{
    int w = ct_param(g, "w", ks(4, c_out, c_in, k, k), seed, -0.5f, 0.5f);
    int b = ct_param(g, "b", ks(1, c_out), seed + 1, -0.5f, 0.5f);
    return ct_conv(g, x, w, b, k, s, (int[]){k / 2, k / 2, k / 2, k / 2}, 1);
}

/* The pre-activation of x (c channels) by c->pre: its output, and in
 * *inner the first node's output (a value inside the chain). */
static int preact(kiln_graph *g, const pcase *c, int x, uint64_t seed, int *inner)
{
    int ch = c->c_in;
    kiln_shape pc = ks(4, 1, ch, 1, 1);
    int y = x;
    switch (c->pre) {
    case PRE_BN: {
        int in[5] = {x, ct_param(g, "s", ks(1, ch), seed, 0.5f, 1.5f),
                     ct_param(g, "t", ks(1, ch), seed + 1, -0.5f, 0.5f),
                     ct_param(g, "m", ks(1, ch), seed + 2, -0.5f, 0.5f),
                     ct_param(g, "v", ks(1, ch), seed + 3, 0.5f, 1.5f)};
        int id = node1(g, KILN_OP_BATCHNORM, in, 5);
        kiln_node_set_float(g, id, "epsilon", 1e-5f);
        y = kiln_graph_node_output(g, id, 0);
        break;
    }
    case PRE_MUL_ADD:
    case PRE_ADD_MUL:
    case PRE_MUL:
    case PRE_ADD: {
        int a = ct_param(g, "a", c->scalar ? ks(1, 1) : pc, seed, -1.5f, 1.5f);
        int b = ct_param(g, "b", ks(3, ch, 1, 1), seed + 1, -0.5f, 0.5f);
        if (c->pre == PRE_MUL_ADD)
            y = out1(g, KILN_OP_ADD, (int[]){b, out1(g, KILN_OP_MUL, (int[]){y, a}, 2)}, 2);
        else if (c->pre == PRE_ADD_MUL)
            y = out1(g, KILN_OP_MUL, (int[]){a, out1(g, KILN_OP_ADD, (int[]){y, b}, 2)}, 2);
        else if (c->pre == PRE_MUL)
            y = out1(g, KILN_OP_MUL, (int[]){y, a}, 2);
        else
            y = out1(g, KILN_OP_ADD, (int[]){y, b}, 2);
        break;
    }
    case PRE_SIGMOID:
        y = out1(g, KILN_OP_SIGMOID, &y, 1);
        break;
    case PRE_SE: {
        /* squeeze-and-excitation: x * sigmoid(fc2(relu(fc1(mean of x)))),
         * the scale run-time data of shape [n, ch, 1, 1] */
        int p = out1(g, KILN_OP_GLOBALAVERAGEPOOL, &x, 1);
        int r = (ch + 3) / 4;
        int h = out1(g, KILN_OP_RELU, (int[]){conv(g, p, ch, r, 1, 1, seed + 4)}, 1);
        int sc = out1(g, KILN_OP_SIGMOID, (int[]){conv(g, h, r, ch, 1, 1, seed + 5)}, 1);
        y = out1(g, KILN_OP_MUL, (int[]){x, sc}, 2);
        break;
    }
    default:
        break;
    }
    *inner = y;
    if (c->act == ACT_RELU) {
        y = out1(g, KILN_OP_RELU, &y, 1);
    } else if (c->act == ACT_CLIP) {
        int id = node1(g, KILN_OP_CLIP, &y, 1);
        kiln_node_set_float(g, id, "min", 0.125f);
        kiln_node_set_float(g, id, "max", 0.75f);
        y = kiln_graph_node_output(g, id, 0);
    }
    return y;
}

/* An odd image side whose input (c_in channels) is 1.3x half the L2. */
static int side_for(const pcase *c)
{
    kiln_target tg;
    kiln_error err = {0};
    assert_int_equal(kiln_target_resolve(NULL, &tg, &err), KILN_OK);
    return (int)ceil(sqrt(1.3 * 0.5 * (double)tg.l2_bytes / (4.0 * c->c_in))) | 1;
}

static kiln_graph *build(const pcase *c)
{
    kiln_graph *g;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    uint64_t sd = 100 * (uint64_t)case_no;
    int hw = c->hw ? c->hw : side_for(c);
    kiln_shape xs = ks(4, c->n, 3, hw, hw);
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &xs);
    /* the stem: two image convs whose outputs arrive blocked and are
     * concatenated, as in a dense block (a conv's output would take the
     * pre-activation into its epilogue) */
    int c1 = c->c_in / 2;
    int f1 = out1(g, KILN_OP_RELU, (int[]){conv(g, x, 3, c1, 3, 1, sd + 1)}, 1);
    int f2 = out1(g, KILN_OP_RELU, (int[]){conv(g, x, 3, c->c_in - c1, 3, 1, sd + 5)}, 1);
    int cat = node1(g, KILN_OP_CONCAT, (int[]){f1, f2}, 2);
    kiln_node_set_int(g, cat, "axis", 1);
    int in = kiln_graph_node_output(g, cat, 0);
    int inner;
    int a = preact(g, c, in, sd + 3, &inner);
    int y = conv(g, a, c->c_in, c->c_out, c->k, c->s, sd + 7);
    if (c->epi == EPI_RELU) {
        y = out1(g, KILN_OP_RELU, &y, 1);
    } else if (c->epi == EPI_RESIDUAL) {
        /* a same-shaped second branch from the stem */
        int r = conv(g, in, c->c_in, c->c_out, 1, c->s, sd + 9);
        y = out1(g, KILN_OP_ADD, (int[]){y, r}, 2);
    }
    assert_int_equal(kiln_graph_add_output(g, y), KILN_OK);
    if (c->share == SHARE_OUTPUT)
        assert_int_equal(kiln_graph_add_output(g, a), KILN_OK);
    else if (c->share == SHARE_CONV)
        assert_int_equal(kiln_graph_add_output(g, conv(g, a, c->c_in, 16, 1, 1, sd + 11)), KILN_OK);
    else if (c->share == SHARE_INNER)
        assert_int_equal(kiln_graph_add_output(g, out1(g, KILN_OP_SIGMOID, &inner, 1)), KILN_OK);
    kiln_error err = {0};
    assert_int_equal(kiln_graph_infer_shapes(g, &err), KILN_OK);
    return g;
}

/* Whether a group of ctx is a prologue group: anchored at a conv after
 * other nodes, with no Conv among them. */
static int count_prologue_groups(const kiln_pass_ctx *ctx, int *elemwise)
{
    int n = 0;
    *elemwise = 0;
    for (int k = 0; k < ctx->n_groups; k++) {
        const kiln_group *gr = &ctx->groups[k];
        const kiln_node *a = ctx->g->nodes[gr->anchor];
        if (gr->kind != KILN_GROUP_KERNEL)
            continue;
        if (a->op != KILN_OP_CONV) {
            bool all = true;
            for (int j = 0; j < gr->n_nodes; j++)
                all &= kiln_target_epilogue_op(&ctx->target, ctx->g, ctx->g->nodes[gr->nodes[j]]);
            *elemwise += all;
            continue;
        }
        if (gr->nodes[0] == gr->anchor)
            continue;
        int ai = 0;
        while (gr->nodes[ai] != gr->anchor)
            ai++;
        for (int j = 0; j < ai; j++)
            assert_int_not_equal(ctx->g->nodes[gr->nodes[j]]->op, KILN_OP_CONV);
        assert_non_null(gr->tpl);
        assert_string_equal(gr->tpl->name, "conv2d_nchwc");
        n++;
    }
    return n;
}

/* Every task with a prologue, built alone from its key: the same key
 * back, the output against the reference, a finite time. */
static void check_tasks_alone(const kiln_graph *g, int want)
{
    kiln_tasks *ts = NULL;
    kiln_error err = {0};
    if (kiln_tasks_extract(g, NULL, &ts, &err) != KILN_OK)
        fail_msg("case %d: extract: %s", case_no, err.msg);
    int seen = 0;
    for (int i = 0; i < kiln_tasks_count(ts); i++) {
        kiln_task_info ti;
        assert_int_equal(kiln_tasks_info(ts, i, &ti, &err), KILN_OK);
        const char *nodes = strrchr(ti.workload, '|');
        if (strcmp(ti.template_name, "conv2d_nchwc") != 0 || !nodes || !strncmp(nodes, "|Conv(", 6))
            continue;
        seen++;
        kiln_workload *w = NULL;
        if (kiln_workload_create(ti.workload, 5, &w, &err) != KILN_OK)
            fail_msg("case %d: %s\nkey: %s", case_no, err.msg, ti.workload);
        kiln_task_info wi;
        assert_int_equal(kiln_workload_info(w, &wi, &err), KILN_OK);
        assert_string_equal(wi.workload, ti.workload);
        assert_string_equal(wi.default_config, ti.default_config);
        kiln_measure_options o = {.num_threads = 2, .jobs = 2};
        o.bench.repeat = 2;
        o.bench.min_repeat_ms = 1;
        kiln_measure_result *res = calloc(1, sizeof *res);
        assert_non_null(res);
        if (kiln_workload_measure(w, &o, res, &err) != KILN_OK)
            fail_msg("case %d: measure: %s\nkey: %s", case_no, err.msg, ti.workload);
        assert_true(res->time.median > 0 && isfinite(res->time.median));
        free(res);
        kiln_workload_destroy(w);
    }
    assert_int_equal(seen, want);
    kiln_tasks_destroy(ts);
}

static void check_case(const pcase *c)
{
    kiln_graph *g = build(c);
    kiln_pass_ctx *ctx;
    kiln_lowered *l;
    ct_lower(g, case_no, &ctx, &l);
    int elemwise, pro = count_prologue_groups(ctx, &elemwise);
    int hw = c->hw ? c->hw : side_for(c);
    if (getenv("KT_VERBOSE"))
        printf("case %d: n%d %d->%d %dx%d k%d s%d pre%d act%d epi%d share%d: %d prologue groups, "
               "%d elementwise\n",
               case_no, c->n, c->c_in, c->c_out, hw, hw, c->k, c->s, c->pre, c->act, c->epi,
               c->share, pro, elemwise);
    if (pro != (c->fused ? 1 : 0))
        fail_msg("case %d: %d convs with a prologue, want %d", case_no, pro, c->fused ? 1 : 0);
    if (elemwise != c->elem)
        fail_msg("case %d: %d elementwise kernels left, want %d", case_no, elemwise, c->elem);
    kiln_lowered_destroy(l);
    kiln_pass_ctx_destroy(ctx);
    char tag[32];
    snprintf(tag, sizeof tag, "p%d", case_no);
    ct_check_graph(g, kt_dir, tag, 0, 7 + (uint64_t)case_no, 1e-3, 1e-4);
    if (c->fused) {
        snprintf(tag, sizeof tag, "p%dr", case_no);
        ct_check_graph(g, kt_dir, tag, 500 + (uint64_t)case_no, 9 + (uint64_t)case_no, 1e-3, 1e-4);
        check_tasks_alone(g, 1);
    }
    kiln_graph_destroy(g);
}

static void test_prologue_fused(void **state)
{
    (void)state;
    const pcase cases[] = {
        /* densenet's: BN, Relu, 1x1 (on an input over half the L2) */
        {1, 64, 32, 0, 1, 1, PRE_BN, ACT_RELU, EPI_RELU, SHARE_NONE, false, true, 0},
        {2, 48, 40, 0, 1, 1, PRE_BN, ACT_RELU, EPI_NONE, SHARE_NONE, false, true, 0},
        /* channels not filling blocks */
        {1, 24, 20, 0, 1, 1, PRE_BN, ACT_RELU, EPI_RELU, SHARE_NONE, false, true, 0},
        /* padded 3x3: the padding stays zero after the clip's lo */
        {1, 32, 16, 10, 3, 1, PRE_MUL_ADD, ACT_CLIP, EPI_RELU, SHARE_NONE, false, true, 0},
        {1, 32, 24, 9, 3, 2, PRE_ADD_MUL, ACT_RELU, EPI_RESIDUAL, SHARE_NONE, false, true, 0},
        {1, 32, 32, 12, 3, 1, PRE_BN, ACT_NONE, EPI_NONE, SHARE_NONE, false, true, 0},
        /* stride 2 1x1, one of the two constants, a scalar */
        {1, 48, 32, 0, 1, 2, PRE_MUL, ACT_RELU, EPI_NONE, SHARE_NONE, true, true, 0},
        {1, 32, 48, 0, 1, 1, PRE_ADD, ACT_CLIP, EPI_RESIDUAL, SHARE_NONE, false, true, 0},
        {1, 32, 16, 0, 1, 1, PRE_NONE, ACT_RELU, EPI_NONE, SHARE_NONE, false, true, 0},
        /* the cost model: a 1x1 whose input fits in half the L2 keeps the
         * elementwise kernel (it stays in the L2 between the two) */
        {1, 64, 32, 14, 1, 1, PRE_BN, ACT_RELU, EPI_RELU, SHARE_NONE, false, false, 1},
        /* a second reader of the BN-Relu's output or a graph output: no
         * prologue; a second reader of the value before the Relu: the Relu
         * alone is the prologue, Mul+Add stay a kernel */
        {1, 64, 32, 0, 1, 1, PRE_BN, ACT_RELU, EPI_RELU, SHARE_CONV, false, false, 1},
        {1, 64, 32, 0, 1, 1, PRE_BN, ACT_RELU, EPI_RELU, SHARE_OUTPUT, false, false, 1},
        {1, 32, 16, 10, 3, 1, PRE_MUL_ADD, ACT_RELU, EPI_NONE, SHARE_INNER, false, true, 2},
        /* an op the prologue does not take */
        {1, 32, 16, 8, 1, 1, PRE_SIGMOID, ACT_NONE, EPI_NONE, SHARE_NONE, false, false, 1},
        /* a squeeze-and-excitation scale (run-time data) folded into the
         * weights: 1x1 projections (with a residual), a padded 3x3 at
         * stride 2 whose channels do not fill blocks; kept a kernel where
         * the weights are large next to the input (3x3 64 on 8x8), after
         * a Relu (not the chain's one Mul) and for two images (a scale per
         * image) */
        {1, 32, 16, 24, 1, 1, PRE_SE, ACT_NONE, EPI_NONE, SHARE_NONE, false, true, 0},
        {1, 48, 32, 20, 1, 1, PRE_SE, ACT_NONE, EPI_RESIDUAL, SHARE_NONE, false, true, 0},
        {1, 24, 20, 41, 3, 2, PRE_SE, ACT_NONE, EPI_RELU, SHARE_NONE, false, true, 0},
        {1, 64, 64, 8, 3, 1, PRE_SE, ACT_NONE, EPI_NONE, SHARE_NONE, false, false, 1},
        {1, 32, 16, 24, 1, 1, PRE_SE, ACT_RELU, EPI_NONE, SHARE_NONE, false, false, 1},
        {2, 32, 16, 24, 1, 1, PRE_SE, ACT_NONE, EPI_NONE, SHARE_NONE, false, false, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        case_no = (int)i;
        check_case(&cases[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prologue_fused),
    };
    return cmocka_run_group_tests(tests, kt_dir_setup, kt_dir_teardown);
}
