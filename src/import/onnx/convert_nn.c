/* import/onnx/convert_nn.c: converters for the neural-network ops:
 * convolution, pooling, dense layers, dropout and flatten. kiln's attributes carry ONNX's names, so most of
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

static kiln_status conv_gemm(onnx_ctx *c, kiln_error *err)
{
    /* opset < 7 "broadcast" only allowed C to broadcast, which kiln always does */
    return onnx_convert_simple(c, KILN_OP_GEMM, "alpha beta transA transB", err);
}

static kiln_status conv_matmul(onnx_ctx *c, kiln_error *err)
{
    return onnx_convert_simple(c, KILN_OP_MATMUL, NULL, err);
}

static kiln_status conv_flatten(onnx_ctx *c, kiln_error *err)
{
    return onnx_convert_simple(c, KILN_OP_FLATTEN, "axis", err);
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
    {"Gemm", 1, conv_gemm, "alpha:float beta:float broadcast:int transA:int transB:int"},
    {"Gemm", 7, conv_gemm, "alpha:float beta:float transA:int transB:int"},
    {"MatMul", 1, conv_matmul, ""},
    {"Flatten", 1, conv_flatten, "axis:int"},
    {"Dropout", 1, conv_dropout, "consumed_inputs:ints is_test:int ratio:float"},
    {"Dropout", 7, conv_dropout, "ratio:float"},
    {"Dropout", 12, conv_dropout, "seed:int"},
    {NULL, 0, NULL, NULL},
};
