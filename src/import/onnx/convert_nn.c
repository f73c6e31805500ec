/* import/onnx/convert_nn.c: converters for the neural-network ops:
 * convolution, pooling, normalization, dense layers, softmax, dropout,
 * flatten and ReduceMean. kiln's attributes carry ONNX's names, so most of
 * these copy attributes and check that nothing the op cannot honour (training
 * mode, index outputs, non-spatial batch norm) is asked for. */
#include <string.h>

#include "import/onnx/onnx.h"
#include "util/error.h"

static kiln_status conv_conv(onnx_ctx *c, kiln_error *err)
{
    return onnx_convert_simple(c, KILN_OP_CONV,
                               "auto_pad dilations group kernel_shape pads strides", err);
}

static kiln_status conv_maxpool(onnx_ctx *c, kiln_error *err)
{
    /* storage_order only affects the Indices output, which kiln rejects */
    return onnx_convert_simple(c, KILN_OP_MAXPOOL,
                               "auto_pad ceil_mode dilations kernel_shape pads strides", err);
}

static kiln_status conv_averagepool(onnx_ctx *c, kiln_error *err)
{
    return onnx_convert_simple(c, KILN_OP_AVERAGEPOOL,
                               "auto_pad ceil_mode count_include_pad kernel_shape pads strides",
                               err);
}

static kiln_status conv_global_averagepool(onnx_ctx *c, kiln_error *err)
{
    return onnx_convert_simple(c, KILN_OP_GLOBALAVERAGEPOOL, NULL, err);
}

static kiln_status conv_batchnorm(onnx_ctx *c, kiln_error *err)
{
    if (onnx_attr_int(c, "spatial", 1) != 1)
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err,
                               "spatial=0 (per-activation statistics) is not supported");
    if (onnx_attr_int(c, "training_mode", 0) != 0)
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err,
                               "training_mode=1 is not supported: kiln runs inference only");
    /* is_test, momentum and consumed_inputs do not affect inference */
    return onnx_convert_simple(c, KILN_OP_BATCHNORM, "epsilon", err);
}

static kiln_status conv_gemm(onnx_ctx *c, kiln_error *err)
{
    /* opset < 7 "broadcast" only allowed C to broadcast, which kiln always does */
    return onnx_convert_simple(c, KILN_OP_GEMM, "alpha beta transA transB", err);
}

static kiln_status conv_matmul(onnx_ctx *c, kiln_error *err)
{
    return onnx_convert_simple(c, KILN_OP_MATMUL, NULL, err);
}

static kiln_status conv_layernorm(onnx_ctx *c, kiln_error *err)
{
    if (onnx_attr_int(c, "stash_type", 1) != 1)
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err,
                               "stash_type %lld is not supported (kiln computes in float32)",
                               (long long)onnx_attr_int(c, "stash_type", 1));
    return onnx_convert_simple(c, KILN_OP_LAYERNORM, "axis epsilon", err);
}

static kiln_status conv_flatten(onnx_ctx *c, kiln_error *err)
{
    return onnx_convert_simple(c, KILN_OP_FLATTEN, "axis", err);
}

/* Softmax, opset 13 on: normalises along one axis (default -1). */
static kiln_status conv_softmax13(onnx_ctx *c, kiln_error *err)
{
    return onnx_convert_simple(c, KILN_OP_SOFTMAX, "axis", err);
}

/* Softmax before opset 13 coerces the input to 2-D at `axis` (default 1) and
 * normalises each row: Flatten(axis) -> Softmax(-1) -> Reshape(original), or a
 * plain Softmax when axis is the last one. */
static kiln_status conv_softmax1(onnx_ctx *c, kiln_error *err)
{
    kiln_status s = onnx_no_outputs_from(c, 1, err);
    if (s != KILN_OK)
        return s;
    const kiln_value *x = onnx_need(c, 0, "input", err);
    if (!x)
        return err ? err->status : KILN_ERR_INVALID_GRAPH;
    int rank = x->shape.rank;
    int64_t axis = onnx_attr_int(c, "axis", 1);
    if (axis < -rank || axis > rank || rank == 0)
        return onnx_node_error(c, KILN_ERR_SHAPE_MISMATCH, err,
                               "axis %lld is out of range for rank %d", (long long)axis, rank);
    if (axis < 0)
        axis += rank;
    int in = x->id;
    if (axis == rank - 1) {
        int node = onnx_emit(c, KILN_OP_SOFTMAX, NULL, &in, 1, 1, err);
        if (node < 0 || kiln_node_set_int(c->g, node, "axis", -1) != KILN_OK)
            return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
        return onnx_bind(c, 0, kiln_graph_node_output(c->g, node, 0), err);
    }
    int flat = onnx_emit(c, KILN_OP_FLATTEN, "flatten", &in, 1, 1, err);
    if (flat < 0 || kiln_node_set_int(c->g, flat, "axis", axis) != KILN_OK)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    int fv = kiln_graph_node_output(c->g, flat, 0);
    int sm = onnx_emit(c, KILN_OP_SOFTMAX, "softmax", &fv, 1, 1, err);
    if (sm < 0 || kiln_node_set_int(c->g, sm, "axis", -1) != KILN_OK)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    int sv = kiln_graph_node_output(c->g, sm, 0);
    int rs = onnx_emit(c, KILN_OP_RESHAPE, NULL, &sv, 1, 1, err);
    if (rs < 0)
        return KILN_ERR_OUT_OF_MEMORY;
    s = kiln_node_set_ints(c->g, rs, "shape", x->shape.dims, rank);
    bool has_zero = false;
    for (int d = 0; d < rank; d++)
        has_zero |= x->shape.dims[d] == 0;
    if (s == KILN_OK && has_zero)
        s = kiln_node_set_int(c->g, rs, "allowzero", 1);
    if (s != KILN_OK)
        return kiln_errorf(err, s, "out of memory");
    return onnx_bind(c, 0, kiln_graph_node_output(c->g, rs, 0), err);
}

/* Dropout is the identity at inference; the mask output is not supported. */
static kiln_status conv_dropout(onnx_ctx *c, kiln_error *err)
{
    kiln_status s = onnx_no_outputs_from(c, 1, err);
    if (s != KILN_OK)
        return s;
    if (onnx_in(c, 2) >= 0) { /* training_mode, opset 12 on */
        double mode = 0;
        s = onnx_in_scalar(c, 2, "training_mode", &mode, err);
        if (s != KILN_OK)
            return s;
        if (mode != 0)
            return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err,
                                   "training_mode=true is not supported: kiln runs inference "
                                   "only");
    }
    const kiln_value *x = onnx_need(c, 0, "data", err);
    if (!x)
        return err ? err->status : KILN_ERR_INVALID_GRAPH;
    return onnx_bind(c, 0, x->id, err);
}

static kiln_status emit_reducemean(onnx_ctx *c, const int64_t *axes, int n_axes, kiln_error *err)
{
    kiln_status s = onnx_no_outputs_from(c, 1, err);
    if (s != KILN_OK)
        return s;
    const kiln_value *x = onnx_need(c, 0, "data", err);
    if (!x)
        return err ? err->status : KILN_ERR_INVALID_GRAPH;
    int in = x->id;
    int node = onnx_emit(c, KILN_OP_REDUCEMEAN, NULL, &in, 1, 1, err);
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

static kiln_status conv_reducemean1(onnx_ctx *c, kiln_error *err)
{
    const int64_t *axes = NULL;
    int n = onnx_attr_ints(c, "axes", &axes);
    return emit_reducemean(c, axes, n, err);
}

/* ReduceMean 18: axes is an optional input; empty with noop_with_empty_axes
 * is the identity. */
static kiln_status conv_reducemean18(onnx_ctx *c, kiln_error *err)
{
    const int64_t *axes = NULL;
    int n = -1;
    if (onnx_in(c, 1) >= 0) {
        kiln_status s = onnx_in_ints(c, 1, "axes", &axes, &n, err);
        if (s != KILN_OK)
            return s;
    }
    if (n <= 0 && onnx_attr_int(c, "noop_with_empty_axes", 0)) {
        const kiln_value *x = onnx_need(c, 0, "data", err);
        if (!x)
            return err ? err->status : KILN_ERR_INVALID_GRAPH;
        return onnx_bind(c, 0, x->id, err);
    }
    return emit_reducemean(c, axes, n > 0 ? n : -1, err);
}

#define POOL_ATTRS "auto_pad:string kernel_shape:ints pads:ints strides:ints"

const onnx_converter onnx_nn_converters[] = {
    {"Conv", 1, conv_conv,
     "auto_pad:string dilations:ints group:int kernel_shape:ints pads:ints strides:ints"},
    {"MaxPool", 1, conv_maxpool, POOL_ATTRS},
    {"MaxPool", 8, conv_maxpool, POOL_ATTRS " storage_order:int"},
    {"MaxPool", 10, conv_maxpool, POOL_ATTRS " storage_order:int ceil_mode:int dilations:ints"},
    {"AveragePool", 1, conv_averagepool, POOL_ATTRS},
    {"AveragePool", 7, conv_averagepool, POOL_ATTRS " count_include_pad:int"},
    {"AveragePool", 10, conv_averagepool, POOL_ATTRS " count_include_pad:int ceil_mode:int"},
    {"GlobalAveragePool", 1, conv_global_averagepool, ""},
    {"BatchNormalization", 1, conv_batchnorm,
     "consumed_inputs:ints epsilon:float is_test:int momentum:float spatial:int"},
    {"BatchNormalization", 7, conv_batchnorm, "epsilon:float momentum:float spatial:int"},
    {"BatchNormalization", 9, conv_batchnorm, "epsilon:float momentum:float"},
    {"BatchNormalization", 14, conv_batchnorm, "epsilon:float momentum:float training_mode:int"},
    {"Gemm", 1, conv_gemm, "alpha:float beta:float broadcast:int transA:int transB:int"},
    {"Gemm", 7, conv_gemm, "alpha:float beta:float transA:int transB:int"},
    {"MatMul", 1, conv_matmul, ""},
    {"LayerNormalization", 17, conv_layernorm, "axis:int epsilon:float stash_type:int"},
    {"Flatten", 1, conv_flatten, "axis:int"},
    {"Softmax", 1, conv_softmax1, "axis:int"},
    {"Softmax", 13, conv_softmax13, "axis:int"},
    {"Dropout", 1, conv_dropout, "consumed_inputs:ints is_test:int ratio:float"},
    {"Dropout", 7, conv_dropout, "ratio:float"},
    {"Dropout", 12, conv_dropout, "seed:int"},
    {"ReduceMean", 1, conv_reducemean1, "axes:ints keepdims:int"},
    {"ReduceMean", 18, conv_reducemean18, "keepdims:int noop_with_empty_axes:int"},
    {NULL, 0, NULL, NULL},
};
