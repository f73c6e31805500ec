/* tests/kernels/test_dense_tile_slow.c: a dense kernel whose tile-width
 * sets (KILN_DENSE_TILES_T / _O, which generated code defines from
 * kiln_dense_tile_sets) miss the widths its loops take still computes the
 * right result, on the portable fallback (kiln_dense_tile_slow), for each
 * microkernel family. Here the sets hold only 1-row, 1-block tiles, so every
 * other tile takes the fallback. test_dense_kernels.c checks that the sets
 * codegen computes hold every width the loops take. */
#include "../ops/nn_helpers.h"
#include "kernel_test_util.h"

static long kt_dense_slow_tiles;
#define KILN_DENSE_COUNT_SLOW kt_dense_slow_tiles
#define KILN_DENSE_TILES_T (1u << 1)
#define KILN_DENSE_TILES_O (1u << 1)

KT_BEGIN_SIMD
#include "codegen/c/kernels/kiln_kernels_dense.h"

static void check_slow(int nb, int m, int k, int n, int order)
{
    kt_rng r = {(uint64_t)(nb * 1000 + m)};
    kiln_dense_params p = {.m = m, .k = k, .n = n, .nb = nb, .alpha = 1.0f, .beta = 1.0f,
                           .epilogue = KILN_EPI_BIAS | KILN_EPI_RESIDUAL};
    kiln_dense_default_params(&p, 96 << 10, 4 << 20, 2);
    p.order = order;
    float *x = kt_rand_buf(&r, (int64_t)m * k), *w = kt_rand_buf(&r, (int64_t)n * k);
    float *b = kt_rand_buf(&r, n), *res = kt_rand_buf(&r, (int64_t)m * n);
    float *ref = kt_alloc((int64_t)m * n), *y = kt_nan_buf((int64_t)m * n);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = b[j] + (double)res[i * n + j];
            for (int kk = 0; kk < k; kk++)
                s += (double)x[i * k + kk] * w[j * k + kk];
            ref[i * n + j] = (float)s;
        }
    float *wp = kt_nan_buf(kiln_dense_packed_weight_floats(&p));
    kiln_dense_pack_weights(&p, w, wp);
    kt_dense_slow_tiles = 0;
    kiln_dense_run(&p, x, wp, b, res, y, 0, kiln_dense_tasks(&p));
    assert_allclose(y, ref, (int64_t)m * n, 1e-4, 1e-5 * k + 1e-4);
    /* only where the microkernels are SIMD does the dispatch use the sets */
    if (kiln_conv_isa(nb) != KILN_ISA_PORTABLE)
        assert_true(kt_dense_slow_tiles > 0);
    free(wp);
    free(y);
    free(ref);
    free(res);
    free(b);
    free(w);
    free(x);
}

static void test_dense_tile_slow(void **state)
{
    (void)state;
    static const int shapes[][3] = {{13, 40, 37}, {1, 300, 70}, {29, 17, 100}};
    for (int nb = 8; nb <= 16; nb += 8)
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            for (int order = 0; order < 2; order++)
                check_slow(nb, shapes[i][0], shapes[i][1], shapes[i][2], order);
}

KT_END_SIMD

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dense_tile_slow),
    };
    return KT_RUN_TESTS(tests);
}
