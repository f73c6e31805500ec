/* tests/compiler/test_zoo_compile.c: zoo networks compiled end to end (all
 * passes, every template they use, the toolchain, the runtime) against the
 * reference executor, rtol 1e-3 / atol 1e-4. Slow: labelled nosan. */
#include "compiler_test.h"

static char *dir;

static void zoo(const char *name)
{
    kiln_graph *g = NULL;
    kiln_error err = {0};
    if (kiln_zoo_build(name, 0, 0, &g, &err) != KILN_OK)
        fail_msg("%s: %s", name, err.msg);
    ct_check_graph(g, dir, name, 0, 42, 1e-3, 1e-4);
    kiln_graph_destroy(g);
    /* every node of a zoo network has a kernel template: a template that
     * stopped matching would otherwise go unnoticed, its nodes falling back
     * to their (slow) reference kernels */
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.so", dir, name);
    kiln_module *m = NULL;
    if (kiln_module_load(path, NULL, &m, &err) != KILN_OK)
        fail_msg("%s: load failed: %s", name, err.msg);
    for (int i = 0; i < kiln_module_num_steps(m); i++) {
        kiln_step_info si;
        assert_int_equal(kiln_module_step_info(m, i, &si), KILN_OK);
        if (strncmp(si.op, "ref:", 4) == 0)
            fail_msg("%s: step %d '%s' runs its reference kernel (%s)", name, i, si.name, si.op);
    }
    kiln_module_destroy(m);
}

static void test_mlp(void **state)
{
    (void)state;
    zoo("mlp");
}

static void test_squeezenet(void **state)
{
    (void)state;
    zoo("squeezenet-1.1");
}

static void test_mobilenet(void **state)
{
    (void)state;
    zoo("mobilenet-v2");
}

static void test_resnet18(void **state)
{
    (void)state;
    zoo("resnet-18");
}

/* Runs the compiled model at `path` on a fixed input; returns a copy of its
 * first output (*n floats). */
static float *run_so(const char *path, int64_t *n)
{
    kiln_error err = {0};
    kiln_module *m = NULL;
    if (kiln_module_load(path, NULL, &m, &err) != KILN_OK)
        fail_msg("load failed: %s", err.msg);
    kiln_tensor t;
    const char *name;
    kiln_dtype dt;
    kiln_shape s;
    assert_int_equal(kiln_module_input_info(m, 0, &name, &dt, &s), KILN_OK);
    assert_int_equal(kiln_tensor_alloc(&t, KILN_DTYPE_FLOAT32, &s, &err), KILN_OK);
    kt_fill_random(t.data, kiln_shape_numel(&s), 7, -1.0f, 1.0f);
    assert_int_equal(kiln_module_set_input(m, 0, &t, &err), KILN_OK);
    kiln_tensor_release(&t);
    assert_int_equal(kiln_module_run(m, &err), KILN_OK);
    const kiln_tensor *o = kiln_module_output(m, 0);
    *n = kiln_shape_numel(&o->shape);
    float *copy = malloc(sizeof(float) * (size_t)*n);
    assert_non_null(copy);
    memcpy(copy, o->data, sizeof(float) * (size_t)*n);
    kiln_module_destroy(m);
    return copy;
}

/* The weights copied onto huge pages at load (the default for blobs of
 * 2 MiB and more) and read from the .so itself (KILN_HUGE_PAGES=0) give
 * bit-identical outputs. */
static void test_huge_pages(void **state)
{
    (void)state;
    kiln_graph *g = NULL;
    kiln_error err = {0};
    assert_int_equal(kiln_zoo_build("squeezenet-1.1", 0, 0, &g, &err), KILN_OK);
    char path[1024];
    snprintf(path, sizeof path, "%s/huge.so", dir);
    kiln_compile_options opts = {0};
    opts.jobs = 2;
    if (kiln_compile_ex(g, &opts, 0, path, &err) != KILN_OK)
        fail_msg("compile failed: %s", err.msg);
    kiln_graph_destroy(g);
    int64_t n1 = 0, n2 = 0;
    setenv("KILN_HUGE_PAGES", "0", 1);
    float *a = run_so(path, &n1);
    unsetenv("KILN_HUGE_PAGES");
    float *b = run_so(path, &n2);
    assert_int_equal(n1, 1000);
    assert_int_equal(n1, n2);
    assert_memory_equal(a, b, sizeof(float) * (size_t)n1);
    free(a);
    free(b);
}

/* The big ones (minutes with the reference executor): with KILN_TEST_BIG=1,
 * or a comma-separated list of names in KILN_TEST_BIG. */
static void test_big(void **state)
{
    (void)state;
    const char *big = getenv("KILN_TEST_BIG");
    if (!big || !*big) {
        skip();
        return;
    }
    static const char *const names[] = {"resnet-50", "vgg-16", "inception-v3", "vit-b-16"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(big, "1") == 0 || strstr(big, names[i])) {
            fprintf(stderr, "checking %s\n", names[i]);
            zoo(names[i]);
        }
}

int main(void)
{
    dir = kt_tempdir();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp),
        cmocka_unit_test(test_squeezenet),
        cmocka_unit_test(test_mobilenet),
        cmocka_unit_test(test_resnet18),
        cmocka_unit_test(test_huge_pages),
        cmocka_unit_test(test_big),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kt_rmdir(dir);
    free(dir);
    return rc;
}
