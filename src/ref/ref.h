/* ref/ref.h: helpers shared by the reference kernels. The kernels themselves
 * are declared from ops.def in ir/op.h. */
#ifndef KILN_REF_REF_H
#define KILN_REF_REF_H

#include <string.h>

#include "ir/graph.h"
#include "util/error.h"

/* Row-major strides (in elements) of a shape. */
static inline void kiln_ref_strides(const kiln_shape *s, int64_t *strides)
{
    int64_t st = 1;
    for (int i = s->rank - 1; i >= 0; i--) {
        strides[i] = st;
        st *= s->dims[i];
    }
}

struct kiln_resize_params;
/* Resize's taps for output coordinate x of dim d (input extent `in`): up to
 * 4 input indices (clamped into [0, in)) and their weights, *count of them
 * (-1: tf_crop_and_resize extrapolates there); ref/resize.c. The reference
 * kernel and the compiled Resize template share it. */
void kiln_resize_dim_taps(const struct kiln_resize_params *p, int d, int64_t in, int64_t x,
                          int64_t *idx, double *w, int *count);

/* Copies `count` elements of `es` bytes from src, read with element stride
 * src_stride (may be negative), to contiguous dst (ref/transform.c). */
void kiln_ref_copy_strided(void *dst, const void *src, int64_t count, int64_t src_stride,
                           size_t es);

/* Data-movement kernels: input and output of the same dtype with a known
 * element size; an output of the expected shape. */
static inline kiln_status kiln_ref_check_same_dtype(const kiln_tensor *x, const kiln_tensor *y,
                                                    kiln_error *err)
{
    if (x->dtype != y->dtype || kiln_dtype_size(x->dtype) == 0)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "input is %s but output is %s",
                           kiln_dtype_name(x->dtype), kiln_dtype_name(y->dtype));
    return KILN_OK;
}

static inline kiln_status kiln_ref_check_shape(const kiln_shape *got, const kiln_shape *want,
                                               kiln_error *err)
{
    if (!kiln_shape_equal(got, want)) {
        kiln_shape_buf a, b;
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "output is %s, expected %s",
                           kiln_shape_fmt(got, &a), kiln_shape_fmt(want, &b));
    }
    return KILN_OK;
}

/* Product of dims [from, to) of a shape. */
static inline int64_t kiln_ref_prod(const kiln_shape *s, int from, int to)
{
    int64_t p = 1;
    for (int i = from; i < to; i++)
        p *= s->dims[i];
    return p;
}

/* Advances a row-major coordinate counter over `s` by one; false (and all
 * zeros again) at the end. */
static inline bool kiln_ref_next_coord(const kiln_shape *s, int64_t *idx)
{
    for (int d = s->rank - 1; d >= 0; d--) {
        if (++idx[d] < s->dims[d])
            return true;
        idx[d] = 0;
    }
    return false;
}

/* Tile and Pad fill y row by row (its last dim) from rows of x; this settles
 * the cases without rows: an empty y needs nothing, and a scalar y (x is one
 * too) is x's element. Returns whether it settled y. */
static inline bool kiln_ref_rows_trivial(const kiln_tensor *x, kiln_tensor *y)
{
    if (kiln_shape_numel(&y->shape) <= 0)
        return true;
    if (y->shape.rank == 0) {
        memcpy(y->data, x->data, kiln_dtype_size(x->dtype));
        return true;
    }
    return false;
}

/* ---- index tensors (Gather, GatherElements, GatherND, the scatters,
 * ReverseSequence): int32 or int64 values read as int64. The values are
 * only known at run time, so every one read is checked before it addresses
 * data. */

/* `what` names the tensor in the message ("indices", "sequence_lens"). */
static inline kiln_status kiln_ref_check_index_dtype(const kiln_tensor *t, const char *what,
                                                     kiln_error *err)
{
    if (t->dtype != KILN_DTYPE_INT32 && t->dtype != KILN_DTYPE_INT64)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "%s are %s, expected int32 or int64",
                           what, kiln_dtype_name(t->dtype));
    return KILN_OK;
}

/* The gathers: data `x` and output `y` of the same dtype, indices `ix` int32
 * or int64. */
static inline kiln_status kiln_ref_check_gather_dtypes(const kiln_tensor *x, const kiln_tensor *ix,
                                                       const kiln_tensor *y, kiln_error *err)
{
    kiln_status s = kiln_ref_check_same_dtype(x, y, err);
    if (s == KILN_OK)
        s = kiln_ref_check_index_dtype(ix, "indices", err);
    return s;
}

/* Element i of an index tensor (int32 or int64). */
static inline int64_t kiln_ref_load_index(const kiln_tensor *t, int64_t i)
{
    return t->dtype == KILN_DTYPE_INT32 ? ((const int32_t *)t->data)[i]
                                        : ((const int64_t *)t->data)[i];
}

/* Normalizes index `v` (element `i` of the index tensor) against extent
 * `dim` of data dimension `axis` (negative counts from the end) into *out;
 * an error when out of range. */
static inline kiln_status kiln_ref_norm_index(int64_t v, int64_t dim, int64_t i, int axis,
                                              int64_t *out, kiln_error *err)
{
    int64_t p = v < 0 ? v + dim : v;
    if (p < 0 || p >= dim)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "index %lld (element %lld of indices) is out of range for dimension "
                           "%d of size %lld",
                           (long long)v, (long long)i, axis, (long long)dim);
    *out = p;
    return KILN_OK;
}

/* Makes graph input `index` of ex read t's data in place, without the copy
 * kiln_ref_executor_set_input makes, until the next bind or set_input of
 * that input (or destroy). t's data must stay valid and unchanged through
 * the runs that read it; the kernels never write it. Checks like
 * set_input. (The VM binds the values its dynamic nodes read: src/vm.) */
kiln_status kiln_ref_executor_bind_input(kiln_ref_executor *ex, int index, const kiln_tensor *t,
                                         kiln_error *err);

#endif
