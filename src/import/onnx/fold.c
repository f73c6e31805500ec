/* import/onnx/fold.c: evaluation of constant subgraphs at import time.
 *
 * Exporters compute shapes at run time (Shape -> Gather -> Concat -> Reshape,
 * ConstantOfShape/Equal/Where around Expand). kiln's shapes are static, so when
 * every input of such a node is known the converter computes the result here
 * and binds a constant instead of emitting a node.
 *
 * Ops that kiln has with a reference kernel are folded by running that kernel
 * on the constants (onnx_fold_op, see fold_op.h): Gather, Concat, Slice, Expand
 * and Reshape through the wrappers below, the others (Add/Sub/Mul/Div/Equal,
 * Where, Cast, ...) through onnx_emit_or_fold. So folding and run time share
 * one implementation, integer semantics included (ref/elemwise.c,
 * ref/compare.c: integer arithmetic wraps, division truncates toward zero and a
 * zero divisor is an error; Cast from a floating type saturates). The one fold
 * computed here directly is ConstantOfShape's fill, which is no kiln op. Every
 * result is bounded by ONNX_FOLD_MAX_BYTES so that a hostile file cannot make
 * the importer allocate what its size does not justify. */
#include <string.h>

#include "import/onnx/fold_op.h"
#include "import/onnx/onnx.h"
#include "util/error.h"
#include "ref/elemwise_common.h"

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

/* ---- results ------------------------------------------------------------ */

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
        s = kiln_op_run_ref(&node, ins, pres, err);
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
