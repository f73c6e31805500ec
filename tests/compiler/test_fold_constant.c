/* tests/compiler/test_fold_constant.c: the fold-constant pass on exporter
 * shape arithmetic. An int64 Mod/Sub/Mod chain like the shifted-window
 * padding of torchvision's swin_t, `(7 - 57 % 7) % 7`, folds to the right
 * values wherever its constants fall in the new graph's value array (the pass
 * used to keep a pointer into that array across the copy of a constant that
 * grew it: swin_t crashed in fold-constant); every dtype the reference kernels
 * take folds to what the reference executor computes, and what they refuse is
 * left in place; the Swin padding fixture (tests/data/onnx/swin_pad_chain)
 * keeps its values through the passes and through compilation. */
#include "compiler_test.h"
#include "pass/pass.h"

#define DATA KILN_TEST_DATA_DIR "/onnx/"

static kiln_target target(void)
{
    kiln_target t;
    kiln_error err;
    assert_int_equal(kiln_target_resolve("avx2", &t, &err), KILN_OK);
    return t;
}

static int i64_const(kiln_graph *g, const char *name, kiln_shape s, const int64_t *v)
{
    int id = kiln_graph_add_const(g, name, KILN_DTYPE_INT64, &s, v);
    assert_true(id >= 0);
    return id;
}

static int i64_scalar(kiln_graph *g, const char *name, int64_t v)
{
    return i64_const(g, name, ks(0), &v);
}

static int node(kiln_graph *g, kiln_op op, const char *name, const int *in, int n_in)
{
    int id = kiln_graph_add_node(g, op, name, in, n_in, 1);
    assert_true(id >= 0);
    return kiln_graph_node_output(g, id, 0);
}

/* Runs g with the reference executor; input k is uniform in [-1, 1) from
 * seed 11 + k (float32) or zeros. Returns the executor (caller destroys). */
static kiln_ref_executor *ref_run(const kiln_graph *g)
{
    kiln_error err = {0};
    kiln_ref_executor *ex = NULL;
    if (kiln_ref_executor_create(g, &ex, &err) != KILN_OK)
        fail_msg("ref: %s", err.msg);
    for (int i = 0; i < g->n_inputs; i++) {
        const kiln_value *v = g->values[g->inputs[i]];
        kiln_tensor t;
        assert_int_equal(kiln_tensor_alloc(&t, v->dtype, &v->shape, &err), KILN_OK);
        memset(t.data, 0, (size_t)kiln_tensor_nbytes(&t));
        if (v->dtype == KILN_DTYPE_FLOAT32)
            kt_fill_random(t.data, kiln_shape_numel(&v->shape), 11 + (uint64_t)i, -1.0f, 1.0f);
        assert_int_equal(kiln_ref_executor_set_input(ex, i, &t, &err), KILN_OK);
        kiln_tensor_release(&t);
    }
    if (kiln_ref_executor_run(ex, &err) != KILN_OK)
        fail_msg("ref run: %s", err.msg);
    return ex;
}

/* Every output of `a` and `b` has the same dtype, shape and bytes. */
static void assert_same_outputs(const kiln_graph *a, const kiln_graph *b, const char *what)
{
    assert_int_equal(a->n_outputs, b->n_outputs);
    kiln_ref_executor *ea = ref_run(a), *eb = ref_run(b);
    for (int i = 0; i < a->n_outputs; i++) {
        const kiln_tensor *x = kiln_ref_executor_output(ea, i), *y = kiln_ref_executor_output(eb, i);
        if (x->dtype != y->dtype || !kiln_shape_equal(&x->shape, &y->shape) ||
            memcmp(x->data, y->data, (size_t)kiln_tensor_nbytes(x)) != 0)
            fail_msg("%s: output %d differs after folding", what, i);
    }
    kiln_ref_executor_destroy(ea);
    kiln_ref_executor_destroy(eb);
}

/* x -> `lead` Relus -> y, and beside it the swin padding arithmetic on int64
 * scalars, each constant its own value as torch exports them:
 *   pad = (7 - 57 % 7) % 7 = 6; pads = Concat([0], [0], Unsqueeze(pad), [0]).
 * `lead` shifts where the chain's constants land in fold-constant's new
 * graph. */
static kiln_graph *pad_chain_graph(int lead)
{
    kiln_graph *g;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    kiln_shape xs = ks(2, 2, 3);
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &xs);
    for (int i = 0; i < lead; i++) {
        char name[32];
        snprintf(name, sizeof name, "relu%d", i);
        x = node(g, KILN_OP_RELU, name, &x, 1);
    }
    int in[4];
    in[0] = i64_scalar(g, "size", 57);
    in[1] = i64_scalar(g, "win", 7);
    int rem = node(g, KILN_OP_MOD, "mod", in, 2);
    in[0] = i64_scalar(g, "win2", 7);
    in[1] = rem;
    int gap = node(g, KILN_OP_SUB, "sub", in, 2);
    in[0] = gap;
    in[1] = i64_scalar(g, "win3", 7);
    int pad = node(g, KILN_OP_MOD, "mod2", in, 2);
    int unsq = kiln_graph_add_node(g, KILN_OP_RESHAPE, "unsqueeze", &pad, 1, 1);
    int64_t one = 1, zero = 0;
    assert_int_equal(kiln_node_set_ints(g, unsq, "shape", &one, 1), KILN_OK);
    int cat_in[4] = {i64_const(g, "z0", ks(1, 1), &zero), i64_const(g, "z1", ks(1, 1), &zero),
                     kiln_graph_node_output(g, unsq, 0), i64_const(g, "z2", ks(1, 1), &zero)};
    int cat = kiln_graph_add_node(g, KILN_OP_CONCAT, "pads", cat_in, 4, 1);
    assert_int_equal(kiln_node_set_int(g, cat, "axis", 0), KILN_OK);
    assert_int_equal(kiln_graph_add_output(g, x), KILN_OK);
    assert_int_equal(kiln_graph_add_output(g, kiln_graph_node_output(g, cat, 0)), KILN_OK);
    kiln_error err = {0};
    if (kiln_graph_infer_shapes(g, &err) != KILN_OK)
        fail_msg("infer: %s", err.msg);
    return g;
}

static void test_int64_chain_any_position(void **state)
{
    (void)state;
    kiln_target t = target();
    /* the chain's constants are copied at 8 different offsets from its start
     * and the value array grows at 16, 32, ...: leads 0..24 put one of them
     * on each growth point below 48 */
    for (int lead = 0; lead <= 24; lead++) {
        kiln_graph *g = pad_chain_graph(lead);
        kiln_pass_ctx *ctx = NULL;
        kiln_error err = {0};
        assert_int_equal(kiln_pass_ctx_create(g, &t, &ctx, &err), KILN_OK);
        if (kiln_pass_run_until(ctx, "dce", &err) != KILN_OK)
            fail_msg("lead %d: %s", lead, err.msg);
        assert_int_equal(ctx->stat_const_folded, 5); /* Mod, Sub, Mod, Reshape, Concat */
        assert_int_equal(ct_count_op(ctx->g, KILN_OP_MOD, -1), 0);
        assert_int_equal(ct_count_op(ctx->g, KILN_OP_CONCAT, -1), 0);
        assert_int_equal(kiln_graph_validate(ctx->g, &err), KILN_OK);
        kiln_ref_executor *ex = ref_run(ctx->g);
        const kiln_tensor *pads = kiln_ref_executor_output(ex, 1);
        assert_int_equal(pads->dtype, KILN_DTYPE_INT64);
        assert_int_equal(kiln_shape_numel(&pads->shape), 4);
        const int64_t *p = pads->data;
        if (p[0] != 0 || p[1] != 0 || p[2] != 6 || p[3] != 0)
            fail_msg("lead %d: pads [%lld, %lld, %lld, %lld], want [0, 0, 6, 0]", lead,
                     (long long)p[0], (long long)p[1], (long long)p[2], (long long)p[3]);
        kiln_ref_executor_destroy(ex);
        assert_same_outputs(g, ctx->g, "pad chain");
        kiln_pass_ctx_destroy(ctx);
        kiln_graph_destroy(g);
    }
}

/* Small constants of any dtype: [3] with values 0, 1, 2 and [1] with 1 (as
 * bool: false, true, true and true). */
static int typed_const(kiln_graph *g, const char *name, kiln_dtype dt, int n)
{
    kiln_shape s = ks(1, (int64_t)n);
    void *data = NULL;
    int id = kiln_graph_add_const_uninit(g, name, dt, &s, true, &data);
    assert_true(id >= 0);
    for (int i = 0; i < n; i++) {
        int64_t v = n == 1 ? 1 : i;
        switch (dt) {
        case KILN_DTYPE_FLOAT32: ((float *)data)[i] = (float)v; break;
        case KILN_DTYPE_FLOAT64: ((double *)data)[i] = (double)v; break;
        case KILN_DTYPE_FLOAT16: ((uint16_t *)data)[i] = v == 0 ? 0 : v == 1 ? 0x3c00 : 0x4000; break;
        case KILN_DTYPE_INT8: case KILN_DTYPE_UINT8: case KILN_DTYPE_BOOL:
            ((uint8_t *)data)[i] = (uint8_t)(v != 0 && dt == KILN_DTYPE_BOOL ? 1 : v);
            break;
        case KILN_DTYPE_INT16: case KILN_DTYPE_UINT16: ((uint16_t *)data)[i] = (uint16_t)v; break;
        case KILN_DTYPE_INT32: case KILN_DTYPE_UINT32: ((uint32_t *)data)[i] = (uint32_t)v; break;
        case KILN_DTYPE_INT64: case KILN_DTYPE_UINT64: ((uint64_t *)data)[i] = (uint64_t)v; break;
        default: fail();
        }
    }
    return id;
}

/* Every elementwise op on constants of every dtype: where shape inference
 * accepts the node, fold-constant either folds it to exactly what the
 * reference executor computes or, when the reference kernel refuses the
 * dtype (KILN_ERR_UNSUPPORTED), leaves it to run time; never an error. */
static void test_every_dtype(void **state)
{
    (void)state;
    static const kiln_op ops[] = {
        KILN_OP_ADD, KILN_OP_SUB,   KILN_OP_MUL, KILN_OP_DIV,   KILN_OP_MOD,     KILN_OP_POW,
        KILN_OP_MIN, KILN_OP_MAX,   KILN_OP_SUM, KILN_OP_EQUAL, KILN_OP_GREATER, KILN_OP_AND,
        KILN_OP_NEG, KILN_OP_ABS,   KILN_OP_NOT, KILN_OP_SIGN,  KILN_OP_RELU,    KILN_OP_CONCAT,
        KILN_OP_EXPAND, KILN_OP_CUMSUM, KILN_OP_REDUCESUM, KILN_OP_ARGMAX,
    };
    kiln_target t = target();
    int folded = 0, left = 0;
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        for (int dt = KILN_DTYPE_UNDEFINED + 1; dt < KILN_DTYPE_COUNT; dt++) {
            kiln_graph *g;
            assert_int_equal(kiln_graph_create(&g), KILN_OK);
            kiln_shape xs = ks(1, 3);
            int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &xs);
            int in[2] = {typed_const(g, "a", (kiln_dtype)dt, 3), typed_const(g, "b", (kiln_dtype)dt, 1)};
            const kiln_op_info *info = kiln_op_get(ops[o]);
            int n_in = info->min_inputs == 1 && info->max_inputs == 1 ? 1 : 2;
            int nd = kiln_graph_add_node(g, ops[o], "op", in, n_in, 1);
            if (ops[o] == KILN_OP_EXPAND) {
                int64_t shape[2] = {2, 3};
                kiln_node_set_ints(g, nd, "shape", shape, 2);
            }
            if (ops[o] == KILN_OP_CONCAT || ops[o] == KILN_OP_CUMSUM || ops[o] == KILN_OP_ARGMAX)
                kiln_node_set_int(g, nd, "axis", 0);
            int y = kiln_graph_node_output(g, nd, 0);
            int r = node(g, KILN_OP_SIGMOID, "sigmoid", &x, 1);
            kiln_graph_add_output(g, y);
            kiln_graph_add_output(g, r);
            kiln_error err = {0};
            if (kiln_graph_infer_shapes(g, &err) != KILN_OK) { /* not a valid graph */
                kiln_graph_destroy(g);
                continue;
            }
            kiln_ref_executor *ex = NULL;
            assert_int_equal(kiln_ref_executor_create(g, &ex, &err), KILN_OK);
            kiln_tensor tx;
            assert_int_equal(kiln_tensor_alloc(&tx, KILN_DTYPE_FLOAT32, &xs, &err), KILN_OK);
            memset(tx.data, 0, (size_t)kiln_tensor_nbytes(&tx));
            assert_int_equal(kiln_ref_executor_set_input(ex, 0, &tx, &err), KILN_OK);
            kiln_tensor_release(&tx);
            kiln_status ref_st = kiln_ref_executor_run(ex, &err);
            kiln_ref_executor_destroy(ex);
            kiln_pass_ctx *ctx = NULL;
            assert_int_equal(kiln_pass_ctx_create(g, &t, &ctx, &err), KILN_OK);
            kiln_status st = kiln_pass_run_until(ctx, "dce", &err);
            if (ref_st == KILN_OK) {
                if (st != KILN_OK)
                    fail_msg("%s on %s: %s", info->name, kiln_dtype_name((kiln_dtype)dt), err.msg);
                if (ct_count_op(ctx->g, ops[o], -1) == 0) {
                    folded++;
                    assert_same_outputs(g, ctx->g, info->name);
                } else {
                    left++;
                }
            } else if (st != KILN_OK && st != ref_st) {
                fail_msg("%s on %s: the pass says %s, the kernel %s", info->name,
                         kiln_dtype_name((kiln_dtype)dt), kiln_status_str(st),
                         kiln_status_str(ref_st));
            }
            kiln_pass_ctx_destroy(ctx);
            kiln_graph_destroy(g);
        }
    }
    assert_true(folded > 100);
    assert_int_equal(left, 0); /* whatever the kernels compute is folded */
}

/* tests/data/onnx/swin_pad_chain: the padding of a Swin block as torch
 * exports it (make_onnx_fixtures.py). */
static void test_swin_pad_chain(void **state)
{
    (void)state;
    kiln_graph *g = NULL;
    kiln_error err = {0};
    if (kiln_onnx_load(DATA "swin_pad_chain/model.onnx", &g, &err) != KILN_OK)
        fail_msg("load: %s", err.msg);
    kiln_target t = target();
    kiln_pass_ctx *ctx = NULL;
    assert_int_equal(kiln_pass_ctx_create(g, &t, &ctx, &err), KILN_OK);
    if (kiln_pass_run_until(ctx, "dce", &err) != KILN_OK)
        fail_msg("passes: %s", err.msg);
    assert_true(ctx->stat_const_folded >= 6); /* Mod, Sub, Mod per axis */
    assert_int_equal(ct_count_op(ctx->g, KILN_OP_MOD, -1), 0);
    /* the folded graph against numpy's values */
    kiln_ref_executor *ex = NULL;
    assert_int_equal(kiln_ref_executor_create(ctx->g, &ex, &err), KILN_OK);
    kiln_tensor x = {0}, want = {0};
    assert_int_equal(kiln_tensor_read(DATA "swin_pad_chain/input_0.pb", &x, NULL, &err), KILN_OK);
    assert_int_equal(kiln_ref_executor_set_input(ex, 0, &x, &err), KILN_OK);
    kiln_tensor_release(&x);
    assert_int_equal(kiln_ref_executor_run(ex, &err), KILN_OK);
    assert_int_equal(kiln_tensor_read(DATA "swin_pad_chain/output_0.pb", &want, NULL, &err), KILN_OK);
    const kiln_tensor *y = kiln_ref_executor_output(ex, 0);
    assert_true(kiln_shape_equal(&y->shape, &want.shape));
    assert_allclose(y->data, want.data, kiln_shape_numel(&want.shape), 1e-6, 1e-7);
    kiln_tensor_release(&want);
    assert_int_equal(kiln_tensor_read(DATA "swin_pad_chain/output_1.pb", &want, NULL, &err), KILN_OK);
    const kiln_tensor *pads = kiln_ref_executor_output(ex, 1);
    assert_int_equal(pads->dtype, KILN_DTYPE_INT64);
    assert_int_equal(kiln_shape_numel(&pads->shape), 8);
    assert_memory_equal(pads->data, want.data, 8 * sizeof(int64_t));
    assert_int_equal(((const int64_t *)pads->data)[5], 1); /* (3 - 5 % 3) % 3 */
    assert_int_equal(((const int64_t *)pads->data)[6], 2); /* (3 - 4 % 3) % 3 */
    kiln_tensor_release(&want);
    kiln_ref_executor_destroy(ex);
    kiln_pass_ctx_destroy(ctx);
    /* compiled, against the reference executor on the unfolded graph */
    char *dir = kt_tempdir();
    ct_check_graph(g, dir, "swin_pad_chain", 0, 5, 1e-6, 1e-7);
    kt_rmdir(dir);
    free(dir);
    kiln_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_int64_chain_any_position),
        cmocka_unit_test(test_every_dtype),
        cmocka_unit_test(test_swin_pad_chain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
