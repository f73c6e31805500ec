/* tests/compiler/test_passes.c: the graph passes on their own: batch-norm
 * folding and constant folding keep the numbers (reference executor before
 * and after), dead code goes, the memory plan never lets two live values
 * share bytes (except legal aliases), layout transforms appear only at the
 * edges of blocked runs, and the IR printer and pipeline table behave. */
#include "compiler_test.h"
#include "toolchain/toolchain.h"
#include "lower/lower.h"
#include "pass/pass.h"

#include <unistd.h>

static kiln_target host(void)
{
    kiln_target t;
    kiln_error err;
    assert_int_equal(kiln_target_resolve("avx512", &t, &err), KILN_OK);
    return t;
}

/* Runs g on a seeded input with the reference executor; returns output 0
 * (malloc'ed copy) and its size. */
static float *ref_run(const kiln_graph *g, int64_t *n)
{
    kiln_error err = {0};
    kiln_ref_executor *ex = NULL;
    if (kiln_ref_executor_create(g, &ex, &err) != KILN_OK)
        fail_msg("ref: %s", err.msg);
    for (int i = 0; i < g->n_inputs; i++) {
        const kiln_value *v = g->values[g->inputs[i]];
        kiln_tensor t;
        assert_int_equal(kiln_tensor_alloc(&t, v->dtype, &v->shape, &err), KILN_OK);
        kt_fill_random(t.data, kiln_shape_numel(&v->shape), 77 + (uint64_t)i, -1.0f, 1.0f);
        assert_int_equal(kiln_ref_executor_set_input(ex, i, &t, &err), KILN_OK);
        kiln_tensor_release(&t);
    }
    if (kiln_ref_executor_run(ex, &err) != KILN_OK)
        fail_msg("ref run: %s", err.msg);
    const kiln_tensor *o = kiln_ref_executor_output(ex, 0);
    *n = kiln_shape_numel(&o->shape);
    float *copy = malloc(sizeof(float) * (size_t)*n);
    memcpy(copy, o->data, sizeof(float) * (size_t)*n);
    kiln_ref_executor_destroy(ex);
    return copy;
}

static int count_op(const kiln_graph *g, kiln_op op)
{
    int c = 0;
    for (int i = 0; i < g->n_nodes; i++)
        c += g->nodes[i]->op == op;
    return c;
}

static int param(kiln_graph *g, const char *name, kiln_shape s, uint64_t seed, float lo, float hi)
{
    void *data = NULL;
    int v = kiln_graph_add_const_uninit(g, name, KILN_DTYPE_FLOAT32, &s, true, &data);
    kt_fill_random(data, kiln_shape_numel(&s), seed, lo, hi);
    return v;
}

/* conv -> BN (folded into the conv) -> relu -> BN (standalone: Mul + Add) */
static void test_fold_batchnorm(void **state)
{
    (void)state;
    kiln_graph *g;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    kiln_shape xs = ks(4, 2, 5, 9, 9);
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &xs);
    int w = param(g, "w", ks(4, 6, 5, 3, 3), 1, -0.5f, 0.5f);
    int b = param(g, "b", ks(1, 6), 2, -0.5f, 0.5f);
    int ci[3] = {x, w, b};
    int conv = kiln_graph_add_node(g, KILN_OP_CONV, "conv", ci, 3, 1);
    int bn_in[5] = {kiln_graph_node_output(g, conv, 0), param(g, "s", ks(1, 6), 3, 0.5f, 1.5f),
                    param(g, "t", ks(1, 6), 4, -0.5f, 0.5f), param(g, "m", ks(1, 6), 5, -0.5f, 0.5f),
                    param(g, "v", ks(1, 6), 6, 0.5f, 1.5f)};
    int bn = kiln_graph_add_node(g, KILN_OP_BATCHNORM, "bn", bn_in, 5, 1);
    kiln_node_set_float(g, bn, "epsilon", 1e-3f);
    int r = kiln_graph_node_output(g, bn, 0);
    int relu = kiln_graph_add_node(g, KILN_OP_RELU, "relu", &r, 1, 1);
    int bn2_in[5] = {kiln_graph_node_output(g, relu, 0), param(g, "s2", ks(1, 6), 7, 0.5f, 1.5f),
                     param(g, "t2", ks(1, 6), 8, -0.5f, 0.5f),
                     param(g, "m2", ks(1, 6), 9, -0.5f, 0.5f),
                     param(g, "v2", ks(1, 6), 10, 0.5f, 1.5f)};
    int bn2 = kiln_graph_add_node(g, KILN_OP_BATCHNORM, "bn2", bn2_in, 5, 1);
    assert_int_equal(kiln_graph_add_output(g, kiln_graph_node_output(g, bn2, 0)), KILN_OK);
    kiln_error err = {0};
    assert_int_equal(kiln_graph_infer_shapes(g, &err), KILN_OK);
    int64_t n0, n1;
    float *want = ref_run(g, &n0);

    kiln_target t = host();
    kiln_pass_ctx *ctx;
    assert_int_equal(kiln_pass_ctx_create(g, &t, &ctx, &err), KILN_OK);
    assert_int_equal(kiln_pass_run_until(ctx, "dce", &err), KILN_OK);
    assert_int_equal(count_op(ctx->g, KILN_OP_BATCHNORM), 0);
    assert_int_equal(count_op(ctx->g, KILN_OP_CONV), 1);
    assert_int_equal(count_op(ctx->g, KILN_OP_MUL), 1); /* the standalone BN */
    assert_int_equal(count_op(ctx->g, KILN_OP_ADD), 1);
    assert_int_equal(ctx->stat_bn_folded, 2);
    assert_int_equal(kiln_graph_validate(ctx->g, &err), KILN_OK);
    /* the output keeps its name */
    assert_string_equal(ctx->g->values[ctx->g->outputs[0]]->name, "bn2");
    float *got = ref_run(ctx->g, &n1);
    assert_int_equal(n0, n1);
    assert_allclose(got, want, n0, 1e-5, 1e-5);
    free(got);
    free(want);
    kiln_pass_ctx_destroy(ctx);
    kiln_graph_destroy(g);
}

/* constant subgraph (Transpose, Reshape, Mul) folded; a dead branch removed */
static void test_fold_constant_and_dce(void **state)
{
    (void)state;
    kiln_graph *g;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    kiln_shape xs = ks(2, 3, 8);
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &xs);
    int wc = param(g, "wt", ks(2, 4, 8), 1, -1.0f, 1.0f);
    int tn = kiln_graph_add_node(g, KILN_OP_TRANSPOSE, "t", &wc, 1, 1);
    int64_t perm[2] = {1, 0};
    kiln_node_set_ints(g, tn, "perm", perm, 2);
    int two = param(g, "two", ks(0), 3, 2.0f, 2.0f);
    int mi[2] = {kiln_graph_node_output(g, tn, 0), two};
    int mul = kiln_graph_add_node(g, KILN_OP_MUL, "scale", mi, 2, 1);
    int mm_in[2] = {x, kiln_graph_node_output(g, mul, 0)};
    int mm = kiln_graph_add_node(g, KILN_OP_MATMUL, "mm", mm_in, 2, 1);
    /* dead: exp(x) nobody reads */
    kiln_graph_add_node(g, KILN_OP_EXP, "dead", &x, 1, 1);
    /* identity chain on the way out */
    int y = kiln_graph_node_output(g, mm, 0);
    int id = kiln_graph_add_node(g, KILN_OP_IDENTITY, "id", &y, 1, 1);
    int yi = kiln_graph_node_output(g, id, 0);
    int relu = kiln_graph_add_node(g, KILN_OP_RELU, "out", &yi, 1, 1);
    assert_int_equal(kiln_graph_add_output(g, kiln_graph_node_output(g, relu, 0)), KILN_OK);
    kiln_error err = {0};
    assert_int_equal(kiln_graph_infer_shapes(g, &err), KILN_OK);
    int64_t n0, n1;
    float *want = ref_run(g, &n0);
    kiln_target t = host();
    kiln_pass_ctx *ctx;
    assert_int_equal(kiln_pass_ctx_create(g, &t, &ctx, &err), KILN_OK);
    assert_int_equal(kiln_pass_run_until(ctx, "dce", &err), KILN_OK);
    assert_int_equal(ctx->stat_const_folded, 2);
    assert_int_equal(count_op(ctx->g, KILN_OP_TRANSPOSE), 0);
    assert_int_equal(count_op(ctx->g, KILN_OP_EXP), 0);
    assert_int_equal(count_op(ctx->g, KILN_OP_IDENTITY), 0);
    assert_int_equal(ctx->g->n_nodes, 2); /* MatMul, Relu */
    int consts = 0;
    for (int i = 0; i < ctx->g->n_values; i++)
        consts += ctx->g->values[i]->kind == KILN_VALUE_CONST;
    assert_int_equal(consts, 1); /* the folded weight only */
    float *got = ref_run(ctx->g, &n1);
    assert_allclose(got, want, n0, 1e-6, 1e-6);
    free(got);
    free(want);
    kiln_pass_ctx_destroy(ctx);
    kiln_graph_destroy(g);
}

/* Every pair of planned values whose lifetimes overlap lives in disjoint
 * bytes, unless one aliases the other legally (a view, a concat slice, or an
 * in-place output whose input dies in the same group). */
static void check_plan(const char *name)
{
    kiln_graph *g = NULL;
    kiln_error err = {0};
    assert_int_equal(kiln_zoo_build(name, 0, 0, &g, &err), KILN_OK);
    kiln_target t = host();
    kiln_pass_ctx *ctx;
    assert_int_equal(kiln_pass_ctx_create(g, &t, &ctx, &err), KILN_OK);
    assert_int_equal(kiln_pass_run_all(ctx, &err), KILN_OK);
    const kiln_graph *pg = ctx->g;
    int nv = pg->n_values, ng = ctx->n_groups;
    int *def = malloc(sizeof(int) * (size_t)nv), *last = malloc(sizeof(int) * (size_t)nv);
    for (int v = 0; v < nv; v++)
        def[v] = last[v] = -2;
    for (int r = 0; r < ng; r++) {
        const kiln_group *gr = &ctx->groups[r];
        for (int k = 0; k < gr->n_outputs; k++)
            def[gr->outputs[k]] = r;
        for (int k = 0; k < gr->n_inputs; k++)
            last[gr->inputs[k]] = r;
    }
    for (int i = 0; i < pg->n_inputs; i++) { /* inputs stay intact for the whole run */
        def[pg->inputs[i]] = -1;
        last[pg->inputs[i]] = ng;
    }
    for (int i = 0; i < pg->n_outputs; i++)
        last[pg->outputs[i]] = ng;
    /* views and concat slices inherit the lifetime of what they alias */
    int checked = 0;
    for (int a = 0; a < nv; a++) {
        const kiln_storage *sa = &ctx->storage[a];
        if (sa->root < 0 || sa->nbytes == 0 || def[a] < -1)
            continue;
        assert_true(sa->offset + sa->nbytes <= ctx->arena_bytes);
        assert_int_equal(sa->offset % 64 == 0 || sa->root != a, 1);
        for (int b = a + 1; b < nv; b++) {
            const kiln_storage *sb = &ctx->storage[b];
            if (sb->root < 0 || sb->nbytes == 0 || def[b] < -1)
                continue;
            bool overlap_bytes = sa->offset < sb->offset + sb->nbytes &&
                                 sb->offset < sa->offset + sa->nbytes;
            if (!overlap_bytes)
                continue;
            if (sa->root == sb->root) {
                /* same buffer: a later writer must not clobber a value still
                 * read after it is written, except in its own group */
                int first = def[a] <= def[b] ? a : b, second = first == a ? b : a;
                const kiln_group *gw = def[second] >= 0 ? &ctx->groups[def[second]] : NULL;
                if (gw && gw->kind == KILN_GROUP_KERNEL)
                    assert_true(last[first] <= def[second]);
                continue;
            }
            bool live_together = !(last[a] < def[b] || last[b] < def[a]);
            if (live_together)
                fail_msg("%s: '%s' [%d,%d] and '%s' [%d,%d] overlap in the arena", name,
                         pg->values[a]->name, def[a], last[a], pg->values[b]->name, def[b], last[b]);
            checked++;
        }
    }
    assert_true(checked > 0); /* the planner did reuse memory */
    int64_t total = 0;
    for (int v = 0; v < nv; v++)
        if (ctx->storage[v].root == v)
            total += ctx->storage[v].nbytes;
    assert_true(ctx->arena_bytes < total); /* and it is smaller than no reuse */
    free(def);
    free(last);
    kiln_pass_ctx_destroy(ctx);
    kiln_graph_destroy(g);
}

/* Resize with every scale exactly 1 goes (linear half_pixel by scales,
 * nearest asymmetric by sizes); a scale of 1 in tf_half_pixel_for_nn (which
 * shifts by half a pixel) and a scale just above 1 that floors to the same
 * extent stay; the numbers are unchanged */
static void test_remove_identity_resize(void **state)
{
    (void)state;
    static const struct {
        const char *mode, *coord;
        float scale_w; /* -1: sizes */
        int removed;
    } cases[] = {{"linear", "half_pixel", 1.0f, 1},
                 {"nearest", "asymmetric", -1, 1},
                 {"cubic", "align_corners", 1.0f, 1},
                 {"nearest", "tf_half_pixel_for_nn", 1.0f, 0},
                 {"linear", "half_pixel", 1.1f, 0}};
    for (int c = 0; c < 5; c++) {
        kiln_graph *g;
        assert_int_equal(kiln_graph_create(&g), KILN_OK);
        kiln_shape xs = ks(4, 1, 3, 5, 6);
        int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &xs);
        int rs = kiln_graph_add_node(g, KILN_OP_RESIZE, "resize", &x, 1, 1);
        kiln_node_set_string(g, rs, "mode", cases[c].mode);
        kiln_node_set_string(g, rs, "coordinate_transformation_mode", cases[c].coord);
        if (cases[c].scale_w < 0) {
            int64_t sizes[4] = {1, 3, 5, 6};
            kiln_node_set_ints(g, rs, "sizes", sizes, 4);
        } else {
            float scales[4] = {1, 1, 1, cases[c].scale_w};
            kiln_node_set_floats(g, rs, "scales", scales, 4);
        }
        int r = kiln_graph_node_output(g, rs, 0);
        int relu = kiln_graph_add_node(g, KILN_OP_RELU, "out", &r, 1, 1);
        assert_int_equal(kiln_graph_add_output(g, kiln_graph_node_output(g, relu, 0)), KILN_OK);
        kiln_error err = {0};
        assert_int_equal(kiln_graph_infer_shapes(g, &err), KILN_OK);
        int64_t n0, n1;
        float *want = ref_run(g, &n0);
        kiln_target t = host();
        kiln_pass_ctx *ctx;
        assert_int_equal(kiln_pass_ctx_create(g, &t, &ctx, &err), KILN_OK);
        assert_int_equal(kiln_pass_run_until(ctx, "dce", &err), KILN_OK);
        assert_int_equal(count_op(ctx->g, KILN_OP_RESIZE), cases[c].removed ? 0 : 1);
        float *got = ref_run(ctx->g, &n1);
        assert_int_equal(n0, n1);
        assert_allclose(got, want, n0, 0, 0);
        free(got);
        free(want);
        kiln_pass_ctx_destroy(ctx);
        kiln_graph_destroy(g);
    }
}

static void test_plan_memory(void **state)
{
    (void)state;
    check_plan("resnet-18");
    check_plan("mobilenet-v2");  /* in-place elementwise */
    check_plan("squeezenet-1.1"); /* in-place concat */
    check_plan("vit-b-16");       /* views */
}

static void test_alter_layout(void **state)
{
    (void)state;
    kiln_graph *g = NULL;
    kiln_error err = {0};
    assert_int_equal(kiln_zoo_build("resnet-18", 0, 0, &g, &err), KILN_OK);
    kiln_target t = host();
    kiln_pass_ctx *ctx;
    assert_int_equal(kiln_pass_ctx_create(g, &t, &ctx, &err), KILN_OK);
    assert_int_equal(kiln_pass_run_until(ctx, "alter-layout", &err), KILN_OK);
    /* one blocked run from the first conv to the global pool: the image goes
     * NCHW -> NCHW3c (one transform) for the first conv, and the pool writes
     * row-major */
    assert_int_equal(ct_count_transforms(ctx->g), 1);
    int blocked = 0;
    for (int i = 0; i < ctx->g->n_nodes; i++) {
        const kiln_node *n = ctx->g->nodes[i];
        if (n->op == KILN_OP_CONV && blocked == 0) {
            kiln_layout l = ctx->g->values[n->inputs[0]]->layout;
            assert_int_equal(l.kind, KILN_LAYOUT_NCHWC);
            assert_int_equal(l.block_a, 3);
            assert_int_equal(ctx->g->values[n->inputs[1]]->layout.block_a, 3);
        }
        if (n->op == KILN_OP_CONV) {
            assert_int_equal(ctx->g->values[n->outputs[0]]->layout.kind, KILN_LAYOUT_NCHWC);
            assert_int_equal(ctx->g->values[n->inputs[1]]->layout.kind, KILN_LAYOUT_OIHWIO);
            blocked++;
        }
    }
    assert_int_equal(blocked, 20);
    assert_int_equal(kiln_graph_validate(ctx->g, &err), KILN_OK);
    kiln_pass_ctx_destroy(ctx);
    kiln_graph_destroy(g);

    /* conv -> softmax -> conv: the softmax breaks the run: two edges */
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    kiln_shape xs = ks(4, 1, 16, 6, 6);
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &xs);
    int w1 = param(g, "w1", ks(4, 16, 16, 1, 1), 1, -1, 1);
    int i1[2] = {x, w1};
    int c1 = kiln_graph_node_output(g, kiln_graph_add_node(g, KILN_OP_CONV, "c1", i1, 2, 1), 0);
    int r1 = kiln_graph_node_output(g, kiln_graph_add_node(g, KILN_OP_RELU, "r1", &c1, 1, 1), 0);
    int sm = kiln_graph_node_output(g, kiln_graph_add_node(g, KILN_OP_SOFTMAX, "sm", &r1, 1, 1), 0);
    int w2 = param(g, "w2", ks(4, 16, 16, 1, 1), 2, -1, 1);
    int i2[2] = {sm, w2};
    int c2 = kiln_graph_node_output(g, kiln_graph_add_node(g, KILN_OP_CONV, "c2", i2, 2, 1), 0);
    assert_int_equal(kiln_graph_add_output(g, c2), KILN_OK);
    assert_int_equal(kiln_graph_infer_shapes(g, &err), KILN_OK);
    assert_int_equal(kiln_pass_ctx_create(g, &t, &ctx, &err), KILN_OK);
    assert_int_equal(kiln_pass_run_until(ctx, "alter-layout", &err), KILN_OK);
    /* blocked -> row-major before the softmax; blocked -> row-major at the
     * output (the second conv reads the softmax's NCHW directly) */
    assert_int_equal(ct_count_transforms(ctx->g), 2);
    kiln_pass_ctx_destroy(ctx);
    kiln_graph_destroy(g);
    /* conv to 72 channels (NCHW16c, 8 padded) -> depthwise with a bias: the
     * depthwise keeps the padded blocks (no re-blocking to 8c between them) */
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &xs);
    w1 = param(g, "w1", ks(4, 72, 16, 1, 1), 3, -1, 1);
    int j1[2] = {x, w1};
    c1 = kiln_graph_node_output(g, kiln_graph_add_node(g, KILN_OP_CONV, "c1", j1, 2, 1), 0);
    int wd = param(g, "wd", ks(4, 72, 1, 3, 3), 4, -1, 1);
    int bd = param(g, "bd", ks(1, 72), 5, -1, 1);
    int jd[3] = {c1, wd, bd};
    int dn = kiln_graph_add_node(g, KILN_OP_CONV, "dw", jd, 3, 1);
    kiln_node_set_int(g, dn, "group", 72);
    int d = kiln_graph_node_output(g, dn, 0);
    assert_int_equal(kiln_graph_add_output(g, d), KILN_OK);
    assert_int_equal(kiln_graph_infer_shapes(g, &err), KILN_OK);
    assert_int_equal(kiln_pass_ctx_create(g, &t, &ctx, &err), KILN_OK);
    assert_int_equal(kiln_pass_run_until(ctx, "alter-layout", &err), KILN_OK);
    /* only the output's back to row-major (the 1x1 conv reads the NCHW
     * input as it is): nothing between the convs */
    assert_int_equal(ct_count_transforms(ctx->g), 1);
    for (int i = 0; i < ctx->g->n_nodes; i++) {
        const kiln_node *n = ctx->g->nodes[i];
        if (n->op == KILN_OP_CONV && kiln_attr_int(n, "group", 1) == 72) {
            assert_int_equal(ctx->g->values[n->inputs[0]]->layout.block_a, 16);
            assert_int_equal(ctx->g->values[n->outputs[0]]->layout.block_a, 16);
        }
    }
    kiln_pass_ctx_destroy(ctx);
    kiln_graph_destroy(g);
}

static void test_fuse_groups(void **state)
{
    (void)state;
    kiln_graph *g = NULL;
    kiln_error err = {0};
    assert_int_equal(kiln_zoo_build("resnet-18", 0, 0, &g, &err), KILN_OK);
    kiln_target t = host();
    kiln_pass_ctx *ctx;
    assert_int_equal(kiln_pass_ctx_create(g, &t, &ctx, &err), KILN_OK);
    assert_int_equal(kiln_pass_run_until(ctx, "fuse", &err), KILN_OK);
    /* the image's layout transform, 20 convs (each with its relu / residual
     * add fused), maxpool, global pool, flatten (a view), fc */
    assert_int_equal(ctx->n_groups, 25);
    int conv_add_relu = 0;
    for (int r = 0; r < ctx->n_groups; r++) {
        const kiln_group *gr = &ctx->groups[r];
        if (gr->n_nodes == 3 && ctx->g->nodes[gr->nodes[1]]->op == KILN_OP_ADD &&
            ctx->g->nodes[gr->nodes[2]]->op == KILN_OP_RELU)
            conv_add_relu++;
    }
    assert_int_equal(conv_add_relu, 8);
    kiln_pass_ctx_destroy(ctx);
    kiln_graph_destroy(g);
}

/* SiLU and HardSwish after a blocked conv and a depthwise conv: the
 * activation's two nodes join the conv's group (the Mul reads the conv's
 * output inside the group), so each conv is one group; a Sigmoid whose x is
 * also read by a node that cannot join stays out. */
static void test_fuse_silu_hardswish(void **state)
{
    (void)state;
    kiln_graph *g = NULL;
    kiln_error err = {0};
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    kiln_shape xs = ks(4, 1, 16, 10, 10);
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &xs);
    int w1 = param(g, "w1", ks(4, 32, 16, 1, 1), 1, -1, 1);
    int i1[2] = {x, w1};
    int c1 = kiln_graph_node_output(g, kiln_graph_add_node(g, KILN_OP_CONV, "c1", i1, 2, 1), 0);
    int s1 = kiln_graph_node_output(g, kiln_graph_add_node(g, KILN_OP_SIGMOID, "s1", &c1, 1, 1), 0);
    int m1i[2] = {s1, c1}; /* the conv's output second: either order joins */
    int m1 = kiln_graph_node_output(g, kiln_graph_add_node(g, KILN_OP_MUL, "m1", m1i, 2, 1), 0);
    int w2 = param(g, "w2", ks(4, 32, 1, 3, 3), 2, -1, 1);
    int i2[2] = {m1, w2};
    int dn = kiln_graph_add_node(g, KILN_OP_CONV, "dw", i2, 2, 1);
    int64_t pads[4] = {1, 1, 1, 1};
    assert_int_equal(kiln_node_set_ints(g, dn, "pads", pads, 4), KILN_OK);
    kiln_node_set_int(g, dn, "group", 32);
    int d = kiln_graph_node_output(g, dn, 0);
    int hn = kiln_graph_add_node(g, KILN_OP_HARDSIGMOID, "hs", &d, 1, 1);
    kiln_node_set_float(g, hn, "alpha", 1.0f / 6.0f);
    int h = kiln_graph_node_output(g, hn, 0);
    int m2i[2] = {d, h};
    int m2 = kiln_graph_node_output(g, kiln_graph_add_node(g, KILN_OP_MUL, "m2", m2i, 2, 1), 0);
    /* a third conv whose output the Sigmoid's Mul and a global pool read */
    int w3 = param(g, "w3", ks(4, 32, 32, 1, 1), 3, -1, 1);
    int i3[2] = {m2, w3};
    int c3 = kiln_graph_node_output(g, kiln_graph_add_node(g, KILN_OP_CONV, "c3", i3, 2, 1), 0);
    int s3 = kiln_graph_node_output(g, kiln_graph_add_node(g, KILN_OP_SIGMOID, "s3", &c3, 1, 1), 0);
    int m3i[2] = {c3, s3};
    int m3 = kiln_graph_node_output(g, kiln_graph_add_node(g, KILN_OP_MUL, "m3", m3i, 2, 1), 0);
    int gp = kiln_graph_node_output(g, kiln_graph_add_node(g, KILN_OP_GLOBALAVERAGEPOOL, "gp", &c3, 1, 1), 0);
    int ai[2] = {m3, gp};
    int y = kiln_graph_node_output(g, kiln_graph_add_node(g, KILN_OP_ADD, "y", ai, 2, 1), 0);
    assert_int_equal(kiln_graph_add_output(g, y), KILN_OK);
    assert_int_equal(kiln_graph_infer_shapes(g, &err), KILN_OK);
    kiln_target t = host();
    kiln_pass_ctx *ctx;
    assert_int_equal(kiln_pass_ctx_create(g, &t, &ctx, &err), KILN_OK);
    assert_int_equal(kiln_pass_run_until(ctx, "fuse", &err), KILN_OK);
    int conv_act = 0, c3_alone = 0;
    for (int r = 0; r < ctx->n_groups; r++) {
        const kiln_group *gr = &ctx->groups[r];
        const kiln_node *a = ctx->g->nodes[gr->anchor];
        if (a->op != KILN_OP_CONV)
            continue;
        if (gr->n_nodes == 3 && ctx->g->nodes[gr->nodes[2]]->op == KILN_OP_MUL)
            conv_act++;
        if (strcmp(a->name, "c3") == 0 && gr->n_nodes == 1)
            c3_alone++;
    }
    assert_int_equal(conv_act, 2);
    assert_int_equal(c3_alone, 1);
    kiln_pass_ctx_destroy(ctx);
    kiln_graph_destroy(g);
}

/* Squeeze-and-excitation: the activation (NCHW16c), its global pool, two 1x1
 * convs and a Sigmoid make the scale [1, C, 1, 1]; the Mul of the two stays
 * blocked and the next conv reads it directly: no transform but (maybe) the
 * image's and the output's. */
static void test_alter_layout_squeeze_excite(void **state)
{
    (void)state;
    kiln_graph *g = NULL;
    kiln_error err = {0};
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    kiln_shape xs = ks(4, 1, 16, 8, 8);
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &xs);
    int i0[2] = {x, param(g, "w0", ks(4, 32, 16, 1, 1), 1, -1, 1)};
    int a = kiln_graph_node_output(g, kiln_graph_add_node(g, KILN_OP_CONV, "c0", i0, 2, 1), 0);
    int p = kiln_graph_node_output(g, kiln_graph_add_node(g, KILN_OP_GLOBALAVERAGEPOOL, "gp", &a, 1, 1), 0);
    int i1[2] = {p, param(g, "w1", ks(4, 8, 32, 1, 1), 2, -1, 1)};
    int f1 = kiln_graph_node_output(g, kiln_graph_add_node(g, KILN_OP_CONV, "fc1", i1, 2, 1), 0);
    int i2[2] = {f1, param(g, "w2", ks(4, 32, 8, 1, 1), 3, -1, 1)};
    int f2 = kiln_graph_node_output(g, kiln_graph_add_node(g, KILN_OP_CONV, "fc2", i2, 2, 1), 0);
    int sc = kiln_graph_node_output(g, kiln_graph_add_node(g, KILN_OP_SIGMOID, "sg", &f2, 1, 1), 0);
    int mi[2] = {sc, a};
    int y = kiln_graph_node_output(g, kiln_graph_add_node(g, KILN_OP_MUL, "scale", mi, 2, 1), 0);
    int i3[2] = {y, param(g, "w3", ks(4, 16, 32, 1, 1), 4, -1, 1)};
    int z = kiln_graph_node_output(g, kiln_graph_add_node(g, KILN_OP_CONV, "proj", i3, 2, 1), 0);
    assert_int_equal(kiln_graph_add_output(g, z), KILN_OK);
    assert_int_equal(kiln_graph_infer_shapes(g, &err), KILN_OK);
    kiln_target t = host();
    kiln_pass_ctx *ctx;
    assert_int_equal(kiln_pass_ctx_create(g, &t, &ctx, &err), KILN_OK);
    assert_int_equal(kiln_pass_run_until(ctx, "alter-layout", &err), KILN_OK);
    const kiln_graph *ng = ctx->g;
    int inner = 0, muls = 0;
    for (int i = 0; i < ng->n_nodes; i++) {
        const kiln_node *n = ng->nodes[i];
        const kiln_value *in = ng->values[n->inputs[0]], *o = ng->values[n->outputs[0]];
        if (n->op == KILN_OP_IDENTITY && !kiln_layout_equal(in->layout, o->layout) &&
            in->kind != KILN_VALUE_INPUT && !o->is_output)
            inner++;
        if (n->op == KILN_OP_MUL) {
            assert_int_equal(o->layout.kind, KILN_LAYOUT_NCHWC);
            muls++;
        }
    }
    assert_int_equal(inner, 0);
    assert_int_equal(muls, 1);
    kiln_pass_ctx_destroy(ctx);
    kiln_graph_destroy(g);
}

static void test_pipeline_and_print(void **state)
{
    (void)state;
    int n = 0;
    const kiln_pass_entry *p = kiln_pass_pipeline(&n);
    assert_true(n >= 8);
    assert_string_equal(p[0].name, "infer-shapes");
    assert_true(kiln_pass_known("fuse"));
    assert_false(kiln_pass_known("no-such-pass"));
    kiln_graph *g = NULL;
    kiln_error err = {0};
    assert_int_equal(kiln_zoo_build("mlp", 0, 0, &g, &err), KILN_OK);
    kiln_target t = host();
    kiln_pass_ctx *ctx;
    assert_int_equal(kiln_pass_ctx_create(g, &t, &ctx, &err), KILN_OK);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ctx->dump = f;
    ctx->print_after = "plan-memory";
    assert_int_equal(kiln_pass_run_all(ctx, &err), KILN_OK);
    fclose(f);
    assert_non_null(strstr(buf, "== IR after plan-memory"));
    assert_non_null(strstr(buf, "Gemm("));
    assert_non_null(strstr(buf, "@arena+"));
    assert_non_null(strstr(buf, "[g2]"));
    free(buf);
    assert_int_equal(kiln_pass_run_until(ctx, "bogus", &err), KILN_ERR_NOT_FOUND);
    kiln_pass_ctx_destroy(ctx);
    kiln_graph_destroy(g);
}

/* Failure paths: no compiler, a bad target, a graph without weights. */
static void test_errors(void **state)
{
    (void)state;
    kiln_graph *g = NULL;
    kiln_error err = {0};
    assert_int_equal(kiln_zoo_build("mlp", 0, 0, &g, &err), KILN_OK);
    kiln_compile_options o = {0};
    o.target = "sparc";
    assert_int_equal(kiln_compile(g, &o, "/tmp/kiln-never.so", &err), KILN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "sparc"));
    o.target = NULL;
    o.print_ir_after = "nope";
    assert_int_equal(kiln_compile(g, &o, "/tmp/kiln-never.so", &err), KILN_ERR_INVALID_ARGUMENT);
    o.print_ir_after = NULL;
    const char *old = getenv("CC");
    char *saved = old ? strdup(old) : NULL;
    setenv("CC", "/nonexistent/kiln-no-cc", 1);
    assert_int_equal(kiln_compile(g, &o, "/tmp/kiln-never.so", &err), KILN_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "kiln-no-cc"));
    setenv("CC", "false", 1); /* a "compiler" that fails */
    kiln_status s = kiln_compile(g, &o, "/tmp/kiln-never.so", &err);
    assert_int_not_equal(s, KILN_OK);
    /* $CC's own arguments are part of the object cache's key: objects
     * compiled with CC="gcc -O1" are not those of CC=gcc */
    kiln_target tg;
    assert_int_equal(kiln_target_resolve("generic", &tg, &err), KILN_OK);
    kiln_cc plain, with_arg;
    setenv("CC", "gcc", 1);
    assert_int_equal(kiln_cc_init(&plain, &tg, &err), KILN_OK);
    setenv("CC", "gcc -O1", 1);
    assert_int_equal(kiln_cc_init(&with_arg, &tg, &err), KILN_OK);
    assert_string_equal(plain.id, with_arg.id);
    assert_string_not_equal(plain.key, with_arg.key);
    kiln_cc_free(&plain);
    kiln_cc_free(&with_arg);
    if (saved) {
        setenv("CC", saved, 1);
        free(saved);
    } else {
        unsetenv("CC");
    }
    kiln_graph_destroy(g);
    assert_int_equal(kiln_zoo_build("mlp", 0, KILN_ZOO_NO_WEIGHTS, &g, &err), KILN_OK);
    assert_int_equal(kiln_compile(g, NULL, "/tmp/kiln-never.so", &err), KILN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "no data"));
    kiln_graph_destroy(g);
    assert_int_equal(access("/tmp/kiln-never.so", F_OK), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fold_batchnorm),  cmocka_unit_test(test_fold_constant_and_dce),
        cmocka_unit_test(test_remove_identity_resize),
        cmocka_unit_test(test_plan_memory),     cmocka_unit_test(test_alter_layout),
        cmocka_unit_test(test_fuse_groups),     cmocka_unit_test(test_fuse_silu_hardswish),
        cmocka_unit_test(test_alter_layout_squeeze_excite),     cmocka_unit_test(test_pipeline_and_print),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
