/* tests/compiler/test_layout_dp.c: graph-level block choice (pass/layout_dp.c).
 *
 * Two convs to 24 channels concatenated along the channels, then a 1x1 conv.
 * On AVX-512 each conv alone prefers NCHW16c (24 padded to 32: 1.33x the
 * FMAs at full width, against 2x for 8-wide vectors), but then the Concat
 * meets partial blocks and reads both through transforms. Where the
 * activations are large and the convs cheap (1x1 from 8 channels, 56x56)
 * the DP gives both convs NCHW8c, whole blocks the Concat keeps: a
 * transform-free chain. Where compute dominates (4x4 pixels, 3x3 from 1024
 * channels to 40: 16c padded to 48 is 1.2x, 8c is 2x) it keeps the
 * per-node optimum and the transforms. The
 * DP's answer equals an exhaustive search of the assignments, and the
 * compiled graph matches the reference executor. */
#include "compiler_test.h"
#include "driver/driver.h"
#include "pass/layout_dp.h"
#include "tune/tune.h"


static kiln_target avx512(void)
{
    kiln_target t;
    kiln_error err;
    assert_int_equal(kiln_target_resolve("avx512", &t, &err), KILN_OK);
    return t;
}

/* x [1, cin, hw, hw] -> conv a (cout, k x k) -> relu -+
 *                    -> conv b (cout, k x k) -> relu -+-> concat -> conv c (32, 1x1) */
static kiln_graph *concat_graph(int64_t cin, int64_t cout, int64_t hw, int k)
{
    kiln_graph *g = NULL;
    kiln_error err = {0};
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    kiln_shape xs = {4, {1, cin, hw, hw}};
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &xs);
    static const int pads[4] = {1, 1, 1, 1}, none[4] = {0, 0, 0, 0};
    float s = 1.0f / sqrtf((float)(cin * k * k));
    const int *pk = k == 3 ? pads : none;
    int r[2];
    for (int j = 0; j < 2; j++) {
        char wn[16], bn[16];
        snprintf(wn, sizeof wn, "w%d", j);
        snprintf(bn, sizeof bn, "b%d", j);
        int w = ct_param(g, wn, (kiln_shape){4, {cout, cin, k, k}}, 10 + (uint64_t)j, -s, s);
        int b = ct_param(g, bn, (kiln_shape){1, {cout}}, 20 + (uint64_t)j, -0.1f, 0.1f);
        int c = ct_conv(g, x, w, b, k, 1, pk, 1);
        r[j] = kiln_graph_node_output(g, kiln_graph_add_node(g, KILN_OP_RELU, NULL, &c, 1, 1), 0);
    }
    int cn = kiln_graph_add_node(g, KILN_OP_CONCAT, "cat", r, 2, 1);
    assert_int_equal(kiln_node_set_int(g, cn, "axis", 1), KILN_OK);
    int cat = kiln_graph_node_output(g, cn, 0);
    float s2 = 1.0f / sqrtf((float)(2 * cout));
    int w2 = ct_param(g, "wc", (kiln_shape){4, {32, 2 * cout, 1, 1}}, 30, -s2, s2);
    int y = ct_conv(g, cat, w2, -1, 1, 1, none, 1);
    assert_int_equal(kiln_graph_add_output(g, y), KILN_OK);
    assert_int_equal(kiln_graph_infer_shapes(g, &err), KILN_OK);
    return g;
}

/* A context with g through dce (alter-layout's input). */
static kiln_pass_ctx *before_alter(const kiln_graph *g)
{
    kiln_error err = {0};
    kiln_target t = avx512();
    kiln_pass_ctx *ctx = NULL;
    assert_int_equal(kiln_pass_ctx_create(g, &t, &ctx, &err), KILN_OK);
    assert_int_equal(kiln_pass_run_until(ctx, "dce", &err), KILN_OK);
    return ctx;
}

/* The cheapest cost over every assignment of the decision nodes (each
 * node's offered choices), by enumeration. */
static double exhaustive(const kiln_pass_ctx *ctx, const kiln_layout_eval *ev0)
{
    int nn = ctx->g->n_nodes, dn[16], m = 0;
    for (int i = 0; i < nn; i++)
        if (ev0->n_blocks[i] >= 2) {
            assert_true(m < 16);
            dn[m++] = i;
        }
    kiln_layout_choice *ch = calloc((size_t)nn, sizeof *ch);
    assert_non_null(ch);
    int idx[16] = {0};
    double best = -1.0;
    kiln_error err = {0};
    for (;;) {
        for (int j = 0; j < m; j++) {
            const kiln_tpl_block *b = &ev0->blocks[dn[j]][idx[j]];
            ch[dn[j]] = (kiln_layout_choice){kiln_layout_block(b->lay.in),
                                             kiln_layout_block(b->lay.out), b->lay.algo};
        }
        kiln_layout_eval ev;
        assert_int_equal(kiln_alter_layout_eval(ctx, ch, false, &ev, &err), KILN_OK);
        if (best < 0.0 || ev.cost_us < best)
            best = ev.cost_us;
        int j = 0;
        while (j < m && ++idx[j] == ev0->n_blocks[dn[j]])
            idx[j++] = 0;
        if (j == m)
            break;
    }
    free(ch);
    return best;
}

/* Runs the DP on g; checks it against exhaustive search; returns the
 * transforms of alter-layout with defaults and (through the pass) with the
 * DP's choice, and whether a chain changed. */
static void run_case(const kiln_graph *g, int *t_default, int *t_dp, bool *changed,
                     int *out_block_a)
{
    kiln_error err = {0};
    kiln_pass_ctx *ctx = before_alter(g);
    kiln_layout_eval ev0;
    assert_int_equal(kiln_alter_layout_eval(ctx, NULL, true, &ev0, &err), KILN_OK);
    int decisions = 0;
    for (int i = 0; i < ctx->g->n_nodes; i++) {
        if (ev0.n_blocks[i] >= 1)
            assert_int_equal(ev0.picked[i], 0); /* defaults first */
        for (int k = 1; k < ev0.n_blocks[i]; k++) /* the default is the cheapest */
            assert_true(ev0.blocks[i][k].cost >= ev0.blocks[i][0].cost);
        decisions += ev0.n_blocks[i] >= 2;
    }
    assert_int_equal(decisions, 3);
    kiln_layout_plan plan;
    assert_int_equal(kiln_layout_dp(ctx, &plan, &err), KILN_OK);
    assert_int_equal(plan.n_chains, 1); /* a, b and c meet at the concat */
    assert_int_equal(plan.chains[0].n_nodes, 3);
    double best = exhaustive(ctx, &ev0);
    assert_true(fabs(plan.chosen_us - best) <= 1e-6 * best);
    assert_true(plan.chosen_us <= plan.default_us);
    assert_true(fabs(plan.default_us - ev0.cost_us) <= 1e-9 * ev0.cost_us);
    *changed = plan.chains[0].changed;
    kiln_layout_eval_free(&ev0);
    kiln_layout_plan_free(&plan);
    kiln_pass_ctx_destroy(ctx);

    ctx = before_alter(g);
    assert_int_equal(kiln_pass_alter_layout_with(ctx, NULL, &err), KILN_OK);
    *t_default = ct_count_transforms(ctx->g);
    kiln_pass_ctx_destroy(ctx);
    ctx = before_alter(g);
    assert_int_equal(kiln_pass_alter_layout(ctx, &err), KILN_OK);
    assert_int_equal(kiln_graph_validate(ctx->g, &err), KILN_OK);
    *t_dp = ct_count_transforms(ctx->g);
    *out_block_a = -1;
    for (int i = 0; i < ctx->g->n_nodes; i++) {
        const kiln_node *n = ctx->g->nodes[i];
        if (n->op == KILN_OP_CONV && *out_block_a < 0)
            *out_block_a = kiln_layout_block(ctx->g->values[n->outputs[0]]->layout);
    }
    kiln_pass_ctx_destroy(ctx);
}

static void test_transform_free_chain(void **state)
{
    (void)state;
    kiln_graph *g = concat_graph(8, 24, 56, 1);
    int t_default, t_dp, blk;
    bool changed;
    run_case(g, &t_default, &t_dp, &changed, &blk);
    /* defaults: both partial-block outputs to row-major for the concat,
     * and the output; the DP: only the output */
    assert_int_equal(t_default, 3);
    assert_true(changed);
    assert_int_equal(t_dp, 1);
    assert_int_equal(blk, 8);
    ct_check_graph(g, kt_dir, "dp_concat", 0, 7, 1e-3, 1e-4);
    kiln_graph_destroy(g);
}

static void test_per_node_optimum(void **state)
{
    (void)state;
    kiln_graph *g = concat_graph(1024, 40, 4, 3);
    int t_default, t_dp, blk;
    bool changed;
    run_case(g, &t_default, &t_dp, &changed, &blk);
    /* compute dominates: the transforms stay, each conv keeps 16c (40 -> 48) */
    assert_false(changed);
    assert_int_equal(t_dp, t_default);
    assert_int_equal(t_dp, 3);
    assert_int_equal(blk, 16);
    ct_check_graph(g, kt_dir, "dp_compute", 0, 8, 1e-3, 1e-4);
    kiln_graph_destroy(g);
}

/* Zoo networks the DP leaves as they were: ResNet-18's convs have whole
 * 16-blocks, nothing to gain from another block. */
static void test_zoo_unchanged(void **state)
{
    (void)state;
    kiln_graph *g = NULL;
    kiln_error err = {0};
    assert_int_equal(kiln_zoo_build("resnet-18", 0, 0, &g, &err), KILN_OK);
    kiln_pass_ctx *ctx = before_alter(g);
    kiln_layout_plan plan;
    assert_int_equal(kiln_layout_dp(ctx, &plan, &err), KILN_OK);
    assert_true(plan.n_chains >= 1);
    for (int c = 0; c < plan.n_chains; c++)
        assert_false(plan.chains[c].changed);
    assert_true(plan.chosen_us == plan.default_us);
    kiln_layout_plan_free(&plan);
    kiln_pass_ctx_destroy(ctx);
    kiln_graph_destroy(g);
}

/* Many layout transforms: L x (1x1 conv -> Softmax over the channels), a
 * transform between each conv and its Softmax. The pass's value maps grow while it
 * inserts transforms; a map that moved under a transform's slot was
 * written after it was freed (found by AddressSanitizer compiling Faster
 * R-CNN). Chains of 56..80 blocks (4 values each, the maps' first growth
 * at 256) make the growth land inside a transform in some of them; each
 * must validate, with a transform per block at least. */
static void test_many_transforms(void **state)
{
    (void)state;
    for (int len = 56; len <= 80; len++) {
        kiln_graph *g = NULL;
        kiln_error err = {0};
        assert_int_equal(kiln_graph_create(&g), KILN_OK);
        kiln_shape xs = {4, {1, 16, 4, 4}};
        int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &xs);
        static const int none[4] = {0, 0, 0, 0};
        for (int j = 0; j < len; j++) {
            char wn[16];
            snprintf(wn, sizeof wn, "w%d", j);
            int w = ct_param(g, wn, (kiln_shape){4, {16, 16, 1, 1}}, 40 + (uint64_t)j, -0.25f,
                             0.25f);
            int c = ct_conv(g, x, w, -1, 1, 1, none, 1);
            int sm = kiln_graph_add_node(g, KILN_OP_SOFTMAX, NULL, &c, 1, 1);
            assert_int_equal(kiln_node_set_int(g, sm, "axis", 1), KILN_OK);
            x = kiln_graph_node_output(g, sm, 0);
        }
        assert_int_equal(kiln_graph_add_output(g, x), KILN_OK);
        assert_int_equal(kiln_graph_infer_shapes(g, &err), KILN_OK);
        kiln_pass_ctx *ctx = before_alter(g);
        assert_int_equal(kiln_pass_alter_layout(ctx, &err), KILN_OK);
        assert_int_equal(kiln_graph_validate(ctx->g, &err), KILN_OK);
        assert_true(ct_count_transforms(ctx->g) >= len);
        kiln_pass_ctx_destroy(ctx);
        kiln_graph_destroy(g);
    }
}

/* The decisions of alter-layout on g (through the pass) with hints h. */
static kiln_pass_ctx *after_alter(const kiln_graph *g, const kiln_layout_hints *h)
{
    kiln_error err = {0};
    kiln_pass_ctx *ctx = before_alter(g);
    ctx->layout_hints = h;
    assert_int_equal(kiln_pass_alter_layout(ctx, &err), KILN_OK);
    assert_int_equal(kiln_graph_validate(ctx->g, &err), KILN_OK);
    return ctx;
}

/* Every choice's key of the three convs, as the analytic walk and as a walk
 * with choice 1 everywhere see them (the 1x1 conv reads the Concat
 * row-major in one and in 8c blocks in the other: two keys per choice),
 * each with its time: `us0` for the 16c choices of the 3x3 convs, `us1`
 * for their 8c ones, a hundredth of those for the 1x1 conv. */
static int all_keys(const kiln_graph *g, char (*keys)[KILN_LAYOUT_KEY_MAX], double *us, double us0,
                    double us1)
{
    int n = 0;
    for (int f = -1; f <= 1; f += 2) {
        kiln_layout_hints hf = {.force = f};
        kiln_pass_ctx *ctx = after_alter(g, f < 0 ? NULL : &hf);
        assert_int_equal(ctx->n_layout_decisions, 3);
        for (int k = 0; k < ctx->n_layout_decisions; k++) {
            const kiln_layout_decision *d = &ctx->layout_decisions[k];
            assert_int_equal(d->picked, f < 0 ? 0 : 1);
            assert_false(d->measured);
            assert_int_equal(d->n_blocks, 2);
            assert_int_equal(kiln_layout_block(d->blocks[1].lay.out), 8);
            for (int j = 0; j < d->n_blocks; j++) {
                assert_non_null(strstr(d->keys[j], j == 0 ? "| out 16 in " : "| out 8 in "));
                assert_true(n < 16);
                memcpy(keys[n], d->keys[j], KILN_LAYOUT_KEY_MAX);
                /* the 1x1 conv has 1/144 of a 3x3's flops: 1/100 of its time */
                us[n++] = (j == 0 ? us0 : us1) * (strstr(d->keys[j], "x1x1 ") ? 0.01 : 1.0);
            }
        }
        kiln_pass_ctx_destroy(ctx);
    }
    return n;
}

/* Measured times (the tuner's layout stage): on the compute-dominated case
 * the analytic DP keeps 16c padded (40 -> 48); times saying 8c runs at a
 * tenth of 16c's make the DP choose 8c for the three convs; times for only
 * some of a conv's choices leave it analytic; a forced choice index applies
 * to every conv without the DP. */
static void test_measured_times(void **state)
{
    (void)state;
    kiln_graph *g = concat_graph(1024, 40, 4, 3);
    kiln_pass_ctx *ctx = after_alter(g, NULL);
    assert_int_equal(ctx->layout_measured, 0);
    int analytic_transforms = ct_count_transforms(ctx->g);
    kiln_pass_ctx_destroy(ctx);
    char keys[16][KILN_LAYOUT_KEY_MAX];
    double us[16];
    int n = all_keys(g, keys, us, 100.0, 10.0);
    kiln_layout_time tm[16];
    for (int k = 0; k < n; k++)
        tm[k] = (kiln_layout_time){keys[k], us[k]};
    kiln_layout_times_sort(tm, n);
    for (int k = 1; k < n; k++)
        assert_true(strcmp(tm[k - 1].key, tm[k].key) <= 0);
    kiln_layout_hints h = {.force = -1, .n_times = n, .times = tm};
    assert_true(kiln_layout_time_of(&h, tm[n - 1].key) == tm[n - 1].us);
    assert_true(kiln_layout_time_of(&h, "no such key") < 0);

    ctx = after_alter(g, &h);
    assert_int_equal(ctx->layout_measured, 3);
    for (int k = 0; k < ctx->n_layout_decisions; k++) {
        assert_true(ctx->layout_decisions[k].measured);
        assert_int_equal(ctx->layout_decisions[k].picked, 1);
    }
    assert_true(ct_count_transforms(ctx->g) < analytic_transforms);
    kiln_pass_ctx_destroy(ctx);

    /* the 16c times alone (each conv's analytic choice): the 8c choices
     * keep their analytic cost, scaled by the timed choices' measured over
     * analytic sum, and stay twice the 16c ones: nothing moves, and the
     * convs' choices are costed by their times */
    kiln_layout_time part[16];
    int np = 0;
    for (int k = 0; k < n; k++)
        if (strstr(tm[k].key, "| out 16 "))
            part[np++] = tm[k];
    assert_true(np >= 3);
    kiln_layout_hints hp = {.force = -1, .n_times = np, .times = part};
    ctx = after_alter(g, &hp);
    assert_int_equal(ctx->layout_measured, 3);
    for (int k = 0; k < ctx->n_layout_decisions; k++)
        assert_int_equal(ctx->layout_decisions[k].picked, 0);
    kiln_pass_ctx_destroy(ctx);
    /* the DP's own account: one chain, unchanged */
    kiln_layout_plan plan;
    kiln_error err = {0};
    ctx = before_alter(g);
    ctx->layout_hints = &hp;
    assert_int_equal(kiln_layout_dp(ctx, &plan, &err), KILN_OK);
    assert_int_equal(plan.n_chains, 1);
    assert_false(plan.chains[0].changed);
    kiln_layout_plan_free(&plan);
    kiln_pass_ctx_destroy(ctx);

    /* force: choice 1 everywhere, whatever the times say */
    kiln_layout_time slow[16];
    for (int k = 0; k < n; k++)
        slow[k] = (kiln_layout_time){tm[k].key, strstr(tm[k].key, "| out 8 ") ? 1e6 : 1.0};
    kiln_layout_hints hf = {.force = 1, .n_times = n, .times = slow};
    ctx = after_alter(g, &hf);
    assert_int_equal(ctx->n_layout_decisions, 3);
    for (int k = 0; k < ctx->n_layout_decisions; k++)
        assert_int_equal(ctx->layout_decisions[k].picked, 1);
    kiln_pass_ctx_destroy(ctx);
    /* and the same slow times without force: the analytic choice */
    hf.force = -1;
    ctx = after_alter(g, &hf);
    assert_int_equal(ctx->layout_measured, 3);
    for (int k = 0; k < ctx->n_layout_decisions; k++)
        assert_int_equal(ctx->layout_decisions[k].picked, 0);
    kiln_pass_ctx_destroy(ctx);
    kiln_graph_destroy(g);
}

/* x [1, 32, hw, hw] -> 1x1 conv to 64 -> relu -> 3x3 conv 64 -> 64, pad 1,
 * bias -> relu; with `big`, a second input y of the same shape -> 1x1 conv
 * to 512 -> a second output (a chain of its own). *conv receives the 3x3
 * conv's node id. */
static kiln_graph *wino_graph(int64_t hw, bool big, int *conv)
{
    kiln_graph *g = NULL;
    kiln_error err = {0};
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    kiln_shape xs = {4, {1, 32, hw, hw}};
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &xs);
    static const int pads[4] = {1, 1, 1, 1}, none[4] = {0, 0, 0, 0};
    int w0 = ct_param(g, "w0", (kiln_shape){4, {64, 32, 1, 1}}, 40, -0.18f, 0.18f);
    int c0 = ct_conv(g, x, w0, -1, 1, 1, none, 1);
    int r0 = kiln_graph_node_output(g, kiln_graph_add_node(g, KILN_OP_RELU, NULL, &c0, 1, 1), 0);
    int w1 = ct_param(g, "w1", (kiln_shape){4, {64, 64, 3, 3}}, 41, -0.04f, 0.04f);
    int b1 = ct_param(g, "b1", (kiln_shape){1, {64}}, 42, -0.1f, 0.1f);
    int c1 = ct_conv(g, r0, w1, b1, 3, 1, pads, 1);
    *conv = g->n_nodes - 1;
    int y = kiln_graph_node_output(g, kiln_graph_add_node(g, KILN_OP_RELU, NULL, &c1, 1, 1), 0);
    assert_int_equal(kiln_graph_add_output(g, y), KILN_OK);
    if (big) {
        int x2 = kiln_graph_add_input(g, "y", KILN_DTYPE_FLOAT32, &xs);
        int w2 = ct_param(g, "w2", (kiln_shape){4, {512, 32, 1, 1}}, 43, -0.18f, 0.18f);
        assert_int_equal(kiln_graph_add_output(g, ct_conv(g, x2, w2, -1, 1, 1, none, 1)),
                         KILN_OK);
    }
    assert_int_equal(kiln_graph_infer_shapes(g, &err), KILN_OK);
    return g;
}

/* The 3x3 conv of ctx's graph (after alter-layout) and the template that
 * takes it. */
static const kiln_node *wino_conv(const kiln_pass_ctx *ctx, const char **tpl)
{
    const kiln_node *c = NULL;
    for (int i = 0; i < ctx->g->n_nodes; i++) {
        const kiln_node *n = ctx->g->nodes[i];
        const int64_t *k = NULL;
        if (n->op == KILN_OP_CONV && kiln_attr_ints(n, "kernel_shape", &k) == 2 && k[0] == 3)
            c = n;
    }
    assert_non_null(c);
    const kiln_template *t = kiln_target_template(&ctx->target, ctx->g, c, NULL);
    assert_non_null(t);
    *tpl = t->name;
    return c;
}

/* The times of every choice the analytic walk of ctx saw: the defaults
 * 100 us, the other blocks 200, Winograd `wino` us; the 512-channel conv
 * of wino_graph's `big` variant 100x those. Returns how many (sorted). */
static int wino_times(const kiln_pass_ctx *ctx, char (*keys)[KILN_LAYOUT_KEY_MAX],
                      kiln_layout_time *tm, double wino)
{
    int n = 0;
    for (int j = 0; j < ctx->n_layout_decisions; j++)
        for (int k = 0; k < ctx->layout_decisions[j].n_blocks && n < 16; k++, n++) {
            memcpy(keys[n], ctx->layout_decisions[j].keys[k], KILN_LAYOUT_KEY_MAX);
            double us = strstr(keys[n], " algo 1") ? wino : k == 0 ? 100.0 : 200.0;
            tm[n] = (kiln_layout_time){keys[n], us * (strstr(keys[n], "w512x") ? 100.0 : 1.0)};
        }
    kiln_layout_times_sort(tm, n);
    return n;
}

/* The algorithm as a block choice: a 3x3 conv on a 14x14 map (16 output
 * tiles, fewer than Winograd's own rule asks) is offered Winograd at the
 * default's blocks as one more choice, costed above the default, so the
 * analytic walk keeps the direct conv; a time saying Winograd is faster
 * makes the DP take it (the node carries KILN_TPL_ALGO_ATTR and
 * conv2d_wino_nchwc takes it), one saying it is slower does not. Beside a
 * conv 50x its chain's time, a Winograd time saving 30% of the chain's
 * time (0.6% of the model's) still moves it, one saving 5% of the conv's
 * own time does not, and one saving 15% of it (7.5% of the chain's, 0.15%
 * of the model's) does (layout_dp.h's margins: on the moved convs' time,
 * not the chain's). A 28x28 map, Winograd by the rule, is offered
 * no such choice. The compiled graph with Winograd asked for matches the
 * reference executor. */
static void test_winograd_choice(void **state)
{
    (void)state;
    int conv = -1;
    for (int big = 0; big <= 1; big++) {
        kiln_graph *g = wino_graph(14, big, &conv);
        kiln_pass_ctx *ctx = after_alter(g, NULL);
        char keys[16][KILN_LAYOUT_KEY_MAX];
        kiln_layout_time tm[16];
        /* v 0 and 2 move to Winograd, v 1 does not */
        static const double wino[2][3] = {{40.0, 150.0, 85.0}, {40.0, 95.0, 85.0}};
        for (int v = 0; v < 3; v++) {
            bool moves = v != 1;
            int n = wino_times(ctx, keys, tm, wino[big][v]);
            kiln_layout_hints h = {.force = -1, .n_times = n, .times = tm};
            kiln_pass_ctx *c2 = after_alter(g, &h);
            const char *tpl = NULL;
            const kiln_node *c = wino_conv(c2, &tpl);
            assert_int_equal(kiln_attr_int(c, KILN_TPL_ALGO_ATTR, 0),
                             moves ? KILN_TPL_ALGO_WINOGRAD : 0);
            assert_string_equal(tpl, moves ? "conv2d_wino_nchwc" : "conv2d_nchwc");
            kiln_pass_ctx_destroy(c2);
        }
        kiln_pass_ctx_destroy(ctx);
        kiln_graph_destroy(g);
    }
    kiln_graph *g = wino_graph(14, false, &conv);
    kiln_pass_ctx *ctx = after_alter(g, NULL);
    const char *tpl = NULL;
    const kiln_node *c = wino_conv(ctx, &tpl);
    assert_string_equal(tpl, "conv2d_nchwc");
    assert_int_equal(kiln_attr_int(c, KILN_TPL_ALGO_ATTR, 0), 0);
    assert_int_equal(ctx->n_layout_decisions, 2);
    const kiln_layout_decision *d = &ctx->layout_decisions[1];
    int wino = -1;
    for (int k = 0; k < d->n_blocks; k++)
        if (d->blocks[k].lay.algo == KILN_TPL_ALGO_WINOGRAD)
            wino = k;
    assert_true(wino > 0);
    assert_int_equal(d->picked, 0);
    assert_true(d->blocks[wino].cost > d->blocks[0].cost);
    assert_true(kiln_layout_equal(d->blocks[wino].lay.out, d->blocks[0].lay.out) &&
                kiln_layout_equal(d->blocks[wino].lay.in, d->blocks[0].lay.in));
    assert_non_null(strstr(d->keys[wino], " algo 1"));
    assert_null(strstr(d->keys[0], " algo"));

    /* the decisions' records after a walk whose times take Winograd */
    {
        char keys[16][KILN_LAYOUT_KEY_MAX];
        kiln_layout_time tm[16];
        int n = wino_times(ctx, keys, tm, 40.0);
        kiln_pass_ctx_destroy(ctx);
        kiln_layout_hints h = {.force = -1, .n_times = n, .times = tm};
        ctx = after_alter(g, &h);
        assert_int_equal(ctx->layout_decisions[1].picked, wino);
        assert_true(ctx->layout_decisions[1].measured);
        kiln_pass_ctx_destroy(ctx);
    }
    /* asked for on the source node: the values (host target) */
    assert_int_equal(kiln_node_set_int(g, conv, KILN_TPL_ALGO_ATTR, KILN_TPL_ALGO_WINOGRAD),
                     KILN_OK);
    ct_check_graph(g, kt_dir, "wino14", 0, 7, 1e-3, 1e-4);
    kiln_graph_destroy(g);

    g = wino_graph(28, false, &conv);
    ctx = after_alter(g, NULL);
    c = wino_conv(ctx, &tpl);
    assert_string_equal(tpl, "conv2d_wino_nchwc");
    d = &ctx->layout_decisions[1];
    for (int k = 0; k < d->n_blocks; k++)
        assert_int_equal(d->blocks[k].lay.algo, 0);
    kiln_pass_ctx_destroy(ctx);
    kiln_graph_destroy(g);
}

/* kiln compile --records: "tuned" block lines of this CPU and kiln decide
 * the blocks; "measured" lines, another fingerprint or a stale template
 * hash do not; the build's decisions say so, and configure applies none of
 * them as a task's knobs. */
static void test_block_records(void **state)
{
    (void)state;
    kiln_graph *g = concat_graph(1024, 40, 4, 3);
    char keys[16][KILN_LAYOUT_KEY_MAX];
    double us[16];
    int nk = all_keys(g, keys, us, 100.0, 10.0);
    char h[17];
    kiln_template_hash("conv2d_nchwc", h);
    /* the lines name a real task's workload: configure must still skip them */
    char wl[4096];
    {
        kiln_compile_options co = {.target = "avx512"};
        kiln_build *b = NULL;
        kiln_error err = {0};
        assert_int_equal(kiln_build_create(g, &co, &b, &err), KILN_OK);
        assert_int_equal(kiln_build_lower(b, &err), KILN_OK);
        snprintf(wl, sizeof wl, "%s", b->low->tasks[0].workload);
        kiln_build_destroy(b);
    }
    char path[4][512];
    const char *variant[4] = {"tuned", "measured", "other-cpu", "stale"};
    for (int v = 0; v < 4; v++) {
        snprintf(path[v], sizeof path[v], "%s/blocks_%s.jsonl", kt_dir, variant[v]);
        FILE *f = fopen(path[v], "w");
        assert_non_null(f);
        fprintf(f, "# block times\n");
        for (int k = 0; k < nk; k++)
            fprintf(f,
                    "{\"version\":2,\"kind\":\"block\",\"fingerprint_id\":\"%s\","
                    "\"template\":\"conv2d_nchwc\",\"template_hash\":\"%s\","
                    "\"workload\":\"%s\",\"knobs\":{},\"block_key\":\"%s\","
                    "\"status\":\"%s\",\"median_us\":%g,\"samples_us\":[1]}\n",
                    v == 2 ? "0123456789abcdef" : kiln_cpu_fingerprint_id(),
                    v == 3 ? "0000000000000000" : h, wl, keys[k], v == 1 ? "measured" : "tuned",
                    us[k]);
        fclose(f);
    }
    for (int v = 0; v < 4; v++) {
        kiln_compile_options co = {.target = "avx512", .records = path[v]};
        kiln_build *b = NULL;
        kiln_error err = {0};
        assert_int_equal(kiln_build_create(g, &co, &b, &err), KILN_OK);
        assert_int_equal(kiln_build_lower(b, &err), KILN_OK);
        int n = 0, measured = -1;
        const kiln_layout_decision *d = kiln_build_layout_decisions(b, &n, &measured);
        assert_int_equal(n, 3);
        assert_int_equal(measured, v == 0 ? 3 : 0);
        for (int k = 0; k < n; k++)
            assert_int_equal(d[k].picked, v == 0 ? 1 : 0);
        assert_int_equal(kiln_build_configure(b, &err), KILN_OK);
        assert_int_equal(kiln_build_tuned_tasks(b), 0);
        kiln_build_destroy(b);
        /* the tuner's task stage extracts the tasks of the same blocks */
        kiln_tasks *ts = NULL;
        assert_int_equal(kiln_tasks_extract(g, &co, &ts, &err), KILN_OK);
        int eight = 0;
        for (int i = 0; i < kiln_tasks_count(ts); i++) {
            kiln_task_info ti;
            assert_int_equal(kiln_tasks_info(ts, i, &ti, &err), KILN_OK);
            eight += strstr(ti.workload, "conv2d_nchwc") && strstr(ti.workload, "->NCHW8c");
        }
        assert_true(v == 0 ? eight > 0 : eight == 0);
        kiln_tasks_destroy(ts);
    }
    kiln_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_transform_free_chain),
        cmocka_unit_test(test_per_node_optimum),
        cmocka_unit_test(test_zoo_unchanged),
        cmocka_unit_test(test_many_transforms),
        cmocka_unit_test(test_measured_times),
        cmocka_unit_test(test_block_records),
        cmocka_unit_test(test_winograd_choice),
    };
    return cmocka_run_group_tests(tests, kt_dir_setup, kt_dir_teardown);
}
