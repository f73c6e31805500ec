/* import/onnx/fold.c: evaluation of constant subgraphs at import time.
 *
 * Exporters compute shapes at run time (Shape -> Gather -> Concat -> Reshape,
 * ConstantOfShape/Equal/Where around Expand). kiln's shapes are static, so when
 * every input of such a node is known the converter computes the result here
 * and binds a constant instead of emitting a node.
 *
 * Data movement (Gather, Concat, Slice, Expand, Where, Reshape) copies
 * elements bytewise and so works for every dtype. Arithmetic goes through
 * int64 for integer types (C semantics: division truncates; division by zero
 * is an error) and through double for floating types. Every result is bounded
 * by ONNX_FOLD_MAX_BYTES so that a hostile file cannot make the importer
 * allocate what its size does not justify. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "import/onnx/onnx.h"
#include "util/error.h"

/* ---- element access ----------------------------------------------------- */

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: renormalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) {
                man <<= 1;
                exp--;
            }
            bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static uint16_t float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    int32_t exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
    uint32_t man = x & 0x7fffff;
    if (((x >> 23) & 0xff) == 0xff) /* inf / nan */
        return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    if (exp >= 31)
        return (uint16_t)(sign | 0x7c00);
    if (exp <= 0) {
        if (exp < -10)
            return sign;
        man |= 0x800000;
        uint32_t shift = (uint32_t)(14 - exp);
        uint32_t half = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = ((uint32_t)exp << 10) | (man >> 13);
    uint32_t rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (half & 1)))
        half++; /* may carry into the exponent, which is the right rounding */
    return (uint16_t)(sign | half);
}

bool onnx_dtype_is_int(kiln_dtype t)
{
    switch (t) {
    case KILN_DTYPE_INT8: case KILN_DTYPE_UINT8: case KILN_DTYPE_INT16: case KILN_DTYPE_UINT16:
    case KILN_DTYPE_INT32: case KILN_DTYPE_UINT32: case KILN_DTYPE_INT64: case KILN_DTYPE_UINT64:
    case KILN_DTYPE_BOOL:
        return true;
    default:
        return false;
    }
}

double onnx_load_f64(kiln_dtype t, const void *data, int64_t i)
{
    switch (t) {
    case KILN_DTYPE_FLOAT32: return ((const float *)data)[i];
    case KILN_DTYPE_FLOAT16: return half_to_float(((const uint16_t *)data)[i]);
    case KILN_DTYPE_FLOAT64: return ((const double *)data)[i];
    case KILN_DTYPE_UINT64: return (double)((const uint64_t *)data)[i];
    default: return (double)onnx_load_i64(t, data, i);
    }
}

int64_t onnx_load_i64(kiln_dtype t, const void *data, int64_t i)
{
    switch (t) {
    case KILN_DTYPE_INT8: return ((const int8_t *)data)[i];
    case KILN_DTYPE_UINT8: return ((const uint8_t *)data)[i];
    case KILN_DTYPE_INT16: return ((const int16_t *)data)[i];
    case KILN_DTYPE_UINT16: return ((const uint16_t *)data)[i];
    case KILN_DTYPE_INT32: return ((const int32_t *)data)[i];
    case KILN_DTYPE_UINT32: return ((const uint32_t *)data)[i];
    case KILN_DTYPE_INT64: return ((const int64_t *)data)[i];
    case KILN_DTYPE_UINT64: return (int64_t)((const uint64_t *)data)[i];
    case KILN_DTYPE_BOOL: return ((const uint8_t *)data)[i] != 0;
    case KILN_DTYPE_FLOAT32:
    case KILN_DTYPE_FLOAT16:
    case KILN_DTYPE_FLOAT64: {
        double d = onnx_load_f64(t, data, i);
        if (!(d == d))
            return 0;
        if (d >= 9.2233720368547758e18)
            return INT64_MAX;
        if (d <= -9.2233720368547758e18)
            return INT64_MIN;
        return (int64_t)d;
    }
    default: return 0;
    }
}

static void store_i64(kiln_dtype t, void *data, int64_t i, int64_t v)
{
    switch (t) {
    case KILN_DTYPE_INT8: ((int8_t *)data)[i] = (int8_t)v; break;
    case KILN_DTYPE_UINT8: ((uint8_t *)data)[i] = (uint8_t)v; break;
    case KILN_DTYPE_INT16: ((int16_t *)data)[i] = (int16_t)v; break;
    case KILN_DTYPE_UINT16: ((uint16_t *)data)[i] = (uint16_t)v; break;
    case KILN_DTYPE_INT32: ((int32_t *)data)[i] = (int32_t)v; break;
    case KILN_DTYPE_UINT32: ((uint32_t *)data)[i] = (uint32_t)v; break;
    case KILN_DTYPE_INT64: ((int64_t *)data)[i] = v; break;
    case KILN_DTYPE_UINT64: ((uint64_t *)data)[i] = (uint64_t)v; break;
    case KILN_DTYPE_BOOL: ((uint8_t *)data)[i] = v != 0; break;
    case KILN_DTYPE_FLOAT32: ((float *)data)[i] = (float)v; break;
    case KILN_DTYPE_FLOAT16: ((uint16_t *)data)[i] = float_to_half((float)v); break;
    case KILN_DTYPE_FLOAT64: ((double *)data)[i] = (double)v; break;
    default: break;
    }
}

static int64_t sat_i64(double d)
{
    if (!(d == d))
        return 0;
    if (d >= 9.2233720368547758e18)
        return INT64_MAX;
    if (d <= -9.2233720368547758e18)
        return INT64_MIN;
    return (int64_t)d;
}

static void store_f64(kiln_dtype t, void *data, int64_t i, double v)
{
    switch (t) {
    case KILN_DTYPE_FLOAT32: ((float *)data)[i] = (float)v; break;
    case KILN_DTYPE_FLOAT16: ((uint16_t *)data)[i] = float_to_half((float)v); break;
    case KILN_DTYPE_FLOAT64: ((double *)data)[i] = v; break;
    case KILN_DTYPE_BOOL: ((uint8_t *)data)[i] = v != 0; break;
    case KILN_DTYPE_UINT64:
        ((uint64_t *)data)[i] = (v <= 0 || !(v == v)) ? 0
                                : v >= 1.8446744073709552e19 ? UINT64_MAX
                                                             : (uint64_t)v;
        break;
    default: store_i64(t, data, i, sat_i64(v)); break;
    }
}

/* ---- shapes ------------------------------------------------------------- */

static kiln_status alloc_out(kiln_tensor *out, kiln_dtype dtype, const kiln_shape *shape,
                             kiln_error *err)
{
    kiln_tensor t = {.dtype = dtype, .shape = *shape};
    int64_t nb = kiln_tensor_nbytes(&t);
    if (nb < 0 || nb > ONNX_FOLD_MAX_BYTES) {
        kiln_shape_buf b;
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "the constant result (%s %s) is too large to compute at import time",
                           kiln_dtype_name(dtype), kiln_shape_fmt(shape, &b));
    }
    return kiln_tensor_alloc(out, dtype, shape, err);
}

kiln_status onnx_broadcast_shapes(const kiln_shape *const *shapes, int n, kiln_shape *out,
                                  kiln_error *err)
{
    kiln_shape r = {.rank = 0};
    for (int i = 0; i < n; i++)
        if (shapes[i]->rank > r.rank)
            r.rank = shapes[i]->rank;
    for (int d = 0; d < r.rank; d++)
        r.dims[d] = 1;
    for (int i = 0; i < n; i++) {
        const kiln_shape *s = shapes[i];
        for (int k = 0; k < s->rank; k++) {
            int d = r.rank - s->rank + k;
            int64_t e = s->dims[k];
            if (e == r.dims[d] || e == 1)
                continue;
            if (r.dims[d] == 1) {
                r.dims[d] = e;
                continue;
            }
            kiln_shape_buf a, b;
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                               "shapes %s and %s do not broadcast (dimension %d: %lld vs %lld)",
                               kiln_shape_fmt(shapes[0], &a), kiln_shape_fmt(s, &b), d,
                               (long long)r.dims[d], (long long)e);
        }
    }
    *out = r;
    return KILN_OK;
}

/* Element strides of `in` broadcast to `out` (0 along broadcast dims). */
static void bcast_strides(const kiln_shape *in, const kiln_shape *out, int64_t *strides)
{
    int64_t s = 1;
    for (int d = out->rank - 1, k = in->rank - 1; d >= 0; d--, k--) {
        if (k < 0) {
            strides[d] = 0;
            continue;
        }
        strides[d] = in->dims[k] == 1 ? 0 : s;
        s *= in->dims[k];
    }
}

static int64_t bcast_offset(int64_t i, const kiln_shape *out, const int64_t *strides)
{
    int64_t off = 0;
    for (int d = out->rank - 1; d >= 0; d--) {
        int64_t e = out->dims[d];
        off += (i % e) * strides[d];
        i /= e;
    }
    return off;
}

kiln_status onnx_reshape_shape(const kiln_shape *in, const int64_t *shape, int n, bool allowzero,
                               kiln_shape *out, kiln_error *err)
{
    kiln_shape_buf b;
    if (n < 0 || n > KILN_MAX_RANK)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "target rank %d is above kiln's maximum %d",
                           n, KILN_MAX_RANK);
    kiln_shape r = {.rank = n};
    int infer = -1;
    int64_t known = 1;
    for (int i = 0; i < n; i++) {
        int64_t e = shape[i];
        if (e == 0 && !allowzero) {
            if (i >= in->rank)
                return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                                   "target shape entry %d is 0 (copy) but the input %s has "
                                   "rank %d",
                                   i, kiln_shape_fmt(in, &b), (int)in->rank);
            e = in->dims[i];
        }
        if (e == -1) {
            if (infer >= 0)
                return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                                   "target shape has more than one -1");
            infer = i;
            r.dims[i] = 1;
            continue;
        }
        if (e < 0)
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "target shape entry %d is %lld", i,
                               (long long)e);
        r.dims[i] = e;
        if (e != 0 && known > INT64_MAX / e)
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "target shape overflows");
        known *= e;
    }
    int64_t total = kiln_shape_numel(in);
    if (total < 0)
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "input shape %s has no element count",
                           kiln_shape_fmt(in, &b));
    if (infer >= 0) {
        if (known == 0 || total % known != 0)
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                               "cannot infer the -1 extent: %lld elements into parts of %lld",
                               (long long)total, (long long)known);
        r.dims[infer] = total / known;
        known = total;
    }
    if (known != total) {
        kiln_shape_buf c;
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "cannot reshape %s (%lld elements) to %s (%lld elements)",
                           kiln_shape_fmt(in, &b), (long long)total, kiln_shape_fmt(&r, &c),
                           (long long)known);
    }
    *out = r;
    return KILN_OK;
}

/* ---- folds -------------------------------------------------------------- */

kiln_status onnx_fold_binary(onnx_binop op, const kiln_tensor *a, const kiln_tensor *b,
                             kiln_tensor *out, kiln_error *err)
{
    if (a->dtype != b->dtype)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "operands are %s and %s",
                           kiln_dtype_name(a->dtype), kiln_dtype_name(b->dtype));
    const kiln_shape *shapes[2] = {&a->shape, &b->shape};
    kiln_shape os;
    kiln_status s = onnx_broadcast_shapes(shapes, 2, &os, err);
    if (s != KILN_OK)
        return s;
    kiln_dtype ot = op == ONNX_BIN_EQUAL ? KILN_DTYPE_BOOL : a->dtype;
    kiln_tensor r;
    s = alloc_out(&r, ot, &os, err);
    if (s != KILN_OK)
        return s;
    int64_t sa[KILN_MAX_RANK], sb[KILN_MAX_RANK];
    bcast_strides(&a->shape, &os, sa);
    bcast_strides(&b->shape, &os, sb);
    int64_t n = kiln_shape_numel(&os);
    bool is_int = onnx_dtype_is_int(a->dtype);
    for (int64_t i = 0; i < n; i++) {
        int64_t ia = bcast_offset(i, &os, sa), ib = bcast_offset(i, &os, sb);
        if (is_int) {
            int64_t x = onnx_load_i64(a->dtype, a->data, ia);
            int64_t y = onnx_load_i64(b->dtype, b->data, ib), z = 0;
            switch (op) {
            case ONNX_BIN_ADD: z = (int64_t)((uint64_t)x + (uint64_t)y); break;
            case ONNX_BIN_SUB: z = (int64_t)((uint64_t)x - (uint64_t)y); break;
            case ONNX_BIN_MUL: z = (int64_t)((uint64_t)x * (uint64_t)y); break;
            case ONNX_BIN_DIV:
                if (y == 0) {
                    kiln_tensor_release(&r);
                    return kiln_errorf(err, KILN_ERR_INVALID_GRAPH,
                                       "integer division by zero in a constant expression");
                }
                z = (x == INT64_MIN && y == -1) ? INT64_MIN : x / y;
                break;
            case ONNX_BIN_EQUAL: z = x == y; break;
            }
            store_i64(ot, r.data, i, z);
        } else {
            double x = onnx_load_f64(a->dtype, a->data, ia);
            double y = onnx_load_f64(b->dtype, b->data, ib), z = 0;
            switch (op) {
            case ONNX_BIN_ADD: z = x + y; break;
            case ONNX_BIN_SUB: z = x - y; break;
            case ONNX_BIN_MUL: z = x * y; break;
            case ONNX_BIN_DIV: z = x / y; break;
            case ONNX_BIN_EQUAL: z = x == y; break;
            }
            /* float32 arithmetic rounds per operation like a kernel would */
            if (ot == KILN_DTYPE_FLOAT32)
                z = (float)z;
            store_f64(ot, r.data, i, z);
        }
    }
    *out = r;
    return KILN_OK;
}

kiln_status onnx_fold_where(const kiln_tensor *cond, const kiln_tensor *x, const kiln_tensor *y,
                            kiln_tensor *out, kiln_error *err)
{
    if (cond->dtype != KILN_DTYPE_BOOL)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "condition is %s, expected bool",
                           kiln_dtype_name(cond->dtype));
    if (x->dtype != y->dtype)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "X is %s but Y is %s",
                           kiln_dtype_name(x->dtype), kiln_dtype_name(y->dtype));
    const kiln_shape *shapes[3] = {&cond->shape, &x->shape, &y->shape};
    kiln_shape os;
    kiln_status s = onnx_broadcast_shapes(shapes, 3, &os, err);
    if (s != KILN_OK)
        return s;
    kiln_tensor r;
    s = alloc_out(&r, x->dtype, &os, err);
    if (s != KILN_OK)
        return s;
    int64_t sc[KILN_MAX_RANK], sx[KILN_MAX_RANK], sy[KILN_MAX_RANK];
    bcast_strides(&cond->shape, &os, sc);
    bcast_strides(&x->shape, &os, sx);
    bcast_strides(&y->shape, &os, sy);
    size_t es = kiln_dtype_size(x->dtype);
    int64_t n = kiln_shape_numel(&os);
    for (int64_t i = 0; i < n; i++) {
        bool c = ((const uint8_t *)cond->data)[bcast_offset(i, &os, sc)] != 0;
        const kiln_tensor *src = c ? x : y;
        int64_t off = bcast_offset(i, &os, c ? sx : sy);
        memcpy((char *)r.data + (size_t)i * es, (const char *)src->data + (size_t)off * es, es);
    }
    *out = r;
    return KILN_OK;
}

kiln_status onnx_fold_expand(const kiln_tensor *x, const int64_t *shape, int n, kiln_tensor *out,
                             kiln_error *err)
{
    if (n < 0 || n > KILN_MAX_RANK)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "target rank %d is above kiln's maximum %d",
                           n, KILN_MAX_RANK);
    kiln_shape target = {.rank = n};
    for (int i = 0; i < n; i++) {
        if (shape[i] < 0)
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "target shape entry %d is %lld", i,
                               (long long)shape[i]);
        target.dims[i] = shape[i];
    }
    const kiln_shape *shapes[2] = {&x->shape, &target};
    kiln_shape os;
    kiln_status s = onnx_broadcast_shapes(shapes, 2, &os, err);
    if (s != KILN_OK)
        return s;
    kiln_tensor r;
    s = alloc_out(&r, x->dtype, &os, err);
    if (s != KILN_OK)
        return s;
    int64_t sx[KILN_MAX_RANK];
    bcast_strides(&x->shape, &os, sx);
    size_t es = kiln_dtype_size(x->dtype);
    int64_t total = kiln_shape_numel(&os);
    for (int64_t i = 0; i < total; i++)
        memcpy((char *)r.data + (size_t)i * es,
               (const char *)x->data + (size_t)bcast_offset(i, &os, sx) * es, es);
    *out = r;
    return KILN_OK;
}

static kiln_status norm_axis(int64_t axis, int rank, int *out, kiln_error *err)
{
    if (axis < -rank || axis >= rank || (rank == 0))
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "axis %lld is out of range for rank %d",
                           (long long)axis, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return KILN_OK;
}

kiln_status onnx_fold_gather(const kiln_tensor *data, const kiln_tensor *indices, int64_t axis,
                             kiln_tensor *out, kiln_error *err)
{
    if (indices->dtype != KILN_DTYPE_INT64 && indices->dtype != KILN_DTYPE_INT32)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "indices are %s, expected int32/int64",
                           kiln_dtype_name(indices->dtype));
    int ax = 0;
    kiln_status s = norm_axis(axis, data->shape.rank, &ax, err);
    if (s != KILN_OK)
        return s;
    int orank = data->shape.rank - 1 + indices->shape.rank;
    if (orank > KILN_MAX_RANK)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED, "result rank %d is above kiln's maximum",
                           orank);
    kiln_shape os = {.rank = orank};
    int r = 0;
    for (int d = 0; d < ax; d++)
        os.dims[r++] = data->shape.dims[d];
    for (int d = 0; d < indices->shape.rank; d++)
        os.dims[r++] = indices->shape.dims[d];
    for (int d = ax + 1; d < data->shape.rank; d++)
        os.dims[r++] = data->shape.dims[d];
    int64_t outer = 1, inner = 1, extent = data->shape.dims[ax];
    for (int d = 0; d < ax; d++)
        outer *= data->shape.dims[d];
    for (int d = ax + 1; d < data->shape.rank; d++)
        inner *= data->shape.dims[d];
    int64_t nidx = kiln_shape_numel(&indices->shape);
    for (int64_t i = 0; i < nidx; i++) {
        int64_t k = onnx_load_i64(indices->dtype, indices->data, i);
        if (k < -extent || k >= extent)
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                               "index %lld is out of range for axis %d of extent %lld",
                               (long long)k, ax, (long long)extent);
    }
    kiln_tensor res;
    s = alloc_out(&res, data->dtype, &os, err);
    if (s != KILN_OK)
        return s;
    size_t es = kiln_dtype_size(data->dtype), row = (size_t)inner * es;
    char *dst = res.data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < nidx; i++) {
            int64_t k = onnx_load_i64(indices->dtype, indices->data, i);
            if (k < 0)
                k += extent;
            memcpy(dst, (const char *)data->data + (size_t)(o * extent + k) * row, row);
            dst += row;
        }
    *out = res;
    return KILN_OK;
}

kiln_status onnx_fold_concat(const kiln_tensor *const *ins, int n, int64_t axis, kiln_tensor *out,
                             kiln_error *err)
{
    if (n < 1)
        return kiln_errorf(err, KILN_ERR_INVALID_GRAPH, "no inputs");
    const kiln_tensor *a = ins[0];
    int ax = 0;
    kiln_status s = norm_axis(axis, a->shape.rank, &ax, err);
    if (s != KILN_OK)
        return s;
    kiln_shape os = a->shape;
    os.dims[ax] = 0;
    for (int i = 0; i < n; i++) {
        const kiln_tensor *t = ins[i];
        kiln_shape_buf b0, b1;
        if (t->dtype != a->dtype)
            return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "input %d is %s, input 0 is %s", i,
                               kiln_dtype_name(t->dtype), kiln_dtype_name(a->dtype));
        bool ok = t->shape.rank == a->shape.rank;
        for (int d = 0; ok && d < a->shape.rank; d++)
            ok = d == ax || t->shape.dims[d] == a->shape.dims[d];
        if (!ok)
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                               "input %d has shape %s, incompatible with input 0's %s on axis %d",
                               i, kiln_shape_fmt(&t->shape, &b0), kiln_shape_fmt(&a->shape, &b1),
                               ax);
        if (os.dims[ax] > INT64_MAX / 2 - t->shape.dims[ax])
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "concatenated extent overflows");
        os.dims[ax] += t->shape.dims[ax];
    }
    kiln_tensor r;
    s = alloc_out(&r, a->dtype, &os, err);
    if (s != KILN_OK)
        return s;
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < ax; d++)
        outer *= a->shape.dims[d];
    for (int d = ax + 1; d < a->shape.rank; d++)
        inner *= a->shape.dims[d];
    size_t es = kiln_dtype_size(a->dtype);
    char *dst = r.data;
    for (int64_t o = 0; o < outer; o++)
        for (int i = 0; i < n; i++) {
            size_t chunk = (size_t)(ins[i]->shape.dims[ax] * inner) * es;
            memcpy(dst, (const char *)ins[i]->data + (size_t)o * chunk, chunk);
            dst += chunk;
        }
    *out = r;
    return KILN_OK;
}

kiln_status onnx_fold_slice(const kiln_tensor *x, const int64_t *starts, const int64_t *ends,
                            const int64_t *axes, const int64_t *steps, int n, kiln_tensor *out,
                            kiln_error *err)
{
    int rank = x->shape.rank;
    int64_t st[KILN_MAX_RANK], step[KILN_MAX_RANK];
    kiln_shape os = x->shape;
    bool seen[KILN_MAX_RANK] = {false};
    for (int d = 0; d < rank; d++) {
        st[d] = 0;
        step[d] = 1;
    }
    for (int i = 0; i < n; i++) {
        int ax = 0;
        kiln_status s = norm_axis(axes ? axes[i] : i, rank, &ax, err);
        if (s != KILN_OK)
            return s;
        if (seen[ax])
            return kiln_errorf(err, KILN_ERR_INVALID_GRAPH, "axis %d is sliced twice", ax);
        seen[ax] = true;
        int64_t k = steps ? steps[i] : 1, e = x->shape.dims[ax];
        if (k == 0)
            return kiln_errorf(err, KILN_ERR_INVALID_GRAPH, "step 0 on axis %d", ax);
        if (k == INT64_MIN)
            k = -INT64_MAX;
        int64_t b = starts[i], f = ends[i];
        /* ONNX clamping: negative indices count from the end; starts clamp to
         * [0, e] (or [0, e-1] for negative steps), ends to [0, e] ([-1, e-1]) */
        if (b < 0)
            b = b < -e ? 0 : b + e;
        if (f < 0)
            f = f < -e ? -1 : f + e;
        if (k > 0) {
            if (b > e)
                b = e;
            if (f > e)
                f = e;
            if (f < 0)
                f = 0;
            os.dims[ax] = f > b ? (f - b - 1) / k + 1 : 0;
        } else {
            if (b > e - 1)
                b = e - 1;
            if (f > e - 1)
                f = e - 1;
            os.dims[ax] = b > f ? (b - f - 1) / (-k) + 1 : 0;
        }
        st[ax] = b;
        step[ax] = k;
    }
    kiln_tensor r;
    kiln_status s = alloc_out(&r, x->dtype, &os, err);
    if (s != KILN_OK)
        return s;
    int64_t strides[KILN_MAX_RANK];
    int64_t acc = 1;
    for (int d = rank - 1; d >= 0; d--) {
        strides[d] = acc;
        acc *= x->shape.dims[d];
    }
    size_t es = kiln_dtype_size(x->dtype);
    int64_t total = kiln_shape_numel(&os);
    for (int64_t i = 0; i < total; i++) {
        int64_t rem = i, off = 0;
        for (int d = rank - 1; d >= 0; d--) {
            int64_t c = rem % os.dims[d];
            rem /= os.dims[d];
            off += (st[d] + c * step[d]) * strides[d];
        }
        memcpy((char *)r.data + (size_t)i * es, (const char *)x->data + (size_t)off * es, es);
    }
    *out = r;
    return KILN_OK;
}

kiln_status onnx_fold_reshape(const kiln_tensor *x, const kiln_shape *shape, kiln_tensor *out,
                              kiln_error *err)
{
    if (kiln_shape_numel(shape) != kiln_shape_numel(&x->shape))
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "element counts differ");
    kiln_tensor r;
    kiln_status s = alloc_out(&r, x->dtype, shape, err);
    if (s != KILN_OK)
        return s;
    memcpy(r.data, x->data, (size_t)kiln_tensor_nbytes(&r));
    *out = r;
    return KILN_OK;
}

kiln_status onnx_fold_cast(const kiln_tensor *x, kiln_dtype to, kiln_tensor *out,
                           kiln_error *err)
{
    kiln_tensor r;
    kiln_status s = alloc_out(&r, to, &x->shape, err);
    if (s != KILN_OK)
        return s;
    int64_t n = kiln_shape_numel(&x->shape);
    bool from_int = onnx_dtype_is_int(x->dtype);
    for (int64_t i = 0; i < n; i++) {
        if (from_int && x->dtype != KILN_DTYPE_UINT64)
            store_i64(to, r.data, i, onnx_load_i64(x->dtype, x->data, i));
        else
            store_f64(to, r.data, i, onnx_load_f64(x->dtype, x->data, i));
    }
    *out = r;
    return KILN_OK;
}

kiln_status onnx_fold_fill(const kiln_shape *shape, const kiln_tensor *value, kiln_tensor *out,
                           kiln_error *err)
{
    if (kiln_shape_numel(&value->shape) != 1)
        return kiln_errorf(err, KILN_ERR_INVALID_GRAPH, "the fill value must have one element");
    for (int d = 0; d < shape->rank; d++)
        if (shape->dims[d] < 0)
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH, "shape entry %d is %lld", d,
                               (long long)shape->dims[d]);
    kiln_tensor r;
    kiln_status s = alloc_out(&r, value->dtype, shape, err);
    if (s != KILN_OK)
        return s;
    size_t es = kiln_dtype_size(value->dtype);
    int64_t n = kiln_shape_numel(shape);
    for (int64_t i = 0; i < n; i++)
        memcpy((char *)r.data + (size_t)i * es, value->data, es);
    *out = r;
    return KILN_OK;
}
