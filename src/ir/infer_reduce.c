/* ir/infer_reduce.c: shape inference for the reductions (ReduceSum, Mean, Max,
 * Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare), the arg-reductions
 * (ArgMax, ArgMin), CumSum and TopK, and the axes resolution the reduction
 * kernels share. Every function checks what its kernel relies on: a numeric
 * dtype, a static shape, attributes of the right type and range. */
#include <string.h>

#include "ir/graph.h"
#include "ir/infer_util.h"
#include "util/error.h"

kiln_status kiln_reduce_axes(const kiln_node *n, int rank, bool reduced[KILN_MAX_RANK],
                             bool *keepdims, kiln_error *err)
{
    static const kiln_attr_spec specs[] = {{"axes", KILN_ATTR_INTS},
                                      {"keepdims", KILN_ATTR_INT},
                                      {"noop_with_empty_axes", KILN_ATTR_INT}};
    kiln_status s = kiln_node_attrs_check(n, specs, 3, err);
    if (s != KILN_OK || (s = kiln_infer_check_flag(n, "keepdims", err)) != KILN_OK ||
        (s = kiln_infer_check_flag(n, "noop_with_empty_axes", err)) != KILN_OK)
        return s;
    const int64_t *axes = NULL;
    int len = kiln_attr_ints(n, "axes", &axes);
    bool mask[KILN_MAX_RANK] = {false};
    if (len <= 0) {
        bool noop = kiln_attr_int(n, "noop_with_empty_axes", 0) == 1;
        for (int d = 0; d < rank; d++)
            mask[d] = !noop;
    }
    for (int i = 0; i < len; i++) {
        if (axes[i] < -rank || axes[i] >= rank)
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "axes[%d] = %lld is out of range for an input of rank %d", i,
                               (long long)axes[i], rank);
        int d = (int)(axes[i] < 0 ? axes[i] + rank : axes[i]);
        if (mask[d])
            return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                               "axes[%d] = %lld repeats axis %d", i, (long long)axes[i], d);
        mask[d] = true;
    }
    memcpy(reduced, mask, sizeof mask);
    *keepdims = kiln_attr_int(n, "keepdims", 1) == 1;
    return KILN_OK;
}
/* A present input must have a numeric (non-bool) dtype and a static shape. */
static kiln_status check_numeric(const kiln_value *v, int k, const char *label, kiln_error *err)
{
    kiln_shape_buf b;
    if (v->dtype == KILN_DTYPE_UNDEFINED || v->dtype == KILN_DTYPE_BOOL ||
        v->dtype >= KILN_DTYPE_COUNT)
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH, "input %d (%s) is %s, expected a number type",
                           k, label, kiln_dtype_name(v->dtype));
    if (kiln_shape_numel(&v->shape) < 0)
        return kiln_errorf(err, KILN_ERR_UNSUPPORTED,
                           "input %d (%s) has shape %s: symbolic or too large", k, label,
                           kiln_shape_fmt(&v->shape, &b));
    return KILN_OK;
}

static bool is_float_dtype(kiln_dtype t)
{
    return t == KILN_DTYPE_FLOAT32 || t == KILN_DTYPE_FLOAT64 || t == KILN_DTYPE_FLOAT16;
}

/* Reductions: the input dtype is kept; ReduceMean takes float types only (an
 * integer mean would need a rounding rule) and refuses an empty reduction
 * (0/0); the others reduce an empty set to their identity (Sum 0, Prod 1,
 * Max -inf, Min +inf, LogSum/LogSumExp -inf). */
kiln_status kiln_infer_reduce(const kiln_node *n, const kiln_value *const *in,
                              kiln_value *const *out, kiln_error *err)
{
    kiln_status s = check_numeric(in[0], 0, "X", err);
    if (s != KILN_OK)
        return s;
    bool mean = n->op == KILN_OP_REDUCEMEAN;
    if (mean && !is_float_dtype(in[0]->dtype))
        return kiln_errorf(err, KILN_ERR_TYPE_MISMATCH,
                           "input 0 (X) is %s, expected float32, float64 or float16",
                           kiln_dtype_name(in[0]->dtype));
    const kiln_shape *xs = &in[0]->shape;
    bool reduced[KILN_MAX_RANK], keep;
    if ((s = kiln_reduce_axes(n, xs->rank, reduced, &keep, err)) != KILN_OK)
        return s;
    kiln_shape o = {.rank = 0};
    for (int d = 0; d < xs->rank; d++) {
        if (mean && reduced[d] && xs->dims[d] == 0) {
            kiln_shape_buf b1;
            return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                               "X has shape %s: cannot take the mean over empty axis %d",
                               kiln_shape_fmt(xs, &b1), d);
        }
        if (!reduced[d])
            o.dims[o.rank++] = xs->dims[d];
        else if (keep)
            o.dims[o.rank++] = 1;
    }
    out[0]->dtype = in[0]->dtype;
    out[0]->shape = o;
    return KILN_OK;
}

/* ArgMax/ArgMin: axis (0), keepdims (1), select_last_index (0); int64 output
 * with the axis removed or kept as 1. The axis must not be empty. */
kiln_status kiln_infer_argreduce(const kiln_node *n, const kiln_value *const *in,
                                 kiln_value *const *out, kiln_error *err)
{
    static const kiln_attr_spec specs[] = {{"axis", KILN_ATTR_INT},
                                           {"keepdims", KILN_ATTR_INT},
                                           {"select_last_index", KILN_ATTR_INT}};
    kiln_status s = check_numeric(in[0], 0, "data", err);
    if (s != KILN_OK || (s = kiln_node_attrs_check(n, specs, 3, err)) != KILN_OK ||
        (s = kiln_infer_check_flag(n, "select_last_index", err)) != KILN_OK)
        return s;
    if (kiln_node_attr(n, "keepdims") && (s = kiln_infer_check_flag(n, "keepdims", err)) != KILN_OK)
        return s;
    const kiln_shape *xs = &in[0]->shape;
    int axis;
    if ((s = kiln_infer_norm_axis(kiln_attr_int(n, "axis", 0), xs->rank, "axis", xs, &axis,
                                  err)) != KILN_OK)
        return s;
    if (xs->dims[axis] == 0) {
        kiln_shape_buf b;
        return kiln_errorf(err, KILN_ERR_SHAPE_MISMATCH,
                           "data has shape %s: axis %d is empty, there is no %s", kiln_shape_fmt(xs, &b),
                           axis, n->op == KILN_OP_ARGMAX ? "maximum" : "minimum");
    }
    bool keep = kiln_attr_int(n, "keepdims", 1) == 1;
    kiln_shape o = {.rank = 0};
    for (int d = 0; d < xs->rank; d++) {
        if (d != axis)
            o.dims[o.rank++] = xs->dims[d];
        else if (keep)
            o.dims[o.rank++] = 1;
    }
    out[0]->dtype = KILN_DTYPE_INT64;
    out[0]->shape = o;
    return KILN_OK;
}

/* CumSum: axis (required; ONNX's constant input), exclusive (0), reverse (0);
 * the output has the input's dtype and shape. */
kiln_status kiln_infer_cumsum(const kiln_node *n, const kiln_value *const *in,
                              kiln_value *const *out, kiln_error *err)
{
    static const kiln_attr_spec specs[] = {{"axis", KILN_ATTR_INT},
                                           {"exclusive", KILN_ATTR_INT},
                                           {"reverse", KILN_ATTR_INT}};
    kiln_status s = check_numeric(in[0], 0, "x", err);
    if (s != KILN_OK || (s = kiln_node_attrs_check(n, specs, 3, err)) != KILN_OK ||
        (s = kiln_infer_check_flag(n, "exclusive", err)) != KILN_OK ||
        (s = kiln_infer_check_flag(n, "reverse", err)) != KILN_OK)
        return s;
    if (!kiln_node_attr(n, "axis"))
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "attribute 'axis' is required");
    int axis;
    if ((s = kiln_infer_norm_axis(kiln_attr_int(n, "axis", 0), in[0]->shape.rank, "axis",
                                  &in[0]->shape, &axis, err)) != KILN_OK)
        return s;
    out[0]->dtype = in[0]->dtype;
    out[0]->shape = in[0]->shape;
    return KILN_OK;
}

/* TopK: k (required; ONNX's input K), axis (-1), largest (1), sorted (1).
 * Values keep X's dtype, indices are int64; both have X's shape with the
 * axis extent replaced by k, and k may not exceed it. */
kiln_status kiln_infer_topk(const kiln_node *n, const kiln_value *const *in,
                            kiln_value *const *out, kiln_error *err)
{
    static const kiln_attr_spec specs[] = {{"k", KILN_ATTR_INT},
                                           {"axis", KILN_ATTR_INT},
                                           {"largest", KILN_ATTR_INT},
                                           {"sorted", KILN_ATTR_INT}};
    kiln_status s = check_numeric(in[0], 0, "X", err);
    if (s != KILN_OK || (s = kiln_node_attrs_check(n, specs, 4, err)) != KILN_OK)
        return s;
    if (kiln_node_attr(n, "largest") && (s = kiln_infer_check_flag(n, "largest", err)) != KILN_OK)
        return s;
    if (kiln_node_attr(n, "sorted") && (s = kiln_infer_check_flag(n, "sorted", err)) != KILN_OK)
        return s;
    if (!kiln_node_attr(n, "k"))
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT, "attribute 'k' is required");
    const kiln_shape *xs = &in[0]->shape;
    int axis;
    if ((s = kiln_infer_norm_axis(kiln_attr_int(n, "axis", -1), xs->rank, "axis", xs, &axis,
                                  err)) != KILN_OK)
        return s;
    int64_t k = kiln_attr_int(n, "k", 0);
    if (k < 0 || k > xs->dims[axis]) {
        kiln_shape_buf b;
        return kiln_errorf(err, KILN_ERR_INVALID_ARGUMENT,
                           "k = %lld is out of range for axis %d of X with shape %s", (long long)k,
                           axis, kiln_shape_fmt(xs, &b));
    }
    kiln_shape o = *xs;
    o.dims[axis] = k;
    out[0]->dtype = in[0]->dtype;
    out[0]->shape = o;
    if (n->n_outputs > 1 && out[1]) {
        out[1]->dtype = KILN_DTYPE_INT64;
        out[1]->shape = o;
    }
    return KILN_OK;
}
