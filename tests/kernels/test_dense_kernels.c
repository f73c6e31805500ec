/* tests/kernels/test_dense_kernels.c: the dense / GEMM kernel header
 * (codegen/c/kernels/kiln_kernels_dense.h), the one the dense template
 * compiles into models, against explicit loops in double on random shapes:
 * m from 1 (GEMV, with its split-k sums) up, k and n not multiples of the
 * block (masked last block), blocks 16 (AVX-512), 8 (AVX2) and others
 * (portable), weights given [n][k] or [k][n], alpha and beta, every bias kind
 * (per column, scalar, per row, full), every epilogue flag combination, the
 * epilogue callback (each output visited exactly once, at its position),
 * random knobs and task splits; denormal operands (flushed, the caller's
 * MXCSR restored). */
#include "../ops/nn_helpers.h"
#include "kernel_test_util.h"

/* The tile widths the loops take (bit k: a width of k), per case: each must
 * be in the sets generated code instantiates (kiln_dense_tile_sets), or
 * the kernel would run it on the slow portable fallback. The dispatch
 * itself instantiates every width here (compile-time sets, so this file's
 * compile does not grow a slow branch per call). */
static uint32_t kt_dense_seen_t, kt_dense_seen_o;
#define KILN_DENSE_TILE_SEEN(T, O) (kt_dense_seen_t |= 1u << (T), kt_dense_seen_o |= 1u << (O))

KT_BEGIN_SIMD
#include "codegen/c/kernels/kiln_kernels_dense.h"

/* The callback under test: v = v * 0.5 - (flat index % 7) / 8, and a visit
 * count per output. */
typedef struct epi_ctx {
    int64_t n;
    int *visits;
} epi_ctx;

static float epi_value(float v, int64_t idx)
{
    return v * 0.5f - (float)(idx % 7) * 0.125f;
}

static void epi_cb(void *ctx, float *y, int64_t ldy, int64_t row0, int rows, int64_t col0,
                   int cols)
{
    epi_ctx *e = ctx;
    assert_true(ldy == e->n && rows >= 1 && cols >= 1 && col0 + cols <= e->n);
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++) {
            int64_t idx = (row0 + r) * ldy + col0 + j;
            e->visits[idx]++;
            y[r * ldy + j] = epi_value(y[r * ldy + j], idx);
        }
}

typedef struct dense_case {
    kiln_dense_params p;
    const float *x, *w, *bias, *res;
    float *y;
    epi_ctx *epi;
} dense_case;

static void dense_range(void *ctx, int64_t b, int64_t e)
{
    dense_case *c = ctx;
    if (c->epi)
        kiln_dense_run_epi(&c->p, c->x, c->w, c->bias, c->res, c->y, b, e, epi_cb, c->epi);
    else
        kiln_dense_run(&c->p, c->x, c->w, c->bias, c->res, c->y, b, e);
}

static void check_dense(kiln_dense_params p, kt_rng *r, int knobs, int with_epi)
{
    assert_true(kiln_dense_supported(&p));
    kiln_dense_default_params(&p, 96 << 10, 4 << 20, kt_int(r, 1, 3));
    if (knobs) {
        p.m_tile = kt_int(r, 0, 17);
        p.n_tile = kt_int(r, 0, 5);
        p.m_group = kt_int(r, 0, p.m + 1);
        p.n_group = kt_int(r, 0, (p.n + p.nb - 1) / p.nb + 1);
        p.order = kt_int(r, 0, 1); /* row tiles outer, or column tiles with the prefetch */
        /* K passes half the time: any slice length, the last one shorter */
        p.k_block = kt_int(r, 0, 1) ? kt_int(r, 1, p.k) : 0;
    }
    int64_t M = p.m, K = p.k, N = p.n;
    int64_t nbias = p.bias_kind == KILN_DENSE_BIAS_COL      ? N
                    : p.bias_kind == KILN_DENSE_BIAS_SCALAR ? 1
                    : p.bias_kind == KILN_DENSE_BIAS_ROW    ? M
                                                            : M * N;
    /* w: [n][k]; given to the packing as is or transposed ([k][n]) */
    float *x = kt_rand_buf(r, M * K), *w = kt_rand_buf(r, N * K), *b = kt_rand_buf(r, nbias);
    float *wt = kt_alloc(N * K);
    for (int64_t j = 0; j < N; j++)
        for (int64_t k = 0; k < K; k++)
            wt[k * N + j] = w[j * K + k];
    float *res = kt_rand_buf(r, M * N);
    float *ref = kt_alloc(M * N);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0.0;
            for (int64_t k = 0; k < K; k++)
                s += (double)x[i * K + k] * w[j * K + k];
            s *= p.alpha;
            if (p.epilogue & KILN_EPI_BIAS) {
                int64_t bi = p.bias_kind == KILN_DENSE_BIAS_COL      ? j
                             : p.bias_kind == KILN_DENSE_BIAS_SCALAR ? 0
                             : p.bias_kind == KILN_DENSE_BIAS_ROW    ? i
                                                                     : i * N + j;
                s += (double)p.beta * b[bi];
            }
            ref[i * N + j] = (float)s;
        }
    kt_epilogue(ref, res, M * N, p.epilogue, p.clip_min, p.clip_max);
    if (with_epi)
        for (int64_t i = 0; i < M * N; i++)
            ref[i] = epi_value(ref[i], i);
    float *wp = kt_nan_buf(kiln_dense_packed_weight_floats(&p));
    kiln_dense_pack_weights(&p, p.w_kn ? wt : w, wp);
    /* a guard after Y catches stores past the last (masked) column */
    float *y = kt_nan_buf(M * N + 16);
    for (int i = 0; i < 16; i++)
        y[M * N + i] = 1234.0f;
    int *visits = calloc((size_t)(M * N), sizeof(int));
    epi_ctx ec = {N, visits};
    dense_case c = {p, x, wp, b, res, y, with_epi ? &ec : NULL};
    kt_dense_seen_t = kt_dense_seen_o = 0;
    kt_split(r, kt_int(r, 0, 3), kiln_dense_tasks(&p), dense_range, &c);
    uint32_t tm, om;
    kiln_dense_tile_sets(&p, kiln_conv_isa(p.nb), &tm, &om);
    if ((kt_dense_seen_t & ~tm) || (kt_dense_seen_o & ~om))
        fail_msg("m%d n%d nb%d T%d O%d mg%d ng%d: tile widths taken T 0x%x O 0x%x, sets T 0x%x "
                 "O 0x%x", p.m, p.n, p.nb, p.m_tile, p.n_tile, p.m_group, p.n_group,
                 kt_dense_seen_t, kt_dense_seen_o, tm, om);
    if (getenv("KT_VERBOSE"))
        printf("dense m%d k%d n%d nb%d w_kn%d alpha %g epi%d bias %d beta %g cb %d T%d O%d mg%d "
               "ng%d order %d k_block %d\n",
               p.m, p.k, p.n, p.nb, p.w_kn, (double)p.alpha, p.epilogue, p.bias_kind,
               (double)p.beta, with_epi, p.m_tile, p.n_tile, p.m_group, p.n_group, p.order,
               p.k_block);
    assert_allclose(y, ref, M * N, 1e-4, 1e-5 * K + 1e-4);
    for (int i = 0; i < 16; i++)
        assert_true(y[M * N + i] == 1234.0f);
    for (int64_t i = 0; with_epi && i < M * N; i++)
        assert_int_equal(visits[i], 1);
    free(visits);
    free(y);
    free(wp);
    free(ref);
    free(res);
    free(wt);
    free(b);
    free(w);
    free(x);
}

static void random_dense(kt_rng *r, int nb, int knobs)
{
    kiln_dense_params p = {0};
    p.m = kt_int(r, 0, 3) == 0 ? 1 : kt_int(r, 1, 40);
    p.k = kt_int(r, 1, 300);
    p.n = kt_int(r, 0, 3) == 0 ? kt_int(r, 1, 2 * nb) : kt_int(r, 1, 100);
    p.nb = nb;
    p.w_kn = kt_int(r, 0, 1);
    p.alpha = kt_int(r, 0, 1) ? 1.0f : kt_float(r) * 2.0f;
    p.epilogue = kt_int(r, 0, 15);
    p.bias_kind = kt_int(r, 0, 3);
    p.beta = kt_int(r, 0, 1) ? 1.0f : kt_float(r) * 2.0f;
    p.clip_min = -0.5f;
    p.clip_max = 0.5f;
    check_dense(p, r, knobs, kt_int(r, 0, 2) == 0);
}

KT_RANDOM_TESTS(test_dense_random, random_dense, 0x9191ull, 0x9292ull, 0x9393ull, 0x9494ull, 7)

/* the networks' dense layers: classifier heads (batch 1) and ViT-like
 * projections */
static void test_dense_network_shapes(void **state)
{
    (void)state;
    kt_rng r = {5};
    static const int shapes[][3] = {{1, 2048, 1000}, {1, 1280, 1000}, {2, 512, 1000},
                                    {50, 768, 200},  {1, 64, 10},     {1, 784, 128}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        kiln_dense_params p = {.m = shapes[i][0], .k = shapes[i][1], .n = shapes[i][2], .nb = 16,
                               .alpha = 1.0f, .beta = 1.0f,
                               .epilogue = KILN_EPI_BIAS | KILN_EPI_RELU};
        check_dense(p, &r, 0, (int)(i % 2));
    }
}

/* Denormal X and weights (GELU's tail, tiny trained weights): the kernel
 * runs with flush-to-zero / denormals-are-zero, so they count as 0 (the
 * result is within 1e-30 of the exact one), and the caller's MXCSR is
 * restored, whatever it held. */
static void test_dense_denormals(void **state)
{
    (void)state;
    kiln_dense_params p = {.m = 13, .k = 40, .n = 37, .nb = 16, .w_kn = 1, .alpha = 1.0f,
                           .beta = 1.0f, .epilogue = KILN_EPI_BIAS};
    kiln_dense_default_params(&p, 96 << 10, 4 << 20, 1);
    float x[13 * 40], w[40 * 37], b[37], y[13 * 37], ref[13 * 37];
    for (int i = 0; i < 13 * 40; i++)
        x[i] = i % 3 ? 1e-39f * (float)(i % 7 + 1) : 0.25f * (float)(i % 5) - 0.5f;
    for (int i = 0; i < 40 * 37; i++)
        w[i] = i % 4 ? 0.125f * (float)(i % 9) - 0.5f : -3e-40f;
    for (int j = 0; j < 37; j++)
        b[j] = 0.5f;
    for (int i = 0; i < 13; i++)
        for (int j = 0; j < 37; j++) {
            double s = b[j];
            for (int k = 0; k < 40; k++)
                s += (double)x[i * 40 + k] * w[k * 37 + j];
            ref[i * 37 + j] = (float)s;
        }
    float *wp = kt_alloc(kiln_dense_packed_weight_floats(&p));
    kiln_dense_pack_weights(&p, w, wp);
#if defined(__SSE__) && (defined(__x86_64__) || defined(__i386__))
    const unsigned before = _mm_getcsr();
    kiln_dense_run(&p, x, wp, b, NULL, y, 0, kiln_dense_tasks(&p));
    assert_int_equal(_mm_getcsr(), before);
    _mm_setcsr(before | 0x8040u); /* a caller that had set them keeps them */
    kiln_dense_run(&p, x, wp, b, NULL, y, 0, kiln_dense_tasks(&p));
    assert_int_equal(_mm_getcsr(), before | 0x8040u);
    _mm_setcsr(before);
#else
    kiln_dense_run(&p, x, wp, b, NULL, y, 0, kiln_dense_tasks(&p));
#endif
    assert_allclose(y, ref, 13 * 37, 1e-5, 1e-30);
    free(wp);
}

KT_END_SIMD

int main(void)
{
    const struct CMUnitTest tests[] = {
        KT_RANDOM_UNIT_TESTS(test_dense_random),
        cmocka_unit_test(test_dense_network_shapes),
        cmocka_unit_test(test_dense_denormals),
    };
    return KT_RUN_TESTS(tests);
}
