/* tests/support/tensor_value.h: element i of a float32/float64/int64/int32
 * tensor as a double (NaN for other dtypes), for the standalone checkers
 * (vm/vm_check_sets.c, vm/vm_runtime_only.c) that compare outputs without
 * the cmocka support library. Header-only: vm_runtime_only links the
 * runtime library and nothing else. */
#ifndef KILN_TEST_TENSOR_VALUE_H
#define KILN_TEST_TENSOR_VALUE_H

#include <math.h>
#include <stdint.h>

#include "kiln/types.h"

static inline double kt_tensor_value(const kiln_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case KILN_DTYPE_FLOAT32: return ((const float *)t->data)[i];
    case KILN_DTYPE_FLOAT64: return ((const double *)t->data)[i];
    case KILN_DTYPE_INT64: return (double)((const int64_t *)t->data)[i];
    case KILN_DTYPE_INT32: return ((const int32_t *)t->data)[i];
    default: return NAN;
    }
}

#endif
