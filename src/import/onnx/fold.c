/* import/onnx/fold.c: evaluation of constant subgraphs at import time.
 *
 * Exporters compute shapes at run time (Shape -> Gather -> Concat -> Reshape,
 * ConstantOfShape/Equal/Where around Expand). kiln's shapes are static, so when
 * every input of such a node is known the converter computes the result here
 * and binds a constant instead of emitting a node.
 *
 * Ops that kiln has with a reference kernel (Gather, Concat, Slice, Expand,
 * Reshape, and every op converters fold through onnx_fold_op) are folded by
 * running that kernel on the constants (see fold_op.h), so folding and run
 * time share one implementation. The rest here are folds of ops whose
 * converters still compute them directly (Where copies elements bytewise;
 * Add/Sub/Mul/Div/Equal, Cast). Arithmetic goes through
 * int64 for integer types (C semantics: division truncates; division by zero
 * is an error) and through double for floating types. Every result is bounded
 * by ONNX_FOLD_MAX_BYTES so that a hostile file cannot make the importer
 * allocate what its size does not justify. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "import/onnx/fold_op.h"
#include "import/onnx/onnx.h"
#include "util/error.h"
#include "ref/elemwise_common.h"
#include "util/half.h"

/* ---- element access ----------------------------------------------------- */

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

/* Element access for any numeric dtype: the reference kernels' own
 * (ref/elemwise_common.c), so folding reads values exactly as kernels do. */
double onnx_load_f64(kiln_dtype t, const void *data, int64_t i)
{
    return kiln_ew_load_f64(t, data, i);
}

int64_t onnx_load_i64(kiln_dtype t, const void *data, int64_t i)
{
    return kiln_ew_load_i64(t, data, i);
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
    case KILN_DTYPE_FLOAT16: ((uint16_t *)data)[i] = kiln_f32_to_f16((float)v); break;
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
    case KILN_DTYPE_FLOAT16: ((uint16_t *)data)[i] = kiln_f64_to_f16(v); break;
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

/* ---- folds through kiln ops ------------------------------------------------
 * Ops that kiln has (with a reference kernel) are folded by running that
 * kernel: onnx_fold_op builds a stand-alone node around the constants, infers
 * the output shapes and runs the reference kernel, so folding and run time
 * share one implementation. */

kiln_status onnx_fold_op(kiln_op op, const kiln_attr *attrs, int n_attrs,
                         const kiln_tensor *const *ins, int n_in, kiln_tensor *outs, int n_out,
                         kiln_error *err)
{
    const kiln_op_info *info = kiln_op_get(op);
    if (!info || !info->infer || !info->ref)
        return kiln_errorf(err, KILN_ERR_INTERNAL, "no op %d to fold with", (int)op);
    if (n_in < info->min_inputs || n_in > info->max_inputs || n_in > ONNX_FOLD_MAX_IO ||
        n_out < info->min_outputs || n_out > info->max_outputs || n_out > ONNX_FOLD_MAX_IO)
        return kiln_errorf(err, KILN_ERR_INVALID_GRAPH,
                           "%s with %d inputs and %d outputs cannot be folded", info->name, n_in,
                           n_out);
    kiln_value vin[ONNX_FOLD_MAX_IO], vout[ONNX_FOLD_MAX_IO];
    const kiln_value *pin[ONNX_FOLD_MAX_IO];
    kiln_value *pout[ONNX_FOLD_MAX_IO];
    int in_ids[ONNX_FOLD_MAX_IO], out_ids[ONNX_FOLD_MAX_IO];
    for (int i = 0; i < n_in; i++) {
        pin[i] = NULL;
        in_ids[i] = -1;
        if (!ins[i])
            continue;
        vin[i] = (kiln_value){.id = i, .name = "constant", .kind = KILN_VALUE_CONST,
                              .dtype = ins[i]->dtype, .shape = ins[i]->shape,
                              .data = ins[i]->data, .producer = -1};
        pin[i] = &vin[i];
        in_ids[i] = i;
    }
    for (int k = 0; k < n_out; k++) {
        vout[k] = (kiln_value){.id = n_in + k, .name = "folded", .kind = KILN_VALUE_NODE,
                               .producer = 0, .output_index = k};
        pout[k] = &vout[k];
        out_ids[k] = n_in + k;
    }
    kiln_node node = {.id = 0, .op = op, .name = "fold", .n_inputs = n_in, .inputs = in_ids,
                      .n_outputs = n_out, .outputs = out_ids, .n_attrs = n_attrs,
                      .cap_attrs = n_attrs, .attrs = (kiln_attr *)attrs};
    kiln_status s = info->infer(&node, pin, pout, err);
    if (s != KILN_OK)
        return s;
    kiln_tensor res[ONNX_FOLD_MAX_IO];
    kiln_tensor *pres[ONNX_FOLD_MAX_IO];
    int done = 0; /* outputs allocated */
    while (done < n_out && s == KILN_OK) {
        s = alloc_out(&res[done], vout[done].dtype, &vout[done].shape, err);
        if (s == KILN_OK) {
            pres[done] = &res[done];
            done++;
        }
    }
    if (s == KILN_OK)
        s = info->ref(&node, ins, pres, err);
    if (s != KILN_OK) {
        for (int k = 0; k < done; k++)
            kiln_tensor_release(&res[k]);
        return s;
    }
    for (int k = 0; k < n_out; k++)
        outs[k] = res[k];
    return KILN_OK;
}

kiln_status onnx_fold_expand(const kiln_tensor *x, const int64_t *shape, int n, kiln_tensor *out,
                             kiln_error *err)
{
    kiln_attr a = onnx_attr_is("shape", shape, n);
    const kiln_tensor *ins[1] = {x};
    return onnx_fold_op(KILN_OP_EXPAND, &a, 1, ins, 1, out, 1, err);
}

kiln_status onnx_fold_gather(const kiln_tensor *data, const kiln_tensor *indices, int64_t axis,
                             kiln_tensor *out, kiln_error *err)
{
    kiln_attr a = onnx_attr_i("axis", axis);
    const kiln_tensor *ins[2] = {data, indices};
    return onnx_fold_op(KILN_OP_GATHER, &a, 1, ins, 2, out, 1, err);
}

kiln_status onnx_fold_concat(const kiln_tensor *const *ins, int n, int64_t axis, kiln_tensor *out,
                             kiln_error *err)
{
    kiln_attr a = onnx_attr_i("axis", axis);
    return onnx_fold_op(KILN_OP_CONCAT, &a, 1, ins, n, out, 1, err);
}

kiln_status onnx_fold_slice(const kiln_tensor *x, const int64_t *starts, const int64_t *ends,
                            const int64_t *axes, const int64_t *steps, int n, kiln_tensor *out,
                            kiln_error *err)
{
    kiln_attr a[4] = {onnx_attr_is("starts", starts, n), onnx_attr_is("ends", ends, n)};
    int na = 2;
    if (axes)
        a[na++] = onnx_attr_is("axes", axes, n);
    if (steps)
        a[na++] = onnx_attr_is("steps", steps, n);
    const kiln_tensor *ins[1] = {x};
    return onnx_fold_op(KILN_OP_SLICE, a, na, ins, 1, out, 1, err);
}

kiln_status onnx_fold_reshape(const kiln_tensor *x, const kiln_shape *shape, kiln_tensor *out,
                              kiln_error *err)
{
    /* allowzero: the target extents are literal */
    kiln_attr a[2] = {onnx_attr_is("shape", shape->dims, shape->rank),
                      onnx_attr_i("allowzero", 1)};
    const kiln_tensor *ins[1] = {x};
    return onnx_fold_op(KILN_OP_RESHAPE, a, 2, ins, 1, out, 1, err);
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
