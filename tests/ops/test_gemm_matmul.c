/* tests/ops/test_gemm_matmul.c: the reference Gemm against hand-computed
 * products and against explicit triple loops over explicitly transposed
 * copies (transA/transB, alpha/beta, C of every broadcastable shape, no C);
 * MatMul against hand values and a per-output-element reference that maps
 * output indices to operand indices (1-D operands, batched, broadcast). */
#include "nn_helpers.h"

/* A (2x3) = [[1,2,3],[4,5,6]], B (3x2) = [[7,8],[9,10],[11,12]]:
 * AB = [[58, 64], [139, 154]]; with alpha 2, beta -1, C = [1, 2]:
 * [[115, 126], [277, 306]] */
static void test_gemm_hand(void **state)
{
    (void)state;
    kiln_shape sh[3] = {ks(2, 2, 3), ks(2, 3, 2), ks(1, 2)};
    nn_graph t = nn_build(KILN_OP_GEMM, 3, sh);
    kiln_node_set_float(t.g, t.node, "alpha", 2.0f);
    kiln_node_set_float(t.g, t.node, "beta", -1.0f);
    float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {7, 8, 9, 10, 11, 12}, c[2] = {1, 2};
    float *data[3] = {a, b, c};
    const float want[4] = {115, 126, 277, 306};
    nn_check(&t, data, ks(2, 2, 2), want, 4, 0, 1e-5);
}

/* Same product with A and B stored transposed: A^T (3x2), B^T (2x3). */
static void test_gemm_hand_transposed(void **state)
{
    (void)state;
    kiln_shape sh[2] = {ks(2, 3, 2), ks(2, 2, 3)};
    nn_graph t = nn_build(KILN_OP_GEMM, 2, sh);
    kiln_node_set_int(t.g, t.node, "transA", 1);
    kiln_node_set_int(t.g, t.node, "transB", 1);
    float at[6] = {1, 4, 2, 5, 3, 6}, bt[6] = {7, 9, 11, 8, 10, 12};
    float *data[2] = {at, bt};
    const float want[4] = {58, 64, 139, 154};
    nn_check(&t, data, ks(2, 2, 2), want, 4, 0, 1e-5);
}

/* Y = alpha * A' B' + beta * C by triple loop, with A', B' built as explicit
 * (M x K), (K x N) copies and C broadcast by explicit index rules. */
static void gemm_case(int64_t m, int64_t n, int64_t k, int ta, int tb, float alpha, float beta,
                      const kiln_shape *cshape, uint64_t seed)
{
    kiln_shape sh[3] = {ta ? ks(2, (int)k, (int)m) : ks(2, (int)m, (int)k),
                        tb ? ks(2, (int)n, (int)k) : ks(2, (int)k, (int)n),
                        cshape ? *cshape : (kiln_shape){.rank = -1}};
    nn_graph t = nn_build(KILN_OP_GEMM, cshape ? 3 : 2, sh);
    kiln_node_set_int(t.g, t.node, "transA", ta);
    kiln_node_set_int(t.g, t.node, "transB", tb);
    kiln_node_set_float(t.g, t.node, "alpha", alpha);
    kiln_node_set_float(t.g, t.node, "beta", beta);
    float *a = nn_random(m * k, seed, -1, 1), *b = nn_random(k * n, seed + 1, -1, 1);
    int64_t nc = cshape ? kiln_shape_numel(cshape) : 1;
    float *c = nn_random(nc, seed + 2, -1, 1);
    float *ap = malloc(sizeof(float) * (size_t)(m * k)), *bp = malloc(sizeof(float) * (size_t)(k * n));
    assert_non_null(ap);
    assert_non_null(bp);
    for (int64_t i = 0; i < m; i++)
        for (int64_t p = 0; p < k; p++)
            ap[i * k + p] = ta ? a[p * m + i] : a[i * k + p];
    for (int64_t p = 0; p < k; p++)
        for (int64_t j = 0; j < n; j++)
            bp[p * n + j] = tb ? b[j * k + p] : b[p * n + j];
    float *ref = malloc(sizeof(float) * (size_t)(m * n));
    assert_non_null(ref);
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < n; j++) {
            double acc = 0;
            for (int64_t p = 0; p < k; p++)
                acc += (double)ap[i * k + p] * bp[p * n + j];
            double cv = 0;
            if (cshape) {
                int r = cshape->rank;
                int64_t ci = r == 2 && cshape->dims[0] != 1 ? i : 0;
                int64_t cj = r >= 1 && cshape->dims[r - 1] != 1 ? j : 0;
                int64_t row_len = r >= 1 ? cshape->dims[r - 1] : 1;
                cv = c[ci * row_len + cj];
            }
            ref[i * n + j] = (float)(alpha * acc + beta * cv);
        }
    }
    float *data[3] = {a, b, c};
    kiln_shape expect = ks(2, (int)m, (int)n);
    int64_t count;
    float *y = nn_run(&t, data, &expect, &count);
    assert_allclose(y, ref, count, 1e-4, 1e-5);
    free(y);
    free(ref);
    free(ap);
    free(bp);
    free(a);
    free(b);
    free(c);
    nn_free(&t);
}

static void test_gemm_transposes(void **state)
{
    (void)state;
    kiln_shape cfull = ks(2, 5, 7);
    uint64_t seed = 200;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            gemm_case(5, 7, 9, ta, tb, 1.0f, 1.0f, &cfull, seed += 3);
    kiln_shape c2 = ks(2, 3, 17);
    gemm_case(3, 17, 33, 0, 1, 0.5f, 2.0f, &c2, 220);
}

static void test_gemm_broadcast_c(void **state)
{
    (void)state;
    const kiln_shape cs[] = {ks(2, 4, 6), ks(1, 6), ks(2, 1, 6), ks(2, 4, 1), ks(2, 1, 1),
                             ks(1, 1), ks(0)};
    for (int i = 0; i < (int)(sizeof cs / sizeof cs[0]); i++)
        gemm_case(4, 6, 5, i & 1, (i >> 1) & 1, 1.5f, -0.75f, &cs[i], 300 + 3 * (uint64_t)i);
    gemm_case(4, 6, 5, 0, 0, 2.0f, 1.0f, NULL, 330); /* no C */
    kiln_shape c1 = ks(1, 6);
    gemm_case(1, 6, 11, 0, 1, 1.0f, 0.0f, &c1, 340); /* beta 0 */
}

/* Reference numpy matmul: each output element maps to its operand indices
 * (batch dims right-aligned, extent-1 dims broadcast). */
static void matmul_case(const kiln_shape *as, const kiln_shape *bs, const kiln_shape *expect,
                        uint64_t seed)
{
    kiln_shape sh[2] = {*as, *bs};
    nn_graph t = nn_build(KILN_OP_MATMUL, 2, sh);
    float *a = nn_random(kiln_shape_numel(as), seed, -1, 1);
    float *b = nn_random(kiln_shape_numel(bs), seed + 1, -1, 1);
    float *data[2] = {a, b};
    int64_t count;
    float *y = nn_run(&t, data, expect, &count);
    /* promoted shapes */
    kiln_shape pa = *as, pb = *bs;
    if (pa.rank == 1) {
        pa = ks(2, 1, (int)as->dims[0]);
    }
    if (pb.rank == 1) {
        pb = ks(2, (int)bs->dims[0], 1);
    }
    int64_t m = pa.dims[pa.rank - 2], k = pa.dims[pa.rank - 1], n = pb.dims[pb.rank - 1];
    int nb = (pa.rank > pb.rank ? pa.rank : pb.rank) - 2;
    int64_t bdims[8];
    int64_t batches = 1;
    for (int i = 0; i < nb; i++) {
        int ia = i - (nb - (pa.rank - 2)), ib = i - (nb - (pb.rank - 2));
        int64_t da = ia >= 0 ? pa.dims[ia] : 1, db = ib >= 0 ? pb.dims[ib] : 1;
        bdims[i] = da > db ? da : db;
        batches *= bdims[i];
    }
    assert_int_equal(count, batches * m * n);
    float *ref = malloc(sizeof(float) * (size_t)count);
    assert_non_null(ref);
    for (int64_t o = 0; o < count; o++) {
        int64_t j = o % n, i = (o / n) % m, bt = o / (m * n);
        int64_t idx[8];
        for (int d = nb - 1; d >= 0; d--) {
            idx[d] = bt % bdims[d];
            bt /= bdims[d];
        }
        int64_t aoff = 0, boff = 0;
        for (int d = 0; d < nb; d++) {
            int ia = d - (nb - (pa.rank - 2)), ib = d - (nb - (pb.rank - 2));
            if (ia >= 0)
                aoff = aoff * pa.dims[ia] + (pa.dims[ia] == 1 ? 0 : idx[d]);
            if (ib >= 0)
                boff = boff * pb.dims[ib] + (pb.dims[ib] == 1 ? 0 : idx[d]);
        }
        double acc = 0;
        for (int64_t p = 0; p < k; p++)
            acc += (double)a[(aoff * m + i) * k + p] * b[(boff * k + p) * n + j];
        ref[o] = (float)acc;
    }
    assert_allclose(y, ref, count, 1e-4, 1e-5);
    free(ref);
    free(y);
    free(a);
    free(b);
    nn_free(&t);
}

/* [[1, 2], [3, 4]] x [[5, 6], [7, 8]] = [[19, 22], [43, 50]]; [1, 2] . [3, 4] = 11 */
static void test_matmul_hand(void **state)
{
    (void)state;
    kiln_shape sh[2] = {ks(2, 2, 2), ks(2, 2, 2)};
    nn_graph t = nn_build(KILN_OP_MATMUL, 2, sh);
    float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
    float *data[2] = {a, b};
    const float want[4] = {19, 22, 43, 50};
    nn_check(&t, data, ks(2, 2, 2), want, 4, 0, 1e-6);

    kiln_shape v[2] = {ks(1, 2), ks(1, 2)};
    t = nn_build(KILN_OP_MATMUL, 2, v);
    float u[2] = {1, 2}, w[2] = {3, 4};
    float *d2[2] = {u, w};
    nn_check(&t, d2, ks(0), (const float[]){11}, 1, 0, 0);
}

static void test_matmul_1d(void **state)
{
    (void)state;
    kiln_shape a = ks(1, 5), b = ks(2, 5, 3), e = ks(1, 3);
    matmul_case(&a, &b, &e, 400);
    kiln_shape a2 = ks(2, 4, 5), b2 = ks(1, 5), e2 = ks(1, 4);
    matmul_case(&a2, &b2, &e2, 402);
    kiln_shape a3 = ks(1, 5), b3 = ks(3, 2, 5, 3), e3 = ks(2, 2, 3); /* 1-D x batched */
    matmul_case(&a3, &b3, &e3, 404);
    kiln_shape a4 = ks(3, 2, 4, 5), b4 = ks(1, 5), e4 = ks(2, 2, 4);
    matmul_case(&a4, &b4, &e4, 406);
}

static void test_matmul_batched_broadcast(void **state)
{
    (void)state;
    kiln_shape a = ks(4, 2, 3, 4, 5), b = ks(4, 2, 3, 5, 6), e = ks(4, 2, 3, 4, 6);
    matmul_case(&a, &b, &e, 410);
    kiln_shape a2 = ks(4, 3, 1, 4, 5), b2 = ks(3, 2, 5, 6), e2 = ks(4, 3, 2, 4, 6);
    matmul_case(&a2, &b2, &e2, 412);
    kiln_shape a3 = ks(2, 4, 5), b3 = ks(3, 2, 5, 6), e3 = ks(3, 2, 4, 6);
    matmul_case(&a3, &b3, &e3, 414);
    kiln_shape a4 = ks(3, 2, 7, 9), b4 = ks(2, 9, 17), e4 = ks(3, 2, 7, 17);
    matmul_case(&a4, &b4, &e4, 416);
    kiln_shape a5 = ks(3, 1, 3, 4), b5 = ks(3, 5, 4, 2), e5 = ks(3, 5, 3, 2);
    matmul_case(&a5, &b5, &e5, 418);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_hand),
        cmocka_unit_test(test_gemm_hand_transposed),
        cmocka_unit_test(test_gemm_transposes),
        cmocka_unit_test(test_gemm_broadcast_c),
        cmocka_unit_test(test_matmul_hand),
        cmocka_unit_test(test_matmul_1d),
        cmocka_unit_test(test_matmul_batched_broadcast),
    };
    return cmocka_run_group_tests_name("ops/gemm_matmul", tests, NULL, NULL);
}
