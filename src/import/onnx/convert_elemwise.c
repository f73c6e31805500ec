/* import/onnx/convert_elemwise.c: converters for elementwise ops, Constant,
 * Identity and Cast. Binary arithmetic on two constants is folded; Equal,
 * Where and Cast exist only as folds (kiln has no comparison, select or
 * conversion op yet), which covers what exporters emit around shapes. */
#include <string.h>

#include "import/onnx/onnx.h"
#include "io/tensor_io.h"
#include "util/error.h"

/* Binds output 0 to a folded tensor, releasing it. */
static kiln_status bind_folded(onnx_ctx *c, kiln_status s, kiln_tensor *t, kiln_error *err)
{
    if (s != KILN_OK)
        return kiln_error_prefix(err, s, "node '%s' (%s, opset %lld): ", c->node_name,
                                 c->node->op_type, (long long)c->opset);
    s = onnx_bind_const(c, 0, t, err);
    kiln_tensor_release(t);
    return s;
}

static kiln_status binary(onnx_ctx *c, kiln_op op, onnx_binop bop, kiln_error *err)
{
    /* opset < 7: "broadcast" with an "axis" aligned B elsewhere than at the end */
    if (onnx_attr(c, "axis")) {
        const kiln_value *a = onnx_in_value(c, 0), *b = onnx_in_value(c, 1);
        int64_t axis = onnx_attr_int(c, "axis", 0);
        if (a && b && axis != a->shape.rank - b->shape.rank &&
            axis != -(int64_t)b->shape.rank)
            return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err,
                                   "legacy broadcasting with axis=%lld is not supported",
                                   (long long)axis);
    }
    if (onnx_in_const(c, 0) && onnx_in_const(c, 1)) {
        kiln_tensor a = onnx_value_tensor(onnx_in_value(c, 0));
        kiln_tensor b = onnx_value_tensor(onnx_in_value(c, 1));
        kiln_tensor r;
        kiln_status s = onnx_fold_binary(bop, &a, &b, &r, err);
        if (s == KILN_OK || s != KILN_ERR_UNSUPPORTED)
            return bind_folded(c, s, &r, err);
        /* too large to fold: compute it at run time */
    }
    return onnx_convert_simple(c, op, NULL, err);
}

static kiln_status conv_add(onnx_ctx *c, kiln_error *err)
{
    return binary(c, KILN_OP_ADD, ONNX_BIN_ADD, err);
}

static kiln_status conv_sub(onnx_ctx *c, kiln_error *err)
{
    return binary(c, KILN_OP_SUB, ONNX_BIN_SUB, err);
}

static kiln_status conv_mul(onnx_ctx *c, kiln_error *err)
{
    return binary(c, KILN_OP_MUL, ONNX_BIN_MUL, err);
}

static kiln_status conv_div(onnx_ctx *c, kiln_error *err)
{
    return binary(c, KILN_OP_DIV, ONNX_BIN_DIV, err);
}

static kiln_status conv_pow(onnx_ctx *c, kiln_error *err)
{
    return onnx_convert_simple(c, KILN_OP_POW, NULL, err);
}

static kiln_status conv_equal(onnx_ctx *c, kiln_error *err)
{
    if (!onnx_in_const(c, 0) || !onnx_in_const(c, 1))
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err,
                               "Equal is supported on constant inputs only (kiln has no "
                               "comparison op yet)");
    kiln_tensor a = onnx_value_tensor(onnx_in_value(c, 0));
    kiln_tensor b = onnx_value_tensor(onnx_in_value(c, 1));
    kiln_tensor r;
    kiln_status s = onnx_fold_binary(ONNX_BIN_EQUAL, &a, &b, &r, err);
    return bind_folded(c, s, &r, err);
}

static kiln_status conv_where(onnx_ctx *c, kiln_error *err)
{
    if (!onnx_in_const(c, 0) || !onnx_in_const(c, 1) || !onnx_in_const(c, 2))
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err,
                               "Where is supported on constant inputs only (kiln has no select "
                               "op yet)");
    kiln_tensor k = onnx_value_tensor(onnx_in_value(c, 0));
    kiln_tensor x = onnx_value_tensor(onnx_in_value(c, 1));
    kiln_tensor y = onnx_value_tensor(onnx_in_value(c, 2));
    kiln_tensor r;
    kiln_status s = onnx_fold_where(&k, &x, &y, &r, err);
    return bind_folded(c, s, &r, err);
}

static kiln_status conv_cast(onnx_ctx *c, kiln_error *err)
{
    const kiln_value *x = onnx_need(c, 0, "input", err);
    if (!x)
        return err ? err->status : KILN_ERR_INVALID_GRAPH;
    int64_t to_onnx = onnx_attr_int(c, "to", 0);
    kiln_dtype to = (to_onnx > 0 && to_onnx < 64) ? kiln_dtype_from_onnx((int32_t)to_onnx)
                                                   : KILN_DTYPE_UNDEFINED;
    if (to == KILN_DTYPE_UNDEFINED)
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err,
                               "cast to ONNX type %lld is not supported", (long long)to_onnx);
    if (x->dtype == to)
        return onnx_bind(c, 0, x->id, err);
    if (!onnx_in_const(c, 0))
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err,
                               "Cast of a non-constant input (%s to %s) is not supported yet",
                               kiln_dtype_name(x->dtype), kiln_dtype_name(to));
    kiln_tensor t = onnx_value_tensor(x), r;
    kiln_status s = onnx_fold_cast(&t, to, &r, err);
    return bind_folded(c, s, &r, err);
}

static kiln_status conv_identity(onnx_ctx *c, kiln_error *err)
{
    const kiln_value *x = onnx_need(c, 0, "input", err);
    if (!x)
        return err ? err->status : KILN_ERR_INVALID_GRAPH;
    return onnx_bind(c, 0, x->id, err);
}

static kiln_status conv_constant(onnx_ctx *c, kiln_error *err)
{
    static const char *const keys[] = {"value",      "value_float",  "value_floats",
                                       "value_int",  "value_ints",   "value_string",
                                       "value_strings", "sparse_value"};
    const Onnx__AttributeProto *a = NULL;
    int which = -1;
    for (int i = 0; i < 8; i++) {
        const Onnx__AttributeProto *x = onnx_attr(c, keys[i]);
        if (!x)
            continue;
        if (a)
            return onnx_node_error(c, KILN_ERR_PARSE, err,
                                   "both '%s' and '%s' are set: a Constant has one value",
                                   keys[which], keys[i]);
        a = x;
        which = i;
    }
    if (!a)
        return onnx_node_error(c, KILN_ERR_PARSE, err, "no value attribute");
    kiln_tensor t = {0};
    kiln_status s = KILN_OK;
    switch (which) {
    case 0:
        if (!a->t)
            return onnx_node_error(c, KILN_ERR_PARSE, err, "attribute 'value' holds no tensor");
        s = onnx_tensor_load(c, a->t, &t, err);
        if (s != KILN_OK)
            return kiln_error_prefix(err, s, "node '%s' (Constant, opset %lld): ", c->node_name,
                                     (long long)c->opset);
        break;
    case 1:
    case 2: {
        size_t n = which == 1 ? 1 : a->n_floats;
        kiln_shape sh = {.rank = which == 1 ? 0 : 1, .dims = {(int64_t)n}};
        s = kiln_tensor_alloc(&t, KILN_DTYPE_FLOAT32, &sh, err);
        if (s == KILN_OK && n)
            memcpy(t.data, which == 1 ? &a->f : a->floats, n * sizeof(float));
        break;
    }
    case 3:
    case 4: {
        size_t n = which == 3 ? 1 : a->n_ints;
        kiln_shape sh = {.rank = which == 3 ? 0 : 1, .dims = {(int64_t)n}};
        s = kiln_tensor_alloc(&t, KILN_DTYPE_INT64, &sh, err);
        if (s == KILN_OK && n)
            memcpy(t.data, which == 3 ? &a->i : a->ints, n * sizeof(int64_t));
        break;
    }
    default:
        return onnx_node_error(c, KILN_ERR_UNSUPPORTED, err,
                               "'%s' constants are not supported (kiln has no string or sparse "
                               "tensors)",
                               keys[which]);
    }
    if (s != KILN_OK)
        return s;
    int id = onnx_add_const(c, c->node->n_output ? c->node->output[0] : c->node_name, &t, err);
    kiln_tensor_release(&t);
    if (id < 0)
        return err ? err->status : KILN_ERR_OUT_OF_MEMORY;
    return onnx_bind(c, 0, id, err);
}

static kiln_status conv_relu(onnx_ctx *c, kiln_error *err)
{
    return onnx_convert_simple(c, KILN_OP_RELU, NULL, err);
}

static kiln_status conv_sigmoid(onnx_ctx *c, kiln_error *err)
{
    return onnx_convert_simple(c, KILN_OP_SIGMOID, NULL, err);
}

static kiln_status conv_erf(onnx_ctx *c, kiln_error *err)
{
    return onnx_convert_simple(c, KILN_OP_ERF, NULL, err);
}

static kiln_status conv_sqrt(onnx_ctx *c, kiln_error *err)
{
    return onnx_convert_simple(c, KILN_OP_SQRT, NULL, err);
}

static kiln_status conv_hardsigmoid(onnx_ctx *c, kiln_error *err)
{
    return onnx_convert_simple(c, KILN_OP_HARDSIGMOID, "alpha beta", err);
}

static kiln_status conv_hardswish(onnx_ctx *c, kiln_error *err)
{
    return onnx_convert_simple(c, KILN_OP_HARDSWISH, NULL, err);
}

/* Clip before opset 11: min/max attributes, as in kiln. */
static kiln_status conv_clip6(onnx_ctx *c, kiln_error *err)
{
    return onnx_convert_simple(c, KILN_OP_CLIP, "min max", err);
}

/* Clip from opset 11: min and max are optional constant inputs. */
static kiln_status conv_clip11(onnx_ctx *c, kiln_error *err)
{
    kiln_status s = onnx_no_outputs_from(c, 1, err);
    if (s != KILN_OK)
        return s;
    const kiln_value *x = onnx_need(c, 0, "input", err);
    if (!x)
        return err ? err->status : KILN_ERR_INVALID_GRAPH;
    double lo = 0, hi = 0;
    bool has_lo = onnx_in(c, 1) >= 0, has_hi = onnx_in(c, 2) >= 0;
    if (has_lo && (s = onnx_in_scalar(c, 1, "min", &lo, err)) != KILN_OK)
        return s;
    if (has_hi && (s = onnx_in_scalar(c, 2, "max", &hi, err)) != KILN_OK)
        return s;
    int in = x->id;
    int node = onnx_emit(c, KILN_OP_CLIP, NULL, &in, 1, 1, err);
    if (node < 0)
        return KILN_ERR_OUT_OF_MEMORY;
    if (has_lo)
        s = kiln_node_set_float(c->g, node, "min", (float)lo);
    if (s == KILN_OK && has_hi)
        s = kiln_node_set_float(c->g, node, "max", (float)hi);
    if (s != KILN_OK)
        return kiln_errorf(err, s, "out of memory");
    return onnx_bind(c, 0, kiln_graph_node_output(c->g, node, 0), err);
}

#define LEGACY_BINARY "axis:int broadcast:int"
#define LEGACY_UNARY "consumed_inputs:ints"

const onnx_converter onnx_elemwise_converters[] = {
    {"Add", 1, conv_add, LEGACY_BINARY " consumed_inputs:ints"},
    {"Add", 6, conv_add, LEGACY_BINARY},
    {"Add", 7, conv_add, ""},
    {"Sub", 1, conv_sub, LEGACY_BINARY " consumed_inputs:ints"},
    {"Sub", 6, conv_sub, LEGACY_BINARY},
    {"Sub", 7, conv_sub, ""},
    {"Mul", 1, conv_mul, LEGACY_BINARY " consumed_inputs:ints"},
    {"Mul", 6, conv_mul, LEGACY_BINARY},
    {"Mul", 7, conv_mul, ""},
    {"Div", 1, conv_div, LEGACY_BINARY " consumed_inputs:ints"},
    {"Div", 6, conv_div, LEGACY_BINARY},
    {"Div", 7, conv_div, ""},
    {"Pow", 7, conv_pow, ""},
    {"Equal", 7, conv_equal, ""},
    {"Where", 9, conv_where, ""},
    {"Cast", 6, conv_cast, "to:int"},
    {"Identity", 1, conv_identity, ""},
    {"Constant", 1, conv_constant, "value:tensor"},
    {"Constant", 12, conv_constant,
     "value:tensor value_float:float value_floats:floats value_int:int value_ints:ints "
     "value_string:string value_strings:strings sparse_value:sparse_tensor"},
    {"Relu", 1, conv_relu, LEGACY_UNARY},
    {"Relu", 6, conv_relu, ""},
    {"Sigmoid", 1, conv_sigmoid, LEGACY_UNARY},
    {"Sigmoid", 6, conv_sigmoid, ""},
    {"Erf", 9, conv_erf, ""},
    {"Sqrt", 1, conv_sqrt, LEGACY_UNARY},
    {"Sqrt", 6, conv_sqrt, ""},
    {"HardSigmoid", 1, conv_hardsigmoid, "alpha:float beta:float " LEGACY_UNARY},
    {"HardSigmoid", 6, conv_hardsigmoid, "alpha:float beta:float"},
    {"HardSwish", 14, conv_hardswish, ""},
    {"Clip", 1, conv_clip6, "min:float max:float " LEGACY_UNARY},
    {"Clip", 6, conv_clip6, "min:float max:float"},
    {"Clip", 11, conv_clip11, ""},
    {NULL, 0, NULL, NULL},
};
