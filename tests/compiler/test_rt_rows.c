/* tests/compiler/test_rt_rows.c: dense kernels that take their rows at run
 * time (tpl_dense.c, "Rows at run time"). In a graph whose shapes were
 * bound from symbolic dims (shapes_bound: a VM specialization), the same
 * layers at 1, 3, 17 and 40 rows are the same kernels, by name and by
 * source, each step carries its rows as its extent, and every build
 * matches the reference executor. Without shapes_bound the kernels are
 * specialized per row count, as before (so the comparison can fail).
 * The embedding lookup (gather_rows), LayerNorm and Cast kernels take
 * their rows at run time the same way.
 * Shared weights (kiln_build_share_weights, the VM's builds): the large
 * weights of two row counts' models are the same files in the model cache,
 * a model found in the cache gets a deleted file back, a missing one is a
 * clear load error, and an output path refuses shared weights. */
#include "codegen/c/codegen.h"
#include "compiler_test.h"
#include "kiln/abi.h"
#include "lower/lower.h"
#include "runtime/module_internal.h"

#include <dirent.h>
#include <unistd.h>

static char g_dir[256];

/* x [1, M, 32] -> SiLU(x W1 + b1) [1, M, 40] -> (. W2 + b2) + r [1, M, 24]:
 * a generated epilogue (SiLU), a header bias and residual, a partial
 * column block (24 is 16 + 8 at AVX-512). */
static kiln_graph *two_layers(int64_t M, bool bound)
{
    kiln_graph *g = NULL;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &(kiln_shape){3, {1, M, 32}});
    int r = kiln_graph_add_input(g, "r", KILN_DTYPE_FLOAT32, &(kiln_shape){3, {1, M, 24}});
    int w1 = ct_param(g, "W1", (kiln_shape){2, {32, 40}}, 1, -0.3f, 0.3f);
    int b1 = ct_param(g, "b1", (kiln_shape){1, {40}}, 2, -0.5f, 0.5f);
    int w2 = ct_param(g, "W2", (kiln_shape){2, {40, 24}}, 3, -0.3f, 0.3f);
    int b2 = ct_param(g, "b2", (kiln_shape){1, {24}}, 4, -0.5f, 0.5f);
#define OUT(op, name, ...)                                                                        \
    kiln_graph_node_output(                                                                        \
        g, kiln_graph_add_node(g, op, name, (int[]){__VA_ARGS__}, sizeof((int[]){__VA_ARGS__}) / sizeof(int), 1), 0)
    int m1 = OUT(KILN_OP_MATMUL, "mm1", x, w1);
    int a1 = OUT(KILN_OP_ADD, "a1", m1, b1);
    int s1 = OUT(KILN_OP_SIGMOID, "s1", a1);
    int y1 = OUT(KILN_OP_MUL, "y1", a1, s1);
    int m2 = OUT(KILN_OP_MATMUL, "mm2", y1, w2);
    int a2 = OUT(KILN_OP_ADD, "a2", m2, b2);
    int y = OUT(KILN_OP_ADD, "y", a2, r);
#undef OUT
    assert_int_equal(kiln_graph_add_output(g, y), KILN_OK);
    kiln_error err = {0};
    assert_int_equal(kiln_graph_infer_shapes(g, &err), KILN_OK);
    g->shapes_bound = bound;
    return g;
}

/* The dense kernels' names (sorted by task) and sources of g's build,
 * joined; *n_dense: the dense tasks; each one's extent is checked. */
static char *dense_kernels(const kiln_graph *g, int64_t M, bool bound, int *n_dense)
{
    kiln_error err = {0};
    kiln_compile_options opts = {.jobs = 2};
    kiln_build *b = NULL;
    assert_int_equal(kiln_build_create(g, &opts, &b, &err), KILN_OK);
    if (kiln_build_codegen(b, &err) != KILN_OK)
        fail_msg("M %lld: %s", (long long)M, err.msg);
    size_t cap = 1 << 20, len = 0;
    char *all = calloc(1, cap);
    assert_non_null(all);
    *n_dense = 0;
    for (int i = 0; i < b->low->n_tasks; i++) {
        const kiln_task *t = &b->low->tasks[i];
        if (strcmp(t->tpl->name, "dense") != 0)
            continue;
        (*n_dense)++;
        assert_int_equal(t->extent, bound ? M : 0);
        char *src = NULL;
        assert_int_equal(kiln_codegen_kernel(b->low, &b->low->tasks[t->kernel], &src, &err),
                         KILN_OK);
        int w = snprintf(all + len, cap - len, "%s\n%s\n", b->low->tasks[t->kernel].fn_name, src);
        assert_true(w > 0 && (size_t)w < cap - len);
        len += (size_t)w;
        free(src);
    }
    kiln_build_destroy(b);
    return all;
}

static void test_same_kernels_any_rows(void **state)
{
    (void)state;
    static const int64_t rows[] = {1, 3, 17, 40};
    char *first = NULL;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        kiln_graph *g = two_layers(rows[i], true);
        int n_dense = 0;
        char *k = dense_kernels(g, rows[i], true, &n_dense);
        assert_int_equal(n_dense, 2);
        assert_null(strstr(k, " * workload:")); /* the rows are in no source */
        if (!first)
            first = k;
        else {
            if (strcmp(first, k) != 0)
                fail_msg("rows %lld: the dense kernels differ from those of %lld rows",
                         (long long)rows[i], (long long)rows[0]);
            free(k);
        }
        char tag[32];
        snprintf(tag, sizeof tag, "rt%lld", (long long)rows[i]);
        ct_check_graph(g, g_dir, tag, 0, 7 + (uint64_t)i, 1e-4, 1e-5);
        kiln_graph_destroy(g);
    }
    free(first);
}

/* The steps of the .so carry the rows; a run with a step's extent set to
 * another count would compute that many rows (the kernels read it). */
static void test_steps_carry_rows(void **state)
{
    (void)state;
    kiln_graph *g = two_layers(17, true);
    char path[512];
    snprintf(path, sizeof path, "%s/steps.so", g_dir);
    kiln_error err = {0};
    kiln_compile_options opts = {.jobs = 2};
    assert_int_equal(kiln_compile(g, &opts, path, &err), KILN_OK);
    kiln_module *m = NULL;
    assert_int_equal(kiln_module_load(path, NULL, &m, &err), KILN_OK);
    const kiln_abi_model *d = m->desc;
    assert_non_null(d);
    int dense = 0;
    for (int s = 0; s < d->n_steps; s++)
        if (!strcmp(d->steps[s].op, "dense")) {
            assert_int_equal(d->steps[s].extent, 17);
            dense++;
        } else {
            assert_int_equal(d->steps[s].extent, 0);
        }
    assert_int_equal(dense, 2);
    kiln_module_destroy(m);
    kiln_graph_destroy(g);
}

static void test_static_graphs_specialize(void **state)
{
    (void)state;
    int n3 = 0, n17 = 0;
    kiln_graph *g3 = two_layers(3, false), *g17 = two_layers(17, false);
    char *k3 = dense_kernels(g3, 3, false, &n3), *k17 = dense_kernels(g17, 17, false, &n17);
    assert_int_equal(n3, 2);
    assert_int_equal(n17, 2);
    assert_true(strcmp(k3, k17) != 0);
    assert_non_null(strstr(k3, " * workload:"));
    free(k3);
    free(k17);
    kiln_graph_destroy(g3);
    kiln_graph_destroy(g17);
}

/* Builds g into the model cache `cache` with shared weights; *so: its path. */
static kiln_status shared_build(const kiln_graph *g, const char *cache, char *so, size_t cap,
                                kiln_error *err)
{
    kiln_compile_options opts = {.jobs = 2, .cache_dir = cache};
    kiln_build *b = NULL;
    kiln_status s = kiln_build_create(g, &opts, &b, err);
    if (s == KILN_OK) {
        kiln_build_share_weights(b);
        s = kiln_build_link(b, NULL, err);
    }
    if (s == KILN_OK)
        snprintf(so, cap, "%s", kiln_build_output(b));
    kiln_build_destroy(b);
    return s;
}

static void test_shared_weight_files(void **state)
{
    (void)state;
    char cache[300], models[320], so3[600], so17[600], wf[600];
    snprintf(cache, sizeof cache, "%s/cache", g_dir);
    snprintf(models, sizeof models, "%s/models", cache);
    kiln_error err = {0};
    kiln_graph *g3 = ct_dense_layer(3, NULL), *g17 = ct_dense_layer(17, NULL);
    assert_int_equal(shared_build(g3, cache, so3, sizeof so3, &err), KILN_OK);
    int n = ct_weight_files(models, wf, sizeof wf);
    assert_int_equal(n, 1); /* the packed W; the bias stays in the .so */
    assert_int_equal(shared_build(g17, cache, so17, sizeof so17, &err), KILN_OK);
    assert_true(strcmp(so3, so17) != 0);
    assert_int_equal(ct_weight_files(models, wf, sizeof wf), 1); /* the same file */
    ct_check_so(g3, so3, "shared 3", 9, 1e-4, 1e-5);
    ct_check_so(g17, so17, "shared 17", 9, 1e-4, 1e-5);
    /* the file gone: loading says so; the next build puts it back */
    assert_int_equal(unlink(wf), 0);
    kiln_module *m = NULL;
    assert_int_not_equal(kiln_module_load(so3, NULL, &m, &err), KILN_OK);
    assert_null(m);
    assert_non_null(strstr(err.msg, "is missing"));
    assert_int_equal(shared_build(g3, cache, so3, sizeof so3, &err), KILN_OK);
    assert_int_equal(ct_weight_files(models, wf, sizeof wf), 1);
    ct_check_so(g3, so3, "shared 3 again", 9, 1e-4, 1e-5);
    /* an output path of its own: refused */
    kiln_compile_options opts = {.jobs = 2, .cache_dir = cache};
    kiln_build *b = NULL;
    assert_int_equal(kiln_build_create(g3, &opts, &b, &err), KILN_OK);
    kiln_build_share_weights(b);
    char out[600];
    snprintf(out, sizeof out, "%s/own.so", g_dir);
    assert_int_equal(kiln_build_link(b, out, &err), KILN_ERR_INVALID_ARGUMENT);
    kiln_build_destroy(b);
    kiln_graph_destroy(g3);
    kiln_graph_destroy(g17);
}

/* x [1, M, 3072] x W [3072, 768] + b (a BERT FFN output): a long K, so
 * that a task's rows of X fit half the L2 at a few rows and not at many,
 * and the kernel's loop order, chosen at run time from its rows, differs
 * between them. */
static kiln_graph *long_k(int64_t M)
{
    kiln_graph *g = NULL;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &(kiln_shape){3, {1, M, 3072}});
    int w = ct_param(g, "W", (kiln_shape){2, {3072, 768}}, 21, -0.05f, 0.05f);
    int bias = ct_param(g, "b", (kiln_shape){1, {768}}, 22, -0.5f, 0.5f);
    int mm = kiln_graph_add_node(g, KILN_OP_MATMUL, "mm", (int[]){x, w}, 2, 1);
    int ad = kiln_graph_add_node(g, KILN_OP_ADD, "add",
                                 (int[]){kiln_graph_node_output(g, mm, 0), bias}, 2, 1);
    assert_int_equal(kiln_graph_add_output(g, kiln_graph_node_output(g, ad, 0)), KILN_OK);
    kiln_error err = {0};
    assert_int_equal(kiln_graph_infer_shapes(g, &err), KILN_OK);
    g->shapes_bound = true;
    return g;
}

/* One kernel at 3 and 150 rows of a 3072-long K (columns outer at few
 * rows, rows outer at many, picked at run time), both right. */
static void test_loop_order_by_rows(void **state)
{
    (void)state;
    static const int64_t rows[] = {3, 150};
    char *first = NULL;
    for (size_t i = 0; i < 2; i++) {
        kiln_graph *g = long_k(rows[i]);
        int n_dense = 0;
        char *k = dense_kernels(g, rows[i], true, &n_dense);
        assert_int_equal(n_dense, 1);
        assert_non_null(strstr(k, "P->order = "));
        if (!first)
            first = k;
        else {
            assert_string_equal(first, k);
            free(k);
        }
        char tag[32];
        snprintf(tag, sizeof tag, "longk%lld", (long long)rows[i]);
        ct_check_graph(g, g_dir, tag, 0, 31 + (uint64_t)i, 1e-4, 1e-4);
        kiln_graph_destroy(g);
    }
    free(first);
}

/* ids [1, M] -> Gather(table [50, 32]) -> LayerNorm, and mask [1, M] ->
 * Cast to float -> * -2: an embedding lookup, a LayerNorm and an
 * attention-mask cast, whose rows come at run time too. */
static kiln_graph *row_ops(int64_t M)
{
    kiln_graph *g = NULL;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    int ids = kiln_graph_add_input(g, "ids", KILN_DTYPE_INT64, &(kiln_shape){2, {1, M}});
    int mask = kiln_graph_add_input(g, "mask", KILN_DTYPE_INT64, &(kiln_shape){2, {1, M}});
    int table = ct_param(g, "table", (kiln_shape){2, {50, 32}}, 11, -1.0f, 1.0f);
    int scale = ct_param(g, "scale", (kiln_shape){1, {32}}, 12, 0.5f, 1.5f);
    int bias = ct_param(g, "bias", (kiln_shape){1, {32}}, 13, -0.5f, 0.5f);
    int two = ct_param(g, "two", (kiln_shape){1, {1}}, 14, -2.0f, -2.0f);
    int ga = kiln_graph_add_node(g, KILN_OP_GATHER, "emb", (int[]){table, ids}, 2, 1);
    assert_int_equal(kiln_node_set_int(g, ga, "axis", 0), KILN_OK);
    int ln = kiln_graph_add_node(g, KILN_OP_LAYERNORM, "ln",
                                 (int[]){kiln_graph_node_output(g, ga, 0), scale, bias}, 3, 1);
    assert_int_equal(kiln_node_set_int(g, ln, "axis", -1), KILN_OK);
    assert_int_equal(kiln_node_set_float(g, ln, "epsilon", 1e-5f), KILN_OK);
    int ca = kiln_graph_add_node(g, KILN_OP_CAST, "cast", (int[]){mask}, 1, 1);
    assert_int_equal(kiln_node_set_int(g, ca, "to", KILN_DTYPE_FLOAT32), KILN_OK);
    int mu = kiln_graph_add_node(g, KILN_OP_MUL, "neg",
                                 (int[]){kiln_graph_node_output(g, ca, 0), two}, 2, 1);
    assert_int_equal(kiln_graph_add_output(g, kiln_graph_node_output(g, ln, 0)), KILN_OK);
    assert_int_equal(kiln_graph_add_output(g, kiln_graph_node_output(g, mu, 0)), KILN_OK);
    kiln_error err = {0};
    assert_int_equal(kiln_graph_infer_shapes(g, &err), KILN_OK);
    g->shapes_bound = true;
    return g;
}

/* Compiles g into g_dir/<tag>.so, runs it and the reference executor on ids
 * (i * 7) % 50 with the first -1 (the last row, counted from the end) and a
 * mask of alternating 0 and 1; the outputs must match. */
static void check_row_ops(const kiln_graph *g, int64_t M, const char *tag)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s.so", g_dir, tag);
    kiln_error err = {0};
    kiln_compile_options opts = {.jobs = 2};
    if (kiln_compile(g, &opts, path, &err) != KILN_OK)
        fail_msg("%s: %s", tag, err.msg);
    kiln_module *m = NULL;
    kiln_ref_executor *ex = NULL;
    assert_int_equal(kiln_module_load(path, NULL, &m, &err), KILN_OK);
    assert_int_equal(kiln_ref_executor_create(g, &ex, &err), KILN_OK);
    int64_t *ids = calloc((size_t)M, sizeof *ids), *mask = calloc((size_t)M, sizeof *mask);
    assert_true(ids && mask);
    for (int64_t i = 0; i < M; i++) {
        ids[i] = i ? (i * 7) % 50 : -1;
        mask[i] = i % 2;
    }
    kiln_tensor ti = {.dtype = KILN_DTYPE_INT64, .shape = {2, {1, M}}, .data = ids};
    kiln_tensor tm = {.dtype = KILN_DTYPE_INT64, .shape = {2, {1, M}}, .data = mask};
    assert_int_equal(kiln_module_set_input(m, 0, &ti, &err), KILN_OK);
    assert_int_equal(kiln_module_set_input(m, 1, &tm, &err), KILN_OK);
    assert_int_equal(kiln_ref_executor_set_input(ex, 0, &ti, &err), KILN_OK);
    assert_int_equal(kiln_ref_executor_set_input(ex, 1, &tm, &err), KILN_OK);
    assert_int_equal(kiln_module_run(m, &err), KILN_OK);
    assert_int_equal(kiln_ref_executor_run(ex, &err), KILN_OK);
    for (int o = 0; o < 2; o++) {
        const kiln_tensor *a = kiln_module_output(m, o), *b = kiln_ref_executor_output(ex, o);
        assert_true(a && b && kiln_shape_equal(&a->shape, &b->shape));
        ct_result r = ct_compare(a->data, b->data, kiln_shape_numel(&b->shape), 1e-4, 1e-5);
        if (r.bad)
            fail_msg("%s: output %d: %lld elements differ; first at %lld: got %g, want %g", tag,
                     o, (long long)r.bad, (long long)r.first_bad, (double)r.got,
                     (double)r.want);
    }
    free(ids);
    free(mask);
    kiln_ref_executor_destroy(ex);
    kiln_module_destroy(m);
}

static void test_row_ops_any_rows(void **state)
{
    (void)state;
    static const int64_t rows[] = {1, 3, 17, 40};
    static const char *const tpls[] = {"gather_rows", "layernorm", "cast"};
    char *first = NULL;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        kiln_graph *g = row_ops(rows[i]);
        kiln_error err = {0};
        kiln_compile_options opts = {.jobs = 2};
        kiln_build *b = NULL;
        assert_int_equal(kiln_build_create(g, &opts, &b, &err), KILN_OK);
        if (kiln_build_codegen(b, &err) != KILN_OK)
            fail_msg("M %lld: %s", (long long)rows[i], err.msg);
        kiln_sb all = {0};
        for (size_t k = 0; k < sizeof tpls / sizeof tpls[0]; k++) {
            int found = 0;
            for (int j = 0; j < b->low->n_tasks; j++) {
                const kiln_task *t = &b->low->tasks[j];
                if (strcmp(t->tpl->name, tpls[k]) != 0)
                    continue;
                found++;
                assert_int_equal(t->extent, rows[i]);
                char *src = NULL;
                assert_int_equal(kiln_codegen_kernel(b->low, t, &src, &err), KILN_OK);
                kiln_sb_printf(&all, "%s\n%s\n", t->fn_name, src);
                free(src);
            }
            if (found != 1)
                fail_msg("M %lld: %d %s tasks", (long long)rows[i], found, tpls[k]);
        }
        kiln_build_destroy(b);
        char *k = kiln_sb_take(&all);
        assert_non_null(k);
        assert_null(strstr(k, " * workload:"));
        if (!first) {
            first = k;
        } else {
            if (strcmp(first, k) != 0)
                fail_msg("rows %lld: the kernels differ from those of %lld rows:\n%s\n---\n%s",
                         (long long)rows[i], (long long)rows[0], k, first);
            free(k);
        }
        char tag[32];
        snprintf(tag, sizeof tag, "ops%lld", (long long)rows[i]);
        check_row_ops(g, rows[i], tag);
        kiln_graph_destroy(g);
    }
    free(first);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/kiln_test_rt_rows_%d", (int)getpid());
    kiln_error err = {0};
    if (kiln_mkdirs(g_dir, &err) != KILN_OK)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_kernels_any_rows),
        cmocka_unit_test(test_steps_carry_rows),
        cmocka_unit_test(test_row_ops_any_rows),
        cmocka_unit_test(test_loop_order_by_rows),
        cmocka_unit_test(test_static_graphs_specialize),
        cmocka_unit_test(test_shared_weight_files),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kiln_rmtree(g_dir);
    return rc;
}
