/* tests/ops/test_misc.c: Det, DFT, MaxUnpool and TfIdfVectorizer (ref/misc.c)
 * against values worked out by hand or computed here independently, and
 * their shape inference refusing bad nodes (an error, never a crash). The
 * ONNX conformance models of these ops (tests/onnx-backend) check them
 * against ONNX's own outputs too. */
#include <math.h>

#include "op_harness.h"

static void test_det(void **state)
{
    (void)state;
    /* two 3x3 matrices: a permutation (det -1 after one swap) and a general one */
    static const float x[18] = {0, 1, 0, 1, 0, 0, 0, 0, 1, 2, -1, 0, -1, 2, -1, 0, -1, 2};
    harness h;
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(3, 2, 3, 3), x);
    h_node(&h, KILN_OP_DET);
    const kiln_tensor *y = h_run_ok(&h);
    assert_shape(&y->shape, ks(1, 2));
    assert_float_equal(((float *)y->data)[0], -1, 1e-6);
    assert_float_equal(((float *)y->data)[1], 4, 1e-5); /* tridiagonal 2,-1: n + 1 */
    h_free(&h);
    /* not square: refused */
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(2, 2, 3), x);
    h_node(&h, KILN_OP_DET);
    assert_int_not_equal(h_run(&h), KILN_OK);
    h_free(&h);
}

static void test_dft(void **state)
{
    (void)state;
    /* a real signal of 8: the DFT by its definition, then the inverse of the
     * full spectrum gives the signal back */
    float x[8];
    for (int i = 0; i < 8; i++)
        x[i] = (float)sin(0.7 * i) + 0.25f * (float)i;
    harness h;
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(3, 1, 8, 1), x);
    h_node(&h, KILN_OP_DFT);
    const kiln_tensor *y = h_run_ok(&h);
    assert_shape(&y->shape, ks(3, 1, 8, 2));
    const float *yv = y->data;
    for (int k = 0; k < 8; k++) {
        double re = 0, im = 0;
        for (int t = 0; t < 8; t++) {
            re += x[t] * cos(-2 * M_PI * k * t / 8);
            im += x[t] * sin(-2 * M_PI * k * t / 8);
        }
        assert_float_equal(yv[2 * k], re, 1e-4);
        assert_float_equal(yv[2 * k + 1], im, 1e-4);
    }
    float spec[16];
    memcpy(spec, yv, sizeof spec);
    h_free(&h);
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(3, 1, 8, 2), spec);
    h_node(&h, KILN_OP_DFT);
    set_int(&h, "inverse", 1);
    y = h_run_ok(&h);
    for (int t = 0; t < 8; t++) {
        assert_float_equal(((float *)y->data)[2 * t], x[t], 1e-4);
        assert_float_equal(((float *)y->data)[2 * t + 1], 0, 1e-4);
    }
    h_free(&h);
    /* onesided: 8 / 2 + 1 bins; the axis 0 is the batch: refused */
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(3, 1, 8, 1), x);
    h_node(&h, KILN_OP_DFT);
    set_int(&h, "onesided", 1);
    assert_shape(&h_run_ok(&h)->shape, ks(3, 1, 5, 2));
    h_free(&h);
    h_init(&h);
    h_input(&h, KILN_DTYPE_FLOAT32, ks(3, 1, 8, 1), x);
    h_node(&h, KILN_OP_DFT);
    set_int(&h, "axis", 0);
    assert_int_not_equal(h_run(&h), KILN_OK);
    h_free(&h);
}

static void test_maxunpool(void **state)
{
    (void)state;
    /* 2x2 pooled values at the flat indices MaxPool(2, stride 2) of a 4x4
     * would give; with output_shape 5x5 the 4x4 layout is padded at the end */
    static const float x[4] = {6, 8, 14, 16};
    static const int64_t ix[4] = {5, 7, 13, 15};
    static const int64_t k[2] = {2, 2}, st[2] = {2, 2}, os[4] = {1, 1, 5, 5};
    for (int big = 0; big <= 1; big++) {
        harness h;
        h_init(&h);
        h_input(&h, KILN_DTYPE_FLOAT32, ks(4, 1, 1, 2, 2), x);
        h_input(&h, KILN_DTYPE_INT64, ks(4, 1, 1, 2, 2), ix);
        h_node(&h, KILN_OP_MAXUNPOOL);
        set_ints(&h, "kernel_shape", k, 2);
        set_ints(&h, "strides", st, 2);
        if (big)
            set_ints(&h, "output_shape", os, 4);
        const kiln_tensor *y = h_run_ok(&h);
        int w = big ? 5 : 4;
        assert_shape(&y->shape, ks(4, 1, 1, w, w));
        for (int r = 0; r < w; r++)
            for (int c = 0; c < w; c++) {
                float want = 0;
                for (int i = 0; i < 4; i++)
                    if (ix[i] == r * 4 + c && c < 4 && r < 4)
                        want = x[i];
                assert_float_equal(((float *)y->data)[r * w + c], want, 0);
            }
        h_free(&h);
    }
}

static void test_tfidf(void **state)
{
    (void)state;
    /* tokens 1 2 3 1 2; pool: unigram 1, bigrams (1,2) and (2,3)
     * -> columns 0: "1" x2, 1: "1 2" x2, 2: "2 3" x1 (no skips);
     * with max_skip_count 1 also "1 _ 3" is no pool n-gram, "2 _ 1"... none:
     * skip 1 adds (1,3) (2,1) (3,2): none in the pool, and unigrams once */
    static const int64_t x[5] = {1, 2, 3, 1, 2};
    static const int64_t counts[2] = {0, 1}, idx[3] = {0, 1, 2}, pool[5] = {1, 1, 2, 2, 3};
    static const float weights[3] = {0.5f, 2, 4};
    static const char *const modes[3] = {"TF", "IDF", "TFIDF"};
    static const float want[3][3] = {{2, 2, 1}, {0.5f, 2, 4}, {1, 4, 4}};
    for (int skip = 0; skip <= 1; skip++)
        for (int m = 0; m < 3; m++) {
            harness h;
            h_init(&h);
            h_input(&h, KILN_DTYPE_INT64, ks(1, 5), x);
            int node = h_node(&h, KILN_OP_TFIDFVECTORIZER);
            set_str(&h, "mode", modes[m]);
            set_int(&h, "min_gram_length", 1);
            set_int(&h, "max_gram_length", 2);
            set_int(&h, "max_skip_count", skip);
            set_ints(&h, "ngram_counts", counts, 2);
            set_ints(&h, "ngram_indexes", idx, 3);
            set_ints(&h, "pool_int64s", pool, 5);
            assert_int_equal(kiln_node_set_floats(h.g, node, "weights", weights, 3), KILN_OK);
            const kiln_tensor *y = h_run_ok(&h);
            assert_shape(&y->shape, ks(1, 3));
            for (int c = 0; c < 3; c++)
                assert_float_equal(((float *)y->data)[c], want[m][c], 0);
            h_free(&h);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_det),
        cmocka_unit_test(test_dft),
        cmocka_unit_test(test_maxunpool),
        cmocka_unit_test(test_tfidf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
