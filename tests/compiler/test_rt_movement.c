/* tests/compiler/test_rt_movement.c: the strided copies (Transpose, Slice,
 * Expand), elementwise chains and Softmax of a graph whose input shapes
 * were bound from a symbol (shapes_bound, kiln_graph_add_sym: a VM
 * specialization) take the symbol's extent at run time, as the dense,
 * LayerNorm and attention kernels do (test_rt_rows.c, test_attention.c).
 * The same graph at sequence lengths 3, 17 and 40 gives one source per
 * kernel; each step carries its extent; every build matches the reference
 * executor. The graph has what a decoder export has: [B, S, D] <-> [S, B, D]
 * transposes, a head split whose length dim sits between fixed ones (its
 * input stride holds the length), slices of fixed-size tables to the
 * length (position embeddings, a causal mask: two length dims), a
 * broadcast Expand, a residual Add, a Softmax, a mean over the length
 * (the reduced dims hold it) and a max along it, and a Where on a mask
 * compared from the length, the last rows read from the end (a
 * decoder's next-token row), a KV cache's past keys joined with the new
 * token's (Concat along the length) and a Split of [1, L, 24] in parts
 * (the length in its outer dims). Without shapes_bound the
 * kernels are specialized per length (so the comparison can fail). */
#include "codegen/c/codegen.h"
#include "compiler_test.h"
#include "lower/lower.h"
#include "vm/vm.h"

#include <unistd.h>

static char g_dir[256];

static int out1(kiln_graph *g, kiln_op op, const char *name, const int *in, int n)
{
    int node = kiln_graph_add_node(g, op, name, in, n, 1);
    assert_true(node >= 0);
    return node;
}

static int node_out(kiln_graph *g, int node)
{
    return kiln_graph_node_output(g, node, 0);
}

static int transpose(kiln_graph *g, const char *name, int x, const int64_t *perm, int rank)
{
    int n = out1(g, KILN_OP_TRANSPOSE, name, (int[]){x}, 1);
    assert_int_equal(kiln_node_set_ints(g, n, "perm", perm, rank), KILN_OK);
    return node_out(g, n);
}

static int slice(kiln_graph *g, const char *name, int x, const int64_t *starts, const int64_t *ends,
                 const int64_t *axes, int n_axes)
{
    int n = out1(g, KILN_OP_SLICE, name, (int[]){x}, 1);
    assert_int_equal(kiln_node_set_ints(g, n, "starts", starts, n_axes), KILN_OK);
    assert_int_equal(kiln_node_set_ints(g, n, "ends", ends, n_axes), KILN_OK);
    assert_int_equal(kiln_node_set_ints(g, n, "axes", axes, n_axes), KILN_OK);
    return node_out(g, n);
}

/* x [1, L, 24]:
 *   a  = Transpose(Slice(Transpose(x, [1,0,2])[.., .., 8:16]), [1,0,2])
 *        + pos[0:L]                       [1, L, 8]
 *   sm = Softmax(Transpose(x as [1, L, 4, 6], [0,2,1,3]))   [1, 4, L, 6]
 *   cm = causal[0:L, 0:L]                 [L, L]
 *   ex = Expand(r [L, 1], [L, 5]) * 2     [L, 5]
 *   mean over L of x [1, 1, 24], max over the last dim of [L, 1, 24],
 *   Where(r < thr [5], ex, 0)              [L, 5]
 *   x[:, -1, :] (Gather)  [1, 24] and x[:, -2:, :] (Slice)  [1, 2, 24]:
 *   the length only in their offsets, read from the end
 * with r [L, 1] a second input. */
static kiln_graph *decoder_ops(int64_t L, bool bound)
{
    kiln_graph *g = NULL;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &(kiln_shape){3, {1, L, 24}});
    int r = kiln_graph_add_input(g, "r", KILN_DTYPE_FLOAT32, &(kiln_shape){2, {L, 1}});
    int pos = ct_param(g, "pos", (kiln_shape){2, {64, 8}}, 21, -1.0f, 1.0f);
    int causal = ct_param(g, "causal", (kiln_shape){2, {64, 64}}, 22, -1.0f, 1.0f);
    int two = ct_param(g, "two", (kiln_shape){1, {1}}, 23, 2.0f, 2.0f);
    int64_t shp[4] = {1, L, 4, 6}, ex_shape[2] = {L, 5};

    int t1 = transpose(g, "t1", x, (int64_t[]){1, 0, 2}, 3);
    int s1 = slice(g, "s1", t1, (int64_t[]){8}, (int64_t[]){16}, (int64_t[]){2}, 1);
    int t2 = transpose(g, "t2", s1, (int64_t[]){1, 0, 2}, 3);
    int ps = slice(g, "ps", pos, (int64_t[]){0}, (int64_t[]){L}, (int64_t[]){0}, 1);
    int a = node_out(g, out1(g, KILN_OP_ADD, "a", (int[]){t2, ps}, 2));
    int rsn = out1(g, KILN_OP_RESHAPE, "heads", (int[]){x}, 1);
    assert_int_equal(kiln_node_set_ints(g, rsn, "shape", shp, 4), KILN_OK);
    int rs = node_out(g, rsn);
    int th = transpose(g, "th", rs, (int64_t[]){0, 2, 1, 3}, 4);
    int smn = out1(g, KILN_OP_SOFTMAX, "sm", (int[]){th}, 1);
    assert_int_equal(kiln_node_set_int(g, smn, "axis", -1), KILN_OK);
    int cm = slice(g, "cm", causal, (int64_t[]){0, 0}, (int64_t[]){L, L}, (int64_t[]){0, 1}, 2);
    int exn = out1(g, KILN_OP_EXPAND, "ex", (int[]){r}, 1);
    assert_int_equal(kiln_node_set_ints(g, exn, "shape", ex_shape, 2), KILN_OK);
    int ex = node_out(g, exn);
    int ex2 = node_out(g, out1(g, KILN_OP_MUL, "ex2", (int[]){ex, two}, 2));
    int mn = out1(g, KILN_OP_REDUCEMEAN, "mean", (int[]){x}, 1);
    assert_int_equal(kiln_node_set_ints(g, mn, "axes", (int64_t[]){1}, 1), KILN_OK);
    int mx = out1(g, KILN_OP_REDUCEMAX, "max", (int[]){t1}, 1);
    assert_int_equal(kiln_node_set_ints(g, mx, "axes", (int64_t[]){2}, 1), KILN_OK);
    int thr = ct_param(g, "thr", (kiln_shape){1, {5}}, 24, -0.5f, 0.5f);
    int zero = ct_param(g, "zero", (kiln_shape){1, {1}}, 25, 0.0f, 0.0f);
    int lt = node_out(g, out1(g, KILN_OP_LESS, "lt", (int[]){r, thr}, 2));
    int wh = node_out(g, out1(g, KILN_OP_WHERE, "wh", (int[]){lt, ex2, zero}, 3));
    int64_t neg1 = -1;
    int idx = kiln_graph_add_const(g, "last", KILN_DTYPE_INT64, &(kiln_shape){0, {0}}, &neg1);
    int lastn = out1(g, KILN_OP_GATHER, "last_row", (int[]){x, idx}, 2);
    assert_int_equal(kiln_node_set_int(g, lastn, "axis", 1), KILN_OK);
    int tail = slice(g, "tail", x, (int64_t[]){-2}, (int64_t[]){INT64_MAX}, (int64_t[]){1}, 1);
    /* a KV cache's step: the past keys [1, 2, L, 6] joined with the new
     * token's [1, 2, 1, 6] along the length; a fused projection split */
    int pk = kiln_graph_add_input(g, "pk", KILN_DTYPE_FLOAT32, &(kiln_shape){4, {1, 2, L, 6}});
    int nk = kiln_graph_add_input(g, "nk", KILN_DTYPE_FLOAT32, &(kiln_shape){4, {1, 2, 1, 6}});
    int catn = out1(g, KILN_OP_CONCAT, "kv", (int[]){pk, nk}, 2);
    assert_int_equal(kiln_node_set_int(g, catn, "axis", 2), KILN_OK);
    int spn = kiln_graph_add_node(g, KILN_OP_SPLIT, "qk", (int[]){x}, 1, 2);
    assert_true(spn >= 0);
    assert_int_equal(kiln_node_set_int(g, spn, "axis", 2), KILN_OK);
    assert_int_equal(kiln_node_set_ints(g, spn, "split", (int64_t[]){8, 16}, 2), KILN_OK);
    assert_int_equal(kiln_graph_add_output(g, a), KILN_OK);
    assert_int_equal(kiln_graph_add_output(g, node_out(g, smn)), KILN_OK);
    assert_int_equal(kiln_graph_add_output(g, cm), KILN_OK);
    assert_int_equal(kiln_graph_add_output(g, ex2), KILN_OK);
    assert_int_equal(kiln_graph_add_output(g, node_out(g, mn)), KILN_OK);
    assert_int_equal(kiln_graph_add_output(g, node_out(g, mx)), KILN_OK);
    assert_int_equal(kiln_graph_add_output(g, wh), KILN_OK);
    assert_int_equal(kiln_graph_add_output(g, node_out(g, lastn)), KILN_OK);
    assert_int_equal(kiln_graph_add_output(g, tail), KILN_OK);
    assert_int_equal(kiln_graph_add_output(g, node_out(g, catn)), KILN_OK);
    assert_int_equal(kiln_graph_add_output(g, kiln_graph_node_output(g, spn, 1)), KILN_OK);
    kiln_error err = {0};
    if (kiln_graph_infer_shapes(g, &err) != KILN_OK)
        fail_msg("L %lld: %s", (long long)L, err.msg);
    g->shapes_bound = bound;
    kiln_graph_add_sym(g, "seq", L);
    return g;
}

/* The kernels of g's build that take an extent at run time, names and
 * sources joined in task order; *n_rt: how many; *tpls: their templates'
 * names, space-separated. */
static char *rt_kernels(const kiln_graph *g, int64_t L, int *n_rt, char *tpls, size_t cap)
{
    kiln_error err = {0};
    kiln_compile_options opts = {.jobs = 2};
    kiln_build *b = NULL;
    assert_int_equal(kiln_build_create(g, &opts, &b, &err), KILN_OK);
    if (kiln_build_codegen(b, &err) != KILN_OK)
        fail_msg("L %lld: %s", (long long)L, err.msg);
    kiln_sb all = {0};
    *n_rt = 0;
    tpls[0] = 0;
    for (int i = 0; i < b->low->n_tasks; i++) {
        const kiln_task *t = &b->low->tasks[i];
        if (t->extent <= 0)
            continue;
        (*n_rt)++;
        size_t len = strlen(tpls);
        snprintf(tpls + len, cap - len, "%s ", t->tpl->name);
        char *src = NULL;
        assert_int_equal(kiln_codegen_kernel(b->low, t, &src, &err), KILN_OK);
        kiln_sb_printf(&all, "%s\n%s\n", t->fn_name, src);
        free(src);
    }
    kiln_build_destroy(b);
    char *s = kiln_sb_take(&all);
    assert_non_null(s);
    return s;
}

static void test_one_source_any_length(void **state)
{
    (void)state;
    static const int64_t lens[] = {3, 17, 40};
    char *first = NULL, tpls[256], first_tpls[256];
    int first_n = 0;
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        kiln_graph *g = decoder_ops(lens[i], true);
        int n = 0;
        char *k = rt_kernels(g, lens[i], &n, tpls, sizeof tpls);
        assert_null(strstr(k, " * workload:"));
        if (getenv("KT_DUMP")) /* the sources, to read them */
            fputs(k, stderr);
        if (!first) {
            first = k;
            first_n = n;
            snprintf(first_tpls, sizeof first_tpls, "%s", tpls);
            /* every kind of kernel above takes the length */
            static const char *const want[] = {"transpose ", "slice ", "elemwise ", "softmax ",
                                               "copy ",      "reduce ", "compare ",  "where ",
                                               "gather ",    "concat ", "split "};
            for (size_t w = 0; w < sizeof want / sizeof want[0]; w++)
                if (!strstr(tpls, want[w]))
                    fail_msg("no %skernel takes the length: %s", want[w], tpls);
        } else {
            if (n != first_n || strcmp(first, k) != 0)
                fail_msg("L %lld: the kernels (%s) differ from those of L %lld (%s):\n%s\n---\n%s",
                         (long long)lens[i], tpls, (long long)lens[0], first_tpls, k, first);
            free(k);
        }
        char tag[32];
        snprintf(tag, sizeof tag, "mv%lld", (long long)lens[i]);
        ct_check_graph(g, g_dir, tag, 0, 31 + (uint64_t)i, 1e-5, 1e-6);
        kiln_graph_destroy(g);
    }
    free(first);
}

/* .so files in dir. */
static int count_so(const char *dir)
{
    int n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        n += len > 3 && strcmp(e->d_name + len - 3, ".so") == 0;
    }
    closedir(d);
    return n;
}

/* The VM's build of a shape class whose kernels an earlier class's loaded
 * .so holds: no .so of its own (nothing compiled or linked), the steps run
 * from the earlier one's kernels, the values the reference executor's. A
 * class whose .so is no longer loaded links as usual. */
static void test_classes_reuse_kernels(void **state)
{
    (void)state;
    char cache[300], models[320];
    snprintf(cache, sizeof cache, "%s/vmcache", g_dir);
    snprintf(models, sizeof models, "%s/models", cache);
    static const int64_t lens[] = {3, 17, 40};
    kiln_module *first = NULL;
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        kiln_graph *g = decoder_ops(lens[i], true);
        int before = count_so(models);
        kiln_error err = {0};
        kiln_module *m = NULL;
        if (kiln_vm_compile_graph(g, cache, NULL, NULL, 2, &m, &err) != KILN_OK)
            fail_msg("L %lld: %s", (long long)lens[i], err.msg);
        assert_int_equal(count_so(models), before + (i == 0)); /* only the first links */
        char tag[32];
        snprintf(tag, sizeof tag, "vm%lld", (long long)lens[i]);
        if (i == 0)
            first = m; /* kept loaded: the later classes' kernels */
        else
            ct_check_module(g, m, tag, 41 + (uint64_t)i, 1e-5, 1e-6);
        kiln_graph_destroy(g);
    }
    kiln_module_destroy(first); /* no class holds that .so now: the next links */
    kiln_graph *g = decoder_ops(9, true);
    int before = count_so(models);
    kiln_error err = {0};
    kiln_module *m = NULL;
    assert_int_equal(kiln_vm_compile_graph(g, cache, NULL, NULL, 2, &m, &err), KILN_OK);
    assert_int_equal(count_so(models), before + 1);
    ct_check_module(g, m, "vm9", 45, 1e-5, 1e-6);
    kiln_graph_destroy(g);
}

/* Without shapes_bound nothing takes its extent at run time. */
static void test_static_graphs_specialize(void **state)
{
    (void)state;
    kiln_graph *g = decoder_ops(17, false);
    int n = 0;
    char tpls[256];
    char *k = rt_kernels(g, 17, &n, tpls, sizeof tpls);
    assert_int_equal(n, 0);
    free(k);
    kiln_graph_destroy(g);
}

/* The symbols' extents: a dim of the largest one above 1 that a shape has. */
static void test_sym_extent(void **state)
{
    (void)state;
    kiln_graph *g = NULL;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    kiln_graph_add_sym(g, "batch", 2);
    kiln_graph_add_sym(g, "seq", 40);
    kiln_graph_add_sym(g, "batch", 5); /* seen: keeps 2 */
    kiln_graph_add_sym(g, "", 1);
    kiln_graph_add_sym(g, "", 1); /* unknown dims: one symbol each */
    assert_int_equal(g->n_syms, 4);
    assert_int_equal(g->syms[0].extent, 2);
    kiln_shape a = {3, {2, 40, 8}}, b = {2, {2, 8}}, c = {2, {1, 8}};
    assert_int_equal(kiln_graph_sym_extent(g->syms, g->n_syms, &a), 40);
    assert_int_equal(kiln_graph_sym_extent(g->syms, g->n_syms, &b), 2);
    assert_int_equal(kiln_graph_sym_extent(g->syms, g->n_syms, &c), 0);
    assert_int_equal(kiln_rt_numel(&a, 40), 2 * KILN_RT_ROWS * 8);
    for (int i = 0; i < 10; i++)
        kiln_graph_add_sym(g, "", 3);
    assert_int_equal(g->n_syms, KILN_MAX_SYMS);
    kiln_graph_destroy(g);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/kiln_test_rt_movement_%d", (int)getpid());
    kiln_error err = {0};
    if (kiln_mkdirs(g_dir, &err) != KILN_OK)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sym_extent),
        cmocka_unit_test(test_one_source_any_length),
        cmocka_unit_test(test_static_graphs_specialize),
        cmocka_unit_test(test_classes_reuse_kernels),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kiln_rmtree(g_dir);
    return rc;
}
