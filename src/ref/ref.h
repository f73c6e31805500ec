/* ref/ref.h: helpers shared by the reference kernels. The kernels themselves
 * are declared from ops.def in ir/op.h. */
#ifndef KILN_REF_REF_H
#define KILN_REF_REF_H

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

#endif
