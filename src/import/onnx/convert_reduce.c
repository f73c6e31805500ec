/* import/onnx/convert_reduce.c: converters for the reductions, ArgMax/ArgMin,
 * CumSum, TopK and Einsum. Parameters that newer opsets pass as inputs become
 * kiln attributes (docs/OPS.md): the reductions' axes (ReduceSum from opset
 * 13, the others from 18), CumSum's axis and TopK's K (from opset 10); a
 * non-constant one is reported by onnx_in_ints with the standard message. */
#include <string.h>

#include "import/onnx/onnx.h"
#include "util/error.h"

/* One reduction node over input 0; axes (n_axes < 0: absent) as attribute. */
static kiln_status emit_reduce(onnx_ctx *c, kiln_op op, const int64_t *axes, int n_axes,
                               kiln_error *err)
{
    kiln_status s = onnx_no_outputs_from(c, 1, err);
    if (s != KILN_OK)
        return s;
    const kiln_value *x = onnx_need(c, 0, "data", err);
    if (!x)
        return err ? err->status : KILN_ERR_INVALID_GRAPH;
    int in = x->id;
    int node = onnx_emit(c, op, NULL, &in, 1, 1, err);
    if (node < 0)
        return KILN_ERR_OUT_OF_MEMORY;
    if (n_axes >= 0)
        s = kiln_node_set_ints(c->g, node, "axes", axes, n_axes);
    if (s == KILN_OK)
        s = onnx_copy_attrs(c, node, "keepdims noop_with_empty_axes", err);
    if (s != KILN_OK)
        return s;
    return onnx_bind(c, 0, kiln_graph_node_output(c->g, node, 0), err);
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

static kiln_status conv_argmax(onnx_ctx *c, kiln_error *err)
{
    return onnx_convert_simple(c, KILN_OP_ARGMAX, "axis keepdims select_last_index", err);
}

static kiln_status conv_argmin(onnx_ctx *c, kiln_error *err)
{
    return onnx_convert_simple(c, KILN_OP_ARGMIN, "axis keepdims select_last_index", err);
}

/* CumSum: input 1 (axis, a scalar) becomes the attribute `axis`. */
static kiln_status conv_cumsum(onnx_ctx *c, kiln_error *err)
{
    kiln_status s = onnx_no_outputs_from(c, 1, err);
    if (s != KILN_OK)
        return s;
    const kiln_value *x = onnx_need(c, 0, "x", err);
    if (!x)
        return err ? err->status : KILN_ERR_INVALID_GRAPH;
    const int64_t *axis = NULL;
    int n = 0;
    if ((s = onnx_in_ints(c, 1, "axis", &axis, &n, err)) != KILN_OK)
        return s;
    if (n != 1)
        return onnx_node_error(c, KILN_ERR_INVALID_ARGUMENT, err,
                               "input 1 (axis) has %d entries, expected 1", n);
    int in = x->id;
    int node = onnx_emit(c, KILN_OP_CUMSUM, NULL, &in, 1, 1, err);
    if (node < 0)
        return KILN_ERR_OUT_OF_MEMORY;
    s = kiln_node_set_int(c->g, node, "axis", axis[0]);
    if (s == KILN_OK)
        s = onnx_copy_attrs(c, node, "exclusive reverse", err);
    if (s != KILN_OK)
        return s;
    return onnx_bind(c, 0, kiln_graph_node_output(c->g, node, 0), err);
}

/* TopK: k from the attribute (opset 1) or input 1 (opset 10: a 1-element
 * vector); two outputs, values and indices. */
static kiln_status emit_topk(onnx_ctx *c, int64_t k, kiln_error *err)
{
    const kiln_value *x = onnx_need(c, 0, "X", err);
    if (!x)
        return err ? err->status : KILN_ERR_INVALID_GRAPH;
    int in = x->id;
    int node = onnx_emit(c, KILN_OP_TOPK, NULL, &in, 1, 2, err);
    if (node < 0)
        return KILN_ERR_OUT_OF_MEMORY;
    kiln_status s = kiln_node_set_int(c->g, node, "k", k);
    if (s == KILN_OK)
        s = onnx_copy_attrs(c, node, "axis largest sorted", err);
    if (s == KILN_OK)
        s = onnx_bind(c, 0, kiln_graph_node_output(c->g, node, 0), err);
    if (s == KILN_OK && onnx_n_out(c) > 1)
        s = onnx_bind(c, 1, kiln_graph_node_output(c->g, node, 1), err);
    return s;
}

static kiln_status conv_topk1(onnx_ctx *c, kiln_error *err)
{
    if (!onnx_attr(c, "k"))
        return onnx_node_error(c, KILN_ERR_INVALID_ARGUMENT, err, "attribute 'k' is required");
    return emit_topk(c, onnx_attr_int(c, "k", 0), err);
}

static kiln_status conv_topk10(onnx_ctx *c, kiln_error *err)
{
    const int64_t *k = NULL;
    int n = 0;
    kiln_status s = onnx_in_ints(c, 1, "K", &k, &n, err);
    if (s != KILN_OK)
        return s;
    if (n != 1)
        return onnx_node_error(c, KILN_ERR_INVALID_ARGUMENT, err,
                               "input 1 (K) has %d entries, expected 1", n);
    return emit_topk(c, k[0], err);
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
