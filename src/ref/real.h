/* ref/real.h: element access for the kernels of the normalization, softmax
 * and loss families, which take float32 or float64 data (inference checked
 * which) and compute in double: load an element as double, store a double
 * rounded to the tensor's dtype, and load an int32/int64 index. */
#ifndef KILN_REF_REAL_H
#define KILN_REF_REAL_H

#include "kiln/types.h"

static inline double kiln_real_ld(const kiln_tensor *t, int64_t i)
{
    return t->dtype == KILN_DTYPE_FLOAT64 ? ((const double *)t->data)[i]
                                          : (double)((const float *)t->data)[i];
}
static inline void kiln_real_st(kiln_tensor *t, int64_t i, double v)
{
    if (t->dtype == KILN_DTYPE_FLOAT64)
        ((double *)t->data)[i] = v;
    else
        ((float *)t->data)[i] = (float)v;
}
static inline int64_t kiln_index_ld(const kiln_tensor *t, int64_t i)
{
    return t->dtype == KILN_DTYPE_INT32 ? (int64_t)((const int32_t *)t->data)[i]
                                        : ((const int64_t *)t->data)[i];
}

#endif
