/* import/onnx/convert_reduce.c: converters for the reductions, ArgMax/ArgMin,
 * CumSum, TopK and Einsum. Parameters that newer opsets pass as inputs become
 * kiln attributes (docs/OPS.md): the reductions' axes (ReduceSum from opset
 * 13, the others from 18), CumSum's axis and TopK's K (from opset 10); a
 * non-constant one is reported by onnx_in_ints with the standard message. */
#include <string.h>

#include "import/onnx/convert_movement.h"
#include "import/onnx/convert_rtparams.h"
#include "import/onnx/onnx.h"
#include "util/error.h"

/* One reduction node over input 0; axes (n_axes < 0: absent) as attribute. */
static kiln_status emit_reduce(onnx_ctx *c, kiln_op op, const int64_t *axes, int n_axes,
                               kiln_error *err)
{
    const kiln_value *x;
    kiln_status s = onnx_need_in0(c, "data", &x, err);
    if (s != KILN_OK)
        return s;
    int in = x->id;
    kiln_attr a = onnx_attr_is("axes", axes, n_axes);
    return onnx_emit_bind(c, op, &in, 1, &a, n_axes >= 0 ? 1 : 0, "keepdims noop_with_empty_axes",
                          1, err);
}

/* opsets with axes as an attribute */
static kiln_status reduce_attr(onnx_ctx *c, kiln_op op, kiln_error *err)
{
    const int64_t *axes = NULL;
    int n = onnx_attr_ints(c, "axes", &axes);
    return emit_reduce(c, op, axes, n, err);
}

/* opsets with axes as an optional input (empty or absent: all axes, or none
 * with noop_with_empty_axes) */
static kiln_status reduce_input(onnx_ctx *c, kiln_op op, kiln_error *err)
{
    const int64_t *axes = NULL;
    int n = -1;
    if (onnx_in(c, 1) >= 0) {
        kiln_status s = onnx_in_ints(c, 1, "axes", &axes, &n, err);
        if (s != KILN_OK)
            return s;
    }
    return emit_reduce(c, op, axes, n, err);
}

#define REDUCE_CONVERTERS(name, op)                                                                \
    static kiln_status conv_##name##_attr(onnx_ctx *c, kiln_error *err)                            \
    {                                                                                              \
        return reduce_attr(c, op, err);                                                            \
    }                                                                                              \
    static kiln_status conv_##name##_input(onnx_ctx *c, kiln_error *err)                           \
    {                                                                                              \
        return reduce_input(c, op, err);                                                           \
    }

REDUCE_CONVERTERS(reducemean, KILN_OP_REDUCEMEAN)
REDUCE_CONVERTERS(reducesum, KILN_OP_REDUCESUM)
REDUCE_CONVERTERS(reducemax, KILN_OP_REDUCEMAX)
REDUCE_CONVERTERS(reducemin, KILN_OP_REDUCEMIN)
REDUCE_CONVERTERS(reduceprod, KILN_OP_REDUCEPROD)
REDUCE_CONVERTERS(reducel1, KILN_OP_REDUCEL1)
REDUCE_CONVERTERS(reducel2, KILN_OP_REDUCEL2)
REDUCE_CONVERTERS(reducelogsum, KILN_OP_REDUCELOGSUM)
REDUCE_CONVERTERS(reducelogsumexp, KILN_OP_REDUCELOGSUMEXP)
REDUCE_CONVERTERS(reducesumsquare, KILN_OP_REDUCESUMSQUARE)

CONV_SIMPLE(conv_argmax, KILN_OP_ARGMAX, "axis keepdims select_last_index")
CONV_SIMPLE(conv_argmin, KILN_OP_ARGMIN, "axis keepdims select_last_index")

/* Input 1, a constant 1-element vector of integers (CumSum's axis, TopK's K),
 * into *v; computed first when it comes from constants or static shapes (a
 * detection network's K = min(pre_nms_top_n, anchors)). */
static kiln_status in_one_int(onnx_ctx *c, const char *what, int64_t *v, kiln_error *err)
{
    const int64_t *p = NULL;
    int n = 0;
    kiln_status s = onnx_in_ints_eval(c, 1, what, &p, &n, err);
    if (s != KILN_OK)
        return s;
    if (n != 1)
        return onnx_node_error(c, KILN_ERR_INVALID_ARGUMENT, err,
                               "input 1 (%s) has %d entries, expected 1", what, n);
    *v = p[0];
    return KILN_OK;
}

/* CumSum: input 1 (axis, a scalar) becomes the attribute `axis`. */
static kiln_status conv_cumsum(onnx_ctx *c, kiln_error *err)
{
    const kiln_value *x;
    kiln_status s = onnx_need_in0(c, "x", &x, err);
    if (s != KILN_OK)
        return s;
    int64_t axis = 0;
    if (onnx_in(c, 1) >= 0 && onnx_rt_is_data(c, 1, "axis", err, &s))
        return s != KILN_OK ? s : onnx_rt_cumsum(c, err); /* the axis is data */
    if ((s = in_one_int(c, "axis", &axis, err)) != KILN_OK)
        return s;
    int in = x->id;
    kiln_attr a = onnx_attr_i("axis", axis);
    return onnx_emit_bind(c, KILN_OP_CUMSUM, &in, 1, &a, 1, "exclusive reverse", 1, err);
}

/* TopK: k from the attribute (opset 1) or input 1 (opset 10: a 1-element
 * vector); two outputs, values and indices. */
static kiln_status emit_topk(onnx_ctx *c, int64_t k, kiln_error *err)
{
    const kiln_value *x = onnx_need(c, 0, "X", err);
    if (!x)
        return err ? err->status : KILN_ERR_INVALID_GRAPH;
    int in = x->id;
    kiln_attr a = onnx_attr_i("k", k);
    /* output 1 is bound only where the node lists it (onnx_bind) */
    return onnx_emit_bind(c, KILN_OP_TOPK, &in, 1, &a, 1, "axis largest sorted", 2, err);
}

static kiln_status conv_topk1(onnx_ctx *c, kiln_error *err)
{
    if (!onnx_attr(c, "k"))
        return onnx_node_error(c, KILN_ERR_INVALID_ARGUMENT, err, "attribute 'k' is required");
    return emit_topk(c, onnx_attr_int(c, "k", 0), err);
}

static kiln_status conv_topk10(onnx_ctx *c, kiln_error *err)
{
    int64_t k = 0;
    kiln_status s = in_one_int(c, "K", &k, err);
    return s != KILN_OK ? s : emit_topk(c, k, err);
}

static kiln_status conv_einsum(onnx_ctx *c, kiln_error *err)
{
    if (!onnx_attr(c, "equation"))
        return onnx_node_error(c, KILN_ERR_INVALID_ARGUMENT, err,
                               "attribute 'equation' is required");
    return onnx_convert_simple(c, KILN_OP_EINSUM, "equation", err);
}

#define RED_ATTRS_OLD "axes:ints keepdims:int"
#define RED_ATTRS_NEW "keepdims:int noop_with_empty_axes:int"

const onnx_converter onnx_reduce_converters[] = {
    {"ReduceMean", 1, conv_reducemean_attr, RED_ATTRS_OLD},
    {"ReduceMean", 18, conv_reducemean_input, RED_ATTRS_NEW},
    {"ReduceSum", 1, conv_reducesum_attr, RED_ATTRS_OLD},
    {"ReduceSum", 13, conv_reducesum_input, RED_ATTRS_NEW},
    {"ReduceMax", 1, conv_reducemax_attr, RED_ATTRS_OLD},
    {"ReduceMax", 18, conv_reducemax_input, RED_ATTRS_NEW},
    {"ReduceMin", 1, conv_reducemin_attr, RED_ATTRS_OLD},
    {"ReduceMin", 18, conv_reducemin_input, RED_ATTRS_NEW},
    {"ReduceProd", 1, conv_reduceprod_attr, RED_ATTRS_OLD},
    {"ReduceProd", 18, conv_reduceprod_input, RED_ATTRS_NEW},
    {"ReduceL1", 1, conv_reducel1_attr, RED_ATTRS_OLD},
    {"ReduceL1", 18, conv_reducel1_input, RED_ATTRS_NEW},
    {"ReduceL2", 1, conv_reducel2_attr, RED_ATTRS_OLD},
    {"ReduceL2", 18, conv_reducel2_input, RED_ATTRS_NEW},
    {"ReduceLogSum", 1, conv_reducelogsum_attr, RED_ATTRS_OLD},
    {"ReduceLogSum", 18, conv_reducelogsum_input, RED_ATTRS_NEW},
    {"ReduceLogSumExp", 1, conv_reducelogsumexp_attr, RED_ATTRS_OLD},
    {"ReduceLogSumExp", 18, conv_reducelogsumexp_input, RED_ATTRS_NEW},
    {"ReduceSumSquare", 1, conv_reducesumsquare_attr, RED_ATTRS_OLD},
    {"ReduceSumSquare", 18, conv_reducesumsquare_input, RED_ATTRS_NEW},
    {"ArgMax", 1, conv_argmax, "axis:int keepdims:int"},
    {"ArgMax", 12, conv_argmax, "axis:int keepdims:int select_last_index:int"},
    {"ArgMin", 1, conv_argmin, "axis:int keepdims:int"},
    {"ArgMin", 12, conv_argmin, "axis:int keepdims:int select_last_index:int"},
    {"CumSum", 11, conv_cumsum, "exclusive:int reverse:int"},
    {"TopK", 1, conv_topk1, "axis:int k:int"},
    {"TopK", 10, conv_topk10, "axis:int"},
    {"TopK", 11, conv_topk10, "axis:int largest:int sorted:int"},
    {"Einsum", 12, conv_einsum, "equation:string"},
    {NULL, 0, NULL, NULL},
};
