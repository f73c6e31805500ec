/* util/types.c: element types, shapes and tensor descriptors (include/kiln/types.h),
 * shared by the compiler and the runtime-only library. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/types.h"
#include "util/error.h"

static const struct {
    const char *name;
    size_t size;
} dtype_table[KILN_DTYPE_COUNT] = {
    [KILN_DTYPE_UNDEFINED] = {"undefined", 0}, [KILN_DTYPE_FLOAT32] = {"float32", 4},
    [KILN_DTYPE_FLOAT16] = {"float16", 2},     [KILN_DTYPE_FLOAT64] = {"float64", 8},
    [KILN_DTYPE_INT8] = {"int8", 1},           [KILN_DTYPE_UINT8] = {"uint8", 1},
    [KILN_DTYPE_INT16] = {"int16", 2},         [KILN_DTYPE_UINT16] = {"uint16", 2},
    [KILN_DTYPE_INT32] = {"int32", 4},         [KILN_DTYPE_UINT32] = {"uint32", 4},
    [KILN_DTYPE_INT64] = {"int64", 8},         [KILN_DTYPE_UINT64] = {"uint64", 8},
    [KILN_DTYPE_BOOL] = {"bool", 1},
};

const char *kiln_dtype_name(kiln_dtype t)
{
    if ((unsigned)t >= KILN_DTYPE_COUNT)
        return "invalid";
    return dtype_table[t].name;
}

size_t kiln_dtype_size(kiln_dtype t)
{
    if ((unsigned)t >= KILN_DTYPE_COUNT)
        return 0;
    return dtype_table[t].size;
}

int64_t kiln_shape_numel(const kiln_shape *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) {
        int64_t d = s->dims[i];
        if (d < 0)
            return -1;
        if (d != 0 && n > INT64_MAX / d)
            return -1;
        n *= d;
    }
    return n;
}

bool kiln_shape_equal(const kiln_shape *a, const kiln_shape *b)
{
    if (a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i])
            return false;
    return true;
}

char *kiln_shape_str(const kiln_shape *s, char *buf, size_t size)
{
    size_t n = 0;
    if (size == 0)
        return buf;
    buf[0] = 0;
    n += (size_t)snprintf(buf + n, size - n, "[");
    for (int i = 0; i < s->rank && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, i ? ", %lld" : "%lld", (long long)s->dims[i]);
    if (n < size)
        snprintf(buf + n, size - n, "]");
    return buf;
}

int64_t kiln_tensor_nbytes(const kiln_tensor *t)
{
    int64_t n = kiln_shape_numel(&t->shape);
    int64_t es = (int64_t)kiln_dtype_size(t->dtype);
    if (n < 0 || es == 0 || n > INT64_MAX / es)
        return -1;
    return n * es;
}

kiln_status kiln_tensor_alloc(kiln_tensor *t, kiln_dtype dtype, const kiln_shape *shape,
                              kiln_error *err)
{
    kiln_tensor tmp = {.dtype = dtype, .shape = *shape, .data = NULL};
    if (shape->rank < 0 || shape->rank > KILN_MAX_RANK)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "rank %d out of range",
                           (int)shape->rank);
    int64_t nb = kiln_tensor_nbytes(&tmp);
    if (nb < 0)
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "tensor of %s %s has no finite size",
                           kiln_dtype_name(dtype), "shape");
    tmp.data = calloc(1, nb ? (size_t)nb : 1);
    if (!tmp.data)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "cannot allocate %lld bytes",
                           (long long)nb);
    *t = tmp;
    return KILN_OK;
}

void kiln_tensor_release(kiln_tensor *t)
{
    if (t) {
        free(t->data);
        t->data = NULL;
    }
}
