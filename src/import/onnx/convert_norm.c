/* import/onnx/convert_norm.c: converters for the normalization, softmax and
 * loss ops (BatchNormalization, LayerNormalization, InstanceNormalization,
 * LRN, MeanVarianceNormalization, LpNormalization, Softmax, LogSoftmax,
 * Hardmax, NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss). Most map one
 * to one onto the kiln op of the same name; the softmax family before opset
 * 13 coerces its input to 2-D at `axis` and becomes Flatten -> op -> Reshape;
 * ops with optional outputs (LayerNormalization's Mean and InvStdDev,
 * SoftmaxCrossEntropyLoss's log_prob) get as many kiln outputs as the node
 * names. */
#include <string.h>

#include "import/onnx/convert_composite.h"
#include "import/onnx/onnx.h"
#include "util/error.h"

static kiln_status conv_batchnorm(onnx_ctx *c, kiln_error *err)
{
    if (onnx_attr_int(c, "spatial", 1) != 1)
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err,
                               "spatial=0 (per-activation statistics) is not supported");
    if (onnx_attr_int(c, "training_mode", 0) != 0)
        return onnx_convert_batchnorm_training(c, err); /* batch statistics, as kiln ops */
    /* is_test, momentum and consumed_inputs do not affect inference */
    return onnx_convert_simple(c, KILN_OP_BATCHNORM, "epsilon", err);
}
/* One kiln node `op` taking the ONNX node's inputs in order, with up to
 * `max_out` outputs: as many as the ONNX node lists, each requested one
 * bound. */
static kiln_status convert_multi(onnx_ctx *c, kiln_op op, const char *attrs, int max_out,
                                 kiln_error *err)
{
    kiln_status s = onnx_no_outputs_from(c, max_out, err);
    if (s != KILN_OK)
        return s;
    int n = onnx_n_in(c), ins[8];
    if (n > 8)
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err, "%d inputs", n);
    for (int k = 0; k < n; k++)
        ins[k] = onnx_in(c, k);
    int n_out = onnx_n_out(c);
    if (n_out < 1)
        n_out = 1;
    if (n_out > max_out)
        n_out = max_out;
    int node = onnx_emit(c, op, NULL, ins, n, n_out, err);
    if (node < 0)
        return KILN_ERR_OUT_OF_MEMORY;
    if ((s = onnx_copy_attrs(c, node, attrs, err)) != KILN_OK)
        return s;
    for (int k = 0; k < n_out; k++)
        if ((k == 0 || onnx_out_used(c, k)) &&
            (s = onnx_bind(c, k, kiln_graph_node_output(c->g, node, k), err)) != KILN_OK)
            return s;
    return KILN_OK;
}
static kiln_status conv_layernorm(onnx_ctx *c, kiln_error *err)
{
    if (onnx_attr_int(c, "stash_type", 1) != 1)
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err,
                               "stash_type %lld is not supported (kiln computes in float32)",
                               (long long)onnx_attr_int(c, "stash_type", 1));
    return convert_multi(c, KILN_OP_LAYERNORM, "axis epsilon", 3, err);
}
/* Softmax, LogSoftmax, Hardmax from opset 13 on: along one axis (default -1). */
CONV_SIMPLE(conv_softmax13, KILN_OP_SOFTMAX, "axis")
CONV_SIMPLE(conv_logsoftmax13, KILN_OP_LOGSOFTMAX, "axis")
CONV_SIMPLE(conv_hardmax13, KILN_OP_HARDMAX, "axis")
/* The softmax family before opset 13 coerces the input to 2-D at `axis`
 * (default 1) and works on each row: Flatten(axis) -> op(-1) ->
 * Reshape(original), or a plain op(-1) when axis is the last one. */
static kiln_status coerce_2d(onnx_ctx *c, kiln_op op, kiln_error *err)
{
    const kiln_value *x;
    kiln_status s = onnx_need_in0(c, "input", &x, err);
    if (s != KILN_OK)
        return s;
    int rank = x->shape.rank;
    int64_t axis = onnx_attr_int(c, "axis", 1);
    if (axis < -rank || axis > rank || rank == 0)
        return onnx_node_error(c, KILN_ERR_SHAPE_MISMATCH, err,
                               "axis %lld is out of range for rank %d", (long long)axis, rank);
    if (axis < 0)
        axis += rank;
    int in = x->id;
    if (axis == rank - 1) {
        kiln_attr a = onnx_attr_i("axis", -1);
        return onnx_emit_bind(c, op, &in, 1, &a, 1, NULL, 1, err);
    }
    int flat = onnx_emit(c, KILN_OP_FLATTEN, "flatten", &in, 1, 1, err);
    if (flat < 0 || kiln_node_set_int(c->g, flat, "axis", axis) != KILN_OK)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    int fv = kiln_graph_node_output(c->g, flat, 0);
    const char *suffix = op == KILN_OP_SOFTMAX      ? "softmax"
                         : op == KILN_OP_LOGSOFTMAX ? "logsoftmax"
                                                    : "hardmax";
    int sm = onnx_emit(c, op, suffix, &fv, 1, 1, err);
    if (sm < 0 || kiln_node_set_int(c->g, sm, "axis", -1) != KILN_OK)
        return kiln_errorf(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    return onnx_emit_reshape(c, kiln_graph_node_output(c->g, sm, 0), &x->shape, err);
}
static kiln_status conv_softmax1(onnx_ctx *c, kiln_error *err)
{
    return coerce_2d(c, KILN_OP_SOFTMAX, err);
}
static kiln_status conv_logsoftmax1(onnx_ctx *c, kiln_error *err)
{
    return coerce_2d(c, KILN_OP_LOGSOFTMAX, err);
}
static kiln_status conv_hardmax1(onnx_ctx *c, kiln_error *err)
{
    return coerce_2d(c, KILN_OP_HARDMAX, err);
}
/* consumed_inputs (opset 1) is a legacy optimization hint */
CONV_SIMPLE(conv_instancenorm, KILN_OP_INSTANCENORM, "epsilon")
CONV_SIMPLE(conv_lrn, KILN_OP_LRN, "alpha beta bias size")
CONV_SIMPLE(conv_mvn, KILN_OP_MVN, "axes")
CONV_SIMPLE(conv_lpnorm, KILN_OP_LPNORM, "axis p")
CONV_SIMPLE(conv_nllloss, KILN_OP_NLLLOSS, "ignore_index reduction")
static kiln_status conv_sceloss(onnx_ctx *c, kiln_error *err)
{
    return convert_multi(c, KILN_OP_SCELOSS, "ignore_index reduction", 2, err);
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
    {"LogSoftmax", 1, conv_logsoftmax1, "axis:int"},
    {"LogSoftmax", 13, conv_logsoftmax13, "axis:int"},
    {"Hardmax", 1, conv_hardmax1, "axis:int"},
    {"Hardmax", 13, conv_hardmax13, "axis:int"},
    {"InstanceNormalization", 1, conv_instancenorm, "consumed_inputs:ints epsilon:float"},
    {"InstanceNormalization", 6, conv_instancenorm, "epsilon:float"},
    {"LRN", 1, conv_lrn, "alpha:float beta:float bias:float size:int"},
    {"MeanVarianceNormalization", 9, conv_mvn, "axes:ints"},
    {"LpNormalization", 1, conv_lpnorm, "axis:int p:int"},
    {"NegativeLogLikelihoodLoss", 12, conv_nllloss, "ignore_index:int reduction:string"},
    {"SoftmaxCrossEntropyLoss", 12, conv_sceloss, "ignore_index:int reduction:string"},
    {NULL, 0, NULL, NULL},
};
