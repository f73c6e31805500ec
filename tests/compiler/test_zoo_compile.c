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
        cmocka_unit_test(test_big),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kt_rmdir(dir);
    free(dir);
    return rc;
}
