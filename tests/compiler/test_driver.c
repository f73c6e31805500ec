/* tests/compiler/test_driver.c: the compile pipeline in stages (src/driver):
 * stages run in order on demand, an explicit configuration reaches the
 * generated kernel and keeps the numbers, bad configurations are refused
 * naming the knob, tuning records are applied (best median per workload
 * key, other templates' and out-of-space records ignored) and a corrupt
 * records file is an error naming the line. The MLP zoo network: dense
 * templates with packed weights whose packing depends on a knob (nb). */
#include "compiler_test.h"
#include "lower/lower.h"

#include <unistd.h>

static char g_dir[256];

static kiln_graph *mlp(void)
{
    kiln_graph *g = NULL;
    kiln_error err = {0};
    assert_int_equal(kiln_zoo_build("mlp", 0, 0, &g, &err), KILN_OK);
    return g;
}

/* The first task using the dense template. */
static int dense_task(const kiln_build *b)
{
    for (int i = 0; i < b->low->n_tasks; i++)
        if (!strcmp(b->low->tasks[i].tpl->name, "dense"))
            return i;
    fail_msg("no dense task");
    return -1;
}

/* Runs the .so and the reference executor on one seeded input; asserts the
 * outputs agree. */
static void check_so(const kiln_graph *g, const char *path)
{
    ct_check_so(g, path, path, 7, 1e-4, 1e-5);
}

/* A configuration moving every knob of t with a choice to its first
 * non-default value, as JSON; *moved counts them. */
static void other_config(const kiln_task *t, char *buf, size_t size, int *moved)
{
    size_t n = (size_t)snprintf(buf, size, "{");
    *moved = 0;
    for (int k = 0; k < t->n_knobs; k++) {
        int v = t->knobs[k].value;
        for (int c = 0; c < t->knobs[k].n_choices; c++)
            if (t->knobs[k].choices[c] != t->knobs[k].value) {
                v = t->knobs[k].choices[c];
                (*moved)++;
                break;
            }
        n += (size_t)snprintf(buf + n, size - n, "%s\"%s\": %d", k ? ", " : "", t->knobs[k].name, v);
    }
    snprintf(buf + n, size - n, "}");
}

/* Every knob of t has the value cfg (JSON) gives it. */
static void assert_config(const kiln_task *t, const char *cfg)
{
    for (int k = 0; k < t->n_knobs; k++) {
        char pat[64];
        snprintf(pat, sizeof pat, "\"%s\": %d", t->knobs[k].name, t->knobs[k].value);
        if (!strstr(cfg, pat))
            fail_msg("knob %s = %d, not as in %s", t->knobs[k].name, t->knobs[k].value, cfg);
    }
}

static void test_stages_and_explicit_config(void **state)
{
    (void)state;
    kiln_graph *g = mlp();
    kiln_error err = {0};
    kiln_build *b = NULL;
    kiln_compile_options opts = {.jobs = 2};
    assert_int_equal(kiln_build_create(g, &opts, &b, &err), KILN_OK);
    assert_null(kiln_build_output(b));
    assert_int_equal(kiln_build_lower(b, &err), KILN_OK); /* runs passes first */
    assert_non_null(b->ctx);
    int d = dense_task(b);
    const kiln_task *t = &b->low->tasks[d];
    assert_true(t->n_knobs > 0);
    char cfg[512], before[512];
    int moved;
    other_config(t, cfg, sizeof cfg, &moved);
    assert_true(moved > 0);
    snprintf(before, sizeof before, "%s", t->config);
    /* refused: unknown knob, value outside the space, not JSON, no such task */
    assert_int_equal(kiln_build_set_config(b, d, "{\"nope\": 1}", &err), KILN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "nope"));
    char bad[128];
    snprintf(bad, sizeof bad, "{\"%s\": -77}", t->knobs[0].name);
    assert_int_equal(kiln_build_set_config(b, d, bad, &err), KILN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, t->knobs[0].name));
    assert_int_equal(kiln_build_set_config(b, d, "{mr", &err), KILN_ERR_INVALID_ARGUMENT);
    assert_int_equal(kiln_build_set_config(b, 9999, cfg, &err), KILN_ERR_INVALID_ARGUMENT);
    assert_config(t, before); /* unchanged by the refusals */
    assert_int_equal(kiln_build_set_config(b, d, cfg, &err), KILN_OK);
    assert_int_equal(kiln_build_configure(b, &err), KILN_OK);
    assert_config(t, cfg);
    assert_non_null(strstr(t->config, "\"source\": \"explicit\""));
    assert_int_equal(kiln_build_set_config(b, d, cfg, &err), KILN_ERR_INVALID_ARGUMENT);
    char path[512];
    snprintf(path, sizeof path, "%s/explicit.so", g_dir);
    assert_int_equal(kiln_build_link(b, path, &err), KILN_OK);
    assert_string_equal(kiln_build_output(b), path);
    kiln_build_destroy(b);
    check_so(g, path);
    kiln_graph_destroy(g);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* The workload key, the default and another configuration of the first
 * dense task. */
static char *dense_key(const kiln_graph *g, char *def, char *alt, size_t size)
{
    kiln_error err = {0};
    kiln_build *b = NULL;
    assert_int_equal(kiln_build_create(g, NULL, &b, &err), KILN_OK);
    assert_int_equal(kiln_build_lower(b, &err), KILN_OK);
    const kiln_task *t = &b->low->tasks[dense_task(b)];
    int moved;
    other_config(t, alt, size, &moved);
    size_t n = (size_t)snprintf(def, size, "{");
    for (int k = 0; k < t->n_knobs; k++)
        n += (size_t)snprintf(def + n, size - n, "%s\"%s\": %d", k ? ", " : "", t->knobs[k].name,
                              t->knobs[k].value);
    snprintf(def + n, size - n, "}");
    char *key = strdup(t->workload);
    kiln_build_destroy(b);
    return key;
}

static void test_records(void **state)
{
    (void)state;
    kiln_graph *g = mlp();
    kiln_error err = {0};
    char def[512], alt[512];
    char *key = dense_key(g, def, alt, sizeof def);
    char rec[512], path[512], text[16384];
    snprintf(rec, sizeof rec, "%s/records.jsonl", g_dir);
    /* the slower record, one for another template, one outside the space, an
     * error record, then the winner (median 2.0) */
    snprintf(text, sizeof text,
             "# kiln tuning records\n"
             "{\"version\": 1, \"workload\": \"%s\", \"template\": \"dense\", \"knobs\": %s, \"status\": \"ok\", \"samples_us\": [5, 6, 4]}\n"
             "\n"
             "{\"version\": 1, \"workload\": \"%s\", \"template\": \"matmul\", \"knobs\": {}, \"status\": \"ok\", \"samples_us\": [0.1]}\n"
             "{\"version\": 1, \"workload\": \"%s\", \"template\": \"dense\", \"knobs\": {\"no_such_knob\": 5}, \"status\": \"ok\", \"samples_us\": [0.1]}\n"
             "{\"version\": 1, \"workload\": \"%s\", \"template\": \"dense\", \"knobs\": {}, \"status\": \"error\", \"samples_us\": [0.1]}\n"
             "{\"version\": 1, \"workload\": \"%s\", \"template\": \"dense\", \"knobs\": %s, \"status\": \"ok\", \"samples_us\": [2, 9, 1]}\n",
             key, def, key, key, key, key, alt);
    write_file(rec, text);
    kiln_compile_options opts = {.jobs = 2, .records = rec};
    kiln_build *b = NULL;
    assert_int_equal(kiln_build_create(g, &opts, &b, &err), KILN_OK);
    assert_int_equal(kiln_build_configure(b, &err), KILN_OK);
    assert_int_equal(kiln_build_tuned_tasks(b), 1);
    const kiln_task *t = &b->low->tasks[dense_task(b)];
    assert_config(t, alt);
    assert_non_null(strstr(t->config, "\"source\": \"records\""));
    snprintf(path, sizeof path, "%s/records.so", g_dir);
    assert_int_equal(kiln_build_link(b, path, &err), KILN_OK);
    kiln_build_destroy(b);
    check_so(g, path);

    /* a corrupt line: an error naming the file and the line */
    snprintf(text, sizeof text, "\n{\"version\": 1, \"workload\": \"x\", \"knobs\": {}}\n{\"workload\": \n");
    write_file(rec, text);
    assert_int_equal(kiln_build_create(g, &opts, &b, &err), KILN_OK);
    assert_int_equal(kiln_build_configure(b, &err), KILN_ERR_PARSE);
    assert_non_null(strstr(err.msg, "line 3"));
    assert_non_null(strstr(err.msg, "records.jsonl"));
    kiln_build_destroy(b);
    /* a missing file is refused at create */
    b = NULL;
    opts.records = "/nonexistent/records.jsonl";
    assert_int_equal(kiln_build_create(g, &opts, &b, &err), KILN_ERR_IO);
    assert_null(b);
    free(key);
    kiln_graph_destroy(g);
}

/* A record whose knobs equal the defaults changes where the configuration
 * came from, not the kernel: the records build names the same kernel and
 * finds every kernel in the object cache the default build filled (before,
 * the "source" tag was part of the kernel's name and text, so such a build
 * compiled every kernel again). */
static void test_default_record_hits_cache(void **state)
{
    (void)state;
    kiln_graph *g = mlp();
    kiln_error err = {0};
    char def[512], alt[512], rec[512], cache[512], path[512], text[4096];
    char *key = dense_key(g, def, alt, sizeof def);
    snprintf(cache, sizeof cache, "%s/cache-default-record", g_dir);
    snprintf(rec, sizeof rec, "%s/default-record.jsonl", g_dir);
    snprintf(text, sizeof text,
             "{\"version\": 1, \"workload\": \"%s\", \"template\": \"dense\", \"knobs\": %s, \"status\": \"ok\", \"samples_us\": [3, 3, 3]}\n",
             key, def);
    write_file(rec, text);
    char name[2][sizeof ((kiln_task *)0)->fn_name];
    for (int pass = 0; pass < 2; pass++) {
        kiln_compile_options opts = {.jobs = 2, .cache_dir = cache, .records = pass ? rec : NULL};
        kiln_build *b = NULL;
        assert_int_equal(kiln_build_create(g, &opts, &b, &err), KILN_OK);
        assert_int_equal(kiln_build_configure(b, &err), KILN_OK);
        assert_int_equal(kiln_build_tuned_tasks(b), pass);
        const kiln_task *t = &b->low->tasks[dense_task(b)];
        assert_config(t, def);
        assert_non_null(strstr(t->config, pass ? "\"source\": \"records\"" : "\"source\": \"default\""));
        snprintf(name[pass], sizeof name[pass], "%s", t->fn_name);
        snprintf(path, sizeof path, "%s/default-record-%d.so", g_dir, pass);
        assert_int_equal(kiln_build_link(b, path, &err), KILN_OK);
        assert_true(b->n_kernels > 0);
        assert_int_equal(kiln_tc_cached(b->tc), pass ? b->n_kernels : 0);
        kiln_build_destroy(b);
        check_so(g, path);
    }
    assert_string_equal(name[0], name[1]);
    free(key);
    kiln_graph_destroy(g);
}

/* Empty tensors (a dim of 0) go to the reference kernels, which handle
 * them; before, a MatMul with K = 0 divided by zero in the dense geometry
 * (SIGFPE) and a conv with an empty batch failed the blocked template
 * (found by tests/fuzz/fuzz_passes.c). */
static void test_empty_tensors(void **state)
{
    (void)state;
    kiln_graph *g = NULL;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &(kiln_shape){2, {2, 0}});
    static float w0[1];
    int w = kiln_graph_add_const(g, "w", KILN_DTYPE_FLOAT32, &(kiln_shape){2, {0, 4}}, w0);
    int mm = kiln_graph_add_node(g, KILN_OP_MATMUL, "mm", (int[]){x, w}, 2, 1);
    int c = kiln_graph_add_input(g, "c", KILN_DTYPE_FLOAT32, &(kiln_shape){4, {0, 8, 5, 5}});
    static float wc[16 * 8];
    for (int i = 0; i < 16 * 8; i++)
        wc[i] = (float)(i % 7) - 3.0f;
    int cw = kiln_graph_add_const(g, "cw", KILN_DTYPE_FLOAT32, &(kiln_shape){4, {16, 8, 1, 1}}, wc);
    int conv = kiln_graph_add_node(g, KILN_OP_CONV, "conv", (int[]){c, cw}, 2, 1);
    assert_int_equal(kiln_node_set_ints(g, conv, "kernel_shape", (int64_t[]){1, 1}, 2), KILN_OK);
    int relu = kiln_graph_add_node(g, KILN_OP_RELU, "relu", (int[]){kiln_graph_node_output(g, conv, 0)}, 1, 1);
    assert_int_equal(kiln_graph_add_output(g, kiln_graph_node_output(g, mm, 0)), KILN_OK);
    assert_int_equal(kiln_graph_add_output(g, kiln_graph_node_output(g, relu, 0)), KILN_OK);
    kiln_error err = {0};
    assert_int_equal(kiln_graph_infer_shapes(g, &err), KILN_OK);
    char path[512];
    snprintf(path, sizeof path, "%s/empty.so", g_dir);
    kiln_compile_options opts = {.jobs = 2};
    if (kiln_compile(g, &opts, path, &err) != KILN_OK)
        fail_msg("compile: %s", err.msg);
    kiln_module *m = NULL;
    assert_int_equal(kiln_module_load(path, NULL, &m, &err), KILN_OK);
    kiln_tensor t0, t1;
    assert_int_equal(kiln_tensor_alloc(&t0, KILN_DTYPE_FLOAT32, &(kiln_shape){2, {2, 0}}, &err), KILN_OK);
    assert_int_equal(kiln_tensor_alloc(&t1, KILN_DTYPE_FLOAT32, &(kiln_shape){4, {0, 8, 5, 5}}, &err), KILN_OK);
    assert_int_equal(kiln_module_set_input(m, 0, &t0, &err), KILN_OK);
    assert_int_equal(kiln_module_set_input(m, 1, &t1, &err), KILN_OK);
    assert_int_equal(kiln_module_run(m, &err), KILN_OK);
    const kiln_tensor *y = kiln_module_output(m, 0), *z = kiln_module_output(m, 1);
    assert_int_equal(kiln_shape_numel(&y->shape), 8);
    for (int i = 0; i < 8; i++)
        assert_true(((const float *)y->data)[i] == 0.0f); /* a sum over nothing */
    assert_int_equal(kiln_shape_numel(&z->shape), 0);
    assert_int_equal(z->shape.dims[1], 16);
    kiln_tensor_release(&t0);
    kiln_tensor_release(&t1);
    kiln_module_destroy(m);
    kiln_graph_destroy(g);
}

/* SiLU after a dense layer's bias: y = a * sigmoid(a), a = x W + b. The
 * fuse pass read the group of nodes it had not visited yet from
 * uninitialized memory, so Sigmoid could join the dense group while Mul,
 * outside it, still read a (internal, no storage): "value 'a' has no
 * storage". */
static void test_silu_after_bias(void **state)
{
    (void)state;
    kiln_graph *g = NULL;
    assert_int_equal(kiln_graph_create(&g), KILN_OK);
    int x = kiln_graph_add_input(g, "x", KILN_DTYPE_FLOAT32, &(kiln_shape){2, {4, 8}});
    static float wd[8 * 16], bd[16];
    for (int i = 0; i < 8 * 16; i++)
        wd[i] = (float)((i * 37) % 11) / 11.0f - 0.5f;
    for (int i = 0; i < 16; i++)
        bd[i] = (float)i / 16.0f - 0.5f;
    int w = kiln_graph_add_const(g, "W", KILN_DTYPE_FLOAT32, &(kiln_shape){2, {8, 16}}, wd);
    int b = kiln_graph_add_const(g, "B", KILN_DTYPE_FLOAT32, &(kiln_shape){1, {16}}, bd);
    int mm = kiln_graph_node_output(g, kiln_graph_add_node(g, KILN_OP_MATMUL, "mm", (int[]){x, w}, 2, 1), 0);
    int a = kiln_graph_node_output(g, kiln_graph_add_node(g, KILN_OP_ADD, "a", (int[]){mm, b}, 2, 1), 0);
    int sg = kiln_graph_node_output(g, kiln_graph_add_node(g, KILN_OP_SIGMOID, "s", &a, 1, 1), 0);
    int y = kiln_graph_node_output(g, kiln_graph_add_node(g, KILN_OP_MUL, "y", (int[]){a, sg}, 2, 1), 0);
    assert_int_equal(kiln_graph_add_output(g, y), KILN_OK);
    kiln_error err = {0};
    assert_int_equal(kiln_graph_infer_shapes(g, &err), KILN_OK);
    ct_check_graph(g, g_dir, "silu", 0, 3, 1e-5, 1e-6);
    kiln_graph_destroy(g);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/kiln_test_driver_%d", (int)getpid());
    kiln_error err = {0};
    if (kiln_mkdirs(g_dir, &err) != KILN_OK)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stages_and_explicit_config),
        cmocka_unit_test(test_records),
        cmocka_unit_test(test_default_record_hits_cache),
        cmocka_unit_test(test_empty_tensors),
        cmocka_unit_test(test_silu_after_bias),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kiln_rmtree(g_dir);
    return rc;
}
