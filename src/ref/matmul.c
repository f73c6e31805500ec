/* ref/matmul.c: reference Gemm and MatMul.
 *
 * Gemm: Y = alpha * op(A) op(B) + beta * C with op() an optional transpose
 * and C broadcast to (M, N) through zero strides. Each output row is built
 * in place: for B not transposed, row i accumulates op(A)[i,k] * B[k,:] over
 * k (unit-stride inner loop over columns, which gcc vectorizes); for B
 * transposed, each element is the dot product of op(A)'s row with a row of
 * B (both contiguous in memory). Accumulation in float.
 *
 * MatMul: numpy semantics. A 1-D A is a (1, K) matrix and a 1-D B a (K, 1)
 * one (the added dim is absent from the output shape, which does not change
 * the data layout); batch dims broadcast through zero strides. Each batch
 * is a plain row-major (M,K)x(K,N) product with the i-k-j loop order. */
#include "ref/ref.h"

/* Y (m x n) = op(A) op(B), row-major; a_t/b_t select the transposes; lda/ldb
 * are the row lengths of A and B as stored. */
static void matmul_rows(const float *restrict a, const float *restrict b, float *restrict y,
                        int64_t m, int64_t n, int64_t k, bool a_t, bool b_t, int64_t lda,
                        int64_t ldb)
{
    for (int64_t i = 0; i < m; i++) {
        float *yr = y + i * n;
        if (b_t) {
            for (int64_t j = 0; j < n; j++) {
                const float *br = b + j * ldb;
                float acc = 0.0f;
                for (int64_t p = 0; p < k; p++)
                    acc += (a_t ? a[p * lda + i] : a[i * lda + p]) * br[p];
                yr[j] = acc;
            }
            continue;
        }
        for (int64_t j = 0; j < n; j++)
            yr[j] = 0.0f;
        for (int64_t p = 0; p < k; p++) {
            float av = a_t ? a[p * lda + i] : a[i * lda + p];
            const float *br = b + p * ldb;
            for (int64_t j = 0; j < n; j++)
                yr[j] += av * br[j];
        }
    }
}

kiln_status kiln_ref_gemm(const kiln_node *n, const kiln_tensor *const *in,
                          kiln_tensor *const *out, kiln_error *err)
{
    const kiln_tensor *at = in[0], *bt = in[1], *ct = n->n_inputs > 2 ? in[2] : NULL;
    kiln_tensor *yt = out[0];
    bool a_t = kiln_attr_int(n, "transA", 0) != 0, b_t = kiln_attr_int(n, "transB", 0) != 0;
    float alpha = kiln_attr_float(n, "alpha", 1.0f), beta = kiln_attr_float(n, "beta", 1.0f);
    if (at->shape.rank != 2 || bt->shape.rank != 2 || yt->shape.rank != 2)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "Gemm: A, B and Y must have rank 2");
    int64_t m = yt->shape.dims[0], nn = yt->shape.dims[1];
    int64_t k = a_t ? at->shape.dims[0] : at->shape.dims[1];
    int64_t lda = at->shape.dims[1], ldb = bt->shape.dims[1];
    if ((a_t ? at->shape.dims[1] : at->shape.dims[0]) != m ||
        (b_t ? bt->shape.dims[1] : bt->shape.dims[0]) != k ||
        (b_t ? bt->shape.dims[0] : bt->shape.dims[1]) != nn)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "Gemm: A, B and Y do not agree");
    float *y = yt->data;
    matmul_rows(at->data, bt->data, y, m, nn, k, a_t, b_t, lda, ldb);
    /* C's strides over (i, j); a dim of extent 1 (or absent) broadcasts */
    int64_t ci = 0, cj = 0;
    const float *c = ct ? ct->data : NULL;
    if (ct && ct->shape.rank == 2) {
        cj = ct->shape.dims[1] == 1 ? 0 : 1;
        ci = ct->shape.dims[0] == 1 ? 0 : ct->shape.dims[1];
    } else if (ct && ct->shape.rank == 1) {
        cj = ct->shape.dims[0] == 1 ? 0 : 1;
    } else if (ct && ct->shape.rank > 2) {
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "Gemm: C has rank %d", ct->shape.rank);
    }
    for (int64_t i = 0; i < m; i++) {
        float *yr = y + i * nn;
        for (int64_t j = 0; j < nn; j++)
            yr[j] = alpha * yr[j] + (c ? beta * c[i * ci + j * cj] : 0.0f);
    }
    return KILN_OK;
}

kiln_status kiln_ref_matmul(const kiln_node *n, const kiln_tensor *const *in,
                            kiln_tensor *const *out, kiln_error *err)
{
    (void)n;
    const kiln_shape *as = &in[0]->shape, *bs = &in[1]->shape;
    if (as->rank < 1 || bs->rank < 1)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "MatMul: operands must have rank >= 1");
    int64_t m = as->rank == 1 ? 1 : as->dims[as->rank - 2];
    int64_t k = as->dims[as->rank - 1];
    int64_t nn = bs->rank == 1 ? 1 : bs->dims[bs->rank - 1];
    if ((bs->rank == 1 ? bs->dims[0] : bs->dims[bs->rank - 2]) != k)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "MatMul: inner dims differ");
    /* batch dims, right-aligned, with element strides (0 where broadcast) */
    int ba = as->rank > 2 ? as->rank - 2 : 0, bb = bs->rank > 2 ? bs->rank - 2 : 0;
    int nb = ba > bb ? ba : bb;
    int64_t bdims[KILN_MAX_RANK], astr[KILN_MAX_RANK], bstr[KILN_MAX_RANK];
    int64_t a_mat = m * k, b_mat = k * nn, y_mat = m * nn, batches = 1;
    int64_t sa = a_mat, sb = b_mat;
    for (int i = nb - 1; i >= 0; i--) {
        int ia = i - (nb - ba), ib = i - (nb - bb);
        int64_t da = ia >= 0 ? as->dims[ia] : 1, db = ib >= 0 ? bs->dims[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "MatMul: batch dims do not broadcast");
        bdims[i] = da == 1 ? db : da;
        astr[i] = da == 1 ? 0 : sa;
        bstr[i] = db == 1 ? 0 : sb;
        sa *= da;
        sb *= db;
        batches *= bdims[i];
    }
    if (kiln_shape_numel(&out[0]->shape) != batches * y_mat)
        return kiln_errorf(err, KILN_ERR_INTERNAL, "MatMul: output buffer has the wrong size");
    const float *a = in[0]->data, *b = in[1]->data;
    float *y = out[0]->data;
    int64_t idx[KILN_MAX_RANK] = {0};
    for (int64_t t = 0; t < batches; t++) {
        int64_t oa = 0, ob = 0;
        for (int i = 0; i < nb; i++) {
            oa += idx[i] * astr[i];
            ob += idx[i] * bstr[i];
        }
        matmul_rows(a + oa, b + ob, y + t * y_mat, m, nn, k, false, false, k, nn);
        for (int i = nb - 1; i >= 0; i--) { /* next batch index, row-major */
            if (++idx[i] < bdims[i])
                break;
            idx[i] = 0;
        }
    }
    return KILN_OK;
}
