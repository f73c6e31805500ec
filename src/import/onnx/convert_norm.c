/* import/onnx/convert_norm.c: converters for normalization and softmax-like
 * ops (BatchNormalization, LayerNormalization, Softmax). */
#include <string.h>

#include "import/onnx/onnx.h"
#include "util/error.h"

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
static kiln_status conv_layernorm(onnx_ctx *c, kiln_error *err)
{
    if (onnx_attr_int(c, "stash_type", 1) != 1)
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err,
                               "stash_type %lld is not supported (kiln computes in float32)",
                               (long long)onnx_attr_int(c, "stash_type", 1));
    return onnx_convert_simple(c, KILN_OP_LAYERNORM, "axis epsilon", err);
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
const onnx_converter onnx_norm_converters[] = {
    {"BatchNormalization", 1, conv_batchnorm,
     "consumed_inputs:ints epsilon:float is_test:int momentum:float spatial:int"},
    {"BatchNormalization", 7, conv_batchnorm, "epsilon:float momentum:float spatial:int"},
    {"BatchNormalization", 9, conv_batchnorm, "epsilon:float momentum:float"},
    {"BatchNormalization", 14, conv_batchnorm, "epsilon:float momentum:float training_mode:int"},
    {"LayerNormalization", 17, conv_layernorm, "axis:int epsilon:float stash_type:int"},
    {"Softmax", 1, conv_softmax1, "axis:int"},
    {"Softmax", 13, conv_softmax13, "axis:int"},
    {NULL, 0, NULL, NULL},
};
