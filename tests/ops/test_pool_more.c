/* tests/ops/test_pool_more.c: MaxPool's Indices output (row-major and
 * storage_order=1, with batch/channel offsets), MaxPool on uint8, int8 and
 * float64, LpPool (p = 1, 2, 3 with padding) and GlobalMaxPool, all against
 * hand-computed values. */
#include "nn_run.h"

static void test_maxpool_indices(void **state)
{
    (void)state;
    /* 1x1x5x5 = 1..25, kernel 2, stride 2 (ONNX's documented example) */
    float x[25];
    for (int i = 0; i < 25; i++)
        x[i] = (float)(i + 1);
    static const int64_t k2[2] = {2, 2};
    for (int order = 0; order < 2; order++) {
        nr_in in = nr_f32(ks(4, 1, 1, 5, 5), x);
        nr t = nr_build(KILN_OP_MAXPOOL, 1, &in, 2);
        kiln_node_set_ints(t.g, t.node, "kernel_shape", k2, 2);
        kiln_node_set_ints(t.g, t.node, "strides", k2, 2);
        kiln_node_set_int(t.g, t.node, "storage_order", order);
        nr_run(&t);
        static const float wy[4] = {7, 9, 17, 19};
        static const int64_t row[4] = {6, 8, 16, 18}, col[4] = {6, 16, 8, 18};
        assert_allclose(t.out[0].data, wy, 4, 0, 0);
        assert_int_equal(t.out[1].dtype, KILN_DTYPE_INT64);
        const int64_t *ind = t.out[1].data;
        for (int i = 0; i < 4; i++)
            assert_int_equal(ind[i], order ? col[i] : row[i]);
        nr_free(&t);
    }
    /* two channels, 1-D, pads: indices include the channel offset; ties keep
     * the first maximum */
    static const float x2[8] = {3, 1, 3, 2, 0, 5, 5, 4};
    nr_in in = nr_f32(ks(3, 1, 2, 4), x2);
    nr t = nr_build(KILN_OP_MAXPOOL, 1, &in, 2);
    static const int64_t k3[1] = {3}, p11[2] = {1, 1};
    kiln_node_set_ints(t.g, t.node, "kernel_shape", k3, 1);
    kiln_node_set_ints(t.g, t.node, "pads", p11, 2);
    nr_run(&t);
    static const float wy[8] = {3, 3, 3, 3, 5, 5, 5, 5};
    static const int64_t wi[8] = {0, 0, 2, 2, 5, 5, 5, 6};
    assert_allclose(t.out[0].data, wy, 8, 0, 0);
    for (int i = 0; i < 8; i++)
        assert_int_equal(((const int64_t *)t.out[1].data)[i], wi[i]);
    nr_free(&t);
}

static void test_maxpool_types(void **state)
{
    (void)state;
    static const uint8_t xu[6] = {10, 250, 3, 7, 255, 0};
    static const int8_t xi[6] = {-10, -128, 3, 127, -1, -5};
    static const double xd[6] = {0.5, -1.5, 2.25, 1e300, -1e300, 3};
    static const int64_t k2[1] = {2};
    nr_in in = {KILN_DTYPE_UINT8, ks(3, 1, 1, 6), xu};
    nr t = nr_build(KILN_OP_MAXPOOL, 1, &in, 1);
    kiln_node_set_ints(t.g, t.node, "kernel_shape", k2, 1);
    nr_run(&t);
    static const uint8_t wu[5] = {250, 250, 7, 255, 255};
    assert_int_equal(t.out[0].dtype, KILN_DTYPE_UINT8);
    assert_memory_equal(t.out[0].data, wu, 5);
    nr_free(&t);

    in = (nr_in){KILN_DTYPE_INT8, ks(3, 1, 1, 6), xi};
    t = nr_build(KILN_OP_MAXPOOL, 1, &in, 1);
    kiln_node_set_ints(t.g, t.node, "kernel_shape", k2, 1);
    nr_run(&t);
    static const int8_t wi[5] = {-10, 3, 127, 127, -1};
    assert_memory_equal(t.out[0].data, wi, 5);
    nr_free(&t);

    in = (nr_in){KILN_DTYPE_FLOAT64, ks(3, 1, 1, 6), xd};
    t = nr_build(KILN_OP_MAXPOOL, 1, &in, 1);
    kiln_node_set_ints(t.g, t.node, "kernel_shape", k2, 1);
    nr_run(&t);
    static const double wd[5] = {0.5, 2.25, 1e300, 1e300, 3};
    assert_memory_equal(t.out[0].data, wd, sizeof wd);
    nr_free(&t);
}

static void test_lppool(void **state)
{
    (void)state;
    /* 1-D [3, -4, 12], kernel 2, pads 1+1: windows {pad,3} {3,-4} {-4,12} {12,pad} */
    static const float x[3] = {3, -4, 12};
    static const int64_t k2[1] = {2}, p11[2] = {1, 1};
    static const struct {
        int64_t p;
        float want[4];
    } cases[] = {{1, {3, 7, 16, 12}}, {2, {3, 5, 12.649111f, 12}}, {3, {3, 4.4979414f, 12.146356f, 12}}};
    for (size_t i = 0; i < 3; i++) {
        nr_in in = nr_f32(ks(3, 1, 1, 3), x);
        nr t = nr_build(KILN_OP_LPPOOL, 1, &in, 1);
        kiln_node_set_ints(t.g, t.node, "kernel_shape", k2, 1);
        kiln_node_set_ints(t.g, t.node, "pads", p11, 2);
        kiln_node_set_int(t.g, t.node, "p", cases[i].p);
        nr_run(&t);
        nr_expect_shape(&t, 0, ks(3, 1, 1, 4));
        assert_allclose(t.out[0].data, cases[i].want, 4, 1e-5, 0);
        nr_free(&t);
    }
}

static void test_global_maxpool(void **state)
{
    (void)state;
    static const float x[12] = {1, -2, 9, 4, 0, 3, -7, -1, -3, -8, -2, -9};
    nr_in in = nr_f32(ks(4, 1, 2, 2, 3), x);
    nr t = nr_build(KILN_OP_GLOBALMAXPOOL, 1, &in, 1);
    nr_run(&t);
    nr_expect_shape(&t, 0, ks(4, 1, 2, 1, 1));
    static const float want[2] = {9, -1};
    assert_allclose(t.out[0].data, want, 2, 0, 0);
    nr_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_maxpool_indices),
        cmocka_unit_test(test_maxpool_types),
        cmocka_unit_test(test_lppool),
        cmocka_unit_test(test_global_maxpool),
    };
    return cmocka_run_group_tests_name("ops/pool_more", tests, NULL, NULL);
}
