/* tests/kernels/test_dense_kernels.c: the dense / GEMM template
 * (codegen/c/kernels/kiln_kernels_dense.h) against explicit loops in double
 * on random shapes: m from 1 (GEMV) up, k and n not multiples of the block
 * (masked last block), blocks 16 (AVX-512), 8 (AVX2) and others (portable),
 * every epilogue combination, random knobs and task splits. */
#include "../ops/nn_helpers.h"
#include "kernel_test_util.h"

KT_BEGIN_SIMD
#include "codegen/c/kernels/kiln_kernels_dense.h"

KT_TEMPLATE_RUN(dense, kiln_dense_params, kiln_dense_run)

static void check_dense(kiln_dense_params p, kt_rng *r, int knobs)
{
    assert_true(kiln_dense_supported(&p));
    kiln_dense_default_params(&p, 96 << 10, 4 << 20, kt_int(r, 1, 3));
    if (knobs) {
        p.m_tile = kt_int(r, 0, 17);
        p.n_tile = kt_int(r, 0, 5);
        p.m_group = kt_int(r, 0, p.m + 1);
        p.n_group = kt_int(r, 0, (p.n + p.nb - 1) / p.nb + 1);
    }
    int64_t M = p.m, K = p.k, N = p.n;
    float *x = kt_rand_buf(r, M * K), *w = kt_rand_buf(r, N * K), *b = kt_rand_buf(r, N);
    float *res = kt_rand_buf(r, M * N);
    float *ref = kt_alloc(M * N);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = (p.epilogue & KILN_EPI_BIAS) ? b[j] : 0.0;
            for (int64_t k = 0; k < K; k++)
                s += (double)x[i * K + k] * w[j * K + k];
            ref[i * N + j] = (float)s;
        }
    kt_epilogue(ref, res, M * N, p.epilogue, p.clip_min, p.clip_max);
    float *wp = kt_nan_buf(kiln_dense_packed_weight_floats(&p));
    kiln_dense_pack_weights(&p, w, wp);
    /* a guard after Y catches stores past the last (masked) column */
    float *y = kt_nan_buf(M * N + 16);
    for (int i = 0; i < 16; i++)
        y[M * N + i] = 1234.0f;
    void *ws = malloc(kiln_dense_workspace_bytes(&p));
    dense_case c = {p, x, wp, b, res, y, ws};
    kt_split(r, kt_int(r, 0, 3), kiln_dense_tasks(&p), dense_range, &c);
    if (getenv("KT_VERBOSE"))
        printf("dense m%d k%d n%d nb%d epi%d T%d O%d mg%d ng%d\n", p.m, p.k, p.n, p.nb,
               p.epilogue, p.m_tile, p.n_tile, p.m_group, p.n_group);
    assert_allclose(y, ref, M * N, 1e-4, 1e-5 * K + 1e-4);
    for (int i = 0; i < 16; i++)
        assert_true(y[M * N + i] == 1234.0f);
    free(ws);
    free(y);
    free(wp);
    free(ref);
    free(res);
    free(b);
    free(w);
    free(x);
}

static void random_dense(kt_rng *r, int nb, int knobs)
{
    kiln_dense_params p = {0};
    p.m = kt_int(r, 0, 3) == 0 ? 1 : kt_int(r, 1, 40);
    p.k = kt_int(r, 1, 300);
    p.n = kt_int(r, 1, 100);
    p.nb = nb;
    p.epilogue = kt_int(r, 0, 15);
    p.clip_min = -0.5f;
    p.clip_max = 0.5f;
    check_dense(p, r, knobs);
}

KT_RANDOM_TESTS(test_dense_random, random_dense, 0x9191ull, 0x9292ull, 0x9393ull, 0x9494ull, 7)

/* classifier heads (batch 1) and a ViT-like projection */
static void test_dense_network_shapes(void **state)
{
    (void)state;
    kt_rng r = {5};
    static const int shapes[][3] = {{1, 2048, 1000}, {1, 1280, 1000}, {2, 512, 1000},
                                    {50, 768, 200}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        kiln_dense_params p = {.m = shapes[i][0], .k = shapes[i][1], .n = shapes[i][2], .nb = 16,
                               .epilogue = KILN_EPI_BIAS | KILN_EPI_RELU};
        check_dense(p, &r, 0);
    }
}

KT_END_SIMD

int main(void)
{
    const struct CMUnitTest tests[] = {
        KT_RANDOM_UNIT_TESTS(test_dense_random),
        cmocka_unit_test(test_dense_network_shapes),
    };
    return KT_RUN_TESTS(tests);
}
