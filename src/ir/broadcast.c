/* ir/broadcast.c: numpy broadcasting of shapes, and the coalesced strided walk
 * the elementwise kernels use (see broadcast.h). Coalescing: after expressing
 * each operand's strides in the output rank (0 on broadcast dims), size-1
 * output dims are dropped and dims d, d+1 are merged whenever, for every
 * operand, stride[d] == stride[d+1] * dims[d+1] (which holds both for two
 * contiguous dims and for two broadcast dims). */
#include "ir/broadcast.h"

#include "ir/graph.h"
#include "util/error.h"

kiln_status kiln_broadcast_shape(const kiln_shape *a, const kiln_shape *b, kiln_shape *out,
                                 kiln_error *err)
{
    kiln_shape r;
    r.rank = a->rank > b->rank ? a->rank : b->rank;
    for (int i = 0; i < KILN_MAX_RANK; i++)
        r.dims[i] = 0;
    for (int i = 0; i < r.rank; i++) {
        /* i counts from the right */
        int ia = a->rank - 1 - i, ib = b->rank - 1 - i;
        int64_t da = ia >= 0 ? a->dims[ia] : 1;
        int64_t db = ib >= 0 ? b->dims[ib] : 1;
        int64_t d;
        if (da == db || db == 1)
            d = da;
        else if (da == 1)
            d = db;
        else {
            kiln_shape_buf sa, sb;
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                               "shapes %s and %s do not broadcast (dimension %d from the right: "
                               "%lld vs %lld)",
                               kiln_shape_fmt(a, &sa), kiln_shape_fmt(b, &sb), i + 1,
                               (long long)da, (long long)db);
        }
        r.dims[r.rank - 1 - i] = d;
    }
    *out = r;
    return KILN_OK;
}

bool kiln_broadcasts_to(const kiln_shape *in, const kiln_shape *out)
{
    if (in->rank > out->rank)
        return false;
    int lead = out->rank - in->rank;
    for (int i = 0; i < in->rank; i++)
        if (in->dims[i] != 1 && in->dims[i] != out->dims[lead + i])
            return false;
    return true;
}

void kiln_broadcast_strides(const kiln_shape *in, const kiln_shape *out, int64_t *strides)
{
    int lead = out->rank - in->rank;
    int64_t st = 1;
    for (int i = out->rank - 1; i >= 0; i--) {
        int j = i - lead;
        if (j < 0 || in->dims[j] == 1) {
            strides[i] = 0;
        } else {
            strides[i] = st;
            st *= in->dims[j];
        }
    }
}

void kiln_bcast_init(kiln_bcast *bc, const kiln_shape *out, const kiln_shape *const *ins,
                     int n_ops)
{
    int64_t full[KILN_BCAST_MAX_OPS][KILN_MAX_RANK];
    bc->n_ops = n_ops;
    for (int k = 0; k < n_ops; k++)
        kiln_broadcast_strides(ins[k], out, full[k]);
    int64_t numel = 1;
    for (int i = 0; i < out->rank; i++)
        numel *= out->dims[i];

    /* keep the dims of size != 1, merging into the previous kept dim when
     * every operand allows it */
    int r = 0;
    for (int i = 0; i < out->rank; i++) {
        int64_t d = out->dims[i];
        if (d == 1)
            continue;
        bool merge = r > 0;
        for (int k = 0; k < n_ops && merge; k++)
            if (bc->strides[k][r - 1] != full[k][i] * d)
                merge = false;
        if (merge) {
            bc->dims[r - 1] *= d;
            for (int k = 0; k < n_ops; k++)
                bc->strides[k][r - 1] = full[k][i];
        } else {
            bc->dims[r] = d;
            for (int k = 0; k < n_ops; k++)
                bc->strides[k][r] = full[k][i];
            r++;
        }
    }
    if (r == 0) { /* scalar or all-ones output: one element */
        bc->dims[0] = 1;
        for (int k = 0; k < n_ops; k++)
            bc->strides[k][0] = 0;
        r = 1;
    }
    bc->rank = r;
    bc->inner = bc->dims[r - 1];
    for (int k = 0; k < n_ops; k++)
        bc->inner_stride[k] = bc->strides[k][r - 1];
    bc->rows = bc->inner > 0 ? numel / bc->inner : 0;
}
