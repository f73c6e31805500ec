/* tests/compiler/test_preact.c: densenet's pre-activation after a dense
 * concatenation, Concat(features..) -> BatchNormalization -> Relu -> 1x1
 * Conv, compiled end to end against the reference executor (rtol 1e-3,
 * atol 1e-4), batch 1 and 2, channel counts that fill whole blocks and one
 * that does not. Asserts the layouts and fusion that make it fast: the
 * standalone BN's Mul reads the blocked concat output (no transform to NCHW
 * and back) and its Mul, Add and Relu are one elementwise group; and, at
 * batch 1 with whole blocks, that the two concatenations are written in
 * place: every feature a slice of the longer one's buffer, the shorter one
 * its leading bytes (a chain of prefixes, fuse.c); a third concat that
 * breaks the chain (f1, f2) leaves them all as kernels. With a feature also
 * read after the block (Relu(f1) as a second output), the BN group must not
 * write its output over the concat buffer (the values compared catch it). */
#include "compiler_test.h"
#include "pass/pass.h"
#include "target/target.h"

static char *dir;
static int case_no;

static int param(kiln_graph *g, const char *name, kiln_shape s, uint64_t seed, float lo, float hi)
{
    void *data = NULL;
    int v = kiln_graph_add_const_uninit(g, name, KILN_DTYPE_FLOAT32, &s, true, &data);
    kt_fill_random(data, kiln_shape_numel(&s), seed, lo, hi);
    return v;
}

static int conv1x1(kiln_graph *g, int x, int c_in, int c_out, uint64_t seed)
{
    int in[3] = {x, param(g, "w", ks(4, c_out, c_in, 1, 1), seed, -0.5f, 0.5f),
                 param(g, "b", ks(1, c_out), seed + 1, -0.5f, 0.5f)};
    int id = kiln_graph_add_node(g, KILN_OP_CONV, NULL, in, 3, 1);
    assert_true(id >= 0);
    return kiln_graph_node_output(g, id, 0);
}

static int relu(kiln_graph *g, int x)
{
    int id = kiln_graph_add_node(g, KILN_OP_RELU, NULL, &x, 1, 1);
    assert_true(id >= 0);
    return kiln_graph_node_output(g, id, 0);
}

enum { PLAIN, BROKEN, LATE };

/* features f0 (c0 channels) and f1, f2 (growth each), two concats reading
 * f0 (as a dense block does), BN-ReLU-conv after the second; BROKEN: also
 * Concat(f1, f2) as a second graph output; LATE: also Relu(f1) after the
 * block as a second graph output */
static void check_block(int n, int c0, int growth, int h, int w, int variant)
{
    bool broken = variant == BROKEN;
    kiln_graph *g;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    kiln_shape xs = ks(4, n, 8, h, w);
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &xs);
    int f0 = relu(g, conv1x1(g, x, 8, c0, 10));
    int f1 = relu(g, conv1x1(g, f0, c0, growth, 20));
    int cat1_in[2] = {f0, f1};
    int cat1 = kiln_graph_add_node(g, KILN_OP_CONCAT, NULL, cat1_in, 2, 1);
    kiln_node_set_int(g, cat1, "axis", 1);
    int f2 = relu(g, conv1x1(g, kiln_graph_node_output(g, cat1, 0), c0 + growth, growth, 30));
    int cat2_in[3] = {f0, f1, f2};
    int cat2 = kiln_graph_add_node(g, KILN_OP_CONCAT, NULL, cat2_in, 3, 1);
    kiln_node_set_int(g, cat2, "axis", 1);
    int c = c0 + 2 * growth;
    int bn_in[5] = {kiln_graph_node_output(g, cat2, 0), param(g, "s", ks(1, c), 40, 0.5f, 1.5f),
                    param(g, "t", ks(1, c), 41, -0.5f, 0.5f), param(g, "m", ks(1, c), 42, -0.5f, 0.5f),
                    param(g, "v", ks(1, c), 43, 0.5f, 1.5f)};
    int bn = kiln_graph_add_node(g, KILN_OP_BATCHNORM, "bn", bn_in, 5, 1);
    kiln_node_set_float(g, bn, "epsilon", 1e-5f);
    int y = conv1x1(g, relu(g, kiln_graph_node_output(g, bn, 0)), c, 16, 50);
    assert_int_equal(kiln_graph_add_output(g, y), KILN_OK);
    if (broken) {
        int cat3_in[2] = {f1, f2};
        int cat3 = kiln_graph_add_node(g, KILN_OP_CONCAT, NULL, cat3_in, 2, 1);
        kiln_node_set_int(g, cat3, "axis", 1);
        assert_int_equal(kiln_graph_add_output(g, kiln_graph_node_output(g, cat3, 0)), KILN_OK);
    }
    if (variant == LATE)
        assert_int_equal(kiln_graph_add_output(g, relu(g, f1)), KILN_OK);
    kiln_error err = {0};
    assert_int_equal(kiln_graph_infer_shapes(g, &err), KILN_OK);

    kiln_target tg;
    kiln_pass_ctx *ctx = NULL;
    assert_int_equal(kiln_target_resolve(NULL, &tg, &err), KILN_OK);
    assert_int_equal(kiln_pass_ctx_create(g, &tg, &ctx, &err), KILN_OK);
    if (kiln_pass_run_all(ctx, &err) != KILN_OK)
        fail_msg("case %d: passes: %s", case_no, err.msg);
    const kiln_graph *pg = ctx->g;
    int mul = -1;
    for (int i = 0; i < pg->n_nodes; i++)
        if (pg->nodes[i]->op == KILN_OP_MUL)
            mul = i;
    assert_true(mul >= 0);
    bool whole = c % tg.vec == 0 && c0 % tg.vec == 0 && growth % tg.vec == 0;
    if (whole && tg.vec > 1) {
        const kiln_value *in = pg->values[pg->nodes[mul]->inputs[0]];
        if (in->layout.kind != KILN_LAYOUT_NCHWC)
            fail_msg("case %d: the BN's Mul reads a row-major input", case_no);
        bool fused = false;
        for (int k = 0; k < ctx->n_groups && !fused; k++) {
            const kiln_group *gr = &ctx->groups[k];
            bool m = false, a = false, r = false;
            for (int j = 0; j < gr->n_nodes; j++) {
                kiln_op op = pg->nodes[gr->nodes[j]]->op;
                m |= op == KILN_OP_MUL;
                a |= op == KILN_OP_ADD;
                r |= op == KILN_OP_RELU;
            }
            fused = m && a && r;
        }
        if (!fused)
            fail_msg("case %d: BN Mul, Add and Relu are not one group", case_no);
    }
    /* the dense concatenations: in place exactly when batch 1, whole blocks
     * (or row-major) and the chain is not broken */
    const kiln_node *cats[3] = {NULL, NULL, NULL};
    int n_cats = 0, n_inplace = 0;
    for (int k = 0; k < ctx->n_groups; k++) {
        const kiln_group *gr = &ctx->groups[k];
        const kiln_node *a = pg->nodes[gr->anchor];
        if (a->op != KILN_OP_CONCAT)
            continue;
        assert_true(n_cats < 3);
        cats[n_cats++] = a;
        n_inplace += gr->kind == KILN_GROUP_CONCAT_INPLACE;
    }
    assert_int_equal(n_cats, broken ? 3 : 2);
    bool want = n == 1 && !broken && (whole || tg.vec == 1);
    if (n_inplace != (want ? 2 : 0))
        fail_msg("case %d: %d concats in place, want %d", case_no, n_inplace, want ? 2 : 0);
    if (want) {
        const kiln_node *a = cats[0]->n_inputs == 2 ? cats[0] : cats[1];
        const kiln_node *b = a == cats[0] ? cats[1] : cats[0];
        const kiln_storage *sto = ctx->storage;
        int bo = b->outputs[0];
        assert_int_equal(sto[a->outputs[0]].root, sto[bo].root);
        assert_int_equal(sto[a->outputs[0]].offset, sto[bo].offset);
        int64_t off = sto[bo].offset;
        for (int k = 0; k < b->n_inputs; k++) {
            int v = b->inputs[k];
            if (sto[v].root != sto[bo].root || sto[v].offset != off)
                fail_msg("case %d: feature %d is not the concat's slice", case_no, k);
            off += sto[v].nbytes;
        }
        assert_int_equal(off - sto[bo].offset, sto[bo].nbytes);
    }
    kiln_pass_ctx_destroy(ctx);
    char tag[32];
    snprintf(tag, sizeof tag, "p%d", case_no);
    ct_check_graph(g, dir, tag, 0, 100 + (uint64_t)case_no, 1e-3, 1e-4);
    case_no++;
    kiln_graph_destroy(g);
}

static void test_preact(void **state)
{
    (void)state;
    check_block(1, 32, 16, 7, 9, PLAIN);
    check_block(2, 16, 32, 5, 6, PLAIN);
    check_block(1, 24, 12, 6, 5, PLAIN); /* 48 channels in blocks of 16; 24 and 12 are not */
    check_block(1, 32, 16, 7, 9, BROKEN);
    check_block(1, 32, 16, 7, 9, LATE);
}

int main(void)
{
    dir = kt_tempdir();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_preact),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kt_rmdir(dir);
    free(dir);
    return rc;
}
