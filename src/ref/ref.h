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

/* Product of dims [from, to) of a shape. */
static inline int64_t kiln_ref_prod(const kiln_shape *s, int from, int to)
{
    int64_t p = 1;
    for (int i = from; i < to; i++)
        p *= s->dims[i];
    return p;
}

#endif
