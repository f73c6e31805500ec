/* tests/ops/test_norm.c: the reference BatchNormalization, Softmax,
 * LayerNormalization and ReduceMean against hand-computed values and against
 * formulas evaluated here in double (softmax rows must also sum to 1, and
 * stay finite for large inputs). */
#include "nn_helpers.h"

/* X (1, 2, 2): channel 0 = [1, 3], channel 1 = [2, 6]; scale [2, 1],
 * B [0.5, -1], mean [2, 4], var [4, 16], eps 0: y0 = (x-2)/2*2 + 0.5,
 * y1 = (x-4)/4 - 1 */
static void test_batchnorm_hand(void **state)
{
    (void)state;
    kiln_shape sh[5] = {ks(3, 1, 2, 2), ks(1, 2), ks(1, 2), ks(1, 2), ks(1, 2)};
    nn_graph t = nn_build(KILN_OP_BATCHNORM, 5, sh);
    kiln_node_set_float(t.g, t.node, "epsilon", 0.0f);
    float x[4] = {1, 3, 2, 6}, scale[2] = {2, 1}, b[2] = {0.5f, -1}, mean[2] = {2, 4},
          var[2] = {4, 16};
    float *data[5] = {x, scale, b, mean, var};
    const float want[4] = {-0.5f, 1.5f, -1.5f, -0.5f};
    nn_check(&t, data, sh[0], want, 4, 0, 1e-6);
}

/* (2, 5, 3, 4) against the formula in double; eps < 0: attribute absent
 * (default 1e-5). */
static void batchnorm_case(float eps, uint64_t seed)
{
    const int n = 2, c = 5, h = 3, w = 4;
    kiln_shape sh[5] = {ks(4, n, c, h, w), ks(1, c), ks(1, c), ks(1, c), ks(1, c)};
    nn_graph t = nn_build(KILN_OP_BATCHNORM, 5, sh);
    if (eps >= 0)
        kiln_node_set_float(t.g, t.node, "epsilon", eps);
    double e = eps >= 0 ? (double)eps : 1e-5;
    float *x = nn_random(n * c * h * w, seed, -3, 3), *scale = nn_random(c, seed + 1, 0.5f, 2);
    float *b = nn_random(c, seed + 2, -1, 1), *mean = nn_random(c, seed + 3, -1, 1);
    float *var = nn_random(c, seed + 4, 0.0f, 0.01f); /* small: epsilon matters */
    float *data[5] = {x, scale, b, mean, var};
    int64_t count;
    float *y = nn_run(&t, data, &sh[0], &count);
    float *ref = malloc(sizeof(float) * (size_t)count);
    assert_non_null(ref);
    for (int i = 0; i < count; i++) {
        int ch = (i / (h * w)) % c;
        ref[i] = (float)(((double)x[i] - mean[ch]) / sqrt((double)var[ch] + e) * scale[ch] + b[ch]);
    }
    assert_allclose(y, ref, count, 1e-5, 1e-5);
    free(ref);
    free(y);
    free(x);
    free(scale);
    free(b);
    free(mean);
    free(var);
    nn_free(&t);
}

static void test_batchnorm_random(void **state)
{
    (void)state;
    batchnorm_case(1e-3f, 500);
    batchnorm_case(-1.0f, 510);
}

/* softmax([1, 2, 3]) = e^{0,1,2} / (1 + e + e^2) */
static void test_softmax_hand(void **state)
{
    (void)state;
    kiln_shape xs = ks(1, 3);
    nn_graph t = nn_build(KILN_OP_SOFTMAX, 1, &xs);
    float x[3] = {1, 2, 3};
    float *data[1] = {x};
    const float want[3] = {0.090030573f, 0.244728471f, 0.665240956f};
    nn_check(&t, data, xs, want, 3, 1e-6, 0);
}

/* Softmax of (2, 3, 4) along `axis`, checked against exp/sum in double. */
static void softmax_case(int axis_attr, int axis, float scale, uint64_t seed)
{
    const int64_t dims[3] = {2, 3, 4};
    kiln_shape xs = ks(3, 2, 3, 4);
    nn_graph t = nn_build(KILN_OP_SOFTMAX, 1, &xs);
    if (axis_attr != 99)
        kiln_node_set_int(t.g, t.node, "axis", axis_attr);
    float *x = nn_random(24, seed, -scale, scale);
    float *data[1] = {x};
    int64_t count;
    float *y = nn_run(&t, data, &xs, &count);
    float ref[24];
    int64_t stride = axis == 0 ? 12 : axis == 1 ? 4 : 1;
    for (int i = 0; i < 24; i++) {
        /* the line through i along `axis` starts at i - coord * stride */
        int64_t coord = (i / stride) % dims[axis], start = i - coord * stride;
        /* exp(x - max) / sum in double: the shift keeps exp finite for large x */
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < dims[axis]; j++)
            mx = fmax(mx, x[start + j * stride]);
        for (int64_t j = 0; j < dims[axis]; j++)
            sum += exp((double)x[start + j * stride] - mx);
        ref[i] = (float)(exp((double)x[i] - mx) / sum);
    }
    assert_allclose(y, ref, 24, 1e-5, 1e-7);
    for (int i = 0; i < 24; i++) {
        int64_t coord = (i / stride) % dims[axis];
        if (coord != 0)
            continue;
        double s = 0;
        for (int64_t j = 0; j < dims[axis]; j++) {
            assert_true(isfinite(y[i + j * stride]) && y[i + j * stride] >= 0);
            s += y[i + j * stride];
        }
        assert_true(fabs(s - 1.0) < 1e-5);
    }
    free(y);
    free(x);
    nn_free(&t);
}

static void test_softmax_axes(void **state)
{
    (void)state;
    softmax_case(99, 2, 3.0f, 600); /* default axis -1 */
    softmax_case(-1, 2, 3.0f, 601);
    softmax_case(1, 1, 3.0f, 602);
    softmax_case(-2, 1, 3.0f, 603);
    softmax_case(0, 0, 3.0f, 604);
    softmax_case(-1, 2, 1000.0f, 605); /* large values: stable */
}

/* x = [1, 2, 3, 4]: mean 2.5, variance 1.25; scale [1, 2, 1, 1], B [0, 0, 1, 0] */
static void test_layernorm_hand(void **state)
{
    (void)state;
    kiln_shape sh[3] = {ks(2, 1, 4), ks(1, 4), ks(1, 4)};
    nn_graph t = nn_build(KILN_OP_LAYERNORM, 3, sh);
    kiln_node_set_float(t.g, t.node, "epsilon", 0.0f);
    float x[4] = {1, 2, 3, 4}, s[4] = {1, 2, 1, 1}, b[4] = {0, 0, 1, 0};
    float *data[3] = {x, s, b};
    const float r = 1.0f / sqrtf(1.25f);
    const float want[4] = {-1.5f * r, -0.5f * r * 2, 0.5f * r + 1, 1.5f * r};
    nn_check(&t, data, sh[0], want, 4, 1e-6, 1e-6);
}

/* X (2, 3, 4) normalized over dims axis.. with Scale/B of the normalized
 * shape (or without B), against mean/variance computed here in double. */
static void layernorm_case(int axis, bool with_b, uint64_t seed)
{
    const int64_t dims[3] = {2, 3, 4};
    int64_t rows = 1, size = 1;
    for (int d = 0; d < 3; d++) {
        if (d < axis)
            rows *= dims[d];
        else
            size *= dims[d];
    }
    kiln_shape sh[3] = {ks(3, 2, 3, 4), {.rank = 3 - axis}, {.rank = 3 - axis}};
    for (int d = axis; d < 3; d++)
        sh[1].dims[d - axis] = sh[2].dims[d - axis] = dims[d];
    nn_graph t = nn_build(KILN_OP_LAYERNORM, with_b ? 3 : 2, sh);
    kiln_node_set_int(t.g, t.node, "axis", axis == 2 ? -1 : axis);
    kiln_node_set_float(t.g, t.node, "epsilon", 1e-4f);
    float *x = nn_random(24, seed, -2, 5), *s = nn_random(size, seed + 1, -2, 2);
    float *b = nn_random(size, seed + 2, -1, 1);
    float *data[3] = {x, s, b};
    int64_t count;
    float *y = nn_run(&t, data, &sh[0], &count);
    float ref[24];
    for (int64_t r = 0; r < rows; r++) {
        double mean = 0, var = 0;
        for (int64_t i = 0; i < size; i++)
            mean += x[r * size + i];
        mean /= (double)size;
        for (int64_t i = 0; i < size; i++)
            var += pow(x[r * size + i] - mean, 2);
        var /= (double)size;
        for (int64_t i = 0; i < size; i++)
            ref[r * size + i] = (float)((x[r * size + i] - mean) / sqrt(var + (double)1e-4f) *
                                            s[i] + (with_b ? b[i] : 0.0));
    }
    assert_allclose(y, ref, 24, 1e-5, 1e-5);
    free(y);
    free(x);
    free(s);
    free(b);
    nn_free(&t);
}

static void test_layernorm_axes(void **state)
{
    (void)state;
    layernorm_case(2, true, 700);
    layernorm_case(1, true, 701);
    layernorm_case(0, false, 702);
    layernorm_case(1, false, 703);
}

/* [[1, 2, 3], [4, 5, 6]] */
static void reduce_hand(const int64_t *axes, int n_axes, int keepdims, const kiln_shape *expect,
                        const float *want)
{
    kiln_shape xs = ks(2, 2, 3);
    nn_graph t = nn_build(KILN_OP_REDUCEMEAN, 1, &xs);
    if (n_axes >= 0)
        kiln_node_set_ints(t.g, t.node, "axes", axes, n_axes);
    if (keepdims >= 0)
        kiln_node_set_int(t.g, t.node, "keepdims", keepdims);
    float x[6] = {1, 2, 3, 4, 5, 6};
    float *data[1] = {x};
    nn_check(&t, data, *expect, want, kiln_shape_numel(expect), 1e-6, 0);
}

static void test_reducemean_hand(void **state)
{
    (void)state;
    const int64_t ax1[1] = {1}, ax0[1] = {0}, axm1[1] = {-1}, both[2] = {-1, 0};
    const float rows[2] = {2, 5}, cols[3] = {2.5f, 3.5f, 4.5f}, all[1] = {3.5f};
    kiln_shape k21 = ks(2, 2, 1), k2 = ks(1, 2), k13 = ks(2, 1, 3), k3 = ks(1, 3);
    kiln_shape k11 = ks(2, 1, 1), scalar = ks(0);
    reduce_hand(ax1, 1, -1, &k21, rows); /* keepdims defaults to 1 */
    reduce_hand(ax1, 1, 0, &k2, rows);
    reduce_hand(axm1, 1, 0, &k2, rows);
    reduce_hand(ax0, 1, 1, &k13, cols);
    reduce_hand(ax0, 1, 0, &k3, cols);
    reduce_hand(NULL, -1, 1, &k11, all); /* no axes: all */
    reduce_hand(NULL, -1, 0, &scalar, all);
    reduce_hand(both, 2, 0, &scalar, all);
}

/* (2, 3, 4, 5) over axes {0, 2} and {1, 3}, against sums in double. */
static void test_reducemean_random(void **state)
{
    (void)state;
    const int64_t dims[4] = {2, 3, 4, 5};
    const int64_t sets[2][2] = {{0, 2}, {-3, 3}};
    kiln_shape xs = ks(4, 2, 3, 4, 5);
    float *x = nn_random(120, 800, -1, 1);
    for (int s = 0; s < 2; s++) {
        bool red[4] = {false};
        for (int i = 0; i < 2; i++)
            red[(sets[s][i] + 4) % 4] = true;
        nn_graph t = nn_build(KILN_OP_REDUCEMEAN, 1, &xs);
        kiln_node_set_ints(t.g, t.node, "axes", sets[s], 2);
        kiln_node_set_int(t.g, t.node, "keepdims", s);
        kiln_shape expect = {.rank = 0};
        for (int d = 0; d < 4; d++)
            if (!red[d] || s == 1)
                expect.dims[expect.rank++] = red[d] ? 1 : dims[d];
        float *data[1] = {x};
        int64_t count;
        float *y = nn_run(&t, data, &expect, &count);
        double acc[120] = {0};
        int64_t cnt = 0;
        for (int64_t i = 0; i < 120; i++) {
            int64_t c[4] = {i / 60, (i / 20) % 3, (i / 5) % 4, i % 5}, o = 0;
            for (int d = 0; d < 4; d++)
                if (!red[d])
                    o = o * dims[d] + c[d];
            acc[o] += x[i];
            if (o == 0)
                cnt++;
        }
        float ref[120];
        for (int64_t o = 0; o < count; o++)
            ref[o] = (float)(acc[o] / (double)cnt);
        assert_allclose(y, ref, count, 1e-5, 1e-6);
        free(y);
        nn_free(&t);
    }
    free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batchnorm_hand),
        cmocka_unit_test(test_batchnorm_random),
        cmocka_unit_test(test_softmax_hand),
        cmocka_unit_test(test_softmax_axes),
        cmocka_unit_test(test_layernorm_hand),
        cmocka_unit_test(test_layernorm_axes),
        cmocka_unit_test(test_reducemean_hand),
        cmocka_unit_test(test_reducemean_random),
    };
    return cmocka_run_group_tests_name("ops/norm", tests, NULL, NULL);
}
