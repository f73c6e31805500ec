/* tests/models/test_zoo_run.c: zoo networks built with seeded weights run
 * through the reference executor: outputs are finite, vary, and have a sane
 * spread; the same seed gives bit-identical outputs, another seed different
 * ones. (Label "nosan": too slow under the sanitizers.) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/graph.h"
#include "test_support.h"

/* Builds `name` with weights from `seed`, runs it on a fixed random input and
 * returns a malloc'ed copy of the output (*n elements). */
static float *run_net(const char *name, uint64_t seed, int64_t *n)
{
    kiln_graph *g = NULL;
    kiln_ref_executor *ex = NULL;
    kiln_error err = {0};
    if (kiln_zoo_build(name, seed, 0, &g, &err) != KILN_OK)
        fail_msg("%s: build: %s", name, err.msg);
    if (kiln_ref_executor_create(g, &ex, &err) != KILN_OK)
        fail_msg("%s: executor: %s", name, err.msg);

    kiln_tensor in = {0};
    const char *in_name;
    assert_int_equal(kiln_graph_input_info(g, 0, &in_name, &in.dtype, &in.shape), KILN_OK);
    assert_int_equal(kiln_tensor_alloc(&in, in.dtype, &in.shape, &err), KILN_OK);
    kt_fill_random(in.data, kiln_shape_numel(&in.shape), 1234, -1.0f, 1.0f);
    assert_int_equal(kiln_ref_executor_set_input(ex, 0, &in, &err), KILN_OK);
    kiln_tensor_release(&in);
    if (kiln_ref_executor_run(ex, &err) != KILN_OK)
        fail_msg("%s: run: %s", name, err.msg);

    const kiln_tensor *out = kiln_ref_executor_output(ex, 0);
    assert_non_null(out);
    assert_int_equal(out->dtype, KILN_DTYPE_FLOAT32);
    *n = kiln_shape_numel(&out->shape);
    float *copy = malloc(sizeof(float) * (size_t)*n);
    assert_non_null(copy);
    memcpy(copy, out->data, sizeof(float) * (size_t)*n);
    kiln_ref_executor_destroy(ex);
    kiln_graph_destroy(g);
    return copy;
}

static void check_net(const char *name, int64_t expected_n)
{
    int64_t n = 0, n2 = 0, n3 = 0;
    float *a = run_net(name, 1, &n);
    assert_int_equal(n, expected_n);

    double sum = 0, sq = 0, mn = INFINITY, mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(a[i]))
            fail_msg("%s: output[%lld] = %g", name, (long long)i, (double)a[i]);
        sum += a[i];
        sq += (double)a[i] * a[i];
        mn = a[i] < mn ? a[i] : mn;
        mx = a[i] > mx ? a[i] : mx;
    }
    double mean = sum / (double)n, sd = sqrt(fmax(sq / (double)n - mean * mean, 0.0));
    printf("%-15s mean %.4g  std %.4g  min %.4g  max %.4g\n", name, mean, sd, mn, mx);
    if (!(mx > mn))
        fail_msg("%s: constant output %g", name, mn);
    if (!(sd > 1e-2 && sd < 1e2))
        fail_msg("%s: output standard deviation %g outside [1e-2, 1e2]", name, sd);

    float *b = run_net(name, 1, &n2);
    assert_int_equal(n2, n);
    if (memcmp(a, b, sizeof(float) * (size_t)n) != 0)
        fail_msg("%s: two builds with seed 1 differ", name);
    float *c = run_net(name, 2, &n3);
    assert_int_equal(n3, n);
    if (memcmp(a, c, sizeof(float) * (size_t)n) == 0)
        fail_msg("%s: seeds 1 and 2 give the same output", name);
    free(a);
    free(b);
    free(c);
}

static void test_mlp(void **state)
{
    (void)state;
    check_net("mlp", 10);
}

static void test_squeezenet11(void **state)
{
    (void)state;
    check_net("squeezenet-1.1", 1000);
}

static void test_mobilenet_v2(void **state)
{
    (void)state;
    check_net("mobilenet-v2", 1000);
}

static void test_resnet18(void **state)
{
    (void)state;
    check_net("resnet-18", 1000);
}

/* Same seed => bit-identical constants in every tensor; another seed changes
 * every weight tensor. Checked on the networks too slow to run here. */
static void check_weights(const char *name)
{
    kiln_graph *g1 = NULL, *g2 = NULL, *g3 = NULL;
    assert_int_equal(kiln_zoo_build(name, 99, 0, &g1, NULL), KILN_OK);
    assert_int_equal(kiln_zoo_build(name, 99, 0, &g2, NULL), KILN_OK);
    assert_int_equal(kiln_zoo_build(name, 100, 0, &g3, NULL), KILN_OK);
    assert_int_equal(g1->n_values, g2->n_values);
    assert_int_equal(g1->n_values, g3->n_values);
    for (int i = 0; i < g1->n_values; i++) {
        const kiln_value *a = g1->values[i], *b = g2->values[i], *c = g3->values[i];
        if (a->kind != KILN_VALUE_CONST)
            continue;
        assert_non_null(a->data);
        size_t bytes = (size_t)kiln_shape_numel(&a->shape) * kiln_dtype_size(a->dtype);
        if (memcmp(a->data, b->data, bytes) != 0)
            fail_msg("%s: '%s' differs between two builds with one seed", name, a->name);
        if (a->shape.rank > 0 && memcmp(a->data, c->data, bytes) == 0)
            fail_msg("%s: '%s' is the same under seeds 99 and 100", name, a->name);
        for (size_t k = 0; k < bytes / sizeof(float); k++)
            if (!isfinite(((const float *)a->data)[k]))
                fail_msg("%s: '%s' has a non-finite weight", name, a->name);
    }
    kiln_graph_destroy(g1);
    kiln_graph_destroy(g2);
    kiln_graph_destroy(g3);
}

static void test_weights_deterministic(void **state)
{
    (void)state;
    check_weights("resnet-50");
    check_weights("inception-v3");
    check_weights("vit-b-16");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp),          cmocka_unit_test(test_squeezenet11),
        cmocka_unit_test(test_mobilenet_v2), cmocka_unit_test(test_resnet18),
        cmocka_unit_test(test_weights_deterministic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
